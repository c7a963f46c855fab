"""nd.nn ops: kernels against NumPy, shapes, names and errors."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist.ops.nn_ops import broadcast_gradient_args, unsorted_segment_sum

RNG = np.random.default_rng(7)


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


@pytest.fixture(autouse=True)
def _fresh_graph():
    g = nd.Graph()
    with g.as_default():
        yield g


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# -- activations ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activations_match_numpy(dtype):
    x = (RNG.standard_normal((3, 4)) * 4).astype(dtype)
    got = run([nd.nn.relu(x), nd.nn.relu6(x), nd.nn.elu(x), nd.nn.softplus(x),
               nd.nn.leaky_relu(x, alpha=0.1), nd.nn.sigmoid(x), nd.nn.tanh(x)])
    want = [np.maximum(x, 0), np.clip(x, 0, 6), np.where(x > 0, x, np.expm1(x)),
            np.log1p(np.exp(x)), np.where(x > 0, x, 0.1 * x), 1 / (1 + np.exp(-x)),
            np.tanh(x)]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_relu_of_ints_and_names():
    y = nd.nn.relu(nd.constant([-2, 3]))
    assert y.op.type == "Relu" and y.op.name == "Relu" and y.dtype == nd.int32
    assert run(y).tolist() == [0, 3]
    assert nd.nn.relu(nd.constant([1.0]), name="act").op.name == "act"


def test_softplus_is_stable_for_large_inputs():
    x = np.array([-1000.0, 0.0, 1000.0])
    np.testing.assert_allclose(run(nd.nn.softplus(x)), [0.0, np.log(2), 1000.0])


# -- softmax ---------------------------------------------------------------------------
def test_softmax_and_log_softmax():
    x = RNG.standard_normal((2, 3, 5)).astype(np.float32)
    sm, lsm = run([nd.nn.softmax(x), nd.nn.log_softmax(x)])
    np.testing.assert_allclose(sm, np_softmax(x), rtol=1e-5)
    np.testing.assert_allclose(lsm, np.log(np_softmax(x)), rtol=1e-5, atol=1e-6)
    assert sm.shape == (2, 3, 5)


def test_softmax_other_axis():
    x = RNG.standard_normal((3, 4))
    out = nd.nn.softmax(x, axis=0)
    assert out.shape.as_list() == [3, 4]
    np.testing.assert_allclose(run(out), np_softmax(x, axis=0))
    np.testing.assert_allclose(run(nd.nn.log_softmax(x, dim=0)),
                               np.log(np_softmax(x, axis=0)))


def test_softmax_is_stable():
    x = np.array([[1000.0, 1000.0, -1000.0], [-1e4, 0.0, 1e4]], np.float32)
    out = run(nd.nn.softmax(x))
    np.testing.assert_allclose(out, [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    assert np.all(np.isfinite(run(nd.nn.log_softmax(x))))


def test_softmax_needs_rank_1():
    with pytest.raises(ValueError):
        nd.nn.softmax(nd.constant(1.0))


# -- cross-entropies -------------------------------------------------------------------
def test_softmax_cross_entropy_matches_numpy():
    logits = RNG.standard_normal((4, 5)) * 3
    labels = RNG.dirichlet(np.ones(5), size=4)
    loss = nd.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
    assert loss.shape.as_list() == [4]
    assert loss.op.type == "SoftmaxCrossEntropyWithLogits"
    assert loss.op.name == "softmax_cross_entropy_with_logits"
    want = -np.sum(labels * np.log(np_softmax(logits)), axis=1)
    np.testing.assert_allclose(run(loss), want)
    backprop = run(loss.op.outputs[1])
    np.testing.assert_allclose(backprop, np_softmax(logits) - labels, atol=1e-12)
    v1 = nd.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    np.testing.assert_allclose(run(v1), want)


def test_softmax_cross_entropy_is_stable():
    logits = np.array([[1e4, 0.0], [-1e4, 1e4]], np.float32)
    labels = np.array([[1.0, 0.0], [1.0, 0.0]], np.float32)
    out = run(nd.nn.softmax_cross_entropy_with_logits_v2(labels=labels,
                                                         logits=logits))
    np.testing.assert_allclose(out, [0.0, 2e4])


def test_softmax_cross_entropy_higher_rank_and_axis():
    logits = RNG.standard_normal((2, 3, 4))
    labels = RNG.dirichlet(np.ones(4), size=(2, 3))
    loss = nd.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
    assert loss.shape.as_list() == [2, 3]
    np.testing.assert_allclose(
        run(loss), -np.sum(labels * np.log(np_softmax(logits)), axis=-1))
    t_loss = nd.nn.softmax_cross_entropy_with_logits(
        labels=labels.transpose(2, 0, 1), logits=logits.transpose(2, 0, 1), dim=0)
    np.testing.assert_allclose(run(t_loss), run(loss))


def test_cross_entropy_needs_named_arguments():
    with pytest.raises(ValueError, match="named arguments"):
        nd.nn.softmax_cross_entropy_with_logits([[1.0]], [[1.0]])
    with pytest.raises(ValueError, match="named arguments"):
        nd.nn.sparse_softmax_cross_entropy_with_logits([0], [[1.0]])


def test_softmax_cross_entropy_shape_mismatch():
    with pytest.raises(ValueError):
        nd.nn.softmax_cross_entropy_with_logits_v2(labels=np.ones((2, 3)),
                                                   logits=np.ones((2, 4)))


def test_sparse_softmax_cross_entropy():
    logits = RNG.standard_normal((3, 4)).astype(np.float32)
    labels = np.array([0, 3, 1])
    loss = nd.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                          logits=logits)
    assert loss.shape.as_list() == [3] and loss.dtype == nd.float32
    want = -np.log(np_softmax(logits)[np.arange(3), labels])
    np.testing.assert_allclose(run(loss), want, rtol=1e-5)
    onehot = np.eye(4)[labels]
    np.testing.assert_allclose(run(loss.op.outputs[1]), np_softmax(logits) - onehot,
                               atol=1e-6)


def test_sparse_softmax_cross_entropy_higher_rank_and_errors():
    logits = RNG.standard_normal((2, 3, 4))
    labels = np.array([[0, 1, 2], [3, 3, 0]])
    loss = nd.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                          logits=logits)
    assert loss.shape.as_list() == [2, 3]
    sm = np_softmax(logits)
    want = -np.log(np.take_along_axis(sm, labels[..., None], -1)[..., 0])
    np.testing.assert_allclose(run(loss), want)
    with pytest.raises(ValueError, match="Rank mismatch"):
        nd.nn.sparse_softmax_cross_entropy_with_logits(labels=[[0]],
                                                       logits=np.ones((1, 2)))
    bad = nd.placeholder(nd.int32, [2])
    loss = nd.nn.sparse_softmax_cross_entropy_with_logits(labels=bad,
                                                          logits=np.ones((2, 3)))
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="label value of 3 which is outside the valid range"):
        run(loss, {bad: [0, 3]})


def test_sigmoid_cross_entropy():
    x = RNG.standard_normal((2, 3)) * 10
    z = RNG.uniform(size=(2, 3))
    want = np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))
    out = nd.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x)
    np.testing.assert_allclose(run(out), want)
    big = run(nd.nn.sigmoid_cross_entropy_with_logits(labels=[1.0, 0.0],
                                                      logits=[-1e4, -1e4]))
    np.testing.assert_allclose(big, [1e4, 0.0])


# -- bias_add, l2_loss, misc -----------------------------------------------------------
def test_bias_add():
    v = RNG.standard_normal((2, 3, 4))
    b = RNG.standard_normal(4)
    out = nd.nn.bias_add(v, b)
    assert out.op.type == "BiasAdd" and out.op.name == "BiasAdd"
    np.testing.assert_allclose(run(out), v + b)
    bc = RNG.standard_normal(3)
    np.testing.assert_allclose(run(nd.nn.bias_add(v, bc, data_format="NCHW")),
                               v + bc[None, :, None])
    with pytest.raises(ValueError):
        nd.nn.bias_add(v, np.ones(3))
    with pytest.raises(ValueError):
        nd.nn.bias_add(np.ones(3), np.ones(3))


def test_bias_add_runtime_mismatch():
    v = nd.placeholder(nd.float64, [None, None])
    out = nd.nn.bias_add(v, np.ones(3))
    with pytest.raises(nd.errors.InvalidArgumentError, match="biases"):
        run(out, {v: np.ones((2, 4))})


def test_bias_add_grad_kernel():
    from nbdist.ops.nn_ops import bias_add_grad

    g = RNG.standard_normal((2, 3, 4))
    np.testing.assert_allclose(run(bias_add_grad(g)), g.sum(axis=(0, 1)))
    np.testing.assert_allclose(run(bias_add_grad(g, data_format="NCHW")),
                               g.sum(axis=(0, 2)))


def test_l2_loss():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    out = nd.nn.l2_loss(x)
    assert out.shape.as_list() == [] and out.dtype == nd.float32
    assert out.op.name == "L2Loss"
    np.testing.assert_allclose(run(out), np.sum(x ** 2) / 2, rtol=1e-5)


def test_xw_plus_b_l2_normalize_moments_embedding():
    x, w, b = RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4)), np.ones(4)
    np.testing.assert_allclose(run(nd.nn.xw_plus_b(x, w, b)), x @ w + b)
    np.testing.assert_allclose(run(nd.nn.l2_normalize(x, axis=1)),
                               x / np.linalg.norm(x, axis=1, keepdims=True))
    mean, var = run(nd.nn.moments(nd.constant(x), axes=[0]))
    np.testing.assert_allclose(mean, x.mean(0))
    np.testing.assert_allclose(var, x.var(0))
    params = RNG.standard_normal((5, 2))
    np.testing.assert_allclose(run(nd.nn.embedding_lookup(params, [4, 0, 4])),
                               params[[4, 0, 4]])


def test_in_top_k():
    pred = np.array([[0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.5, 0.2, 0.3]], np.float32)
    out = nd.nn.in_top_k(pred, np.array([1, 0, 1]), 2)
    assert run(out).tolist() == [True, True, False]


# -- dropout ---------------------------------------------------------------------------
def test_dropout_keep_prob_and_rate():
    x = np.ones((100, 50), np.float32)
    y = nd.nn.dropout(x, keep_prob=0.25, seed=1)
    assert y.shape.as_list() == [100, 50]
    out = run(y)
    assert set(np.unique(out)) <= {0.0, 4.0}
    assert 0.2 < np.mean(out > 0) < 0.3
    out2 = run(nd.nn.dropout(x, rate=0.75, seed=1))
    assert set(np.unique(out2)) <= {0.0, 4.0}


def test_dropout_keep_prob_placeholder_and_noise_shape():
    x = np.ones((4, 6))
    kp = nd.placeholder(nd.float64, [])
    y = nd.nn.dropout(x, keep_prob=kp, noise_shape=[4, 1])
    with nd.Session() as s:
        np.testing.assert_allclose(s.run(y, {kp: 1.0}), x)
        out = s.run(y, {kp: 0.5})
    assert set(np.unique(out)) <= {0.0, 2.0}
    assert all(len(set(row)) == 1 for row in out)  # one mask value per row


def test_dropout_keep_prob_one_is_identity_and_errors():
    x = nd.constant([1.0, 2.0])
    assert nd.nn.dropout(x, keep_prob=1.0) is x
    with pytest.raises(ValueError):
        nd.nn.dropout(x, keep_prob=0.0)
    with pytest.raises(ValueError):
        nd.nn.dropout(x, rate=1.0)
    with pytest.raises(ValueError):
        nd.nn.dropout(x, keep_prob=0.5, rate=0.5)
    with pytest.raises(ValueError):
        nd.nn.dropout(nd.constant([1, 2]), keep_prob=0.5)


def test_dropout_unknown_shape():
    x = nd.placeholder(nd.float32, [None, 3])
    y = nd.nn.dropout(x, keep_prob=0.5)
    assert y.shape.as_list() == [None, 3]
    assert run(y, {x: np.ones((5, 3))}).shape == (5, 3)


# -- helper ops used by gradients ------------------------------------------------------
def test_unsorted_segment_sum():
    data = RNG.standard_normal((4, 2))
    out = unsorted_segment_sum(data, [0, 2, 0, 2], 3)
    assert out.shape.as_list() == [3, 2]
    want = np.zeros((3, 2))
    np.add.at(want, [0, 2, 0, 2], data)
    np.testing.assert_allclose(run(out), want)


def test_broadcast_gradient_args_static_shapes():
    r0, r1 = broadcast_gradient_args([2, 1, 3], [4, 1])
    a, b = run([r0, r1])
    assert a.tolist() == [1] and b.tolist() == [0, 2]


def test_nn_module_exports():
    import nbdist.nn as nn_module

    for name in nn_module.__all__:
        assert callable(getattr(nd.nn, name)), name
