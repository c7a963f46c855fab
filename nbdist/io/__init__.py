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
    SparseFeature,
    VarLenFeature,
    decode_csv,
    decode_raw,
    parse_example,
    parse_sequence_example,
    parse_single_example,
    parse_single_sequence_example,
)
from nbdist.ops.io_ops import read_file, write_file
from nbdist.io import gfile

__all__ = ["FixedLenFeature", "FixedLenSequenceFeature", "SparseFeature",
           "TFRecordCompressionType",
           "TFRecordOptions", "TFRecordWriter", "VarLenFeature", "decode_csv",
           "decode_raw", "gfile", "parse_example", "parse_sequence_example",
           "parse_single_example",
           "parse_single_sequence_example", "read_file",
           "tf_record_iterator", "write_file"]

# Queues, base64 and file matching live elsewhere in nbdist; tf.io names them too.
from nbdist.ops.data_flow_ops import (  # noqa: E402
    FIFOQueue,
    PaddingFIFOQueue,
    PriorityQueue,
    QueueBase,
    RandomShuffleQueue,
    matching_files,
)
from nbdist.ops.string_ops import decode_base64, encode_base64  # noqa: E402
from nbdist.train.graph_io import write_graph  # noqa: E402
from nbdist.train.input import match_filenames_once  # noqa: E402
from nbdist.ops.sparse_ops_serialize import (  # noqa: E402
    deserialize_many_sparse,
    serialize_many_sparse,
    serialize_sparse,
)
from nbdist.ops.tensor_serialization_ops import (  # noqa: E402
    decode_compressed,
    decode_json_example,
    parse_tensor,
    serialize_tensor,
)

__all__ += ["FIFOQueue", "PaddingFIFOQueue", "PriorityQueue", "QueueBase",
            "RandomShuffleQueue",
            "decode_base64", "decode_compressed", "decode_json_example",
            "deserialize_many_sparse", "encode_base64", "match_filenames_once",
            "parse_tensor", "serialize_many_sparse", "serialize_sparse",
            "serialize_tensor",
            "matching_files", "write_graph"]

# tf.io's image codecs are nd.image's (decode_png, encode_jpeg ...): forwarded,
# so that each one nd.image has appears here too.
_IMAGE_CODECS = ("decode_and_crop_jpeg", "decode_bmp", "decode_gif", "decode_image",
                 "decode_jpeg", "decode_png", "decode_webp", "encode_jpeg",
                 "encode_png", "extract_jpeg_shape", "is_jpeg")


def __getattr__(name):
    if name in _IMAGE_CODECS:
        import nbdist.image

        try:
            return getattr(nbdist.image, name)
        except AttributeError:
            pass
    raise AttributeError(f"module 'nbdist.io' has no attribute '{name}'")

from nbdist.ops.proto_ops import decode_proto, encode_proto  # noqa: E402

__all__ += ["decode_proto", "encode_proto"]
