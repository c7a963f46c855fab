"""One service, many transports: the same behaviour whichever way a call comes.

Each test body runs on the gRPC transport alone (``NBDIST_SAME_HOST=0``: the
TCP peer path stays off between tasks of one host), with the same-host
transport (the default for tasks of one host), with the TCP peer path (the
default for tasks on other hosts; ``NBDIST_PEER_TCP=always`` here) and on the
in-process transport (``protocol="inproc"``: no sockets). The servers are in
this process (``nd.Server``); gRPC and same-host peers talk over real sockets.

* A step across two tasks shows on the master task's tap (``server.tap``): one
  RunGraph to the other task per step and one tensor received from it, with
  the tensor's bytes, whichever transport carried them.
* The worker's ``_Recv``s of four tensors of the ps are one exchange per step
  (the others come along as siblings; a producer lagging behind the linger may
  split one: at most one step in four), carrying all four tensors' bytes.
* A step sent twice with the same request id runs once (the handlers'
  ``RecentRequests``, one per task for every transport, in-process calls
  included); another id runs again.
* Admission is the task's, not a transport's: with the step class full, a
  RunStep is refused on gRPC, on the same-host channel and in process alike
  (the in-process codec's call: ``MasterHandler.call``), and answered
  again once there is room; a step whose RunGraph goes to a task whose step
  class is full fails with ``ResourceExhaustedError`` on every transport.
"""

from __future__ import annotations

import collections
import uuid

import grpc
import numpy as np
import pytest
from helpers import local_cluster

import nbdist as nd
from nbdist import errors
from nbdist.proto import master_pb2
from nbdist.runtime import samehost
from nbdist.runtime.tcp import TcpChannel

TRANSPORTS = ["grpc", "samehost", "tcp", "inproc"]
PEER_PATHS = ("samehost", "tcp")


@pytest.fixture(params=TRANSPORTS)
def transport(request, monkeypatch):
    monkeypatch.setenv("NBDIST_SAME_HOST", "1" if request.param == "samehost" else "0")
    if request.param == "tcp":
        monkeypatch.setenv("NBDIST_PEER_TCP", "always")
    return request.param


@pytest.fixture
def two_tasks(transport):
    """A worker task and a ps task, servers of this process."""
    if transport == "inproc":
        name = uuid.uuid4().hex[:8]
        cluster = {"worker": [f"worker-{name}"], "ps": [f"ps-{name}"]}
    else:
        cluster = local_cluster(worker=1, ps=1)
    protocol = "inproc" if transport == "inproc" else None
    servers = [nd.Server(cluster, job_name=job, task_index=0, protocol=protocol)
               for job in ("worker", "ps")]
    yield servers
    for s in servers:
        s.stop()


def _same_host_calls(server) -> dict:
    paths = server._router.path_peers
    return dict(paths[0].calls) if paths else {}


def test_a_step_across_tasks_shows_on_the_tap(two_tasks, transport):
    worker, ps = two_tasks
    values = np.arange(1000, dtype=np.float32)
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            a = nd.constant(values) + 1.0
        with nd.device("/job:worker/task:0"):
            b = a * 2.0
    events = []
    stop = worker.tap.subscribe(events.append)
    try:
        with nd.Session(worker.target, graph=g) as sess:
            np.testing.assert_array_equal(sess.run(b), (values + 1) * 2)
            events.clear()
            for _ in range(3):
                np.testing.assert_array_equal(sess.run(b), (values + 1) * 2)
    finally:
        stop()
    steps = sorted({e.step for e in events})
    assert len(steps) == 3, events
    ps_task, worker_task = ps.task_name, worker.task_name
    for step in steps:
        kinds = sorted((e.kind, e.source, e.destination, e.nbytes)
                       for e in events if e.step == step)
        # One RunGraph to the ps (no feeds, no fetches: the tensor goes by
        # _Send/_Recv), one tensor of a.nbytes from the ps.
        assert kinds == [("RecvTensor", ps_task, worker_task, values.nbytes),
                         ("RunGraph", worker_task, ps_task, 0)], kinds
    for e in events:
        assert e.end >= e.start
    took_peer_path = any(op == "run" for _, op in _same_host_calls(worker))
    assert took_peer_path == (transport in PEER_PATHS)


def test_a_steps_tensors_from_a_peer_are_one_exchange(two_tasks, transport):
    worker, ps = two_tasks
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(256).astype(np.float32) for _ in range(4)]
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            parts = [nd.constant(v) * 1.0 for v in values]
        with nd.device("/job:worker/task:0"):
            total = nd.add_n(parts)
    steps = 20
    events = []
    with nd.Session(worker.target, graph=g) as sess:
        sess.run(total)  # plans and connects
        stop = worker.tap.subscribe(events.append)
        try:
            for _ in range(steps):
                np.testing.assert_allclose(sess.run(total), sum(values), rtol=1e-6)
        finally:
            stop()
    recvs = [e for e in events if e.kind == "RecvTensor"]
    assert {(e.source, e.destination) for e in recvs} == {
        (ps.task_name, worker.task_name)}
    assert steps <= len(recvs) <= steps * 1.25, len(recvs)
    by_step: dict = {}
    for e in recvs:
        by_step[e.step] = by_step.get(e.step, 0) + e.nbytes
    assert len(by_step) == steps
    assert set(by_step.values()) == {sum(v.nbytes for v in values)}


def _counter_session(server):
    """A session on ``server``'s master with a counter, its increment and read."""
    g = nd.Graph()
    with g.as_default():
        v = nd.Variable(0.0, name="counter")
        inc = v.assign_add(1.0)
        read = nd.identity(v)
        init = nd.global_variables_initializer()
    master = server.master
    handle, _ = master.create_session(g.as_graph_def(), None)
    master.run_step(handle, {}, [], [init.name])
    return master, handle, inc.op.name, read.name


def _peer_path_channel(transport, server):
    address = server.target.removeprefix("grpc://")
    if transport == "samehost":
        return samehost.client_channel(address, None)
    (service,) = server._path_services  # the TCP path alone
    host, _, port = service.endpoint.rpartition(":")
    ch = TcpChannel(None, address, None, collections.Counter(), (host, int(port)))
    ch.open()
    return ch


def _run_step_with_id(transport, server, handle, target, request_id):
    if transport == "inproc":  # the in-process codec: the handler's own call
        handler = server.master_handler
        handler.call("RunStep", lambda: handler.run_step(handle, {}, [], [target]),
                     request_id)
        return
    address = server.target.removeprefix("grpc://")
    if transport in PEER_PATHS:
        ch = _peer_path_channel(transport, server)
        assert ch is not None, f"the {transport} channel answers"
        try:
            ch.call("step", {"session": handle, "fetch": [], "target": [target],
                             "rid": request_id, "t": []})
        finally:
            ch.close()
        return
    with grpc.insecure_channel(address) as channel:
        run_step = channel.unary_unary(
            "/nbdist.MasterService/RunStep",
            request_serializer=master_pb2.RunStepRequest.SerializeToString,
            response_deserializer=bytes)
        run_step(master_pb2.RunStepRequest(session_handle=handle, target=[target],
                                           request_id=request_id), timeout=30)


def test_a_retried_step_runs_once(two_tasks, transport):
    worker, _ = two_tasks
    master, handle, inc, read = _counter_session(worker)
    try:
        _run_step_with_id(transport, worker, handle, inc, 12345)
        _run_step_with_id(transport, worker, handle, inc, 12345)  # the retry
        assert master.run_step(handle, {}, [read], [])[0] == 1.0
        _run_step_with_id(transport, worker, handle, inc, 67891)  # a new step
        assert master.run_step(handle, {}, [read], [])[0] == 2.0
    finally:
        master.close_session(handle)


def _fill(server, method: str):
    """Makes the class of ``method`` on ``server`` full; returns what empties it."""
    count = server._admission_counts.class_of(method)
    bound = count.call_class.threads + count.call_class.waiting
    for _ in range(bound):
        count.enter()

    def empty():
        for _ in range(bound):
            count.leave()
    return empty


def test_a_full_peer_refuses_run_graph_on_every_transport(two_tasks, transport):
    worker, ps = two_tasks
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            a = nd.constant(3.0) * 2.0
        with nd.device("/job:worker/task:0"):
            b = a + 1.0
    with nd.Session(worker.target, graph=g) as sess:
        assert sess.run(b) == 7.0
        empty = _fill(ps, "RunGraph")
        try:
            with pytest.raises(errors.ResourceExhaustedError, match="refused"):
                sess.run(b)
        finally:
            empty()
        assert sess.run(b) == 7.0


def test_admission_is_the_tasks_on_every_transport(two_tasks, transport):
    worker, _ = two_tasks
    master, handle, inc, read = _counter_session(worker)
    step_class = worker._admission_counts.class_of("RunStep")
    bound = step_class.call_class.threads + step_class.call_class.waiting
    for _ in range(bound):  # the step class is full: no call may be admitted
        step_class.enter()
    try:
        if transport in (*PEER_PATHS, "inproc"):
            with pytest.raises(errors.ResourceExhaustedError,
                               match="RunStep refused"):
                _run_step_with_id(transport, worker, handle, inc, 1)
        else:
            with pytest.raises(grpc.RpcError) as caught:
                _run_step_with_id(transport, worker, handle, inc, 1)
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "RunStep refused" in caught.value.details()
    finally:
        for _ in range(bound):
            step_class.leave()
    try:
        _run_step_with_id(transport, worker, handle, inc, 2)
        assert master.run_step(handle, {}, [read], [])[0] == 1.0
    finally:
        master.close_session(handle)
