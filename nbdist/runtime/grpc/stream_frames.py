"""Frames of the gRPC stream path (``grpc.stream_path``): one gRPC message is
one frame, ``u32 header length, header (JSON), the tensors' raw bytes``.

gRPC carries the frames as plain bytes (identity serializers), so a tensor is
never encoded into a ``TensorProto``: numeric tensors travel as their buffer
and are copied once, out of the received message into a fresh writable array;
string tensors travel as ``TensorProto`` bytes. A header names each tensor as
``[name, dtype, shape, nbytes]`` (dtype ``"proto"`` for a ``TensorProto``). A
server's answer parks a large tensor (``coding.parkable``: one huge gRPC
message moves at a fraction of the rate of RecvTensor's chunks) and names it
``[name, "ref", shape, 0, key, step id, dtype]``, decoded as a
``coding.TensorRef`` for the client to pull.

>>> import numpy as np
>>> frame = encode_frame({"op": "recv"}, [("x", np.arange(3.0))])
>>> header, tensors = decode_frame(frame, 1 << 20)
>>> header["op"], tensors[0][0], tensors[0][1].tolist()
('recv', 'x', [0.0, 1.0, 2.0])
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np

from nbdist import errors
from nbdist.framework import tensor_util
from nbdist.proto import tensor_pb2
from nbdist.runtime.grpc.coding import TensorRef, parkable

__all__ = ["STREAM_METHOD", "decode_frame", "encode_frame", "error_header",
           "raise_if_error"]

# The stream path's one method: a long-lived bidirectional stream of frames.
STREAM_SERVICE, STREAM_CALL = "nbdist.PeerStream", "Frames"
STREAM_METHOD = f"/{STREAM_SERVICE}/{STREAM_CALL}"

_PREFIX = struct.Struct("<I")
_PROTO = "proto"
_REF = "ref"
_NUMERIC_KINDS = "biufc"
# The dtypes a frame may name, looked up (NumPy's dtype parser takes record
# and comma strings a peer should not be able to send).
_DTYPES = {np.dtype(c).str: np.dtype(c) for c in "?bBhHiIlLqQefdgFDG"}
_DTYPES.update({d.newbyteorder(">").str: d.newbyteorder(">")
                for d in list(_DTYPES.values())})
_encode_header = json.JSONEncoder(separators=(",", ":")).encode
_decode_header = json.JSONDecoder().decode


def encode_frame(header: dict, tensors=(), park=None) -> bytes:
    """``header`` (its ``"t"`` set here) and ``[(name, value)]`` as one frame;
    with ``park`` (value -> (key, step id)), large tensors as references."""
    entries, parts = [], []
    for name, value in tensors:
        arr = tensor_util.as_value_array(value)
        if park is not None and parkable(arr):
            key, step_id = park(arr)
            entries.append([name, _REF, list(arr.shape), 0, key, step_id,
                            arr.dtype.str])
        elif arr.dtype.kind in _NUMERIC_KINDS:
            if not arr.flags.c_contiguous:
                arr = np.ascontiguousarray(arr)
            entries.append([name, arr.dtype.str, list(arr.shape), arr.nbytes])
            parts.append(arr.reshape(-1).view(np.uint8))
        else:
            data = tensor_util.make_tensor_proto(arr).SerializeToString()
            entries.append([name, _PROTO, list(arr.shape), len(data)])
            parts.append(data)
    header["t"] = entries
    head = _encode_header(header).encode()
    return b"".join([_PREFIX.pack(len(head)), head, *parts])


def decode_frame(frame: bytes, max_tensor_bytes: int) -> tuple[dict, list]:
    """``(header, [(name, array)])`` of a frame; ValueError for a malformed one
    (a tensor over ``max_tensor_bytes`` too)."""
    if len(frame) < _PREFIX.size:
        raise ValueError("frame shorter than its prefix")
    (n,) = _PREFIX.unpack_from(frame)
    offset = _PREFIX.size + n
    if offset > len(frame):
        raise ValueError("frame shorter than its header")
    header = _decode_header(frame[_PREFIX.size:offset].decode())
    if not isinstance(header, dict):
        raise ValueError("frame header is not an object")  # noqa: TRY004 - malformed
    tensors = []
    for entry in header.get("t", ()):
        name, dtype_name, shape, nbytes = entry[:4]
        nbytes = int(nbytes)
        if not 0 <= nbytes <= max_tensor_bytes or offset + nbytes > len(frame):
            raise ValueError(f"tensor {str(name)[:100]!r} of {nbytes} bytes does "
                             "not fit the frame")
        shape = tuple(int(d) for d in shape)
        if dtype_name == _REF:
            key, step_id, dtype_name = entry[4:7]
            dtype = _DTYPES.get(dtype_name) if isinstance(dtype_name, str) else None
            if dtype is None:
                raise ValueError(f"reference {str(name)[:100]!r}: bad dtype")
            value = TensorRef(str(key), int(step_id), dtype, shape)
        elif dtype_name == _PROTO:
            proto = tensor_pb2.TensorProto.FromString(frame[offset:offset + nbytes])
            value = tensor_util.make_ndarray(proto)
        else:
            dtype = _DTYPES.get(dtype_name) if isinstance(dtype_name, str) else None
            if dtype is None or min(shape, default=0) < 0 or \
                    math.prod(shape) * dtype.itemsize != nbytes:
                raise ValueError(f"tensor {str(name)[:100]!r}: {nbytes} bytes are "
                                 f"not a {str(dtype_name)[:20]} of shape {shape}")
            value = np.frombuffer(frame, dtype, math.prod(shape), offset) \
                .reshape(shape).copy()  # writable, and not pinning the frame
        tensors.append((str(name), value))
        offset += nbytes
    return header, tensors


def error_header(e: errors.OpError) -> dict:
    """An error as a reply: its code, message and op's name."""
    op = getattr(e.op, "name", e.op)
    return {"error": [int(e.error_code), e.message, str(op) if op else ""]}


def raise_if_error(header: dict) -> None:
    err = header.get("error")
    if err:
        code, message, op = err
        raise errors.make_error(int(code), str(message), str(op) or None)
