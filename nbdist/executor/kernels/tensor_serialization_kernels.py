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
