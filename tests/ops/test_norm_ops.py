"""nd.nn normalisation, ranking and loss helpers: values against NumPy, gradients
against finite differences, TF's defaults and errors."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _fresh_graph():
    g = nd.Graph()
    with g.as_default():
        yield g


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    flat, gf = x.reshape(-1), g.reshape(-1)
    for k in range(flat.size):
        old = flat[k]
        flat[k] = old + eps
        hi = f(x)
        flat[k] = old - eps
        lo = f(x)
        flat[k] = old
        gf[k] = (hi - lo) / (2 * eps)
    return g


def check_grads(build, ref, arrays, atol=1e-6):
    """d(sum(u * y))/d(inputs) from nd.gradients against finite differences."""
    phs = [nd.placeholder(nd.float64, a.shape) for a in arrays]
    y = build(*phs)
    u = RNG.standard_normal(ref(*arrays).shape)
    grads = nd.gradients(nd.reduce_sum(y * u), phs)
    got = run(grads, dict(zip(phs, arrays)))
    for k, a in enumerate(arrays):
        def loss(v, k=k):
            args = list(arrays)
            args[k] = v
            return float(np.sum(ref(*args) * u))

        np.testing.assert_allclose(got[k], numeric_grad(loss, a.copy()), atol=atol,
                                   rtol=1e-5)


# -- fused_batch_norm ------------------------------------------------------------------
def ref_bn_train(x, scale, offset, eps=1e-3, axes=(0, 1, 2)):
    m = x.mean(axis=axes, keepdims=True)
    v = x.var(axis=axes, keepdims=True)
    shape = [1] * 4
    shape[3 if axes == (0, 1, 2) else 1] = -1
    return (x - m) / np.sqrt(v + eps) * scale.reshape(shape) + offset.reshape(shape)


def test_fused_batch_norm_training_returns_unbiased_variance():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    scale = RNG.random(5).astype(np.float32) + 0.5
    offset = RNG.standard_normal(5).astype(np.float32)
    y, mean, var = nd.nn.fused_batch_norm(x, scale, offset)
    assert y.op.type == "FusedBatchNormV3" and y.shape.as_list() == [2, 3, 4, 5]
    assert mean.shape.as_list() == [5] and var.shape.as_list() == [5]
    gy, gm, gv = run([y, mean, var])
    flat = x.reshape(-1, 5).astype(np.float64)
    np.testing.assert_allclose(gy, ref_bn_train(x.astype(np.float64), scale, offset),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gm, flat.mean(0), rtol=1e-5, atol=1e-6)
    # y uses the biased variance; the returned one is Bessel-corrected (n - 1).
    np.testing.assert_allclose(gv, flat.var(0, ddof=1), rtol=1e-5)


def test_fused_batch_norm_nchw_and_inference():
    x = RNG.standard_normal((2, 3, 4, 4))
    scale, offset = RNG.random(3) + 0.5, RNG.standard_normal(3)
    y, _, _ = nd.nn.fused_batch_norm(x, scale, offset, data_format="NCHW")
    np.testing.assert_allclose(run(y), ref_bn_train(x, scale, offset, axes=(0, 2, 3)),
                               atol=1e-10)
    mean, variance = RNG.standard_normal(3), RNG.random(3) + 0.1
    yi, mi, vi = nd.nn.fused_batch_norm(x, scale, offset, mean, variance,
                                        epsilon=0.01, data_format="NCHW",
                                        is_training=False)
    b = (slice(None), None, None)
    want = (x - mean[b]) / np.sqrt(variance[b] + 0.01) * scale[b] + offset[b]
    got = run([yi, mi, vi])
    np.testing.assert_allclose(got[0], want, atol=1e-10)
    np.testing.assert_allclose(got[1], mean)
    np.testing.assert_allclose(got[2], variance)


def test_fused_batch_norm_gradients():
    x = RNG.standard_normal((2, 3, 2, 3))
    scale, offset = RNG.random(3) + 0.5, RNG.standard_normal(3)
    check_grads(lambda a, s, o: nd.nn.fused_batch_norm(a, s, o)[0],
                lambda a, s, o: ref_bn_train(a, s, o), [x, scale, offset])
    mean, var = RNG.standard_normal(3), RNG.random(3) + 0.1
    check_grads(
        lambda a, s, o: nd.nn.fused_batch_norm(a, s, o, mean, var,
                                               is_training=False)[0],
        lambda a, s, o: (a - mean) / np.sqrt(var + 1e-3) * s + o, [x, scale, offset])


def test_fused_batch_norm_errors():
    with pytest.raises(ValueError, match="Shape must be rank 4 but is rank 3"):
        nd.nn.fused_batch_norm(nd.zeros([2, 3, 4]), nd.ones([4]), nd.zeros([4]))
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 4 and 3"):
        nd.nn.fused_batch_norm(nd.zeros([2, 3, 3, 4]), nd.ones([3]), nd.zeros([3]))
    with pytest.raises(ValueError, match="needs mean and variance"):
        nd.nn.fused_batch_norm(nd.zeros([2, 3, 3, 4]), nd.ones([4]), nd.zeros([4]),
                               is_training=False)


def test_batch_normalization_and_moments():
    x = RNG.standard_normal((4, 3, 5))
    mean, var = nd.nn.moments(nd.constant(x), [0, 1])
    scale, offset = RNG.random(5) + 0.5, RNG.standard_normal(5)
    y = nd.nn.batch_normalization(x, mean, var, offset, scale, 1e-3)
    got_m, got_v, got_y = run([mean, var, y])
    np.testing.assert_allclose(got_m, x.mean((0, 1)))
    np.testing.assert_allclose(got_v, x.var((0, 1)))
    np.testing.assert_allclose(got_y, (x - x.mean((0, 1))) / np.sqrt(
        x.var((0, 1)) + 1e-3) * scale + offset)
    mk, vk = nd.nn.moments(nd.constant(x), [0, 1], keep_dims=True)
    assert mk.shape.as_list() == [1, 1, 5] and vk.shape.as_list() == [1, 1, 5]
    m, v = RNG.standard_normal(5), RNG.random(5) + 0.1
    check_grads(lambda a, s, o: nd.nn.batch_normalization(a, m, v, o, s, 0.01),
                lambda a, s, o: (a - m) / np.sqrt(v + 0.01) * s + o,
                [x, scale, offset])
    y_none = nd.nn.batch_normalization(x, m, v, None, None, 0.01)
    np.testing.assert_allclose(run(y_none), (x - m) / np.sqrt(v + 0.01))


# -- LRN -------------------------------------------------------------------------------
def ref_lrn(x, r=5, bias=1.0, alpha=1.0, beta=0.5):
    c = x.shape[-1]
    out = np.empty_like(x)
    for i in range(c):
        lo, hi = max(0, i - r), min(c, i + r + 1)
        sq = np.sum(x[..., lo:hi] ** 2, axis=-1)
        out[..., i] = x[..., i] / (bias + alpha * sq) ** beta
    return out


def test_lrn_values_defaults_and_gradient():
    x = np.arange(1, 7, dtype=np.float32).reshape(1, 1, 1, 6)
    got = run(nd.nn.lrn(x, depth_radius=1, bias=1.0, alpha=0.1, beta=0.75))
    np.testing.assert_allclose(got, ref_lrn(x.astype(np.float64), 1, 1.0, 0.1, 0.75),
                               rtol=1e-6)
    y = RNG.standard_normal((2, 2, 3, 13))
    np.testing.assert_allclose(run(nd.nn.local_response_normalization(y)), ref_lrn(y))
    check_grads(lambda a: nd.nn.lrn(a, 2, 2.0, 0.3, 0.6),
                lambda a: ref_lrn(a, 2, 2.0, 0.3, 0.6), [y[:1, :1]])


# -- top_k -----------------------------------------------------------------------------
def test_top_k_sorted_with_ties_by_lower_index():
    values, indices = nd.nn.top_k([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 0.0]], k=3)
    assert values.shape.as_list() == [2, 3] and indices.dtype == nd.int32
    v, i = run([values, indices])
    np.testing.assert_array_equal(v, [[3, 3, 2], [5, 5, 5]])
    np.testing.assert_array_equal(i, [[1, 2, 3], [0, 1, 2]])
    v1, i1 = run(nd.nn.top_k(np.array([4, -7, 9, 4], np.int32)))
    assert v1.tolist() == [9] and i1.tolist() == [2]


def test_top_k_gradient_and_errors():
    x = RNG.standard_normal((2, 3, 6))
    check_grads(lambda a: nd.nn.top_k(a, 4)[0],
                lambda a: np.take_along_axis(a, np.argsort(-a, -1)[..., :4], -1), [x])
    with pytest.raises(ValueError, match="last dimension >= k = 3 but is 2"):
        nd.nn.top_k([1.0, 2.0], k=3)


# -- the small helpers -------------------------------------------------------------
def test_zero_fraction():
    z = nd.nn.zero_fraction([0.0, 1.0, 0.0, 2.0])
    assert z.dtype == nd.float32
    assert run(z) == 0.5


def test_weighted_cross_entropy_with_logits():
    x = RNG.standard_normal((3, 4)) * 5
    z = RNG.random((3, 4))
    q = 2.5
    want = z * -np.log(1 / (1 + np.exp(-x))) * q + (1 - z) * -np.log(
        1 - 1 / (1 + np.exp(-x)))
    got = run(nd.nn.weighted_cross_entropy_with_logits(labels=z, logits=x,
                                                       pos_weight=q))
    np.testing.assert_allclose(got, want, rtol=1e-10)
    big = run(nd.nn.weighted_cross_entropy_with_logits(
        targets=[1.0, 0.0], logits=[-1000.0, 1000.0], pos_weight=3.0))
    np.testing.assert_allclose(big, [3000.0, 1000.0])
    check_grads(lambda a: nd.nn.weighted_cross_entropy_with_logits(
        labels=z, logits=a, pos_weight=q), lambda a: z * np.log1p(np.exp(-a)) * q + (
        1 - z) * (a + np.log1p(np.exp(-a))), [x])


def test_sigmoid_cross_entropy_and_in_top_k_ties():
    x = RNG.standard_normal((2, 3)) * 3
    z = RNG.random((2, 3))
    got = run(nd.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x))
    np.testing.assert_allclose(got, np.maximum(x, 0) - x * z + np.log1p(
        np.exp(-np.abs(x))))
    # Classes tied at the k-th value all count as in the top k, as TF.
    hit = nd.nn.in_top_k([[0.1, 0.3, 0.3, 0.2]], [2], 1)
    assert run(hit).tolist() == [True]


def test_l2_normalize_softmax_axis_xw_plus_b_bias_add_nchw():
    x = RNG.standard_normal((2, 3, 4, 5))
    np.testing.assert_allclose(run(nd.nn.l2_normalize(x, axis=1)),
                               x / np.sqrt(np.sum(x * x, axis=1, keepdims=True)))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(run(nd.nn.softmax(x, axis=1)),
                               e / e.sum(axis=1, keepdims=True))
    w, b = RNG.standard_normal((5, 2)), RNG.standard_normal(2)
    np.testing.assert_allclose(run(nd.nn.xw_plus_b(x[0, 0], w, b)), x[0, 0] @ w + b)
    bias = RNG.standard_normal(3)
    np.testing.assert_allclose(run(nd.nn.bias_add(x, bias, data_format="NCHW")),
                               x + bias[None, :, None, None])
    check_grads(lambda a, c: nd.nn.bias_add(a, c, data_format="NCHW"),
                lambda a, c: a + c[None, :, None, None], [x[:1], bias])


def test_top_k_result_has_values_and_indices_fields():
    values, indices = nd.nn.top_k([[1.0, 3.0, 2.0]], k=2)
    result = nd.nn.top_k([[1.0, 3.0, 2.0]], k=2)
    with nd.Session() as s:
        v, i = s.run([result.values, result.indices])
        assert s.run(indices).tolist() == i.tolist() == [[1, 2]]
    assert v.tolist() == [[3.0, 2.0]] and values.shape.as_list() == [1, 2]
