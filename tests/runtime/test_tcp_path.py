"""The TCP peer path (issue 21): tasks on other hosts run steps and move tensors
in the same-host path's frames over TCP instead of gRPC, with the same results,
errors, deadlines, token and limits.

The servers here are in this process, on one host: ``NBDIST_SAME_HOST=0`` and
``NBDIST_PEER_TCP=always`` make them use the TCP path with each other (by
default it is for tasks on other hosts only: ``tests/cluster/test_multihost.py``
runs it between network namespaces).
"""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest
from helpers import local_cluster, tcp_calls, wait_for
from test_collective_fast import _in_threads
from test_samehost import _mlp, _train

import nbdist as nd
from nbdist import errors
from nbdist.ops import collective_ops
from nbdist.runtime import transports
from nbdist.runtime.framed.handshake import client_handshake, cluster_key
from nbdist.runtime.framed.wire import (
    Link,
    Outgoing,
    decode_tensors,
    recv_frame,
    send_frame,
)

PS, WORKER = "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"


def _until_over_tcp(run, server, peer=PS):
    """Runs ``run()`` until ``server``'s steps reach ``peer`` over TCP: a task
    looks a peer's endpoint up when it first needs it, and the peer announces
    it once registered with the coordination service (until then: gRPC)."""
    wait_for(lambda: (run(), tcp_calls(server).get((peer, "run"), 0))[1], 60, f"{server.task_name} to reach {peer} over TCP", interval=0.05)


def _endpoint(server) -> tuple[str, int]:
    (endpoint,) = [s.endpoint for s in server._path_services if s.endpoint]
    host, _, port = endpoint.rpartition(":")
    return host, int(port)


def test_training_over_tcp_equals_training_over_grpc(servers, monkeypatch):
    monkeypatch.setenv("NBDIST_SAME_HOST", "0")
    results = {}
    for setting in ("always", "0"):
        monkeypatch.setenv("NBDIST_PEER_TCP", setting)
        cluster = local_cluster(ps=1, worker=1)
        servers(cluster, "ps", 0)
        worker = servers(cluster, "worker", 0)
        if setting == "always":
            with nd.Graph().as_default(), nd.device("/job:ps/task:0"):
                one = nd.constant(1.0) + 1.0
                with nd.Session(worker.target) as s:
                    _until_over_tcp(lambda: s.run(one), worker)
        results[setting] = _train(worker.target, cluster, 30)
        assert (sum(tcp_calls(worker).values()) > 0) == (setting == "always")
    for on, off in zip(results["always"], results["0"]):
        np.testing.assert_allclose(on, off, rtol=0, atol=1e-6)


def test_a_step_is_one_exchange_each_way_over_tcp(servers, tcp):
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    g, init, train, (x, y), batches, _ = _mlp(cluster, 0)
    steps = 40
    with g.as_default(), nd.Session(worker.target) as s:
        s.run(init)
        _until_over_tcp(lambda: s.run(train, {x: batches[0][0], y: batches[0][1]}),
                        worker)
        w_before, ps_before = tcp_calls(worker), tcp_calls(ps)
        for i in range(steps):
            s.run(train, {x: batches[i % 4][0], y: batches[i % 4][1]})
    w_after, ps_after = tcp_calls(worker), tcp_calls(ps)
    assert w_after[(PS, "run")] - w_before.get((PS, "run"), 0) == steps
    assert w_after[(PS, "recv")] - w_before.get((PS, "recv"), 0) == steps
    got = ps_after[(WORKER, "recv")] - ps_before.get((WORKER, "recv"), 0)
    assert steps <= got <= steps * 1.25


def test_a_large_tensor_crosses_byte_for_byte_in_the_frame(servers, tcp, graph):
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    n = 4 << 20  # 16 MiB of int32
    with nd.device("/job:ps/task:0"):
        big = nd.range(0, n, dtype=nd.int32) * 40503 + 17
        small = nd.constant(1.0)
    with nd.device("/job:worker/task:0"):
        total = nd.identity(big)
        ok = small + 1.0
    with nd.Session(worker.target) as s:
        _until_over_tcp(lambda: s.run(ok), worker)
        got = s.run(total)
    expected = np.arange(n, dtype=np.int32) * np.int32(40503) + np.int32(17)
    np.testing.assert_array_equal(got, expected)
    assert tcp_calls(worker).get((PS, "recv"), 0) >= 1


def test_a_link_without_shared_memory_sends_every_tensor_in_the_frame():
    value = np.arange(1 << 20, dtype=np.float32)  # over the segment threshold
    a, b = socket.socketpair()
    with a, b:
        out = Outgoing()
        out.add("v", value)
        sender = threading.Thread(target=send_frame,
                                  args=(a, {"op": "x", "t": out.entries}, out,
                                        Link(shares_memory=False)))
        sender.start()
        header, payload, fds = recv_frame(b, 1 << 30)
        sender.join(30)
    assert fds == [] and "seg" not in header
    (_, got), = decode_tensors(header["t"], payload, fds)
    np.testing.assert_array_equal(got, value)


def test_a_steps_deadline_and_error_come_back_over_tcp(servers, tcp, graph):
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    with nd.device("/job:ps/task:0"):
        q = nd.FIFOQueue(2, [nd.float32], shapes=[[]])
        blocked = q.dequeue()
        bad = nd.reshape(nd.placeholder_with_default([1.0, 2.0, 3.0], [None]), [2],
                         name="reshaped_on_the_ps")
        on_ps = nd.constant(1.0)
    with nd.device("/job:worker/task:0"):
        after = blocked + 1.0
        ok = nd.constant(1.0) + 1.0
        ok_ps = on_ps + 1.0
    with nd.Session(worker.target) as s:
        _until_over_tcp(lambda: s.run(ok_ps), worker)
        with pytest.raises(errors.DeadlineExceededError):
            s.run(after, options=nd.RunOptions(timeout_in_ms=500))
        with pytest.raises(errors.InvalidArgumentError, match="reshaped_on_the_ps"):
            s.run(bad)
        assert s.run(ok) == 2.0
    assert tcp_calls(worker).get((PS, "run"), 0) >= 2


def test_the_tcp_port_wants_the_token_and_survives_malformed_frames(servers, tcp,
                                                                    graph):
    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0, token="s3cret")
    endpoint, address = _endpoint(server), cluster["worker"][0]
    with socket.create_connection(endpoint, timeout=10) as sock:
        send_frame(sock, {"op": "hello"})
        header, _, _ = recv_frame(sock, 0)
        assert header["error"]["code"] == nd.errors.UNAUTHENTICATED
    with socket.create_connection(endpoint, timeout=10) as sock:  # over the limit
        sock.sendall((1 << 31).to_bytes(4, "little") + (0).to_bytes(8, "little"))
        with pytest.raises((ConnectionError, OSError)):
            recv_frame(sock, 0)
    with socket.create_connection(endpoint, timeout=10) as sock:
        answer = client_handshake(sock, address, cluster_key("s3cret"))
        assert answer["task"] == server.task_name
        # A segment that was never sent (nothing is shared over TCP).
        send_frame(sock, {"op": "run", "session": "s", "graph": "g", "step": 2,
                          "fetch": [], "t": [{"k": "x", "d": "<f4", "s": [4],
                                              "n": 16, "g": 0}],
                          "seg": {"id": 1, "size": 64}})
        header, _, _ = recv_frame(sock, 0)
        assert header["error"]["code"] == nd.errors.INVALID_ARGUMENT
    with nd.Session(server.target, config=nd.ConfigProto(auth_token="s3cret")) as s:
        assert s.run(nd.constant(2.0) * 3.0) == 6.0


def test_the_endpoint_is_announced_and_the_path_is_off_when_asked(servers,
                                                                  monkeypatch):
    monkeypatch.setenv("NBDIST_SAME_HOST", "0")
    # Bound to loopback (the default), no task on another host can reach it:
    # no TCP port, nothing announced.
    local = servers(local_cluster(worker=1), "worker", 0)
    assert [s.endpoint for s in local._path_services] == [None]
    assert local._coordination_client.try_get(
        transports.endpoint_key("tcp", local.task_name)) is None
    monkeypatch.setenv("NBDIST_PEER_TCP", "always")
    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0)
    key = transports.endpoint_key("tcp", server.task_name)
    host, port = _endpoint(server)
    wait_for(lambda: server._coordination_client.try_get(key), 30, "the announcement")
    assert server._coordination_client.try_get(key) == f"{host}:{port}".encode()
    # A TLS cluster keeps it (TLS-wrapped: tests/runtime/test_tls_tcp_path.py).
    assert "tcp" in [p.name for p in transports.peer_paths(plaintext_ok=False)]
    monkeypatch.setenv("NBDIST_PEER_TCP", "0")
    off = servers(local_cluster(worker=1), "worker", 0)
    assert off._path_services == []
    assert off._coordination_client.try_get(
        transports.endpoint_key("tcp", off.task_name)) is None


def test_the_tcp_port_is_none_the_cluster_spec_names():
    # A free port the kernel hands out may be one a spec reserved for a task
    # not started yet (seen: a later task could not listen on its own port).
    from nbdist.runtime.tcp import tcp_listener as _tcp_listener

    with socket.create_server(("127.0.0.1", 0)) as probe:
        near = probe.getsockname()[1]  # free again: the kernel may hand it out
    with pytest.raises(OSError, match="no free port outside the cluster's"):
        _tcp_listener("127.0.0.1", frozenset(range(1024, 65536)))
    listener = _tcp_listener("127.0.0.1", frozenset({near}))
    with listener:
        assert listener.getsockname()[1] != near


def test_a_restarted_peer_is_found_at_its_new_port(servers, tcp, graph):
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    with nd.device("/job:ps/task:0"):
        a = nd.constant(3.0) * 2.0
    with nd.device("/job:worker/task:0"):
        b = a + 1.0
    with nd.Session(worker.target) as s:
        _until_over_tcp(lambda: s.run(b), worker)
    old = _endpoint(ps)
    ps.stop()
    ps = servers(cluster, "ps", 0)
    assert _endpoint(ps) != old
    before = tcp_calls(worker).get((PS, "run"), 0)

    def runs_over_tcp():
        try:
            with nd.Session(worker.target) as s:
                assert s.run(b) == 7.0
        except (errors.UnavailableError, errors.AbortedError):
            return False  # the step that found the old connection broken
        return tcp_calls(worker).get((PS, "run"), 0) > before

    wait_for(runs_over_tcp, 60, "a step over TCP to the restarted ps")


def test_an_all_reduce_over_tcp_matches_numpy(servers, tcp):
    cluster = local_cluster(worker=2)
    tasks = [servers(cluster, "worker", i) for i in range(2)]
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(50_000).astype(np.float32) for _ in range(2)]
    # Worker 0 knows worker 1's TCP endpoint first (looked up in the
    # background: a busy machine may still be on gRPC at the all-reduce).
    with nd.Graph().as_default():
        with nd.device("/job:worker/task:1"):
            there = nd.constant(1.0) + 1.0
        with nd.Session(tasks[0].target) as s:
            _until_over_tcp(lambda: s.run(there), tasks[0],
                            "/job:worker/replica:0/task:1")

    def member(i):
        with nd.Graph().as_default():
            r = collective_ops.all_reduce(xs[i], 2, 1, 1, merge_op="Add", final_op="Id")
            with nd.Session(tasks[i].target) as s:
                return s.run(r)

    out = _in_threads(2, member)  # names a member that hung, and why
    for got in out:
        np.testing.assert_allclose(got, xs[0] + xs[1], rtol=1e-6)
    assert any(op == "recv" for _, op in tcp_calls(tasks[0]))


def test_a_session_reaches_its_master_over_tcp(servers, tcp, graph):
    """A session's client looks its master's endpoint up by address: its steps,
    large feeds and fetches go over TCP, and a step error comes back as is."""
    from nbdist.runtime.grpc.client import GrpcMasterClient

    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0)
    wait_for(lambda: server._coordination_client.try_get(transports.endpoint_key(
        "tcp", "@" + cluster["worker"][0])), 30, "the endpoint announced")
    feed = nd.placeholder(nd.float32, [None])
    doubled = feed * 2.0
    bad = nd.reshape(feed, [3], name="reshaped_by_the_master")
    values = np.arange(8 << 20, dtype=np.float32)  # 32 MiB each way
    sess = nd.Session("")
    sess._master.close()
    sess._master = GrpcMasterClient(server.target)
    with sess:
        ch = sess._master._same_host()
        assert ch is not None and ch.endpoint == _endpoint(server)
        np.testing.assert_array_equal(sess.run(doubled, {feed: values}), values * 2)
        with pytest.raises(errors.InvalidArgumentError, match="reshaped_by_the_master"):
            sess.run(bad, {feed: values[:4]})
        calls = ch._calls
        assert calls[(None, "push")] + calls[(None, "step")] >= 2, calls
