"""A task's framed paths to the other tasks of its cluster: ``FramedPeers``
(subclassed by each link policy: ``channel(task)``) makes each peer's
``FramedStepPath`` (its channel when the link reaches the peer: RunGraph,
aborts and tensors; the rest of a peer's calls stay on its protocol's client)
and the ``TensorTransport`` over them. The step paths are kept (and closed) by
``runtime.router.PeerRouter``, the one cache of a task's ways to its peers:
nothing here caches a channel by task."""

from __future__ import annotations

import collections
import threading
import time

from nbdist import errors
from nbdist.runtime.framed.channel import FramedChannel
from nbdist.runtime.framed.collective_push import PushedChunk, start_push
from nbdist.runtime.framed.common import (
    RETRY_CONNECT_S,
    ChannelBroken,
    went_away,
)
from nbdist.runtime.framed.handshake import Refused
from nbdist.runtime.framed.wire import Outgoing
from nbdist.runtime.recv_poll import PENDING, poll_recv
from nbdist.runtime.tensor_store import SiblingTensors
from nbdist.runtime.timeouts import ms_from_seconds

RETRY_REFUSED_S = 60.0  # a peer that refused our credentials is tried again after


class FramedPeers:
    """How one task reaches its peers over one link: ``step_path(task)`` makes
    a peer's path (the router keeps it), ``tensor_transport`` carries tensors
    over the router's paths. ``calls`` counts the calls sent, by (peer, op).
    A link policy's subclass says how to reach a peer (``channel``) and
    whether all-reduce chunks are pushed (``pushes_collectives``)."""

    pushes_collectives = False

    def __init__(self, address_of, own_task: str, token: str | None):
        self._address_of = address_of
        self._own_task = own_task
        self._token = token
        self.calls: collections.Counter = collections.Counter()  # (peer, op) -> n

    def channel(self, task: str) -> FramedChannel:
        """A new (unopened) channel to ``task``; ChannelBroken when this link
        does not reach it."""
        raise NotImplementedError

    def step_path(self, task: str) -> FramedStepPath:
        return FramedStepPath(task, lambda: self.channel(task))

    def tensor_transport(self, inner, path_of) -> FramedTransport:
        """A ``TensorTransport`` over the peers' paths (``path_of(task)``: the
        router's ``FramedStepPath`` of a task), ``inner`` for the rest."""
        return FramedTransport(inner, path_of, self.pushes_collectives)

    def close(self):
        pass  # the paths are the router's to close


class FramedTransport(SiblingTensors):
    """``TensorTransport`` over framed channels, ``inner`` for other peers.
    ``pushes``: all-reduce chunks go over these channels as pushes (a link
    whose ends share memory, where a push is consumed in place), else they
    are pulled, as ``inner`` does."""

    def __init__(self, inner, path_of, pushes: bool):
        self._inner = inner
        self._path_of = path_of
        self._pushes = pushes

    def exchange(self, step, src_task: str, key: str, siblings=()):
        """One exchange with ``src_task``: ``(value of key, {sibling: value}
        that came along)``; over the protocol when the peer is not here."""
        path = self._path_of(src_task)
        ch = path.channel()
        if ch is None:
            return self._inner.exchange(step, src_task, key, siblings)
        try:
            got = self._recv(ch, step, key, siblings)
        except ChannelBroken as e:
            path.forget()
            if e.sent:  # the peer may have handed the tensor over: do not wait
                raise went_away(src_task, f"RecvTensor for {key.split(';')[3]}",
                                 e) from None
            return self._inner.exchange(step, src_task, key, siblings)
        value = got.pop(key)
        return value, got

    def _recv(self, ch, step, key, siblings, step_id=None) -> dict:
        header = {"step": step.step_id if step_id is None else step_id, "key": key,
                  "siblings": list(siblings)}

        def ask(wait_ms, left_s):
            reply, tensors = ch.call("recv", {**header, "wait_ms": wait_ms},
                                     timeout_s=left_s + 10.0)
            return PENDING if reply.get("pending") else dict(tensors)

        return poll_recv(step, ask, key, ch.task)

    def recv_collective(self, step, src_task: str, exec_id: int, key: str):
        """A collective's chunk (left under ``exec_id``) over the channel when
        ``src_task`` is on this host, else over the protocol."""
        path = self._path_of(src_task)
        ch = path.channel()
        if ch is None:
            return self._inner.recv_collective(step, src_task, exec_id, key)
        try:
            return self._recv(ch, step, key, (), exec_id)[key]
        except ChannelBroken as e:
            path.forget()
            if e.sent:
                raise went_away(src_task, f"RecvTensor for {key.split(';')[3]}",
                                 e) from None
            return self._inner.recv_collective(step, src_task, exec_id, key)

    def pushes_collectives(self, task: str) -> bool:
        """Whether all-reduce chunks to and from ``task`` are pushed (over this
        path, or the next one's) rather than pulled. Both ends must agree, so
        a peer once reached here is pushed to even while its channel is down
        (the push then reconnects or fails, never leaves the peer waiting
        for a chunk it was not sent)."""
        if not self._pushes:
            return self._inner.pushes_collectives(task)
        path = self._path_of(task)
        if path.reached or path.channel() is not None:
            return True
        return self._inner.pushes_collectives(task)

    def push_collective(self, step, dst_task: str, exec_id: int, key: str, value,
                        t0: float, into=None):
        """Pushes an all-reduce chunk to ``dst_task`` (``framed.collective_push``;
        ``into``: where the peer writes its answer); returns ``finish()``, which
        waits until the peer consumed it, or None when ``dst_task`` is not
        reachable here (the caller leaves it to pull)."""
        if not self._pushes:
            return self._inner.push_collective(step, dst_task, exec_id, key, value,
                                               t0, into)
        path = self._path_of(dst_task)
        ch = path.channel(now=path.reached)
        if ch is None and not path.reached:  # the next path's, if it has one
            return self._inner.push_collective(step, dst_task, exec_id, key, value,
                                               t0, into)
        if ch is None:  # reached before, unreachable now: the peer is gone
            return None
        try:
            sent = start_push(ch, step, exec_id, key, value, t0, into)
        except ChannelBroken as e:  # it was here: gone now (the receiver expects a push)
            path.forget()
            raise went_away(dst_task, "a collective push", e) from None
        return PushedChunk(ch, step, sent, dst_task)

    def pull(self, ref, timeout_s: float, on_cancel=None):
        return self._inner.pull(ref, timeout_s, on_cancel)

    def close(self):
        self._inner.close()


class FramedStepPath:
    """A peer's way over its framed channel (``router.StepPath``), made
    on first use (``make_channel()``); None while the peer is not reachable
    here (tried again after ``RETRY_CONNECT_S``). ``start_run_graph`` and
    ``abort_step`` answer None/False then, and the caller uses the peer's
    protocol client."""

    def __init__(self, task: str, make_channel):
        self.task_name = task
        self._make_channel = make_channel
        self._channel: FramedChannel | None = None
        self._unreachable_until = 0.0
        self._lock = threading.Lock()
        # Connected once: the peer is on this host (a fact a broken channel,
        # dropped for a while, does not change).
        self.reached = False

    def channel(self, now: bool = False) -> FramedChannel | None:
        """The channel, connecting if needed; None while the peer is not
        reachable (``now``: try again even within ``RETRY_CONNECT_S``)."""
        ch = self._channel
        if ch is not None:
            return ch
        with self._lock:
            if self._channel is not None:
                return self._channel
            if not now and time.monotonic() < self._unreachable_until:
                return None
            try:
                ch = self._make_channel()
                ch.open()
            except Refused:  # other credentials: not soon again (it is logged)
                self._unreachable_until = time.monotonic() + RETRY_REFUSED_S
                return None
            except ChannelBroken:
                self._unreachable_until = time.monotonic() + RETRY_CONNECT_S
                return None
            self._channel = ch
            self.reached = True
            return ch

    def forget(self):
        """Drops a broken channel: the next call connects again (or falls back)."""
        with self._lock:
            ch, self._channel = self._channel, None
            self._unreachable_until = time.monotonic() + RETRY_CONNECT_S
        if ch is not None:
            ch.close()

    def close(self):
        with self._lock:
            ch, self._channel = self._channel, None
        if ch is not None:
            ch.close()

    def start_run_graph(self, session_handle, graph_handle, step_id, feeds,
                        fetch_keys, trace=False, timeout_s=None, op_timeout_s=None):
        """Sends RunGraph and returns ``finish()``, which waits for its outcome
        (``run_graph``'s): the master sends to every peer from its own thread,
        no handoff. None when the peer is not reachable here."""
        ch = self.channel()
        if ch is None:
            return None
        out = Outgoing()
        for k, v in feeds.items():
            out.add(k, v)
        header = {"session": session_handle, "graph": graph_handle, "step": step_id,
                  "fetch": list(fetch_keys),
                  "trace": bool(trace), "t": out.entries,
                  "timeout_ms": ms_from_seconds(timeout_s),
                  "op_timeout_ms": ms_from_seconds(op_timeout_s)}
        try:
            sent = ch.send("run", header, out, timeout_s + 10.0 if timeout_s else None)
        except ChannelBroken:
            self.forget()
            return None

        def finish():
            try:
                reply, tensors = ch.receive(sent)
            except ChannelBroken as e:  # it may have run: not again
                self.forget()
                raise went_away(self.task_name, "RunGraph", e) from None
            stats = [tuple(s) for s in reply["stats"]] if reply.get("stats") else None
            return dict(tensors), stats

        return finish

    def abort_step(self, step_id, error) -> bool:
        """Whether the abort went out here."""
        return abort_over(self, step_id, error, 10.0)


def abort_over(path, step_id: int, error, timeout_s: float | None = None) -> bool:
    """Sends step ``step_id``'s abort (``error``) over ``path``'s channel (a
    step path whose channel speaks the framed calls: this module's, the gRPC
    stream path's); whether it went out. A broken channel is dropped."""
    ch = path.channel()
    if ch is None:
        return False
    try:
        ch.call("abort", {"step": step_id, "code": int(error.error_code),
                          "message": error.message}, timeout_s=timeout_s)
        return True
    except (ChannelBroken, errors.OpError):
        path.forget()
        return False


__all__ = ["FramedPeers", "FramedStepPath", "FramedTransport", "abort_over"]
