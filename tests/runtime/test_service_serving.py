"""The handlers own serving for every codec (``runtime.service.Serving``).

* One ``Admission`` per task, whatever way a call comes: with a class full, a
  RunStep sent over gRPC, a session of the server's own process (through its
  ``MasterHandler``, no RPC), a ``Session("")`` and a session on an in-process
  server are all refused with ``ResourceExhaustedError`` in the same words
  (``<Method> refused: <task> already serves <n> <class> calls and queues <m>
  more; retry later``); a call made in process to a peer's ``WorkerHandler``
  (RegisterGraph, a control call) is admitted there too.
* An in-process master call is admitted and counted while it runs: a step's
  ``on_step`` (called before the step starts) sees one RunStep in flight;
  after the step none are.
* One de-duplication key space, ``(gRPC method name, request id)``: a RunStep
  served in process with id R is not run again when the same id arrives over
  gRPC; in-process peers send request ids (each RunGraph is kept under one).
* An in-process session's ``RunOptions`` stay the caller's: a timeout beyond a
  week is cut to a week for the step, not in the caller's message.
"""

from __future__ import annotations

import uuid

import grpc
import pytest

import nbdist as nd
from nbdist import errors
from nbdist.proto import config_pb2, master_pb2
from nbdist.runtime.service import CALL_CLASSES

_STEP = next(c for c in CALL_CLASSES if c.name == "step")
_CONTROL = next(c for c in CALL_CLASSES if not c.methods)


def _refusal(method: str, task: str, call_class) -> str:
    """The words of a refusal, as the task's ``Admission`` says them."""
    return (f"{method} refused: {task} already serves {call_class.threads} "
            f"{call_class.name} calls and queues {call_class.waiting} more; "
            "retry later")


def _filled(admission, method: str):
    """Fills the class of ``method``; returns what empties it again."""
    count = admission.class_of(method)
    bound = count.call_class.threads + count.call_class.waiting
    for _ in range(bound):
        count.enter()

    def empty():
        for _ in range(bound):
            count.leave()
    return empty


def _inproc_cluster(**jobs):
    name = uuid.uuid4().hex[:8]
    return {job: [f"{job}{i}-{name}" for i in range(n)] for job, n in jobs.items()}


@pytest.fixture(scope="module")
def grpc_server():
    server = nd.Server.create_local_server()
    yield server
    server.stop()


def _counter_graph():
    g = nd.Graph()
    with g.as_default():
        v = nd.Variable(0.0, name="counter")
        bump = v.assign_add(1.0, name="bump")
        read = nd.identity(v, name="read")
    return g, v.initializer, bump, read


def test_a_full_step_class_refuses_in_the_same_words_on_every_path(grpc_server):
    g, init, bump, read = _counter_graph()
    task = grpc_server.task_name
    expected = _refusal("RunStep", task, _STEP)
    with nd.Session(grpc_server.target, graph=g) as sess:
        sess.run(init)
        handle = sess.session_handle
        empty = _filled(grpc_server.master_handler.admission, "RunStep")
        try:
            with pytest.raises(errors.ResourceExhaustedError) as in_process:
                sess.run(bump)
            address = grpc_server.target.removeprefix("grpc://")
            with grpc.insecure_channel(address) as channel:
                run_step = channel.unary_unary(
                    "/nbdist.MasterService/RunStep",
                    request_serializer=master_pb2.RunStepRequest.SerializeToString,
                    response_deserializer=bytes)
                with pytest.raises(grpc.RpcError) as remote:
                    run_step(master_pb2.RunStepRequest(
                        session_handle=handle, target=[bump.op.name]), timeout=30)
        finally:
            empty()
        assert in_process.value.message == expected
        assert remote.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert remote.value.details() == expected
        assert sess.run(read) == 0.0  # neither refused step ran
        sess.run(bump)
        assert sess.run(read) == 1.0  # and there is room again


@pytest.mark.parametrize("where", ["local", "inproc"])
def test_an_in_process_session_is_refused_by_its_tasks_admission(where):
    g, init, bump, _ = _counter_graph()
    server = None
    if where == "inproc":
        server = nd.Server(_inproc_cluster(worker=1), job_name="worker",
                           task_index=0, protocol="inproc")
    try:
        with nd.Session(server.target if server else "", graph=g) as sess:
            sess.run(init)
            handler = server.master_handler if server else sess._master.handler
            empty = _filled(handler.admission, "RunStep")
            try:
                with pytest.raises(errors.ResourceExhaustedError) as refused:
                    sess.run(bump)
            finally:
                empty()
            assert refused.value.message == _refusal("RunStep", handler.task_name,
                                                     _STEP)
            assert sess.run(bump) == 1.0
    finally:
        if server is not None:
            server.stop()


def test_an_in_process_call_to_a_peer_is_admitted_by_the_peer():
    cluster = _inproc_cluster(worker=1, ps=1)
    servers = [nd.Server(cluster, job_name=job, task_index=0, protocol="inproc")
               for job in ("worker", "ps")]
    worker, ps = servers
    try:
        g = nd.Graph()
        with g.as_default():
            with nd.device("/job:ps/task:0"):
                a = nd.constant(3.0) * 2.0
            with nd.device("/job:worker/task:0"):
                b = a + 1.0
                c = a - 1.0
        with nd.Session(worker.target, graph=g) as sess:
            kept = len(ps.worker_handler.recent)
            assert sess.run(b) == 7.0
            assert sess.run(b) == 7.0
            # Each call to the peer carried a request id (its answer is kept
            # under it): the RegisterGraph and the two RunGraphs at least.
            assert len(ps.worker_handler.recent) >= kept + 3
            # A new fetch registers a new partition on the ps: a control call.
            empty = _filled(ps.worker_handler.admission, "RegisterGraph")
            try:
                with pytest.raises(errors.ResourceExhaustedError) as refused:
                    sess.run(c)
            finally:
                empty()
            assert refused.value.message == _refusal("RegisterGraph", ps.task_name,
                                                     _CONTROL)
            assert sess.run(c) == 5.0
    finally:
        for s in servers:
            s.stop()


def test_an_in_process_master_call_is_counted_while_it_runs():
    g, init, _, read = _counter_graph()
    with nd.Session(graph=g) as sess:
        sess.run(init)
        sess.run(read)
        local = sess._master
        steps = local.handler.admission.class_of("RunStep")
        seen = []
        values = local.run_step(sess.session_handle, {}, [read.name], [],
                                on_step=lambda step_id: seen.append(steps.in_flight))
        assert values == [0.0]
        assert seen == [1]  # admitted while it ran
        assert steps.in_flight == 0  # and given back


def test_a_request_id_is_one_key_whichever_transport_brings_it(grpc_server):
    g, init, bump, read = _counter_graph()
    with nd.Session(grpc_server.target, graph=g) as sess:
        sess.run(init)
        handle = sess.session_handle
        handler = grpc_server.master_handler
        rid = 0x5EED
        # Served in process under id ``rid`` (the in-process codec's way) ...
        handler.call("RunStep", lambda: handler.run_step(
            handle, {}, [], [bump.op.name]), rid=rid)
        assert sess.run(read) == 1.0
        # ... then the same id over gRPC: the first answer, no second run.
        address = grpc_server.target.removeprefix("grpc://")
        with grpc.insecure_channel(address) as channel:
            run_step = channel.unary_unary(
                "/nbdist.MasterService/RunStep",
                request_serializer=master_pb2.RunStepRequest.SerializeToString,
                response_deserializer=master_pb2.RunStepResponse.FromString)
            answer = run_step(master_pb2.RunStepRequest(
                session_handle=handle, target=[bump.op.name], request_id=rid),
                timeout=30)
            assert answer.status_code == 0
            assert sess.run(read) == 1.0
            run_step(master_pb2.RunStepRequest(
                session_handle=handle, target=[bump.op.name], request_id=rid + 1),
                timeout=30)
        assert sess.run(read) == 2.0  # another id runs


def test_an_in_process_sessions_run_options_stay_the_callers():
    with nd.Graph().as_default(), nd.Session() as sess:
        options = config_pb2.RunOptions(timeout_in_ms=10**13)
        assert sess.run(nd.constant(5.0) * 2.0, options=options) == 10.0
        assert options.timeout_in_ms == 10**13
