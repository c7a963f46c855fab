"""``FramedService``: a task's handlers served over the framed protocol on
the link its policy gives (``framed.link``: a Unix socket with shared memory,
a TCP stream); a codec over ``runtime.service``'s handlers, which own
validation, timeouts, de-duplication (one key space with gRPC: ``(method,
request id)``) and admission."""

from __future__ import annotations

import fcntl
import logging
import socket
import struct
import termios
import threading
import time

from nbdist import errors
from nbdist.proto import config_pb2
from nbdist.runtime.framed.collective_push import serve_push
from nbdist.runtime.framed.common import (
    HELLO_DEADLINE_S,
    MAX_CONNECTIONS,
    MAX_UNPROVEN,
    MAX_UNPROVEN_PER_SOURCE,
    RECV_POLL_MS,
    close_fd,
)
from nbdist.runtime.framed.handshake import cluster_key, server_handshake
from nbdist.runtime.framed.hangups import Hangups
from nbdist.runtime.framed.hello_slots import HelloSlots
from nbdist.runtime.framed.wire import (
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


# Framed calls by their gRPC method: the admission class they count in, and
# the method half of their request ids' key (one key space with gRPC's).
METHODS = {"run": "RunGraph", "step": "RunStep", "recv": "RecvTensorUnary",
           "pull": "RecvTensor", "push": "PushTensors", "abort": "CleanupGraph",
           "cpush": "PushCollective"}
_OTHER = "Unknown"  # what an unknown call counts as


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


class FramedService:
    """Serves a task's ``WorkerHandler`` (and ``MasterHandler``: a session's
    steps) over the framed protocol on the link ``link`` (a
    ``framed.link.ServingLink``) gives: a codec over the handlers, which own
    validation, timeouts, de-duplication and admission."""

    def __init__(self, worker_handler, address: str, token: str | None, limits,
                 link, master_handler=None):
        """``limits`` (``executor.limits.Limits``) bound what a request may
        bring: its inline bytes, each tensor, all of them together. ``token``:
        the peer-path secret its callers prove. ``endpoint`` is what the link
        says peers dial (announced by the server), or None."""
        self.handler = worker_handler
        self.master_handler = master_handler
        self.worker = worker_handler.worker
        self._link = link
        self._admission = worker_handler.admission
        # Looked up once: a call costs one dict lookup and a compare to admit.
        self._classes = {op: (method, self._admission.class_of(method)) for
                         op, method in (*METHODS.items(), (None, _OTHER))}
        self._serving = worker_handler
        self._hangups = None
        self._key = cluster_key(token)  # the peer-path secret's HMAC key
        self._max_payload = limits.max_request_bytes
        self._max_tensor = limits.max_tensor_bytes
        self._max_total = max(limits.max_request_bytes,
                              limits.max_pushed_bytes_per_client)
        self._address = address.partition("://")[2] or address
        self.endpoint: str | None = None
        self.problem: str | None = None  # why it could not serve, for the owner
        self._listener: socket.socket | None = None
        self._conns: set = set()
        self._proven = 0  # connections past their handshake
        self._unproven = HelloSlots(MAX_UNPROVEN_PER_SOURCE, MAX_UNPROVEN,
                                    HELLO_DEADLINE_S)
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(
            target=self._accept, daemon=True,
            name=f"nbdist-{link.name}{self.worker.task_name}")

    def start(self):
        """Listens (when the server starts: a server that never starts holds no
        port or name). A link that cannot listen leaves this server on its
        protocol alone (``problem`` says why, when it matters)."""
        task = self.worker.task_name
        try:
            listener, self.endpoint = self._link.listen(task)
        except OSError as e:
            self.problem = self._link.refused_listen(task, e)
            return
        self._listener = listener
        self._hangups = Hangups()
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
            conn = self._link.accepted(conn)  # no I/O (a TLS handshake: later)
            with self._lock:
                if self._stopped or self._proven >= MAX_CONNECTIONS:
                    conn.close()
                    continue
                self._conns.add(conn)
            try:
                source = self._link.source_of(conn)
            except OSError:  # it went away already
                source = "gone"
            for old in self._unproven.enter(conn, source):
                _shut(old)  # its thread ends on the closed socket
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name=f"nbdist-{self._link.name}-conn").start()

    def _serve(self, conn: socket.socket):
        link = Link(shares_memory=self._link.shares_memory, serves=True)
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
        """The handshake (``framed.handshake``): whether the peer proved the
        cluster's secret; nothing of a request is read before."""
        return server_handshake(conn, self._address, self.worker.task_name,
                                self.worker.incarnation, self._key,
                                self._link.client_of(conn),
                                uid=self._link.peer_user(conn),
                                label=self._link.label)

    def _dispatch(self, header, payload, fds, conn, link, on_hangup):
        """One call, admitted in its class (refused at once when the task's
        class is full, whichever transport): its reply and tensors. Closes the
        request's fds that it did not hand to a tensor."""
        op = header.get("op")
        method, count = self._classes.get(op) or self._classes[None]
        if count.full:
            for fd in fds:
                close_fd(fd)
            return error_header(errors.ResourceExhaustedError(
                None, None, self._admission.refusal(method, count))), None
        count.enter()
        try:
            entries = header.get("t", ())
            check_sizes(entries, self._max_tensor, self._max_total)
            if op == "push":  # before the pushed segments are mapped
                self._master().admit_push(_entries_nbytes(entries),
                                          self._link.client_of(conn))
            if op == "cpush":  # read in place: framed.collective_push
                pushed, fds = fds, ()
                return serve_push(self.handler, header, payload, pushed, link,
                                  on_hangup)
            tensors = decode_tensors(entries, payload, fds, header.get("seg"), link)
            fds = ()
            if op == "step":
                return self._step(header, tensors, on_hangup)
            if op == "run":
                return self._run(header, tensors, on_hangup)
            if op == "recv":
                return self._recv(header, conn, link)
            if op == "abort":
                return self._once("CleanupGraph", header, lambda: self._abort(header))
            if op == "pull":
                return self._pull(header)
            if op == "push":
                return self._push(header, tensors, conn)
            raise errors.InvalidArgumentError(
                None, None, f"Unknown {self._link.label} call {str(op)[:100]!r} to "
                f"{self.worker.task_name}")
        except errors.OpError as e:
            return error_header(e), None
        except (KeyError, TypeError, ValueError) as e:
            return error_header(errors.InvalidArgumentError(
                None, None, f"Malformed {self._link.label} {str(op)[:100]} request "
                f"to {self.worker.task_name}: {e}")), None
        except Exception as e:  # noqa: BLE001 - answered, as gRPC answers UNKNOWN
            _log.exception("%s: %s %s failed", self.worker.task_name,
                           self._link.label, op)
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

    def _master(self):
        if self.master_handler is None:
            raise errors.UnimplementedError(
                None, None, f"{self.worker.task_name} serves no master here")
        return self.master_handler

    def _once(self, method: str, header, fn):
        """``fn()`` (a handler's answer), once per request id ``rid``: a retry
        gets the first answer, whichever codec brought the first try
        (``Serving.once``: ``(method, rid)`` with gRPC's method names). A
        request without a ``rid`` (an old client) runs as it is."""
        return self._serving.once(method, int(header.get("rid") or 0), fn)

    def _run(self, header, tensors, on_hangup):
        step_id = int(header["step"])

        def run():
            return self.handler.run_graph(
                str(header["session"]), str(header["graph"]), step_id,
                tensors, [str(k) for k in header["fetch"]],
                bool(header.get("trace")), int(header.get("timeout_ms", 0)),
                on_hangup=on_hangup)

        out_values, stats = self._once("RunGraph", header, run)
        out = Outgoing()
        for k, v in out_values.items():
            out.add(k, v)
        reply = {"t": out.entries}
        if stats:
            reply["stats"] = [list(s) for s in stats]
        return reply, out

    def _step(self, header, tensors, on_hangup):
        """A session's RunStep (one without trace or partition graphs)."""
        master = self._master()
        timeout_ms = int(header.get("timeout_ms", 0))
        options = None
        if timeout_ms > 0:
            options = config_pb2.RunOptions(timeout_in_ms=timeout_ms)
        args = (str(header["session"]), tensors, [str(f) for f in header["fetch"]],
                [str(t) for t in header.get("target", ())], options, None,
                on_hangup)
        values = self._once("RunStep", header, lambda: master.run_step(*args))
        out = Outgoing()
        for i, v in enumerate(values):
            out.add(str(i), v)
        return {"t": out.entries}, out

    def _abort(self, header):
        self.handler.cleanup_graph(int(header["step"]), errors.make_error(
            int(header.get("code", 1)), str(header.get("message", ""))))
        return {}, None

    def _push(self, header, tensors, conn):
        """A client's large feeds, kept for the RunStep naming them
        (``MasterHandler.push``, as PushTensors): tensor names are push ids."""
        master, client = self._master(), self._link.client_of(conn)

        def push():
            keys = [master.push(int(name, 16), value, client)
                    for name, value in tensors]
            return {"keys": keys}, None
        return self._once("PushTensors", header, push)

    def _pull(self, header):
        step_id, key = int(header["step"]), str(header["key"])
        timeout = max(0.001, float(header.get("timeout_s", PARKED_WAIT_S)))
        value = self.handler.recv_tensor(step_id, key, timeout)
        out = Outgoing()
        out.add(key, value)
        return {"t": out.entries}, out


def _entries_nbytes(entries) -> int:
    return sum(int(e.get("n", 0)) for e in entries)


def _shut(conn) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


__all__ = ["METHODS", "FramedService"]
