"""Scans (``cumsum``, ``cumprod``, ``cumulative_logsumexp``), sorting
(``sort``, ``argsort``, ``approx_max_k``/``approx_min_k``) and the spread
reductions (``reduce_variance``, ``reduce_std``, ``reduce_euclidean_norm``):
against NumPy, with gradients against finite differences and TF's wording."""

from __future__ import annotations

import numpy as np
import pytest
from test_gradients import check_gradient
from test_math_ops import graph, run  # noqa: F401  (graph: a fresh one per test)

import nbdist as nd
from nbdist import errors

RNG = np.random.default_rng(3)
X = RNG.uniform(-1.5, 1.5, (3, 4))


def scan_by_numpy(x, axis, exclusive, reverse, ufunc, identity):
    v = np.flip(x, axis) if reverse else x
    out = ufunc.accumulate(v, axis=axis)
    if exclusive:
        pad = np.full_like(np.take(out, [0], axis=axis), identity)
        out = np.concatenate([pad, np.delete(out, -1, axis=axis)], axis=axis)
    return np.flip(out, axis) if reverse else out


SCANS = {"cumsum": (np.add, 0.0), "cumprod": (np.multiply, 1.0),
         "cumulative_logsumexp": (np.logaddexp, -np.inf)}
FLAGS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.mark.parametrize("name", sorted(SCANS))
def test_scans_match_numpy_on_every_axis_and_flag(name):
    fn = getattr(nd.math, name)
    x = nd.constant(X)
    cases = [(a, e, r) for a in (0, 1, -1) for e, r in FLAGS]
    got = run([fn(x, axis=a, exclusive=e, reverse=r) for a, e, r in cases])
    for (a, e, r), g in zip(cases, got):
        want = scan_by_numpy(X, a % 2, e, r, *SCANS[name])
        np.testing.assert_allclose(g, want, rtol=1e-12, err_msg=str((a, e, r)))


def test_scans_keep_dtype_and_shape():
    ph = nd.placeholder(nd.int32, [None, 3])
    y = nd.cumsum(ph, axis=1, exclusive=True, reverse=True)
    assert y.shape.as_list() == [None, 3] and y.dtype == nd.int32
    assert run(y, {ph: [[1, 2, 3]]}).tolist() == [[5, 3, 0]]
    assert run(nd.cumprod([2, 3, 4], exclusive=True)).tolist() == [1, 2, 6]


def test_scan_axis_errors_in_tf_wording():
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"ScanOp: Expected scan axis in the range \[-1, 1\), "
                             "but got 1"):
        run(nd.cumsum([1, 2, 3], axis=1))
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"ScanOp: axis must be a scalar, not \[1\]"):
        run(nd.cumprod([[1, 2, 3]], axis=[1]))


@pytest.mark.parametrize("name", sorted(SCANS))
@pytest.mark.parametrize("exclusive, reverse", FLAGS)
def test_scan_gradients_match_finite_differences(name, exclusive, reverse):
    fn = getattr(nd.math, name)
    x = RNG.uniform(0.5, 1.5, (2, 3)) * RNG.choice([-1, 1], (2, 3))

    def build(v):
        y = fn(v, axis=1, exclusive=exclusive, reverse=reverse)
        if exclusive and name == "cumulative_logsumexp":  # drop the -inf column
            return y[:, :-1] if reverse else y[:, 1:]
        return y

    check_gradient(build, [x], atol=1e-5)


# -- sorting -----------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_sort_and_argsort_match_numpy(axis):
    x = RNG.integers(-5, 5, (4, 6)).astype(np.float32)
    got = run([nd.sort(x, axis=axis), nd.sort(x, axis=axis, direction="DESCENDING"),
               nd.argsort(x, axis=axis, stable=True),
               nd.argsort(x, axis=axis, direction="DESCENDING")])
    np.testing.assert_array_equal(got[0], np.sort(x, axis=axis))
    np.testing.assert_array_equal(got[1], np.flip(np.sort(x, axis=axis), axis))
    np.testing.assert_array_equal(got[2], np.argsort(x, axis=axis, kind="stable"))
    # descending keeps equal values in their order too (TF: [3,1,2,1] -> [0,2,1,3])
    np.testing.assert_array_equal(got[3], np.argsort(-x, axis=axis, kind="stable"))
    assert got[2].dtype == np.int32


def test_sorting_integers_at_their_extremes():
    i32 = np.iinfo(np.int32)
    got = run([nd.sort(nd.constant([3, i32.min, i32.max, -1])),
               nd.sort(nd.constant([3, 0, 255, 7], nd.uint8),
                       direction="DESCENDING"),
               nd.argsort([3, 1, 2, 1], direction="DESCENDING")])
    assert got[0].tolist() == [i32.min, -1, 3, i32.max]
    assert got[1].tolist() == [255, 7, 3, 0] and got[1].dtype == np.uint8
    assert got[2].tolist() == [0, 2, 1, 3]


def test_sort_errors_and_static_shape():
    with pytest.raises(ValueError, match="Argument `direction` should be one of "
                                         "ASCENDING, DESCENDING. Received: "
                                         "direction=UP"):
        nd.sort([3, 1, 2], direction="UP")
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        nd.sort([3, 1, 2], axis=2)
    ph = nd.placeholder(nd.float32, [None, 5])
    assert nd.sort(ph, axis=0).shape.as_list() == [None, 5]


def test_sort_gradient_goes_back_to_each_values_place():
    check_gradient(lambda v: nd.sort(v, axis=0), [[[0.3, -1.0], [2.0, 0.5],
                                                   [-0.7, 1.5]]])
    check_gradient(lambda v: nd.sort(v, direction="DESCENDING"), [[0.3, -1.0, 2.0]])


def test_approx_top_k_is_exact():
    x = np.array([[1.0, 5.0, 3.0, 4.0], [0.0, -1.0, 2.0, 2.5]], np.float32)
    (v, i), (w, j) = run([nd.math.approx_max_k(x, 2), nd.math.approx_min_k(x, 2)])
    assert v.tolist() == [[5.0, 4.0], [2.5, 2.0]] and i.tolist() == [[1, 3], [3, 2]]
    assert w.tolist() == [[1.0, 3.0], [-1.0, 0.0]] and j.tolist() == [[0, 2], [1, 0]]
    (v0, i0) = run(nd.math.approx_max_k(x, 1, reduction_dimension=0))
    assert v0.tolist() == [[1.0, 5.0, 3.0, 4.0]] and i0.tolist() == [[0, 0, 0, 0]]


# -- spread ------------------------------------------------------------------------
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, True), ([1], False),
                                            (-1, True)])
def test_variance_std_and_norm_match_numpy(axis, keepdims):
    M = nd.math
    ax = tuple(axis) if isinstance(axis, list) else axis
    got = run([M.reduce_variance(X, axis=axis, keepdims=keepdims),
               M.reduce_std(X, axis=axis, keepdims=keepdims),
               M.reduce_euclidean_norm(X, axis=axis, keepdims=keepdims)])
    np.testing.assert_allclose(got[0], np.var(X, axis=ax, keepdims=keepdims))
    np.testing.assert_allclose(got[1], np.std(X, axis=ax, keepdims=keepdims))
    np.testing.assert_allclose(got[2], np.sqrt(np.sum(X * X, axis=ax,
                                                      keepdims=keepdims)))


def test_spread_of_integers_and_complex_as_tf():
    assert run(nd.math.reduce_euclidean_norm([3, 4])) == 5  # int32 stays int32
    with pytest.raises(TypeError, match="Input must be either real or complex. "
                                        "Received integer type <dtype: 'int32'>."):
        nd.math.reduce_std([1, 2, 4])
    c = np.array([1 + 1j, 3 - 1j])
    got = run(nd.math.reduce_variance(nd.constant(c)))
    assert got == pytest.approx(np.var(c))


@pytest.mark.parametrize("name", ["reduce_variance", "reduce_std",
                                  "reduce_euclidean_norm"])
def test_spread_gradients_match_finite_differences(name):
    fn = getattr(nd.math, name)
    check_gradient(lambda v: fn(v, axis=1), [X[:2]], atol=1e-5)
