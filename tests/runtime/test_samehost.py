"""The same-host path (issue 11): tasks of one host move a step's tensors over
a Unix socket and memfd segments, with the same results, token and cleanup as
gRPC, and in the number of exchanges the design says."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import weakref

import numpy as np
import pytest
from helpers import local_cluster, nbdist_memfds

import nbdist as nd
from nbdist.runtime import samehost
from nbdist.runtime.framed.handshake import client_handshake, cluster_key
from nbdist.runtime.framed.wire import (
    POOL_SEGMENTS,
    Link,
    Outgoing,
    decode_tensors,
    recv_frame,
    send_frame,
)

BATCH = 32


def _same_host(server):
    """The server's same-host channels to its peers, or None."""
    for path, peers in zip(server._paths, server._router.path_peers):
        if path.name == "samehost":
            return peers
    return None


def _calls(server) -> dict:
    """The server's same-host exchanges so far, by (peer, call)."""
    peers = _same_host(server)
    return dict(peers.calls) if peers is not None else {}


def _mlp(cluster, steps: int, seed: int = 0):
    """Trains a small MLP between a ps and worker 0 of ``cluster``; its
    variables afterwards (fetched through worker 0)."""
    rng = np.random.default_rng(seed)
    batches = [(rng.standard_normal((BATCH, 20)).astype(np.float32),
                rng.integers(0, 5, BATCH).astype(np.int32)) for _ in range(4)]
    g = nd.Graph()
    with g.as_default(), nd.device(nd.train.replica_device_setter(
            cluster=cluster, worker_device="/job:worker/task:0")):
        x = nd.placeholder(nd.float32, [None, 20])
        y = nd.placeholder(nd.int32, [None])
        w1 = nd.Variable(rng.standard_normal((20, 16)).astype(np.float32) * 0.3)
        b1 = nd.Variable(np.zeros(16, np.float32))
        w2 = nd.Variable(rng.standard_normal((16, 5)).astype(np.float32) * 0.3)
        b2 = nd.Variable(np.zeros(5, np.float32))
        h = nd.nn.relu(nd.matmul(x, w1) + b1)
        loss = nd.reduce_mean(nd.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=nd.matmul(h, w2) + b2))
        train = nd.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = nd.global_variables_initializer()
    return g, init, train, (x, y), batches, [w1, b1, w2, b2]


def _train(target, cluster, steps):
    g, init, train, (x, y), batches, variables = _mlp(cluster, steps)
    with g.as_default(), nd.Session(target) as s:
        s.run(init)
        for i in range(steps):
            xs, ys = batches[i % len(batches)]
            s.run(train, {x: xs, y: ys})
        return s.run(variables)


def test_training_is_identical_with_the_path_on_and_off(servers, monkeypatch):
    results = {}
    for setting in ("1", "0"):
        monkeypatch.setenv("NBDIST_SAME_HOST", setting)
        cluster = local_cluster(ps=1, worker=1)
        servers(cluster, "ps", 0)
        worker = servers(cluster, "worker", 0)
        results[setting] = _train(worker.target, cluster, 30)
        assert (sum(_calls(worker).values()) > 0) == (setting == "1")
    for on, off in zip(results["1"], results["0"]):
        np.testing.assert_allclose(on, off, rtol=0, atol=1e-6)


def test_a_step_is_one_exchange_each_way_per_task_pair(servers):
    """RunGraph to the ps carries the worker's feeds and brings back its
    fetches; the worker's _Recvs of the 4 variables are one exchange, and the
    ps's _Recvs of the 4 gradients one more (a producer lagging behind the
    linger may split one: at most one step in four here)."""
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    g, init, train, (x, y), batches, _ = _mlp(cluster, 0)
    steps = 40
    with g.as_default(), nd.Session(worker.target) as s:
        s.run(init)
        s.run(train, {x: batches[0][0], y: batches[0][1]})  # plans and connects
        w_before, ps_before = _calls(worker), _calls(ps)
        for i in range(steps):
            s.run(train, {x: batches[i % 4][0], y: batches[i % 4][1]})
    ps_task, w_task = "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"

    def delta(server, before, key):
        return _same_host(server).calls[key] - before.get(key, 0)

    assert delta(worker, w_before, (ps_task, "run")) == steps
    assert delta(worker, w_before, (ps_task, "recv")) == steps
    assert steps <= delta(ps, ps_before, (w_task, "recv")) <= steps * 1.25
    assert set(_calls(worker)) | set(_calls(ps)) <= {
        (ps_task, "run"), (ps_task, "recv"), (w_task, "recv")}


def _frame_senders(monkeypatch) -> list:
    """The threads that send the same-host service's frames, as they do."""
    from nbdist.runtime.framed import service

    senders, send = [], service.send_frame

    def recorded(*args, **kw):
        senders.append(threading.get_ident())
        return send(*args, **kw)

    monkeypatch.setattr(service, "send_frame", recorded)
    return senders


def _await_group(worker, step: int, key: str) -> None:
    for _ in range(3000):  # bounded: a pull's group is registered on ``key``
        item = worker.rendezvous._items.get((step, key))
        if item is not None and item.groups:
            return
        time.sleep(0.005)
    pytest.fail("the pull never waited for its tensors")


def _send_from_thread(worker, step: int, named: dict) -> int:
    """Sends ``named`` tensors in ``step`` from a thread of its own (as a
    step's executor does); that thread's id."""
    ident = []

    def send():
        ident.append(threading.get_ident())
        for k, v in named.items():
            worker.rendezvous.send(step, k, v)

    sender = threading.Thread(target=send)
    sender.start()
    sender.join(30)
    assert not sender.is_alive(), "the step's thread waited on the peer"
    return ident[0]


def _read_answer(sock, link, expected: dict) -> None:
    header, payload, fds = recv_frame(sock, 1 << 30)
    got = dict(decode_tensors(header["t"], payload, fds, header.get("seg"), link))
    assert set(got) == set(expected)
    for k, v in expected.items():
        np.testing.assert_array_equal(got[k], v)


def test_a_pull_answered_by_the_sending_thread_arrives_whole_and_the_connection_serves_on(
        servers, monkeypatch):
    """A pull that arrives before its tensors is answered by the thread that
    sends the last of them (``Worker.answer_pull``), through the
    connection's segment; the connection's own thread then serves the next."""
    monkeypatch.setattr("nbdist.runtime.worker.SIBLING_LINGER_S", 30.0)
    senders = _frame_senders(monkeypatch)
    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0, token="s3cret")
    address, worker = cluster["worker"][0], server._worker
    names = [f"{worker.task_name}/device:CPU:0;{worker.incarnation:x};x;t{i};0:0"
             for i in range(4)]
    values = [np.arange(1 << 20, dtype=np.float32), np.ones(3, np.int64),
              np.float32(2.5)]
    step = 11
    with _raw_connect(address) as sock:
        client_handshake(sock, address, cluster_key("s3cret"))
        send_frame(sock, {"op": "recv", "step": step, "key": names[0],
                          "siblings": names[:3], "wait_ms": 30000})
        _await_group(worker, step, names[2])
        sender = _send_from_thread(worker, step, dict(zip(names, values)))
        assert senders == [sender]
        link = Link()
        _read_answer(sock, link, dict(zip(names, values)))
        worker.rendezvous.send(step, names[3], np.arange(4))
        send_frame(sock, {"op": "recv", "step": step, "key": names[3]})
        _read_answer(sock, link, {names[3]: np.arange(4)})
        assert len(senders) == 2 and senders[1] != sender
        link.close()


def test_pulls_whose_answer_could_block_its_sender_are_answered_whole(
        servers, monkeypatch):
    """An answer to a peer that has not read its last reply, or with much
    inline, is sent by the connection's thread (a step's thread must not wait
    on a peer): each arrives whole, in order."""
    monkeypatch.setattr("nbdist.runtime.worker.SIBLING_LINGER_S", 30.0)
    senders = _frame_senders(monkeypatch)
    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0, token="s3cret")
    address, worker = cluster["worker"][0], server._worker

    def name(i):
        return f"{worker.task_name}/device:CPU:0;{worker.incarnation:x};x;u{i};0:0"

    step = 12
    first = {name(0): np.arange(30_000, dtype=np.float32)}  # 120 kB inline
    worker.rendezvous.send(step, name(0), first[name(0)])
    small = {name(i): np.full(3, i, np.float32) for i in (1, 2, 3)}
    large = {name(i): np.full(20_000, i, np.float32) for i in (4, 5, 6)}  # 240 kB
    with _raw_connect(address) as sock:
        client_handshake(sock, address, cluster_key("s3cret"))
        link = Link()
        send_frame(sock, {"op": "recv", "step": step, "key": name(0)})  # unread
        send_frame(sock, {"op": "recv", "step": step, "key": name(1),
                          "siblings": list(small), "wait_ms": 30000})
        _await_group(worker, step, name(3))
        assert _send_from_thread(worker, step, small) not in senders
        _read_answer(sock, link, first)
        _read_answer(sock, link, small)
        send_frame(sock, {"op": "recv", "step": step, "key": name(4),
                          "siblings": list(large), "wait_ms": 30000})
        _await_group(worker, step, name(6))
        assert _send_from_thread(worker, step, large) not in senders
        _read_answer(sock, link, large)
        assert len(senders) == 3
        link.close()


def _byte_pattern(n):
    """n int32s that are the same wherever they are computed."""
    return nd.range(0, n, dtype=nd.int32) * 40503 + 17  # wraps around


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["1", "0"])
def test_a_1_gib_tensor_arrives_byte_for_byte(servers, monkeypatch, setting):
    monkeypatch.setenv("NBDIST_SAME_HOST", setting)
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    n = 1 << 28  # int32: 1 GiB
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            sent = _byte_pattern(n)
        with nd.device("/job:worker/task:0"):
            same = nd.reduce_all(nd.equal(sent, _byte_pattern(n)))
            total = nd.reduce_sum(nd.cast(sent, nd.int64))
    with g.as_default(), nd.Session(worker.target) as s:
        expected = np.arange(n, dtype=np.int32) * np.int32(40503) + np.int32(17)
        assert s.run([same, total]) == [True, int(expected.sum(dtype=np.int64))]
    assert (sum(_calls(worker).values()) > 0) == (setting == "1")


def test_segments_are_freed_after_the_step_and_when_a_task_dies(spawn, servers):
    """Segments are memfds: no name in /dev/shm, gone with their last holder."""
    shm_before = set(os.listdir("/dev/shm"))
    cluster = local_cluster(ps=1, worker=1)
    ps = spawn("ps", 0, cluster)
    worker = servers(cluster, "worker", 0)
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            v = nd.Variable(nd.zeros([1 << 22]), name="big")  # 16 MiB: a segment
            bump = nd.assign_add(v, nd.ones([1 << 22]))
        with nd.device("/job:worker/task:0"):
            total = nd.reduce_sum(v.read_value() * 1.0)
    with g.as_default(), nd.Session(worker.target) as s:
        s.run(v.initializer)
        for i in range(3):
            s.run(bump)
            assert s.run(total) == (i + 1) * (1 << 22)
        assert _calls(worker)[("/job:ps/replica:0/task:0", "recv")] >= 3
        # Staging segments are per connection, reused by every step: at most
        # a pool per connection a step uses (its RunGraph and its pull),
        # however many steps ran.
        for _ in range(10):
            s.run(total)
        assert 1 <= nbdist_memfds(os.getpid()) <= 2 * POOL_SEGMENTS
        ps.kill()
        with pytest.raises(nd.errors.OpError):
            s.run(total, options=nd.RunOptions(timeout_in_ms=20000))
    deadline = time.monotonic() + 30  # a pull in flight when the ps died ends
    while nbdist_memfds(os.getpid()):
        assert time.monotonic() < deadline, "a dead peer's segment stayed mapped"
        time.sleep(0.05)
    assert set(os.listdir("/dev/shm")) == shm_before


def _raw_connect(address):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    try:
        sock.connect(samehost.socket_name(address))
    except OSError:
        sock.close()
        raise
    return sock


@pytest.mark.parametrize("token", [None, "wrong"])
def test_a_client_without_the_token_gets_no_tensor(servers, graph, token):
    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0, token="s3cret")
    address = cluster["worker"][0]
    worker = server._worker
    key = f"{worker.task_name}/device:CPU:0;{worker.incarnation:x};x;t;0:0"
    worker.rendezvous.send(7, key, np.arange(1 << 20, dtype=np.float32))  # 4 MiB
    with _raw_connect(address) as sock:
        hello = {"op": "hello"} if token is None else {"op": "hello", "token": token}
        send_frame(sock, hello)
        header, _, fds = recv_frame(sock, 0)
        assert fds == []
        assert header["error"]["code"] == nd.errors.UNAUTHENTICATED
        assert "token" in header["error"]["message"]
        with pytest.raises((ConnectionError, OSError)):  # the server hung up
            send_frame(sock, {"op": "recv", "step": 7, "key": key})
            recv_frame(sock, 1 << 30)
    with _raw_connect(address) as sock:  # a request instead of the hello
        send_frame(sock, {"op": "recv", "step": 7, "key": key})
        header, _, fds = recv_frame(sock, 0)
        assert fds == [] and "error" in header
    assert worker.rendezvous.holds(7, key)  # nobody took it
    with _raw_connect(address) as sock:  # proving the token, it is served
        answer = client_handshake(sock, address, cluster_key("s3cret"))
        assert answer["task"] == worker.task_name
        send_frame(sock, {"op": "recv", "step": 7, "key": key})
        header, payload, fds = recv_frame(sock, 1 << 30)
        assert len(fds) == 1  # the staging segment, sent with its first use
        (_, value), = decode_tensors(header["t"], payload, fds, header["seg"],
                                        Link())
        np.testing.assert_array_equal(value, np.arange(1 << 20, dtype=np.float32))


def test_malformed_frames_are_refused_and_the_server_keeps_serving(servers, graph):
    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0)
    address = cluster["worker"][0]
    with _raw_connect(address) as sock:  # a frame bigger than the limit
        sock.sendall((1 << 31).to_bytes(4, "little") + (0).to_bytes(8, "little"))
        with pytest.raises((ConnectionError, OSError)):
            recv_frame(sock, 0)
    with _raw_connect(address) as sock:
        send_frame(sock, {"op": "hello"})
        recv_frame(sock, 0)
        out = Outgoing()
        out.add("x", np.zeros(4, np.float32))
        out.entries[0]["s"] = [1 << 40]  # a shape its bytes do not hold
        send_frame(sock, {"op": "run", "session": "s", "graph": "g", "step": 1,
                          "fetch": [], "t": out.entries}, out)
        header, _, _ = recv_frame(sock, 0)
        assert header["error"]["code"] == nd.errors.INVALID_ARGUMENT
        # A tensor far over max_tensor_bytes (1 GiB): refused before anything
        # is allocated for it.
        send_frame(sock, {"op": "run", "session": "s", "graph": "g", "step": 2,
                          "fetch": [], "t": [{"k": "x", "d": "<f4", "s": [1 << 38],
                                              "n": 1 << 40, "g": 0}],
                          "seg": {"id": 1, "size": 1 << 40}})
        header, _, _ = recv_frame(sock, 0)
        assert header["error"]["code"] == nd.errors.RESOURCE_EXHAUSTED
        assert "max_tensor_bytes" in header["error"]["message"]
        send_frame(sock, {"op": "nonsense"})
        assert "Unknown same-host call" in recv_frame(sock, 0)[0]["error"]["message"]
    with graph.as_default(), nd.Session(server.target) as s:
        assert s.run(nd.constant(2.0) * 3.0) == 6.0


def test_the_path_is_off_when_asked(servers, monkeypatch):
    monkeypatch.setenv("NBDIST_SAME_HOST", "0")
    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0)
    with pytest.raises(OSError):
        _raw_connect(cluster["worker"][0]).close()
    assert _same_host(server) is None


_BLOCKED_CLIENT = r"""
import sys
import nbdist as nd
with nd.device("/job:worker/task:0"):
    q = nd.FIFOQueue(4, [nd.float32], shapes=[[]], shared_name="never_filled")
    x = q.dequeue()
with nd.Session(sys.argv[1]) as s:
    print("RUNNING", flush=True)
    s.run(x)  # blocks: nothing is ever enqueued
"""


def _running_steps(server) -> int:
    return sum(len(ms.running) for ms in list(server.master._sessions.values()))


def test_a_step_whose_client_dies_is_cancelled(servers, tmp_path):
    """A client process blocked in a step over the same-host channel is
    SIGKILLed: its step is cancelled on the server (as a gRPC call's end
    cancels it), nothing keeps waiting."""
    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0)
    script = tmp_path / "client.py"
    script.write_text(_BLOCKED_CLIENT)
    proc = subprocess.Popen([sys.executable, str(script), server.target],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "RUNNING"
        deadline = time.monotonic() + 60
        while _running_steps(server) == 0:  # bounded: the step shows up
            assert time.monotonic() < deadline, "the client's step never started"
            time.sleep(0.05)
        assert server._path_services
    finally:
        proc.kill()
        proc.wait(30)
        proc.stdout.close()
    deadline = time.monotonic() + 60
    while _running_steps(server) > 0:  # bounded: cancelled once the client is gone
        assert time.monotonic() < deadline, "the dead client's step kept running"
        time.sleep(0.05)


def test_over_grpc_too_a_step_pulls_once_per_task_pair(servers, monkeypatch):
    """With the same-host path off, a _Recv's RecvTensorUnary brings the step's
    other tensors from that task along (sibling_key): one pull of the 4
    variables per step, not 4 (TF makes one call per tensor)."""
    from nbdist.runtime.grpc.client import GrpcWorkerClient

    monkeypatch.setenv("NBDIST_SAME_HOST", "0")
    monkeypatch.setenv("NBDIST_PEER_STREAM", "0")  # unary gRPC's pulls
    pulls: list[str] = []
    real = GrpcWorkerClient.recv_tensor

    def counting(self, step, key, *args, **kwargs):
        pulls.append(self.task_name)
        return real(self, step, key, *args, **kwargs)

    monkeypatch.setattr(GrpcWorkerClient, "recv_tensor", counting)
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    g, init, train, (x, y), batches, _ = _mlp(cluster, 0)
    steps = 20
    with g.as_default(), nd.Session(worker.target) as s:
        s.run(init)
        s.run(train, {x: batches[0][0], y: batches[0][1]})
        pulls.clear()
        for i in range(steps):
            s.run(train, {x: batches[i % 4][0], y: batches[i % 4][1]})
    from_ps = pulls.count("/job:ps/replica:0/task:0")
    from_worker = pulls.count("/job:worker/replica:0/task:0")
    assert from_ps == steps  # the 4 variables: one pull a step
    assert steps <= from_worker <= steps * 1.25  # the 4 gradients, likewise


def test_a_taken_socket_name_leaves_the_server_on_grpc(servers, graph, caplog):
    """Another process's socket under the server's name (it cannot be this
    server's): the server starts anyway, says so, and serves over gRPC; a
    client that reaches that socket sees the wrong address and uses gRPC too."""
    import threading

    cluster = local_cluster(worker=1)
    squatter = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def answer_hellos():  # as a server elsewhere would: its own task and address
        while True:
            try:
                conn, _ = squatter.accept()
            except OSError:
                return
            with conn:
                recv_frame(conn, 0)
                send_frame(conn, {"task": "/job:worker/replica:0/task:0",
                                  "address": "localhost:1", "incarnation": 1})

    try:
        squatter.bind(samehost.socket_name(cluster["worker"][0]))
        squatter.listen(1)
        threading.Thread(target=answer_hellos, daemon=True).start()
        server = servers(cluster, "worker", 0)
        assert "no same-host path" in caplog.text
        with graph.as_default(), nd.Session(server.target) as s:
            assert s.run(nd.constant(2.0) * 3.0) == 6.0
        assert samehost.client_channel(cluster["worker"][0], None) is None
    finally:
        squatter.close()


def test_ps_updates_a_variable_a_worker_pulled_in_place(servers):
    """Once a pulled variable is sent, the ps's service holds none of it while it
    waits for the next request: the update writes into the array (one pass over
    memory, no new 1 MiB array per step) and the values stay right."""
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    n = 1 << 18  # 1 MiB: sent through the staging segment
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            v = nd.Variable(np.zeros(n, np.float32), name="v")
            small = nd.Variable(np.zeros(3, np.float32), name="small")  # inline
        with nd.device("/job:worker/task:0"):
            # The values themselves travel (a gradient of 1 computed from them).
            grads = [v.read_value() * 0.0 + 1.0, small.read_value() * 0.0 + 1.0]
        step = nd.train.GradientDescentOptimizer(0.5).apply_gradients(
            zip(grads, [v, small]))
    with g.as_default(), nd.Session(worker.target) as s:
        s.run(nd.global_variables_initializer())
        s.run(step)
        resources = {name: res for _d, _c, name, res in ps._worker.variables()}
        # Weak references: the test itself must not hold the arrays (an id
        # could be reused by a replacing array).
        before = {name: weakref.ref(resources[name].value) for name in ("v", "small")}
        for _ in range(3):
            s.run(step)
        assert all(resources[name].value is ref() for name, ref in before.items())
        assert _calls(worker)[("/job:ps/replica:0/task:0", "recv")] >= 4
        np.testing.assert_array_equal(s.run(v), np.full(n, -2.0, np.float32))
        np.testing.assert_array_equal(s.run(small), np.full(3, -2.0, np.float32))
