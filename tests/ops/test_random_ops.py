"""Random ops: distributions, shapes, dtypes and TF's seed rules."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd


def build_and_run(build, seed=None, runs=1):
    """Builds ``build()`` in a fresh graph (graph seed ``seed``), runs it ``runs``
    times in one new session and returns the list of values."""
    g = nd.Graph()
    with g.as_default():
        if seed is not None:
            nd.set_random_seed(seed)
        t = build()
        with nd.Session(graph=g) as s:
            return [s.run(t) for _ in range(runs)]


# -- distributions ---------------------------------------------------------------------
def test_random_normal_statistics_and_names():
    g = nd.Graph()
    with g.as_default():
        t = nd.random_normal([200, 50], mean=3.0, stddev=2.0, seed=1)
        assert t.shape.as_list() == [200, 50] and t.dtype == nd.float32
        assert t.op.name == "random_normal"
        types = {op.type for op in g.get_operations()}
        assert "RandomStandardNormal" in types
        with nd.Session(graph=g) as s:
            v = s.run(t)
    assert v.dtype == np.float32
    assert abs(v.mean() - 3.0) < 0.1 and abs(v.std() - 2.0) < 0.1


def test_random_uniform_float_and_int():
    v = build_and_run(lambda: nd.random_uniform([1000], -2.0, 5.0, seed=2))[0]
    assert v.min() >= -2.0 and v.max() < 5.0 and abs(v.mean() - 1.5) < 0.3
    ints = build_and_run(lambda: nd.random_uniform([1000], 3, 7, dtype=nd.int64,
                                                   seed=3))[0]
    assert ints.dtype == np.int64 and set(np.unique(ints)) == {3, 4, 5, 6}
    with pytest.raises(ValueError, match="maxval"):
        nd.random_uniform([2], dtype=nd.int32)


def test_random_uniform_int_empty_range_fails_at_run_time():
    g = nd.Graph()
    with g.as_default():
        hi = nd.placeholder(nd.int32, [])
        t = nd.random_uniform([3], 5, hi, dtype=nd.int32)
        with nd.Session(graph=g) as s:
            with pytest.raises(nd.errors.InvalidArgumentError, match="minval"):
                s.run(t, {hi: 5})


def test_truncated_normal():
    v = build_and_run(lambda: nd.truncated_normal([5000], mean=1.0, stddev=0.5,
                                                  dtype=nd.float64, seed=4))[0]
    assert v.dtype == np.float64
    assert v.min() >= 0.0 and v.max() <= 2.0
    assert abs(v.mean() - 1.0) < 0.05


def test_random_shuffle():
    value = np.arange(20).reshape(10, 2)
    outs = build_and_run(lambda: nd.random_shuffle(value, seed=5), runs=3)
    for out in outs:
        assert sorted(out[:, 0].tolist()) == list(range(0, 20, 2))
        np.testing.assert_array_equal(out[:, 1], out[:, 0] + 1)
    assert any(not np.array_equal(o, value) for o in outs)
    assert build_and_run(lambda: nd.random_shuffle(nd.constant(7)))[0] == 7


@pytest.mark.parametrize("dtype", [nd.float16, nd.float32, nd.float64])
def test_dtypes(dtype):
    for fn in (nd.random_normal, nd.random_uniform, nd.truncated_normal):
        v = build_and_run(lambda fn=fn: fn([3, 2], dtype=dtype))[0]
        assert v.dtype == dtype.as_numpy_dtype and v.shape == (3, 2)


def test_shape_from_tensor_and_unknown_shapes():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float32, [None, 3])
        t = nd.random_normal(nd.shape(x))
        assert t.shape.as_list() == [None, 3]
        u = nd.random_uniform(nd.TensorShape([2, 2]))
        assert u.shape.as_list() == [2, 2]
        s0 = nd.random_normal([])
        assert s0.shape.as_list() == []
        with nd.Session(graph=g) as s:
            assert s.run(t, {x: np.zeros((4, 3))}).shape == (4, 3)
            assert s.run(s0).shape == ()
    with pytest.raises(ValueError):
        nd.random_normal([2, -1])
    with pytest.raises(ValueError):
        nd.random_normal([2], dtype=nd.int32)


# -- seed rules ------------------------------------------------------------------------
def test_runs_advance_and_new_sessions_repeat():
    def build():
        return nd.random_uniform([4], seed=10)

    a = build_and_run(build, runs=2)
    b = build_and_run(build, runs=2)
    assert not np.array_equal(a[0], a[1])
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_op_seed_only_is_reproducible_across_graphs():
    a = build_and_run(lambda: nd.random_normal([5], seed=42))[0]
    b = build_and_run(lambda: (nd.constant(1.0), nd.random_normal([5], seed=42))[1])[0]
    np.testing.assert_array_equal(a, b)
    c = build_and_run(lambda: nd.random_normal([5], seed=43))[0]
    assert not np.array_equal(a, c)


def test_graph_seed_only_is_reproducible_for_the_same_graph():
    def build():
        return nd.random_normal([5]), nd.random_normal([5])

    (a1, a2), = build_and_run(build, seed=7)
    (b1, b2), = build_and_run(build, seed=7)
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    assert not np.array_equal(a1, a2)  # two ops get different op seeds
    (c1, _), = build_and_run(build, seed=8)
    assert not np.array_equal(a1, c1)


def test_graph_and_op_seed():
    a = build_and_run(lambda: nd.random_uniform([3], seed=1), seed=1)[0]
    b = build_and_run(lambda: (nd.zeros([2]), nd.random_uniform([3], seed=1))[1],
                      seed=1)[0]
    np.testing.assert_array_equal(a, b)  # independent of the ops built before
    c = build_and_run(lambda: nd.random_uniform([3], seed=1), seed=2)[0]
    assert not np.array_equal(a, c)


def test_no_seed_is_random():
    a = build_and_run(lambda: nd.random_normal([8]))[0]
    b = build_and_run(lambda: nd.random_normal([8]))[0]
    assert not np.array_equal(a, b)


def test_seed_attrs_follow_get_seed():
    g = nd.Graph()
    with g.as_default():
        t = nd.random_shuffle([1, 2], seed=5)
        assert (t.op.get_attr("seed"), t.op.get_attr("seed2")) == (87654321, 5)
        u = nd.random_shuffle([1, 2])
        assert (u.op.get_attr("seed"), u.op.get_attr("seed2")) == (0, 0)
        nd.random.set_seed(0)
        w = nd.random_shuffle([1, 2], seed=0)
        assert (w.op.get_attr("seed"), w.op.get_attr("seed2")) == (0, 2**31 - 1)
        assert g.seed == 0


def test_nd_random_module():
    g = nd.Graph()
    with g.as_default():
        nd.random.set_seed(3)
        parts = [nd.random.normal([2]), nd.random.uniform([2]),
                 nd.random.truncated_normal([2]), nd.random.shuffle([1, 2, 3])]
        with nd.Session(graph=g) as s:
            outs = s.run(parts)
    assert [o.shape for o in outs] == [(2,), (2,), (2,), (3,)]


def test_initializers_use_random_ops():
    def build():
        v = nd.get_variable("v", [3, 2], initializer=nd.random_normal_initializer(
            seed=9))
        w = nd.get_variable("w", [4], initializer=nd.random_uniform_initializer(
            -1.0, 1.0, seed=9))
        return v, w

    def values():
        g = nd.Graph()
        with g.as_default():
            v, w = build()
            with nd.Session(graph=g) as s:
                s.run(nd.global_variables_initializer())
                return s.run([v, w])

    (v1, w1), (v2, w2) = values(), values()
    np.testing.assert_array_equal(v1, v2)
    np.testing.assert_array_equal(w1, w2)
    assert v1.shape == (3, 2) and np.all(np.abs(w1) <= 1.0)
