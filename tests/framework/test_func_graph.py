"""The tracing core's public API (``FuncGraph``, ``Graph.add_function``,
``ops.thread_graphs``): what ``nd.function`` and ``Dataset.map`` build on."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest

import nbdist as nd
from nbdist.framework import ops
from nbdist.framework.constant_op import placeholder
from nbdist.framework.func_graph import FuncGraph, tracing_graph
from nbdist.framework.function_def import needed_trace, to_function_def


def _trace_double(outer_const):
    fg = FuncGraph.for_function("double")
    with fg.tracing():
        assert tracing_graph() is fg and ops.get_default_graph() is fg
        x = placeholder(nd.float32, [], name="x")
        y = x * outer_const
    fg.finish("double")
    return fg, x, y


def test_trace_copies_a_captured_constant_and_lets_go_of_the_outer_graph():
    g = nd.Graph()
    with g.as_default():
        fg, x, y = _trace_double(nd.constant(3.0, name="three"))
    assert tracing_graph() is None and fg.finalized
    assert sorted(op.type for op in fg.get_operations()) == ["Const", "Mul",
                                                              "Placeholder"]
    with nd.Session("", graph=fg) as sess:
        assert sess.run(y, {x: 2.0}) == 6.0
    ref = weakref.ref(g)
    del g
    gc.collect()
    assert ref() is None  # the finished function graph keeps no outer graph alive


def test_for_function_reads_the_default_graphs_collections_and_writes_copies(graph):
    graph.seed = 7
    v = nd.Variable(1.0, name="v")
    fg = FuncGraph.for_function("f")
    assert fg.seed == 7
    with fg.tracing():
        assert nd.global_variables() == [v]
        nd.add_to_collection("mine", 1)
    assert nd.get_collection("mine") == [] and fg.get_collection("mine") == [1]


def test_finish_rejects_a_variable_made_in_the_function(graph):
    fg = FuncGraph.for_function("maker")
    with fg.tracing():
        nd.Variable(1.0, name="made")
    with pytest.raises(ValueError, match="cannot create variables \\('made' in "
                                         "function 'maker'\\)"):
        fg.finish("maker")


def test_a_captured_variable_is_rebound_and_round_trips_a_function_def(graph):
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(np.float32(2.0), name="w")
    fg = FuncGraph.for_function("scale")
    with fg.tracing():
        x = placeholder(nd.float32, [], name="x")
        y = x * v
    fg.finish("scale")
    assert [(c.name, c.device) for c in fg.captured_variables] == [
        ("w", "/job:ps/task:0")]
    fdef = to_function_def(needed_trace(fg, [x], [y]), "scale")
    back, inputs, outputs = FuncGraph.from_function_def(fdef)
    assert back.finalized and len(inputs) == 1 and len(outputs) == 1
    assert [(c.name, c.device) for c in back.captured_variables] == [
        ("w", "/job:ps/task:0")]


def test_function_library_goes_to_the_graph_def():
    from nbdist.proto import function_pb2

    g = nd.Graph()
    g.add_function(function_pb2.FunctionDef(name="f"))
    g.add_function(function_pb2.FunctionDef(name="g"))
    g.add_function(function_pb2.FunctionDef(name="f"))  # by name: once
    assert [f.name for f in g.functions] == ["f", "g"]
    assert [f.name for f in g.as_graph_def().library.function] == ["f", "g"]


def test_thread_graphs_are_this_threads(graph):
    with nd.Graph().as_default() as inner:
        mine = ops.thread_graphs()
        other = []
        t = threading.Thread(target=lambda: other.append(ops.thread_graphs()))
        t.start()
        t.join(timeout=30)
    assert mine[:2] == [graph, inner]
    assert other == [[]]  # a new thread has made no graph yet
