"""The seams of ``distribute/``: control flow and ``nd.function`` flatten and
pack nested structures with one ``nest`` (TF's rules: mappings by sorted key,
packed back in their own key order; namedtuples kept) and build their bodies
through one tracer core; the ``ClusterCoordinator``'s fencing is part of the
pure ``CoordinatorState`` and reads a session's handle through a declared
accessor."""

from __future__ import annotations

import collections
import collections.abc

import numpy as np
import pytest

import nbdist as nd

Point = collections.namedtuple("Point", ["y", "x"])


class Frozen(collections.abc.Mapping):
    """A mapping that is not a dict (TF's nest packs any Mapping)."""

    def __init__(self, *args, **kwargs):
        self._d = dict(*args, **kwargs)

    def __getitem__(self, key):
        return self._d[key]

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)


def structure(a, b, c):
    # Keys out of sorted order, so flattening (sorted) and packing (own order)
    # differ if either is done wrongly.
    return {"zeta": Point(y=a, x=b),
            "alpha": collections.OrderedDict([("q", c), ("p", [a, c])]),
            "mid": Frozen(n=b, m=(c,))}


def check(result, a, b, c):
    """``result`` (NumPy values) is ``structure(a, b, c)`` with types and key
    orders intact."""
    assert list(result) == ["zeta", "alpha", "mid"]
    assert type(result["zeta"]) is Point and result["zeta"]._fields == ("y", "x")
    assert type(result["alpha"]) is collections.OrderedDict
    assert list(result["alpha"]) == ["q", "p"]
    assert type(result["mid"]) is Frozen and list(result["mid"]) == ["n", "m"]
    assert isinstance(result["alpha"]["p"], list)
    assert isinstance(result["mid"]["m"], tuple)
    np.testing.assert_allclose(result["zeta"].y, a)
    np.testing.assert_allclose(result["zeta"].x, b)
    np.testing.assert_allclose(result["alpha"]["q"], c)
    np.testing.assert_allclose(result["alpha"]["p"][0], a)
    np.testing.assert_allclose(result["alpha"]["p"][1], c)
    np.testing.assert_allclose(result["mid"]["n"], b)
    np.testing.assert_allclose(result["mid"]["m"][0], c)


# -- one nest --------------------------------------------------------------------------
def test_nest_follows_tf_ordering_rules():
    from nbdist.framework import nest

    s = structure(1, 2, 3)
    # Mappings by sorted key, all the way down: alpha(p[a, c], q), mid(m(c), n),
    # zeta(y, x) in field order.
    assert nest.flatten(s) == [1, 3, 3, 3, 2, 1, 2]
    packed = nest.pack_sequence_as(s, list(range(7)))
    assert list(packed) == ["zeta", "alpha", "mid"]
    assert packed["zeta"] == Point(y=5, x=6)
    assert list(packed["alpha"].items()) == [("q", 2), ("p", [0, 1])]
    assert dict(packed["mid"]) == {"n": 4, "m": (3,)}
    with pytest.raises(ValueError, match="2 leaves"):
        nest.pack_sequence_as((0, 0), [1])
    with pytest.raises(ValueError, match="2 leaves"):
        nest.pack_sequence_as((0, 0), [1, 2, 3])
    nest.assert_same_structure((1, [2]), [3, (4,)], check_types=False)
    with pytest.raises(TypeError):
        nest.assert_same_structure((1, 2), [1, 2])
    with pytest.raises(ValueError):
        nest.assert_same_structure((1, 2), (1, (2, 3)))


def test_control_flow_function_and_tf_alias_share_one_nest():
    from nbdist.distribute.tracing import function
    from nbdist.ops import (
        control_flow_v2,
        control_flow_case,
        custom_gradient,
    )
    from nbdist.framework import nest
    from nbdist.python.util import nest as tf_nest

    for module in (control_flow_v2, control_flow_case, custom_gradient, function):
        assert module.flatten is nest.flatten, module.__name__
        assert module.pack_sequence_as is nest.pack_sequence_as, module.__name__
    assert tf_nest.flatten is nest.flatten
    assert tf_nest.map_structure is nest.map_structure


def test_cond_and_function_return_the_same_structures(graph):
    a = nd.constant(np.float32(1.5))
    b = nd.constant(np.array([2.0, 3.0], np.float32))
    c = nd.constant(np.int32(7))
    p = nd.placeholder(nd.bool, [])
    from_cond = nd.cond(p, lambda: structure(a * 2.0, b + 1.0, c * 2),
                        lambda: structure(a, b, c), strict=True)

    @nd.function
    def f(a, b, c):
        return structure(a * 2.0, b + 1.0, c * 2)

    from_function = f(a, b, c)
    with nd.Session() as sess:
        check(sess.run(from_cond, {p: True}), 3.0, [3.0, 4.0], 14)
        check(sess.run(from_cond, {p: False}), 1.5, [2.0, 3.0], 7)
        check(sess.run(from_function), 3.0, [3.0, 4.0], 14)
    # Called eagerly, the function packs NumPy values in the same structure.
    check(f(np.float32(1.5), np.array([2.0, 3.0], np.float32), np.int32(7)),
          3.0, [3.0, 4.0], 14)


def test_while_loop_over_a_mapping_and_namedtuple(graph):
    start = {"zeta": Point(y=nd.constant(0), x=nd.constant(1.0)),
             "alpha": Frozen(k=nd.constant(0.5))}

    def body(v):
        return [{"zeta": Point(y=v["zeta"].y + 1, x=v["zeta"].x * 2.0),
                 "alpha": Frozen(k=v["alpha"]["k"] + v["zeta"].x)}]

    out = nd.while_loop(lambda v: v["zeta"].y < 3, body, [start])
    (res,) = out if isinstance(out, list) else (out,)
    assert type(res["zeta"]) is Point and type(res["alpha"]) is Frozen
    with nd.Session() as sess:
        got = sess.run(res)
    # Oracle: the same loop in Python.
    y, x, k = 0, 1.0, 0.5
    while y < 3:
        y, x, k = y + 1, x * 2.0, k + x
    assert got["zeta"] == Point(y=y, x=x) and dict(got["alpha"]) == {"k": k}


# -- one tracer ------------------------------------------------------------------------
def test_function_and_loop_bodies_are_one_function_def_form(graph):
    """A loop body traced by control flow runs as an ``nd.function``, and both
    name their outputs as the tracer's ``to_function_def`` does."""
    from nbdist.distribute.tracing.function import ConcreteFunction
    i = nd.constant(0)
    acc = nd.constant(np.float32(1.0))
    _, out = nd.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 3.0),
                           [i, acc])
    (loop,) = [op for op in graph.get_operations() if op.type == "While"]
    from nbdist.proto import function_pb2

    body = function_pb2.FunctionDef.FromString(loop.get_attr("_body_fdef"))
    step = ConcreteFunction.from_function_def(body)
    np.testing.assert_allclose(step.run("", np.int32(0), np.float32(2.0)), [1, 6.0])

    @nd.function
    def pair(x):
        return nd.split(x, 2)

    fd = pair.get_concrete_function(np.zeros(4, np.float32)).to_function_def()
    assert [s.split(":")[-1] for s in fd.output][1:] == ["1"]
    assert ":" not in fd.output[0]  # output 0 as "op", as in control flow's bodies
    assert ":" not in body.output[0]


def test_cond_traced_inside_a_function_lands_in_its_graph(graph):
    from nbdist.framework.func_graph import FuncGraph, tracing_graph

    seen = []

    @nd.function
    def f(x):
        seen.append(tracing_graph())
        return nd.cond(x > 0.0, lambda: x * 2.0, lambda: -x)

    c = f.get_concrete_function(np.float32(1.0))
    assert isinstance(seen[0], FuncGraph) and seen[0] is c.graph
    assert [op.type for op in c.graph.get_operations()].count("If") == 1
    assert float(f(np.float32(3.0))) == 6.0 and float(f(np.float32(-2.0))) == 2.0


# -- fencing in the pure state ---------------------------------------------------------
def test_fencing_is_state_of_coordinator_state():
    from nbdist.distribute.coordinator import coordinator_state as cs

    s = cs.CoordinatorState(num_workers=2)
    (d,) = s.handle(cs.Schedule(cs.Closure(1)))
    assert type(d) is cs.Dispatch and d.worker == 0 and d.epoch == 0
    s1, s2, s3 = object(), object(), object()

    # A session new to the epoch is opened first (its handle must exist), then
    # admitted; once open it is admitted at once.
    assert s.handle(cs.Admit(0, 0, s1)) == [cs.OpenSession(0, 0, s1)]
    assert s.handle(cs.SessionOpened(0, 0, s1)) == [cs.Admitted(True)]
    assert s.handle(cs.Admit(0, 0, s1)) == [cs.Admitted(True)]

    # A fence takes the worker's sessions, advances its epoch, and holds every
    # step until it is lifted.
    assert s.handle(cs.Fence(0)) == [cs.FenceSessions(0, [s1])]
    assert s.handle(cs.Admit(0, 0, s2)) == [cs.Admitted(False)]  # stale dispatch
    assert s.handle(cs.Admit(0, 1, s2)) == [cs.Admitted(False)]  # fence held
    assert s.handle(cs.FenceLifted(0)) == []
    assert s.handle(cs.ReleaseFenced(0)) == [cs.CloseSessions(0, [s1])]
    assert s.handle(cs.ReleaseFenced(0)) == []

    # Fenced while its session was being opened: refused, and closed later.
    assert s.handle(cs.Admit(0, 1, s2)) == [cs.OpenSession(0, 1, s2)]
    s.handle(cs.Fence(0))
    s.handle(cs.FenceLifted(0))
    assert s.handle(cs.SessionOpened(0, 1, s2)) == [cs.Admitted(False)]
    assert s.handle(cs.ReleaseFenced(0)) == [cs.CloseSessions(0, [s2])]

    # The other worker's epoch is its own; a later dispatch carries the new one.
    assert s.handle(cs.Admit(1, 0, s3)) == [cs.OpenSession(1, 0, s3)]
    s.handle(cs.ClosureDone(1, 0, 42))
    s.handle(cs.WorkerReady(0))
    dispatched = s.handle(cs.Schedule(cs.Closure(2))) + s.handle(
        cs.Schedule(cs.Closure(3)))
    assert sorted((d.worker, d.epoch) for d in dispatched) == [(0, 2), (1, 0)]
    with pytest.raises(ValueError, match="not being fenced"):
        s.handle(cs.FenceLifted(0))


def test_state_says_which_worker_to_fence():
    from nbdist.distribute.coordinator import coordinator_state as cs

    s = cs.CoordinatorState(num_workers=2)
    s.handle(cs.WorkerRecovered(1, incarnation=5))
    assert s.must_fence(cs.WorkerFailed(0, "stopped")) == 0
    assert s.must_fence(cs.WorkerRecovered(1, incarnation=5)) is None
    assert s.must_fence(cs.WorkerRecovered(1, incarnation=6)) == 1  # restarted
    assert s.must_fence(cs.Join()) is None
    s.handle(cs.WorkerFailed(0, "stopped"))
    assert s.must_fence(cs.WorkerFailed(0, "again")) is None  # already failed


def test_session_handle_is_declared(graph):
    x = nd.constant(1.0)
    with nd.Session() as sess:
        assert sess.session_handle is None  # the master creates it on first run
        sess.run(x)
        handle = sess.session_handle
        assert isinstance(handle, str) and handle
        sess.run(x)
        assert sess.session_handle == handle
