"""``SameHostService``: a task's handlers served on its abstract Unix socket
(see the package's docstring); a codec over ``runtime.service``'s handlers."""

from __future__ import annotations

import fcntl
import logging
import os
import select
import socket
import struct
import termios
import threading
import time

from nbdist import errors
from nbdist.proto import config_pb2
from nbdist.runtime.samehost.collective_push import serve_push
from nbdist.runtime.samehost.common import (
    HELLO_DEADLINE_S,
    MAX_CONNECTIONS,
    MAX_UNPROVEN,
    MAX_UNPROVEN_PER_SOURCE,
    RECV_POLL_MS,
    close_fd,
    socket_name,
    tune_tcp,
)
from nbdist.runtime.samehost.handshake import cluster_key, peer_uid, server_handshake
from nbdist.runtime.samehost.hello_slots import HelloSlots
from nbdist.runtime.samehost.wire import (
    ChannelClosed,
    Link,
    Outgoing,
    check_sizes,
    decode_tensors,
    error_header,
    recv_frame,
    send_frame,
)
from nbdist.runtime.service.worker_handler import PARKED_WAIT_S
from nbdist.runtime.timeouts import UNBOUNDED_S, ms_as_seconds

_log = logging.getLogger("nbdist")
_PORT_TRIES = 16  # free ports tried for the TCP path, skipping the cluster's


class _Hangups:
    """Calls a connection's ``fn`` when it hangs up (its client died or gave
    up): the step it waits for is cancelled, as a gRPC call's end cancels it.
    A connection is watched from its hello to its end; a call only sets its
    ``fn`` (``on_hangup``: a dict store, no system call per step). An ``fn``
    left by a finished call is harmless: its ``HangupWatch`` has finished."""

    def __init__(self):
        self._poll = select.epoll()
        self._wake_r, self._wake_w = os.pipe()
        self._poll.register(self._wake_r, select.EPOLLIN)
        self._fns: dict[int, object] = {}
        self._gone: set[int] = set()  # watched connections that hung up
        self._watched: set[int] = set()
        self._lock = threading.Lock()  # taken per connection, not per call
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="nbdist-samehost-hangups")
        self._thread.start()

    def watch(self, conn):
        """Watches ``conn`` until ``unwatch``; its ``on_hangup(fn) -> True``."""
        fd = conn.fileno()
        fns, gone = self._fns, self._gone
        with self._lock:
            self._watched.add(fd)
            gone.discard(fd)
            self._poll.register(fd, select.EPOLLRDHUP | select.EPOLLHUP)

        def on_hangup(fn) -> bool:  # False: it hung up already
            fns[fd] = fn
            return fd not in gone  # _run marks it gone before taking its fn
        return on_hangup

    def unwatch(self, conn) -> None:
        """Before ``conn`` closes (its fd may be reused)."""
        fd = conn.fileno()
        with self._lock:
            self._watched.discard(fd)
            self._fns.pop(fd, None)
            self._gone.discard(fd)
            try:
                self._poll.unregister(fd)
            except (OSError, ValueError):
                pass

    def _run(self):
        while True:
            for fd, _ in self._poll.poll():
                if fd == self._wake_r:
                    os.close(self._wake_r)
                    self._poll.close()
                    return
                with self._lock:
                    if fd not in self._watched or not _hung_up(fd):
                        # Unwatched since the poll, or its number now belongs
                        # to a new connection (the old one closed meanwhile).
                        continue
                    self._gone.add(fd)
                    fn = self._fns.pop(fd, None)
                    try:
                        self._poll.unregister(fd)
                    except (OSError, ValueError):
                        pass
                if fn is not None:
                    fn()

    def close(self):
        os.write(self._wake_w, b"x")
        os.close(self._wake_w)


# Same-host calls by the method whose admission class they count in.
_METHODS = {"run": "RunGraph", "step": "RunStep", "recv": "RecvTensorUnary",
            "pull": "RecvTensor", "push": "PushTensors", "abort": "CleanupGraph"}
_OTHER = "samehost"  # what an unknown call counts as


def _values_nbytes(answer) -> int:
    values = answer[0].values() if isinstance(answer[0], dict) else answer[0]
    return sum(int(getattr(v, "nbytes", 0)) for v in values)


_ANSWERED = {"answered": True}  # a reply the producing thread already sent
# A producing thread sends an answer with at most this inline (large tensors go
# through the segment): far under a Unix socket's send buffer, so it never waits.
_ANSWER_INLINE_BYTES = 1 << 16
_ANSWER_MAX_TENSORS = 64  # ... and this many tensors (its header grows with them)


def _unread_bytes(conn: socket.socket) -> int:
    """Bytes sent on ``conn`` its peer has not read yet (``SIOCOUTQ``)."""
    return struct.unpack("i", fcntl.ioctl(conn.fileno(), termios.TIOCOUTQ,
                                          b"\0\0\0\0"))[0]


def _recv_answer(key: str, value, extras: dict) -> tuple[dict, Outgoing]:
    """The reply to a pull: ``key``'s value and the siblings that came along."""
    out = Outgoing()
    out.add(key, value)
    for k, v in extras.items():
        out.add(k, v)
    return {"t": out.entries}, out


class SameHostService:
    """Serves a task's ``WorkerHandler`` (and ``MasterHandler``: a session's
    steps) on this host's abstract socket for ``address``: a codec over the
    handlers, which own validation, timeouts, de-duplication and admission."""

    def __init__(self, worker_handler, address: str, token: str | None, limits,
                 master_handler=None, tcp_bind: str | None = None,
                 reserved_ports: frozenset = frozenset(), wrap=None):
        """``limits`` (``executor.limits.Limits``) bound what a request may
        bring: its inline bytes, each tensor, all of them together. With
        ``tcp_bind`` the service listens on a free TCP port of that interface
        instead (``samehost.tcp``), none of ``reserved_ports`` (the cluster's
        tasks' ports, which tasks not started yet will listen on); ``endpoint``
        is then ``host:port``. ``wrap``: what each accepted connection is used
        through (the TCP path's TLS, ``samehost.tls``), or None."""
        self.handler = worker_handler
        self.master_handler = master_handler
        self.worker = worker_handler.worker
        self._admission = worker_handler.admission
        # Looked up once: a call costs one dict lookup and a compare to admit.
        self._classes = {op: self._class(method) for op, method in
                         (*_METHODS.items(), (None, _OTHER))}
        self._recent = worker_handler.recent
        self._hangups = None
        self._key = cluster_key(token)  # the peer-path secret's HMAC key
        self._max_payload = limits.max_request_bytes
        self._max_tensor = limits.max_tensor_bytes
        self._max_total = max(limits.max_request_bytes,
                              limits.max_pushed_bytes_per_client)
        self._address = address.removeprefix("grpc://")
        self._tcp_bind = tcp_bind
        self._wrap = wrap
        self._reserved_ports = reserved_ports
        self.endpoint: str | None = None
        self.problem: str | None = None  # why it could not serve, for the owner
        self._listener: socket.socket | None = None
        self._conns: set = set()
        self._proven = 0  # connections past their handshake
        self._unproven = HelloSlots(MAX_UNPROVEN_PER_SOURCE, MAX_UNPROVEN,
                                    HELLO_DEADLINE_S)
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, daemon=True,
                                        name=f"nbdist-samehost{self.worker.task_name}")

    def start(self):
        """Listens (when the server starts: a server that never starts holds no
        name). A name another process holds leaves this server on gRPC alone."""
        if self._tcp_bind is not None:
            try:
                listener = _tcp_listener(self._tcp_bind.strip("[]"),
                                         self._reserved_ports)
            except OSError as e:
                _log.warning("%s: no TCP peer path (cannot listen on %s: %s); peers "
                             "on other hosts use gRPC", self.worker.task_name,
                             self._tcp_bind, e)
                return
            host = self._address.rpartition(":")[0]
            self.endpoint = f"{host}:{listener.getsockname()[1]}"
        else:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                listener.bind(socket_name(self._address))
                listener.listen(128)
            except OSError as e:
                listener.close()
                # Another process holds our name: peers that trust it would
                # reach it, not us (their handshake refuses it; still, say so).
                self.problem = (f"{self.worker.task_name}: no same-host path: its "
                                f"socket @{socket_name(self._address)[1:]} is "
                                f"taken by another process ({e}); peers on this "
                                "host use gRPC and refuse whoever holds the name")
                _log.error("%s", self.problem)
                return
        self._listener = listener
        self._hangups = _Hangups()
        self._thread.start()

    def _class(self, method: str):
        count = self._admission.class_of(method)
        return method, count, count.call_class.threads + count.call_class.waiting

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
            if self._wrap is not None:
                conn = self._wrap(conn)  # no I/O: its handshake runs on its thread
            with self._lock:
                if self._stopped or self._proven >= MAX_CONNECTIONS:
                    conn.close()
                    continue
                self._conns.add(conn)
            try:
                source = _source(conn)
            except OSError:  # it went away already
                source = "gone"
            for old in self._unproven.enter(conn, source):
                _shut(old)  # its thread ends on the closed socket
            if conn.family != socket.AF_UNIX:
                tune_tcp(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name="nbdist-samehost-conn").start()

    def _serve(self, conn: socket.socket):
        link = Link(shares_memory=conn.family == socket.AF_UNIX, serves=True)
        on_hangup = None
        proven = False
        try:
            try:
                proven = self._hello(conn)
            finally:
                self._unproven.leave(conn)
            if proven:
                with self._lock:
                    self._proven += 1
                on_hangup = self._hangups.watch(conn)
                while True:
                    header, payload, fds = recv_frame(conn, self._max_payload)
                    link.returned(header.get("ret"))
                    reply, out = self._dispatch(header, payload, fds, conn, link,
                                                on_hangup)
                    if reply is not _ANSWERED:
                        send_frame(conn, reply, out, link)
                    # Not kept while the next request is awaited: a sent
                    # variable's array still referenced here could not be
                    # updated in place (``VariableResource.claim_in_place``).
                    reply = out = None
        except (OSError, ChannelClosed, ValueError, errors.OpError):
            pass  # the peer went away or broke the protocol: drop the connection
        finally:
            with self._lock:
                self._conns.discard(conn)
                self._proven -= proven
            if on_hangup is not None:
                self._hangups.unwatch(conn)
            conn.close()
            link.close()

    def _hello(self, conn) -> bool:
        """The handshake (``samehost.handshake``): whether the peer proved the
        cluster's secret; nothing of a request is read before."""
        return server_handshake(conn, self._address, self.worker.task_name,
                                self.worker.incarnation, self._key, _peer(conn))

    def _dispatch(self, header, payload, fds, conn, link, on_hangup):
        """One call, admitted in its class (refused at once when the task's
        class is full, whichever transport): its reply and tensors. Closes the
        request's fds that it did not hand to a tensor."""
        op = header.get("op")
        method, count, bound = self._classes.get(op) or self._classes[None]
        if count.in_flight >= bound:
            for fd in fds:
                close_fd(fd)
            return error_header(errors.ResourceExhaustedError(
                None, None, self._admission.refusal(method, count))), None
        count.enter()
        try:
            entries = header.get("t", ())
            check_sizes(entries, self._max_tensor, self._max_total)
            if op == "push":  # before the pushed segments are mapped
                self._admit_push(header, conn)
            if op == "cpush":  # read in place: samehost.collective_push
                pushed, fds = fds, ()
                return serve_push(self.worker.collectives, header, payload, pushed,
                                  link, on_hangup)
            tensors = decode_tensors(entries, payload, fds, header.get("seg"), link)
            fds = ()
            if op == "step" and self.master_handler is not None:
                return self._step(header, tensors, on_hangup)
            if op == "run":
                return self._run(header, tensors, on_hangup)
            if op == "recv":
                return self._recv(header, conn, link)
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
        except Exception as e:  # noqa: BLE001 - answered, as gRPC answers UNKNOWN
            _log.exception("%s: same-host %s failed", self.worker.task_name, op)
            return error_header(errors.InternalError(
                None, None, f"{str(op)[:100]} on {self.worker.task_name} failed: "
                f"{type(e).__name__}: {e}")), None
        finally:
            count.leave()
            for fd in fds:
                close_fd(fd)

    def _recv(self, header, conn, link):
        step_id, key = int(header["step"]), str(header["key"])
        wait_s = ms_as_seconds(max(1, int(header.get("wait_ms", RECV_POLL_MS))))
        siblings = header.get("siblings") or []
        if not isinstance(siblings, list):
            raise TypeError("siblings must be a list")
        if siblings and link.shares_memory:
            # Answered by the thread that sends the last of them (its tensors
            # staged in this connection's segment, which it alone uses now) when
            # the frame cannot block it: small, to a peer that read what it was
            # sent before. Else this thread sends what that one made.
            held = []

            def answer(value, extras):
                reply, out = _recv_answer(key, value, extras)
                if (out.size > _ANSWER_INLINE_BYTES or
                        len(out.entries) > _ANSWER_MAX_TENSORS or
                        _unread_bytes(conn)):
                    held.append((reply, out))
                else:
                    send_frame(conn, reply, out, link)

            start = time.monotonic()
            if self.handler.answer_pull(step_id, key, siblings, wait_s, answer):
                return held[0] if held else (_ANSWERED, None)
            # What is left of the pull's wait (a key still not there is
            # "pending" now, not after a second wait).
            wait_s = max(0.001, wait_s - (time.monotonic() - start))
        value = self.handler.recv_tensor(step_id, key, UNBOUNDED_S, wait_s,
                                         siblings=siblings)
        if value is None:
            return {"pending": True}, None
        extras = self.handler.take_siblings(step_id, key, siblings) if siblings else {}
        return _recv_answer(key, value, extras)

    def _once(self, method: str, header, fn):
        """``fn()``, once per request id ``rid`` (a retried request gets the
        answer of the first): the handlers' ``RecentRequests``, shared with
        gRPC. This transport's own clients never retry a call that went out,
        so they send no ``rid`` (keeping answers costs a step time and memory)
        and their calls do not come here."""
        return self._recent.run(("samehost/" + method, int(header["rid"])), fn,
                                size_of=_values_nbytes)

    def _run(self, header, tensors, on_hangup):
        step_id = int(header["step"])

        def run():
            return self.handler.run_graph(
                str(header["session"]), str(header["graph"]), step_id,
                tensors, [str(k) for k in header["fetch"]],
                bool(header.get("trace")), int(header.get("timeout_ms", 0)),
                on_hangup=on_hangup)

        out_values, stats = self._once("RunGraph", header, run) if header.get(
            "rid") else run()
        out = Outgoing()
        for k, v in out_values.items():
            out.add(k, v)
        reply = {"t": out.entries}
        if stats:
            reply["stats"] = [list(s) for s in stats]
        return reply, out

    def _step(self, header, tensors, on_hangup):
        """A session's RunStep (one without trace or partition graphs)."""
        timeout_ms = int(header.get("timeout_ms", 0))
        options = None
        if timeout_ms > 0:
            options = config_pb2.RunOptions(timeout_in_ms=timeout_ms)
        args = (str(header["session"]), tensors, [str(f) for f in header["fetch"]],
                [str(t) for t in header.get("target", ())], options, None,
                on_hangup)
        if header.get("rid"):
            (values,) = self._once(
                "RunStep", header, lambda: (self.master_handler.run_step(*args),))
        else:
            values = self.master_handler.run_step(*args)
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


def _tcp_listener(bind: str, reserved: frozenset) -> socket.socket:
    """A listening socket on a free port of ``bind`` that is none of
    ``reserved`` (a free port the kernel hands out may be one a cluster spec
    named for a task that has not started yet: it must find it free)."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    taken = []
    try:
        for _ in range(_PORT_TRIES):
            listener = socket.create_server((bind, 0), backlog=128, family=family)
            if listener.getsockname()[1] not in reserved:
                return listener
            taken.append(listener)  # held, so the next try gets another port
        raise OSError(f"no free port outside the cluster's in {_PORT_TRIES} tries")
    finally:
        for s in taken:
            s.close()


def _hung_up(fd: int) -> bool:
    """Whether the connection on ``fd`` has hung up, now."""
    probe = select.poll()
    probe.register(fd, select.POLLRDHUP | select.POLLHUP)
    return bool(probe.poll(0))


def _peer(conn) -> str:
    """Who pushed, for the per-client caps: the peer process (over TCP, the
    peer's address)."""
    if conn.family != socket.AF_UNIX:
        return "tcp:" + str(conn.getpeername()[0])
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    pid = int.from_bytes(creds[:4], "little")
    return f"samehost:pid{pid}"


def _source(conn) -> str:
    """Where an unproven connection comes from, for its slots: a TCP peer's
    address, a Unix peer's user."""
    if conn.family != socket.AF_UNIX:
        return "tcp:" + str(conn.getpeername()[0])
    return f"uid:{peer_uid(conn)}"


def _shut(conn) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


__all__ = ["SameHostService"]
