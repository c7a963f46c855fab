"""``nd.function``: tracing per signature, captures, calls inside graphs, eager
calls, FunctionDefs, and concrete functions run on servers."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import local_cluster

import nbdist as nd
from nbdist import errors
from nbdist.distribute.tracing.function import (
    ConcreteFunction,
    TensorSpec,
    function,
    run_function,
)
from nbdist.executor.executor import Executor, StepContext
from nbdist.proto import function_pb2
from nbdist.runtime.worker import Worker


@pytest.fixture
def local_server():
    server = nd.Server.create_local_server()
    yield server
    server.stop()


def _op_types(graph):
    return [op.type for op in graph.get_operations()]


# -- tracing and its cache ---------------------------------------------------------
def test_trace_cache_per_signature():
    calls = []

    @function
    def f(x, scale):
        calls.append(1)
        return x * scale

    a = np.ones(2, np.float32)
    np.testing.assert_allclose(f(a, 2.0), [2.0, 2.0])
    np.testing.assert_allclose(f(a + 1, 2.0), [4.0, 4.0])  # same signature
    assert f.experimental_get_tracing_count() == 1
    f(np.ones(3, np.float32), 2.0)  # new shape
    assert f.experimental_get_tracing_count() == 2
    f(np.ones(3, np.int32), 2)  # new dtype and Python value
    assert f.experimental_get_tracing_count() == 3
    f(a, 3.0)  # a Python scalar is part of the key (baked into the trace)
    assert f.experimental_get_tracing_count() == 4
    np.testing.assert_allclose(f(a, 3.0), [3.0, 3.0])
    assert f.experimental_get_tracing_count() == 4
    assert len(calls) == 4
    # The baked scalar is a constant, not an input.
    c = f.get_concrete_function(a, 3.0)
    assert [p.op.name for p in c.inputs] == ["x"]


def test_input_signature_traces_once():
    @nd.function(input_signature=[TensorSpec([None], nd.float32)])
    def f(x):
        return nd.reduce_sum(x)

    f(np.ones(2, np.float32))
    f(np.ones(5, np.float32))
    f([1.0, 2.0, 3.0])
    assert f.experimental_get_tracing_count() == 1
    assert f.get_concrete_function().inputs[0].shape.as_list() == [None]
    with pytest.raises(ValueError, match="not compatible"):
        f(np.ones((2, 2), np.float32))


def test_eager_call_returns_numpy_structures():
    @nd.function
    def f(x, y):
        return {"sum": x + y, "pair": (x * y, None), "k": 7}

    out = f(np.array([1, 2], np.int32), np.array([3, 4], np.int32))
    np.testing.assert_array_equal(out["sum"], [4, 6])
    np.testing.assert_array_equal(out["pair"][0], [3, 8])
    assert out["pair"][1] is None and out["k"] == 7
    assert isinstance(out["sum"], np.ndarray)


def test_method_decorated():
    class Model:
        def __init__(self, k):
            self.k = k

        @nd.function
        def apply(self, x):
            return x * self.k

    m2, m3 = Model(2.0), Model(3.0)
    assert float(m2.apply(np.float32(1))) == 2.0
    assert float(m3.apply(np.float32(1))) == 3.0


# -- captures --------------------------------------------------------------------
def test_captured_constant_is_copied(graph):
    c = nd.constant([10.0, 20.0], name="table")

    @nd.function
    def f(x):
        return c + x  # the outer constant first: its graph is the outer one

    conc = f.get_concrete_function(np.zeros(2, np.float32))
    assert all(op.graph is conc.graph for op in conc.graph.get_operations())
    assert "Const" in _op_types(conc.graph)
    np.testing.assert_allclose(f(np.ones(2, np.float32)), [11.0, 21.0])


def test_illegal_capture_names_the_tensor(graph):
    p = nd.placeholder(nd.float32, [], name="outer_input")

    @nd.function
    def f(x):
        return x + p

    with pytest.raises(ValueError, match=r"pass outer_input:0 as an argument"):
        f(np.float32(1))


def test_function_cannot_create_variables(graph):
    @nd.function
    def f(x):
        v = nd.Variable(1.0, name="inner")
        return x + v

    with pytest.raises(ValueError, match="cannot create variables.*inner"):
        f(np.float32(1))


def test_captured_variable_is_rebound_and_updated(graph, local_server):
    with nd.device("/job:localhost/task:0"):
        v = nd.Variable(np.float32(1.0), name="counter")

    @nd.function
    def bump(x):
        v.assign_add(x)
        return v * 10.0, v.read_value()  # reads after the update, in program order

    c = bump.get_concrete_function(np.float32(0))
    vop = c.graph.get_operation_by_name("counter")
    assert vop.type == "VariableV2" and vop.device == v.op.device
    assert vop.get_attr("shape") == v.op.get_attr("shape")
    assert [cv.name for cv in c.captured_variables] == ["counter"]
    assert c.captured_variables[0].device == "/job:localhost/task:0"
    with nd.Session(local_server.target) as sess:
        sess.run(v.initializer)
        assert c.run(local_server.target, 2.0) == (30.0, 3.0)
        assert c.run(local_server.target, np.float32(1.0)) == (40.0, 4.0)
        assert sess.run(v) == 4.0  # the very variable of the outer graph
        sess.run(v.assign(0.5))
        assert run_function(local_server.target, c, (1.0,)) == (15.0, 1.5)
    # The session is kept per (target, function): the graph is registered once.
    assert list(c._sessions) == [local_server.target]


def test_stateful_ops_run_even_when_not_returned(graph, local_server):
    v = nd.Variable(0, name="hits")

    @nd.function
    def touch():
        v.assign_add(1)

    c = touch.get_concrete_function()
    with nd.Session(local_server.target) as sess:
        sess.run(v.initializer)
        for _ in range(3):
            assert c.run(local_server.target) is None
        assert sess.run(v) == 3


def test_ps_variable_updated_from_two_sessions(servers):
    """A variable on a ps task, captured by a function that runs on the worker
    (through the worker's master) and on the ps (through its own master)."""
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    g = nd.Graph()
    with g.as_default(), nd.device("/job:ps/task:0"):
        w = nd.Variable(np.zeros(3, np.float32), name="w")

    @nd.function
    def step(delta):
        w.assign_add(delta * 2.0)
        return w.read_value()

    c = step.get_concrete_function(np.zeros(3, np.float32))
    assert c.captured_variables[0].device == "/job:ps/task:0"
    with nd.Session(worker.target, graph=g) as sess:
        sess.run(w.initializer)
        np.testing.assert_allclose(c.run(worker.target, np.ones(3, np.float32)),
                                   [2, 2, 2])
        np.testing.assert_allclose(c.run(ps.target, np.ones(3, np.float32)),
                                   [4, 4, 4])
        np.testing.assert_allclose(c.run(worker.target, np.ones(3, np.float32)),
                                   [6, 6, 6])
        np.testing.assert_allclose(sess.run(w), [6, 6, 6])
    assert set(c._sessions) == {worker.target, ps.target}
    ps_vars = {name for _d, _c, name, _r in ps._worker.variables()}
    worker_vars = {name for _d, _c, name, _r in worker._worker.variables()}
    assert "w" in ps_vars and "w" not in worker_vars
    c.release()
    assert not c._sessions


# -- calls inside graphs -----------------------------------------------------------
def test_call_inside_a_graph_adds_a_function_call_op(graph, local_server):
    @nd.function
    def f(x, y):
        return x * y + 1.0, {"diff": x - y}

    a = nd.placeholder(nd.float32, [2], name="a")
    out, d = f(a, nd.constant([2.0, 3.0]))
    assert _op_types(graph).count("_FunctionCall") == 1
    call = out.op
    assert call.type == "_FunctionCall" and d["diff"].op is call
    assert out.shape.as_list() == [2]
    gd = graph.as_graph_def()
    assert [fd.name for fd in gd.library.function] == [call.get_attr("f")]
    feed = {a: [1.0, 2.0]}
    with nd.Session() as sess:
        o, dd = sess.run((out, d["diff"]), feed)
    np.testing.assert_allclose(o, [3.0, 7.0])
    np.testing.assert_allclose(dd, [-1.0, -1.0])
    # Over a server the master partitions the graph: the node carries its body.
    with nd.Session(local_server.target) as sess:
        np.testing.assert_allclose(sess.run(out, feed), [3.0, 7.0])


def test_executor_finds_function_in_graph_library(graph):
    @nd.function
    def f(x):
        return x * 3

    out = f(nd.constant(np.int32(5)))
    gd = graph.as_graph_def()
    for n in gd.node:
        if n.op == "_FunctionCall":
            del n.attr["_fdef"]  # only the library is left
            fetch = gd.node.add(name="out", op="_Fetch")
            fetch.input.append(n.name)
            fetch.attr["key"].s = b"out"
    worker = Worker()
    ex = Executor(gd, worker)
    assert out.op.get_attr("f") in ex.library
    step = StepContext(1)
    ex.run(step)
    assert step.fetches["out"] == 15


def test_nested_functions_and_calls_with_variables(graph, local_server):
    v = nd.Variable(5.0, name="base")

    @nd.function
    def inner(x):
        return x + v

    @nd.function
    def outer(x):
        return inner(x) * 2.0

    c = outer.get_concrete_function(np.float32(0))
    assert "_FunctionCall" in _op_types(c.graph)
    # The call is colocated with the variable it captured.
    a = nd.placeholder(nd.float32, [])
    out = outer(a)
    with nd.Session(local_server.target) as sess:
        sess.run(v.initializer)
        assert sess.run(out, {a: 1.0}) == 12.0
        assert c.run(local_server.target, 2.0) == 14.0


def test_error_inside_function_names_function_and_keeps_class(graph):
    @nd.function
    def f(x):
        return nd.placeholder(nd.float32, [], name="never_fed") + x

    a = nd.placeholder(nd.float32, [])
    out = f(a)
    with nd.Session() as sess, pytest.raises(errors.InvalidArgumentError,
                                             match="(?s)never_fed.*in function"):
        sess.run(out, {a: 1.0})


# -- FunctionDef --------------------------------------------------------------------
def test_function_def_round_trip(graph):
    v = nd.Variable([1.0, 2.0], name="v")

    @nd.function
    def f(x, y):
        return (x + y) * v, x

    c = f.get_concrete_function(np.zeros(2, np.float32), np.zeros(2, np.float32))
    fd = c.to_function_def()
    assert list(fd.input_arg) == ["x", "y"]
    assert fd.output[1] == "x"  # an argument returned as is
    assert len(fd.output_type) == 2
    blob = fd.SerializeToString()
    fd2 = function_pb2.FunctionDef.FromString(blob)
    c2 = ConcreteFunction.from_function_def(fd2, structured_outputs=(0, 0))
    assert c2.to_function_def() == fd2
    assert [cv.name for cv in c2.captured_variables] == ["v"]
    server = nd.Server.create_local_server()
    try:
        with nd.Session(server.target) as sess:
            sess.run(v.initializer)
        got = c2.run(server.target, np.ones(2, np.float32), np.ones(2, np.float32))
        np.testing.assert_allclose(got[0], [2.0, 4.0])
        np.testing.assert_allclose(got[1], [1.0, 1.0])
    finally:
        server.stop()


def test_concrete_function_checks_non_tensor_arguments():
    @nd.function
    def f(x, k):
        return x * k

    c = f.get_concrete_function(np.float32(1), 2.0)
    assert c.run("", np.float32(3), 2.0) == 6.0
    with pytest.raises(TypeError, match="traced for another value"):
        c.run("", np.float32(3), 5.0)
    with pytest.raises(TypeError, match="do not match"):
        c.run("", np.float32(3))


def test_call_in_graph_without_tensor_arguments(graph):
    @nd.function
    def five():
        return nd.constant(5)

    t = five.call_in_graph()
    assert t.op.type == "_FunctionCall" and t.graph is graph
    with nd.Session() as sess:
        assert sess.run(t) == 5
    assert five() == 5  # no graph being built: runs now
