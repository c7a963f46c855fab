"""TLS on the TCP peer path: its connections wrapped with the cluster's own
certificates when the cluster uses TLS (``runtime.tcp``).

A ``TlsLink`` is made from the task's TLS configuration (the object its gRPC
server and clients use: ``cert``, ``key``, ``ca``, ``client_auth``; PEM data or
paths) and does what gRPC's credentials do: the server presents its
certificate and, with ``client_auth``, requires a client certificate signed
by ``ca``; the client checks the server's certificate against ``ca`` (the
system's roots without one) and the host it dialed, and presents its own
certificate when it has one. The frames and the handshake proving the
cluster's secret (``framed.handshake``) then run inside TLS, unchanged.

``TlsStream`` is a TCP socket with TLS as ``framed.wire`` uses one
(``sendmsg``, ``recvmsg_into``; no descriptors pass between hosts). Records
are made and read in memory and cross the kernel in large calls; a frame's
small parts go out as one record, each large tensor is encrypted from its
array, and a payload is decrypted straight into the receiving buffer.

>>> import ssl
>>> TlsStream.__name__, ssl.PROTOCOL_TLS_SERVER is not None
('TlsStream', True)
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import ssl
import tempfile

from nbdist.runtime.framed.handshake import Refused, log_refusal

_COALESCE_BYTES = 1 << 16  # parts under this go out together, in one write
_SEND_BYTES = 1 << 20  # a large buffer is encrypted and sent this much at a time
_RECV_BYTES = 1 << 18  # the most one read of the socket takes
_log = logging.getLogger("nbdist")


def _is_pem(value) -> bool:
    if isinstance(value, bytes):
        return True
    return str(value).lstrip().startswith("-----BEGIN")


def _pem_text(value) -> str:
    """PEM data (a CA bundle) as text: given inline, or read from its path."""
    if isinstance(value, bytes):
        return value.decode()
    if _is_pem(value):
        return str(value)
    with open(str(value), encoding="ascii") as f:
        return f.read()


def _load_chain(context: ssl.SSLContext, cert, key) -> None:
    """``cert`` and ``key`` into ``context``: ``ssl`` reads them from files
    only, so PEM data is written to a private temporary file (0600) for the
    load and removed at once."""
    if not _is_pem(cert) and not _is_pem(key):
        context.load_cert_chain(str(cert), str(key))
        return
    fd, path = tempfile.mkstemp(prefix="nbdist-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            for part in (key, cert):
                f.write(part if isinstance(part, bytes) else
                        _pem_text(part).encode())
                f.write(b"\n")
        context.load_cert_chain(path)
    finally:
        os.unlink(path)


def _why(e: OSError) -> str:
    """What went wrong, in words ("certificate verify failed: ...")."""
    if not isinstance(e, ssl.SSLError):
        return str(e)
    reason = (getattr(e, "reason", None) or str(e)).lower().replace("_", " ")
    verify = getattr(e, "verify_message", None)
    return f"{reason}: {verify}" if verify else reason


class TlsLink:
    """TLS for one task's TCP peer path, from its TLS configuration ``tls``."""

    def __init__(self, tls):
        self._tls = tls
        self._server: ssl.SSLContext | None = None
        self._client: ssl.SSLContext | None = None

    def _server_context(self) -> ssl.SSLContext:
        if self._server is None:
            tls = self._tls
            if not (tls.cert and tls.key):
                raise ValueError("A TLS server needs both a certificate and a key "
                                 "(NBDIST_TLS_CERT and NBDIST_TLS_KEY)")
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            _load_chain(ctx, tls.cert, tls.key)
            if tls.client_auth:  # mutual TLS, as the task's gRPC server
                ctx.load_verify_locations(cadata=_pem_text(tls.ca))
                ctx.verify_mode = ssl.CERT_REQUIRED
            self._server = ctx
        return self._server

    def _client_context(self) -> ssl.SSLContext:
        if self._client is None:
            tls = self._tls
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies cert and host
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            if tls.ca:
                ctx.load_verify_locations(cadata=_pem_text(tls.ca))
            else:
                ctx.load_default_certs()
            if tls.cert and tls.key:
                _load_chain(ctx, tls.cert, tls.key)
            self._client = ctx
        return self._client

    def server_wrapper(self, task: str):
        """What a task's service applies to each accepted connection: the TLS
        handshake runs on the connection's own thread, at its first read (under
        the handshake's read timeout); a peer that fails it is logged and
        dropped, and the service keeps serving."""
        ctx = self._server_context()

        def wrap(conn: socket.socket) -> TlsStream:
            return TlsStream(conn, ctx, task=task)
        return wrap

    def client(self, sock: socket.socket, host: str, address: str) -> TlsStream:
        """``sock`` (connected to the peer-path port of the task at
        ``address`` on ``host``) after the TLS handshake; ``Refused`` (logged)
        when the server's certificate does not pass, or the server refuses
        ours."""
        stream = TlsStream(sock, self._client_context(), host=host, address=address)
        try:
            stream.handshake()
            # Kept for the secret's handshake: a server refusing our
            # certificate may reset the connection any moment now.
            stream.names = (sock.getsockname(), sock.getpeername())
        except OSError as e:  # (a reset: a server refusing our certificate)
            message = (f"TLS handshake with the TCP peer path of {address} failed "
                       f"({_why(e)}): refused (gRPC instead)")
            log_refusal("client", address, message, logging.ERROR)
            raise Refused(message) from None
        return stream


class TlsStream:
    """A TCP socket with TLS, as ``framed.wire`` uses a socket; every other
    attribute (timeouts, ``fileno``, ``shutdown``, ``close``...) is the TCP
    socket's. The records go through memory (``ssl.SSLObject``), so that a
    frame's bytes cross the kernel in a few large calls, as in plaintext,
    instead of one or two per 16 KiB record (an ``ssl.SSLSocket``'s): about a
    tenth less CPU per megabyte; the rest is the cipher's.

    A server's (``task``: the serving task) runs its TLS handshake at its
    first read. A client's (``host`` checked against the server's
    certificate; ``address``: the task it reached) reports a failure of its
    first exchange as ``Refused``: with TLS 1.3 a server that refuses the
    client's certificate says so (an alert, or a reset) only after the
    client's handshake ended."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext,
                 task: str | None = None, host: str | None = None, address: str = ""):
        self._sock = sock
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._in, self._out, server_side=task is not None,
                                     server_hostname=host)
        self._task = task
        self._address = address
        self._pending = True  # the server's handshake, the client's first answer
        self._chunk = bytearray(_RECV_BYTES)
        self._record_left = True  # bytes of a decrypted record not yet read
        self.names: tuple | None = None  # (this end, the peer) once connected

    def __getattr__(self, name):
        return getattr(self._sock, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._sock.close()

    def getsockname(self):
        return self.names[0] if self.names else self._sock.getsockname()

    def getpeername(self):
        return self.names[1] if self.names else self._sock.getpeername()

    def version(self) -> str | None:
        return self._tls.version()

    def handshake(self) -> None:
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill():
                    raise ssl.SSLEOFError(ssl.SSL_ERROR_EOF, "EOF in the handshake")
            except ssl.SSLError:
                with contextlib.suppress(OSError):
                    self._flush()  # the alert saying why, for the peer's log
                raise
        self._flush()

    def _flush(self) -> None:
        if self._out.pending:
            self._sock.sendall(self._out.read())

    def _fill(self) -> int:
        """Reads what the peer sent (up to ``_RECV_BYTES``) into the records'
        buffer; 0 when it closed."""
        n = self._sock.recv_into(self._chunk)
        if n:
            self._in.write(memoryview(self._chunk)[:n])
        return n

    def sendall(self, data) -> None:
        view = memoryview(data).cast("B")
        for start in range(0, len(view), _SEND_BYTES):
            self._tls.write(view[start:start + _SEND_BYTES])
            self._flush()

    def recv_into(self, view) -> int:
        """Fills ``view`` with what has come (at least one byte; 0: the peer
        closed), reading the socket only when no record is left in memory."""
        view = memoryview(view)  # (a slice of a bytearray would be a copy)
        tls, incoming = self._tls, self._in
        got, want = 0, view.nbytes
        while got < want:
            # Nothing in memory: the socket's turn, without asking the records
            # first (an SSLWantReadError costs about as much as a small read).
            # Whether a decrypted record has bytes left is known from the last
            # read, not asked (``pending()`` lets the GIL go: a thread switch).
            if incoming.pending or self._record_left:
                asked = want - got
                try:
                    n = tls.read(asked, view[got:])
                except ssl.SSLWantReadError:  # a record not whole yet
                    self._record_left = False
                except ssl.SSLZeroReturnError:  # the peer's close_notify
                    break
                else:
                    # A read returns one record's bytes at most: one that filled
                    # what was asked may have left some of its record.
                    self._record_left = n == asked
                    got += n
                    continue
            if got:
                break
            self._flush()  # (what the records asked for: a key update)
            if not self._fill():
                break
        return got

    def sendmsg(self, parts, ancdata=(), flags=0, address=None) -> int:
        """Sends every byte of ``parts``: small ones together, each large one
        from its own buffer."""
        if ancdata:
            raise ValueError("descriptors cannot be sent over a TLS connection")
        if self._pending and self._task is None:
            return self._refused_if_fails(self._send, parts)
        return self._send(parts)

    def _send(self, parts) -> int:
        pending = bytearray()
        total = 0
        for part in parts:
            view = memoryview(part).cast("B")
            total += len(view)
            if len(view) < _COALESCE_BYTES:
                pending += view
                if len(pending) < _COALESCE_BYTES:
                    continue
            if pending:
                self._tls.write(pending)
                pending = bytearray()
            if len(view) >= _COALESCE_BYTES:
                self.sendall(view)
        if pending:
            self._tls.write(pending)
        self._flush()
        return total

    def recvmsg_into(self, buffers, ancbufsize=0, flags=0):
        """Reads into ``buffers[0]`` (no descriptors come over TLS)."""
        if self._pending:
            if self._task is not None:
                self._serve_handshake()
            else:
                n = self._refused_if_fails(self.recv_into, buffers[0])
                if not n:
                    raise self._refusal("it closed the connection")
                self._pending = False
                return n, [], 0, None
        return self.recv_into(buffers[0]), [], 0, None

    def _refused_if_fails(self, fn, arg):
        try:
            return fn(arg)
        except OSError as e:
            if isinstance(e, Refused):
                raise
            raise self._refusal(_why(e)) from None

    def _refusal(self, why: str) -> Refused:
        message = (f"The TCP peer path of {self._address} ended the TLS "
                   f"connection after its handshake ({why}): it does not accept "
                   "this process's certificate? gRPC instead")
        log_refusal("client", self._address, message, logging.ERROR)
        return Refused(message)

    def _serve_handshake(self) -> None:
        try:
            self.handshake()
        except ssl.SSLError as e:
            try:
                host, port = self._sock.getpeername()[:2]
                peer = f"{host}:{port}"
            except OSError:
                peer = "a peer that went away"
            log_refusal("server", f"{self._task} {peer}",
                        f"{self._task}: refused a TLS connection to its TCP peer "
                        f"path from {peer} ({_why(e)}); it can use gRPC")
            raise
        self._pending = False


__all__ = ["TlsLink", "TlsStream"]
