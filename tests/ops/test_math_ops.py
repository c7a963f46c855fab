"""Math ops: wrappers, static shape inference and NumPy kernels, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nbdist as nd
from nbdist import errors


@pytest.fixture(autouse=True)
def graph():
    g = nd.Graph()
    with g.as_default():
        yield g


def run(fetches, feed_dict=None):
    with nd.Session() as sess:
        return sess.run(fetches, feed_dict)


def check(got, want, exact=False):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if exact or want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        tol = 1e-3 if want.dtype == np.float16 else 1e-6
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


RNG = np.random.default_rng(0)


def sample(shape, dtype, low=-5, high=5, nonzero=False):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return RNG.random(shape) > 0.5
    if dtype.kind in "iu":
        low = max(low, 0) if dtype.kind == "u" else low
        v = RNG.integers(low, high, size=shape).astype(dtype)
        if nonzero:
            v[v == 0] = 1
        return v
    v = RNG.uniform(low, high, size=shape).astype(dtype)
    if nonzero:
        v[np.abs(v) < 0.1] = 1.0
    return v


SHAPE_PAIRS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 4)), ((), (3,)),
               ((4, 1, 3), (2, 1))]


# -- binary element-wise ops -----------------------------------------------------------
BINARY = [
    (nd.add, np.add, "Add", ["float32", "float64", "int32", "int64", "float16"]),
    (nd.subtract, np.subtract, "Sub", ["float32", "int32", "int64", "int8"]),
    (nd.multiply, np.multiply, "Mul", ["float32", "float64", "int32", "uint8"]),
    (nd.maximum, np.maximum, "Maximum", ["float32", "int32", "int64"]),
    (nd.minimum, np.minimum, "Minimum", ["float64", "int32"]),
    (nd.squared_difference, lambda x, y: np.square(x - y), "SquaredDifference",
     ["float32", "int32"]),
    (nd.floordiv, np.floor_divide, "FloorDiv", ["float32", "int32", "int64"]),
    (nd.floormod, np.mod, "FloorMod", ["float32", "float64", "int32", "int64"]),
    (nd.realdiv, np.true_divide, "RealDiv", ["float32", "float64"]),
]


@pytest.mark.parametrize("wrapper,ref,op_type,dts", BINARY,
                         ids=[b[2] for b in BINARY])
@pytest.mark.parametrize("shapes", SHAPE_PAIRS)
def test_binary_ops_match_numpy(wrapper, ref, op_type, dts, shapes):
    for dt in dts:
        a = sample(shapes[0], dt)
        b = sample(shapes[1], dt, nonzero=op_type in ("FloorDiv", "FloorMod",
                                                      "RealDiv"))
        t = wrapper(nd.constant(a), nd.constant(b))
        assert t.op.type == op_type
        assert t.dtype == nd.as_dtype(dt)
        assert t.shape.as_list() == list(np.broadcast_shapes(a.shape, b.shape))
        check(run(t), ref(a, b))


def test_pow_matches_numpy():
    a = sample((3, 4), np.float32, 0.1, 3)
    b = sample((4,), np.float32, -2, 2)
    check(run(nd.pow(a, b)), np.power(a, b))
    ai = np.array([[2, -3], [4, 0]], np.int32)
    bi = np.array([3, 2], np.int32)
    check(run(nd.pow(ai, bi)), np.power(ai, bi))
    with pytest.raises(errors.InvalidArgumentError, match="negative"):
        run(nd.pow(ai, np.array([-1, 2], np.int32)))


@pytest.mark.parametrize("wrapper,ref", [
    (nd.equal, np.equal), (nd.not_equal, np.not_equal), (nd.less, np.less),
    (nd.less_equal, np.less_equal), (nd.greater, np.greater),
    (nd.greater_equal, np.greater_equal)])
@pytest.mark.parametrize("dt", ["float32", "int32", "int64"])
def test_comparisons(wrapper, ref, dt):
    a = sample((3, 4), dt, -2, 2)
    b = sample((4,), dt, -2, 2)
    t = wrapper(a, nd.constant(b))
    assert t.dtype == nd.bool and t.shape.as_list() == [3, 4]
    check(run(t), ref(a, b))


def test_equal_on_strings_and_bools():
    s = nd.constant([b"a", b"b", b"c"])
    check(run(nd.equal(s, b"b")), np.array([False, True, False]))
    check(run(nd.not_equal(nd.constant([True, False]), True)),
          np.array([False, True]))


def test_string_add_concatenates():
    assert run(nd.add(nd.constant("ab"), "cd")) == b"abcd"
    got = run(nd.constant(["a", "b"]) + nd.constant("!"))
    assert got.tolist() == [b"a!", b"b!"]


def test_logical_ops():
    a = np.array([[True, False], [True, True]])
    b = np.array([True, False])
    check(run(nd.logical_and(a, b)), np.logical_and(a, b))
    check(run(nd.logical_or(a, b)), np.logical_or(a, b))
    check(run(nd.logical_xor(a, b)), np.logical_xor(a, b))
    check(run(nd.logical_not(a)), np.logical_not(a))
    ta, tb = nd.constant(a), nd.constant(b)
    check(run(ta & tb), a & b)
    check(run(ta | tb), a | b)
    check(run(ta ^ tb), a ^ b)
    check(run(~ta), ~a)
    with pytest.raises(TypeError):
        nd.logical_and(nd.constant([1, 2]), nd.constant([1, 0]))


def test_binary_ops_need_equal_dtypes():
    x = nd.constant([1.0, 2.0])
    i = nd.constant([1, 2])
    with pytest.raises(TypeError, match="Add"):
        nd.add(x, i)
    with pytest.raises(TypeError):
        _ = x * i
    with pytest.raises(TypeError):
        _ = i * 2.5  # 2.5 is no int32
    with pytest.raises(TypeError, match="RealDiv"):
        nd.realdiv(i, i)
    with pytest.raises(TypeError):
        nd.less(nd.constant([True]), nd.constant([False]))


def test_python_values_take_the_tensor_dtype():
    for dt in (nd.float16, nd.float64, nd.int64, nd.int8):
        x = nd.constant([1, 2], dtype=dt)
        for t in (x * 2, 2 * x, nd.add(x, 3), nd.add(3, x), x - 1, 10 - x,
                  nd.maximum(0, x)):
            assert t.dtype == dt
    x = nd.constant([1.0, 2.0], dtype=nd.float64)
    check(run(x + np.float32(0.5)), np.array([1.5, 2.5]))
    check(run(np.array([1.0, 1.0]) + x), np.array([2.0, 3.0]))


def test_static_broadcast_errors_name_the_op():
    with pytest.raises(ValueError, match="Mul"):
        nd.multiply(nd.ones([2, 3]), nd.ones([4]))
    with pytest.raises(ValueError, match="add"):
        _ = nd.ones([2, 3]) + nd.ones([2, 2])


def test_runtime_broadcast_error():
    p = nd.placeholder(nd.float32)
    q = nd.placeholder(nd.float32)
    t = p + q
    assert t.shape.rank is None
    with pytest.raises(errors.InvalidArgumentError, match="Incompatible shapes"):
        run(t, {p: np.ones(3), q: np.ones(4)})


def test_partially_known_broadcast_shapes():
    p = nd.placeholder(nd.float32, [None, 3])
    assert (p + nd.ones([4, 1, 3])).shape.as_list() == [4, None, 3]
    assert (p * nd.ones([5, 1])).shape.as_list() == [5, 3]
    assert (p - nd.placeholder(nd.float32, [None, 1])).shape.as_list() == [None, 3]


# -- division --------------------------------------------------------------------------
def test_truediv_casts_integers_like_tf():
    a = np.array([7, -7, 3], np.int32)
    b = np.array([2, 2, 4], np.int32)
    for t in (nd.truediv(a, b), nd.divide(a, b), nd.constant(a) / b):
        assert t.dtype == nd.float64 and t.op.type == "RealDiv"
        check(run(t), a / b)
    t8 = nd.constant(a.astype(np.int8)) / nd.constant(b.astype(np.int8))
    assert t8.dtype == nd.float32
    check(run(t8), (a / b).astype(np.float32))
    f = nd.constant([1.0, 3.0]) / 2
    assert f.dtype == nd.float32 and f.op.name == "truediv_4"
    check(run(f), np.array([0.5, 1.5], np.float32))
    check(run(6.0 / nd.constant([2.0, 4.0])), np.array([3.0, 1.5], np.float32))
    with pytest.raises(TypeError):
        _ = nd.constant([True]) / nd.constant([True])


def test_floor_division_and_mod_signs():
    a = np.array([7, -7, 7, -7], np.int32)
    b = np.array([2, 2, -2, -2], np.int32)
    check(run(nd.constant(a) // b), a // b)
    check(run(nd.constant(a) % b), a % b)
    check(run(nd.mod(a, b)), np.mod(a, b))
    check(run(nd.div(a, b)), a // b)
    check(run(nd.div(a.astype(np.float32), b.astype(np.float32))),
          (a / b).astype(np.float32))
    af = a.astype(np.float64) + 0.5
    check(run(nd.constant(af) // 2.0), af // 2.0)
    check(run(nd.constant(af) % -2.0), af % -2.0)


def test_division_by_zero():
    with pytest.raises(errors.InvalidArgumentError, match="Integer division by zero"):
        run(nd.floordiv(nd.constant([1, 2]), nd.constant([1, 0])))
    with pytest.raises(errors.InvalidArgumentError, match="Integer division by zero"):
        run(nd.floormod(nd.constant([1, 2]), 0))
    got = run(nd.constant([1.0, -1.0, 0.0]) / 0.0)  # no warning, TF's inf / nan
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])


# -- unary ops -------------------------------------------------------------------------
UNARY = [
    (nd.negative, np.negative, "Neg", ["float32", "int32", "int64"], None),
    (nd.square, np.square, "Square", ["float32", "float64", "int32"], None),
    (nd.sqrt, np.sqrt, "Sqrt", ["float32", "float64", "float16"], (0, 9)),
    (nd.rsqrt, lambda x: 1 / np.sqrt(x), "Rsqrt", ["float32", "float64"], (0.1, 9)),
    (nd.exp, np.exp, "Exp", ["float32", "float64"], None),
    (nd.log, np.log, "Log", ["float32", "float64"], (0.1, 9)),
    (nd.abs, np.abs, "Abs", ["float32", "int32", "int64"], None),
    (nd.sign, np.sign, "Sign", ["float32", "int32"], None),
    (nd.reciprocal, np.reciprocal, "Reciprocal", ["float32", "float64"], (0.5, 4)),
    (nd.floor, np.floor, "Floor", ["float32", "float64"], None),
    (nd.ceil, np.ceil, "Ceil", ["float32", "float64"], None),
    (nd.round, np.round, "Round", ["float32", "float64", "int32"], None),
    (nd.sin, np.sin, "Sin", ["float32", "float64"], None),
    (nd.cos, np.cos, "Cos", ["float32", "float64"], None),
    (nd.tanh, np.tanh, "Tanh", ["float32", "float64", "float16"], None),
    (nd.sigmoid, lambda x: 1 / (1 + np.exp(-x)), "Sigmoid", ["float32", "float64"],
     None),
]


@pytest.mark.parametrize("wrapper,ref,op_type,dts,rng", UNARY,
                         ids=[u[2] for u in UNARY])
def test_unary_ops_match_numpy(wrapper, ref, op_type, dts, rng):
    for dt in dts:
        low, high = rng or (-5, 5)
        x = sample((3, 4), dt, low, high)
        t = wrapper(nd.constant(x))
        assert t.op.type == op_type and t.op.name.startswith(op_type)
        assert t.dtype == nd.as_dtype(dt) and t.shape.as_list() == [3, 4]
        check(run(t), ref(x).astype(dt))


def test_unary_ops_reject_integers_where_tf_does():
    for fn in (nd.sqrt, nd.exp, nd.log, nd.tanh, nd.sigmoid, nd.floor):
        with pytest.raises(TypeError, match="not in list of allowed values"):
            fn(nd.constant([1, 2]))


def test_round_is_bankers_rounding():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, 2.6], np.float32)
    check(run(nd.round(x)), np.array([0, 2, 2, -0, -2, 2, 3], np.float32))


def test_sigmoid_is_stable_and_special_values():
    x = np.array([-1000.0, -20.0, 0.0, 20.0, 1000.0], np.float32)
    got = run(nd.sigmoid(x))
    np.testing.assert_allclose(got, [0.0, 2.0611537e-09, 0.5, 1.0, 1.0], rtol=1e-6)
    # float16 keeps the values whose e^-x overflows it (-17 < x < -11), as TF's
    got = run(nd.sigmoid(np.array([-15.0, -12.0, 0.0], np.float16)))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.float16([3.059e-07, 6.144e-06, 0.5]))
    got = run([nd.sigmoid(np.float32(-1.0)), nd.sigmoid(2.0)])  # scalars
    assert got[0].dtype == np.float32
    np.testing.assert_allclose(got, [1 / (1 + np.e), 1 / (1 + np.exp(-2.0))],
                               rtol=1e-6)
    got = run([nd.log(nd.constant([0.0, -1.0])), nd.sqrt(-1.0)])
    assert got[0][0] == -np.inf and np.isnan(got[0][1]) and np.isnan(got[1])
    flags = run([nd.is_nan([np.nan, 1.0]), nd.is_inf([np.inf, 1.0]),
                 nd.is_finite([np.inf, 1.0])])
    assert [f.tolist() for f in flags] == [[True, False], [True, False],
                                           [False, True]]


def test_operators_and_default_names():
    x = nd.constant([[1.0, -2.0], [3.0, 4.0]])
    v = np.array([[1.0, -2.0], [3.0, 4.0]], np.float32)
    cases = [
        (x + 1, v + 1, "add", "Add"), (1 + x, 1 + v, "add_1", "Add"),
        (x - 1, v - 1, "sub", "Sub"), (1 - x, 1 - v, "sub_1", "Sub"),
        (x * 3, v * 3, "mul", "Mul"), (3 * x, 3 * v, "mul_1", "Mul"),
        (x / 2, v / 2, "truediv", "RealDiv"), (2 / x, 2 / v, "truediv_1", "RealDiv"),
        (x // 2, v // 2, "floordiv", "FloorDiv"), (x % 2, v % 2, "mod", "FloorMod"),
        (x ** 2, v ** 2, "pow", "Pow"), (2 ** x, 2 ** v, "pow_1", "Pow"),
        (x @ x, v @ v, "matmul", "MatMul"), (v @ x, v @ v, "matmul_1", "MatMul"),
        (-x, -v, "Neg", "Neg"), (abs(x), np.abs(v), "Abs", "Abs"),
        (x < 1, v < 1, "Less", "Less"), (x <= 1, v <= 1, "LessEqual", "LessEqual"),
        (x > 1, v > 1, "Greater", "Greater"),
        (x >= 1, v >= 1, "GreaterEqual", "GreaterEqual"),
    ]
    got = run([c[0] for c in cases])
    for (t, want, name, op_type), g in zip(cases, got):
        assert t.op.name == name and t.op.type == op_type
        check(g, want.astype(g.dtype) if want.dtype != bool else want)
    c = nd.constant(1.0) + 2
    assert [op.name for op in c.graph.get_operations()][-2:] == ["add_2/y", "add_2"]


def test_tensor_equality_is_identity():
    x = nd.constant(1.0)
    assert (x == nd.constant(1.0)) is False  # no element-wise __eq__, as TF1
    assert {x: 1}[x] == 1


def test_variable_operators_forward_to_value():
    v = nd.Variable([[1.0, 2.0], [3.0, 4.0]], name="v")
    w = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    ts = [v + 1, 1 + v, v * v, v / 2, -v, v @ v, v[0], v[:, 1], v > 2, abs(v),
          v ** 2, 2 - v]
    with nd.Session() as s:
        s.run(v.initializer)
        got = s.run(ts)
    wants = [w + 1, 1 + w, w * w, w / 2, -w, w @ w, w[0], w[:, 1], w > 2, np.abs(w),
             w ** 2, 2 - w]
    for g, want in zip(got, wants):
        check(g, want)


def test_results_do_not_alias_variable_values():
    v = nd.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    outs = [nd.reshape(v, [-1]), nd.transpose(v), v[0], nd.identity(v),
            nd.reduce_sum(v, axis=[]), nd.cast(v, nd.float32), nd.squeeze(v),
            nd.concat([v], 0), nd.tile(v, [1, 1])]
    with nd.Session() as s:
        s.run(v.initializer)
        for got in s.run(outs):
            got[...] = -1
        np.testing.assert_array_equal(s.run(v), np.arange(6).reshape(2, 3))


# -- add_n, matmul ---------------------------------------------------------------------
def test_add_n():
    xs = [sample((2, 3), np.float32) for _ in range(4)]
    t = nd.add_n([nd.constant(x) for x in xs])
    assert t.op.type == "AddN" and t.op.get_attr("N") == 4
    check(run(t), xs[0] + xs[1] + xs[2] + xs[3])
    check(run(nd.add_n([xs[0]])), xs[0])
    ints = [np.arange(3, dtype=np.int64)] * 2
    check(run(nd.add_n(ints)), ints[0] * 2)
    with pytest.raises(ValueError, match="AddN"):
        nd.add_n([nd.ones([2]), nd.ones([3])])
    with pytest.raises(TypeError):
        nd.add_n([nd.ones([2]), nd.constant([1, 2])])
    with pytest.raises(ValueError):
        nd.add_n([])
    p = nd.placeholder(nd.float32, [None, 3])
    assert nd.add_n([p, nd.ones([2, 3])]).shape.as_list() == [2, 3]
    q = nd.placeholder(nd.float32)
    with pytest.raises(errors.InvalidArgumentError, match="same size and shape"):
        run(nd.add_n([q, nd.ones([2])]), {q: np.ones(3)})


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("dt", ["float32", "float64", "int32", "int64"])
def test_matmul(ta, tb, dt):
    a = sample((2, 3), dt)
    b = sample((3, 4), dt)
    a_in = a.T.copy() if ta else a
    b_in = b.T.copy() if tb else b
    t = nd.matmul(a_in, b_in, transpose_a=ta, transpose_b=tb)
    assert t.op.type == "MatMul" and t.shape.as_list() == [2, 4]
    check(run(t), a @ b)


def test_matmul_shape_errors():
    with pytest.raises(ValueError, match="MatMul") as e:
        nd.matmul(nd.ones([2, 3]), nd.ones([4, 5]))
    assert "Dimensions must be equal, but are 3 and 4" in str(e.value)
    with pytest.raises(ValueError, match="rank 2"):
        nd.matmul(nd.ones([3]), nd.ones([3, 2]))
    with pytest.raises(TypeError):
        nd.matmul(nd.ones([2, 2]), nd.constant([[1, 2], [3, 4]]))
    p = nd.placeholder(nd.float32, [None, None])
    q = nd.placeholder(nd.float32)
    t = nd.matmul(p, q)
    assert t.shape.as_list() == [None, None]
    check(run(t, {p: np.ones((2, 3)), q: np.ones((3, 1))}),
          np.full((2, 1), 3.0, np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="Matrix size-incompatible"):
        run(t, {p: np.ones((2, 3)), q: np.ones((4, 5))})
    with pytest.raises(errors.InvalidArgumentError, match="not a matrix"):
        run(t, {p: np.ones((2, 3)), q: np.ones(3)})


def test_batch_matmul():
    a = sample((5, 2, 3), np.float32)
    b = sample((3, 4), np.float32)
    t = nd.matmul(a, b)
    assert t.op.type == "BatchMatMul" and t.shape.as_list() == [5, 2, 4]
    check(run(t), a @ b)
    check(run(nd.matmul(a, a, transpose_b=True)), a @ a.transpose(0, 2, 1))
    check(run(nd.matmul(a, a, transpose_a=True)), a.transpose(0, 2, 1) @ a)
    with pytest.raises(ValueError, match="BatchMatMul"):
        nd.matmul(a, nd.ones([4, 4]))


# -- reductions ------------------------------------------------------------------------
REDUCTIONS = [
    (nd.reduce_sum, np.sum, "Sum"), (nd.reduce_mean, np.mean, "Mean"),
    (nd.reduce_max, np.max, "Max"), (nd.reduce_min, np.min, "Min"),
    (nd.reduce_prod, np.prod, "Prod"),
]
AXES = [None, 0, 1, -1, -3, [0, 2], (2, -3), [], [0, 1, 2]]


@pytest.mark.parametrize("wrapper,ref,op_type", REDUCTIONS,
                         ids=[r[2] for r in REDUCTIONS])
@pytest.mark.parametrize("dt", ["float32", "float64", "int32", "int64", "float16"])
def test_reductions_match_numpy(wrapper, ref, op_type, dt):
    x = sample((2, 3, 4), dt, -3, 4)
    if dt == "float16":
        x = np.round(x)  # exact in float16 sums
    for axis in AXES:
        for keep in (False, True):
            t = wrapper(x, axis=axis, keepdims=keep)
            assert t.op.type == op_type and t.dtype == nd.as_dtype(dt)
            np_axis = tuple(axis) if isinstance(axis, (list, tuple)) else axis
            if op_type == "Mean" and dt.startswith("int"):
                s = np.sum(x, axis=np_axis, keepdims=keep, dtype=dt)
                n = x.size // max(1, np.size(s))
                want = (np.trunc(s / n)).astype(dt)
            else:
                want = ref(x.astype(np.float64) if dt == "float16" else x,
                           axis=np_axis, keepdims=keep).astype(dt)
            assert t.shape.as_list() == list(np.shape(want)), (axis, keep)
            check(run(t), want)


def test_reduce_mean_of_integers_truncates_like_tf():
    x = np.array([[1, 2], [-1, -2], [3, 3]], np.int32)
    check(run(nd.reduce_mean(x, axis=1)), np.array([1, -1, 3], np.int32))
    check(run(nd.reduce_mean(x)), np.int32(1))


def test_reduction_keyword_forms():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    check(run(nd.reduce_sum(x, reduction_indices=[1])), x.sum(1))
    check(run(nd.reduce_sum(x, 1, keep_dims=True)), x.sum(1, keepdims=True))
    with pytest.raises(ValueError):
        nd.reduce_sum(x, axis=0, reduction_indices=0)
    with pytest.raises(ValueError):
        nd.reduce_sum(x, keepdims=True, keep_dims=True)
    assert nd.reduce_sum(x, name="total").op.name == "total"
    with pytest.raises(TypeError):
        nd.reduce_sum(nd.constant([True, False]))


def test_reduction_shape_inference():
    p = nd.placeholder(nd.float32, [None, 3, 4])
    assert nd.reduce_sum(p, 1).shape.as_list() == [None, 4]
    assert nd.reduce_mean(p, [0, -1], keepdims=True).shape.as_list() == [1, 3, 1]
    assert nd.reduce_max(p).shape.as_list() == []
    ax = nd.placeholder(nd.int32, [None])
    assert nd.reduce_sum(p, ax).shape.rank is None
    assert nd.reduce_sum(p, ax, keepdims=True).shape.as_list() == [None] * 3
    u = nd.placeholder(nd.float32)
    t = nd.reduce_sum(u)  # all axes of an unknown rank: Range(0, Rank(u))
    assert t.shape.rank is None
    check(run(t, {u: np.ones((2, 5))}), np.float32(10))
    with pytest.raises(ValueError, match="Invalid reduction dimension 3") as e:
        nd.reduce_sum(p, 3)
    assert "Sum" in str(e.value)
    with pytest.raises(errors.InvalidArgumentError, match="Invalid reduction"):
        run(nd.reduce_sum(u, ax), {u: np.ones((2, 2)), ax: [5]})
    with pytest.raises(errors.InvalidArgumentError, match="duplicate"):
        run(nd.reduce_sum(u, ax), {u: np.ones((2, 2)), ax: [0, -2]})


def test_reductions_over_empty_axes():
    x = np.zeros((0, 3), np.float32)
    got = run([nd.reduce_sum(x, 0), nd.reduce_prod(x, 0), nd.reduce_max(x, 0),
               nd.reduce_min(x, 0), nd.reduce_max(x.astype(np.int32), 0)])
    check(got[0], np.zeros(3, np.float32))
    check(got[1], np.ones(3, np.float32))
    check(got[2], np.full(3, -np.inf, np.float32))
    check(got[3], np.full(3, np.inf, np.float32))
    check(got[4], np.full(3, np.iinfo(np.int32).min, np.int32))
    assert np.all(np.isnan(run(nd.reduce_mean(x, 0))))


def test_reduce_all_any_count_nonzero_logsumexp():
    b = np.array([[True, False, True], [True, True, True]])
    check(run(nd.reduce_all(b, 1)), b.all(1))
    check(run(nd.reduce_any(b, 0, keepdims=True)), b.any(0, keepdims=True))
    check(run(nd.reduce_all(b)), np.bool_(False))
    x = np.array([[0, 1, 2], [0, 0, 3]], np.int32)
    check(run(nd.count_nonzero(x)), np.int64(3))
    check(run(nd.count_nonzero(x, 1)), np.array([2, 1], np.int64))
    check(run(nd.count_nonzero(x.astype(np.float32), 0, dtype=nd.int32)),
          np.array([0, 1, 2], np.int32))
    f = np.array([[1000.0, 1000.0], [-1.0, 2.0]], np.float64)
    want = np.log(np.sum(np.exp(f - f.max(1, keepdims=True)), 1)) + f.max(1)
    check(run(nd.reduce_logsumexp(f, 1)), want)
    check(run(nd.reduce_logsumexp(f, 1, keepdims=True)), want[:, None])


@pytest.mark.parametrize("wrapper,ref", [(nd.argmax, np.argmax),
                                         (nd.argmin, np.argmin)])
def test_arg_reductions(wrapper, ref):
    x = sample((3, 4, 5), np.float32)
    for axis in (0, 1, 2, -1):
        t = wrapper(x, axis=axis)
        assert t.dtype == nd.int64
        assert t.shape.as_list() == list(ref(x, axis=axis).shape)
        check(run(t), ref(x, axis=axis).astype(np.int64))
    check(run(wrapper(x)), ref(x, axis=0).astype(np.int64))
    t = wrapper(x.astype(np.int32), dimension=1, output_type=nd.int32)
    assert t.dtype == nd.int32
    check(run(t), ref(x.astype(np.int32), axis=1).astype(np.int32))
    with pytest.raises(ValueError, match="Arg"):
        wrapper(x, axis=3)
    p = nd.placeholder(nd.float32, [None, 4])
    d = nd.placeholder(nd.int32, [])
    assert wrapper(p, d).shape.as_list() == [None]
    with pytest.raises(errors.InvalidArgumentError, match="empty"):
        run(wrapper(p, 0), {p: np.zeros((0, 4))})


# -- cast ------------------------------------------------------------------------------
def test_cast():
    x = np.array([-1.7, -0.5, 0.0, 0.5, 2.9], np.float32)
    t = nd.cast(x, nd.int32)
    assert t.op.type == "Cast" and t.op.get_attr("DstT") == nd.int32
    assert t.op.get_attr("SrcT") == nd.float32
    check(run(t), x.astype(np.int32))
    check(run(nd.cast(x, nd.bool)), x.astype(bool))
    check(run(nd.cast(nd.constant([True, False]), nd.float64)), np.array([1.0, 0.0]))
    check(run(nd.to_float(nd.constant([1, 2]))), np.array([1.0, 2.0], np.float32))
    check(run(nd.to_int64(x)), x.astype(np.int64))
    check(run(nd.to_double(x)), x.astype(np.float64))
    check(run(nd.to_int32(x)), x.astype(np.int32))
    c = nd.constant(x)
    assert nd.cast(c, nd.float32) is c
    assert nd.cast(c, "float16").dtype == nd.float16
    with pytest.raises(TypeError):
        nd.cast(nd.constant("a"), nd.float32)


# -- clipping --------------------------------------------------------------------------
def test_clip_by_value():
    x = sample((3, 4), np.float32)
    t = nd.clip_by_value(x, -1.0, 2)
    assert t.op.type == "ClipByValue" and t.shape.as_list() == [3, 4]
    check(run(t), np.clip(x, -1, 2))
    lo = np.full((3, 4), -0.5, np.float32)
    check(run(nd.clip_by_value(x, lo, 1.0)), np.clip(x, -0.5, 1.0))
    check(run(nd.clip_by_value(nd.constant([-5, 5, 1]), 0, 3)),
          np.array([0, 3, 1], np.int32))
    with pytest.raises(ValueError, match="ClipByValue"):
        nd.clip_by_value(x, np.zeros((2, 4), np.float32), 1.0)
    with pytest.raises(TypeError):
        nd.clip_by_value(x, nd.constant(0, dtype=nd.int32), 1.0)


def test_clip_by_norm():
    x = np.array([[3.0, 4.0], [0.3, 0.4]], np.float32)
    check(run(nd.clip_by_norm(x, 1.0)), x / np.float32(np.linalg.norm(x)))
    check(run(nd.clip_by_norm(x, 1.0, axes=[1])),
          np.array([[0.6, 0.8], [0.3, 0.4]], np.float32))
    check(run(nd.clip_by_norm(np.zeros(2, np.float32), 1.0)), np.zeros(2, np.float32))


def test_global_norm_and_clip_by_global_norm():
    a = np.array([3.0, 4.0], np.float32)
    b = np.array([[12.0]], np.float32)
    n = nd.global_norm([a, None, b])
    check(run(n), np.float32(13.0))
    clipped, norm = nd.clip_by_global_norm([a, None, b], 6.5)
    assert clipped[1] is None and len(clipped) == 3
    got = run([clipped[0], clipped[2], norm])
    check(got[0], a / 2)
    check(got[1], b / 2)
    check(got[2], np.float32(13.0))
    clipped, _ = nd.clip_by_global_norm([a], 100.0)
    check(run(clipped[0]), a)
    clipped, _ = nd.clip_by_global_norm([a], 1.0, use_norm=nd.constant(np.inf))
    assert np.all(np.isnan(run(clipped[0])))
    with pytest.raises(TypeError):
        nd.clip_by_global_norm(nd.constant(a), 1.0)


# -- property tests --------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4),
       st.sampled_from([(nd.add, np.add), (nd.multiply, np.multiply),
                        (nd.maximum, np.maximum), (nd.subtract, np.subtract),
                        (nd.squared_difference, lambda x, y: (x - y) ** 2)]),
       st.sampled_from(["float32", "int64"]))
def test_broadcasting_property(shapes, ops, dt):
    (sa, sb), want_shape = shapes.input_shapes, shapes.result_shape
    wrapper, ref = ops
    with nd.Graph().as_default():
        a = sample(sa, dt)
        b = sample(sb, dt)
        pa = nd.placeholder(dt, [None] * len(sa))
        t = wrapper(pa, nd.constant(b))
        static = wrapper(nd.constant(a), nd.constant(b))
        assert static.shape.as_list() == list(want_shape)
        assert t.shape.rank == len(want_shape)
        with nd.Session() as s:
            got, got_static = s.run([t, static], {pa: a})
    check(got, ref(a, b))
    check(got_static, ref(a, b))


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4),
                  elements=st.floats(-100, 100)),
       st.data())
def test_reduction_property(x, data):
    axes = data.draw(st.lists(st.integers(-x.ndim, x.ndim - 1), max_size=x.ndim,
                              unique_by=lambda a: a % x.ndim))
    keep = data.draw(st.booleans())
    with nd.Graph().as_default():
        ts = [nd.reduce_sum(x, axes, keepdims=keep), nd.reduce_max(x, axes,
                                                                   keepdims=keep)]
        got = run(ts)
    check(got[0], np.sum(x, axis=tuple(axes), keepdims=keep))
    check(got[1], np.max(x, axis=tuple(axes), keepdims=keep))
    assert ts[0].shape.as_list() == list(np.shape(got[0]))


def test_graph_def_round_trip_of_math_ops(graph):
    x = nd.placeholder(nd.float32, [None, 3], name="x")
    y = nd.reduce_mean(nd.sigmoid(nd.matmul(x, nd.ones([3, 2])) * 2), axis=1,
                       keepdims=True)
    z = nd.argmax(nd.cast(x, nd.int32), 1)
    gd = graph.as_graph_def()
    with nd.Graph().as_default() as g2:
        nd.import_graph_def(gd, name="")
        y2 = g2.get_tensor_by_name(y.name)
        z2 = g2.get_tensor_by_name(z.name)
        assert y2.shape.as_list() == [None, 1]
        feed = {g2.get_tensor_by_name("x:0"): np.ones((2, 3))}
        got = run([y2, z2], feed)
    check(got[0], np.full((2, 1), 1 / (1 + np.exp(-6.0)), np.float32))
    check(got[1], np.zeros(2, np.int64))
