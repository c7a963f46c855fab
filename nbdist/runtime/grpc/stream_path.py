"""The gRPC stream path: a step's calls between tasks as frames over
long-lived bidirectional gRPC streams, on the tasks' gRPC ports.

For a cluster whose tasks reach each other only through their gRPC port (a
Kubernetes Service exposing one port per task, a firewall, TLS between
hosts), where the same-host and TCP peer paths are off or unreachable. A
unary grpcio call costs its metadata, interceptors, a fresh HTTP/2 stream and
a ``TensorProto`` encoding of every tensor; here a ``RunGraph``, a ``_Recv``'s
exchange (its siblings along) and an abort are one message each way on a
stream kept open (one per concurrent call, each used by one caller at a time:
no hand-off between threads), carrying ``grpc.stream_frames``' raw tensor
bytes. The stream is a call of the task's gRPC channel, so it has the
channel's TLS and token (the server's interceptors see it once, when it
opens), and the server serves it with the same handlers
(``grpc.stream_service``).

A peer that does not serve it (an older server, ``NBDIST_PEER_STREAM=0``)
answers the opening hello ``UNIMPLEMENTED``: its calls stay unary (tried
again after ``RETRY_UNSERVED_S``). A stream that breaks before its request
went out leaves the call to the unary client; after (the peer may have run
it), the call fails with ``UnavailableError`` naming the peer, as a unary
call whose connection broke does. The next call opens a new stream (the
channel reconnects to a restarted task). ``NBDIST_PEER_STREAM=0`` turns the
path off.
"""

from __future__ import annotations

import collections
import queue
import threading
import time

import grpc
from nbdist import errors
from nbdist.runtime import env
from nbdist.runtime.framed.channel import request_id
from nbdist.runtime.framed.peers import abort_over
from nbdist.runtime.grpc.coding import parkable, resolve_refs
from nbdist.runtime.grpc.stream_frames import (
    STREAM_METHOD,
    decode_frame,
    encode_frame,
    raise_if_error,
)
from nbdist.runtime.recv_poll import PENDING, poll_recv
from nbdist.runtime.tensor_store import SiblingTensors
from nbdist.runtime.timeouts import ms_from_seconds
from nbdist.runtime.transports import ChannelBroken

__all__ = ["StreamChannel", "StreamPeers", "StreamStepPath", "StreamTransport",
           "enabled"]

PULL_TIMEOUT_S = 60.0  # a parked answer's pull, when its call has no deadline
RETRY_CONNECT_S = 2.0  # a peer whose stream did not open is tried again after
RETRY_UNSERVED_S = 60.0  # ... one that does not serve streams, after
HELLO_TIMEOUT_S = 10.0
_END = None  # ends a stream's requests
_UNSERVED = (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.UNAUTHENTICATED,
             grpc.StatusCode.PERMISSION_DENIED)


def enabled() -> bool:
    """Whether servers of this process serve and use the stream path
    (``NBDIST_PEER_STREAM``, on by default)."""
    return (env.get(env.PEER_STREAM) or "1").lower() not in ("0", "off", "false",
                                                             "no")


class _Unserved(ChannelBroken):
    """The peer answered the hello with a refusal: not soon again."""


class _Stream:
    """One open stream: one request, then its answer, at a time."""

    def __init__(self, rpc, wait: bool):
        """``wait``: for the channel to connect (a first stream, opened in
        the background: "localhost" may be tried on ::1 first, a restarted
        peer takes a moment), else fail at once (a step's call)."""
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        method = rpc.channel.stream_stream(STREAM_METHOD)
        self._call = method(iter(self._requests.get, _END), metadata=rpc.metadata,
                            wait_for_ready=wait)

    def send(self, frame: bytes) -> None:
        self._requests.put(frame)

    def receive(self) -> bytes:
        """The next answer; grpc.RpcError or StopIteration when the stream ended."""
        return next(self._call)

    def usable(self) -> bool:
        return self._call.is_active()

    def close(self) -> None:
        self._requests.put(_END)
        self._call.cancel()


class StreamChannel:
    """Streams to one peer over its gRPC client's channel (``client``: the
    peer's ``GrpcWorkerClient``, which also pulls the large tensors an answer
    parked); ``calls`` counts the calls sent, by (peer, op)."""

    def __init__(self, task: str, client, calls: collections.Counter):
        self.task = task
        self._client = client
        rpc = self._rpc = client.rpc
        self._calls = calls
        self._idle: list[_Stream] = []
        self._lock = threading.Lock()
        self._closed = False
        self.incarnation = None
        self.who = rpc.who  # "Task /job:ps/replica:0/task:0 at 127.0.0.1:2222"

    def connect(self, wait: bool = False) -> _Stream:
        """A new stream whose server said hello as ``task``; ChannelBroken if
        it does not (``_Unserved``: it refused the stream)."""
        stream = _Stream(self._rpc, wait)
        try:
            stream.send(encode_frame({"op": "hello"}))
            header, _ = decode_frame(_within(stream, HELLO_TIMEOUT_S), 1 << 20)
        except grpc.RpcError as e:
            stream.close()
            kind = _Unserved if e.code() in _UNSERVED else ChannelBroken
            raise kind(f"{self.task}: {e.code().name}: {e.details()}") from None
        except (StopIteration, ValueError, TimeoutError) as e:
            stream.close()
            raise ChannelBroken(f"{self.task}: no hello ({e!r})") from None
        if header.get("task") != self.task:
            stream.close()
            raise ChannelBroken(f"{self._rpc.who} is {header.get('task')}")
        self.incarnation = header.get("incarnation")
        return stream

    def open(self) -> None:
        """Opens one stream (waiting for the channel to connect): ChannelBroken
        when the peer serves none."""
        stream = self.connect(wait=True)
        with self._lock:
            self._idle.append(stream)

    def send(self, op: str, header: dict, tensors=()):
        """Sends a request on a stream of its own; ``receive`` its answer.
        Every request carries a fresh request id (``rid``): a retry of it, any
        way, runs once (``RecentRequests``)."""
        header["op"] = op
        if "rid" not in header:
            header["rid"] = request_id()
        frame = encode_frame(header, tensors)
        stream = None
        with self._lock:
            while self._idle and stream is None:
                stream = self._idle.pop()
                if not stream.usable():  # ended while idle (the peer restarted)
                    stream.close()
                    stream = None
        if stream is None:
            stream = self.connect()
        self._calls[(self.task, op)] += 1
        stream.send(frame)
        return op, stream

    def receive(self, sent, timeout_s: float | None = None):
        """``(reply header, [(name, array)])``, parked tensors pulled (within
        ``timeout_s``); raises the peer's OpError, or ChannelBroken (sent)
        when the stream ended before an answer."""
        op, stream = sent
        try:
            reply, tensors = decode_frame(stream.receive(), 1 << 62)
        except (grpc.RpcError, StopIteration, ValueError) as e:
            stream.close()
            what = f"{e.code().name}: {e.details()}" if isinstance(
                e, grpc.RpcError) else repr(e)
            raise ChannelBroken(f"{op} to {self.task}: {what}", sent=True) from None
        with self._lock:
            closed = self._closed
            if not closed:
                self._idle.append(stream)
        if closed:
            stream.close()
        raise_if_error(reply)
        return reply, resolve_refs(tensors, lambda ref: self._client.pull(
            ref.step_id, ref.key, PULL_TIMEOUT_S if timeout_s is None else timeout_s))

    def call(self, op: str, header: dict, tensors=(), timeout_s=None):
        return self.receive(self.send(op, header, tensors), timeout_s)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for stream in idle:
            stream.close()


def _within(stream: _Stream, timeout_s: float) -> bytes:
    """The stream's next answer, waited for at most ``timeout_s`` (a hello:
    a peer that accepts the call but never answers is not waited on)."""
    got: list = []
    done = threading.Event()

    def read():
        try:
            got.append(stream.receive())
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            got.append(e)
        done.set()

    threading.Thread(target=read, daemon=True, name="nbdist-stream-hello").start()
    if not done.wait(timeout_s):
        raise TimeoutError(f"no hello within {timeout_s} s")
    if isinstance(got[0], BaseException):
        raise got[0]
    return got[0]


def went_away(ch: StreamChannel, what: str, e: ChannelBroken) -> errors.OpError:
    return errors.UnavailableError(
        None, None, f"{ch.who} is unavailable: its stream broke during {what} "
        f"({e})")


class StreamStepPath:
    """A peer's way over its streams (``router.StepPath``): None while the
    peer is not reachable this way (its calls stay unary). The first stream
    is opened in the background (a step never waits for a peer's channel to
    connect here: its calls go unary meanwhile)."""

    def __init__(self, task: str, make_channel):
        self.task_name = task
        self._make_channel = make_channel
        self._channel: StreamChannel | None = None
        self._opening = False
        self._closed = False
        self._unreachable_until = 0.0
        self._lock = threading.Lock()

    def channel(self) -> StreamChannel | None:
        ch = self._channel
        if ch is not None:
            return ch
        with self._lock:
            if self._channel is None and not self._opening and not self._closed \
                    and time.monotonic() >= self._unreachable_until:
                self._opening = True
                threading.Thread(target=self._open, daemon=True,
                                 name="nbdist-stream-open").start()
            return self._channel

    def _open(self) -> None:
        retry_s, ch = 0.0, None
        try:
            ch = self._make_channel()
            ch.open()
        except _Unserved:
            retry_s, ch = RETRY_UNSERVED_S, None
        except Exception:  # noqa: BLE001 - not reachable this way: unary meanwhile
            retry_s, ch = RETRY_CONNECT_S, None
        with self._lock:
            self._opening = False
            self._unreachable_until = time.monotonic() + retry_s
            closed = self._closed
            if not closed:
                self._channel = ch
        if closed and ch is not None:
            ch.close()

    def forget(self) -> None:
        """Drops a broken channel: the next call opens a new stream."""
        with self._lock:
            ch, self._channel = self._channel, None
        if ch is not None:
            ch.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.forget()

    def start_run_graph(self, session_handle, graph_handle, step_id, feeds,
                        fetch_keys, trace=False, timeout_s=None, op_timeout_s=None):
        """Sends RunGraph; ``finish()`` waits for its outcome. None when the
        peer is not reachable here (or the feeds are too large for a frame)."""
        if any(parkable(v) for v in feeds.values()):
            return None  # unary parks them for the peer to pull in chunks
        ch = self.channel()
        if ch is None:
            return None
        header = {"session": session_handle, "graph": graph_handle, "step": step_id,
                  "fetch": list(fetch_keys), "trace": bool(trace),
                  "timeout_ms": ms_from_seconds(timeout_s)}
        try:
            sent = ch.send("run", header, feeds.items())
        except ChannelBroken:
            self.forget()
            return None

        def finish():
            try:
                reply, tensors = ch.receive(sent, timeout_s)
            except ChannelBroken as e:  # it may have run: not again
                self.forget()
                raise went_away(ch, "RunGraph", e) from None
            stats = [tuple(s) for s in reply["stats"]] if reply.get("stats") else None
            return dict(tensors), stats

        return finish

    def abort_step(self, step_id, error) -> bool:
        """Whether the abort went out here."""
        return abort_over(self, step_id, error)


class StreamTransport(SiblingTensors):
    """``TensorTransport`` over the peers' streams, ``inner`` for a peer not
    reachable this way and for parked tensors; all-reduce chunks are pulled."""

    def __init__(self, inner, path_of):
        self._inner = inner
        self._path_of = path_of

    def exchange(self, step, src_task: str, key: str, siblings=()):
        """``(value of key, {sibling: value} that came along)``."""
        got = self._pull(step, src_task, key, siblings, step.step_id)
        if got is None:
            return self._inner.exchange(step, src_task, key, siblings)
        value = got.pop(key)
        return value, got

    def recv_collective(self, step, src_task: str, exec_id: int, key: str):
        got = self._pull(step, src_task, key, (), exec_id)
        if got is None:
            return self._inner.recv_collective(step, src_task, exec_id, key)
        return got[key]

    def pushes_collectives(self, task: str) -> bool:
        return self._inner.pushes_collectives(task)  # chunks are pulled here

    def push_collective(self, step, dst_task: str, exec_id: int, key: str, value,
                        t0: float, into=None):
        return self._inner.push_collective(step, dst_task, exec_id, key, value, t0,
                                           into)

    def _pull(self, step, src_task, key, siblings, step_id) -> dict | None:
        """The tensors of one exchange, or None when no stream reaches the peer."""
        path = self._path_of(src_task)
        ch = path.channel()
        if ch is None:
            return None
        header = {"step": step_id, "key": key, "siblings": list(siblings)}

        def ask(wait_ms, left_s):
            reply, tensors = ch.call("recv", {**header, "wait_ms": wait_ms},
                                     timeout_s=left_s)
            return PENDING if reply.get("pending") else dict(tensors)

        try:
            return poll_recv(step, ask, key, src_task)
        except ChannelBroken as e:
            path.forget()
            if e.sent:  # the peer may have handed the tensor over: do not wait
                raise went_away(ch, f"RecvTensor for {key.split(';')[3]}", e) from None
            return None

    def pull(self, ref, timeout_s: float, on_cancel=None):
        return self._inner.pull(ref, timeout_s, on_cancel)

    def close(self):
        self._inner.close()


class StreamPeers:
    """How one task reaches its peers over streams: ``client_of(task)`` is the
    task's ``GrpcWorkerClient`` (its channel, metadata and pulls)."""

    def __init__(self, client_of):
        self._client_of = client_of
        self.calls: collections.Counter = collections.Counter()  # (peer, op) -> n

    def step_path(self, task: str) -> StreamStepPath:
        return StreamStepPath(task, lambda: StreamChannel(
            task, self._client_of(task), self.calls))

    def tensor_transport(self, inner, path_of) -> StreamTransport:
        return StreamTransport(inner, path_of)

    def close(self):
        pass  # the paths are the router's to close
