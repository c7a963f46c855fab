"""Symbolic gradients (nd.gradients) checked against central finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist.ops import gradients as gradients_lib
from nbdist.ops.gradients import NotDifferentiable, get_gradient_function

RNG = np.random.default_rng(1234)


def check_gradient(build_fn, input_values, dynamic=False, eps=1e-6, atol=1e-6,
                   rtol=1e-5, wrt=None):
    """Builds ``y = build_fn(*xs)`` on float64 placeholders and compares
    ``nd.gradients(reduce_sum(y * w), xs)`` (w random) with central differences.

    ``dynamic``: the placeholders have unknown shapes, so every shape is only
    known at run time. ``wrt``: indices of the inputs to differentiate (all).
    """
    values = [np.array(v, dtype=np.float64) for v in input_values]
    wrt = list(range(len(values))) if wrt is None else list(wrt)
    g = nd.Graph()
    with g.as_default():
        xs = [nd.placeholder(nd.float64, None if dynamic else v.shape, name=f"x{i}")
              for i, v in enumerate(values)]
        y = build_fn(*xs)
        w = nd.placeholder(nd.float64, name="w")
        loss = nd.reduce_sum(y * w)
        grads = nd.gradients(loss, [xs[i] for i in wrt])
    assert all(gr is not None for gr in grads), grads
    with nd.Session(graph=g) as sess:
        feed = dict(zip(xs, values))
        y0 = np.asarray(sess.run(y, feed))
        weights = RNG.standard_normal(y0.shape)
        feed[w] = weights
        symbolic = sess.run(grads, feed)
        for k, sym in enumerate(symbolic):
            if isinstance(sym, nd.IndexedSlicesValue):  # gather's gradient, as TF
                dense = np.zeros(tuple(sym.dense_shape), sym.values.dtype)
                np.add.at(dense, sym.indices, sym.values)
                symbolic[k] = dense
        for k, i in enumerate(wrt):
            assert symbolic[k].shape == values[i].shape, (symbolic[k].shape,
                                                          values[i].shape)
            numeric = np.zeros_like(values[i])
            for idx in np.ndindex(*values[i].shape):
                plus = values[i].copy()
                plus[idx] += eps
                minus = values[i].copy()
                minus[idx] -= eps
                fp = sess.run(loss, {**feed, xs[i]: plus})
                fm = sess.run(loss, {**feed, xs[i]: minus})
                numeric[idx] = (fp - fm) / (2 * eps)
            np.testing.assert_allclose(symbolic[k], numeric, atol=atol, rtol=rtol,
                                       err_msg=f"gradient of input {i}")
    return symbolic


def rand(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape)


def positive(*shape):
    return RNG.uniform(0.5, 2.0, size=shape)


def away_from_zero(*shape):
    v = RNG.uniform(0.2, 1.0, size=shape)
    return v * RNG.choice([-1.0, 1.0], size=shape)


def distinct(*shape):
    """Values far apart (no ties for max/min/relu kinks)."""
    n = int(np.prod(shape))
    return (RNG.permutation(n).reshape(shape) * 0.37 - n * 0.15).astype(np.float64)


# -- element-wise binary with broadcasting -------------------------------------------
BINARY = {
    "add": (nd.add, rand, rand),
    "subtract": (nd.subtract, rand, rand),
    "multiply": (nd.multiply, rand, rand),
    "divide": (nd.divide, rand, away_from_zero),
    "realdiv": (nd.realdiv, rand, away_from_zero),
    "pow": (nd.pow, positive, rand),
    "maximum": (nd.maximum, distinct, lambda *s: distinct(*s) + 0.1),
    "minimum": (nd.minimum, distinct, lambda *s: distinct(*s) + 0.1),
    "squared_difference": (nd.squared_difference, rand, rand),
    "floormod": (nd.floormod, lambda *s: RNG.uniform(0.1, 0.9, s) + 3.0,
                 lambda *s: np.full(s, 2.0)),
}
SHAPE_PAIRS = [((2, 3), (2, 3)), ((3, 1), (1, 4)), ((2, 3), (3,)), ((), (2, 2)),
               ((2, 1, 3), (4, 1))]


@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcasting(name, shapes):
    fn, gen_x, gen_y = BINARY[name]
    check_gradient(fn, [gen_x(*shapes[0]), gen_y(*shapes[1])])


@pytest.mark.parametrize("name", ["add", "multiply", "divide", "maximum",
                                  "squared_difference"])
def test_binary_broadcasting_dynamic_shapes(name):
    fn, gen_x, gen_y = BINARY[name]
    check_gradient(fn, [gen_x(3, 1), gen_y(1, 4)], dynamic=True)
    check_gradient(fn, [gen_x(2, 3), gen_y(3)], dynamic=True)


def test_partially_known_shapes_broadcast_statically():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [None, 3])
        b = nd.placeholder(nd.float64, [3])
        gx, gb = nd.gradients(nd.reduce_sum(x + b), [x, b])
        types = {op.type for op in g.get_operations()}
        assert "BroadcastGradientArgs" not in types
        with nd.Session(graph=g) as s:
            vx, vb = s.run([gx, gb], {x: np.ones((5, 3)), b: np.zeros(3)})
    np.testing.assert_allclose(vx, np.ones((5, 3)))
    np.testing.assert_allclose(vb, np.full(3, 5.0))


def test_broadcast_gradient_args_kernel():
    from nbdist.ops.nn_ops import broadcast_gradient_args

    g = nd.Graph()
    with g.as_default():
        s0 = nd.placeholder(nd.int32, [None])
        s1 = nd.placeholder(nd.int32, [None])
        r0, r1 = broadcast_gradient_args(s0, s1)
        with nd.Session(graph=g) as s:
            a, b = s.run([r0, r1], {s0: [2, 3, 5], s1: [1]})
            assert a.tolist() == [] and b.tolist() == [0, 1, 2]
            a, b = s.run([r0, r1], {s0: [3, 1], s1: [1, 4]})
            assert a.tolist() == [1] and b.tolist() == [0]
            a, b = s.run([r0, r1], {s0: [1, 1], s1: [1, 1]})
            assert a.tolist() == [0, 1] and b.tolist() == [0, 1]
            with pytest.raises(nd.errors.InvalidArgumentError, match="Incompatible"):
                s.run(r0, {s0: [2, 3], s1: [4]})


# -- element-wise unary ----------------------------------------------------------------
UNARY = {
    "negative": (nd.negative, rand),
    "square": (nd.square, rand),
    "sqrt": (nd.sqrt, positive),
    "rsqrt": (nd.rsqrt, positive),
    "exp": (nd.exp, rand),
    "log": (nd.log, positive),
    "abs": (nd.abs, away_from_zero),
    "reciprocal": (nd.reciprocal, away_from_zero),
    "tanh": (nd.tanh, rand),
    "sigmoid": (nd.sigmoid, rand),
    "sin": (nd.sin, rand),
    "cos": (nd.cos, rand),
    "identity": (nd.identity, rand),
    "relu": (lambda x: nd.nn.relu(x), away_from_zero),
    "relu6": (lambda x: nd.nn.relu6(x * 4), away_from_zero),
    "elu": (lambda x: nd.nn.elu(x), away_from_zero),
    "softplus": (lambda x: nd.nn.softplus(x), rand),
    "leaky_relu": (lambda x: nd.nn.leaky_relu(x, 0.3), away_from_zero),
    "cast_roundtrip": (lambda x: nd.cast(nd.cast(x, nd.float32), nd.float64) * 2,
                       rand),
    "add_n": (lambda x: nd.add_n([x, x * 2, nd.sin(x)]), rand),
    "placeholder_with_default": (lambda x: nd.placeholder_with_default(x, [2, 3]),
                                 rand),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    fn, gen = UNARY[name]
    check_gradient(fn, [gen(2, 3)], atol=1e-4 if name == "cast_roundtrip" else 1e-6,
                   eps=1e-3 if name == "cast_roundtrip" else 1e-6)


@pytest.mark.parametrize("fn", [nd.sign, nd.floor, nd.ceil, nd.round])
def test_piecewise_constant_ops(fn):
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [3])
        (gx,) = nd.gradients(nd.reduce_sum(fn(x) + x), [x])
        with nd.Session(graph=g) as s:
            np.testing.assert_allclose(s.run(gx, {x: [0.3, -1.7, 2.2]}), np.ones(3))


# -- matmul ----------------------------------------------------------------------------
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul(ta, tb):
    a = rand(4, 2) if ta else rand(2, 4)
    b = rand(3, 4) if tb else rand(4, 3)
    check_gradient(lambda x, y: nd.matmul(x, y, transpose_a=ta, transpose_b=tb),
                   [a, b])


def test_matmul_dynamic_shapes():
    check_gradient(lambda x, y: nd.matmul(x, y, transpose_b=True),
                   [rand(2, 3), rand(4, 3)], dynamic=True)


def test_batch_matmul():
    check_gradient(nd.matmul, [rand(2, 2, 3), rand(2, 3, 2)])
    check_gradient(lambda x, y: nd.matmul(x, y, transpose_a=True, transpose_b=True),
                   [rand(2, 3, 2), rand(2, 2, 3)])


# -- reductions ------------------------------------------------------------------------
REDUCTIONS = {"sum": nd.reduce_sum, "mean": nd.reduce_mean, "max": nd.reduce_max,
              "min": nd.reduce_min, "prod": nd.reduce_prod}
AXES = [None, 0, 1, 2, -1, -2, [0, 2], [-1, 0], [0, 1, 2]]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions(name, axis, keepdims):
    fn = REDUCTIONS[name]
    gen = distinct if name in ("max", "min") else (
        lambda *s: rand(*s) + 1.5 * RNG.choice([-1, 1], s)) if name == "prod" else rand
    check_gradient(lambda x: fn(x, axis=axis, keepdims=keepdims), [gen(2, 3, 2)])


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_dynamic_shapes(name):
    fn = REDUCTIONS[name]
    gen = distinct if name in ("max", "min") else rand
    check_gradient(lambda x: fn(x, axis=1), [gen(3, 4)], dynamic=True)
    check_gradient(lambda x: fn(x, axis=[0, -1], keepdims=True), [gen(2, 3, 2)],
                   dynamic=True)
    check_gradient(lambda x: fn(x), [gen(2, 3)], dynamic=True)


def test_reduce_mean_with_unknown_batch():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [None, 2])
        (gx,) = nd.gradients(nd.reduce_mean(x), [x])
        with nd.Session(graph=g) as s:
            np.testing.assert_allclose(s.run(gx, {x: np.ones((4, 2))}),
                                       np.full((4, 2), 1 / 8))


def test_reduction_axis_as_runtime_tensor():
    axis_value = np.array([1], dtype=np.int32)

    def build(x):
        axis = nd.placeholder_with_default(axis_value, [None])
        return nd.reduce_sum(x, axis)

    check_gradient(build, [rand(2, 3)])


def test_prod_with_zeros():
    x = rand(3, 4)
    x[0, 1] = 0.0
    x[2, 0] = x[2, 3] = 0.0
    check_gradient(lambda t: nd.reduce_prod(t, axis=1), [x])
    check_gradient(lambda t: nd.reduce_prod(t, axis=0), [x])


def test_max_with_ties_splits_gradient():
    g = nd.Graph()
    with g.as_default():
        x = nd.constant([1.0, 3.0, 3.0], dtype=nd.float64)
        (gx,) = nd.gradients(nd.reduce_max(x), [x])
        with nd.Session(graph=g) as s:
            np.testing.assert_allclose(s.run(gx), [0.0, 0.5, 0.5])


# -- shape manipulation ----------------------------------------------------------------
@pytest.mark.parametrize("dynamic", [False, True])
def test_reshape_transpose_expand_squeeze(dynamic):
    check_gradient(lambda x: nd.reshape(x, [3, 4]), [rand(2, 6)], dynamic=dynamic)
    check_gradient(lambda x: nd.reshape(x, [-1]), [rand(2, 3, 2)], dynamic=dynamic)
    check_gradient(lambda x: nd.transpose(x, [2, 0, 1]), [rand(2, 3, 4)],
                   dynamic=dynamic)
    check_gradient(lambda x: nd.transpose(x), [rand(2, 3)], dynamic=dynamic)
    check_gradient(lambda x: nd.expand_dims(x, 1), [rand(2, 3)], dynamic=dynamic)
    check_gradient(lambda x: nd.squeeze(x, [1]), [rand(2, 1, 3)], dynamic=dynamic)
    check_gradient(lambda x: nd.squeeze(x), [rand(2, 1, 3, 1)], dynamic=dynamic)


def test_transpose_with_runtime_perm():
    def build(x):
        perm = nd.placeholder_with_default(np.array([1, 2, 0], np.int32), [3])
        return nd.transpose(x, perm)

    check_gradient(build, [rand(2, 3, 4)])


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dynamic", [False, True])
def test_concat(axis, dynamic):
    check_gradient(lambda a, b, c: nd.concat([a, b * 2, c], axis),
                   [rand(2, 3), rand(2, 3), rand(2, 3)], dynamic=dynamic)


def test_concat_uneven_sizes():
    check_gradient(lambda a, b: nd.concat([a, b], 1), [rand(2, 1), rand(2, 4)])
    check_gradient(lambda a, b: nd.concat([a, b], 0), [rand(1, 3), rand(3, 3)],
                   dynamic=True)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_stack_unstack(axis):
    check_gradient(lambda a, b: nd.stack([a, b], axis=axis), [rand(2, 3), rand(2, 3)])
    check_gradient(lambda x: nd.stack(nd.unstack(x, axis=axis)[::-1], axis=0) ** 2,
                   [rand(2, 3)])


def test_unstack_with_unused_outputs():
    check_gradient(lambda x: nd.unstack(x)[1] * 3.0, [rand(3, 2)])
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [3, 2])
        nd.gradients(nd.unstack(x, name="parts")[1], [x])
        scopes = {op.name.split("/")[1] for op in g.get_operations()
                  if op.name.startswith("gradients/")}
    assert "parts_grad" in scopes and "parts_grad_1" not in scopes


@pytest.mark.parametrize("dynamic", [False, True])
def test_split(dynamic):
    check_gradient(lambda x: nd.split(x, 3, axis=1)[0] * nd.split(x, 3, axis=1)[2],
                   [rand(2, 6)], dynamic=dynamic)
    check_gradient(lambda x: nd.split(x, [1, 3], axis=0)[1] * 2.0, [rand(4, 2)],
                   dynamic=dynamic)


@pytest.mark.parametrize("dynamic", [False, True])
def test_slice(dynamic):
    check_gradient(lambda x: nd.slice(x, [1, 0], [2, -1]), [rand(4, 3)],
                   dynamic=dynamic)
    check_gradient(lambda x: nd.slice(x, [0, 1, 1], [2, 1, 2]), [rand(3, 2, 3)],
                   dynamic=dynamic)


@pytest.mark.parametrize("dynamic", [False, True])
def test_strided_slice(dynamic):
    check_gradient(lambda x: x[1:, ::2], [rand(3, 5)], dynamic=dynamic)
    check_gradient(lambda x: x[::-1, 2], [rand(3, 5)], dynamic=dynamic)
    check_gradient(lambda x: x[..., 1:3, None], [rand(2, 3, 4)], dynamic=dynamic)
    check_gradient(lambda x: x[-1], [rand(3, 2)], dynamic=dynamic)
    check_gradient(lambda x: x[:, -3:-1] * x[:, 0:2], [rand(2, 4)], dynamic=dynamic)


def test_gather_with_repeated_indices():
    check_gradient(lambda p: nd.gather(p, [2, 0, 2, 2]), [rand(4, 3)])
    check_gradient(lambda p: nd.gather(p, [[1, 1], [0, 3]]), [rand(4, 2)])
    check_gradient(lambda p: nd.gather(p, [1, 0, 1], axis=1), [rand(2, 3, 2)])
    check_gradient(lambda p: nd.gather(p, [[2, 2]], axis=-1), [rand(2, 3)])


def test_gather_dynamic_shapes():
    def build(p):
        return nd.gather(p, nd.placeholder_with_default(np.array([0, 0, 1], np.int32),
                                                        [None]))

    check_gradient(build, [rand(3, 2)])
    g = nd.Graph()
    with g.as_default():
        p = nd.placeholder(nd.float64, [None, 2])
        (gp,) = nd.gradients(nd.reduce_sum(nd.gather(p, [1, 1])), [p])
        assert isinstance(gp, nd.IndexedSlices)  # as TF
        with nd.Session(graph=g) as s:
            v = s.run(gp, {p: np.ones((3, 2))})
        dense = np.zeros(tuple(v.dense_shape))
        np.add.at(dense, v.indices, v.values)
        np.testing.assert_allclose(dense, [[0, 0], [2, 2], [0, 0]])


@pytest.mark.parametrize("dynamic", [False, True])
def test_tile(dynamic):
    check_gradient(lambda x: nd.tile(x, [2, 3]), [rand(2, 2)], dynamic=dynamic)
    check_gradient(lambda x: nd.tile(x, [1, 2, 1]), [rand(1, 2, 3)], dynamic=dynamic)


def test_fill_gradient_flows_to_value():
    check_gradient(lambda v: nd.fill([2, 3], v), [np.array(0.5)])


def test_pad_reverse_broadcast_to():
    check_gradient(lambda x: nd.pad(x, [[1, 0], [2, 1]]), [rand(2, 3)])
    check_gradient(lambda x: nd.pad(x, [[1, 0], [2, 1]]), [rand(2, 3)], dynamic=True)
    check_gradient(lambda x: nd.reverse(x, [1]), [rand(2, 3)])
    check_gradient(lambda x: nd.broadcast_to(x, [2, 3, 4]), [rand(3, 1)])


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
def test_mirror_pad(mode):
    check_gradient(lambda x: nd.pad(x, [[2, 1], [0, 2]], mode=mode), [rand(3, 3)])
    check_gradient(lambda x: nd.gradients(
        nd.reduce_sum(nd.square(nd.pad(x, [[1, 1]], mode=mode))), [x])[0],
        [rand(4)])


def test_select():
    cond = RNG.uniform(size=(3, 4)) > 0.5

    def build(x, y):
        return nd.where(nd.constant(cond), x, y)

    check_gradient(build, [rand(3, 4), rand(3, 4)])
    vec = np.array([True, False, True])
    check_gradient(lambda x, y: nd.where(nd.constant(vec), x, y),
                   [rand(3, 2), rand(3, 2)])
    check_gradient(lambda x, y: nd.where_v2(nd.constant(cond), x, y),
                   [rand(3, 1), rand(4)])


def test_clip_by_value():
    x = distinct(3, 4) / 3.0
    check_gradient(lambda t: nd.clip_by_value(t, -0.5, 0.7), [x], wrt=[0])
    check_gradient(lambda t, lo, hi: nd.clip_by_value(t, lo, hi),
                   [x, np.array(-0.52), np.array(0.71)])


# -- nn ops ----------------------------------------------------------------------------
@pytest.mark.parametrize("dynamic", [False, True])
def test_softmax_and_log_softmax(dynamic):
    check_gradient(nd.nn.softmax, [rand(3, 4)], dynamic=dynamic)
    check_gradient(nd.nn.log_softmax, [rand(3, 4)], dynamic=dynamic)
    check_gradient(lambda x: nd.nn.softmax(x, axis=0), [rand(3, 4)])
    check_gradient(nd.nn.softmax, [rand(2, 2, 3)])


def test_softmax_cross_entropy():
    labels = RNG.dirichlet(np.ones(4), size=3)
    check_gradient(lambda lg, lb: nd.nn.softmax_cross_entropy_with_logits_v2(
        labels=lb, logits=lg), [rand(3, 4) * 3, labels])
    check_gradient(lambda lg, lb: nd.nn.softmax_cross_entropy_with_logits(
        labels=lb, logits=lg), [rand(3, 4) * 3, labels], wrt=[0])
    check_gradient(lambda lg: nd.nn.softmax_cross_entropy_with_logits_v2(
        labels=np.eye(3)[[0, 2]].T, logits=lg, axis=0), [rand(3, 2)])
    check_gradient(lambda lg: nd.nn.softmax_cross_entropy_with_logits_v2(
        labels=RNG.dirichlet(np.ones(3), size=(2, 2)), logits=lg), [rand(2, 2, 3)])


def test_softmax_cross_entropy_v1_blocks_labels():
    g = nd.Graph()
    with g.as_default():
        logits = nd.placeholder(nd.float64, [2, 3])
        labels = nd.placeholder(nd.float64, [2, 3])
        loss = nd.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        gl, glab = nd.gradients(loss, [logits, labels])
        assert gl is not None and glab is None
        loss2 = nd.nn.softmax_cross_entropy_with_logits_v2(labels=labels,
                                                           logits=logits)
        assert nd.gradients(loss2, [labels])[0] is not None


def test_softmax_cross_entropy_second_derivative():
    labels = RNG.dirichlet(np.ones(3), size=2)

    def build(lg):
        loss = nd.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=lg)
        return nd.gradients(nd.reduce_sum(loss), [lg])[0]

    check_gradient(build, [rand(2, 3)])


def test_sparse_softmax_cross_entropy():
    check_gradient(lambda lg: nd.nn.sparse_softmax_cross_entropy_with_logits(
        labels=np.array([0, 3, 1]), logits=lg), [rand(3, 4) * 3])
    check_gradient(lambda lg: nd.nn.sparse_softmax_cross_entropy_with_logits(
        labels=np.array([[0, 2], [1, 1]]), logits=lg), [rand(2, 2, 3)])


def test_sparse_softmax_cross_entropy_has_no_second_derivative():
    g = nd.Graph()
    with g.as_default():
        lg = nd.placeholder(nd.float64, [2, 3])
        loss = nd.nn.sparse_softmax_cross_entropy_with_logits(labels=[0, 1],
                                                              logits=lg)
        (glg,) = nd.gradients(loss, [lg])
        with pytest.raises(LookupError, match="Gradient explicitly disabled"):
            nd.gradients(glg, [lg])


def test_sigmoid_cross_entropy():
    labels = RNG.uniform(size=(2, 3))
    check_gradient(lambda lg, lb: nd.nn.sigmoid_cross_entropy_with_logits(
        labels=lb, logits=lg), [away_from_zero(2, 3) * 3, labels])


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_bias_add(data_format):
    check_gradient(lambda v, b: nd.nn.bias_add(v, b, data_format=data_format),
                   [rand(2, 3, 3), rand(3)])
    check_gradient(lambda v, b: nd.nn.bias_add(v, b), [rand(4, 2), rand(2)],
                   dynamic=True)


@pytest.mark.parametrize("act", ["relu", "relu6", "elu", "softplus", "leaky_relu"])
def test_activation_second_derivatives(act):
    fn = getattr(nd.nn, act)

    def build(x):
        scale = 4.0 if act == "relu6" else 1.0
        y = fn(x * scale)
        return nd.gradients(nd.reduce_sum(y * y * x), [x])[0]

    check_gradient(build, [away_from_zero(2, 3)])


def test_bias_add_second_derivative():
    def build(v, b):
        y = nd.nn.bias_add(v, b)
        return nd.gradients(nd.reduce_sum(y * y), [b])[0]

    check_gradient(build, [rand(3, 2), rand(2)])


def test_l2_loss_and_xw_plus_b():
    check_gradient(nd.nn.l2_loss, [rand(2, 3)])
    check_gradient(nd.nn.xw_plus_b, [rand(2, 3), rand(3, 4), rand(4)])


def test_relu_second_derivative_and_mlp():
    def mlp(x, w1, b1, w2):
        h = nd.nn.relu(nd.matmul(x, w1) + b1)
        return nd.nn.softmax(nd.matmul(h, w2))

    check_gradient(mlp, [rand(4, 3), rand(3, 5), rand(5) + 0.3, rand(5, 2)],
                   rtol=1e-4)


def test_dropout_gradient():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [200])
        y = nd.nn.dropout(x, keep_prob=0.5, seed=3)
        (gx,) = nd.gradients(nd.reduce_sum(y), [x])
        with nd.Session(graph=g) as s:
            yv, gv = s.run([y, gx], {x: np.ones(200)})
    np.testing.assert_allclose(gv, yv)  # d(sum y)/dx = mask / keep_prob = y for x=1
    assert set(np.unique(gv)) <= {0.0, 2.0}


# -- the walk itself -------------------------------------------------------------------
def test_gradient_through_variable():
    g = nd.Graph()
    with g.as_default():
        v = nd.Variable(np.array([1.0, 2.0, 3.0]), name="v")
        w = nd.Variable(np.array([[1.0], [2.0]]), name="w")
        loss = nd.reduce_sum(v * v) + nd.reduce_sum(nd.matmul(w, v[None, :]))
        gv, gw = nd.gradients(loss, [v, w])
        (gread,) = nd.gradients(loss, [v.value()])
        with nd.Session(graph=g) as s:
            s.run(nd.global_variables_initializer())
            np.testing.assert_allclose(s.run(gv), 2 * np.array([1, 2, 3]) + 3)
            np.testing.assert_allclose(s.run(gw), [[6.0], [6.0]])
            np.testing.assert_allclose(s.run(gread), s.run(gv))
    assert gv.name.startswith("gradients/")


def test_unreachable_xs_give_none():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [2])
        y = nd.placeholder(nd.float64, [2])
        z = nd.placeholder(nd.int32, [2])
        out = nd.reduce_sum(x * 2.0)
        gx, gy, gz = nd.gradients(out, [x, y, z])
        assert gx is not None and gy is None and gz is None
        (zero,) = nd.gradients(out, [y], unconnected_gradients="zero")
        with nd.Session(graph=g) as s:
            np.testing.assert_allclose(s.run(zero), [0.0, 0.0])


def test_stop_gradient_blocks():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [2])
        y = x * nd.stop_gradient(x * 3.0)
        (gx,) = nd.gradients(nd.reduce_sum(y), [x])
        (none,) = nd.gradients(nd.reduce_sum(nd.stop_gradient(x)), [x])
        assert none is None
        a = x * 2.0
        b = a * x
        (gs,) = nd.gradients(b, [x], stop_gradients=[a])
        with nd.Session(graph=g) as s:
            np.testing.assert_allclose(s.run(gx, {x: [1.0, 2.0]}), [3.0, 6.0])
            np.testing.assert_allclose(s.run(gs, {x: [1.0, 2.0]}), [2.0, 4.0])


def test_grad_ys_and_several_ys():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [2])
        y1, y2 = x * 2.0, nd.square(x)
        weights = [nd.constant([1.0, 10.0], nd.float64),
                   nd.constant([1.0, 1.0], nd.float64)]
        (gx,) = nd.gradients([y1, y2], [x], grad_ys=weights)
        (gsum,) = nd.gradients([y1, y2], x)
        (self_grad,) = nd.gradients(x, x)
        with nd.Session(graph=g) as s:
            feed = {x: [1.0, 3.0]}
            np.testing.assert_allclose(s.run(gx, feed), [2.0 + 2.0, 20.0 + 6.0])
            np.testing.assert_allclose(s.run(gsum, feed), [4.0, 8.0])
            np.testing.assert_allclose(s.run(self_grad, feed), [1.0, 1.0])


def test_multiple_paths_are_summed_with_add_n():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [], name="x")
        y = nd.sin(x) + nd.cos(x) + x * x
        (gx,) = nd.gradients(y, [x])
        assert gx.op.type == "AddN"
        assert gx.op.name.startswith("gradients/")
        names = [op.name for op in g.get_operations()]
        assert any(n.startswith("gradients/Sin_grad/") for n in names)
        assert any(n.startswith("gradients/mul_grad/") for n in names)
        with nd.Session(graph=g) as s:
            v = 0.3
            np.testing.assert_allclose(s.run(gx, {x: v}),
                                       np.cos(v) - np.sin(v) + 2 * v)


def test_gradient_scopes_are_unique():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [])
        (a,) = nd.gradients(x * x, [x])
        (b,) = nd.gradients(x * x, [x], name="my_grads")
        (c,) = nd.gradients(x * x, [x])
    assert a.name.startswith("gradients/")
    assert b.name.startswith("my_grads/")
    assert c.name.startswith("gradients_1/")


def test_xs_depending_on_other_xs():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [])
        h = x * 3.0
        y = h * h
        gx, gh = nd.gradients(y, [x, h])
        with nd.Session(graph=g) as s:
            rx, rh = s.run([gx, gh], {x: 2.0})
    assert rh == pytest.approx(12.0) and rx == pytest.approx(36.0)


def test_no_registered_gradient_raises_type_error():
    from nbdist.framework.op_def_registry import register_op, unchanged

    register_op("_TestNoGradOp", unchanged, num_inputs=1)
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [2])
        y = g.create_op("_TestNoGradOp", [x * 2.0], name="nograd").outputs[0]
        with pytest.raises(TypeError, match="nograd.*_TestNoGradOp"):
            nd.gradients(nd.reduce_sum(y), [x])


def test_registry():
    assert get_gradient_function("StopGradient") is None
    assert callable(get_gradient_function("MatMul"))
    with pytest.raises(LookupError):
        get_gradient_function("NoSuchOpType")
    with pytest.raises(KeyError):
        NotDifferentiable("MatMul")

    @gradients_lib.register_gradient("_TestCustomSquare")
    def _custom(op, grad):
        return [grad * 100.0]

    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [])
        y = nd.square(x)
        y.op._set_attr("_gradient_op_type", "_TestCustomSquare")
        (gx,) = nd.gradients(y, [x])
        with nd.Session(graph=g) as s:
            assert s.run(gx, {x: 3.0}) == pytest.approx(100.0)


def test_integer_paths_are_not_differentiated():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [3])
        n = nd.cast(nd.argmax(x), nd.float64)
        y = nd.reduce_sum(x) * n + nd.cast(nd.shape(x)[0], nd.float64) * x[0]
        (gx,) = nd.gradients(y, [x])
        with nd.Session(graph=g) as s:
            np.testing.assert_allclose(s.run(gx, {x: [1.0, 5.0, 2.0]}),
                                       [4.0, 1.0, 1.0])


def test_gate_gradients_and_colocation():
    g = nd.Graph()
    with g.as_default():
        with nd.device("/cpu:0"):
            x = nd.placeholder(nd.float64, [2])
            y = x * x
        (gx,) = nd.gradients(nd.reduce_sum(y), [x], gate_gradients=True,
                             colocate_gradients_with_ops=True)
        with nd.Session(graph=g) as s:
            np.testing.assert_allclose(s.run(gx, {x: [1.0, 2.0]}), [2.0, 4.0])


def test_hessians():
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float64, [2])
        y = nd.reduce_sum(x * x * x)
        (h,) = gradients_lib.hessians(y, [x])
        with nd.Session(graph=g) as s:
            np.testing.assert_allclose(s.run(h, {x: [1.0, 2.0]}),
                                       [[6.0, 0.0], [0.0, 12.0]])
