"""NumPy values on the wire: tensors in RPC messages and RecvTensor chunks.

Messages that carry tensors (RunStep feeds and fetches, RunGraph sends and
recvs) are encoded by hand around the tensors' raw bytes: the rest of the
message goes through protobuf, and each numeric tensor's ``tensor_content``
is spliced in straight from the array's buffer, so a tensor is copied once
into the outgoing message instead of three times. Decoding reads
``tensor_content`` as a slice of the received buffer and copies it once into
a fresh, writable array. The result is ordinary protobuf wire format: any
protobuf parser reads it, and ``decode_message`` reads any encoder's output.

Large tensors do not travel inside unary messages at all (gRPC moves one
huge message at a fraction of the rate of a stream of chunks): a process
that serves RecvTensor *parks* each numeric tensor of at least
``STREAM_MIN_BYTES`` in its rendezvous and sends a reference instead, a
``TensorProto`` with its dtype and shape, ``version_number = REF_MAGIC``,
``string_val = [rendezvous key]`` and ``int64_val = [step id]``; the receiver
pulls it with RecvTensor from the task the key names. Fetches (RunGraph and
RunStep responses) and the master's RunGraph sends use references. A client
serves nothing, so its large RunStep feeds go the other way: it streams them
to the master with PushTensors (``push_chunks``; the master assembles them
with ``ChunkReceiver``) and the RunStep names each by a reference of the
same form, with the key PushTensors returned and its push id.

Between tasks, a consumer asks for a tensor with RecvTensorUnary first: a
small value comes whole in one message (``encode_recv_response``), a large
one as a reference to pull with the RecvTensor stream.

RecvTensor streams a value in chunks of ``CHUNK_BYTES`` (4 MiB: big enough
that per-message overhead is negligible against the copy, small enough that
a few chunks in flight bound the memory a transfer holds); the receiver
preallocates the destination array and copies each chunk into place.
Nothing here unpickles or evaluates what it reads; malformed input raises
``ValueError``.
"""

from __future__ import annotations

import math
import queue
import threading
import time

import numpy as np
from google.protobuf import message

from nbdist import errors
from nbdist.graph import tensor_util
from nbdist.proto import master_pb2, step_stats_pb2, tensor_pb2, worker_pb2

__all__ = [
    "CHUNK_BYTES",
    "PENDING",
    "REF_MAGIC",
    "STREAM_MIN_BYTES",
    "ChunkReceiver",
    "TensorRef",
    "decode_message",
    "decode_recv_response",
    "decode_tensor",
    "encode_message",
    "encode_recv_response",
    "encode_tensor",
    "parkable",
    "parse_chunk",
    "parse_push_chunk",
    "push_chunks",
    "recv_tensor_chunks",
    "resolve_refs",
    "stats_from_proto",
    "stats_to_proto",
]

CHUNK_BYTES = 4 << 20
STREAM_MIN_BYTES = 1 << 20
REF_MAGIC = 0x6E6264  # "nbd": this TensorProto is a reference to pull
# A tensor given by typed values (one fills its shape) may not expand beyond
# this once decoded: a hostile request must not make the server allocate
# terabytes. The server's own max_tensor_bytes then applies to what is fed.
_MAX_FILL_BYTES = 1 << 30


# -- wire primitives -------------------------------------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("truncated or overlong varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf, pos: int, end: int):
    """Yields (field number, wire type, value start, value end, field start)."""
    while pos < end:
        start = pos
        key, pos = _read_varint(buf, pos, end)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise ValueError("field number 0")
        if wt == 0:
            _, pos2 = _read_varint(buf, pos, end)
        elif wt == 1:
            pos2 = pos + 8
        elif wt == 2:
            n, pos = _read_varint(buf, pos, end)
            pos2 = pos + n
        elif wt == 5:
            pos2 = pos + 4
        else:
            raise ValueError(f"unsupported wire type {wt}")
        if pos2 > end:
            raise ValueError("field runs past the end of the message")
        yield num, wt, pos, pos2, start
        pos = pos2


def _len_field(num: int, length: int) -> bytes:
    return _varint((num << 3) | 2) + _varint(length)


# -- single tensors ----------------------------------------------------------------
# TensorProto headers (dtype and shape, no content) of numeric arrays, by
# (dtype, shape): most steps move tensors of the same few kinds.
_HEADS: dict = {}
_HEADS_MAX = 4096
_SMALL_BYTES = 1 << 16


def _head(dtype: np.dtype, shape: tuple) -> bytes:
    key = (dtype.str, shape)
    head = _HEADS.get(key)
    if head is None:
        proto = tensor_pb2.TensorProto(dtype=tensor_util.dtype_enum_from_numpy(dtype))
        proto.tensor_shape.CopyFrom(tensor_util.shape_to_proto(shape))
        head = proto.SerializeToString()
        if len(_HEADS) >= _HEADS_MAX:
            _HEADS.clear()
        _HEADS[key] = head
    return head


def _raw_parts(value):
    """(TensorProto bytes without content, raw content buffer or None)."""
    arr = tensor_util.as_value_array(value)
    if arr.dtype.kind in "OSU":
        return tensor_util.make_tensor_proto(arr).SerializeToString(), None
    head = _head(arr.dtype, arr.shape)
    if arr.nbytes < _SMALL_BYTES:  # a copy is cheaper than a view here
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        return head, (arr.tobytes() if arr.nbytes else None)
    if arr.dtype.byteorder == ">" or not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
    return head, memoryview(arr.reshape(-1).view(np.uint8))


def encode_tensor(value) -> tensor_pb2.TensorProto:
    """A ``TensorProto`` for a NumPy value (numbers in ``tensor_content``)."""
    return tensor_util.make_tensor_proto(tensor_util.as_value_array(value))


def _writable(arr: np.ndarray) -> np.ndarray:
    return arr if arr.flags.writeable else arr.copy()


def _check_fill(proto) -> None:
    shape = tensor_util.shape_from_proto(proto.tensor_shape)
    if shape is None or any(d is None for d in shape):
        raise ValueError(f"a tensor value needs a fully defined shape, got {shape}")
    if tensor_util.materialized_nbytes(proto) > _MAX_FILL_BYTES:
        raise ValueError(
            f"tensor of shape {list(shape)} is too large to build from "
            "typed values; send tensor_content"
        )


def _content_layout(proto) -> tuple:
    """(dtype, little-endian dtype, shape, bytes needed, is bool) of a
    TensorProto whose value is in tensor_content."""
    dt = tensor_util.numpy_dtype_from_enum(proto.dtype)
    if dt.kind == "O":
        raise ValueError("string tensors must use string_val, not tensor_content")
    shape = tensor_util.shape_from_proto(proto.tensor_shape)
    if shape is None or any(d is None for d in shape):
        raise ValueError(f"a tensor value needs a fully defined shape, got {shape}")
    le = dt.newbyteorder("<")
    return dt, le, shape, math.prod(shape) * dt.itemsize, dt == np.bool_


def _from_content(layout: tuple, content) -> np.ndarray:
    dt, le, shape, need, is_bool = layout
    if len(content) != need:
        raise ValueError(
            f"tensor_content has {len(content)} bytes; "
            f"{dt} of shape {list(shape)} needs {need}"
        )
    out = np.frombuffer(content, dtype=le).reshape(shape).copy()
    if is_bool and need and out.view(np.uint8).max() > 1:
        raise ValueError("bool tensor_content holds bytes other than 0 and 1")
    return out if le is dt or le == dt else out.astype(dt)


def decode_tensor(proto: tensor_pb2.TensorProto, content=None) -> np.ndarray:
    """A fresh writable array from ``proto`` (``content``: its raw bytes, when
    they were kept out of the proto)."""
    if content is None:
        if not proto.tensor_content:
            _check_fill(proto)
        return _writable(tensor_util.make_ndarray(proto))
    return _from_content(_content_layout(proto), content)


# -- messages with tensors -----------------------------------------------------------
class TensorRef:
    """A parked tensor to pull: rendezvous ``key`` of ``step_id`` on the task
    the key names, of ``dtype`` and ``shape``."""

    __slots__ = ("dtype", "key", "shape", "step_id")

    def __init__(self, key: str, step_id: int, dtype: np.dtype, shape: tuple):
        self.key = key
        self.step_id = step_id
        self.dtype = dtype
        self.shape = shape

    @property
    def src_device(self) -> str:
        return self.key.split(";", 1)[0]


def _ref_head(value: np.ndarray, key: str, step_id: int) -> bytes:
    head = tensor_pb2.TensorProto(
        dtype=tensor_util.dtype_enum_from_numpy(value.dtype),
        version_number=REF_MAGIC,
        string_val=[key.encode()],
        int64_val=[step_id],
    )
    head.tensor_shape.CopyFrom(tensor_util.shape_to_proto(value.shape))
    return head.SerializeToString()


def parkable(value) -> bool:
    """Large numeric arrays travel by reference, not inside a message."""
    return (
        isinstance(value, np.ndarray)
        and value.dtype.kind not in "OSU"
        and value.nbytes >= STREAM_MIN_BYTES
    )


def encode_message(msg, field: int, tensors, park=None) -> bytes:
    """``msg`` (holding no tensors) plus ``tensors`` ([(name, value)]) appended as
    the repeated NamedTensorProto ``field``; one copy of each tensor's bytes.

    With ``park`` (value -> (rendezvous key, step id)), large numeric tensors
    are parked and sent as references."""
    parts = [msg.SerializeToString()]
    for name, value in tensors:
        if park is not None and parkable(value):
            head, raw = _ref_head(value, *park(value)), None
        else:
            head, raw = _raw_parts(value)
        name_b = name.encode() if isinstance(name, str) else bytes(name)
        tensor_len = len(head)
        if raw is not None:
            content_hdr = _len_field(4, len(raw))
            tensor_len += len(content_hdr) + len(raw)
        name_hdr = _len_field(1, len(name_b))
        tensor_hdr = _len_field(2, tensor_len)
        named_len = len(name_hdr) + len(name_b) + len(tensor_hdr) + tensor_len
        parts += [_len_field(field, named_len), name_hdr, name_b, tensor_hdr, head]
        if raw is not None:
            parts += [content_hdr, raw]
    return b"".join(parts)


# Layouts of TensorProto headers seen with tensor_content, by header bytes.
_LAYOUTS: dict = {}


def _decode_tensor_field(buf, a: int, b: int):
    """The TensorProto at ``buf[a:b]``: an array, or a ``TensorRef``."""
    tensor_rest: list = []
    content = None
    for tnum, twt, ta, tb, ts in _fields(buf, a, b):
        if tnum == 4 and twt == 2:
            content = buf[ta:tb]
        else:
            tensor_rest.append(buf[ts:tb])
    head = b"".join(tensor_rest)
    if content is not None and len(content):
        layout = _LAYOUTS.get(head)
        if layout is not None:
            return _from_content(layout, content)
    else:
        content = None
    proto = tensor_pb2.TensorProto.FromString(head)
    if proto.version_number == REF_MAGIC:
        return _decode_ref(proto)
    if content is None:
        return decode_tensor(proto)
    layout = _content_layout(proto)
    if len(_LAYOUTS) >= _HEADS_MAX:
        _LAYOUTS.clear()
    _LAYOUTS[head] = layout
    return _from_content(layout, content)


def _decode_named(buf, pos: int, end: int):
    name = b""
    value = None
    for num, wt, a, b, _s in _fields(buf, pos, end):
        if num == 1 and wt == 2:
            name = bytes(buf[a:b])
        elif num == 2 and wt == 2:
            value = _decode_tensor_field(buf, a, b)
    if value is None:
        value = _decode_tensor_field(buf, 0, 0)
    try:
        name_s = name.decode()
    except UnicodeDecodeError:
        raise ValueError("tensor name is not valid UTF-8") from None
    return name_s, value


def _decode_ref(proto) -> TensorRef:
    if len(proto.string_val) != 1 or len(proto.int64_val) != 1:
        raise ValueError("a tensor reference needs one key and one step id")
    dt = tensor_util.numpy_dtype_from_enum(proto.dtype)
    shape = tensor_util.shape_from_proto(proto.tensor_shape)
    if dt.kind == "O" or shape is None or any(d is None for d in shape):
        raise ValueError("a tensor reference needs a numeric dtype and a full shape")
    try:
        key = proto.string_val[0].decode()
    except UnicodeDecodeError:
        raise ValueError("tensor reference key is not valid UTF-8") from None
    if key.count(";") != 4:
        raise ValueError(f"malformed tensor reference key {key[:200]!r}")
    return TensorRef(key, proto.int64_val[0], dt, shape)


def resolve_refs(tensors, pull) -> list:
    """``tensors`` with every ``TensorRef`` replaced by ``pull(ref)``'s array."""
    out = []
    for name, value in tensors:
        if isinstance(value, TensorRef):
            arr = pull(value)
            if arr.shape != tuple(value.shape) or arr.dtype != value.dtype:
                raise errors.DataLossError(
                    None,
                    None,
                    f"Pulled tensor {name} is {arr.dtype}{arr.shape}, "
                    f"expected {value.dtype}{tuple(value.shape)}",
                )
            value = arr
        out.append((name, value))
    return out


def _tensor_from_proto(t: tensor_pb2.TensorProto):
    if t.version_number == REF_MAGIC:
        return _decode_ref(t)
    if not t.tensor_content:
        return decode_tensor(t)
    return _from_content(_content_layout(t), t.tensor_content)


def decode_message(data, cls, field: int):
    """(``cls`` message without its tensors, [(name, array)]) from ``data``."""
    if len(data) < _SMALL_BYTES:  # protobuf's own parser; copies do not matter
        try:
            msg = cls.FromString(data)
        except message.DecodeError as e:
            raise ValueError(f"malformed {cls.__name__}: {e}") from None
        name = cls.DESCRIPTOR.fields_by_number[field].name
        tensors = [
            (nt.name, _tensor_from_proto(nt.tensor)) for nt in getattr(msg, name)
        ]
        msg.ClearField(name)
        return msg, tensors
    buf = memoryview(data)
    rest: list = []
    tensors = []
    for num, wt, a, b, s in _fields(buf, 0, len(buf)):
        if num == field and wt == 2:
            tensors.append(_decode_named(buf, a, b))
        else:
            rest.append(buf[s:b])
    msg = cls.FromString(b"".join(rest))
    return msg, tensors


# -- RecvTensor and PushTensors streaming ---------------------------------------------
def _tensor_chunks(value, first, chunk_bytes: int):
    """``first`` (a message with ``tensor`` and ``total_bytes``) filled with
    ``value``'s header, then the raw bytes in slices (fields 10-12)."""
    head, raw = _raw_parts(value)
    total = 0 if raw is None else len(raw)
    first.total_bytes = total
    first.tensor.ParseFromString(head)
    yield first.SerializeToString()
    tail = b"".join((_varint(12 << 3), _varint(total)))
    for off in range(0, total, chunk_bytes):
        piece = raw[off : off + chunk_bytes]
        yield b"".join(
            (_len_field(10, len(piece)), piece, _varint(11 << 3), _varint(off), tail)
        )


class _Prefetch:
    """Runs ``chunks`` (a generator of messages) ``depth`` messages ahead in a
    thread: gRPC sends one message of a stream at a time and waits until it
    is out before taking the next, so building (copying) the next chunk
    overlaps sending this one. The thread stops when this iterator is
    exhausted, closed, or dropped (the call ended)."""

    def __init__(self, chunks, depth: int = 2):
        self._queue: queue.Queue = queue.Queue(depth)
        self._stop = threading.Event()
        self._done = False
        # The thread holds the queue and the event, not this object, so that
        # dropping this object stops it.
        threading.Thread(
            target=_prefetch,
            args=(chunks, self._queue, self._stop),
            name="nbdist-chunks",
            daemon=True,
        ).start()

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        item, err = self._queue.get()
        if err is not None:
            self.close()
            raise err
        if item is None:
            self.close()
            raise StopIteration
        return item

    def close(self):
        self._done = True
        self._stop.set()

    def __del__(self):
        self._stop.set()


def _prefetch(chunks, q: queue.Queue, stop: threading.Event):
    def put(item) -> bool:
        while not stop.is_set():  # a full queue.put cannot also wait on stop
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    try:
        for c in chunks:
            if not put((c, None)):
                return
        put((None, None))
    except BaseException as e:  # noqa: BLE001 - re-raised in the consumer
        put((None, e))


def _maybe_prefetch(chunks, total: int, chunk_bytes: int):
    return _Prefetch(chunks) if total > 2 * chunk_bytes else chunks


def recv_tensor_chunks(value, chunk_bytes: int = CHUNK_BYTES):
    """The serialized RecvTensorResponse chunks of ``value``: a header (dtype,
    shape, total size; strings whole), then the raw bytes in slices (built
    ahead in a thread for large values)."""
    first = worker_pb2.RecvTensorResponse(send_start_micros=int(time.time() * 1e6))
    total = value.nbytes if isinstance(value, np.ndarray) else 0
    return _maybe_prefetch(
        _tensor_chunks(value, first, chunk_bytes), total, chunk_bytes
    )


def _push_chunks(tensors, chunk_bytes: int):
    for push_id, value in tensors:
        first = master_pb2.PushTensorsRequest(push_id=push_id)
        yield from _tensor_chunks(value, first, chunk_bytes)


def push_chunks(tensors, chunk_bytes: int = CHUNK_BYTES):
    """The serialized PushTensorsRequest stream of ``tensors`` ([(push id,
    value)]): per tensor a header, then its raw bytes in slices (built ahead
    in a thread for large values)."""
    tensors = list(tensors)
    total = sum(v.nbytes for _, v in tensors if isinstance(v, np.ndarray))
    return _maybe_prefetch(_push_chunks(tensors, chunk_bytes), total, chunk_bytes)


def parse_chunk(data, cls=worker_pb2.RecvTensorResponse):
    """A stream message: ("data", memoryview, offset, total) for byte slices,
    else ("head", ``cls`` message)."""
    buf = memoryview(data)
    piece, offset, total, other = None, 0, 0, False
    for num, wt, a, b, _s in _fields(buf, 0, len(buf)):
        if num == 10 and wt == 2:
            piece = buf[a:b]
        elif num == 11 and wt == 0:
            offset = _read_varint(buf, a, b)[0]
        elif num == 12 and wt == 0:
            total = _read_varint(buf, a, b)[0]
        else:
            other = True
    if piece is not None and not other:
        return ("data", piece, offset, total)
    return ("head", cls.FromString(bytes(buf)))


def parse_push_chunk(data):
    """A PushTensorsRequest message, as ``parse_chunk``."""
    return parse_chunk(data, master_pb2.PushTensorsRequest)


# -- faulting in a destination ahead of the data -----------------------------------
# A fresh large array's pages are mapped by the kernel on first write, which
# costs about as much as copying the data (more in a VM). A helper thread
# asks the kernel to map them (MADV_POPULATE_WRITE, Linux 5.14+: contents are
# left alone, so it may race with the copies) while the chunks arrive.
_POPULATE_MIN_BYTES = 8 << 20
_POPULATE_SLICE = 16 << 20
_MADV_POPULATE_WRITE = 23
_madvise = None


def _load_madvise():
    global _madvise
    if _madvise is None:
        _madvise = False
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.madvise
            fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            fn.restype = ctypes.c_int
            _madvise = fn
        except (OSError, AttributeError):
            pass
    return _madvise


def _populate(flat: np.ndarray):
    fn = _load_madvise()
    if not fn:
        return
    page = 4096
    start = flat.ctypes.data
    end = start + flat.nbytes
    pos = (start + page - 1) & ~(page - 1)
    while pos < end:
        n = min(_POPULATE_SLICE, (end - pos) & ~(page - 1))
        if n <= 0 or fn(pos, n, _MADV_POPULATE_WRITE) != 0:
            return  # unsupported (EINVAL on old kernels) or no memory: stop
        pos += n


def _populate_async(flat: np.ndarray):
    if _load_madvise():
        threading.Thread(
            target=_populate, args=(flat,), name="nbdist-populate", daemon=True
        ).start()


# Large tensors are copied into place by a helper thread (NumPy releases the
# GIL while it copies), so that the receiving thread goes straight back to
# the network for the next chunk.
_ASYNC_COPY_MIN_BYTES = 16 << 20


def _copy_chunks(dest: np.ndarray, q: queue.Queue, done: threading.Event):
    try:
        while True:
            item = q.get()
            if item is None:
                return
            offset, piece = item
            dest[offset : offset + len(piece)] = np.frombuffer(piece, np.uint8)
    finally:
        done.set()


class ChunkReceiver:
    """Assembles one tensor from a header and in-order byte slices into a
    preallocated array (``MemoryError`` if it cannot be allocated).
    ``admit(nbytes)``, if given, may refuse a size before it is allocated."""

    def __init__(self, admit=None):
        self._admit = admit
        self.value: np.ndarray | None = None
        self._bytes = None
        self._total = -1
        self._received = 0
        self._copies: queue.Queue | None = None
        self._copied: threading.Event | None = None

    def __del__(self):
        if self._copies is not None and not self._copied.is_set():
            self._copies.put(None)  # let the copier thread end

    def add(self, chunk) -> None:
        if chunk[0] == "head":
            if self._total >= 0:
                raise ValueError("tensor stream has two headers")
            msg = chunk[1]
            if msg.total_bytes < 0:
                raise ValueError("negative total_bytes")
            self._total = msg.total_bytes
            if msg.total_bytes == 0:
                self.value = decode_tensor(msg.tensor)
                return
            dt = tensor_util.numpy_dtype_from_enum(msg.tensor.dtype)
            shape = tensor_util.shape_from_proto(msg.tensor.tensor_shape)
            if (
                dt.kind == "O"
                or shape is None
                or any(d is None for d in shape)
                or math.prod(shape) * dt.itemsize != msg.total_bytes
            ):
                raise ValueError("tensor stream header does not match its size")
            if self._admit is not None:
                self._admit(msg.total_bytes)
            try:
                self.value = np.empty(shape, dtype=dt.newbyteorder("<"))
            except ValueError as e:  # "array is too big"
                raise MemoryError(str(e)) from None
            self._bytes = self.value.reshape(-1).view(np.uint8)
            if msg.total_bytes >= _POPULATE_MIN_BYTES:
                _populate_async(self._bytes)
            if msg.total_bytes >= _ASYNC_COPY_MIN_BYTES:
                self._copies = queue.Queue(4)
                self._copied = threading.Event()
                threading.Thread(
                    target=_copy_chunks,
                    args=(self._bytes, self._copies, self._copied),
                    name="nbdist-copy",
                    daemon=True,
                ).start()
            return
        _, piece, offset, total = chunk
        if (
            self._bytes is None
            or total != self._total
            or offset != self._received
            or offset + len(piece) > total
        ):
            raise ValueError("tensor stream chunk does not fit the tensor")
        if self._copies is not None:
            self._copies.put((offset, piece))
        else:
            self._bytes[offset : offset + len(piece)] = np.frombuffer(piece, np.uint8)
        self._received += len(piece)

    @property
    def complete(self) -> bool:
        return self.value is not None and (
            self._bytes is None or self._received == self._total
        )

    def result(self) -> np.ndarray:
        if not self.complete:
            raise ValueError(
                f"tensor stream ended after {self._received} of {self._total} bytes"
            )
        if self._copies is not None:
            self._copies.put(None)
            self._copied.wait()
            self._copies = None
        v = self.value
        if v.dtype != v.dtype.newbyteorder("="):
            v = v.astype(v.dtype.newbyteorder("="))
        if v.dtype == np.bool_ and v.size and v.view(np.uint8).max() > 1:
            raise ValueError("bool tensor holds bytes other than 0 and 1")
        return v


# -- RecvTensorUnary -------------------------------------------------------------------
PENDING = worker_pb2.RecvTensorResponse(pending=True).SerializeToString()


def encode_recv_response(value=None, ref: tuple[str, int] | None = None,
                         extras=(), park=None) -> bytes:
    """A RecvTensorResponse with the whole ``value`` in ``tensor`` (one copy of
    its bytes), or with a reference (``ref``: key, step id) to a parked one;
    ``extras`` ([(key, value)]) in ``extra``, large ones parked with ``park``."""
    if ref is not None:
        tensor = _ref_head(value, *ref)
    else:
        head, raw = _raw_parts(value)
        tensor = head if raw is None else b"".join((head, _len_field(4, len(raw)), raw))
    main = b"".join((_len_field(1, len(tensor)), tensor))
    if not extras:
        return main
    return main + encode_message(_EMPTY_RECV_RESPONSE, 14, extras, park=park)


_EMPTY_RECV_RESPONSE = worker_pb2.RecvTensorResponse()


def decode_recv_response(data, extras: list | None = None):
    """A RecvTensorUnary answer: PENDING, a ``TensorRef``, or a fresh array;
    its ``extra`` values (arrays or ``TensorRef``s) appended to ``extras``."""
    buf = memoryview(data)
    value = None
    pending = False
    for num, wt, a, b, _s in _fields(buf, 0, len(buf)):
        if num == 1 and wt == 2:
            value = _decode_tensor_field(buf, a, b)
        elif num == 13 and wt == 0:
            pending = bool(_read_varint(buf, a, b)[0])
        elif num == 14 and wt == 2 and extras is not None:
            extras.append(_decode_named(buf, a, b))
    if pending:
        return PENDING
    if value is None:
        raise ValueError("RecvTensorUnary answer has no tensor")
    return value


# -- step stats ----------------------------------------------------------------------
def stats_to_proto(stats, task: str) -> step_stats_pb2.StepStats:
    """The worker's stats tuples as a StepStats (one DeviceStepStats per device)."""
    out = step_stats_pb2.StepStats()
    by_device = {}
    for name, op_type, device, start, end, out_bytes, tid in stats or ():
        ds = by_device.get(device)
        if ds is None:
            ds = by_device[device] = out.dev_stats.add(device=device, task=task)
        ns = ds.node_stats.add(
            node_name=name,
            op_type=op_type,
            all_start_micros=start,
            op_end_rel_micros=end - start,
            all_end_rel_micros=end - start,
            thread_id=tid & 0xFFFFFFFF,
        )
        for slot, nbytes in enumerate(out_bytes):
            ns.output.add(slot=slot).tensor_description.allocated_bytes = nbytes
    return out


def stats_from_proto(proto: step_stats_pb2.StepStats) -> list:
    """The inverse of ``stats_to_proto``: a list of worker stats tuples."""
    out = []
    for ds in proto.dev_stats:
        for ns in ds.node_stats:
            out.append(
                (
                    ns.node_name,
                    ns.op_type,
                    ds.device,
                    ns.all_start_micros,
                    ns.all_start_micros + ns.all_end_rel_micros,
                    [o.tensor_description.allocated_bytes for o in ns.output],
                    ns.thread_id,
                )
            )
    return out
