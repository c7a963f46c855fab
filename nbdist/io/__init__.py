"""``nd.io``: TFRecord files and Example parsing (TF's ``tf.io`` names).

``nd.io.gfile`` is TF2's lower-case file API (``exists``, ``glob``, ``makedirs``...).

>>> import nbdist as nd
>>> ex = nd.train.Example(features=nd.train.Features(feature={
...     "x": nd.train.Feature(float_list=nd.train.FloatList(value=[1.5]))}))
>>> parsed = nd.io.parse_single_example(
...     ex.SerializeToString(), {"x": nd.io.FixedLenFeature([], nd.float32)})
>>> with nd.Session() as s:
...     float(s.run(parsed["x"]))
1.5
"""

from __future__ import annotations

from nbdist.executor.tf_record import (
    TFRecordCompressionType,
    TFRecordOptions,
    TFRecordWriter,
    tf_record_iterator,
)
from nbdist.ops.parsing_ops import (
    FixedLenFeature,
    FixedLenSequenceFeature,
    VarLenFeature,
    decode_csv,
    decode_raw,
    parse_example,
    parse_single_example,
    parse_single_sequence_example,
)
from nbdist.ops.io_ops import read_file, write_file
from nbdist.io import gfile

__all__ = ["FixedLenFeature", "FixedLenSequenceFeature", "TFRecordCompressionType",
           "TFRecordOptions", "TFRecordWriter", "VarLenFeature", "decode_csv",
           "decode_raw", "gfile", "parse_example", "parse_single_example",
           "parse_single_sequence_example", "read_file",
           "tf_record_iterator", "write_file"]
