"""nd.cond and nd.while_loop: TF1's return structures, gradients checked
against central finite differences, variables in bodies, and a loop on a
worker whose body reads a variable of a parameter server (two real servers)."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from helpers import local_cluster
from test_gradients import check_gradient

import nbdist as nd
from nbdist import errors

RNG = np.random.default_rng(7)


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


# -- cond ------------------------------------------------------------------------
def test_cond_takes_one_branch_per_fed_pred(graph):
    p = nd.placeholder(nd.bool, [])
    x = nd.constant(np.array([1.0, 2.0], np.float32))
    y = nd.cond(p, lambda: x * 3.0, lambda: nd.reduce_sum(x) + x)
    assert y.dtype == nd.float32 and y.shape.as_list() == [2]
    with nd.Session() as s:
        np.testing.assert_allclose(s.run(y, {p: True}), [3.0, 6.0])
        np.testing.assert_allclose(s.run(y, {p: False}), [4.0, 5.0])


def test_cond_structures_as_tf1(graph):
    p = nd.constant(False)
    x = nd.constant(2.0)
    pair = nd.cond(p, lambda: {"a": x, "b": (x, 1.0)},
                   lambda: {"a": x * 2.0, "b": (x + 1.0, 5.0)})
    assert sorted(pair) == ["a", "b"] and isinstance(pair["b"], tuple)
    single = nd.cond(p, lambda: [x], lambda: [x * 4.0])
    strict = nd.cond(p, lambda: [x], lambda: [x * 4.0], strict=True)
    assert isinstance(single, nd.Tensor) and isinstance(strict, list)
    got = run([pair, single, strict])
    assert got[0] == {"a": 4.0, "b": (3.0, 5.0)}
    assert got[1] == 8.0 and got[2] == [8.0]


def test_cond_runs_only_the_taken_branch_side_effects(graph):
    v = nd.Variable(0.0)
    p = nd.placeholder(nd.bool, [])
    y = nd.cond(p, lambda: v.assign_add(1.0), lambda: v.assign_add(10.0))
    op_result = nd.cond(p, lambda: v.assign_add(100.0).op, lambda: nd.no_op())
    assert op_result.dtype == nd.bool
    with nd.Session() as s:
        s.run(v.initializer)
        assert s.run(y, {p: True}) == 1.0
        assert s.run(y, {p: False}) == 11.0
        assert bool(s.run(op_result, {p: False})) is False
        assert s.run(v) == 11.0
        assert bool(s.run(op_result, {p: True})) is True
        assert s.run(v) == 111.0


def test_cond_bad_input_is_a_clear_error(graph):
    x = nd.constant(1.0)
    with pytest.raises(TypeError, match="Python bool"):
        nd.cond(True, lambda: x, lambda: x)
    with pytest.raises(TypeError, match="bool tensor"):
        nd.cond(x, lambda: x, lambda: x)
    with pytest.raises(TypeError, match="same type"):
        nd.cond(x > 0, lambda: x, lambda: nd.constant(1))
    with pytest.raises(ValueError, match="same nested structure"):
        nd.cond(x > 0, lambda: (x, x), lambda: x)


# -- while_loop ------------------------------------------------------------------
def test_while_loop_return_values_shaped_like_tf1(graph):
    one = nd.while_loop(lambda x: x < 10.0, lambda x: x * 2.0, [nd.constant(1.0)])
    assert isinstance(one, nd.Tensor)
    same = nd.while_loop(lambda x: x < 10.0, lambda x: [x * 2.0], [nd.constant(1.0)],
                         return_same_structure=True)
    assert isinstance(same, list) and len(same) == 1
    Pair = collections.namedtuple("Pair", "i acc")
    nested = nd.while_loop(
        lambda i, s: i < 4,
        lambda i, s: (i + 1, Pair(s.i * 2, {"x": s.acc["x"] + 1.0})),
        (0, Pair(nd.constant(1), {"x": nd.constant(0.5)})))
    assert isinstance(nested, tuple) and isinstance(nested[1], Pair)
    capped = nd.while_loop(lambda x: x > 0.0, lambda x: x + 1.0, [nd.constant(1.0)],
                           maximum_iterations=5)
    got = run([one, same, nested, capped])
    assert got[0] == 16.0 and got[1] == [16.0]
    assert got[2][0] == 4 and got[2][1].i == 16 and got[2][1].acc == {"x": 4.5}
    assert got[3] == 6.0


def test_while_loop_matches_numpy_with_captures_and_invariants(graph):
    a = RNG.standard_normal((3, 3)).astype(np.float32) * 0.5
    m = nd.constant(a)
    n = nd.placeholder(nd.int32, [])
    v0 = nd.constant(np.ones(3, np.float32))
    _, v = nd.while_loop(lambda i, v: i < n,
                         lambda i, v: (i + 1, nd.tanh(nd.reshape(
                             nd.matmul(m, nd.reshape(v, [3, 1])), [3]))),
                         [0, v0])
    grow = nd.while_loop(lambda t: nd.size(t) < 6, lambda t: nd.concat([t, t], 0),
                         [nd.constant([1, 2])], shape_invariants=[nd.TensorShape([None])])
    assert grow.shape.as_list() == [None]
    want = np.ones(3, np.float32)
    for _ in range(5):
        want = np.tanh(a @ want)
    got_v, got_grow = run([v, grow], {n: 5})
    np.testing.assert_allclose(got_v, want, rtol=1e-5)
    np.testing.assert_array_equal(got_grow, [1, 2] * 4)


def test_while_loop_bad_input_is_a_clear_error(graph):
    x = nd.constant(1.0)
    with pytest.raises(ValueError, match="after one iteration.*shape_invariants"):
        nd.while_loop(lambda t: nd.size(t) < 6, lambda t: nd.concat([t, t], 0),
                      [nd.constant([1, 2])])
    with pytest.raises(TypeError, match="enters the loop as float32"):
        nd.while_loop(lambda t: t < 3.0, lambda t: nd.cast(t, nd.int32), [x])
    with pytest.raises(TypeError, match="bool scalar"):
        nd.while_loop(lambda t: t, lambda t: t, [x])
    with pytest.raises(TypeError, match="list or tuple"):
        nd.while_loop(lambda t: t < 1.0, lambda t: t, x)


def test_while_loop_is_cancelled_by_the_step_deadline(graph):
    forever = nd.while_loop(lambda t: t > 0.0, lambda t: t + 1.0, [nd.constant(1.0)])
    with nd.Session() as s, pytest.raises(errors.DeadlineExceededError):
        s.run(forever, options=nd.RunOptions(timeout_in_ms=300))


def test_body_updates_and_rereads_a_variable_of_its_task(graph):
    v = nd.Variable(1.0, name="v")
    # each iteration adds v's fresh value to x, then doubles v
    x = nd.while_loop(lambda i, x: i < 4,
                      lambda i, x: (i + 1, x + v.assign(v.read_value() * 2.0)),
                      [0, nd.constant(0.0)])[1]
    with nd.Session() as s:
        s.run(v.initializer)
        assert s.run(x) == 2.0 + 4.0 + 8.0 + 16.0
        assert s.run(v) == 16.0


def test_loops_survive_a_graph_def_round_trip(graph):
    x = nd.placeholder(nd.float32, [], name="x")
    nd.while_loop(lambda t: t < 50.0, lambda t: nd.cond(t > 5.0, lambda: t * 3.0,
                                                           lambda: t + 1.0),
                  [x], name="loop")
    gd = graph.as_graph_def()
    g2 = nd.Graph()
    with g2.as_default():
        nd.import_graph_def(gd, name="")
        with nd.Session(graph=g2) as s:
            assert s.run("loop:0", {"x:0": 1.0}) == 54.0


# -- gradients (float64, central differences) -------------------------------------
def test_cond_gradients_both_branches():
    for flag in (True, False):
        check_gradient(lambda x, w, flag=flag: nd.cond(
            nd.constant(flag), lambda: nd.sin(x) * w, lambda: nd.square(x) + w),
            [RNG.standard_normal(3), RNG.standard_normal(3)])


def test_while_gradients_with_captures_and_several_loop_vars():
    def build(x, m):
        _, y, z = nd.while_loop(
            lambda i, y, z: i < 3,
            lambda i, y, z: (i + 1, nd.tanh(nd.matmul(m, y)), z + nd.reduce_sum(y)),
            [0, x, nd.constant(0.0, nd.float64)])
        return y * z

    check_gradient(build, [RNG.standard_normal((3, 2)),
                           RNG.standard_normal((3, 3)) * 0.5])


def test_gradients_of_nested_control_flow():
    def build(x, s):
        def body(i, y):
            return i + 1, nd.cond(nd.reduce_sum(y) > 0.0, lambda: y * s,
                                  lambda: nd.exp(y) - s)

        inner = nd.while_loop(lambda i, y: i < 4, body, [0, x],
                              maximum_iterations=3)[1]
        return nd.cond(s > 0.0, lambda: nd.while_loop(
            lambda y: nd.reduce_sum(nd.abs(y)) < 100.0, lambda y: y * 1.7, [inner],
            maximum_iterations=6), lambda: inner)

    check_gradient(build, [RNG.standard_normal(4) * 0.3, np.float64(1.3)])


def test_back_prop_false_stops_gradients(graph):
    x = nd.constant(2.0)
    y = nd.while_loop(lambda t: t < 10.0, lambda t: t * x, [x], back_prop=False)
    assert nd.gradients(y, [x]) == [None]


# -- across tasks: loop on a worker, variable on a parameter server ------------------
@pytest.fixture
def worker(servers):
    """The worker of an in-process cluster of one ps and one worker server."""
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    return servers(cluster, "worker", 0)


def test_loop_on_worker_reads_and_differentiates_a_ps_variable(worker, graph):
    w0 = RNG.standard_normal((3, 3)) * 0.4
    x0 = RNG.standard_normal(3)
    with nd.device("/job:ps/task:0"):
        w = nd.Variable(w0, name="w")
        b = nd.Variable(np.full(3, 0.1), name="b")
    with nd.device("/job:worker/task:0"):
        x = nd.placeholder(nd.float64, [3], name="x")
        _, y = nd.while_loop(
            lambda i, y: i < 4,
            lambda i, y: (i + 1, nd.tanh(nd.reshape(
                nd.matmul(w, nd.reshape(y, [3, 1])), [3]) + b.read_value())),
            [0, x])
        loss = nd.reduce_sum(y * y)
        gw, gb = nd.gradients(loss, [w, b])

    def forward(wv, bv):
        y = x0
        for _ in range(4):
            y = np.tanh(wv @ y + bv)
        return np.sum(y * y)

    md = nd.RunMetadata()
    with nd.Session(worker.target) as s:
        s.run(nd.global_variables_initializer())
        got_y, got_gw, got_gb = s.run(
            [y, gw, gb], {x: x0},
            options=nd.RunOptions(output_partition_graphs=True), run_metadata=md)
    want = x0
    for _ in range(4):
        want = np.tanh(w0 @ want + 0.1)
    np.testing.assert_allclose(got_y, want, rtol=1e-10)
    eps = 1e-6
    num_gw = np.zeros_like(w0)
    for idx in np.ndindex(*w0.shape):
        d = np.zeros_like(w0)
        d[idx] = eps
        num_gw[idx] = (forward(w0 + d, 0.1) - forward(w0 - d, 0.1)) / (2 * eps)
    num_gb = np.array([(forward(w0, 0.1 + e) - forward(w0, 0.1 - e)) / (2 * eps)
                       for e in np.eye(3) * eps])
    np.testing.assert_allclose(got_gw, num_gw, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(got_gb, num_gb, rtol=1e-5, atol=1e-8)
    placed = {n.name: n.device for g in md.partition_graphs for n in g.node}
    assert "/job:worker/" in placed["while"] and "/job:ps/" in placed["w"]


def test_body_updating_a_variable_of_another_task_names_both(worker, graph):
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(0.0, name="counter")
    with nd.device("/job:worker/task:0"):
        y = nd.while_loop(lambda t: t < 3.0, lambda t: t + v.assign_add(1.0),
                          [nd.constant(0.0)])
    with nd.Session(worker.target) as s:
        s.run(v.initializer)
        with pytest.raises(errors.InvalidArgumentError,
                           match="counter.*job:ps.*runs on one task"):
            s.run(y)
