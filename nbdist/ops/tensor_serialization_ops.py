"""Tensors and sparse tensors as strings (TF's ``tf.io``): ``serialize_tensor``
/ ``parse_tensor`` (a ``TensorProto``), ``decode_compressed`` (ZLIB, GZIP) and ``decode_json_example`` (JSON ``Example``s to their binary form).

>>> import nbdist as nd
>>> s = nd.io.serialize_tensor(nd.constant([[1, 2]]))
>>> with nd.Session() as sess:
...     sess.run(nd.io.parse_tensor(s, nd.int32)).tolist()
[[1, 2]]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.string_ops import _strings_in


def _scalar_string(c):
    return [(dtypes.string, TensorShape([]))]


register_op("SerializeTensor", _scalar_string, attrs={"T": ("type", None)},
            num_inputs=1)
register_op("ParseTensor", lambda c: (_strings_in(c, 0),
                                      [(c.attr("out_type"), TensorShape(None))])[1],
            attrs={"out_type": ("type", REQUIRED)}, num_inputs=1)
register_op("DecodeCompressed",
            lambda c: (_strings_in(c, 0), [(dtypes.string, c.shape(0))])[1],
            attrs={"compression_type": ("string", "")}, num_inputs=1)
register_op("DecodeJSONExample",
            lambda c: (_strings_in(c, 0), [(dtypes.string, c.shape(0))])[1],
            num_inputs=1)
for _t in ("SerializeTensor", "ParseTensor", "DecodeCompressed", "DecodeJSONExample"):
    NotDifferentiable(_t)


def serialize_tensor(tensor, name=None):
    """``tensor`` as a serialized ``TensorProto`` (a string scalar)."""
    with op_scope(name, "SerializeTensor", [tensor]) as (g, scope):
        t = convert_to_tensor(tensor, name="tensor")
        return g.create_op("SerializeTensor", [t], {"T": t.dtype.base_dtype},
                           name=scope).outputs[0]


def parse_tensor(serialized, out_type, name=None):
    """The tensor a serialized ``TensorProto`` holds; its dtype must be
    ``out_type``."""
    with op_scope(name, "ParseTensor", [serialized]) as (g, scope):
        s = convert_to_tensor(serialized, dtype=dtypes.string, name="serialized")
        return g.create_op("ParseTensor", [s],
                           {"out_type": dtypes.as_dtype(out_type)},
                           name=scope).outputs[0]


def decode_compressed(bytes, compression_type="", name=None):  # noqa: A002
    """Each string decompressed (``compression_type`` "", "ZLIB" or "GZIP")."""
    if compression_type not in ("", "ZLIB", "GZIP"):
        raise ValueError(f"decode_compressed: compression_type must be '', 'ZLIB' "
                         f"or 'GZIP', got {compression_type!r}")
    with op_scope(name, "DecodeCompressed", [bytes]) as (g, scope):
        s = convert_to_tensor(bytes, dtype=dtypes.string, name="bytes")
        return g.create_op("DecodeCompressed", [s],
                           {"compression_type": compression_type},
                           name=scope).outputs[0]


def decode_json_example(json_examples, name=None):
    """Each ``Example`` written in JSON (protobuf's JSON mapping) as the binary
    string ``parse_example`` reads."""
    with op_scope(name, "DecodeJSONExample", [json_examples]) as (g, scope):
        s = convert_to_tensor(json_examples, dtype=dtypes.string,
                              name="json_examples")
        return g.create_op("DecodeJSONExample", [s], {}, name=scope).outputs[0]


__all__ = ["decode_compressed", "decode_json_example", "parse_tensor",
           "serialize_tensor"]
