"""Admission control and deadlines: blocking coordination calls held by the
hundred never starve a step, a call waits no longer than its deadline, and a
step whose caller has gone is cancelled. The servers are ``nbdist-server``
processes (spawned, killed by PID)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc
import pytest
from helpers import ROOT, TESTS_DIR, local_cluster, sleep_op

import nbdist as nd
from nbdist import errors
from nbdist.proto import coordination_pb2 as cpb
from nbdist.proto import coordination_service_pb2_grpc as cgrpc
from nbdist.runtime.grpc.admission import (
    CALL_CLASSES,
    AdmissionInterceptor,
    CallClass,
    queued_s,
)

pytestmark = pytest.mark.slow

HOLD_S = 60.0  # how long a held blocking call would wait


@pytest.fixture
def server(spawn):
    cluster = local_cluster(worker=1)
    spawn("worker", 0, cluster, test_ops=True)
    return "grpc://" + cluster["worker"][0]


def _channel(target: str) -> grpc.Channel:
    return grpc.insecure_channel(target[len("grpc://"):])


def _hold(channel, n: int, kind: str) -> list:
    """``n`` blocking calls of ``kind`` (GetKeyValue of a key nobody sets, or a
    WatchEvents stream), in flight when this returns: a probe sent after them on
    the same channel has been answered (or timed out), so the server took them in."""
    stub = cgrpc.CoordinationServiceStub(channel)
    stub.InsertKeyValue(cpb.InsertKeyValueRequest(
        kv=cpb.KeyValueEntry(key="probe", value=b"1"), allow_overwrite=True),
        timeout=HOLD_S)
    if kind == "GetKeyValue":
        calls = [stub.GetKeyValue.future(cpb.GetKeyValueRequest(key=f"never/{i}"),
                                         timeout=HOLD_S) for i in range(n)]
    else:
        calls = [stub.WatchEvents(cpb.WatchEventsRequest(kinds=["never"]),
                                  timeout=HOLD_S) for _ in range(n)]
    try:
        stub.GetKeyValue(cpb.GetKeyValueRequest(key="probe"), timeout=3.0)
    except grpc.RpcError:  # refused or queued: either way it came after the flood
        pass
    return calls


def _release(calls):
    for c in calls:
        c.cancel()


def _timed_run(target, fetch, timeout_ms=5000):
    opts = nd.RunOptions(timeout_in_ms=timeout_ms)
    t0 = time.monotonic()
    with nd.Session(target) as sess:
        try:
            value = sess.run(fetch, options=opts)
        except errors.OpError as e:
            value = e
    return value, time.monotonic() - t0


@pytest.mark.parametrize("n", [300, 1000])
def test_step_answers_while_blocking_calls_are_held(server, graph, n):
    channel = _channel(server)
    calls = _hold(channel, n, "GetKeyValue")
    try:
        value, took = _timed_run(server, nd.constant(2.0) * 3.0)
        print(f"\nrun latency with {n} held GetKeyValue calls: {took:.2f} s")
        assert value == 6.0
        assert took < 6.0
        slow, took = _timed_run(server, sleep_op(nd.constant(1.0), 60.0))
        print(f"deadline-exceeded latency with {n} held calls: {took:.2f} s")
        assert isinstance(slow, errors.DeadlineExceededError), slow
        assert took < 6.0
    finally:
        _release(calls)
        channel.close()


def test_step_answers_while_watch_streams_are_open(server, graph):
    channel = _channel(server)
    calls = _hold(channel, 300, "WatchEvents")
    try:
        value, took = _timed_run(server, nd.constant(2.0) + 1.0)
        print(f"\nrun latency with 300 open WatchEvents streams: {took:.2f} s")
        assert value == 3.0
        assert took < 6.0
    finally:
        _release(calls)
        channel.close()


def _wait_refused(calls, n: int, timeout: float = 30.0) -> list:
    """The calls answered RESOURCE_EXHAUSTED, once ``n`` of them are."""
    done = threading.Condition()
    for c in calls:
        c.add_done_callback(lambda _: _notify(done))

    def refused():
        return [c for c in calls
                if c.done() and c.code() == grpc.StatusCode.RESOURCE_EXHAUSTED]

    with done:
        done.wait_for(lambda: len(refused()) >= n, timeout)
    return refused()


def _notify(cond):
    with cond:
        cond.notify_all()


def test_blocking_calls_beyond_their_bound_are_refused(server):
    channel = _channel(server)
    calls = _hold(channel, 300, "GetKeyValue")
    try:
        held = CALL_CLASSES[1].threads
        refused = _wait_refused(calls, 300 - held)
        assert len(refused) == 300 - held
        assert sum(not c.done() for c in calls) == held
        assert "GetKeyValue refused" in refused[0].details()
        assert "128 blocking calls" in refused[0].details()
    finally:
        _release(calls)
        channel.close()


# -- the interceptor on a plain grpc server --------------------------------------------
def test_a_waiting_call_fails_at_its_deadline_and_a_full_class_refuses():
    gate = threading.Event()
    waited: list[float] = []
    ran = threading.Event()

    def block(request, context):
        waited.append(queued_s())
        ran.set()
        gate.wait(30)
        return b"done"

    classes = (CallClass("slow", 1, 2, frozenset({"Block"})), CallClass("other", 1, 0))
    admission = AdmissionInterceptor("/job:t/replica:0/task:0", classes)
    server = grpc.server(
        futures.ThreadPoolExecutor(2),
        handlers=[grpc.method_handlers_generic_handler(
            "T", {"Block": grpc.unary_unary_rpc_method_handler(block)})],
        interceptors=[admission])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        call = channel.unary_unary("/T/Block")
        first = call.future(b"", timeout=30)
        assert ran.wait(10)
        t0 = time.monotonic()
        expires = call.future(b"", timeout=1.0)  # waits: the class's one thread is taken
        later = call.future(b"", timeout=30)
        with pytest.raises(grpc.RpcError) as refused:
            call(b"", timeout=10)  # one running and two waiting: full
        # The server had ``expires`` queued by now, so its deadline there (the
        # server's clock from when the request arrived, which can be a little
        # after the client's) ends by this time plus 1 s.
        server_deadline = time.monotonic() + 1.0
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "serves 1 slow calls and queues 2 more" in refused.value.details()
        assert expires.exception(10).code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert 0.9 < time.monotonic() - t0 < 3.0
        # The slot frees only once the server's deadline has passed too (else
        # under load the call could still have a few ms left there, and run).
        time.sleep(max(0.0, server_deadline + 0.05 - time.monotonic()))
        gate.set()
        assert first.result(10) == b"done" and later.result(10) == b"done"
        assert len(waited) == 2  # the expired call never ran
        assert waited[1] >= 0.9  # the later call knows how long it waited
    finally:
        gate.set()
        channel.close()
        server.stop(0).wait(5)
        admission.shutdown()


# -- a step whose client has gone -------------------------------------------------------
_CLIENT = """
import sys
sys.path.insert(0, {tests!r})
import helpers, nbdist as nd
x = helpers.sleep_op(nd.constant(1.0), 120.0)
with nd.Session({target!r}) as sess:
    sess.run(x)
"""


def test_the_step_of_a_client_that_went_away_is_cancelled(server):
    from nbdist.runtime import transports

    with transports.connect_coordination(server) as client, \
            client.watch(kinds=["graph_registered", "error"]) as events:
        proc = subprocess.Popen(
            [sys.executable, "-c", _CLIENT.format(tests=str(TESTS_DIR), target=server)],
            cwd=ROOT)
        try:
            events.wait_for(lambda e: e.kind == "graph_registered", 60)
            t0 = time.monotonic()
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        error = events.wait_for(lambda e: e.kind == "error", 30)
        took = time.monotonic() - t0
    assert error.payload["code"] == errors.CANCELLED
    assert "went away" in error.payload["message"]
    assert took < 10
