"""The graph layer: names, scopes, collections, GraphDef round trips and checks."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist.proto import graph_pb2


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()
    yield


def test_unique_names_and_scopes():
    a = nd.constant(1.0, name="a")
    a2 = nd.constant(1.0, name="a")
    with nd.name_scope("layer"):
        b = nd.constant(2.0, name="b")
        with nd.name_scope("inner"):
            c = nd.constant(3.0)
    assert (a.op.name, a2.op.name, b.op.name, c.op.name) == (
        "a", "a_1", "layer/b", "layer/inner/Const")


def test_device_scopes_merge_and_colocation():
    with nd.device("/job:ps"):
        with nd.device("/task:1"):
            v = nd.Variable(1.0, name="v")
        with nd.device("/job:worker/task:0"):
            w = nd.constant(0.0, name="w")
    assert v.op.device == "/job:ps/task:1"
    assert w.op.device == "/job:worker/task:0"
    assert v.initializer.get_attr("_class") == [b"loc:@v"]
    with nd.device(lambda op: "/job:worker/task:3"):
        x = nd.constant(1.0)
    assert x.op.device == "/job:worker/task:3"


def test_control_dependencies_and_collections():
    a = nd.constant(1.0)
    with nd.control_dependencies([a]):
        b = nd.constant(2.0)
        with nd.control_dependencies(None):
            c = nd.constant(3.0)
    assert b.op.control_inputs == [a.op]
    assert c.op.control_inputs == []
    v = nd.Variable(1.0, trainable=False)
    assert v in nd.global_variables() and v not in nd.trainable_variables()
    nd.add_to_collection("mine", a)
    assert nd.get_collection("mine") == [a]


def test_variable_scope_reuse():
    with nd.variable_scope("net"):
        w = nd.get_variable("w", [2, 3])
    with nd.variable_scope("net", reuse=True):
        assert nd.get_variable("w", [2, 3]) is w
    with pytest.raises(ValueError, match="already exists"):
        with nd.variable_scope("net"):
            nd.get_variable("w", [2, 3])
    with pytest.raises(ValueError, match="does not exist"):
        with nd.variable_scope("net", reuse=True):
            nd.get_variable("nope", [1])
    assert w.name == "net/w:0"


def test_graph_def_round_trip_keeps_devices_attrs_and_control_inputs():
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="v")
    with nd.control_dependencies([v.initializer]):
        nd.identity(v, name="r")
    gd = nd.get_default_graph().as_graph_def()
    g2 = nd.Graph()
    with g2.as_default():
        nd.import_graph_def(gd, name="")
    r2 = g2.get_tensor_by_name("r:0")
    assert g2.get_operation_by_name("v").device == "/job:ps/task:0"
    assert [c.name for c in r2.op.control_inputs] == ["v/Assign"]
    assert r2.shape.as_list() == [2, 3]
    assert g2.as_graph_def() == gd
    with nd.Session(graph=g2, config=nd.ConfigProto(allow_soft_placement=True)) as s:
        np.testing.assert_array_equal(s.run(r2), np.arange(6).reshape(2, 3))


def _node(gd, name, op, inputs=(), **attrs):
    from nbdist.framework.importer import python_to_attr_value

    n = gd.node.add(name=name, op=op)
    n.input.extend(inputs)
    for k, v in attrs.items():
        n.attr[k].CopyFrom(python_to_attr_value(v))
    return n


@pytest.mark.parametrize("case", ["unknown_op", "bad_attr", "dangling",
                                  "missing_attr", "bad_output_index"])
def test_bad_graph_defs_are_rejected_naming_the_node(case):
    gd = graph_pb2.GraphDef()
    _node(gd, "ok", "Const", value=np.array(1.0, np.float32), dtype=nd.float32)
    if case == "unknown_op":
        _node(gd, "culprit", "FrobnicateV9", ["ok"])
    elif case == "bad_attr":
        n = _node(gd, "culprit", "Identity", ["ok"])
        n.attr["T"].i = 7  # an int where a type is expected
    elif case == "dangling":
        _node(gd, "culprit", "Identity", ["ghost"])
    elif case == "missing_attr":
        _node(gd, "culprit", "Placeholder")
    else:
        _node(gd, "culprit", "Identity", ["ok:3"])
    with nd.Graph().as_default():
        with pytest.raises(ValueError, match="culprit"):
            nd.import_graph_def(gd, name="")
    # The same GraphDef sent straight to a master is an InvalidArgumentError.
    from nbdist.runtime.master import Master
    from nbdist.runtime.worker import Worker

    w = Worker()
    m = Master(w.task_name, w)
    with pytest.raises(nd.errors.InvalidArgumentError, match="culprit"):
        h, _ = m.create_session(gd)
        m.run_step(h, {}, [], ["culprit"])


def test_shape_mismatch_at_construction_names_the_op():
    v = nd.Variable(np.zeros((2, 3), np.float32), name="v")
    with pytest.raises(ValueError, match="assign_bad"):
        nd.assign(v._ref(), np.zeros((4,), np.float32), name="assign_bad")


def test_finalized_graph_rejects_new_ops():
    g = nd.Graph()
    with g.as_default():
        nd.constant(1)
        g.finalize()
        with pytest.raises(RuntimeError, match="finalized"):
            nd.constant(2)
