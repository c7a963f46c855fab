"""``nd.data.TFRecordDataset`` and ``nd.data.TextLineDataset``: the records or
lines of files as a dataset of string scalars.

>>> import os, tempfile
>>> import nbdist as nd
>>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
>>> with open(path, "w") as f:
...     _ = f.write("one\\ntwo\\n")
>>> nxt = nd.data.TextLineDataset(path).make_one_shot_iterator().get_next()
>>> with nd.Session() as s:
...     [s.run(nxt) for _ in range(2)]
[b'one', b'two']

Files are read in order, each whole when it is reached, on the task of the
iterator (see ``data_ops``); a corrupted TFRecord is a ``DataLossError``.
"""

from __future__ import annotations

from nbdist.distribute.data.data_ops import Dataset, _graph, _scalar
from nbdist.distribute.tracing.tensor_spec import TensorSpec
from nbdist.framework import dtypes
from nbdist.framework.func_graph import register_copyable_op
from nbdist.framework.ops import convert_to_tensor
from nbdist.ops.io_ops import FILE_DATASET_OPS, _compression_name

for _t in FILE_DATASET_OPS:
    register_copyable_op(_t)


class _FileDataset(Dataset):
    _OP_TYPE = ""

    def __init__(self, filenames, compression_type=None, buffer_size=None,
                 num_parallel_reads=None, name=None):
        if isinstance(filenames, Dataset):
            raise TypeError(f"{type(self).__name__}: filenames must be a string "
                            "tensor or list; a Dataset of filenames is not "
                            "supported (interleave is not in nd.data)")
        g = _graph()
        with g.as_default():
            files = convert_to_tensor(filenames, dtype=dtypes.string,
                                      name="filenames")
        if files.shape.rank not in (None, 0, 1):
            raise ValueError(f"{type(self).__name__}: filenames must be a string "
                             f"scalar or vector, got shape {files.shape}")
        ins = [files,
               _scalar(g, _compression_name(compression_type), dtypes.string,
                       "compression_type"),
               _scalar(g, -1 if buffer_size is None else buffer_size, dtypes.int64,
                       "buffer_size")]
        op = g.create_op(self._OP_TYPE, ins, {}, name=name or self._OP_TYPE)
        super().__init__(op.outputs[0], TensorSpec([], dtypes.string))


class TFRecordDataset(_FileDataset):
    """The records of TFRecord files (``compression_type``: "", "ZLIB" or
    "GZIP"). ``buffer_size`` and ``num_parallel_reads`` are accepted and
    ignored (files are read whole, one after another)."""

    _OP_TYPE = "TFRecordDataset"


class TextLineDataset(_FileDataset):
    """The lines of text files, without their newlines."""

    _OP_TYPE = "TextLineDataset"


class FixedLengthRecordDataset(Dataset):
    """The ``record_bytes``-long records of binary files (after a header of
    ``header_bytes`` and before a footer of ``footer_bytes``) as string
    scalars; a body that is not a whole number of records is TF's
    ``InvalidArgumentError``. ``buffer_size`` and ``num_parallel_reads`` are
    accepted and ignored.

    >>> import os, tempfile
    >>> import nbdist as nd
    >>> path = os.path.join(tempfile.mkdtemp(), "recs.bin")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"Habcdef")
    >>> nxt = nd.data.FixedLengthRecordDataset(
    ...     path, 3, header_bytes=1).make_one_shot_iterator().get_next()
    >>> with nd.Session() as s:
    ...     [s.run(nxt) for _ in range(2)]
    [b'abc', b'def']
    """

    def __init__(self, filenames, record_bytes, header_bytes=None, footer_bytes=None,
                 buffer_size=None, compression_type=None, num_parallel_reads=None,
                 name=None):
        g = _graph()
        with g.as_default():
            files = convert_to_tensor(filenames, dtype=dtypes.string,
                                      name="filenames")
        ins = [files] + [_scalar(g, 0 if v is None else v, dtypes.int64, n)
                         for n, v in (("header_bytes", header_bytes),
                                      ("record_bytes", record_bytes),
                                      ("footer_bytes", footer_bytes),
                                      ("buffer_size", buffer_size))]
        ins.append(_scalar(g, _compression_name(compression_type), dtypes.string,
                           "compression_type"))
        op = g.create_op("FixedLengthRecordDatasetV2", ins, {},
                         name=name or "FixedLengthRecordDataset")
        super().__init__(op.outputs[0], TensorSpec([], dtypes.string))


__all__ = ["FixedLengthRecordDataset", "TFRecordDataset", "TextLineDataset"]
