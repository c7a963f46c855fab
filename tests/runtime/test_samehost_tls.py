"""TLS clusters keep the same-host path: tasks of one host prove the cluster's
secret (derived from their TLS key) over the Unix socket, by challenge and
response, and move a step's tensors there; a process without that key can
neither connect nor pass for a server, and falls back to gRPC (TLS)."""

from __future__ import annotations

import collections
import datetime
import ipaddress
import logging
import socket
import threading

import numpy as np
import pytest
from helpers import local_cluster

import nbdist as nd
from nbdist import errors
from nbdist.runtime import samehost
from nbdist.runtime.framed.handshake import Refused, client_handshake, cluster_key
from nbdist.runtime.framed.wire import (
    ChannelClosed,
    Link,
    decode_tensors,
    recv_frame,
    send_frame,
)
from nbdist.runtime.grpc.auth import TlsConfig, peer_path_secret
from nbdist.runtime.grpc.client import GrpcMasterClient


def _key_and_cert(common_name, issuer=None, is_ca=False):
    """(key PEM, cert PEM, key, name): a throwaway EC key and its certificate,
    signed by ``issuer`` ((key, name)) or by itself."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    signer_key, signer_name = issuer or (key, name)
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(signer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(hours=2)))
    if is_ca:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=0),
                                        critical=True)
    else:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    cert = builder.sign(signer_key, hashes.SHA256())
    key_pem = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return key_pem, cert.public_bytes(serialization.Encoding.PEM), key, name


@pytest.fixture(scope="module")
def pki():
    pytest.importorskip("cryptography")
    _, ca, ca_key, ca_name = _key_and_cert("nbdist test CA", is_ca=True)
    key, cert, _, _ = _key_and_cert("localhost", (ca_key, ca_name))
    other_key, other_cert, _, _ = _key_and_cert("localhost", (ca_key, ca_name))
    return {"ca": ca, "cluster": TlsConfig(cert=cert, key=key, ca=ca),
            "other": TlsConfig(cert=other_cert, key=other_key, ca=ca)}


def _path_calls(server) -> collections.Counter:
    """The server's same-host calls so far, by (peer, call)."""
    paths = server._router.path_peers
    return collections.Counter(dict(paths[0].calls)) if paths else collections.Counter()


def _grpc_session(target, tls):
    """A session whose master is reached over the network (gRPC or same-host),
    as from another process."""
    sess = nd.Session("")
    sess._master.close()
    sess._master = GrpcMasterClient(target, None, tls=tls)
    sess._target = target
    return sess


def _ps_worker_graph(values):
    """A counter on the ps moved by each step, read by the worker."""
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            v = nd.Variable(values, name="v")
            bump = v.assign_add(np.ones_like(values))
        with nd.device("/job:worker/task:0"):
            with nd.control_dependencies([bump]):
                doubled = nd.identity(bump) * 2.0
        init = nd.global_variables_initializer()
    return g, init, doubled


def _train(servers, tls_ps, tls_worker, client_tls, steps=5):
    """Steps of ``_ps_worker_graph`` between a ps and a worker of this process;
    (fetched values, the worker's tap events, the worker's same-host calls)."""
    cluster = local_cluster(worker=1, ps=1)
    worker = servers(cluster, "worker", 0, tls=tls_worker)
    servers(cluster, "ps", 0, tls=tls_ps)
    values = np.arange(64 * 1024, dtype=np.float32)  # 256 KiB: through a segment
    g, init, doubled = _ps_worker_graph(values)
    events = []
    with g.as_default(), _grpc_session(worker.target, client_tls) as sess:
        sess.run(init)
        stop = worker.tap.subscribe(events.append)
        try:
            got = [sess.run(doubled) for _ in range(steps)]
        finally:
            stop()
    return got, events, _path_calls(worker), worker


def test_under_tls_steps_between_tasks_of_one_host_take_the_same_host_path(
        servers, pki):
    steps = 5
    got, events, calls, worker = _train(servers, pki["cluster"], pki["cluster"],
                                        pki["cluster"], steps)
    values = np.arange(64 * 1024, dtype=np.float32)
    for i, v in enumerate(got):  # the oracle: the counter after i + 1 bumps
        np.testing.assert_array_equal(v, (values + i + 1) * 2.0)
    runs = [e for e in events if e.kind == "RunGraph"]
    recvs = [e for e in events if e.kind == "RecvTensor"]
    assert len(runs) == steps and len(recvs) == steps, events
    assert {e.nbytes for e in recvs} == {values.nbytes}
    ps_task = "/job:ps/replica:0/task:0"
    # Every RunGraph and every tensor of those steps went over the Unix socket.
    assert calls[(ps_task, "run")] >= steps
    assert calls[(ps_task, "recv")] >= steps
    # The session's client, holding the key, reaches the master there too.
    address = worker.target.removeprefix("grpc://")
    ch = samehost.client_channel(address, peer_path_secret(None, pki["cluster"]))
    assert ch is not None
    ch.close()


def test_a_task_with_another_key_is_refused_and_uses_grpc(servers, pki, caplog):
    """Same CA, another key: gRPC (TLS) trusts it, the same-host socket does not;
    the step runs over gRPC with the same values, and both sides log it."""
    caplog.set_level(logging.WARNING, logger="nbdist")
    got, events, calls, _ = _train(servers, pki["cluster"], pki["other"],
                                   pki["other"], steps=3)
    values = np.arange(64 * 1024, dtype=np.float32)
    for i, v in enumerate(got):
        np.testing.assert_array_equal(v, (values + i + 1) * 2.0)
    assert [e.kind for e in events].count("RunGraph") == 3
    assert not any(op in ("run", "recv") for _, op in calls), calls
    assert "refused a same-host connection" in caplog.text  # the ps's side
    assert "refused this process's credentials" in caplog.text  # the worker's


def _connect(address) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(30.0)
        sock.connect(samehost.socket_name(address))
    except OSError:
        sock.close()
        raise
    return sock


def test_without_the_cluster_key_the_socket_gives_nothing(servers, graph, pki):
    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0, tls=pki["cluster"])
    address = cluster["worker"][0]
    worker = server._worker
    key = f"{worker.task_name}/device:CPU:0;{worker.incarnation:x};x;t;0:0"
    parked = np.arange(1 << 18, dtype=np.float32)  # 1 MiB
    worker.rendezvous.send(7, key, parked)
    wrong_keys = [cluster_key(peer_path_secret(None, pki["other"])),
                  cluster_key("a guessed token")]
    for wrong in wrong_keys:
        with _connect(address) as sock:
            with pytest.raises(Refused):
                client_handshake(sock, address, wrong)
            with pytest.raises((ConnectionError, OSError)):  # the server hung up
                send_frame(sock, {"op": "recv", "step": 7, "key": key})
                recv_frame(sock, 1 << 30)
    with _connect(address) as sock:  # no credentials: nothing is sent at all
        with pytest.raises(Refused, match="needs the cluster's credentials"):
            client_handshake(sock, address, None)
    with _connect(address) as sock:  # the old plaintext-token hello
        send_frame(sock, {"op": "hello", "token": "anything"})
        header, _, fds = recv_frame(sock, 0)
        assert fds == [] and header["error"]["code"] == errors.UNAUTHENTICATED
    with _connect(address) as sock:  # a request instead of the hello
        send_frame(sock, {"op": "recv", "step": 7, "key": key})
        header, _, fds = recv_frame(sock, 0)
        assert fds == [] and header["error"]["code"] == errors.UNAUTHENTICATED
    assert samehost.client_channel(address, None) is None
    assert worker.rendezvous.holds(7, key)  # nobody took it
    with _connect(address) as sock:  # the cluster's key: served
        answer = client_handshake(
            sock, address, cluster_key(peer_path_secret(None, pki["cluster"])))
        assert answer["task"] == worker.task_name
        send_frame(sock, {"op": "recv", "step": 7, "key": key})
        header, payload, fds = recv_frame(sock, 1 << 30)
        (_, value), = decode_tensors(header["t"], payload, fds, header["seg"], Link())
        np.testing.assert_array_equal(value, parked)


class _Impostor:
    """A process's socket under a task's name (taken before its server bound
    it), answering the handshake without the cluster's key; records whatever
    else a client sends it."""

    def __init__(self, address: str, prove: bool):
        self.requests: list = []
        self.done = threading.Event()
        self._prove = prove
        self._address = address
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(samehost.socket_name(address))
        self._sock.listen(4)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            self._answer(conn)

    def _answer(self, conn):
        with conn:
            conn.settimeout(30.0)
            try:
                recv_frame(conn, 0)  # the hello
                identity = {"task": "/job:worker/replica:0/task:0",
                            "address": self._address, "incarnation": 1}
                if self._prove:  # a challenge, then a proof it cannot make
                    send_frame(conn, {"challenge": "ab" * 32})
                    recv_frame(conn, 0)
                    send_frame(conn, {**identity, "proof": "00" * 32})
                else:  # as a server without a secret would answer
                    send_frame(conn, identity)
                while True:
                    self.requests.append(recv_frame(conn, 1 << 30)[0])
            except (ChannelClosed, OSError, ValueError):
                pass
            finally:
                self.done.set()

    def close(self):
        self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._thread.join(30)


@pytest.mark.parametrize("prove", [True, False])
def test_a_client_with_the_key_sends_nothing_to_an_impostor(pki, caplog, prove):
    caplog.set_level(logging.WARNING, logger="nbdist")
    address = local_cluster(worker=1)["worker"][0]
    impostor = _Impostor(address, prove)
    try:
        secret = peer_path_secret(None, pki["cluster"])
        ch = samehost.SameHostChannel(None, address, secret, collections.Counter())
        with pytest.raises(Refused):
            ch.open()
        assert impostor.done.wait(30)
        assert impostor.requests == []
        assert samehost.client_channel(address, secret) is None
    finally:
        impostor.close()
    assert "without the cluster's proof" in caplog.text or \
        "does not prove the cluster's credentials" in caplog.text


def test_plaintext_and_key_less_clients(servers, graph, pki):
    """A plaintext client still cannot use gRPC; a client holding only the CA
    is served over gRPC (TLS) and never tries the same-host socket."""
    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0, tls=pki["cluster"])
    c = nd.constant(np.arange(3, dtype=np.float32)) * 2.0
    with _grpc_session(server.target, False) as sess, \
            pytest.raises(errors.UnavailableError):
        sess.run(c)
    ca_only = TlsConfig(ca=pki["ca"])
    assert peer_path_secret(None, ca_only) is None
    with _grpc_session(server.target, ca_only) as sess:
        np.testing.assert_array_equal(sess.run(c), [0, 2, 4])
        assert sess._master._same_host() is None


def test_the_secret_is_the_keys_and_the_tokens(pki):
    cluster, other = pki["cluster"], pki["other"]
    secret = peer_path_secret(None, cluster)
    assert secret and secret != peer_path_secret(None, other)
    assert peer_path_secret("t", cluster) not in (secret, peer_path_secret("u", cluster))
    # Other line breaks of the same key's PEM: the same secret.
    rewrapped = cluster.key.replace(b"\n", b"\r\n")
    assert peer_path_secret(None, TlsConfig(cert=cluster.cert, key=rewrapped)) == secret
    assert cluster.key.decode() not in secret
    assert peer_path_secret("tok", None) == "tok"
    assert peer_path_secret(None, None) is None
