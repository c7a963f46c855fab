"""nd.nn.dilation2d / erosion2d against a direct NumPy loop, and their
gradients routed to the winning tap (checked by finite differences)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import nbdist as nd

RS = np.random.RandomState(0)


def ref_dilation(x, f, s, r, padding):
    n, h, w, c = x.shape
    kh, kw, _ = f.shape
    dims = []
    for size, k, st, rt in ((h, kh, s[0], r[0]), (w, kw, s[1], r[1])):
        ke = (k - 1) * rt + 1
        out = -(-(size - ke + 1) // st) if padding == "VALID" else -(-size // st)
        before = 0 if padding == "VALID" else max((out - 1) * st + ke - size, 0) // 2
        dims.append((out, before))
    res = np.full((n, dims[0][0], dims[1][0], c), -np.inf)
    for y, xx, i, j in itertools.product(range(dims[0][0]), range(dims[1][0]),
                                         range(kh), range(kw)):
        py, px = y * s[0] + i * r[0] - dims[0][1], xx * s[1] + j * r[1] - dims[1][1]
        if 0 <= py < h and 0 <= px < w:
            res[:, y, xx] = np.maximum(res[:, y, xx], x[:, py, px] + f[i, j])
    return res


@pytest.mark.parametrize("s,r,padding", [((1, 1), (1, 1), "SAME"),
                                         ((2, 1), (1, 2), "VALID")])
def test_dilation_erosion_and_gradients(s, r, padding):
    x, f = RS.rand(2, 6, 7, 2), RS.rand(2, 3, 2) * 0.3
    with nd.Graph().as_default():
        tx, tf_ = nd.constant(x), nd.constant(f)
        d = nd.nn.dilation2d(tx, tf_, [1, *s, 1], [1, *r, 1], padding)
        e = nd.nn.erosion2d(tx, tf_, [1, *s, 1], [1, *r, 1], padding)
        u = RS.rand(*d.shape.as_list())
        gx, gf = nd.gradients(nd.reduce_sum(d * u), [tx, tf_])
        with nd.Session() as sess:
            got, ero, gxv, gfv = sess.run([d, e, gx, gf])
    np.testing.assert_allclose(got, ref_dilation(x, f, s, r, padding))
    np.testing.assert_allclose(ero, -ref_dilation(-x, f[::-1, ::-1], s, r, padding))
    eps = 1e-6
    for idx in [(0, 2, 3, 1), (1, 4, 5, 0), (0, 0, 0, 0)]:
        up, down = x.copy(), x.copy()
        up[idx] += eps
        down[idx] -= eps
        num = np.sum((ref_dilation(up, f, s, r, padding) -
                      ref_dilation(down, f, s, r, padding)) * u) / (2 * eps)
        assert gxv[idx] == pytest.approx(num, abs=1e-6)
    for idx in [(0, 1, 1), (1, 2, 0)]:
        up, down = f.copy(), f.copy()
        up[idx] += eps
        down[idx] -= eps
        num = np.sum((ref_dilation(x, up, s, r, padding) -
                      ref_dilation(x, down, s, r, padding)) * u) / (2 * eps)
        assert gfv[idx] == pytest.approx(num, abs=1e-6)
