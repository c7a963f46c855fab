"""``summary_iterator(path)``: the ``Event`` protos of an event file, as TF's
``tf.compat.v1.train.summary_iterator``.

An event file is a sequence of TFRecords (see ``event_file_writer``); each
record's length and data are checked against their masked CRC32C, and a
record that fails the check, or is cut short, raises ``DataLossError`` (as
TF's record reader does).

>>> import tempfile
>>> import nbdist as nd
>>> d = tempfile.mkdtemp()
>>> with nd.summary.FileWriter(d) as w:
...     w.add_summary(nd.summary.Summary(value=[
...         nd.summary.Summary.Value(tag="loss", simple_value=0.5)]), 7)
>>> import glob
>>> [(e.step, e.summary.value[0].simple_value)
...  for e in nd.train.summary_iterator(glob.glob(d + "/events.*")[0])
...  if e.HasField("summary")]
[(7, 0.5)]
"""

from __future__ import annotations

import struct

from nbdist import errors
from nbdist.proto import summary_pb2
from nbdist.train.event_file_writer import masked_crc32c


def tf_record_iterator(path):
    """The raw records (``bytes``) of the TFRecord file at ``path``."""
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise errors.DataLossError(
                    None, None, f"truncated record at {f.tell() - len(header)} "
                    f"in {path}")
            (length,) = struct.unpack("<Q", header[:8])
            (length_crc,) = struct.unpack("<I", header[8:])
            if masked_crc32c(header[:8]) != length_crc:
                raise errors.DataLossError(
                    None, None, f"corrupted record at {f.tell() - 12} in {path}: "
                    "the length's checksum does not match")
            data = f.read(length)
            footer = f.read(4)
            if len(data) < length or len(footer) < 4:
                raise errors.DataLossError(
                    None, None, f"truncated record in {path}: {length} bytes "
                    f"announced, {len(data)} read")
            if masked_crc32c(data) != struct.unpack("<I", footer)[0]:
                raise errors.DataLossError(
                    None, None, f"corrupted record in {path}: the data's checksum "
                    "does not match")
            yield data


def summary_iterator(path):
    """Yields each ``Event`` (``nd.summary.Event``) of the event file ``path``,
    the ``file_version`` event first."""
    for record in tf_record_iterator(path):
        yield summary_pb2.Event.FromString(record)


__all__ = ["summary_iterator", "tf_record_iterator"]
