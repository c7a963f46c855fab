"""The same-host path: tasks on one host move a step's tensors over a Unix socket
and shared memory instead of gRPC.

Every server listens, besides its gRPC port, on the abstract Unix socket
``\\0nbdist/<its address>``. Abstract sockets belong to a network namespace, so
a peer reaches it exactly when both run on the same host (or the same network
namespace): a peer elsewhere finds nothing there and stays on gRPC. A raw
grpcio unary call costs ~0.75 ms of CPU here, a Unix-socket round trip tens of
microseconds (issue 11's measurements), and most steps are several such calls.

What travels here: a master's ``RunGraph`` to a worker (feeds in, fetches
out), a ``_Recv``'s pull of the tensors a peer sends it (all the keys its
partition expects from that peer, in one exchange: ``Worker.recv`` passes them
as ``siblings``), step aborts, and pulls of parked tensors. Frames are
``samehost_wire``'s: small tensors inline, large ones in a memfd. The rest
(sessions, graphs, status) stays on the protocol's own client.

Every connection starts with the server's token (when it has one), checked in
constant time before anything else is read; a task without it gets
``UNAUTHENTICATED`` and no tensor. ``NBDIST_SAME_HOST=0`` turns the path off
(both serving and using it).
"""

from __future__ import annotations

import collections
import hmac
import logging
import os
import random
import select
import socket
import threading
import time
import weakref

from nbdist import errors
from nbdist.proto import config_pb2
from nbdist.runtime import env
from nbdist.runtime.samehost_wire import (
    ChannelClosed,
    Link,
    Outgoing,
    check_sizes,
    decode_tensors,
    error_header,
    raise_if_error,
    recv_frame,
    send_frame,
)
from nbdist.runtime.tensor_store import MISSING, StepExtras
from nbdist.runtime.service.worker_handler import PARKED_WAIT_S
from nbdist.runtime.timeouts import UNBOUNDED_S, ms_from_seconds, step_time_left

_log = logging.getLogger("nbdist")
_MAX_CONNECTIONS = 512  # per server: each holds a thread while it waits
_HELLO_BYTES = 1 << 12
_HELLO_TIMEOUT_S = 10.0
_RECV_POLL_MS = 100  # a blocked pull answers "pending" this often
_RETRY_CONNECT_S = 2.0  # a peer that did not answer here is tried again after


def enabled() -> bool:
    """Whether servers of this process serve and use the same-host path."""
    return (env.get(env.SAME_HOST) or "1").lower() not in ("0", "off", "false", "no")


_NAME_PREFIX = "\0nbdist/"


def socket_name(address: str) -> str:
    """The abstract Unix socket of the server at ``address`` (``host:port``)."""
    return _NAME_PREFIX + address.removeprefix("grpc://")


class ChannelBroken(ConnectionError):
    """The same-host connection failed before an answer. ``sent``: after the
    request went out (its effect is unknown: a tensor it took may be lost, a
    step may have run), else before (the protocol can be used instead)."""

    def __init__(self, message: str, sent: bool = False):
        super().__init__(message)
        self.sent = sent


def _went_away(task: str, what: str, e: ChannelBroken) -> errors.OpError:
    return errors.UnavailableError(
        None, None, f"{task} went away during {what} (same-host channel: {e})")


# -- serving -------------------------------------------------------------------------
class _Hangups:
    """Calls ``fn`` when a connection waiting for its step hangs up (its client
    died or gave up): the step is cancelled, as a gRPC call's end cancels it."""

    def __init__(self):
        self._poll = select.epoll()
        self._wake_r, self._wake_w = os.pipe()
        self._poll.register(self._wake_r, select.EPOLLIN)
        self._fns: dict[int, object] = {}
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="nbdist-samehost-hangups")
        self._thread.start()

    def watch(self, conn, fn) -> None:
        self._fns[conn.fileno()] = fn
        self._poll.register(conn.fileno(), select.EPOLLRDHUP | select.EPOLLHUP)

    def unwatch(self, conn) -> None:
        if self._fns.pop(conn.fileno(), None) is not None:
            try:
                self._poll.unregister(conn.fileno())
            except OSError:
                pass

    def _run(self):
        while True:
            for fd, _ in self._poll.poll():
                if fd == self._wake_r:
                    os.close(self._wake_r)
                    self._poll.close()
                    return
                fn = self._fns.pop(fd, None)
                try:
                    self._poll.unregister(fd)
                except OSError:
                    pass
                if fn is not None:
                    fn()

    def close(self):
        os.write(self._wake_w, b"x")
        os.close(self._wake_w)


# Same-host calls by the method whose admission class they count in.
_METHODS = {"run": "RunGraph", "step": "RunStep", "recv": "RecvTensorUnary",
            "pull": "RecvTensor", "push": "PushTensors", "abort": "CleanupGraph"}


def _values_nbytes(answer) -> int:
    values = answer[0].values() if isinstance(answer[0], dict) else answer[0]
    return sum(int(getattr(v, "nbytes", 0)) for v in values)


class SameHostService:
    """Serves a task's ``WorkerHandler`` (and ``MasterHandler``: a session's
    steps) on this host's abstract socket for ``address``: a codec over the
    handlers, which own validation, timeouts, de-duplication and admission."""

    def __init__(self, worker_handler, address: str, token: str | None, limits,
                 master_handler=None):
        """``limits`` (``executor.limits.Limits``) bound what a request may
        bring: its inline bytes, each tensor, all of them together."""
        self.handler = worker_handler
        self.master_handler = master_handler
        self.worker = worker_handler.worker
        self._admission = worker_handler.admission
        self._recent = worker_handler.recent
        self._hangups = None
        self._token = token.encode() if token else None
        self._max_payload = limits.max_request_bytes
        self._max_tensor = limits.max_tensor_bytes
        self._max_total = max(limits.max_request_bytes,
                              limits.max_pushed_bytes_per_client)
        self._address = address.removeprefix("grpc://")
        self._listener: socket.socket | None = None
        self._conns: set = set()
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, daemon=True,
                                        name=f"nbdist-samehost{self.worker.task_name}")

    def start(self):
        """Listens (when the server starts: a server that never starts holds no
        name). A name another process holds leaves this server on gRPC alone."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(socket_name(self._address))
            listener.listen(128)
        except OSError as e:
            listener.close()
            _log.warning("%s: no same-host path (%s is taken: %s); peers use gRPC",
                         self.worker.task_name, socket_name(self._address)[1:], e)
            return
        self._listener = listener
        self._hangups = _Hangups()
        self._thread.start()

    def stop(self):
        with self._lock:
            self._stopped = True
            conns, self._conns = list(self._conns), set()
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
        for conn in conns:
            _shut(conn)
        if self._hangups is not None:
            self._hangups.close()

    def _accept(self):
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # stopped
            with self._lock:
                if self._stopped or len(self._conns) >= _MAX_CONNECTIONS:
                    conn.close()
                    continue
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name="nbdist-samehost-conn").start()

    def _serve(self, conn: socket.socket):
        link = Link()
        try:
            if self._hello(conn):
                while True:
                    header, payload, fds = recv_frame(conn, self._max_payload)
                    reply, out = self._dispatch(header, payload, fds, conn, link)
                    send_frame(conn, reply, out, link)
        except (OSError, ChannelClosed, ValueError, errors.OpError):
            pass  # the peer went away or broke the protocol: drop the connection
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()
            link.close()

    def _hello(self, conn) -> bool:
        conn.settimeout(_HELLO_TIMEOUT_S)  # a silent connection is not kept
        header, _, fds = recv_frame(conn, 0, _HELLO_BYTES)
        conn.settimeout(None)
        for fd in fds:
            _close_fd(fd)
        given = str(header.get("token") or "").encode()
        if header.get("op") != "hello" or (
                self._token is not None and not hmac.compare_digest(given, self._token)):
            send_frame(conn, error_header(errors.UnauthenticatedError(
                None, None, f"Missing or wrong nbdist token for the same-host "
                f"channel of {self.worker.task_name}")))
            return False
        send_frame(conn, {"task": self.worker.task_name, "address": self._address,
                          "incarnation": self.worker.incarnation})
        return True

    def _dispatch(self, header, payload, fds, conn, link):
        op = header.get("op")
        try:
            with self._admission.admit(_METHODS.get(op, "samehost")):
                # Closes the request's fds that it did not hand to a tensor.
                return self._dispatch_admitted(op, header, payload, fds, conn, link)
        except errors.OpError as e:  # refused
            for fd in fds:
                _close_fd(fd)
            return error_header(e), None

    def _dispatch_admitted(self, op, header, payload, fds, conn, link):
        try:
            entries = header.get("t", ())
            check_sizes(entries, self._max_tensor, self._max_total)
            if op == "push":  # before the pushed segments are mapped
                self._admit_push(header, conn)
            tensors = decode_tensors(header.get("t", ()), payload, fds,
                                     header.get("seg"), link)
            fds = ()
            if op == "recv":
                return self._recv(header)
            if op == "run":
                return self._run(header, tensors, conn)
            if op == "step" and self.master_handler is not None:
                return self._step(header, tensors, conn)
            if op == "abort":
                self.handler.cleanup_graph(int(header["step"]), errors.make_error(
                    int(header.get("code", 1)), str(header.get("message", ""))))
                return {}, None
            if op == "pull":
                return self._pull(header)
            if op == "push":
                return self._push(header, tensors, conn)
            raise errors.InvalidArgumentError(
                None, None, f"Unknown same-host call {str(op)[:100]!r} to "
                f"{self.worker.task_name}")
        except errors.OpError as e:
            return error_header(e), None
        except (KeyError, TypeError, ValueError) as e:
            return error_header(errors.InvalidArgumentError(
                None, None, f"Malformed same-host {str(op)[:100]} request to "
                f"{self.worker.task_name}: {e}")), None
        finally:
            for fd in fds:
                _close_fd(fd)

    def _recv(self, header):
        step_id, key = int(header["step"]), str(header["key"])
        wait_s = max(1, int(header.get("wait_ms", _RECV_POLL_MS))) / 1000.0
        value = self.handler.recv_tensor(step_id, key, UNBOUNDED_S, wait_s)
        if value is None:
            return {"pending": True}, None
        out = Outgoing()
        out.add(key, value)
        siblings = header.get("siblings", ())
        if siblings:
            for k, v in self.handler.take_siblings(step_id, key, siblings).items():
                out.add(k, v)
        return {"t": out.entries}, out

    def _on_hangup(self, conn):
        """The codec's cancel-on-hang-up: an epoll watch of the connection."""
        def register(fn) -> bool:
            self._hangups.watch(conn, fn)
            return True
        return register

    def _once(self, method: str, header, fn):
        """``fn()``, once per request id (a retried request gets the answer of
        the first): the handlers' ``RecentRequests``, shared with gRPC."""
        rid = int(header.get("rid", 0))
        if not rid:
            return fn()
        return self._recent.run(("samehost/" + method, rid), fn,
                                size_of=_values_nbytes)

    def _run(self, header, tensors, conn):
        step_id = int(header["step"])

        def run():
            try:
                return self.handler.run_graph(
                    str(header["session"]), str(header["graph"]), step_id,
                    tensors, [str(k) for k in header["fetch"]],
                    bool(header.get("trace")), int(header.get("timeout_ms", 0)),
                    on_hangup=self._on_hangup(conn))
            finally:
                self._hangups.unwatch(conn)

        out_values, stats = self._once("RunGraph", header, run)
        out = Outgoing()
        for k, v in out_values.items():
            out.add(k, v)
        reply = {"t": out.entries}
        if stats:
            reply["stats"] = [list(s) for s in stats]
        return reply, out

    def _step(self, header, tensors, conn):
        """A session's RunStep (one without trace or partition graphs)."""
        handle = str(header["session"])
        fetches = [str(f) for f in header["fetch"]]
        timeout_ms = int(header.get("timeout_ms", 0))
        options = None
        if timeout_ms > 0:
            options = config_pb2.RunOptions(timeout_in_ms=timeout_ms)

        def run():
            try:
                return (self.master_handler.run_step(
                    handle, tensors, fetches,
                    [str(t) for t in header.get("target", ())], options, None,
                    on_hangup=self._on_hangup(conn)),)
            finally:
                self._hangups.unwatch(conn)

        (values,) = self._once("RunStep", header, run)
        out = Outgoing()
        for i, v in enumerate(values):
            out.add(str(i), v)
        return {"t": out.entries}, out

    def _admit_push(self, header, conn):
        nbytes = sum(int(e.get("n", 0)) for e in header.get("t", ()))
        self.worker.pushed.admit(nbytes, _peer(conn))

    def _push(self, header, tensors, conn):
        """A client's large feeds, kept for the RunStep naming them (as
        PushTensors): tensor names are push ids."""
        keys = [self.worker.pushed.put(int(name, 16), value, _peer(conn))
                for name, value in tensors]
        return {"keys": keys}, None

    def _pull(self, header):
        step_id, key = int(header["step"]), str(header["key"])
        timeout = max(0.001, float(header.get("timeout_s", PARKED_WAIT_S)))
        value = self.handler.recv_tensor(step_id, key, timeout)
        out = Outgoing()
        out.add(key, value)
        return {"t": out.entries}, out


def _peer(conn) -> str:
    """Who pushed, for the per-client caps: the peer process."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    pid = int.from_bytes(creds[:4], "little")
    return f"samehost:pid{pid}"


def _close_fd(fd: int) -> None:
    os.close(fd)


def _shut(conn) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


# -- using ---------------------------------------------------------------------------
class SameHostChannel:
    """Connections to one peer's same-host socket (one per concurrent call);
    ``task`` None: whichever task serves ``address`` (a session's master)."""

    def __init__(self, task: str | None, address: str, token: str | None,
                 calls: collections.Counter):
        self.task = task
        self._name = socket_name(address)
        self._token = token or ""
        self._idle: list[tuple[socket.socket, Link]] = []
        self._lock = threading.Lock()
        self._calls = calls
        self._closed = False
        self.incarnation = None
        # A channel dropped without close() (its session was never closed)
        # still closes its connections.
        weakref.finalize(self, _close_connections, self._idle)

    def connect(self) -> tuple[socket.socket, Link]:
        """A new authenticated connection; ChannelBroken if nobody (or somebody
        else) answers here."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(10.0)
            sock.connect(self._name)
            send_frame(sock, {"op": "hello", "token": self._token})
            header, _, fds = recv_frame(sock, 0)
            for fd in fds:
                _close_fd(fd)
            raise_if_error(header)
            if (self.task is not None and header.get("task") != self.task) or \
                    header.get("address") != self._name[len(_NAME_PREFIX):]:
                raise ChannelBroken(f"{self._name[1:]!r} is {header.get('task')} at "
                                    f"{header.get('address')}, not {self.task}")
            self.incarnation = header.get("incarnation")
            sock.settimeout(None)
            return sock, Link()
        except (OSError, ChannelClosed, ValueError) as e:
            sock.close()
            raise ChannelBroken(str(e)) from None
        except BaseException:
            sock.close()
            raise

    def open(self) -> None:
        """Connects once now: ChannelBroken when nobody serves here."""
        conn = self.connect()
        with self._lock:
            self._idle.append(conn)

    def call(self, op: str, header: dict, out: Outgoing | None = None,
             timeout_s: float | None = None):
        """(reply header, [(name, array)]); raises the peer's OpError, or
        ChannelBroken when the connection failed before an answer."""
        return self.receive(self.send(op, header, out, timeout_s))

    def send(self, op: str, header: dict, out: Outgoing | None = None,
             timeout_s: float | None = None):
        """Sends a request on a connection of its own; ``receive`` its answer."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self.connect()
        sock, link = conn
        header["op"] = op
        self._calls[(self.task, op)] += 1
        try:
            sock.settimeout(timeout_s)
            send_frame(sock, header, out, link)
        except (OSError, ChannelClosed, ValueError) as e:  # an idle one went stale
            sock.close()
            link.close()
            raise ChannelBroken(f"{op} to {self.task}: {e}") from None
        return op, conn

    def receive(self, sent):
        """The answer to ``send``'s request (see ``call``)."""
        op, conn = sent
        sock, link = conn
        try:
            reply, payload, fds = recv_frame(sock, 1 << 62)
            # Copied out before the connection is reused (and its segment with it).
            tensors = decode_tensors(reply.get("t", ()), payload, fds,
                                     reply.get("seg"), link)
        except (OSError, ChannelClosed, ValueError) as e:
            sock.close()
            link.close()
            raise ChannelBroken(f"{op} to {self.task}: {e}", sent=True) from None
        with self._lock:
            closed = self._closed
            if not closed:
                self._idle.append(conn)
        if closed:
            sock.close()
            link.close()
        raise_if_error(reply)
        return reply, tensors

    def push(self, values: list, timeout_s: float | None) -> list[tuple[str, int]]:
        """Keeps ``values`` on the peer for the step that feeds them; their
        (key, push id)s."""
        ids = [random.getrandbits(62) | 1 for _ in values]
        out = Outgoing()
        for push_id, v in zip(ids, values):
            out.add(f"{push_id:x}", v)
        reply, _ = self.call("push", {"t": out.entries}, out, timeout_s)
        keys = reply.get("keys")
        if not isinstance(keys, list) or len(keys) != len(values):
            raise errors.DataLossError(None, None, f"push to {self._name[1:]} "
                                       f"answered {keys!r:.200}")
        return [(str(k), i) for k, i in zip(keys, ids)]

    def run_step(self, handle: str, feeds: dict, fetches: list, targets: list,
                 timeout_s: float | None) -> list:
        """A session's step on the master serving this channel."""
        out = Outgoing()
        for k, v in feeds.items():
            out.add(k, v)
        header = {"session": handle, "fetch": list(fetches), "target": list(targets),
                  "rid": random.getrandbits(62) | 1, "t": out.entries,
                  "timeout_ms": ms_from_seconds(timeout_s)}
        _, tensors = self.call("step", header, out,
                               timeout_s + 10.0 if timeout_s else None)
        if len(tensors) != len(fetches):
            raise errors.DataLossError(None, None, f"RunStep on {self._name[1:]} "
                                       f"answered {len(tensors)} of {len(fetches)} "
                                       "values")
        return [v for _, v in tensors]

    def pull(self, step_id: int, key: str, timeout_s: float):
        """The tensor the peer parked under ``key`` for ``step_id``."""
        _, tensors = self.call("pull", {"step": step_id, "key": key,
                                        "timeout_s": timeout_s}, None, timeout_s + 10.0)
        return tensors[0][1]

    def close(self):
        with self._lock:
            self._closed = True
            idle = list(self._idle)
            self._idle.clear()
        _close_connections(idle)


def _close_connections(conns: list) -> None:
    for sock, link in conns:
        sock.close()
        link.close()


def client_channel(address: str, token: str | None) -> SameHostChannel | None:
    """A session's channel to the master serving ``address`` when it runs on
    this host (for its large feeds and fetches), else None."""
    if not enabled():
        return None
    ch = SameHostChannel(None, address, token, collections.Counter())
    try:
        ch.open()
    except ChannelBroken:
        return None
    return ch


class SameHostPeers:
    """The same-host channels of one task to the other tasks of its cluster:
    ``channel(task)`` is None for a peer not on this host (tried again later)."""

    def __init__(self, address_of, own_task: str, token: str | None):
        self._address_of = address_of
        self._own_task = own_task
        self._token = token
        self._channels: dict[str, SameHostChannel] = {}
        self._unreachable: dict[str, float] = {}
        self._lock = threading.Lock()
        self.calls: collections.Counter = collections.Counter()  # (peer, op) -> n

    def channel(self, task: str) -> SameHostChannel | None:
        ch = self._channels.get(task)
        if ch is not None:
            return ch
        with self._lock:
            ch = self._channels.get(task)
            if ch is not None:
                return ch
            if time.monotonic() < self._unreachable.get(task, 0.0):
                return None
            ch = SameHostChannel(task, self._address_of(task), self._token, self.calls)
            try:
                ch.open()
            except ChannelBroken:
                self._unreachable[task] = time.monotonic() + _RETRY_CONNECT_S
                return None
            self._channels[task] = ch
            return ch

    def forget(self, task: str):
        """Drops a broken channel: the next call connects again (or falls back)."""
        with self._lock:
            ch = self._channels.pop(task, None)
            self._unreachable[task] = time.monotonic() + _RETRY_CONNECT_S
        if ch is not None:
            ch.close()

    def worker(self, client) -> SameHostWorker:
        return SameHostWorker(client, self)

    def close(self):
        with self._lock:
            chans, self._channels = list(self._channels.values()), {}
        for ch in chans:
            ch.close()


class SameHostTransport:
    """``TensorTransport`` over same-host channels, ``inner`` for other peers."""

    def __init__(self, inner, peers: SameHostPeers):
        self._inner = inner
        self._peers = peers
        self._extras = StepExtras()

    def recv(self, step, src_task: str, key: str, siblings=()):
        value = self._extras.take(step, key)
        if value is not MISSING:
            return value
        ch = self._peers.channel(src_task)
        if ch is None:
            return self._inner.recv(step, src_task, key, siblings)
        try:
            got = self._recv(ch, step, key, siblings)
        except ChannelBroken as e:
            self._peers.forget(src_task)
            if e.sent:  # the peer may have handed the tensor over: do not wait
                raise _went_away(src_task, f"RecvTensor for {key.split(';')[3]}",
                                 e) from None
            return self._inner.recv(step, src_task, key, siblings)
        value = got.pop(key)
        self._extras.keep(step, got)
        return value

    def _recv(self, ch, step, key, siblings) -> dict:
        timeout = step_time_left(step)
        start = time.monotonic()
        header = {"step": step.step_id, "key": key, "siblings": list(siblings),
                  "wait_ms": _RECV_POLL_MS}
        while True:
            if step.cancelled:
                step.check()
            left = start + timeout - time.monotonic()
            if left <= 0:
                raise errors.DeadlineExceededError(
                    None, None, f"Timed out after {time.monotonic() - start:.1f} s "
                    f"waiting for tensor {key.split(';')[3]} from {ch.task}")
            header["wait_ms"] = max(1, min(_RECV_POLL_MS, int(left * 1000)))
            reply, tensors = ch.call("recv", dict(header), timeout_s=left + 10.0)
            if not reply.get("pending"):
                return dict(tensors)

    def recv_collective(self, step, src_task: str, exec_id: int, key: str):
        return self._inner.recv_collective(step, src_task, exec_id, key)

    def pull(self, ref, timeout_s: float, on_cancel=None):
        return self._inner.pull(ref, timeout_s, on_cancel)

    def close(self):
        self._peers.close()
        self._inner.close()


class SameHostWorker:
    """A peer's ``WorkerInterface``: steps over the same-host channel when the
    peer is on this host, everything else through the protocol's ``client``."""

    def __init__(self, client, peers: SameHostPeers):
        self._client = client
        self._peers = peers
        self.task_name = client.task_name

    def run_graph(self, session_handle, graph_handle, step_id, feeds, fetch_keys,
                  trace=False, timeout_s=None, op_timeout_s=None):
        args = (session_handle, graph_handle, step_id, feeds, fetch_keys, trace,
                timeout_s, op_timeout_s)
        finish = self.start_run_graph(*args)
        return finish() if finish is not None else self._client.run_graph(*args)

    def start_run_graph(self, session_handle, graph_handle, step_id, feeds,
                        fetch_keys, trace=False, timeout_s=None, op_timeout_s=None):
        """Sends RunGraph and returns ``finish()``, which waits for its outcome
        (``run_graph``'s): the master sends to every peer from its own thread,
        no handoff. None when the peer is not reachable here."""
        ch = self._peers.channel(self.task_name)
        if ch is None:
            return None
        out = Outgoing()
        for k, v in feeds.items():
            out.add(k, v)
        header = {"session": session_handle, "graph": graph_handle, "step": step_id,
                  "rid": random.getrandbits(62) | 1, "fetch": list(fetch_keys),
                  "trace": bool(trace), "t": out.entries,
                  "timeout_ms": ms_from_seconds(timeout_s),
                  "op_timeout_ms": ms_from_seconds(op_timeout_s)}
        try:
            sent = ch.send("run", header, out, timeout_s + 10.0 if timeout_s else None)
        except ChannelBroken:
            self._peers.forget(self.task_name)
            return None

        def finish():
            try:
                reply, tensors = ch.receive(sent)
            except ChannelBroken as e:  # it may have run: not again
                self._peers.forget(self.task_name)
                raise _went_away(self.task_name, "RunGraph", e) from None
            stats = [tuple(s) for s in reply["stats"]] if reply.get("stats") else None
            return dict(tensors), stats

        return finish

    def abort_step(self, step_id, error=None):
        ch = self._peers.channel(self.task_name)
        error = error or errors.CancelledError(None, None, "Step was cancelled")
        if ch is not None:
            try:
                ch.call("abort", {"step": step_id, "code": int(error.error_code),
                                  "message": error.message}, timeout_s=10.0)
                return
            except (ChannelBroken, errors.OpError):
                self._peers.forget(self.task_name)
        self._client.abort_step(step_id, error)

    def __getattr__(self, name):
        return getattr(self._client, name)


__all__ = [
    "ChannelBroken",
    "SameHostChannel",
    "SameHostPeers",
    "SameHostService",
    "SameHostTransport",
    "SameHostWorker",
    "client_channel",
    "enabled",
    "socket_name",
]
