"""One listening port for the framed protocol and another protocol (issue 38:
a cluster whose tasks expose one port each, a Kubernetes Service or a
firewall): ``SharedPort`` accepts on the task's port and looks at what a new
connection sends first, without reading it (``MSG_PEEK``). A framed client
sends ``PREAMBLE`` before anything else (before TLS too): that connection
goes, the preamble read, to the framed service (``framed_listener()``, which a
``FramedService`` accepts from as from a socket). Anything else (HTTP/2's
preface, a TLS ClientHello) is relayed byte for byte to the inner server
(``connect_inner(client's address)``, e.g. gRPC on an address only this
process knows), by the kernel where it can (``os.splice`` through a pipe: the
bytes never reach Python). Both kinds of client speak first, so nothing waits
on the server.

>>> PREAMBLE.startswith(b"PRI *")  # never mistaken for HTTP/2
False
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading

__all__ = ["PREAMBLE", "SharedPort"]

_log = logging.getLogger("nbdist")

# Neither HTTP/2's preface ("PRI * HTTP/2.0") nor a TLS record (0x16 0x03) starts
# with a zero byte: one byte tells them apart, the rest guards against a stray.
PREAMBLE = b"\x00nbdist-framed/1\n"
PEEK_TIMEOUT_S = 10.0  # a connection silent this long is dropped
_CHUNK = 1 << 16
_CLOSED = object()


class _FramedListener:
    """What a ``FramedService`` accepts from: the port's framed connections,
    their preamble read."""

    def __init__(self):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self.closed = False

    def put(self, conn) -> bool:
        if self.closed:
            return False
        self._queue.put(conn)
        return True

    def accept(self):
        conn = self._queue.get()
        if conn is _CLOSED:
            self._queue.put(_CLOSED)  # for any other accepting thread
            raise OSError("the shared port's framed listener is closed")
        return conn, conn.getpeername()

    def shutdown(self, how=None) -> None:
        self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._queue.put(_CLOSED)
        while True:  # connections nobody will serve now
            try:
                conn = self._queue.get_nowait()
            except queue.Empty:
                break
            if conn is not _CLOSED:
                conn.close()
        self._queue.put(_CLOSED)


class SharedPort:
    """Accepts on ``listener`` (bound, listening); framed connections to
    ``framed_listener()``, every other to a fresh ``connect_inner(client's
    address)`` socket, relayed both ways until either side ends."""

    def __init__(self, listener: socket.socket, connect_inner, name: str = "port"):
        self.listener = listener
        self._connect_inner = connect_inner
        self._framed: _FramedListener | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True,
                                        name=f"nbdist-shared-{name}")

    @property
    def port(self) -> int:
        return self.listener.getsockname()[1]

    def framed_listener(self) -> _FramedListener:
        """The listener of the port's framed connections (one; until it is
        asked for, a framed client is refused: it falls back)."""
        with self._lock:
            if self._framed is None or self._framed.closed:
                self._framed = _FramedListener()
            return self._framed

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stops accepting; relayed connections end as the inner server ends them."""
        with self._lock:
            self._stopped.set()
            framed = self._framed
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        if framed is not None:
            framed.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                # A peer reset before accept, or out of descriptors: the
                # next one, after a pause (no spinning on a lasting error).
                if self._stopped.wait(0.01):
                    return
                continue
            threading.Thread(target=self._route, args=(conn,), daemon=True,
                             name="nbdist-shared-route").start()

    def _route(self, conn: socket.socket) -> None:
        try:
            framed = _starts_with_preamble(conn)
        except OSError:  # silent, or gone before it said anything
            conn.close()
            return
        if framed:
            with self._lock:
                target = self._framed
            if target is None or not target.put(conn):
                conn.close()  # no framed service here: the client uses gRPC
            return
        self._relay(conn)

    def _relay(self, conn: socket.socket) -> None:
        try:
            inner = self._connect_inner(conn.getpeername())
        except OSError as e:
            _log.warning("shared port: the inner server does not answer (%s)", e)
            conn.close()
            return
        ends = [2]
        lock = threading.Lock()

        def done():
            with lock:
                ends[0] -= 1
                last = ends[0] == 0
            if last:
                conn.close()
                inner.close()

        threading.Thread(target=_pump, args=(inner, conn, done), daemon=True,
                         name="nbdist-shared-out").start()
        _pump(conn, inner, done)


def _starts_with_preamble(conn: socket.socket) -> bool:
    """Whether ``conn``'s first bytes are ``PREAMBLE`` (then read), peeked
    until they tell; leaves ``conn`` blocking."""
    conn.settimeout(PEEK_TIMEOUT_S)
    try:
        head = conn.recv(len(PREAMBLE), socket.MSG_PEEK)
        if not head:
            raise OSError("closed before it sent anything")
        if not PREAMBLE.startswith(head):
            return False
        if len(head) < len(PREAMBLE):  # rare: the preamble is one write
            head = conn.recv(len(PREAMBLE), socket.MSG_PEEK | socket.MSG_WAITALL)
            if head != PREAMBLE:
                return False
        conn.recv(len(PREAMBLE))  # consumed: the rest is the framed protocol's
        return True
    finally:
        conn.settimeout(None)


def _copy(src: socket.socket, dst: socket.socket) -> None:
    """``src``'s bytes to ``dst`` until ``src`` ends, through a pipe with
    ``os.splice`` (Linux, as the framed codec's memfd segments): the kernel
    moves them, Python never holds them."""
    r, w = os.pipe()
    try:
        s, d = src.fileno(), dst.fileno()
        while n := os.splice(s, w, _CHUNK):
            while n:
                n -= os.splice(r, d, n)
    finally:
        os.close(r)
        os.close(w)


def _pump(src: socket.socket, dst: socket.socket, done) -> None:
    """Moves ``src``'s bytes to ``dst`` until ``src`` ends (then ``dst`` is
    told: its write side shut); ``done()`` after."""
    try:
        _copy(src, dst)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        for sock in (src, dst):  # one side broke: end both ways
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
    finally:
        done()
