"""The shared token (every RPC of every service, streams included) and TLS."""

from __future__ import annotations

import datetime
import ipaddress

import grpc
import numpy as np
import pytest
from helpers import ServerProcess, call_raw, cluster_string, local_cluster, rpc_methods

import nbdist as nd
from nbdist import errors
from nbdist.runtime.grpc.auth import TlsConfig
from nbdist.runtime.grpc.client import GrpcMasterClient, GrpcWorkerClient

TOKEN = "s3cret-token"

# Every RPC of every service, from the proto descriptors.
METHODS = [(svc, name, kind) for svc, name, kind, _ in rpc_methods()]


def _code(channel, service, method, kind, metadata, timeout=5.0):
    try:
        call_raw(channel, service, method, kind, b"", timeout=timeout,
                 metadata=metadata)
    except grpc.RpcError as e:
        return e.code()
    return grpc.StatusCode.OK


def _rpc_session(target, config=None, tls=None):
    sess = nd.Session("", config=config)
    sess._master.close()
    sess._master = GrpcMasterClient(target, config, tls=tls)
    sess._target = target
    return sess


def test_every_rpc_needs_the_token():
    with nd.Server.create_local_server(token=TOKEN) as server:
        channel = grpc.insecure_channel(server.target[len("grpc://") :])
        for service, method, kind in METHODS:
            path = f"{service}/{method}"
            for md in (
                (),
                (("authorization", "Bearer wrong"),),
                (("authorization", TOKEN),),
                (("x-token", TOKEN),),
            ):
                assert (_code(channel, service, method, kind, md) ==
                        grpc.StatusCode.UNAUTHENTICATED), (path, md)
            # With the token the call gets past auth (methods that wait may time out).
            good = _code(channel, service, method, kind,
                         (("authorization", f"Bearer {TOKEN}"),), timeout=1.0)
            assert good != grpc.StatusCode.UNAUTHENTICATED, path
        channel.close()


def test_token_from_config_or_env(monkeypatch, graph):
    c = nd.constant(5.0)
    with nd.Server.create_local_server(
        config=nd.ConfigProto(auth_token=TOKEN)
    ) as server:
        with (
            _rpc_session(server.target) as sess,
            pytest.raises(errors.UnauthenticatedError),
        ):
            sess.run(c)
        with (
            _rpc_session(server.target, nd.ConfigProto(auth_token="nope")) as sess,
            pytest.raises(errors.UnauthenticatedError),
        ):
            sess.run(c)
        with _rpc_session(server.target, nd.ConfigProto(auth_token=TOKEN)) as sess:
            assert sess.run(c) == 5.0
        monkeypatch.setenv("NBDIST_TOKEN", TOKEN)
        with _rpc_session(server.target) as sess:
            assert sess.run(c) == 5.0
        # The token is not forwarded to the server's session config.
        assert not server._master.default_config.auth_token


def test_server_token_from_env(monkeypatch):
    monkeypatch.setenv("NBDIST_TOKEN", TOKEN)
    with nd.Server.create_local_server() as server:
        address = server.target[len("grpc://") :]
        w = GrpcWorkerClient("/job:localhost/replica:0/task:0", address)
        assert w.get_status()  # the client reads NBDIST_TOKEN too
        w.close()
        monkeypatch.delenv("NBDIST_TOKEN")
        w = GrpcWorkerClient("/job:localhost/replica:0/task:0", address)
        with pytest.raises(errors.UnauthenticatedError, match=address):
            w.get_status()
        w.close()


def test_cluster_with_token(servers, graph):
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0, token=TOKEN)
    worker = servers(cluster, "worker", 0, token=TOKEN)
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(np.arange(3, dtype=np.float32), name="v")
    with nd.device("/job:worker/task:0"):
        y = nd.stop_gradient(v)
    with nd.Session(worker.target) as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(y), [0, 1, 2])


def test_task_with_other_token_is_named(servers, graph):
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0, token="other")
    worker = servers(cluster, "worker", 0, token=TOKEN)
    with (
        nd.Session(worker.target) as sess,
        pytest.raises(errors.UnavailableError) as info,
    ):
        sess.run(nd.constant(1.0))
    assert "/job:ps/replica:0/task:0" in str(info.value)
    assert "rejected" in str(info.value)


# -- TLS -----------------------------------------------------------------------------
def _pem_pair(subject, issuer_key=None, issuer_name=None, ca=False):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if ca:
        builder = builder.add_extension(
            x509.BasicConstraints(ca=True, path_length=0), critical=True
        )
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
    cert = builder.sign(issuer_key or key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem, key, name


@pytest.fixture(scope="module")
def pki():
    pytest.importorskip("cryptography")
    ca_cert, _, ca_key, ca_name = _pem_pair("nbdist test CA", ca=True)
    server_cert, server_key, _, _ = _pem_pair("localhost", ca_key, ca_name)
    client_cert, client_key, _, _ = _pem_pair("client", ca_key, ca_name)
    other_ca, _, _, _ = _pem_pair("some other CA", ca=True)
    return {
        "ca": ca_cert,
        "cert": server_cert,
        "key": server_key,
        "client_cert": client_cert,
        "client_key": client_key,
        "other_ca": other_ca,
    }


def test_tls_round_trip(pki, graph):
    v = nd.Variable(np.arange(4, dtype=np.float32), name="v")
    tls = TlsConfig(cert=pki["cert"], key=pki["key"])
    with nd.Server.create_local_server(tls=tls) as server:
        with _rpc_session(server.target, tls=TlsConfig(ca=pki["ca"])) as sess:
            sess.run(v.initializer)
            np.testing.assert_array_equal(sess.run(v), [0, 1, 2, 3])
        # Plaintext clients, and clients that do not trust the CA, get nowhere.
        for client_tls in (False, TlsConfig(ca=pki["other_ca"])):
            with (
                _rpc_session(server.target, tls=client_tls) as sess,
                pytest.raises(errors.UnavailableError),
            ):
                sess.run(v)


def test_mutual_tls(pki, graph, tmp_path):
    paths = {}
    for k, data in pki.items():
        paths[k] = tmp_path / f"{k}.pem"
        paths[k].write_bytes(data)
    c = nd.constant(7)
    server_tls = TlsConfig(
        cert=str(paths["cert"]),
        key=str(paths["key"]),
        ca=str(paths["ca"]),
        client_auth=True,
    )
    with nd.Server.create_local_server(tls=server_tls) as server:
        with (
            _rpc_session(server.target, tls=TlsConfig(ca=pki["ca"])) as sess,
            pytest.raises(errors.UnavailableError),
        ):
            sess.run(c)
        client = TlsConfig(cert=pki["client_cert"], key=pki["client_key"], ca=pki["ca"])
        with _rpc_session(server.target, tls=client) as sess:
            assert sess.run(c) == 7


def test_tls_and_token_across_processes(pki, tmp_path, monkeypatch, spawn, graph):
    """Two nbdist-server processes configured by NBDIST_TLS_* and NBDIST_TOKEN;
    a session over TLS from this process."""
    for k in ("cert", "key", "ca"):
        (tmp_path / f"{k}.pem").write_bytes(pki[k])
    env = {
        "NBDIST_TLS_CERT": str(tmp_path / "cert.pem"),
        "NBDIST_TLS_KEY": str(tmp_path / "key.pem"),
        "NBDIST_TLS_CA": str(tmp_path / "ca.pem"),  # to verify each other
        "NBDIST_TOKEN": TOKEN,
    }
    cluster = local_cluster(ps=1, worker=1)
    spawn("ps", 0, cluster, env=env)
    spawn("worker", 0, cluster, env=env)
    monkeypatch.setenv("NBDIST_TLS_CA", str(tmp_path / "ca.pem"))
    monkeypatch.setenv("NBDIST_TOKEN", TOKEN)
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(np.ones(5, np.float32), name="v")
    with nd.device("/job:worker/task:0"):
        y = nd.stop_gradient(v)
    with nd.Session("grpc://" + cluster["worker"][0]) as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(y), np.ones(5))
    monkeypatch.delenv("NBDIST_TOKEN")
    with (
        nd.Session("grpc://" + cluster["worker"][0]) as sess,
        pytest.raises(errors.UnauthenticatedError),
    ):
        sess.run(y)


def test_server_process_with_bad_tls_files_exits_1(tmp_path):
    env = {
        "NBDIST_TLS_CERT": str(tmp_path / "missing.pem"),
        "NBDIST_TLS_KEY": str(tmp_path / "missing.key"),
    }
    cluster = local_cluster(ps=1)
    p = ServerProcess(
        [
            f"--cluster_spec={cluster_string(cluster)}",
            "--job_name=ps",
            "--task_index=0",
        ],
        env=env,
        wait=False,
    )
    try:
        assert p.proc.wait(60) == 1
    finally:
        p.kill()
    assert any("missing" in line for line in p.stderr), p.stderr
