"""Tensors and sparse tensors as strings (TF's ``tf.io``): ``serialize_tensor``
/ ``parse_tensor`` (a ``TensorProto``), ``serialize_sparse`` /
``serialize_many_sparse`` / ``deserialize_many_sparse`` (rows of three
``TensorProto`` strings: indices, values, shape), ``decode_compressed`` (ZLIB,
GZIP) and ``decode_json_example`` (JSON ``Example``s to their binary form).

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
from nbdist.framework.sparse_tensor import SparseTensor, SparseTensorValue
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.string_ops import _strings_in


def _scalar_string(c):
    return [(dtypes.string, TensorShape([]))]


register_op("SerializeTensor", _scalar_string, attrs={"T": ("type", None)},
            num_inputs=1)
register_op("ParseTensor", lambda c: (_strings_in(c, 0),
                                      [(c.attr("out_type"), TensorShape(None))])[1],
            attrs={"out_type": ("type", REQUIRED)}, num_inputs=1)
register_op("SerializeSparse",
            lambda c: [(c.attr("out_type"), TensorShape([3]))],
            attrs={"T": ("type", None), "out_type": ("type", dtypes.string)},
            num_inputs=3)
register_op("SerializeManySparse",
            lambda c: [(c.attr("out_type"), TensorShape([None, 3]))],
            attrs={"T": ("type", None), "out_type": ("type", dtypes.string)},
            num_inputs=3)


def _deserialize_infer(c):
    _strings_in(c, 0)
    return [(dtypes.int64, TensorShape([None, None])),
            (c.attr("dtype"), TensorShape([None])), (dtypes.int64, TensorShape([None]))]


register_op("DeserializeManySparse", _deserialize_infer,
            attrs={"dtype": ("type", REQUIRED)}, num_inputs=1)
register_op("DecodeCompressed",
            lambda c: (_strings_in(c, 0), [(dtypes.string, c.shape(0))])[1],
            attrs={"compression_type": ("string", "")}, num_inputs=1)
register_op("DecodeJSONExample",
            lambda c: (_strings_in(c, 0), [(dtypes.string, c.shape(0))])[1],
            num_inputs=1)
for _t in ("SerializeTensor", "ParseTensor", "SerializeSparse", "SerializeManySparse",
           "DeserializeManySparse", "DecodeCompressed", "DecodeJSONExample"):
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


def _sparse(sp_input):
    if isinstance(sp_input, SparseTensorValue):
        sp_input = SparseTensor.from_value(sp_input)
    if not isinstance(sp_input, SparseTensor):
        raise TypeError(f"Input must be a SparseTensor, got {type(sp_input).__name__}")
    return sp_input


def _serialize(op_type, sp_input, name, out_type):
    sp = _sparse(sp_input)
    g = sp.values.graph
    with g.as_default():
        return g.create_op(op_type, [sp.indices, sp.values, sp.dense_shape],
                           {"T": sp.values.dtype.base_dtype,
                            "out_type": dtypes.as_dtype(out_type)},
                           name=name or op_type).outputs[0]


def serialize_sparse(sp_input, name=None, out_type=dtypes.string):
    """A ``SparseTensor`` as a 3-vector of serialized ``TensorProto``s
    (indices, values, dense shape)."""
    return _serialize("SerializeSparse", sp_input, name, out_type)


def serialize_many_sparse(sp_input, name=None, out_type=dtypes.string):
    """Each row (first dimension) of a rank >= 2 ``SparseTensor`` as a row of
    ``serialize_sparse``'s three strings: a ``[N, 3]`` matrix."""
    return _serialize("SerializeManySparse", sp_input, name, out_type)


def deserialize_many_sparse(serialized_sparse, dtype, rank=None, name=None):
    """The ``SparseTensor`` whose rows ``serialize_many_sparse`` (or stacked
    ``serialize_sparse`` results) wrote: row ``i`` becomes index ``i`` of a new
    first dimension; each other dimension is the largest of the rows'."""
    with op_scope(name, "DeserializeManySparse", [serialized_sparse]) as (g, scope):
        s = convert_to_tensor(serialized_sparse, dtype=dtypes.string,
                              name="serialized_sparse")
        indices, values, shape = g.create_op(
            "DeserializeManySparse", [s], {"dtype": dtypes.as_dtype(dtype)},
            name=scope).outputs
    if rank is not None:
        indices.set_shape([None, rank])
        shape.set_shape([rank])
    return SparseTensor(indices, values, shape)


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


__all__ = ["decode_compressed", "decode_json_example", "deserialize_many_sparse",
           "parse_tensor", "serialize_many_sparse", "serialize_sparse",
           "serialize_tensor"]
