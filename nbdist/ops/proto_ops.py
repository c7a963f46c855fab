"""``decode_proto`` / ``encode_proto``: fields of serialized protocol buffers as
tensors and back, as TF's ``tf.io.decode_proto`` / ``tf.io.encode_proto``.

The message type is looked up by its full name in a descriptor pool:
``descriptor_source="local://"`` (the default) is the Python protobuf runtime's
default pool, i.e. every message type whose ``*_pb2`` module the process has
imported (nbdist's own protos are ``nbdist.*``; a ``tensorflow.*`` name that is
not there is looked up as ``nbdist.*``, so ``"tensorflow.Example"`` finds
nbdist's ``Example``). ``"bytes://<FileDescriptorSet>"`` or the path of a file
holding a serialized ``FileDescriptorSet`` gives a pool of its own.

>>> import nbdist as nd
>>> from nbdist.proto import tensor_shape_pb2 as ts
>>> dim = ts.TensorShapeProto.Dim(size=3, name="rows").SerializeToString()
>>> sizes, (size, name) = nd.io.decode_proto(
...     [dim], "nbdist.TensorShapeProto.Dim", ["size", "name"],
...     [nd.int64, nd.string])
>>> with nd.Session() as s:
...     s.run(sizes).tolist(), s.run(size).tolist(), s.run(name).tolist()
([[1, 1]], [[3]], [[b'rows']])
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import _graph_of, convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape

__all__ = ["decode_proto", "encode_proto"]


def _decode_infer(c):
    if c.dtype(0) is not dtypes.string:
        raise TypeError(f"DecodeProtoV2 needs serialized strings, got "
                        f"{c.dtype(0).name}")
    fields, types = c.attr("field_names"), c.attr("output_types")
    if len(fields) != len(types):
        raise ValueError(f"DecodeProtoV2: {len(fields)} field_names but "
                         f"{len(types)} output_types")
    batch = c.shape(0)
    if batch.rank is None:
        return [(dtypes.int32, TensorShape(None))] + [
            (t, TensorShape(None)) for t in types]
    return [(dtypes.int32, TensorShape(batch.as_list() + [len(fields)]))] + [
        (t, TensorShape(batch.as_list() + [None])) for t in types]


register_op("DecodeProtoV2", _decode_infer,
            attrs={"message_type": ("string", REQUIRED),
                   "field_names": ("list(string)", REQUIRED),
                   "output_types": ("list(type)", REQUIRED),
                   "descriptor_source": ("string", "local://"),
                   "message_format": ("string", "binary"),
                   "sanitize": ("bool", False)},
            num_inputs=1)


def _encode_infer(c):
    if c.dtype(0) is not dtypes.int32:
        raise TypeError(f"EncodeProto: sizes must be int32, got {c.dtype(0).name}")
    n = len(c.attr("field_names"))
    if len(c.input_dtypes) - 1 != n:
        raise ValueError(f"EncodeProto: {n} field_names but "
                         f"{len(c.input_dtypes) - 1} values")
    sizes = c.shape(0)
    if sizes.rank is not None and sizes[-1] is not None and sizes[-1] != n:
        raise ValueError(f"EncodeProto: sizes' last dimension must be the number "
                         f"of fields ({n}), got {sizes}")
    return [(dtypes.string, TensorShape(None) if sizes.rank is None
             else TensorShape(sizes.as_list()[:-1]))]


register_op("EncodeProto", _encode_infer,
            attrs={"field_names": ("list(string)", REQUIRED),
                   "message_type": ("string", REQUIRED),
                   "descriptor_source": ("string", "local://"),
                   "Tinput_types": ("list(type)", REQUIRED)},
            min_inputs=2)
NotDifferentiable("DecodeProtoV2")
NotDifferentiable("EncodeProto")


def decode_proto(bytes, message_type, field_names, output_types,
                 descriptor_source="local://", message_format="binary",
                 sanitize=False, name=None):
    """The fields ``field_names`` of the serialized ``message_type`` messages
    in the string tensor ``bytes``: ``(sizes, values)``. ``sizes`` (int32,
    ``bytes.shape + [len(field_names)]``) counts each field's values in each
    message; ``values[i]`` (``output_types[i]``, ``bytes.shape + [max count]``)
    holds them, padded with the field's default. Sub-messages come out
    serialized (``string``). ``message_format="text"`` reads text format."""
    if message_format not in ("binary", "text"):
        raise ValueError(f"message_format must be 'binary' or 'text', got "
                         f"{message_format!r}")
    g = _graph_of([bytes])
    with g.as_default():
        t = convert_to_tensor(bytes, dtype=dtypes.string, name="bytes")
        op = g.create_op("DecodeProtoV2", [t], {
            "message_type": message_type, "field_names": list(field_names),
            "output_types": [dtypes.as_dtype(d) for d in output_types],
            "descriptor_source": descriptor_source,
            "message_format": message_format, "sanitize": bool(sanitize)},
            name=name or "DecodeProtoV2")
    return op.outputs[0], list(op.outputs[1:])


def encode_proto(sizes, values, field_names, message_type,
                 descriptor_source="local://", name=None):
    """The inverse of ``decode_proto``: serialized ``message_type`` messages
    (shape ``sizes.shape[:-1]``) with ``sizes[..., i]`` values of field
    ``field_names[i]`` taken from ``values[i]``.

    >>> import nbdist as nd
    >>> from nbdist.proto import tensor_shape_pb2 as ts
    >>> out = nd.io.encode_proto([[1, 1]], [[[5]], [[b"n"]]], ["size", "name"],
    ...                          "nbdist.TensorShapeProto.Dim")
    >>> with nd.Session() as s:
    ...     ts.TensorShapeProto.Dim.FromString(s.run(out)[0]).size
    5
    """
    g = _graph_of([sizes, *values])
    with g.as_default():
        sizes = convert_to_tensor(sizes, dtype=dtypes.int32, name="sizes")
        values = [convert_to_tensor(v, name=f"values_{i}")
                  for i, v in enumerate(values)]
        op = g.create_op("EncodeProto", [sizes, *values], {
            "field_names": list(field_names), "message_type": message_type,
            "descriptor_source": descriptor_source,
            "Tinput_types": [v.dtype.base_dtype for v in values]},
            name=name or "EncodeProto")
    return op.outputs[0]
