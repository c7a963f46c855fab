"""One service, many transports: admission, cancel on hang-up and size limits.

Each test body runs on gRPC alone (``NBDIST_SAME_HOST=0``), on the same-host
channel (a ``GrpcMasterClient`` of a master on this host takes it for its
steps and large feeds) and on the in-process transport (``protocol="inproc"``:
a session calls the master of its server directly). The server is an
``nd.Server`` of this process; gRPC and same-host calls go over real sockets.

* 1,000 blocking calls held (GetKeyValue of a key nobody sets: the blocking
  class, 128 served, the rest refused) never keep a step from answering within
  its 5 s deadline, whichever transport carries the step.
* A client that goes away while its step waits (a dequeue of an empty queue)
  cancels the step: the call's admission slot is given back and the queue's
  next element goes to the next dequeue, not to the abandoned one.
* A feed over the server's ``server_limits`` is refused with
  ``ResourceExhaustedError`` naming the limit, and the server keeps serving.
"""

from __future__ import annotations

import contextlib
import time
import uuid

import grpc
import numpy as np
import pytest
from helpers import local_cluster, wait_for

import nbdist as nd
from nbdist import errors
from nbdist.proto import config_pb2, master_pb2
from nbdist.proto import coordination_pb2 as cpb
from nbdist.proto import coordination_service_pb2_grpc as cgrpc
from nbdist.runtime import samehost
from nbdist.runtime.framed.wire import Outgoing
from nbdist.runtime.grpc.client import GrpcMasterClient

TRANSPORTS = ["grpc", "samehost", "inproc"]
MiB = 1 << 20
HELD = 1000
HOLD_S = 60.0


@pytest.fixture(params=TRANSPORTS)
def transport(request, monkeypatch):
    monkeypatch.setenv("NBDIST_SAME_HOST", "1" if request.param == "samehost" else "0")
    return request.param


def _server(transport, config=None):
    if transport == "inproc":
        cluster = {"worker": [f"worker-{uuid.uuid4().hex[:8]}"]}
        return nd.Server(cluster, job_name="worker", task_index=0,
                         protocol="inproc", config=config)
    return nd.Server(local_cluster(worker=1), job_name="worker", task_index=0,
                     config=config)


@pytest.fixture
def server(transport):
    s = _server(transport)
    yield s
    s.stop()


@pytest.fixture
def master(transport, server):
    """The master as a session of ``transport`` reaches it."""
    if transport == "inproc":
        yield server.master
        return
    client = GrpcMasterClient(server.target)
    yield client
    client.close()


def _session(master, graph):
    handle, _ = master.create_session(graph.as_graph_def(), None)
    return handle


def _hold_blocking_calls(server, n: int):
    """``n`` GetKeyValue calls of keys nobody sets, in flight (or refused) when
    this returns; what cancels them."""
    channel = grpc.insecure_channel(server.target.removeprefix("grpc://"))
    stub = cgrpc.CoordinationServiceStub(channel)
    calls = [stub.GetKeyValue.future(cpb.GetKeyValueRequest(key=f"never/{i}"),
                                     timeout=HOLD_S) for i in range(n)]
    blocking = server._admission_counts.class_of("GetKeyValue")
    deadline = time.monotonic() + 30
    while blocking.in_flight < blocking.call_class.threads:  # the class is full
        assert time.monotonic() < deadline, blocking.in_flight
        time.sleep(0.01)

    def release():
        for c in calls:
            c.cancel()
        channel.close()
    return release


def test_a_step_answers_while_1000_blocking_calls_are_held(transport, server,
                                                           master):
    if transport == "inproc":
        pytest.skip("the in-process transport has no coordination service, the "
                    "only carrier of blocking-class calls (Barrier, GetKeyValue, "
                    "WatchEvents)")
    g = nd.Graph()
    with g.as_default():
        out = nd.constant(2.0) * 3.0
    handle = _session(master, g)
    release = _hold_blocking_calls(server, HELD)
    try:
        t0 = time.monotonic()
        value = master.run_step(handle, {}, [out.name], [],
                                config_pb2.RunOptions(timeout_in_ms=5000))[0]
        took = time.monotonic() - t0
        assert value == 6.0
        assert took < 5.0, took
        assert (master._same_host_channel is not None) == (transport == "samehost")
    finally:
        release()
        master.close_session(handle)


def _queue_graph():
    g = nd.Graph()
    with g.as_default():
        q = nd.FIFOQueue(10, nd.float32, shapes=[[]], name="q")
        dequeue = q.dequeue(name="take")
        enqueue = q.enqueue(5.0, name="put")
    return g, dequeue.name, enqueue.name


def _start_and_hang_up(transport, server, handle, dequeue):
    """Starts a RunStep fetching ``dequeue`` and returns what hangs it up."""
    address = server.target.removeprefix("grpc://")
    if transport == "samehost":
        ch = samehost.client_channel(address, None)
        _, (sock, link) = ch.send("step", {"session": handle, "fetch": [dequeue],
                                           "target": [], "t": []}, Outgoing(), 60.0)

        def close():  # the process's end: its connection closes mid-call
            sock.close()
            link.close()
            ch.close()
        return close
    channel = grpc.insecure_channel(address)
    run_step = channel.unary_unary(
        "/nbdist.MasterService/RunStep",
        request_serializer=master_pb2.RunStepRequest.SerializeToString,
        response_deserializer=bytes)
    call = run_step.future(master_pb2.RunStepRequest(
        session_handle=handle, fetch=[dequeue], request_id=1), timeout=60)

    def hang_up():
        call.cancel()
        channel.close()
    return hang_up


def test_a_client_that_goes_away_cancels_its_step(transport, server, master):
    if transport == "inproc":
        pytest.skip("an in-process caller cannot go away mid-call: the step runs "
                    "on the caller's own thread, which waits for it")
    g, dequeue, enqueue = _queue_graph()
    handle = _session(master, g)
    steps = server._admission_counts.class_of("RunStep")
    try:
        hang_up = _start_and_hang_up(transport, server, handle, dequeue)
        wait_for(lambda: steps.in_flight == 1, 30.0, "the dequeue is in flight")
        hang_up()
        # Its slot is given back once the blocked dequeue is cancelled.
        wait_for(lambda: steps.in_flight == 0, 30.0, "the abandoned step ends")
        master.run_step(handle, {}, [], [enqueue])
        value = master.run_step(handle, {}, [dequeue], [],
                                config_pb2.RunOptions(timeout_in_ms=5000))[0]
        assert value == 5.0  # the abandoned dequeue did not take it
    finally:
        master.close_session(handle)


@contextlib.contextmanager
def _limited(transport, limit: str):
    """A server whose ``server_limits`` set ``limit`` to 1 MiB, and its master
    as a session of ``transport`` reaches it."""
    cfg = nd.ConfigProto(server_limits=config_pb2.ServerLimits(**{limit: MiB}))
    s = _server(transport, cfg)
    client = None if transport == "inproc" else GrpcMasterClient(s.target)
    try:
        yield client or s.master
    finally:
        if client is not None:
            client.close()
        s.stop()


def test_a_feed_over_the_servers_limit_is_refused(transport):
    g = nd.Graph()
    with g.as_default():
        ph = nd.placeholder(nd.float32, [None], name="feed_me")
        total = nd.reduce_sum(ph)
    with _limited(transport, "max_tensor_bytes") as master:
        handle = _session(master, g)
        with pytest.raises(errors.ResourceExhaustedError, match="max_tensor_bytes"):
            master.run_step(handle, {"feed_me:0": np.ones(MiB, np.float32)},
                            [total.name], [])
        small = master.run_step(handle, {"feed_me:0": np.ones(1000, np.float32)},
                                [total.name], [])[0]
        assert small == 1000.0


def test_a_request_over_the_servers_limit_is_refused(transport):
    if transport == "inproc":
        pytest.skip("an in-process request is not encoded: it has no size to "
                    "bound (its tensors are, see the feed test)")
    g = nd.Graph()
    with g.as_default():
        ph = nd.placeholder(nd.string, [None], name="s")
        n = nd.size(ph)
    with _limited(transport, "max_request_bytes") as master:
        handle = _session(master, g)
        big = np.array([b"x" * 1000] * 2000, dtype=object)  # 2 MB of strings
        with pytest.raises(errors.ResourceExhaustedError, 
                           match=f"max_request_bytes.*{MiB}"):
            master.run_step(handle, {"s:0": big}, [n.name], [])
        assert master.run_step(handle, {"s:0": big[:10]}, [n.name], [])[0] == 10
