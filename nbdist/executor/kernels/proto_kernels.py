"""Kernels of ``nbdist.ops.proto_ops`` over the Python protobuf runtime: the
message class comes from a descriptor pool (see the ops' module docstring);
error messages are TF's (``decode_proto_op.cc``)."""

from __future__ import annotations

import functools

import numpy as np
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    text_format,
)
from google.protobuf.descriptor import FieldDescriptor as FD
from google.protobuf.message import DecodeError

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.ops import proto_ops  # noqa: F401  (registers the ops)

_INT32 = {FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32, FD.TYPE_ENUM}
# Field type -> the dtypes a field of it may be read as (TF's conversions).
_ALLOWED = {
    **{t: ("int32", "int64") for t in _INT32},
    FD.TYPE_INT64: ("int64",), FD.TYPE_SINT64: ("int64",),
    FD.TYPE_SFIXED64: ("int64",),
    FD.TYPE_UINT32: ("uint32", "int64"), FD.TYPE_FIXED32: ("uint32", "int64"),
    FD.TYPE_UINT64: ("uint64", "int64"), FD.TYPE_FIXED64: ("uint64", "int64"),
    FD.TYPE_FLOAT: ("float32", "float64"), FD.TYPE_DOUBLE: ("float64",),
    FD.TYPE_BOOL: ("bool",), FD.TYPE_STRING: ("string",),
    FD.TYPE_BYTES: ("string",), FD.TYPE_MESSAGE: ("string",),
    FD.TYPE_GROUP: ("string",),
}
_TYPE_NAMES = {getattr(FD, n): n[5:].lower() for n in dir(FD)
               if n.startswith("TYPE_")}
_BYTES_LIKE = {FD.TYPE_STRING, FD.TYPE_BYTES, FD.TYPE_MESSAGE, FD.TYPE_GROUP}


@functools.lru_cache(maxsize=32)
def _pool(source: str):
    if source == "local://":
        return descriptor_pool.Default()
    if source.startswith("bytes://"):
        data = source[len("bytes://"):].encode("latin-1")
    else:
        with open(source, "rb") as f:
            data = f.read()
    pool = descriptor_pool.DescriptorPool()
    for fd in descriptor_pb2.FileDescriptorSet.FromString(data).file:
        pool.Add(fd)
    return pool


def _message_class(node, source, name):
    try:
        pool = _pool(source)
    except (OSError, DecodeError) as e:
        raise errors.InvalidArgumentError(
            None, node, f"No descriptor pool from descriptor_source {source!r}: "
            f"{e}") from None
    candidates = [name]
    if name.startswith("tensorflow."):  # TF's name of one of nbdist's protos
        candidates.append("nbdist." + name[len("tensorflow."):])
    for candidate in candidates:
        try:
            return message_factory.GetMessageClass(
                pool.FindMessageTypeByName(candidate))
        except KeyError:
            continue
    raise errors.InvalidArgumentError(
        None, node, f"No descriptor found for message type {name}")


def _fields(node, cls, names, types=None):
    out = []
    for i, n in enumerate(names):
        fd = cls.DESCRIPTOR.fields_by_name.get(n)
        if fd is None:
            raise errors.InvalidArgumentError(
                None, node, f"Unknown field: {n} in message type "
                f"{cls.DESCRIPTOR.full_name}")
        if types is not None and types[i].name not in _ALLOWED[fd.type]:
            raise errors.InvalidArgumentError(
                None, node, f"Unexpected output type for {fd.full_name}: "
                f"{_TYPE_NAMES[fd.type]} to DT_{types[i].name.upper()}")
        out.append(fd)
    return out


def _is_repeated(fd) -> bool:
    return fd.is_repeated


def _default(fd, dtype):
    if fd.type in _BYTES_LIKE:
        v = b"" if fd.type != FD.TYPE_STRING or _is_repeated(fd) else (
            fd.default_value.encode())
        return v
    return np.asarray(0 if _is_repeated(fd) else fd.default_value).astype(dtype)


def _as_value(fd, v):
    if fd.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
        return v.SerializeToString()
    return v.encode() if isinstance(v, str) else v


@register_kernel("DecodeProtoV2")
def decode_proto_kernel(node):
    a = node.attrs
    types = a["output_types"]
    text = a["message_format"] == "text"

    def compute(step, serialized):
        cls = _message_class(node.name, a["descriptor_source"], a["message_type"])
        fds = _fields(node.name, cls, a["field_names"], types)
        batch = np.asarray(serialized, dtype=object)
        found = []  # per message, per field: its values
        for b, s in enumerate(batch.reshape(-1)):
            msg = cls()
            try:
                if text:
                    text_format.Parse(s.decode() if isinstance(s, bytes) else s, msg)
                else:
                    msg.ParseFromString(bytes(s))
            except (DecodeError, text_format.ParseError) as e:
                raise errors.DataLossError(
                    None, node.name, f"Unable to parse message {b} as "
                    f"{a['message_type']}: {e}") from None
            present = {fd.name: v for fd, v in msg.ListFields()}
            found.append([list(present.get(fd.name, ())) if _is_repeated(fd) else
                          [present[fd.name]] if fd.name in present else []
                          for fd in fds])
        sizes = np.array([[len(v) for v in row] for row in found],
                         np.int32).reshape(batch.shape + (len(fds),))
        outs = [sizes]
        for i, (fd, t) in enumerate(zip(fds, types)):
            width = int(sizes[..., i].max(initial=0))
            np_t = object if t.name == "string" else t.as_numpy_dtype
            col = np.empty([len(found), width], dtype=np_t)
            col[...] = _default(fd, np_t)
            for b, row in enumerate(found):
                for j, v in enumerate(row[i]):
                    col[b, j] = _as_value(fd, v)
            outs.append(col.reshape(batch.shape + (width,)))
        return tuple(outs)

    return compute


def _set_field(msg, fd, vals):
    if fd.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
        if _is_repeated(fd):
            for v in vals:
                getattr(msg, fd.name).add().ParseFromString(bytes(v))
        elif vals:
            getattr(msg, fd.name).ParseFromString(bytes(vals[0]))
        return
    vals = [v.decode() if fd.type == FD.TYPE_STRING and isinstance(v, bytes) else
            bool(v) if fd.type == FD.TYPE_BOOL else
            v if isinstance(v, bytes) else v.item() for v in vals]
    if _is_repeated(fd):
        getattr(msg, fd.name).extend(vals)
    elif vals:
        setattr(msg, fd.name, vals[0])


@register_kernel("EncodeProto")
def encode_proto_kernel(node):
    a = node.attrs

    def compute(step, sizes, *values):
        cls = _message_class(node.name, a["descriptor_source"], a["message_type"])
        fds = _fields(node.name, cls, a["field_names"])
        sizes = np.asarray(sizes)
        batch_shape = sizes.shape[:-1]
        flat_sizes = sizes.reshape(-1, len(fds))
        flat_values = []
        for fd, v in zip(fds, values):
            v = np.asarray(v)
            if v.shape[:-1] != batch_shape:
                raise errors.InvalidArgumentError(
                    None, node.name, f"Incompatible shapes: values for field "
                    f"{fd.name} have shape {list(v.shape)}, sizes "
                    f"{list(sizes.shape)}")
            flat_values.append(v.reshape(-1, v.shape[-1] if v.ndim else 1))
        out = np.empty(flat_sizes.shape[0], dtype=object)
        for b in range(flat_sizes.shape[0]):
            msg = cls()
            for i, fd in enumerate(fds):
                n = int(flat_sizes[b, i])
                if n > flat_values[i].shape[1] or (n > 1 and not _is_repeated(fd)):
                    most = flat_values[i].shape[1] if _is_repeated(fd) else 1
                    raise errors.InvalidArgumentError(
                        None, node.name, f"Invalid size {n} for field {fd.name} "
                        f"(at most {most})")
                _set_field(msg, fd, list(flat_values[i][b, :n]))
            out[b] = msg.SerializeToString()
        return out.reshape(batch_shape)

    return compute
