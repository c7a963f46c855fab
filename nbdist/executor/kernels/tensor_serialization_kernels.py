"""Kernels of ``nbdist.ops.tensor_serialization_ops``: ``TensorProto`` bytes
through ``framework.tensor_util``, zlib/gzip, protobuf's JSON parser."""

from __future__ import annotations

import gzip
import zlib

import numpy as np
from google.protobuf import json_format

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import op_error
from nbdist.executor.kernels.string_kernels import _map, _objects
from nbdist.framework import dtypes
from nbdist.framework.tensor_util import make_ndarray, make_tensor_proto
from nbdist.ops import tensor_serialization_ops  # noqa: F401  (registers the ops)
from nbdist.proto import example_pb2, tensor_pb2


def _proto_bytes(array, dtype=None) -> bytes:
    return make_tensor_proto(np.asarray(array), dtype=dtype).SerializeToString()


def _string_scalar(b: bytes) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = b
    return out


@register_kernel("SerializeTensor")
def serialize_tensor_kernel(node):
    dtype = node.attrs["T"]

    def compute(step, x):
        return _string_scalar(_proto_bytes(x, dtype))

    return compute


def _parse(node, s: bytes, want=None) -> np.ndarray:
    proto = tensor_pb2.TensorProto()
    try:
        proto.ParseFromString(s)
    except Exception:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise op_error(node, "Could not parse `serialized` as TensorProto") from None
    if want is not None and proto.dtype != want.as_datatype_enum:
        got = dtypes.as_dtype(proto.dtype).name
        raise op_error(node, f"Type mismatch between parsed tensor ({got}) and "
                             f"dtype ({want.name})")
    return make_ndarray(proto)


@register_kernel("ParseTensor")
def parse_tensor_kernel(node):
    out_type = node.attrs["out_type"]

    def compute(step, serialized):
        s = np.asarray(serialized, dtype=object)
        if s.shape != ():
            raise op_error(node, "Expected `serialized` to be a scalar")
        return _parse(node, s.item(), out_type)

    return compute


def _triple(indices, values, shape, value_dtype):
    out = np.empty(3, dtype=object)
    out[:] = [_proto_bytes(np.asarray(indices, np.int64)),
              _proto_bytes(values, value_dtype), _proto_bytes(np.asarray(shape, np.int64))]
    return out


@register_kernel("SerializeSparse")
def serialize_sparse_kernel(node):
    dtype = node.attrs["T"]

    def compute(step, indices, values, shape):
        return _triple(indices, values, shape, dtype)

    return compute


@register_kernel("SerializeManySparse")
def serialize_many_sparse_kernel(node):
    dtype = node.attrs["T"]

    def compute(step, indices, values, shape):
        indices, values = np.asarray(indices, np.int64), np.asarray(values)
        shape = np.asarray(shape, np.int64)
        if shape.size < 2:
            raise op_error(node, "SparseTensor must have rank >= 2 to serialize "
                                 "its rows")
        out = np.empty((int(shape[0]), 3), dtype=object)
        for i in range(int(shape[0])):
            rows = indices[:, 0] == i
            out[i] = _triple(indices[rows, 1:], values[rows], shape[1:], dtype)
        return out

    return compute


@register_kernel("DeserializeManySparse")
def deserialize_many_sparse_kernel(node):
    dtype = node.attrs["dtype"]

    def compute(step, serialized):
        s = np.asarray(serialized, dtype=object)
        if s.ndim != 2 or s.shape[1] != 3:
            raise op_error(node, f"Serialized sparse should be a matrix with 3 "
                                 f"columns, got shape {list(s.shape)}")
        parts = [(_parse(node, a), _parse(node, v, dtype), _parse(node, sh))
                 for a, v, sh in s]
        ranks = {len(sh) for _, _, sh in parts}
        if len(ranks) > 1:
            raise op_error(node, f"Inconsistent rank across SparseTensors: "
                                 f"{sorted(ranks)}")
        rank = ranks.pop() if ranks else 0
        indices = [np.hstack([np.full((len(a), 1), i, np.int64),
                              np.asarray(a, np.int64).reshape(len(a), rank)])
                   for i, (a, _, _) in enumerate(parts)]
        shape = np.max([sh for _, _, sh in parts], axis=0) if parts else np.zeros(
            rank, np.int64)
        values = [np.asarray(v) for _, v, _ in parts]
        empty = np.zeros((0,), dtype.as_numpy_dtype if dtype is not dtypes.string
                         else object)
        return (np.concatenate(indices) if indices else np.zeros((0, rank + 1),
                                                                 np.int64),
                np.concatenate(values) if values else empty,
                np.concatenate([[len(parts)], shape]).astype(np.int64))

    return compute


def _decompress(node, kind):
    def decode(b: bytes) -> bytes:
        try:
            if kind == "ZLIB":
                return zlib.decompress(b)
            if kind == "GZIP":
                return gzip.decompress(b)
        except (OSError, zlib.error, EOFError) as e:
            raise op_error(node, f"Invalid {kind} data: {e}") from None
        return b

    return decode


@register_kernel("DecodeCompressed")
def decode_compressed_kernel(node):
    decode = _decompress(node, node.attrs["compression_type"])

    def compute(step, x):
        return _map(decode, _objects(x))

    return compute


@register_kernel("DecodeJSONExample")
def decode_json_example_kernel(node):
    def decode(text) -> bytes:
        try:
            return json_format.Parse(text, example_pb2.Example()).SerializeToString()
        except json_format.ParseError as e:
            raise op_error(node, f"Error while parsing JSON: {e}") from None

    def compute(step, x):
        return _map(decode, _objects(x))

    return compute
