"""Frames of the framed protocol: a small JSON header, raw tensor bytes, and
(over a link that shares memory: the same-host socket) shared-memory segments
passed as file descriptors; over a link that does not (TCP), every tensor is
in the payload (``Link(shares_memory=False)``).

A frame is ``u32 header length, u64 payload length, header, payload``. Tensors
under ``SEGMENT_MIN_BYTES`` travel in the payload, read straight into the
receiver's array. Larger ones go through the sending side's staging segments:
``memfd``s owned by the connection (a ``Link``), each sent to the peer once
(``SCM_RIGHTS``) and mapped by both; the sender copies a tensor in. A request's
tensors are copied out into fresh arrays (transparent huge pages); an answer's
are read in place: its segment is lent to the client until the client's views
of it are gone and a later request names it back (``ret``), and meanwhile the
connection's other segment carries the next answer. Segments are freed with
their connection, and one over ``KEEP_SEGMENT_BYTES`` (or beyond the process's
budget) is used for one frame only (an answer's, from 2 MiB, read in place too). A memfd has no name in ``/dev/shm``: the
kernel frees it when its last descriptor and mapping go, so a process that dies
leaks nothing, and only a peer it was sent to (over a connection whose ends
proved the cluster's secret: ``framed.handshake``) can reach it. Nothing is
pickled: headers are JSON, string tensors travel as ``TensorProto`` bytes.
"""

from __future__ import annotations

import array
import collections
import fcntl
import json
import math
import mmap
import os
import socket
import struct
import threading
import weakref

import numpy as np
from google.protobuf import message

from nbdist import errors
from nbdist.framework import tensor_util
from nbdist.proto import tensor_pb2

SEGMENT_MIN_BYTES = 1 << 18  # smaller tensors are cheaper through the socket
KEEP_SEGMENT_BYTES = 1 << 29  # a connection keeps a staging segment up to this
STAGING_BUDGET_BYTES = 1 << 30  # ... and the process this much in all
_HUGE_BYTES = 1 << 21
_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)
MAX_HEADER_BYTES = 1 << 20
MAX_FDS = 64  # segments in one frame
PEER_RESULTS_KEPT = 4  # peers' result buffers a connection keeps mapped
# Kept staging segments per connection: while the peer reads one frame's
# tensors in place (lent), the next frame goes through the other.
POOL_SEGMENTS = 2
MAX_RETURNS = 64  # segment ids a request's ``ret`` may name
_WINDOWS_KEPT = 8  # spans of one peer result kept mapped (its pieces)
_PREFIX = struct.Struct("<IQ")
_ALIGN = 64
_NUMERIC_KINDS = "biufc"
# The dtypes a frame may name (``dtype.str`` of NumPy's numeric types): looked
# up, never parsed — NumPy's parser takes record and comma strings
# ("f4," is a struct; "," raises SyntaxError).
_WIRE_DTYPES = {np.dtype(c).str: np.dtype(c) for c in "?bBhHiIlLqQefdgFDG"}
_WIRE_DTYPES.update({d.newbyteorder(">").str: d.newbyteorder(">")
                     for d in list(_WIRE_DTYPES.values())})


def wire_dtype(name) -> np.dtype:
    """The numeric dtype a frame names (``"<f4"``); ValueError for any other."""
    dtype = _WIRE_DTYPES.get(name) if isinstance(name, str) else None
    if dtype is None:
        raise ValueError(f"{str(name)[:40]!r} is not a numeric dtype")
    return dtype
# One encoder and decoder for every frame (json.dumps with separators builds
# an encoder per call).
_encode_header = json.JSONEncoder(separators=(",", ":")).encode
_decode_header = json.JSONDecoder().decode


class ChannelClosed(ConnectionError):
    """The peer closed the connection (or died) before a whole frame arrived."""


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _new_segment(nbytes: int) -> tuple[int, mmap.mmap]:
    fd = os.memfd_create("nbdist-tensor", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, nbytes)
        return fd, mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
    except BaseException:
        os.close(fd)
        raise


def fresh_array(dtype: np.dtype, shape: tuple) -> np.ndarray:
    """A new writable array; a large one on transparent huge pages (faulting
    in 2 MiB at a time is several times faster than 4 KiB pages)."""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < _HUGE_BYTES:
        return np.empty(shape, dtype)
    m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if _MADV_HUGEPAGE is not None:
        m.madvise(_MADV_HUGEPAGE)
    return np.frombuffer(m, dtype=dtype).reshape(shape)


def _close_mapping(m: mmap.mmap) -> None:
    try:
        m.close()
    except BufferError:  # a view still lives (an error's traceback holds one):
        pass  # the mapping goes with the last of them


class _Staging:
    """Bytes of warm staging segments this process keeps, across connections."""

    def __init__(self, budget: int):
        self.budget = budget
        self.kept = 0
        self.lock = threading.Lock()

    def reserve(self, nbytes: int) -> bool:
        with self.lock:
            if self.kept + nbytes > self.budget:
                return False
            self.kept += nbytes
            return True

    def release(self, nbytes: int) -> None:
        with self.lock:
            self.kept -= nbytes


_staging = _Staging(STAGING_BUDGET_BYTES)


class _Segment:
    """A kept staging segment of a ``Link``: ``sent`` once its descriptor went
    to the peer, ``lent`` while the peer still reads a frame staged in it."""

    __slots__ = ("fd", "id", "lent", "m", "sent", "size")

    def __init__(self, fd: int, m: mmap.mmap, size: int, seg_id: int):
        self.fd, self.m, self.size, self.id = fd, m, size, seg_id
        self.sent = self.lent = False


class Link:
    """One connection's shared memory: the segments this side sends through
    (kept, reused frame after frame) and the peer's, mapped here. A link of a TCP
    connection (``shares_memory=False``: the peer is on another host) has none:
    every tensor travels in the frame's payload.

    The serving side of a connection (``serves``) lends its answers' segments:
    the client keeps the tensors as views of the segment, without a copy, and
    names the segment in a later request's ``ret`` once nothing uses them. A
    lent segment is not written meanwhile: the next answer goes through the
    link's other kept segment, or a one-off one."""

    def __init__(self, shares_memory: bool = True, serves: bool = False):
        self.shares_memory = shares_memory
        self.serves = serves
        self._pool: list[_Segment] = []
        self._ids = 0
        self._peer_segments: collections.OrderedDict = collections.OrderedDict()
        # Lent segments of the peer this side no longer reads (appended by
        # finalizers, on whichever thread drops the last view).
        self.returns: collections.deque = collections.deque()
        self._results_sent: collections.OrderedDict = collections.OrderedDict()
        self._peer_results: collections.OrderedDict = collections.OrderedDict()

    def stage(self, nbytes: int) -> tuple[mmap.mmap, dict, int | None, bool]:
        """(segment to copy into, header entry, fd to attach or None, one-off)."""
        seg = next((s for s in self._pool if not s.lent and s.size >= nbytes), None)
        if seg is None:
            seg = self._new_kept(nbytes)
        if seg is None:  # too large to keep, over the budget, or every kept one lent
            fd, m = _new_segment(max(nbytes, SEGMENT_MIN_BYTES))
            self._ids += 1
            return m, {"id": self._ids, "size": len(m), "once": True}, fd, True
        entry = {"id": seg.id, "size": seg.size}
        attach = None
        if not seg.sent:
            attach, seg.sent = seg.fd, True
            # What the peer keeps mapped: a segment dropped here is gone there.
            entry["live"] = [s.id for s in self._pool]
        # Lent only when the frame fills half of it: a client keeping a small
        # tensor would otherwise hold a large segment's memory.
        if self.serves and 2 * nbytes >= seg.size:
            seg.lent = True
            entry["lend"] = 1
        return seg.m, entry, attach, False

    def _new_kept(self, nbytes: int) -> _Segment | None:
        for seg in [s for s in self._pool if not s.lent and s.size < nbytes]:
            self._drop(seg)  # too small for this frame: made again, larger
        size = max(nbytes, SEGMENT_MIN_BYTES)
        if len(self._pool) >= POOL_SEGMENTS or size > KEEP_SEGMENT_BYTES or \
                not _staging.reserve(size):
            return None
        try:
            fd, m = _new_segment(size)
        except BaseException:
            _staging.release(size)
            raise
        self._ids += 1
        self._pool.append(_Segment(fd, m, size, self._ids))
        return self._pool[-1]

    def returned(self, ids) -> None:
        """The peer no longer reads these lent segments (a request's ``ret``;
        anything else there is ignored)."""
        if isinstance(ids, list):
            ids = {i for i in ids[:MAX_RETURNS] if isinstance(i, int)}
            for seg in self._pool:
                if seg.id in ids:
                    seg.lent = False

    def take_returns(self) -> list[int]:
        """The peer's lent segments to name in the next request's ``ret``."""
        ids = []
        while self.returns:  # only this connection's user takes
            ids.append(self.returns.popleft())
        return ids

    def receive(self, seg: dict, fds: list) -> mmap.mmap:
        """The mapping a frame's ``seg`` entry names (its fd, if new, in ``fds``)."""
        seg_id, size = int(seg["id"]), int(seg["size"])
        if "fd" in seg:
            fd = fds[int(seg["fd"])]
            if os.fstat(fd).st_size < size:
                raise ValueError(f"a segment of {os.fstat(fd).st_size} bytes is "
                                 f"sent for {size}")
            m = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
            if seg.get("once"):
                return m
            live = seg.get("live")
            live = set(live[:POOL_SEGMENTS]) if isinstance(live, list) else set()
            for old_id in list(self._peer_segments):  # (views keep their memory)
                if old_id == seg_id or old_id not in live:
                    _close_mapping(self._peer_segments.pop(old_id))
            self._peer_segments[seg_id] = m
            while len(self._peer_segments) > POOL_SEGMENTS:  # a peer naming more
                _close_mapping(self._peer_segments.popitem(last=False)[1])
            return m
        m = self._peer_segments.get(seg_id)
        if m is None:
            raise ValueError(f"segment {seg_id} was never sent on this connection")
        return m

    def offer_result(self, result) -> tuple[dict, int | None]:
        """(header entry, fd to attach or None) naming ``result`` (a
        ``collective_buffers.SharedResult``), its descriptor sent once per
        connection."""
        entry = {"id": result.result_id, "size": len(result)}
        if result.result_id in self._results_sent:
            self._results_sent.move_to_end(result.result_id)
            return entry, None
        self._results_sent[result.result_id] = True
        while len(self._results_sent) > PEER_RESULTS_KEPT:  # as the peer forgets
            self._results_sent.popitem(last=False)
        return entry, result.fd

    def forget_offers(self) -> None:
        """Sends the next result named here with its descriptor again (a push
        was refused: the peer may not have kept the one it carried)."""
        self._results_sent.clear()

    def peer_result(self, entry: dict, fds: list) -> tuple[mmap.mmap, int]:
        """(a writable mapping of the span an ``into`` entry names in the
        peer's result, the span's offset in it). The result's descriptor is
        kept for the pushes that name it again; only the pages of the span are
        mapped, so a peer cannot make this side map more than its chunk."""
        result_id, size = int(entry["id"]), int(entry["size"])
        start, nbytes = int(entry["o"]), int(entry["n"])
        if start < 0 or nbytes < 0 or start + nbytes > size:
            raise ValueError("the answer's span lies outside its result")
        if "fd" in entry:
            index = int(entry["fd"])
            if not 0 <= index < len(fds):
                raise ValueError("the answer's result names no descriptor")
            fd = fds[index]
            if os.fstat(fd).st_size < size:
                raise ValueError(f"a result of {os.fstat(fd).st_size} bytes is "
                                 f"sent for {size}")
            # Written into: a peer that could shrink it would fault this task.
            try:
                seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
            except OSError:  # not a memfd
                seals = 0
            if not seals & fcntl.F_SEAL_SHRINK:
                raise ValueError("a result must be sealed against shrinking")
            self._forget_result(result_id)
            self._peer_results[result_id] = (os.dup(fd), size, {})
            while len(self._peer_results) > PEER_RESULTS_KEPT:
                self._forget_result(next(iter(self._peer_results)))
        kept = self._peer_results.get(result_id)
        if kept is None:
            raise ValueError(f"result {result_id} was never sent on this connection")
        self._peer_results.move_to_end(result_id)
        fd, sent_size, windows = kept
        if start + nbytes > sent_size:
            raise ValueError("the answer's span lies outside its result")
        base = start - start % mmap.ALLOCATIONGRANULARITY
        length = max(1, start + nbytes - base)
        m = windows.get((base, length))
        if m is None:
            m = mmap.mmap(fd, length, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE,
                          offset=base)
            windows[(base, length)] = m
            while len(windows) > _WINDOWS_KEPT:
                _close_mapping(windows.pop(next(iter(windows))))
        return m, start - base

    def _forget_result(self, result_id: int) -> None:
        kept = self._peer_results.pop(result_id, None)
        if kept is not None:
            fd, _, windows = kept
            for m in windows.values():
                _close_mapping(m)
            os.close(fd)

    def _drop(self, seg: _Segment) -> None:
        self._pool.remove(seg)
        _close_mapping(seg.m)
        os.close(seg.fd)
        _staging.release(seg.size)

    def close(self):
        for seg in list(self._pool):
            self._drop(seg)
        while self._peer_segments:
            _close_mapping(self._peer_segments.popitem()[1])
        for result_id in list(self._peer_results):
            self._forget_result(result_id)


class Outgoing:
    """Tensors packed for one frame: header entries, payload buffers, and the
    large arrays that go through the sender's staging segment."""

    def __init__(self):
        self.entries: list[dict] = []
        self.buffers: list = []
        self.size = 0
        # (segment offset, array, its entry)
        self.staged: list[tuple[int, np.ndarray, dict]] = []
        self.staged_bytes = 0
        self.into: tuple | None = None  # (SharedResult, offset, nbytes)

    def answer_into(self, result, offset: int, nbytes: int) -> None:
        """Asks the receiver to write its answer into ``nbytes`` at ``offset``
        of ``result`` (a ``collective_buffers.SharedResult``)."""
        self.into = (result, offset, nbytes)

    def add(self, name: str, value) -> None:
        arr = tensor_util.as_value_array(value)
        entry = {"k": name}
        if arr.dtype.kind not in _NUMERIC_KINDS:
            data = tensor_util.make_tensor_proto(arr).SerializeToString()
            entry.update(d="proto", n=len(data))
            self._inline(entry, data)
        else:
            if arr.dtype.byteorder == ">":
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            if not arr.flags.c_contiguous:  # (ascontiguousarray makes 0-d 1-d)
                arr = np.ascontiguousarray(arr)
            entry.update(d=arr.dtype.str, s=list(arr.shape), n=arr.nbytes)
            if arr.nbytes >= SEGMENT_MIN_BYTES:
                entry["g"] = self.staged_bytes
                self.staged.append((self.staged_bytes, arr, entry))
                self.staged_bytes += _aligned(arr.nbytes)
            elif arr.nbytes:
                self._inline(entry, memoryview(arr.reshape(-1).view(np.uint8)))
        self.entries.append(entry)

    def _inline(self, entry: dict, data) -> None:
        entry["o"] = self.size
        pad = _aligned(len(data)) - len(data)
        self.buffers.append(data)
        if pad:
            self.buffers.append(bytes(pad))
        self.size += len(data) + pad

    def inline_staged(self) -> None:
        """Moves the large tensors into the payload (no segment to stage them
        in: a TCP connection); sent from the arrays themselves, no copy."""
        for _offset, arr, entry in self.staged:
            del entry["g"]
            self._inline(entry, memoryview(arr.reshape(-1).view(np.uint8)))
        self.staged, self.staged_bytes = [], 0


def send_frame(sock: socket.socket, header: dict, out: Outgoing | None = None,
               link: Link | None = None) -> None:
    """Sends one frame; ``out``'s large tensors through ``link``'s segment."""
    fds, once = [], None
    if out is not None and out.staged and not (link is None or link.shares_memory):
        out.inline_staged()
    if out is not None and out.staged:
        m, seg, fd, one_off = link.stage(out.staged_bytes)
        for offset, arr, _entry in out.staged:
            dst = np.frombuffer(m, dtype=arr.dtype, count=arr.size, offset=offset)
            np.copyto(dst.reshape(arr.shape), arr, casting="no")
            del dst
        if fd is not None:
            seg["fd"] = 0
            fds.append(fd)
        if one_off:
            once = (m, fd)
        header["seg"] = seg
    if out is not None and out.into is not None and link is not None and \
            link.shares_memory:
        result, offset, nbytes = out.into
        entry, fd = link.offer_result(result)
        entry.update(o=offset, n=nbytes)
        if fd is not None:
            entry["fd"] = len(fds)
            fds.append(fd)
        header["into"] = entry
    head = _encode_header(header).encode()
    size = out.size if out is not None else 0
    parts = [_PREFIX.pack(len(head), size), head]
    if out is not None:
        parts.extend(out.buffers)
    try:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] \
            if fds else []
        sent = sock.sendmsg(parts, anc)
        total = sum(len(p) for p in parts)
        if sent < total:  # the rest of a large payload
            _send_rest(sock, parts, sent)
    finally:
        if once is not None:  # the peer holds its own descriptor now
            once[0].close()
            os.close(once[1])


def _send_rest(sock, parts, skip: int) -> None:
    for part in parts:
        view = memoryview(part).cast("B")
        if skip >= len(view):
            skip -= len(view)
            continue
        sock.sendall(view[skip:])
        skip = 0


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ChannelClosed("the peer closed the connection")
        got += n


def recv_frame(sock: socket.socket, max_payload: int,
               max_header: int = MAX_HEADER_BYTES) -> tuple[dict, np.ndarray, list]:
    """(header, payload, segment fds) of the next frame. Refuses a header or
    payload over its bound before reading it."""
    prefix = bytearray(_PREFIX.size)
    n, anc, _flags, _addr = sock.recvmsg_into(
        [prefix], socket.CMSG_SPACE(MAX_FDS * 4))
    if n == 0:
        raise ChannelClosed("the peer closed the connection")
    fds = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(array.array("i", data[: len(data) - len(data) % 4]))
    try:
        if n < len(prefix):
            _recv_exact(sock, memoryview(prefix)[n:])
        head_len, size = _PREFIX.unpack(prefix)
        if head_len > max_header or size > max_payload:
            raise errors.ResourceExhaustedError(
                None, None, f"same-host frame of {head_len} + {size} bytes exceeds "
                f"the limits ({max_header} + {max_payload})")
        head = bytearray(head_len)
        _recv_exact(sock, memoryview(head))
        payload = np.empty(size, np.uint8)
        if size:
            _recv_exact(sock, memoryview(payload))
        header = _decode_header(head.decode())
        if not isinstance(header, dict):
            raise ValueError("a frame header must be an object")  # noqa: TRY004 - malformed input
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return header, payload, fds


def check_sizes(entries, max_tensor_bytes: int, max_total_bytes: int) -> None:
    """Refuses a frame whose tensors would pass the bounds, before any of them
    is allocated (ResourceExhaustedError, naming the tensor)."""
    total = 0
    for e in entries:
        nbytes = int(e.get("n", 0)) if isinstance(e, dict) else 0
        total += nbytes
        if nbytes > max_tensor_bytes:
            raise errors.ResourceExhaustedError(
                None, None, f"same-host tensor {str(e.get('k'))[:200]} of {nbytes} "
                f"bytes exceeds the server's max_tensor_bytes = {max_tensor_bytes}")
        if total > max_total_bytes:
            raise errors.ResourceExhaustedError(
                None, None, f"same-host request of {total} bytes (at tensor "
                f"{str(e.get('k'))[:200]}) exceeds the server's max_request_bytes "
                f"(or max_pushed_bytes_per_client) = {max_total_bytes}")


def decode_tensors(entries, payload: np.ndarray, fds: list, seg=None,
                   link: Link | None = None) -> list[tuple[str, object]]:
    """[(name, array)] of a frame's tensor entries (``seg``: its staging
    segment, mapped through ``link``); closes ``fds``. Raises ValueError for an
    entry that does not fit the frame.

    A tensor of an answer (on a client's link) in a lent segment, or in a
    one-off segment of 2 MiB or more, is a view of it, not a copy, when it
    fills at least a quarter of the segment; a lent segment goes back
    (``link.returns``) when the last view of it is gone."""
    out = []
    m = base = None
    in_place = False
    try:
        for e in entries:
            name, kind, nbytes = str(e["k"]), e["d"], int(e["n"])
            if kind == "proto":
                start = int(e["o"])
                if start < 0 or start + nbytes > payload.size:
                    raise ValueError(f"tensor {name} lies outside the frame")
                try:
                    proto = tensor_pb2.TensorProto.FromString(
                        payload[start:start + nbytes].tobytes())
                except message.DecodeError as e:
                    raise ValueError(f"tensor {name}: {e}") from None
                value = tensor_util.make_ndarray(proto)
                out.append((name, value if value.flags.writeable else value.copy()))
                continue
            dtype = wire_dtype(kind)
            shape = tuple(int(d) for d in e["s"])
            if dtype.kind not in _NUMERIC_KINDS or min(shape, default=0) < 0 or \
                    math.prod(shape) * dtype.itemsize != nbytes:
                raise ValueError(f"tensor {name}: {nbytes} bytes are not a {dtype} "
                                 f"of shape {list(shape)}")
            if "g" in e:
                if m is None:
                    if seg is None or link is None:
                        raise ValueError(f"tensor {name} names no segment")
                    m = link.receive(seg, fds)
                    # A one-off segment under 2 MiB is copied as a lent one
                    # is not: each kept view would be a mapping of its own.
                    # A request's tensors are copied: a client could still
                    # write into (or shrink) the segment it sent them in.
                    in_place = not link.serves and (bool(seg.get("lend")) or (
                        bool(seg.get("once")) and len(m) >= _HUGE_BYTES))
                start = int(e["g"])
                if start < 0 or start + nbytes > len(m) or start % _ALIGN:
                    raise ValueError(f"tensor {name} lies outside its segment")
                if in_place and 4 * nbytes >= len(m):
                    if base is None:  # every view's base: its life is theirs
                        base = np.frombuffer(m, np.uint8)
                    out.append((name, base[start:start + nbytes].view(dtype)
                                .reshape(shape)))
                    continue
                value = fresh_array(dtype, shape)
                src = np.frombuffer(m, dtype=dtype, count=math.prod(shape),
                                    offset=start)
                np.copyto(value.reshape(-1), src)
                del src
                out.append((name, value))
            elif nbytes:
                start = int(e["o"])
                if start < 0 or start + nbytes > payload.size or start % _ALIGN:
                    raise ValueError(f"tensor {name} lies outside the frame")
                out.append((name, payload[start:start + nbytes].view(dtype)
                            .reshape(shape)))
            else:
                out.append((name, np.empty(shape, dtype)))
    except (KeyError, TypeError, IndexError) as e:
        raise ValueError(f"malformed tensor entry: {e!r}") from None
    finally:
        if m is not None and seg.get("lend") and not link.serves:
            if base is None:
                link.returns.append(int(seg["id"]))
            else:
                weakref.finalize(base, link.returns.append, int(seg["id"]))
        if m is not None and seg.get("once"):
            _close_mapping(m)  # a view's mapping goes with the view
        base = None
        for fd in fds:
            os.close(fd)
    return out


def error_header(e: errors.OpError) -> dict:
    """An error as a reply: its code, message and op's name (which callers such
    as ``ClusterCoordinator`` use to tell whose closure failed)."""
    op = getattr(e.op, "name", e.op)
    return {"error": {"code": int(e.error_code), "message": e.message,
                      "op": str(op) if op else ""}}


def raise_if_error(header: dict) -> None:
    err = header.get("error")
    if err:
        raise errors.make_error(int(err.get("code", 2)), str(err.get("message", "")),
                                str(err.get("op") or "") or None)


__all__ = [
    "SEGMENT_MIN_BYTES",
    "ChannelClosed",
    "Link",
    "Outgoing",
    "check_sizes",
    "decode_tensors",
    "error_header",
    "fresh_array",
    "raise_if_error",
    "recv_frame",
    "send_frame",
]
