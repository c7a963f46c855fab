"""``nd.Assert`` and the ``assert_*`` checks of ``nd.debugging`` / TF1's top
level (static failures at build time where TF decides statically, else an
op failing the step with InvalidArgumentError holding the data), and
``nd.custom_gradient`` (with and without variables) checked against
central finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from test_gradients import check_gradient

import nbdist as nd
from nbdist import errors


# -- Assert ----------------------------------------------------------------------------
def test_assert_message_holds_the_data_and_guards_by_control_dependency(graph):
    x = nd.placeholder(nd.int32, [None])
    check = nd.Assert(nd.reduce_all(x > 0), ["x must be positive:", x], summarize=2)
    with nd.control_dependencies([check]):
        y = x * 2
    with nd.Session() as s:
        assert s.run(y, {x: [1, 2]}).tolist() == [2, 4]
        with pytest.raises(errors.InvalidArgumentError) as info:
            s.run(y, {x: [3, -1, 5]})
    msg = info.value.message
    assert msg.startswith("assertion failed: [x must be positive:] [3 -1...]")


def test_assert_inside_cond_runs_only_in_its_branch(graph):
    p = nd.placeholder(nd.bool, [])

    def guarded():
        with nd.control_dependencies([nd.Assert(nd.constant(False), ["never"])]):
            return nd.constant(1)

    y = nd.cond(p, guarded, lambda: nd.constant(2))
    with nd.Session() as s:
        assert s.run(y, {p: False}) == 2
        with pytest.raises(errors.InvalidArgumentError, match="never"):
            s.run(y, {p: True})


# -- the checks ------------------------------------------------------------------------
@pytest.mark.parametrize("check, good, bad", [
    ("assert_equal", ([1, 2], [1, 2]), ([1, 2], [1, 3])),
    ("assert_none_equal", ([1, 2], [3, 4]), ([1, 2], [3, 2])),
    ("assert_less", ([1, 2], [2, 3]), ([1, 2], [2, 2])),
    ("assert_less_equal", ([1, 2], [1, 3]), ([1, 4], [2, 3])),
    ("assert_greater", ([2, 3], [1, 2]), ([2, 3], [2, 2])),
    ("assert_greater_equal", ([2, 3], [2, 2]), ([1, 3], [2, 2])),
])
def test_binary_checks_dynamic_and_static(graph, check, good, bad):
    check = getattr(nd, check)
    x = nd.placeholder(nd.int32, [2])
    y = nd.placeholder(nd.int32, [2])
    op = check(x, y, message="custom words")
    with nd.Session() as s:
        s.run(op, {x: good[0], y: good[1]})
        with pytest.raises(errors.InvalidArgumentError, match="custom words"):
            s.run(op, {x: bad[0], y: bad[1]})
    # Known constants are checked now, as TF does.
    check(nd.constant(good[0]), nd.constant(good[1]))
    with pytest.raises(errors.InvalidArgumentError):
        check(nd.constant(bad[0]), nd.constant(bad[1]))


@pytest.mark.parametrize("check, good, bad", [
    ("assert_positive", [1.0, 2.0], [1.0, 0.0]),
    ("assert_negative", [-1.0], [-1.0, 0.0]),
    ("assert_non_negative", [0.0, 2.0], [-1.0]),
    ("assert_non_positive", [0.0, -2.0], [1.0]),
])
def test_sign_checks(graph, check, good, bad):
    check = getattr(nd.debugging, check)
    x = nd.placeholder(nd.float32, [None])
    op = check(x)
    with nd.Session() as s:
        s.run(op, {x: good})
        with pytest.raises(errors.InvalidArgumentError, match="x \\(name = "):
            s.run(op, {x: bad})


def test_assert_near_uses_rtol_and_atol(graph):
    x = nd.placeholder(nd.float64, [2])
    op = nd.debugging.assert_near(x, nd.constant([1.0, 100.0], nd.float64),
                                  rtol=0.01, atol=0.1)
    with nd.Session() as s:
        s.run(op, {x: [1.05, 100.9]})  # |d| <= 0.1 + 0.01 |y|
        with pytest.raises(errors.InvalidArgumentError, match="not equal to "
                                                              "tolerance"):
            s.run(op, {x: [1.2, 100.0]})


def test_rank_and_type_checks(graph):
    known = nd.constant([[1.0]])
    assert nd.assert_rank(known, 2).type == "NoOp"
    with pytest.raises(ValueError, match="must have rank 1"):
        nd.assert_rank(known, 1)
    with pytest.raises(ValueError, match="must have rank at least 3"):
        nd.debugging.assert_rank_at_least(known, 3)
    nd.debugging.assert_rank_in(known, [1, 2])
    with pytest.raises(TypeError, match="must be of type int32"):
        nd.assert_type(known, nd.int32)
    assert nd.assert_type(known, nd.float32).type == "NoOp"
    with pytest.raises(TypeError, match="integer"):
        nd.assert_integer(known)
    with pytest.raises(ValueError, match="scalar"):
        nd.assert_scalar(known)
    x = nd.placeholder(nd.float32)
    op = nd.assert_rank(x, 2)
    with nd.Session() as s:
        s.run(op, {x: np.zeros((2, 3))})
        with pytest.raises(errors.InvalidArgumentError, match="must have rank 2"):
            s.run(op, {x: np.zeros(3)})


def test_compat_v1_top_level_names(graph):
    v1 = nd.compat.v1
    assert v1.assert_equal is nd.debugging.assert_equal is nd.assert_equal
    assert v1.Assert is nd.Assert and v1.case is nd.case
    assert v1.TensorArray is nd.TensorArray and v1.custom_gradient is \
        nd.custom_gradient


# -- custom_gradient -------------------------------------------------------------------
def _log1pexp(x):
    """log(1 + e^x) with a gradient that stays finite for large x."""

    @nd.custom_gradient
    def f(x):
        e = nd.exp(x)

        def grad(dy):
            return dy * (1.0 - 1.0 / (1.0 + e))

        return nd.log(1.0 + e), grad

    return f(x)


def test_custom_gradient_replaces_the_gradient(graph):
    x = nd.constant([0.0, 1.0, 100.0], nd.float64)
    (g,) = nd.gradients(_log1pexp(x), [x])
    with nd.Session() as s:
        got = s.run(g)
    # The naive gradient of log(1 + e^x) is NaN at x = 100; grad_fn's is stable.
    np.testing.assert_allclose(got, 1.0 / (1.0 + np.exp(-np.array([0.0, 1.0, 100.0]))))


def test_custom_gradient_matches_finite_differences():
    check_gradient(lambda x: _log1pexp(x * 2.0) * x,
                   [np.array([0.3, -1.1, 2.0])])

    @nd.custom_gradient
    def two_in_two_out(a, b):
        def grad(da, db):
            return da * b + db, da * a + db * 2.0

        return (a * b, a + 2.0 * b), grad

    def build(a, b):
        p, q = two_in_two_out(a, b)
        return p * 3.0 + nd.sin(q)

    check_gradient(build, [np.array([0.5, -1.0]), np.array([2.0, 0.25])])


def test_custom_gradient_with_variables(graph):
    w = nd.Variable(np.array([2.0, 3.0]), name="w")

    @nd.custom_gradient
    def scale(x):
        def grad(dy, variables=None):
            assert [v.op.name for v in variables] == ["w"]
            return dy * w, [dy * x]

        return x * w, grad

    x = nd.placeholder(nd.float64, [2])
    y = nd.reduce_sum(nd.sin(scale(x)))
    gx, gw = nd.gradients(y, [x, w])
    xv = np.array([0.4, -1.5])
    with nd.Session() as s:
        s.run(w.initializer)
        got = s.run([gx, gw], {x: xv})
    wv = np.array([2.0, 3.0])
    np.testing.assert_allclose(got[0], np.cos(xv * wv) * wv)
    np.testing.assert_allclose(got[1], np.cos(xv * wv) * xv)

    @nd.custom_gradient
    def forgets_variables(x):
        return x * w, lambda dy: dy

    with pytest.raises(TypeError, match="must accept keyword argument 'variables'"):
        forgets_variables(x)


def test_assert_all_finite_passes_the_tensor_through(graph):
    x = nd.placeholder(nd.float32, [2])
    y = nd.debugging.assert_all_finite(x * 2.0, "bad x")
    z = nd.verify_tensor_all_finite(x, "bad input")
    with nd.Session() as s:
        assert s.run(y, {x: [1.0, 2.0]}).tolist() == [2.0, 4.0]
        with pytest.raises(errors.InvalidArgumentError, match="bad x"):
            s.run(y, {x: [1.0, np.inf]})
        with pytest.raises(errors.InvalidArgumentError, match="bad input"):
            s.run(z, {x: [np.nan, 0.0]})
