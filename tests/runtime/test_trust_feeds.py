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
from nbdist.proto import master_pb2
from nbdist.runtime import samehost
from nbdist.framework.tensor_util import make_ndarray, make_tensor_proto

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
        channel = samehost.SameHostChannel(None, address, None, collections.Counter(),
                                           endpoint=(host, int(port)))
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
