"""nd.nn's 3-D convolution and pooling against a direct NumPy loop, their
gradients as adjoints (the ops are linear in each argument) and pooling's
routing of gradients."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import nbdist as nd

RS = np.random.RandomState(0)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def geometry(n, k, s, d, padding):
    ke = (k - 1) * d + 1
    out = -(-(n - ke + 1) // s) if padding == "VALID" else -(-n // s)
    before = 0 if padding == "VALID" else max((out - 1) * s + ke - n, 0) // 2
    return out, before


def ref_conv3d(x, f, s, padding, dil=(1, 1, 1)):
    geo = [geometry(x.shape[i + 1], f.shape[i], s[i], dil[i], padding)
           for i in range(3)]
    out = np.zeros((x.shape[0], *(g[0] for g in geo), f.shape[4]))
    for idx in itertools.product(*(range(g[0]) for g in geo)):
        for t in itertools.product(*(range(k) for k in f.shape[:3])):
            p = [idx[i] * s[i] + t[i] * dil[i] - geo[i][1] for i in range(3)]
            if all(0 <= p[i] < x.shape[i + 1] for i in range(3)):
                out[(slice(None), *idx)] += x[:, p[0], p[1], p[2]] @ f[t]
    return out


@pytest.mark.parametrize("strides,padding,dil", [
    ((1, 1, 1), "VALID", (1, 1, 1)), ((2, 1, 2), "SAME", (1, 1, 1)),
    ((1, 1, 1), "SAME", (2, 1, 1))])
def test_conv3d_values_and_gradients(strides, padding, dil):
    x, f = RS.rand(2, 5, 6, 4, 3), RS.rand(2, 3, 2, 3, 4)
    tx, tf_ = nd.constant(x), nd.constant(f)
    y = nd.nn.conv3d(tx, tf_, [1, *strides, 1], padding, dilations=[1, *dil, 1])
    ref = ref_conv3d(x, f, strides, padding, dil)
    assert y.shape.as_list() == list(ref.shape)
    u = RS.rand(*ref.shape)
    with nd.Session() as s:
        got, gx, gf = s.run([y, *nd.gradients(nd.reduce_sum(y * u), [tx, tf_])])
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    v, w = RS.rand(*x.shape), RS.rand(*f.shape)
    np.testing.assert_allclose(np.sum(gx * v), np.sum(u * ref_conv3d(v, f, strides,
                                                                     padding, dil)))
    np.testing.assert_allclose(np.sum(gf * w), np.sum(u * ref_conv3d(x, w, strides,
                                                                     padding, dil)))


def test_conv3d_transpose_is_the_adjoint():
    f = RS.rand(2, 2, 3, 3, 4)            # [kd, kh, kw, out=3, in=4]
    a, b = RS.rand(2, 5, 6, 4, 3), RS.rand(2, 3, 3, 2, 4)
    t = nd.nn.conv3d_transpose(b, f, [2, 5, 6, 4, 3], [1, 2, 2, 2, 1], "SAME")
    with nd.Session() as s:
        tb = s.run(t)
    np.testing.assert_allclose(np.sum(a * tb), np.sum(ref_conv3d(a, f, (2, 2, 2),
                                                                 "SAME") * b))
    with pytest.raises(ValueError, match="Depth of input"):
        nd.nn.conv3d(a, RS.rand(1, 1, 1, 2, 1), [1, 1, 1, 1, 1], "VALID")


def test_pool3d_values_and_gradients():
    x = RS.rand(2, 4, 6, 5, 3)
    tx = nd.constant(x)
    mp = nd.nn.max_pool3d(tx, [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "VALID")
    ap = nd.nn.avg_pool3d(tx, [1, 2, 3, 1, 1], [1, 2, 3, 1, 1], "SAME")
    with nd.Session() as s:
        m, a, gm, ga = s.run([mp, ap, nd.gradients(nd.reduce_sum(mp), tx)[0],
                              nd.gradients(nd.reduce_sum(ap), tx)[0]])
    blocks = x[:, :4, :6, :4].reshape(2, 2, 2, 3, 2, 2, 2, 3)
    np.testing.assert_allclose(m, blocks.max((2, 4, 6)))
    np.testing.assert_allclose(a, x.reshape(2, 2, 2, 2, 3, 5, 1, 3).mean((2, 4, 6)))
    # Max pooling routes each window's gradient to its maximum; the last
    # width column is outside every VALID window.
    assert gm.sum() == m.size and not gm[:, :, :, 4].any()
    np.testing.assert_allclose(gm[:, :4, :6, :4].reshape(blocks.shape).max(
        (2, 4, 6)), 1.0)
    np.testing.assert_allclose(ga, 1 / 6)
