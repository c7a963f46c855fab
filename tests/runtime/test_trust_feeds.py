"""The server checks every fed value, whatever carried the step.

A raw ``RunStep`` (a ``RunStepRequest`` proto on gRPC, a step frame on the
same-host socket or the TCP peer port, a call to the in-process handler) that
feeds a float32 ``Placeholder`` of shape ``(?, 3)``:

* a string or an int64 tensor is refused with ``InvalidArgumentError`` in
  TF's wording ("Input 0 of node y was passed string from x:0 incompatible
  with expected float.") — before, the step ran and ``Add`` concatenated the
  strings;
* a float32 tensor of shape ``(2, 4)`` is refused ("Cannot feed value of shape
  (2, 4) for Tensor x:0, which has shape (None, 3)", TF's Python wording);
* a float32 tensor of shape ``(2, 3)`` runs: the oracle is ``x + x``.
"""

from __future__ import annotations

import collections

import grpc
import numpy as np
import pytest
from helpers import local_cluster

import nbdist as nd
from nbdist import errors
from nbdist.framework.tensor_util import make_ndarray, make_tensor_proto
from nbdist.proto import master_pb2
from nbdist.runtime import samehost
from nbdist.runtime.tcp import TcpChannel

TRANSPORTS = ["grpc", "samehost", "tcp", "inproc"]


@pytest.fixture(scope="module", params=TRANSPORTS)
def served(request):
    """``(transport, server, handle)``: a session with ``y = x + x``."""
    mp = pytest.MonkeyPatch()
    mp.setenv("NBDIST_SAME_HOST", "1" if request.param == "samehost" else "0")
    if request.param == "tcp":
        mp.setenv("NBDIST_PEER_TCP", "always")
    if request.param == "inproc":
        server = nd.Server({"worker": [f"feeds-{id(mp):x}"]}, job_name="worker",
                           task_index=0, protocol="inproc")
    else:
        server = nd.Server(local_cluster(worker=1), job_name="worker", task_index=0)
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float32, [None, 3], name="x")
        nd.add(x, x, name="y")
    handle, _ = server.master.create_session(g.as_graph_def(), None)
    yield request.param, server, handle
    server.master.close_session(handle)
    server.stop()
    mp.undo()


def _raw_step(transport, server, handle, value):
    """``y:0`` of a step feeding ``value`` to ``x:0``, sent without a Session."""
    address = server.target.removeprefix("grpc://")
    if transport == "inproc":
        return server.master_handler.run_step(handle, [("x:0", value)], ["y:0"],
                                              [])[0]
    if transport == "grpc":
        request = master_pb2.RunStepRequest(session_handle=handle, fetch=["y:0"])
        request.feed.add(name="x:0", tensor=make_tensor_proto(value))
        with grpc.insecure_channel(address) as channel:
            run_step = channel.unary_unary(
                "/nbdist.MasterService/RunStep",
                request_serializer=master_pb2.RunStepRequest.SerializeToString,
                response_deserializer=master_pb2.RunStepResponse.FromString)
            reply = run_step(request, timeout=30)
        if reply.status_code:
            raise errors.make_error(reply.status_code, reply.status_error_message)
        return make_ndarray(reply.tensor[0].tensor)
    if transport == "samehost":
        channel = samehost.client_channel(address, None)
    else:
        (service,) = server._path_services  # the TCP peer port
        host, _, port = service.endpoint.rpartition(":")
        channel = TcpChannel(None, address, None, collections.Counter(),
                             (host, int(port)))
        channel.open()
    assert channel is not None, f"the {transport} path answers"
    try:
        return channel.run_step(handle, {"x:0": value}, ["y:0"], [], 30.0)[0]
    finally:
        channel.close()


@pytest.mark.parametrize("value, passed", [
    (np.array([[b"hello", b"a", b"b"]], dtype=object), "string"),
    (np.array([[1, 2, 3]], dtype=np.int64), "int64"),
])
def test_a_feed_of_another_dtype_is_refused(served, value, passed):
    transport, server, handle = served
    with pytest.raises(errors.InvalidArgumentError,
                       match=f"Input 0 of node y was passed {passed} from x:0 "
                             "incompatible with expected float"):
        _raw_step(transport, server, handle, value)


def test_a_feed_of_another_shape_is_refused_and_a_good_one_runs(served):
    transport, server, handle = served
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Cannot feed value of shape \(2, 4\) for Tensor x:0, "
                             r"which has shape \(None, 3\)"):
        _raw_step(transport, server, handle, np.zeros((2, 4), np.float32))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(_raw_step(transport, server, handle, x), x + x)


# -- a RunGraph sent straight to a worker ------------------------------------------
# The master checks a step's feeds, but a worker's RunGraph may come from anyone
# who can reach it. A hand-built partition (the shape the master makes: a
# ``_Feed`` of ``x:0``, float32 of shape (?, 3), read by ``y = Add(x, x)`` and by
# a ``_Send`` to another task, whose ``_Recv`` expects float) is registered and
# run over gRPC with bad ``send`` tensors: each is refused with
# InvalidArgumentError naming the consumer, the feed, the task and what was
# expected, before the step starts (no step is left waiting); then a good feed
# gives ``x + x`` (the oracle) and a Session step on the same server still runs.
# Before, a string was concatenated and a (1, 1) block was broadcast to (1, 1).
WORKER = "/job:worker/replica:0/task:0"


def _attr(node, name, **value):
    for field, v in value.items():
        if field == "dims":
            for d in v:
                node.attr[name].shape.dim.add(size=d)
        else:
            setattr(node.attr[name], field, v)


def _partition(to_send: bool):
    from nbdist.proto import graph_pb2

    gd = graph_pb2.GraphDef()
    cpu = WORKER + "/device:CPU:0"
    feed = gd.node.add(name="_feed/x_0", op="_Feed", device=cpu)
    _attr(feed, "key", s=b"x:0")
    _attr(feed, "dtype", type=nd.float32.as_datatype_enum)
    _attr(feed, "shape", dims=[-1, 3])
    if to_send:  # x is read on another task: the _Feed's consumer is the _Send
        send = gd.node.add(name="edge_1_x", op="_Send", input=["_feed/x_0"],
                           device=cpu)
        _attr(send, "T", type=nd.float32.as_datatype_enum)
        _attr(send, "tensor_name", s=b"x:0")
        _attr(send, "send_device", s=cpu.encode())
        _attr(send, "recv_device", s=b"/job:ps/replica:0/task:0/device:CPU:0")
    add = gd.node.add(name="y", op="Add", input=["_feed/x_0", "_feed/x_0"],
                      device=cpu)
    _attr(add, "T", type=nd.float32.as_datatype_enum)
    fetch = gd.node.add(name="_fetch/y_0", op="_Fetch", input=["y"], device=cpu)
    _attr(fetch, "key", s=b"y:0")
    return gd


@pytest.fixture(scope="module")
def raw_worker():
    """``call(method, request)`` on a gRPC server's WorkerService, and the server."""
    from nbdist.proto import worker_pb2

    server = nd.Server(local_cluster(worker=1), job_name="worker", task_index=0)
    channel = grpc.insecure_channel(server.target.removeprefix("grpc://"))

    def call(method, request):
        reply_type = getattr(worker_pb2, method + "Response")
        rpc = channel.unary_unary(f"/nbdist.WorkerService/{method}",
                                  request_serializer=type(request).SerializeToString,
                                  response_deserializer=reply_type.FromString)
        return rpc(request, timeout=10)  # a stuck step would pass this

    yield call, server, worker_pb2
    channel.close()
    server.stop()


def _run_graph(call, worker_pb2, graph_handle, step_id, value):
    request = worker_pb2.RunGraphRequest(session_handle="raw", graph_handle=graph_handle,
                                         step_id=step_id, recv_key=["y:0"])
    request.send.add(name="x:0", tensor=make_tensor_proto(value))
    reply = call("RunGraph", request)
    if reply.status_code:
        raise errors.make_error(reply.status_code, reply.status_error_message)
    return make_ndarray(reply.recv[0].tensor)


@pytest.mark.parametrize("to_send, consumer, op", [(False, "y", "Add"),
                                                   (True, "edge_1_x", "_Send")])
def test_a_raw_run_graph_checks_its_feeds(raw_worker, to_send, consumer, op):
    call, server, worker_pb2 = raw_worker
    call("CreateWorkerSession", worker_pb2.CreateWorkerSessionRequest(
        session_handle="raw"))
    handle = call("RegisterGraph", worker_pb2.RegisterGraphRequest(
        session_handle="raw", graph_def=_partition(to_send))).graph_handle
    where = rf"\[\[node {consumer} \(op {op}\) on {WORKER}\]\]"
    float_wanted = "from x:0 incompatible with expected float"
    bad = [
        (np.array([[b"hello", b"a", b"b"]], dtype=object),
         f"Input 0 of node {consumer} was passed string {float_wanted}"),
        (np.array([[1, 2, 3]], dtype=np.int64), f"passed int64 {float_wanted}"),
        (np.zeros((2, 4), np.float32),
         r"Cannot feed value of shape \(2, 4\) for Tensor x:0, which has shape \(None, 3\)"),
        (np.ones((1, 1), np.float32), r"value of shape \(1, 1\) for Tensor x:0"),
        (np.ones(3, np.float32), r"value of shape \(3,\) for Tensor x:0"),
    ]
    first = 200 if to_send else 100  # (a step id cleaned up stays cancelled)
    for step_id, (value, message) in enumerate(bad, start=first + 1):
        with pytest.raises(errors.InvalidArgumentError,
                           match=f"(?s){message}.*{where}"):
            _run_graph(call, worker_pb2, handle, step_id, value)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(_run_graph(call, worker_pb2, handle, first, x),
                                  x + x)
    call("CleanupGraph", worker_pb2.CleanupGraphRequest(step_id=first))  # its send
    g = nd.Graph()
    with g.as_default(), nd.Session(server.target) as sess:
        assert sess.run(nd.constant(2.0) * 3.0) == 6.0  # the server keeps serving
    call("DeleteWorkerSession", worker_pb2.DeleteWorkerSessionRequest(
        session_handle="raw"))
