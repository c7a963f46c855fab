"""A TLS cluster keeps the TCP peer path between hosts (issue 38): its
connections are TLS with the cluster's own certificates (the server's checked
against the CA, the client's required with mutual TLS), the frames and the
secret's handshake inside; a process without the right CA or certificate is
refused, both ends log it, and the server keeps serving. Without TLS the
path is plaintext, as before.

The servers are in this process, on one host: ``NBDIST_SAME_HOST=0`` and
``NBDIST_PEER_TCP=always`` make them use the TCP path with each other.
"""

from __future__ import annotations

import collections
import logging
import socket
import threading

import numpy as np
import pytest
from helpers import local_cluster, tcp_calls, wait_for
from test_samehost_tls import _grpc_session, _key_and_cert

import nbdist as nd
from nbdist.runtime.framed.handshake import Refused
from nbdist.runtime.framed.wire import (
    Link,
    Outgoing,
    decode_tensors,
    recv_frame,
    send_frame,
)
from nbdist.runtime.grpc.auth import TlsConfig, peer_path_secret
from nbdist.runtime.tcp import TcpChannel
from nbdist.runtime.tcp.tls import TlsLink, TlsStream

PS = "/job:ps/replica:0/task:0"
# A tensor whose bytes are easy to spot on the wire: 0x5A5AA5A5 repeated.
PATTERN = np.full(1 << 16, 0x5A5AA5A5, dtype=np.int32)


@pytest.fixture(scope="module")
def pki():
    pytest.importorskip("cryptography")
    _, ca, ca_key, ca_name = _key_and_cert("nbdist test CA", is_ca=True)
    key, cert, _, _ = _key_and_cert("localhost", (ca_key, ca_name))
    _, stranger_ca, s_key, s_name = _key_and_cert("another CA", is_ca=True)
    s_cert_key, s_cert, _, _ = _key_and_cert("localhost", (s_key, s_name))
    return {"cluster": TlsConfig(cert=cert, key=key, ca=ca),
            "mutual": TlsConfig(cert=cert, key=key, ca=ca, client_auth=True),
            # Trusts the cluster's CA, holds a certificate of another.
            "intruder": TlsConfig(cert=s_cert, key=s_cert_key, ca=ca),
            "stranger": TlsConfig(cert=s_cert, key=s_cert_key, ca=stranger_ca)}


def _tcp_service(server):
    (service,) = [s for p, s in zip(server._paths, server._path_services)
                  if p.name == "tcp"]
    return service


def _endpoint(server) -> tuple[str, int]:
    host, _, port = _tcp_service(server).endpoint.rpartition(":")
    return host, int(port)


def _steps_over_tcp(servers, tls, steps=4):
    """A ps and a worker (TLS ``tls`` or plaintext) moving ``PATTERN`` plus a
    counter from the ps to the worker each step: (fetched values, the worker's
    TCP calls after its steps, the ps and the worker)."""
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0, tls=tls)
    worker = servers(cluster, "worker", 0, tls=tls)
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            v = nd.Variable(np.zeros(4, np.float32), name="v")
            bump = v.assign_add(np.ones(4, np.float32))
            pattern = nd.constant(PATTERN) * 1
        with nd.device("/job:worker/task:0"), nd.control_dependencies([bump]):
            got = [nd.identity(bump) * 2.0, nd.identity(pattern)]
        init = nd.global_variables_initializer()
    with g.as_default(), nd.Session(worker.target) as sess:
        sess.run(init)
        # A task looks its peer's endpoint up when it first needs it.
        wait_for(lambda: (sess.run(got), tcp_calls(worker).get((PS, "run")))[1],
                 30, "the worker to reach the ps over TCP", interval=0.05)
        before = tcp_calls(worker)
        values = [sess.run(got) for _ in range(steps)]
        calls = {k: n - before.get(k, 0) for k, n in tcp_calls(worker).items()}
    return values, calls, ps, worker


@pytest.mark.parametrize("secure", [True, False], ids=["tls", "plaintext"])
def test_a_steps_tensors_between_hosts_take_the_tcp_path_in_tls_when_the_cluster_has_it(
        servers, tcp, pki, secure):
    values, calls, ps, _ = _steps_over_tcp(servers, pki["cluster"] if secure else None)
    for i, (counter, pattern) in enumerate(values):
        assert pattern.dtype == np.int32
        np.testing.assert_array_equal(pattern, PATTERN)
        np.testing.assert_array_equal(counter, np.full(4, 2.0 * (counter[0] / 2)))
        if i:  # the counter moves by one each step
            assert counter[0] == values[i - 1][0][0] + 2.0
    assert calls.get((PS, "run")) == len(values)  # every RunGraph over TCP
    assert calls.get((PS, "recv")) == len(values)  # every tensor's exchange too
    conns = list(_tcp_service(ps)._conns)
    assert conns
    if secure:
        assert all(isinstance(c, TlsStream) for c in conns)
        assert {c.version() for c in conns} == {"TLSv1.3"}
    else:
        assert all(type(c) is socket.socket for c in conns)


class _Relay:
    """Passes one TCP connection's bytes on to ``target``, keeping a copy of
    what the client sent (the wire, as anyone between two hosts sees it)."""

    def __init__(self, target: tuple[str, int]):
        self.captured = bytearray()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = self._listener.getsockname()
        self._target = target
        self._threads = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        client, _ = self._listener.accept()
        upstream = socket.create_connection(self._target, timeout=30)
        for src, dst, keep in ((client, upstream, True), (upstream, client, False)):
            t = threading.Thread(target=self._pump, args=(src, dst, keep), daemon=True)
            t.start()
            self._threads.append(t)

    def _pump(self, src, dst, keep):
        with src, dst:
            while data := _read(src):
                if keep:
                    self.captured += data
                dst.sendall(data)
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def close(self):
        self._listener.close()
        self._thread.join(30)
        for t in self._threads:
            t.join(30)


def _read(sock) -> bytes:
    try:
        return sock.recv(1 << 16)
    except OSError:
        return b""


@pytest.mark.parametrize("secure", [True, False], ids=["tls", "plaintext"])
def test_on_the_wire_a_tensor_is_encrypted_with_tls_and_plain_without(pki, secure):
    """The TCP path's link, client and server, through a relay that records
    the client's bytes: a tensor sent in a frame arrives whole, and its bytes
    appear on the wire only without TLS."""
    link = TlsLink(pki["cluster"])
    listener = socket.create_server(("127.0.0.1", 0))
    relay = _Relay(listener.getsockname())
    received = {}

    def serve():
        conn, _ = listener.accept()
        if secure:
            conn = link.server_wrapper("/job:ps/replica:0/task:0")(conn)
        with conn:
            header, payload, fds = recv_frame(conn, 1 << 30)
            received["t"] = decode_tensors(header["t"], payload, fds)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    sock = socket.create_connection(relay.address, timeout=30)
    if secure:
        sock = link.client(sock, "localhost", "localhost:1")
    with sock:
        out = Outgoing()
        out.add("pattern", PATTERN)
        send_frame(sock, {"op": "x", "t": out.entries}, out, Link(shares_memory=False))
        server.join(30)
    relay.close()
    listener.close()
    ((name, value),) = received["t"]
    assert name == "pattern"
    np.testing.assert_array_equal(value, PATTERN)
    assert len(relay.captured) >= PATTERN.nbytes
    on_the_wire = PATTERN[:64].tobytes() in relay.captured
    assert on_the_wire is not secure


def _channel(server, tls, token=None) -> TcpChannel:
    """A channel to ``server``'s TCP port made as a peer makes it."""
    address = server.target.removeprefix("grpc://")
    return TcpChannel(None, address, token, collections.Counter(), _endpoint(server),
                      TlsLink(tls) if tls is not None else None)


def test_a_client_without_the_right_ca_or_certificate_is_refused_and_the_server_keeps_serving(
        servers, tcp, pki, graph, caplog):
    caplog.set_level(logging.WARNING, logger="nbdist")
    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0, tls=pki["mutual"])
    secret = peer_path_secret(None, pki["mutual"])
    # Another CA's client does not trust the server's certificate.
    with pytest.raises(Refused, match="certificate verify failed"):
        _channel(server, pki["stranger"], secret).open()
    assert "TLS handshake with the TCP peer path" in caplog.text
    # Mutual TLS: a client whose certificate another CA signed is refused.
    # (TLS 1.3: the server's refusal comes after the client's handshake ended,
    # as an alert or a reset, whichever the client meets first.)
    with pytest.raises(Refused, match="TCP peer path of"):
        _channel(server, pki["intruder"], secret).open()
    assert "refused a TLS connection to its TCP peer path" in caplog.text
    # A plaintext client's hello gets no answer (at most a TLS alert), then
    # the end of the connection.
    with socket.create_connection(_endpoint(server), timeout=30) as sock:
        send_frame(sock, {"op": "hello"})
        answer = b""
        while chunk := _read(sock):
            answer += chunk
        assert b"task" not in answer and b"challenge" not in answer
    assert "refused a TLS connection to its TCP peer path" in caplog.text
    # The cluster's own certificate still gets in, and the server serves.
    ch = _channel(server, pki["mutual"], secret)
    ch.open()
    ch.close()
    with _grpc_session(server.target, pki["mutual"]) as s:
        assert s.run(nd.constant(2.0) * 3.0) == 6.0


def test_a_session_on_another_host_reaches_its_master_over_tls(servers, tcp, pki,
                                                               graph):
    """The session's client looks its master's endpoint up over gRPC with TLS,
    then runs its steps (a large feed and fetch) in TLS on the TCP path."""
    from nbdist.runtime import transports

    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0, tls=pki["cluster"])
    wait_for(lambda: server._coordination_client.try_get(transports.endpoint_key(
        "tcp", "@" + cluster["worker"][0])), 30, "the endpoint announced")
    feed = nd.placeholder(nd.int32, [None])
    doubled = feed * 2
    with _grpc_session(server.target, pki["cluster"]) as sess:
        ch = sess._master._same_host()
        assert ch is not None and ch.endpoint == _endpoint(server)
        np.testing.assert_array_equal(sess.run(doubled, {feed: PATTERN}), PATTERN * 2)
        assert ch._calls[(None, "push")] + ch._calls[(None, "step")] >= 1
        assert [type(c) for c, _ in ch._idle] == [TlsStream]
