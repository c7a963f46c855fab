"""All-reduce chunks pushed to a peer over a framed link and consumed in place.

A pulled chunk costs a request, a copy into the sender's staging segment, a
copy out into a fresh array on the receiver and, there, the reduction: three
passes over the bytes and a round trip per chunk. A pushed chunk (``cpush``)
is copied once, by the sender, into its connection's staging segment (a memfd
both ends map); the receiver's service thread hands a view of that segment to
the task's ``CollectiveExecutor.mailbox`` and the collective reduces straight
from it into its result (``np.add(view, mine, out=result)``). The answer goes
back once the chunk was consumed, so the segment is free again when the sender
hears it, and a sender never runs more than one chunk ahead per connection.

The sender waits for that answer polling its step's cancellation: a cancelled
step closes the connection, and the receiver (seeing the hang-up) withdraws the
chunk.

A push may also name where the receiver writes its answer: ``into``, a span of
the sender's result on a ``shared_flat`` (a memfd, sent once per connection
and mapped by the peer: ``wire.Link.offer_result``; a
``runtime.collective_buffers.shared_flat``). Two members then each
reduce half of the tensor and write it into both results (``collective_ring``'s
"halves"): 3.5 passes over the tensor's bytes per member instead of 5.
"""

from __future__ import annotations

import math
import os
import select
import time

import numpy as np

from nbdist import errors
from nbdist.runtime.collective_buffers import shared_span
from nbdist.runtime.framed.common import ChannelBroken, went_away
from nbdist.runtime.framed.wire import Outgoing, wire_dtype
from nbdist.runtime.timeouts import ms_from_seconds, step_time_left, whole_ms

__all__ = ["PushedChunk", "finish_push", "serve_push", "start_push"]

_POLL_S = 0.1
_NUMERIC = "biuf"


def start_push(ch, step, exec_id: int, key: str, value: np.ndarray, t0: float,
               into: np.ndarray | None = None):
    """Sends ``value`` as chunk ``key`` of execution ``exec_id`` (one copy, into
    the connection's segment); ``finish_push`` waits for it to be consumed.
    ``into``: a span of a ``shared_flat`` the receiver is to write its answer
    in. ChannelBroken when nothing went out."""
    out = Outgoing()
    out.add(key, value)
    if into is not None:
        span = shared_span(into)
        if span is None:
            raise ValueError("a push's answer goes into a shared_flat's span")
        out.answer_into(span[0], span[1], into.nbytes)
    header = {"exec": exec_id, "key": key, "t": out.entries, "t0": t0,
              "timeout_ms": ms_from_seconds(step_time_left(step))}
    return ch.send("cpush", header, out)


def finish_push(ch, step, sent, task: str) -> float:
    """Waits until the peer consumed the chunk (or refused it: its error);
    returns when. Closes the connection if the step is cancelled meanwhile."""
    sock, link = sent[1]
    # poll, not select: a process with many connections has descriptors past
    # select's 1,024 (32 in-process ring members do).
    poller = select.poll()
    try:
        poller.register(sock, select.POLLIN)
    except (OSError, ValueError) as e:
        raise went_away(task, "a collective push", ChannelBroken(str(e))) from None
    while True:
        try:
            ready = poller.poll(whole_ms(_POLL_S))
        except OSError as e:
            raise went_away(task, "a collective push", ChannelBroken(str(e))) from None
        if ready:
            break
        try:
            step.check()
        except errors.OpError:
            sock.close()  # the peer sees the hang-up and withdraws the chunk
            link.close()
            raise
    try:
        ch.receive(sent)
    except ChannelBroken as e:
        raise went_away(task, "a collective push", e) from None
    except errors.OpError:
        link.forget_offers()  # refused before the peer kept what it named
        raise
    return time.time()


class PushedChunk:
    """A chunk pushed to ``task``: calling it waits until the peer consumed it;
    ``abandon()`` drops the connection instead (the peer withdraws the chunk)."""

    def __init__(self, ch, step, sent, task: str):
        self._ch, self._step, self._sent, self._task = ch, step, sent, task
        self._done = False

    def __call__(self) -> float:
        self._done = True
        return finish_push(self._ch, self._step, self._sent, self._task)

    def abandon(self) -> None:
        if not self._done:
            self._done = True
            sock, link = self._sent[1]
            sock.close()
            link.close()


def serve_push(handler, header: dict, payload: np.ndarray, fds: list, link,
               on_hangup) -> tuple[dict, None]:
    """The receiving side of ``cpush``: the chunk as a view of the sender's
    segment, handed to ``handler.push_collective`` (the task's
    ``WorkerHandler``); answers once consumed."""
    m = None
    try:
        entries = header.get("t") or ()
        if len(entries) != 1:
            raise errors.InvalidArgumentError(
                None, None, "a collective push carries exactly one tensor")
        e = entries[0]
        dtype = wire_dtype(e["d"])
        shape = tuple(int(d) for d in e["s"])
        nbytes = int(e["n"])
        if dtype.kind not in _NUMERIC or min(shape, default=0) < 0 or \
                math.prod(shape) * dtype.itemsize != nbytes:
            raise ValueError(f"{nbytes} bytes are not a {dtype} of shape {shape}")
        if "g" in e:
            m = link.receive(header["seg"], fds)
            start = int(e["g"])
            if start < 0 or start + nbytes > len(m):
                raise ValueError("the chunk lies outside its segment")
            view = np.frombuffer(m, dtype=dtype, count=math.prod(shape),
                                 offset=start).reshape(shape)
        elif nbytes:
            start = int(e["o"])
            if start < 0 or start + nbytes > payload.size or start % 64:
                raise ValueError("the chunk lies outside the frame")
            view = payload[start:start + nbytes].view(dtype).reshape(shape)
        else:
            view = np.empty(shape, dtype)
        meta = {"t0": float(header.get("t0") or 0.0)}
        if "into" in header:
            if not link.shares_memory:
                raise ValueError("an answer into shared memory over a link "
                                 "that shares none")
            if int(header["into"]["n"]) != nbytes:
                raise ValueError("an answer's span must be the size of its chunk")
            window, at = link.peer_result(header["into"], fds)
            meta["into"] = np.frombuffer(window, dtype=dtype, count=math.prod(shape),
                                         offset=at).reshape(shape)
    finally:
        for fd in fds:
            os.close(fd)
    try:
        handler.push_collective(int(header["exec"]), str(header["key"]), view, meta,
                                int(header.get("timeout_ms") or 0), on_hangup)
    finally:
        del view, meta
        if m is not None and header["seg"].get("once"):
            try:
                m.close()
            except BufferError:  # a view still lives: the mapping goes with it
                pass
    return {}, None
