"""A single-port server (``NBDIST_SINGLE_PORT=1``, issue 38): a task listens on
its gRPC port alone, and serves the TCP peer path's frames there too
(``framed.port_sharing``: a framed client sends a preamble first, anything
else is relayed to gRPC). Its peers' steps take the framed path through that
port; plain gRPC clients (control calls, an older peer) still reach it; bytes
that are neither leave it serving; a client that sends the preamble to a port
without a framed service falls back to gRPC."""

from __future__ import annotations

import collections
import os
import socket
import threading

import numpy as np
import pytest
from helpers import local_cluster, tcp_calls, wait_for
from test_samehost import _mlp, _train
from test_single_port import tls  # noqa: F401 - the cluster's certificates

import nbdist as nd
from nbdist import errors
from nbdist.runtime import transports
from nbdist.runtime.framed.port_sharing import PREAMBLE, SharedPort
from nbdist.runtime.grpc.client import GrpcWorkerClient
from nbdist.runtime.tcp import TcpChannel
from nbdist.runtime.transports import ChannelBroken

PS, WORKER = "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"


@pytest.fixture
def single_port(monkeypatch):
    """One port per task: the same-host path and the gRPC stream path off, the
    TCP path on for tasks on this host too (it is what goes through the port)."""
    monkeypatch.setenv("NBDIST_SINGLE_PORT", "1")
    monkeypatch.setenv("NBDIST_SAME_HOST", "0")
    monkeypatch.setenv("NBDIST_PEER_STREAM", "0")
    monkeypatch.setenv("NBDIST_PEER_TCP", "always")


def _listening_ports() -> set[int]:
    """The TCP ports this process listens on (``/proc/net/tcp*`` rows in state
    LISTEN whose socket is one of this process's file descriptors)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.readlines()[1:]:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                    ports.add(int(cols[1].rpartition(":")[2], 16))
    return ports


def _port(server) -> int:
    return int(server.target.rpartition(":")[2])


def _until_framed(run, server, peer=PS):
    """Runs ``run()`` until ``server``'s steps reach ``peer`` through the
    framed path (the peer's endpoint is looked up in the background)."""
    wait_for(lambda: (run(), tcp_calls(server).get((peer, "run"), 0))[1], 60,
             f"{server.task_name} to reach {peer} through its port", interval=0.05)


def _grpc_status(server, task=PS) -> list:
    """A plain gRPC call (an older client, a control call) to ``task``'s port."""
    client = GrpcWorkerClient(task, server.cluster_spec.task_address(
        task.split("/")[1].removeprefix("job:"), 0))
    try:
        return client.get_status(timeout_s=10)
    finally:
        client.close()


def test_one_port_per_task_and_steps_take_the_framed_path(servers, single_port,
                                                          monkeypatch):
    before = _listening_ports()
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    # Each task listens on its cluster port alone (gRPC is behind it).
    assert _listening_ports() - before == {_port(ps), _port(worker)}
    g, init, train, (x, y), batches, _ = _mlp(cluster, 0)
    with g.as_default(), nd.Session(worker.target) as s:
        s.run(init)
        _until_framed(lambda: s.run(train, {x: batches[0][0], y: batches[0][1]}),
                      worker)
        runs = tcp_calls(worker)[(PS, "run")]
        for i in range(10):
            s.run(train, {x: batches[i % 4][0], y: batches[i % 4][1]})
        assert tcp_calls(worker)[(PS, "run")] - runs == 10  # every step framed
    # gRPC still answers on the same port: a plain client, and the ps's agent
    # (its registration and heartbeats reach the leader, worker 0, by gRPC).
    assert _grpc_status(worker)
    state = worker.coordination_service.task_states([PS])[0]
    assert state.state == "CONNECTED"
    # gRPC sees each relayed client as itself (its per-client caps): the inner
    # socket is named after the client's TCP address.
    with open("/proc/net/unix") as f:
        relayed = [row.split()[-1] for row in f if "-from-127.0.0.1:" in row]
    assert relayed
    # The framed path trains as unary gRPC does (all peer paths off).
    framed = _train(worker.target, cluster, 20)
    monkeypatch.setenv("NBDIST_SINGLE_PORT", "0")
    monkeypatch.setenv("NBDIST_PEER_TCP", "0")
    plain = local_cluster(ps=1, worker=1)
    servers(plain, "ps", 0)
    unary = _train(servers(plain, "worker", 0).target, plain, 20)
    for a, b in zip(framed, unary):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.parametrize("junk", [
    b"", PREAMBLE[:5], PREAMBLE + b"\xff" * 64, b"GET / HTTP/1.1\r\n\r\n",
    bytes(range(256)) * 4])
def test_bytes_that_are_neither_protocol_leave_the_port_serving(
        servers, single_port, graph, junk):
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", _port(ps)), timeout=10) as c:
            c.sendall(junk)
            c.shutdown(socket.SHUT_WR)
            c.settimeout(10)
            try:
                while c.recv(4096):  # it is answered or dropped, not kept
                    pass
            except ConnectionResetError:
                pass
    with nd.device("/job:ps/task:0"):
        v = nd.constant(np.arange(6, dtype=np.float32)) * 2.0
    with nd.device("/job:worker/task:0"):
        out = v + 1.0
    with nd.Session(worker.target) as s:
        _until_framed(lambda: s.run(out), worker)
        np.testing.assert_array_equal(s.run(out), np.arange(6) * 2.0 + 1.0)
    assert _grpc_status(worker)


def test_a_preamble_to_a_port_without_framed_service_falls_back(servers,
                                                               monkeypatch):
    """An older server (plain gRPC on its port) and a single-port server whose
    TCP path is off both refuse the connection at once: the channel is broken,
    the caller uses gRPC."""
    monkeypatch.setenv("NBDIST_PEER_TCP", "0")
    old = servers(local_cluster(worker=1), "worker", 0)
    monkeypatch.setenv("NBDIST_SINGLE_PORT", "1")
    shared = servers(local_cluster(worker=1), "worker", 0)
    for server in (old, shared):
        endpoint = ("127.0.0.1", _port(server), True)
        ch = TcpChannel(WORKER, server.target, None, collections.Counter(), endpoint)
        with pytest.raises(ChannelBroken):
            ch.open()
        ch.close()
        assert _grpc_status(server, WORKER)


def _steps(worker, cluster, n=5):
    """Runs ``n`` steps of the ps's counter through ``worker``: the values."""
    with nd.Graph().as_default():
        with nd.device("/job:ps/task:0"):
            v = nd.Variable(np.zeros(3, np.float32), name="counter")
            bump = v.assign_add(np.ones(3, np.float32))
        with nd.device("/job:worker/task:0"):
            out = bump * 2.0
        with nd.Session(worker.target) as s:
            s.run(v.initializer)
            _until_framed(lambda: s.run(out), worker)
            s.run(v.initializer)
            return [s.run(out) for _ in range(n)]


def test_a_restarted_task_is_reached_through_its_port_again(servers, single_port):
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    _steps(worker, cluster)
    ps.stop()
    servers(cluster, "ps", 0)  # the same port, a new incarnation
    before = tcp_calls(worker)[(PS, "run")]

    def framed_again():
        try:
            got = _steps(worker, cluster)
        except errors.OpError:  # the old connection broke: the next try
            return False
        return got and tcp_calls(worker)[(PS, "run")] > before

    wait_for(framed_again, 60, "steps through the restarted ps's port")
    got = _steps(worker, cluster)
    for i, value in enumerate(got):  # the oracle: the counter after i + 1 bumps
        np.testing.assert_array_equal(value, np.full(3, 2.0 * (i + 1)))


def test_under_tls_the_frames_go_in_tls_through_the_port(
        servers, single_port, tls):  # noqa: F811 (the fixture imported above)
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0, tls=tls)
    worker = servers(cluster, "worker", 0, tls=tls)
    assert _tcp_endpoint(ps).endswith(f":{_port(ps)}+framed")
    got = _steps(worker, cluster)
    for i, value in enumerate(got):
        np.testing.assert_array_equal(value, np.full(3, 2.0 * (i + 1)))
    assert tcp_calls(worker)[(PS, "run")] >= len(got)
    client = GrpcWorkerClient(PS, cluster["ps"][0], tls=tls)
    try:
        assert client.get_status(timeout_s=10)
    finally:
        client.close()
    # A plaintext framed client is refused there: TLS is required.
    ch = TcpChannel(PS, ps.target, "x", collections.Counter(),
                    ("127.0.0.1", _port(ps), True))
    with pytest.raises(ChannelBroken):
        ch.open()
    ch.close()


def _tcp_endpoint(server) -> str:
    (service,) = [s for p, s in zip(server._paths, server._path_services)
                  if p.name == "tcp"]
    return service.endpoint


def test_a_port_in_use_fails_with_one_clear_error(single_port):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(errors.UnknownError, match=f"cannot listen on "
                           f"127.0.0.1:{port}"):
            nd.Server({"worker": [f"127.0.0.1:{port}"]}, "worker", 0)


def test_the_port_relays_other_bytes_intact_and_hands_framed_ones_over():
    """``SharedPort`` alone, with an echo server inside: 8 MiB sent through
    the port come back byte for byte (the half-close passed on); a connection
    that starts with the preamble reaches the framed listener, preamble read."""
    inner = socket.create_server(("127.0.0.1", 0))
    inner_port = inner.getsockname()[1]

    def echo():
        conn, _ = inner.accept()
        with conn:
            while data := conn.recv(1 << 16):
                conn.sendall(data)

    port = SharedPort(socket.create_server(("127.0.0.1", 0)),
                      lambda _: socket.create_connection(("127.0.0.1", inner_port)))
    framed = port.framed_listener()
    port.start()
    try:
        echoer = threading.Thread(target=echo, daemon=True)
        echoer.start()
        payload = np.random.default_rng(0).bytes(8 << 20)
        with socket.create_connection(("127.0.0.1", port.port), timeout=30) as c:
            sender = threading.Thread(target=lambda: (c.sendall(payload),
                                                      c.shutdown(socket.SHUT_WR)))
            sender.start()
            got = bytearray()
            while data := c.recv(1 << 20):
                got += data
            sender.join(30)
        assert bytes(got) == payload
        echoer.join(30)
        with socket.create_connection(("127.0.0.1", port.port), timeout=30) as c:
            c.sendall(PREAMBLE + b"hello")
            conn, _ = framed.accept()
            with conn:
                conn.settimeout(30)
                assert conn.recv(5, socket.MSG_WAITALL) == b"hello"
    finally:
        port.stop()
        inner.close()
    with pytest.raises(OSError):
        framed.accept()  # stopped: a FramedService's accept loop ends


def test_a_session_reaches_its_master_through_the_port(servers, single_port, graph):
    """A session's client (as on another host) finds its master's endpoint by
    address: its steps and large feeds go framed through the master's one port,
    the session's gRPC calls relayed beside them."""
    from nbdist.runtime.grpc.client import GrpcMasterClient

    values = np.arange(1 << 20, dtype=np.float32)
    feed = nd.placeholder(nd.float32, [None])
    doubled = feed * 2.0
    server = servers(local_cluster(worker=1), "worker", 0)
    key = transports.endpoint_key("tcp", "@" + server.target.removeprefix("grpc://"))
    wait_for(lambda: server._coordination_client.try_get(key), 30, "its endpoint")
    sess = nd.Session("")
    sess._master.close()
    sess._master = GrpcMasterClient(server.target)
    with sess:
        ch = sess._master._same_host()
        assert ch is not None and ch.endpoint == ("localhost", _port(server))
        np.testing.assert_array_equal(sess.run(doubled, {feed: values}), values * 2)
        assert ch._calls[(None, "push")] + ch._calls[(None, "step")] >= 1
