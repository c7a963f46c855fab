"""TF1's remaining tf.nn functions built from other ops, against NumPy (and the
constants TF documents): selu, swish/silu, crelu, relu_layer, log_poisson_loss,
moments from sufficient statistics, weighted moments, 1-D pooling, pool,
conv1d_transpose, depth_to_space/space_to_depth, approx_max_k/approx_min_k."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

RS = np.random.RandomState(0)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


def test_activations_and_their_gradients():
    x = np.linspace(-2, 2, 9)
    tx = nd.constant(x)
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    selu, sw, cr, g = run([nd.nn.selu(tx), nd.nn.swish(tx, beta=2.0),
                           nd.nn.crelu(tx[None]),
                           nd.gradients(nd.reduce_sum(nd.nn.silu(tx)), tx)[0]])
    np.testing.assert_allclose(selu, scale * np.where(x > 0, x, alpha * np.expm1(x)))
    sig = 1 / (1 + np.exp(-2 * x))
    np.testing.assert_allclose(sw, x * sig)
    np.testing.assert_allclose(cr, np.concatenate([np.maximum(x, 0),
                                                   np.maximum(-x, 0)])[None])
    s1 = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(g, s1 + x * s1 * (1 - s1), rtol=1e-6)
    w, b = RS.rand(9, 4), RS.rand(4) - 0.5
    np.testing.assert_allclose(run(nd.nn.relu_layer(x[None], w, b)),
                               np.maximum(x[None] @ w + b, 0))


def test_log_poisson_loss_with_and_without_stirling():
    t, li = np.array([0.5, 1.0, 2.0, 7.0]), np.array([0.1, -0.4, 0.2, 1.3])
    base, full = run([nd.nn.log_poisson_loss(t, li),
                      nd.nn.log_poisson_loss(t, li, compute_full_loss=True)])
    np.testing.assert_allclose(base, np.exp(li) - li * t)
    stirling = np.where(t > 1, t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t), 0)
    np.testing.assert_allclose(full, base + stirling)
    with pytest.raises(ValueError, match="same shape"):
        nd.nn.log_poisson_loss([1.0, 2.0], [1.0, 2.0, 3.0])


def test_moments_from_statistics_and_weights():
    x = RS.rand(4, 3, 2)
    c, m, v, _ = nd.nn.sufficient_statistics(x, [0, 2], shift=0.5)
    mean, var = nd.nn.normalize_moments(c, m, v, 0.5)
    w = RS.rand(4, 1, 2)
    wm, wv = nd.nn.weighted_moments(x, [0, 2], w)
    got = run([c, mean, var, wm, wv])
    assert got[0] == 8
    np.testing.assert_allclose(got[1], x.mean((0, 2)))
    np.testing.assert_allclose(got[2], x.var((0, 2)))
    wb = np.broadcast_to(w, x.shape)
    ref_m = (wb * x).sum((0, 2)) / wb.sum((0, 2))
    np.testing.assert_allclose(got[3], ref_m)
    np.testing.assert_allclose(got[4], (wb * (x - ref_m[None, :, None]) ** 2
                                        ).sum((0, 2)) / wb.sum((0, 2)))
    avg = run(nd.nn.compute_average_loss([1.0, 2.0, 3.0], sample_weight=[1.0, 0.0,
                                                                         2.0],
                                         global_batch_size=4))
    assert avg == pytest.approx(7.0 / 4)


def test_pool1d_pool_and_conv1d_transpose():
    y = RS.rand(2, 9, 3)
    mx, av, gen = run([nd.nn.max_pool1d(y, 2, 2, "VALID"),
                       nd.nn.avg_pool1d(y, [3], [3], "VALID"),
                       nd.nn.pool(y, [3], "MAX", "VALID", strides=[3])])
    np.testing.assert_allclose(mx, y[:, :8].reshape(2, 4, 2, 3).max(2))
    np.testing.assert_allclose(av, y.reshape(2, 3, 3, 3).mean(2))
    np.testing.assert_allclose(gen, y.reshape(2, 3, 3, 3).max(2))
    # conv1d_transpose is conv1d's adjoint: <conv1d(a), b> == <a, conv1d_T(b)>.
    f = RS.rand(3, 4, 2)                                     # [k, in=4, out=2]
    a, b = RS.rand(2, 10, 4), RS.rand(2, 5, 2)
    ca, tb = run([nd.nn.conv1d(a, f, 2, "SAME"),
                  nd.nn.conv1d_transpose(b, f, [2, 10, 4], 2)])
    np.testing.assert_allclose(np.sum(ca * b), np.sum(a * tb), rtol=1e-6)


def test_depth_space_and_approx_k():
    z = RS.rand(2, 4, 6, 8)
    d = nd.nn.depth_to_space(z, 2)
    assert d.shape.as_list() == [2, 8, 12, 2]
    got, back = run([d, nd.nn.space_to_depth(d, 2)])
    # Output pixel (2i + a, 2j + b) takes input depth (a * 2 + b) * 2 + c.
    np.testing.assert_array_equal(got[:, 1::2, 0::2, 1], z[:, :, :, (1 * 2 + 0) * 2 + 1])
    np.testing.assert_array_equal(back, z)
    with pytest.raises(ValueError, match="divisible by 4"):
        nd.nn.depth_to_space(np.zeros((1, 2, 2, 6)), 2)
    vals, idx = run(nd.nn.approx_min_k(z, 2, reduction_dimension=1))
    np.testing.assert_array_equal(vals, np.sort(z, axis=1)[:, :2])
    np.testing.assert_array_equal(idx, np.argsort(z, axis=1)[:, :2])
    top = run(nd.nn.approx_max_k(z, 3)[0])
    np.testing.assert_array_equal(top, -np.sort(-z, axis=-1)[..., :3])


def test_transposes_by_rank_atrous_and_space_to_batch():
    # atrous_conv2d_transpose is atrous_conv2d's adjoint.
    f = RS.rand(3, 3, 2, 4)                          # [kh, kw, in=2, out=4]
    a, b = RS.rand(1, 7, 8, 2), RS.rand(1, 7, 8, 4)
    ca, tb, t2 = run([nd.nn.atrous_conv2d(a, f, 2, "SAME"),
                      nd.nn.atrous_conv2d_transpose(b, f, [1, 7, 8, 2], 2, "SAME"),
                      nd.nn.conv_transpose(b, f, [1, 7, 8, 2], 1)])
    np.testing.assert_allclose(np.sum(ca * b), np.sum(a * tb), rtol=1e-6)
    ref2 = run(nd.nn.conv2d_transpose(b, f, [1, 7, 8, 2], [1, 1, 1, 1]))
    np.testing.assert_allclose(t2, ref2)
    x = RS.rand(2, 3, 4, 1)
    sb = run(nd.nn.space_to_batch(x, [[1, 0], [0, 0]], block_size=2))
    padded = np.pad(x, [(0, 0), (1, 0), (0, 0), (0, 0)])
    assert sb.shape == (8, 2, 2, 1)
    # Batch (i * 2 + j) * 2 + k holds image k's pixels at offset (i, j).
    np.testing.assert_array_equal(sb[(1 * 2 + 0) * 2 + 1], padded[1, 1::2, 0::2])
    assert nd.nn.depthwise_conv2d_backprop_input is \
        nd.nn.depthwise_conv2d_native_backprop_input
