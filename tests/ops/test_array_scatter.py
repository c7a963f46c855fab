"""gather_nd, scatter_nd, the tensor_scatter_* ops and the variable scatter ops
(scatter_nd_update..., scatter_mul/div/max/min, batch_scatter_update): values
against NumPy, gradients against finite differences, static shapes, and TF's
error wording for bad indices."""

from __future__ import annotations

import numpy as np
import pytest
from op_checks import dynamic, run
from test_gradients import check_gradient

import nbdist as nd

P = np.arange(24, dtype=np.float64).reshape(2, 3, 4)


pytestmark = pytest.mark.usefixtures("graph")


@pytest.mark.parametrize("indices", [
    [[1, 2, 3], [0, 0, 1]],          # whole index: scalars
    [[[1, 2]], [[0, 1]]],            # partial index: rows, extra leading dim
    [[1], [0], [1]],                 # first dimension only
])
def test_gather_nd_matches_numpy_and_infers_shape(indices):
    idx = np.array(indices)
    out = nd.gather_nd(P, idx)
    want = np.stack([P[tuple(i)] for i in idx.reshape(-1, idx.shape[-1])])
    want = want.reshape(idx.shape[:-1] + P.shape[idx.shape[-1]:])
    assert out.shape.as_list() == list(want.shape)
    np.testing.assert_array_equal(run(out), want)


def test_gather_nd_batch_dims_and_batch_gather():
    got = run(nd.gather_nd(P, [[1], [2]], batch_dims=1))
    np.testing.assert_array_equal(got, np.stack([P[0, 1], P[1, 2]]))
    got = run(nd.batch_gather(P[:, 0], [[3, 0], [1, 1]]))
    np.testing.assert_array_equal(got, [[3, 0], [13, 13]])


def test_gather_nd_errors_use_tf_wording():
    bad = dynamic([[0], [5]])
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"indices\[1\] = \[5\] does not index into param "
                             r"shape \[3\]"):
        run(nd.gather_nd([1.0, 2.0, 3.0], bad))
    with pytest.raises(ValueError, match=r"indices.shape\[-1\] must be <= "
                                         r"params.rank, but saw indices shape: "
                                         r"\[1,4\] and params shape: \[2,3\]"):
        nd.gather_nd(np.ones((2, 3)), [[0, 1, 2, 3]])


def test_scatter_nd_sums_repeats_and_checks_shapes():
    out = nd.scatter_nd([[1, 0], [0, 2], [1, 0]], [1.0, 2.0, 3.0], [2, 3])
    assert out.shape.as_list() == [2, 3]
    np.testing.assert_array_equal(run(out), [[0, 0, 2], [4, 0, 0]])
    with pytest.raises(ValueError, match=r"Dimensions \[0,1\) of indices\[shape="
                                         r"\[2,1\]\] = \[2\] must match"):
        nd.scatter_nd([[0], [1]], [1.0, 2.0, 3.0], [3])
    bad = dynamic([[0], [5]])
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"indices\[1\] = \[5\] does not index into shape "
                             r"\[3\]"):
        run(nd.scatter_nd(bad, [1.0, 2.0], [3]))


@pytest.mark.parametrize("fn,ufunc", [
    (nd.tensor_scatter_nd_update, None),
    (nd.tensor_scatter_nd_add, np.add),
    (nd.tensor_scatter_nd_sub, np.subtract),
    (nd.tensor_scatter_nd_max, np.maximum),
    (nd.tensor_scatter_nd_min, np.minimum),
])
def test_tensor_scatter_ops_match_numpy(fn, ufunc):
    t = np.arange(12.0).reshape(3, 4)
    idx = np.array([[2], [0]])
    upd = np.array([[5.0, -1, 20, 3], [0, 9, 1, 1]])
    want = t.copy()
    if ufunc is None:
        want[[2, 0]] = upd
    else:
        ufunc.at(want, [2, 0], upd)
    out = fn(t, idx, upd)
    assert out.shape.as_list() == [3, 4]
    np.testing.assert_array_equal(run(out), want)


def test_tensor_scatter_aliases():
    assert nd.tensor_scatter_update is nd.tensor_scatter_nd_update
    assert nd.tensor_scatter_add is nd.tensor_scatter_nd_add
    assert nd.tensor_scatter_sub is nd.tensor_scatter_nd_sub


@pytest.mark.parametrize("build,shapes", [
    (lambda p: nd.gather_nd(p, [[1, 0], [0, 2], [1, 0]]), [(2, 3)]),
    (lambda u: nd.scatter_nd([[1], [0], [1]], u, [3, 2]), [(3, 2)]),
    (lambda t, u: nd.tensor_scatter_nd_update(t, [[2], [0]], u), [(3, 2), (2, 2)]),
    (lambda t, u: nd.tensor_scatter_nd_add(t, [[2], [0]], u), [(3, 2), (2, 2)]),
    (lambda t, u: nd.tensor_scatter_nd_sub(t, [[2], [0]], u), [(3, 2), (2, 2)]),
    (lambda t, u: nd.tensor_scatter_nd_max(t, [[2], [0]], u), [(3, 2), (2, 2)]),
], ids=["gather_nd", "scatter_nd", "update", "add", "sub", "max"])
def test_gradients_match_finite_differences(build, shapes):
    rng = np.random.default_rng(1)
    check_gradient(build, [rng.standard_normal(s) for s in shapes])


def test_variable_nd_scatters_update_the_variable():
    v = nd.Variable(np.arange(6.0).reshape(2, 3))
    ops = [nd.scatter_nd_update(v, [[0, 1]], [10.0]),
           nd.scatter_nd_add(v, [[1], [1]], [[1.0, 1, 1], [2, 2, 2]]),
           nd.scatter_nd_sub(v, [[0, 0]], [5.0])]
    with nd.Session() as s:
        s.run(v.initializer)
        for op in ops:
            s.run(op)
        np.testing.assert_array_equal(s.run(v), [[-5, 10, 2], [6, 7, 8]])


@pytest.mark.parametrize("fn,ufunc", [
    (nd.scatter_mul, np.multiply), (nd.scatter_div, np.divide),
    (nd.scatter_max, np.maximum), (nd.scatter_min, np.minimum),
])
def test_variable_row_scatters_match_numpy(fn, ufunc):
    init = np.array([[1.0, 8], [3, -4], [5, 6]])
    upd = np.array([[2.0, 2], [4, -1], [0.5, 3]])
    want = init.copy()
    ufunc.at(want, [2, 0, 2], upd)
    v = nd.Variable(init)
    with nd.Session() as s:
        s.run(v.initializer)
        np.testing.assert_allclose(s.run(fn(v, [2, 0, 2], upd)), want)


def test_row_scatter_rejects_out_of_range_index():
    v = nd.Variable([1.0, 2.0])
    with nd.Session() as s:
        s.run(v.initializer)
        with pytest.raises(nd.errors.InvalidArgumentError,
                           match=r"indices\[1\] = 7 is not in \[0, 2\)"):
            s.run(nd.scatter_mul(v, [0, 7], [2.0, 2.0]))


def test_batch_scatter_update():
    v = nd.Variable([[1, 2, 3], [4, 5, 6]])
    with nd.Session() as s:
        s.run(v.initializer)
        got = s.run(nd.batch_scatter_update(v, [[2], [0]], [[9], [8]]))
        np.testing.assert_array_equal(got, [[1, 2, 9], [8, 5, 6]])
