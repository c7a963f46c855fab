"""The TCP peer path's TLS stream (``tcp.tls.TlsStream``) reads frames as a
plaintext socket does: frames sent back to back (several in one read of the
socket, a large one across many TLS records and reads) arrive whole, in
order, byte for byte what was sent, and a peer that closes reads as the end
of the connection. Its reads of the socket are large: far fewer than frames.
"""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest
from test_tls_tcp_path import pki  # noqa: F401 - the fixture

from nbdist.runtime.framed.wire import (
    ChannelClosed,
    Link,
    Outgoing,
    decode_tensors,
    recv_frame,
    send_frame,
)
from nbdist.runtime.tcp import tune_tcp
from nbdist.runtime.tcp.tls import _RECV_BYTES, TlsLink, TlsStream

# Tensors of 0 bytes, under a record (16 KiB), over one, and over one read
# of the socket (``_RECV_BYTES``), of two dtypes.
SIZES = (0, 3, 1000, 5000, (_RECV_BYTES * 3) // 8 + 17)


def _connected(link: TlsLink | None):
    """(client, server): a TCP connection on 127.0.0.1, TLS-wrapped by
    ``link`` as the peer path wraps it, or plaintext."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname(), timeout=30)
        server, _ = listener.accept()
    server.settimeout(30)
    for s in (client, server):
        tune_tcp(s)
    if link is None:
        return client, server
    server = link.server_wrapper("/job:ps/replica:0/task:0")(server)
    wrapped = {}
    t = threading.Thread(target=lambda: wrapped.setdefault(
        "client", link.client(client, "localhost", "localhost:1")), daemon=True)
    t.start()
    server._serve_handshake()  # (a server's runs at its first read)
    t.join(30)
    return wrapped["client"], server


def _tensors(seed: int) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [(f"t{n}", (rng.standard_normal(n).astype(np.float32) if n % 2
                       else rng.integers(-9, 9, n, dtype=np.int64)))
            for n in SIZES]


class _CountingReads:
    """Counts the reads of the TCP socket under a TLS stream."""

    def __init__(self, sock):
        self._sock, self.reads = sock, 0

    def recv_into(self, buf):
        self.reads += 1
        return self._sock.recv_into(buf)

    def __getattr__(self, name):
        return getattr(self._sock, name)


@pytest.mark.parametrize("secure", [True, False], ids=["tls", "plaintext"])
def test_frames_sent_back_to_back_arrive_whole_and_in_order(pki, secure):  # noqa: F811
    client, server = _connected(TlsLink(pki["cluster"]) if secure else None)
    frames = [({"op": "run", "n": i, "t": None}, _tensors(i)) for i in range(6)]
    link = Link(shares_memory=False)

    def send_all():
        for header, tensors in frames:
            out = Outgoing()
            for name, value in tensors:
                out.add(name, value)
            send_frame(client, {**header, "t": out.entries}, out, link)

    sender = threading.Thread(target=send_all, daemon=True)
    with client, server:
        if secure:
            server._sock = counted = _CountingReads(server._sock)
        sender.start()
        for header, tensors in frames:
            got_header, payload, fds = recv_frame(server, 1 << 30)
            assert got_header["op"] == "run" and got_header["n"] == header["n"]
            got = decode_tensors(got_header["t"], payload, fds)
            assert [name for name, _ in got] == [name for name, _ in tensors]
            for (_, value), (_, sent) in zip(got, tensors):
                assert value.dtype == sent.dtype
                np.testing.assert_array_equal(value, sent)
        sender.join(30)
        if secure:
            assert isinstance(server, TlsStream)
            total = sum(v.nbytes for _, t in frames for _, v in t)
            # Large reads: at most a few per _RECV_BYTES, not one per record
            # (16 KiB) or per frame part.
            assert counted.reads <= 4 * (total // _RECV_BYTES + len(frames))


@pytest.mark.parametrize("secure", [True, False], ids=["tls", "plaintext"])
def test_a_peer_that_closes_after_its_frame_reads_as_the_end(pki, secure):  # noqa: F811
    client, server = _connected(TlsLink(pki["cluster"]) if secure else None)
    with server:
        with client:  # (its answer read: nothing unread to reset the connection)
            send_frame(client, {"op": "last"})
            header, payload, _ = recv_frame(server, 1 << 20)
            assert header == {"op": "last"} and payload.size == 0
            send_frame(server, {"op": "bye"})
            assert recv_frame(client, 1 << 20)[0] == {"op": "bye"}
        with pytest.raises(ChannelClosed, match="closed the connection"):
            recv_frame(server, 1 << 20)
