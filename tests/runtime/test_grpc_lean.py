"""The lean gRPC path keeps its semantics: the admission interceptor looks each
method up once (``AdmissionInterceptor``'s route table) and still refuses a
full class, still answers UNIMPLEMENTED for an unknown method and still lets
a call's deadline pass while it waits; a remote step over gRPC only (no
same-host path) still reports errors by their TF1 class, stops at its
deadline, is cancelled when its session closes, and a task's device names
resolve to the same task every time (``partition.task_of`` is memoised)."""

from __future__ import annotations

import os
import threading
import time
from concurrent import futures

import grpc
import numpy as np
import pytest

import nbdist as nd
from nbdist import errors
from nbdist.runtime import partition
from nbdist.runtime.grpc import admission as admission_mod
from nbdist.runtime.grpc.admission import AdmissionInterceptor, CallClass


# -- the interceptor's route table -------------------------------------------------------
@pytest.fixture
def blocking_server():
    """A bare grpc server with one ``/T/Block`` method (class ``slow``: one
    thread, one waiting) behind an AdmissionInterceptor; ``gate`` releases it."""
    gate = threading.Event()
    started = threading.Semaphore(0)

    def block(request, context):
        started.release()
        gate.wait(30)
        return request

    classes = (CallClass("slow", 1, 1, frozenset({"Block"})), CallClass("other", 2, 0))
    interceptor = AdmissionInterceptor("/job:t/replica:0/task:0", classes)
    server = grpc.server(
        futures.ThreadPoolExecutor(2),
        handlers=[grpc.method_handlers_generic_handler(
            "T", {"Block": grpc.unary_unary_rpc_method_handler(block)})],
        interceptors=[interceptor])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield channel, gate, started, interceptor
    finally:
        gate.set()
        channel.close()
        server.stop(0).wait(5)
        interceptor.shutdown()


def test_a_cached_route_still_refuses_a_full_class(blocking_server):
    channel, gate, started, interceptor = blocking_server
    call = channel.unary_unary("/T/Block")
    gate.set()
    for i in range(3):  # looked up once, then served from the table
        assert call(b"%d" % i, timeout=10) == b"%d" % i
    assert list(interceptor._routes) == ["/T/Block"]
    gate.clear()
    running = call.future(b"a", timeout=30)
    assert started.acquire(timeout=10)
    waiting = call.future(b"b", timeout=30)
    deadline = time.monotonic() + 10
    while not interceptor._routes["/T/Block"][2].full:  # the waiting call counted
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(grpc.RpcError) as refused:
        call(b"c", timeout=10)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "Block refused" in refused.value.details()
    gate.set()
    assert running.result(10) == b"a" and waiting.result(10) == b"b"
    assert call(b"d", timeout=10) == b"d"  # admitted again once there is room


def test_a_call_still_fails_at_its_deadline_while_waiting(blocking_server):
    channel, gate, started, _ = blocking_server
    call = channel.unary_unary("/T/Block")
    running = call.future(b"a", timeout=30)
    assert started.acquire(timeout=10)
    t0 = time.monotonic()
    with pytest.raises(grpc.RpcError) as late:
        call(b"b", timeout=0.5)  # queued behind the running call
    assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - t0 < 5.0
    gate.set()
    assert running.result(10) == b"a"


def test_unknown_methods_are_unimplemented_and_not_remembered(blocking_server):
    channel, gate, _, interceptor = blocking_server
    gate.set()
    for _ in range(3):
        with pytest.raises(grpc.RpcError) as e:
            channel.unary_unary("/T/Nope")(b"", timeout=10)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "/T/Nope" not in interceptor._routes


def test_the_route_table_is_bounded(monkeypatch, blocking_server):
    channel, gate, _, interceptor = blocking_server
    gate.set()
    monkeypatch.setattr(admission_mod, "_MAX_ROUTES", 0)
    call = channel.unary_unary("/T/Block")
    assert call(b"x", timeout=10) == b"x"  # served, just not remembered
    assert interceptor._routes == {}


# -- task names of devices ---------------------------------------------------------------
def test_task_of_answers_the_same_and_still_rejects_every_time():
    dev = "/job:ps/replica:0/task:3/device:CPU:0"
    assert partition.task_of(dev) == "/job:ps/replica:0/task:3"
    assert partition.task_of(dev) == "/job:ps/replica:0/task:3"
    assert partition.task_of("/job:w/task:1") == "/job:w/replica:0/task:1"
    for _ in range(2):  # an error is raised again, never remembered as a task
        with pytest.raises(errors.InvalidArgumentError, match="names no task"):
            partition.task_of("/device:CPU:0")
        with pytest.raises(errors.InvalidArgumentError):
            partition.task_of("/job:ps/task:x")


# -- a remote step over gRPC only ----------------------------------------------------------
def _bound_cluster():
    """Two tasks on free ports, both knowing the other's address."""
    import socket

    ports = []
    for _ in range(2):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        ports.append(s.getsockname()[1])
        s.close()
    return {"ps": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]}


@pytest.fixture
def grpc_only(monkeypatch):
    monkeypatch.setenv("NBDIST_SAME_HOST", "0")
    cluster = _bound_cluster()
    ps = nd.Server(cluster, job_name="ps", task_index=0)
    worker = nd.Server(cluster, job_name="worker", task_index=0)
    worker.ps = ps  # the tests below watch the ps task's steps
    try:
        yield worker
    finally:
        worker.stop()
        ps.stop()


def _train_graph():
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            w = nd.Variable(np.zeros((3, 1), np.float32), name="w")
        with nd.device("/job:worker/task:0"):
            x = nd.placeholder(nd.float32, (None, 3))
            y = nd.placeholder(nd.float32, (None, 1))
            loss = nd.reduce_mean(nd.square(nd.matmul(x, w) - y))
            train = nd.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = nd.global_variables_initializer()
    return g, w, x, y, train, init


def test_remote_steps_over_grpc_match_numpy(grpc_only):
    assert os.environ["NBDIST_SAME_HOST"] == "0"
    g, w, x, y, train, init = _train_graph()
    xs = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    ys = np.ones((4, 1), np.float32)
    expect = np.zeros((3, 1), np.float32)
    with nd.Session(grpc_only.target, graph=g) as sess:
        sess.run(init)
        for _ in range(5):
            sess.run(train, {x: xs, y: ys})
            grad = 2 * xs.T @ (xs @ expect - ys) / len(xs)
            expect = expect - np.float32(0.1) * grad
        np.testing.assert_allclose(sess.run(w), expect, rtol=1e-5)


def test_a_remote_op_error_keeps_its_class_and_op_name(grpc_only):
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            a = nd.placeholder(nd.float32, (None,))
            check = nd.assert_positive(a, name="checked")
            with nd.control_dependencies([check]):
                checked = nd.identity(a)
        with nd.device("/job:worker/task:0"):
            out = checked * 2.0
    with nd.Session(grpc_only.target, graph=g) as sess:
        np.testing.assert_allclose(sess.run(out, {a: [1.0, 2.0]}), [2.0, 4.0])
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run(out, {a: [-1.0]})
        assert e.value.op is not None and "checked" in e.value.op.name
        np.testing.assert_allclose(sess.run(out, {a: [3.0]}), [6.0])  # still serves


def test_a_remote_step_stops_at_its_deadline(grpc_only):
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            q = nd.FIFOQueue(1, nd.float32)
            never = q.dequeue()  # nothing is ever enqueued
        with nd.device("/job:worker/task:0"):
            out = never + 1.0
    with nd.Session(grpc_only.target, graph=g) as sess:
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(out, options=nd.RunOptions(timeout_in_ms=500))
        assert time.monotonic() - t0 < 10.0


def test_closing_the_session_cancels_a_blocked_remote_step(grpc_only):
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            q = nd.FIFOQueue(1, nd.float32)
            never = q.dequeue()
        with nd.device("/job:worker/task:0"):
            out = never + 1.0
    sess = nd.Session(grpc_only.target, graph=g)
    raised: list = []

    def run():
        try:
            sess.run(out)
        except errors.OpError as e:
            raised.append(e)

    t = threading.Thread(target=run)
    t.start()
    ps_worker = grpc_only.ps._worker
    deadline = time.monotonic() + 20
    # The step runs on the ps (its dequeue waits): RunGraph arrived there.
    while not ps_worker._steps:
        assert time.monotonic() < deadline and t.is_alive()
        time.sleep(0.01)
    t0 = time.monotonic()
    sess.close()
    t.join(30)
    assert not t.is_alive() and time.monotonic() - t0 < 10.0
    assert raised and isinstance(raised[0], errors.CancelledError)
