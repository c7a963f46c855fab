"""nd.nn convolutions and pools: values against plain NumPy loops, gradients
against finite differences, TF's shapes and build-time errors."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _fresh_graph():
    g = nd.Graph()
    with g.as_default():
        yield g


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


# -- plain references (NHWC; loops over output pixels, written for clarity) ----------
def pads(size, k, s, d, padding):
    eff = (k - 1) * d + 1
    if padding == "VALID":
        return (size - eff) // s + 1, 0, 0
    out = -(-size // s)
    total = max((out - 1) * s + eff - size, 0)
    return out, total // 2, total - total // 2


def ref_windows(x, kh, kw, s, padding, d=(1, 1), fill=0.0):
    """[(i, j, window [N, kh, kw, C])] for every output pixel."""
    h, w = x.shape[1:3]
    ho, t, b = pads(h, kh, s[0], d[0], padding)
    wo, left, r = pads(w, kw, s[1], d[1], padding)
    xp = np.pad(x, ((0, 0), (t, b), (left, r), (0, 0)), constant_values=fill)
    out = []
    for i in range(ho):
        for j in range(wo):
            rows = [i * s[0] + a * d[0] for a in range(kh)]
            cols = [j * s[1] + e * d[1] for e in range(kw)]
            out.append((i, j, xp[:, rows][:, :, cols]))
    return ho, wo, out


def ref_conv2d(x, f, s=(1, 1), padding="SAME", d=(1, 1)):
    kh, kw, _, o = f.shape
    ho, wo, wins = ref_windows(x, kh, kw, s, padding, d)
    y = np.zeros((x.shape[0], ho, wo, o))
    for i, j, win in wins:
        y[:, i, j] = np.einsum("nabc,abco->no", win, f)
    return y


def ref_depthwise(x, f, s=(1, 1), padding="SAME", d=(1, 1)):
    kh, kw, c, m = f.shape
    ho, wo, wins = ref_windows(x, kh, kw, s, padding, d)
    y = np.zeros((x.shape[0], ho, wo, c * m))
    for i, j, win in wins:
        y[:, i, j] = np.einsum("nabc,abcm->ncm", win, f).reshape(x.shape[0], -1)
    return y


def ref_pool(x, k, s, padding, kind):
    ho, wo, wins = ref_windows(x, k[0], k[1], s, padding,
                               fill=np.nan)
    y = np.zeros((x.shape[0], ho, wo, x.shape[3]))
    for i, j, win in wins:
        y[:, i, j] = (np.nanmax if kind == "max" else np.nanmean)(win, axis=(1, 2))
    return y


def numeric_grad(f, x, eps=1e-6):
    """Central differences of scalar f at every element of x."""
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
    u = RNG.standard_normal(y.shape.as_list())
    grads = nd.gradients(nd.reduce_sum(y * u), phs)
    got = run(grads, dict(zip(phs, arrays)))
    for k, a in enumerate(arrays):
        def loss(v, k=k):
            args = list(arrays)
            args[k] = v
            return float(np.sum(ref(*args) * u))

        want = numeric_grad(loss, a.copy())
        np.testing.assert_allclose(got[k], want, atol=atol, rtol=1e-5)


# -- conv2d ----------------------------------------------------------------------------
CASES = [((1, 1), "SAME", (1, 1)), ((1, 1), "VALID", (1, 1)), ((2, 2), "SAME", (1, 1)),
         ((2, 3), "VALID", (1, 1)), ((3, 2), "SAME", (1, 1)), ((1, 1), "SAME", (2, 2)),
         ((1, 1), "VALID", (2, 1))]


@pytest.mark.parametrize("s,padding,d", CASES)
def test_conv2d_matches_numpy_both_layouts(s, padding, d):
    x = RNG.standard_normal((2, 7, 8, 3)).astype(np.float32)
    f = RNG.standard_normal((3, 2, 3, 4)).astype(np.float32)
    y = nd.nn.conv2d(x, f, [1, *s, 1], padding, dilations=[1, *d, 1])
    y_nchw = nd.nn.conv2d(x.transpose(0, 3, 1, 2), f, [1, 1, *s], padding,
                          data_format="NCHW", dilations=[1, 1, *d])
    want = ref_conv2d(x, f, s, padding, d)
    assert y.shape.as_list() == list(want.shape)
    assert y_nchw.shape.as_list() == list(want.transpose(0, 3, 1, 2).shape)
    a, b = run([y, y_nchw])
    assert a.dtype == np.float32
    np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(b.transpose(0, 2, 3, 1), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("s,padding,d", CASES)
def test_conv2d_gradients_match_finite_differences(s, padding, d):
    x = RNG.standard_normal((2, 5, 6, 2))
    f = RNG.standard_normal((3, 2, 2, 3))
    check_grads(lambda a, b: nd.nn.conv2d(a, b, [1, *s, 1], padding,
                                          dilations=[1, *d, 1]),
                lambda a, b: ref_conv2d(a, b, s, padding, d), [x, f])


def test_atrous_conv2d_is_a_dilated_conv():
    x = RNG.standard_normal((1, 7, 7, 2))
    f = RNG.standard_normal((3, 3, 2, 2))
    np.testing.assert_allclose(run(nd.nn.atrous_conv2d(x, f, 2, "SAME")),
                               ref_conv2d(x, f, d=(2, 2)), atol=1e-12)


def test_conv2d_nchw_gradients():
    x = RNG.standard_normal((1, 2, 5, 5))
    f = RNG.standard_normal((2, 2, 2, 3))
    check_grads(
        lambda a, b: nd.nn.conv2d(a, b, [1, 1, 2, 2], "SAME", data_format="NCHW"),
        lambda a, b: ref_conv2d(a.transpose(0, 2, 3, 1), b, (2, 2)).transpose(
            0, 3, 1, 2), [x, f])


def test_conv2d_explicit_padding():
    x = RNG.standard_normal((1, 4, 4, 2))
    f = RNG.standard_normal((3, 3, 2, 1))
    y = nd.nn.conv2d(x, f, 1, [[0, 0], [1, 2], [0, 1], [0, 0]])
    assert y.shape.as_list() == [1, 5, 3, 1]
    xp = np.pad(x, ((0, 0), (1, 2), (0, 1), (0, 0)))
    np.testing.assert_allclose(run(y), ref_conv2d(xp, f, padding="VALID"), atol=1e-12)


def test_conv2d_backprops_are_public_ops():
    x = RNG.standard_normal((2, 6, 6, 3))
    f = RNG.standard_normal((3, 3, 3, 4))
    dy = RNG.standard_normal((2, 3, 3, 4))
    dx = nd.nn.conv2d_backprop_input([2, 6, 6, 3], f, dy, [1, 2, 2, 1], "SAME")
    df = nd.nn.conv2d_backprop_filter(x, [3, 3, 3, 4], dy, [1, 2, 2, 1], "SAME")
    assert dx.op.type == "Conv2DBackpropInput" and df.op.type == "Conv2DBackpropFilter"
    assert dx.shape.as_list() == [2, 6, 6, 3] and df.shape.as_list() == [3, 3, 3, 4]
    got_dx, got_df = run([dx, df])
    # <dy, conv(x, f)> is bilinear: its derivatives are the two backprops.
    want_dx = numeric_grad(lambda v: np.sum(ref_conv2d(v, f, (2, 2)) * dy), x.copy())
    want_df = numeric_grad(lambda v: np.sum(ref_conv2d(x, v, (2, 2)) * dy), f.copy())
    np.testing.assert_allclose(got_dx, want_dx, atol=1e-6)
    np.testing.assert_allclose(got_df, want_df, atol=1e-6)


def test_conv2d_second_order_gradient():
    # d/dx of sum(d(sum(conv*u))/df * v): conv is bilinear, so the result is
    # conv2d_backprop_input of u with v.
    x = RNG.standard_normal((1, 4, 4, 2))
    f = RNG.standard_normal((2, 2, 2, 2))
    u = RNG.standard_normal((1, 4, 4, 2))
    v = RNG.standard_normal((2, 2, 2, 2))
    px = nd.placeholder(nd.float64, x.shape)
    y = nd.nn.conv2d(px, f, [1, 1, 1, 1], "SAME")
    (gf,) = nd.gradients(nd.reduce_sum(y * u), [y.op.inputs[1]])
    (gx,) = nd.gradients(nd.reduce_sum(gf * v), [px])
    want = numeric_grad(lambda a: np.sum(ref_conv2d(a, v) * u), x.copy())
    np.testing.assert_allclose(run(gx, {px: x}), want, atol=1e-6)


def test_conv2d_transpose_is_the_input_gradient():
    x = RNG.standard_normal((2, 3, 3, 4))
    f = RNG.standard_normal((3, 3, 2, 4))   # [kh, kw, out, in]
    y = nd.nn.conv2d_transpose(x, f, [2, 6, 6, 2], [1, 2, 2, 1], "SAME")
    assert y.shape.as_list() == [2, 6, 6, 2]
    want = numeric_grad(lambda v: np.sum(ref_conv2d(v, f, (2, 2)) * x),
                        np.zeros((2, 6, 6, 2)))
    np.testing.assert_allclose(run(y), want, atol=1e-6)
    check_grads(lambda a, b: nd.nn.conv2d_transpose(a, b, [2, 6, 6, 2],
                                                    [1, 2, 2, 1], "SAME"),
                ref_conv2d_transpose, [x, f])


def ref_conv2d_transpose(x, f):
    """Stride 2, SAME, to 6x6: each input pixel scatters f into the output."""
    n, h, w, _ = x.shape
    full = np.zeros((n, 2 * (h - 1) + f.shape[0], 2 * (w - 1) + f.shape[1],
                     f.shape[2]))
    for i in range(h):
        for j in range(w):
            full[:, 2 * i:2 * i + f.shape[0], 2 * j:2 * j + f.shape[1]] += np.einsum(
                "nc,aboc->nabo", x[:, i, j], f)
    return full[:, :6, :6]   # SAME: total padding 1, all of it after


def test_conv1d_and_convolution():
    x = RNG.standard_normal((2, 9, 3))
    f = RNG.standard_normal((3, 3, 5))
    y = nd.nn.conv1d(x, f, stride=2, padding="SAME")
    want = ref_conv2d(x[:, None], f[None], (1, 2))[:, 0]
    assert y.shape.as_list() == [2, 5, 5]
    np.testing.assert_allclose(run(y), want, atol=1e-12)
    x2 = RNG.standard_normal((1, 5, 5, 2))
    f2 = RNG.standard_normal((2, 2, 2, 3))
    np.testing.assert_allclose(run(nd.nn.convolution(x2, f2, "VALID")),
                               ref_conv2d(x2, f2, padding="VALID"), atol=1e-12)


# -- depthwise / separable -------------------------------------------------------------
@pytest.mark.parametrize("s,padding,d", [((1, 1), "SAME", (1, 1)),
                                         ((2, 2), "VALID", (1, 1)),
                                         ((1, 1), "SAME", (2, 2))])
def test_depthwise_conv2d_values_and_gradients(s, padding, d):
    x = RNG.standard_normal((2, 5, 6, 3))
    f = RNG.standard_normal((2, 3, 3, 2))
    y = nd.nn.depthwise_conv2d(x, f, [1, *s, 1], padding, rate=d)
    want = ref_depthwise(x, f, s, padding, d)
    assert y.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(run(y), want, atol=1e-12)
    check_grads(lambda a, b: nd.nn.depthwise_conv2d_native(
        a, b, [1, *s, 1], padding, dilations=[1, *d, 1]),
        lambda a, b: ref_depthwise(a, b, s, padding, d), [x, f])


def test_separable_conv2d():
    x = RNG.standard_normal((1, 5, 5, 2))
    dw = RNG.standard_normal((3, 3, 2, 2))
    pw = RNG.standard_normal((1, 1, 4, 3))
    y = nd.nn.separable_conv2d(x, dw, pw, [1, 1, 1, 1], "SAME")
    np.testing.assert_allclose(run(y), ref_conv2d(ref_depthwise(x, dw), pw),
                               atol=1e-12)


# -- pools -----------------------------------------------------------------------------
POOLS = [((2, 2), (2, 2), "VALID"), ((3, 3), (2, 2), "SAME"), ((3, 2), (1, 2), "SAME"),
         ((2, 3), (3, 1), "VALID")]


@pytest.mark.parametrize("k,s,padding", POOLS)
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool_values_and_gradients(k, s, padding, kind):
    x = RNG.standard_normal((2, 7, 6, 3))
    op = nd.nn.max_pool if kind == "max" else nd.nn.avg_pool
    y = op(x.astype(np.float32), [1, *k, 1], [1, *s, 1], padding)
    y_nchw = op(x.transpose(0, 3, 1, 2), [1, 1, *k], [1, 1, *s], padding,
                data_format="NCHW")
    want = ref_pool(x, k, s, padding, kind)
    assert y.shape.as_list() == list(want.shape)
    a, b = run([y, y_nchw])
    np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.transpose(0, 2, 3, 1), want, atol=1e-12)
    check_grads(lambda v: op(v, [1, *k, 1], [1, *s, 1], padding),
                lambda v: ref_pool(v, k, s, padding, kind), [x[:1]])


def test_same_avg_pool_divides_by_real_elements():
    x = np.ones((1, 3, 3, 1), np.float32)
    y = run(nd.nn.avg_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "SAME"))
    np.testing.assert_array_equal(y, np.ones((1, 2, 2, 1)))
    x[0, 2, 2, 0] = 5.0
    a, m = run([nd.nn.avg_pool2d(x, 2, 2, "SAME"), nd.nn.max_pool2d(x, 2, 2, "SAME")])
    assert a[0, 1, 1, 0] == 5.0 and m[0, 1, 1, 0] == 5.0   # a 1-pixel window


def test_max_pool_grad_goes_to_the_first_maximum():
    x = nd.constant(np.array([[1.0, 3.0], [3.0, 3.0]]).reshape(1, 2, 2, 1))
    y = nd.nn.max_pool(x, [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
    (g,) = nd.gradients(y, [x])
    assert g.op.type == "MaxPoolGrad"
    np.testing.assert_array_equal(run(g).ravel(), [0, 1, 0, 0])


def test_max_pool_grad_grad():
    x = RNG.standard_normal((1, 4, 4, 2))
    px = nd.placeholder(nd.float64, x.shape)
    y = nd.nn.max_pool(px, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    u = nd.placeholder(nd.float64, [1, 2, 2, 2])
    (gx,) = nd.gradients(nd.reduce_sum(y * u), [px])
    v = RNG.standard_normal(x.shape)
    (gu,) = nd.gradients(nd.reduce_sum(gx * v), [u])
    # d/du <v, maxpool_grad(u)> = v picked at each window's argmax.
    got = run(gu, {px: x, u: np.zeros((1, 2, 2, 2))})
    win = x.reshape(1, 2, 2, 2, 2, 2).transpose(0, 1, 3, 5, 2, 4).reshape(1, 2, 2, 2, 4)
    vw = v.reshape(1, 2, 2, 2, 2, 2).transpose(0, 1, 3, 5, 2, 4).reshape(1, 2, 2, 2, 4)
    want = np.take_along_axis(vw, win.argmax(-1)[..., None], -1)[..., 0]
    np.testing.assert_allclose(got, want)


def test_max_pool_with_argmax():
    x = RNG.standard_normal((2, 4, 4, 3)).astype(np.float32)
    y, arg = nd.nn.max_pool_with_argmax(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    assert arg.dtype == nd.int64
    yv, av = run([y, arg])
    np.testing.assert_allclose(yv, ref_pool(x.astype(np.float64), (2, 2), (2, 2),
                                            "VALID", "max"), rtol=1e-6)
    # The flat index within one image ((y * W + x) * C + c) holds the maximum.
    np.testing.assert_array_equal(
        np.take_along_axis(x.reshape(2, -1), av.reshape(2, -1), 1), yv.reshape(2, -1))


# -- shapes and errors ---------------------------------------------------------------
def test_static_shapes_with_unknown_dims():
    x = nd.placeholder(nd.float32, [None, 28, 28, 1])
    y = nd.nn.conv2d(x, nd.zeros([5, 5, 1, 32]), [1, 1, 1, 1], "SAME")
    assert y.shape.as_list() == [None, 28, 28, 32]
    p = nd.nn.max_pool(y, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    assert p.shape.as_list() == [None, 14, 14, 32]
    v = nd.nn.conv2d(p, nd.zeros([5, 5, 32, 64]), [1, 3, 3, 1], "VALID")
    assert v.shape.as_list() == [None, 4, 4, 64]


def test_wrong_rank_names_the_op():
    with pytest.raises(ValueError, match=r"Shape must be rank 4 but is rank 3 for "
                       r"'Conv2D'"):
        nd.nn.conv2d(nd.zeros([5, 5, 3]), nd.zeros([2, 2, 3, 1]), [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="Shape must be rank 4 but is rank 3 for "
                       "'MaxPool'"):
        nd.nn.max_pool(nd.zeros([5, 5, 3]), [1, 2, 2, 1], [1, 2, 2, 1], "SAME")


def test_unknown_padding_is_rejected():
    with pytest.raises(ValueError, match=r"padding.*FOO.*\"SAME\", \"VALID\""):
        nd.nn.conv2d(nd.zeros([1, 5, 5, 3]), nd.zeros([2, 2, 3, 1]), 1, "FOO")
    with pytest.raises(ValueError, match=r"padding.*MaxPool.*FOO"):
        nd.nn.max_pool(nd.zeros([1, 5, 5, 3]), 2, 2, "FOO")


def test_channel_mismatch_and_too_small_input():
    with pytest.raises(ValueError, match=r"Depth of input \(3\).*filter \(4\)"):
        nd.nn.conv2d(nd.zeros([1, 5, 5, 3]), nd.zeros([2, 2, 4, 1]), 1, "SAME")
    with pytest.raises(ValueError, match="Negative dimension size caused by "
                       "subtracting 7 from 5"):
        nd.nn.conv2d(nd.zeros([1, 5, 5, 3]), nd.zeros([7, 7, 3, 1]), 1, "VALID")
    with pytest.raises(ValueError, match="strides should be of length 1, 2 or 4"):
        nd.nn.conv2d(nd.zeros([1, 5, 5, 3]), nd.zeros([2, 2, 3, 1]), [1, 1, 1],
                     "SAME")


def test_run_time_channel_mismatch_is_invalid_argument():
    x = nd.placeholder(nd.float32, [None, None, None, None])
    y = nd.nn.conv2d(x, np.zeros((2, 2, 4, 1), np.float32), 1, "SAME")
    with pytest.raises(nd.errors.InvalidArgumentError, match="depth"):
        run(y, {x: np.zeros((1, 3, 3, 3), np.float32)})


@pytest.mark.parametrize("s,padding,d", [((1, 1), "SAME", (1, 1)),
                                         ((2, 2), "SAME", (1, 1)),
                                         ((2, 1), "VALID", (1, 2))])
def test_conv2d_wide_channels(s, padding, d):
    # 16+ channels take the one-GEMM-per-filter-tap path. The gradients are
    # checked by the adjoint identity of a bilinear map:
    # <d/dx sum(u * conv(x, f)), v> == sum(u * conv(v, f)), likewise for f.
    x = RNG.standard_normal((2, 7, 6, 16))
    f = RNG.standard_normal((3, 2, 16, 17))
    px, pf = nd.placeholder(nd.float64, x.shape), nd.placeholder(nd.float64, f.shape)
    y = nd.nn.conv2d(px, pf, [1, *s, 1], padding, dilations=[1, *d, 1])
    want = ref_conv2d(x, f, s, padding, d)
    u = RNG.standard_normal(want.shape)
    gx, gf = nd.gradients(nd.reduce_sum(y * u), [px, pf])
    got_y, got_gx, got_gf = run([y, gx, gf], {px: x, pf: f})
    np.testing.assert_allclose(got_y, want, atol=1e-10)
    for _ in range(3):
        v, w = RNG.standard_normal(x.shape), RNG.standard_normal(f.shape)
        np.testing.assert_allclose(np.sum(got_gx * v),
                                   np.sum(u * ref_conv2d(v, f, s, padding, d)))
        np.testing.assert_allclose(np.sum(got_gf * w),
                                   np.sum(u * ref_conv2d(x, w, s, padding, d)))


@pytest.mark.parametrize("k,s", [((2, 2), (2, 2)), ((3, 3), (2, 2)), ((2, 2), (3, 3))])
def test_max_pool_gradient_with_ties_and_gaps(k, s):
    # Integer-valued input: many ties, each window's gradient goes to its first
    # maximum (row-major), and windows that skip pixels leave them at 0.
    x = RNG.integers(0, 3, (2, 7, 7, 2)).astype(np.float64)
    px = nd.placeholder(nd.float64, x.shape)
    y = nd.nn.max_pool(px, [1, *k, 1], [1, *s, 1], "SAME")
    u = RNG.standard_normal(y.shape.as_list())
    (gx,) = nd.gradients(nd.reduce_sum(y * u), [px])
    _, _, wins = ref_windows(x, k[0], k[1], s, "SAME", fill=-np.inf)
    _, t, _ = pads(7, k[0], s[0], 1, "SAME")
    _, left, _ = pads(7, k[1], s[1], 1, "SAME")
    want = np.zeros(x.shape)
    for i, j, win in wins:
        flat = win.transpose(0, 3, 1, 2).reshape(2, 2, -1)
        first = flat.argmax(-1)          # argmax returns the first maximum
        for n in range(2):
            for c in range(2):
                a, b = divmod(first[n, c], k[1])
                want[n, i * s[0] + a - t, j * s[1] + b - left, c] += u[n, i, j, c]
    np.testing.assert_allclose(run(gx, {px: x}), want)


def test_conv_and_pool_run_through_a_server():
    # The ops' attrs (lists, strings, explicit paddings) survive the GraphDef
    # that a server session registers.
    with nd.Server.create_local_server() as server:
        x = RNG.standard_normal((1, 6, 6, 2))
        f = RNG.standard_normal((3, 3, 2, 2))
        px = nd.placeholder(nd.float64, x.shape)
        y = nd.nn.max_pool(nd.nn.conv2d(px, f, 1, [[0, 0], [1, 1], [1, 1], [0, 0]]),
                           [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        (g,) = nd.gradients(nd.reduce_sum(y), [px])
        with nd.Session(server.target) as s:
            got_y, got_g = s.run([y, g], {px: x})
        with nd.Session() as s:
            want_y, want_g = s.run([y, g], {px: x})
        np.testing.assert_allclose(got_y, want_y)
        np.testing.assert_allclose(got_g, want_g)
        np.testing.assert_allclose(got_y, ref_pool(ref_conv2d(x, f), (2, 2), (2, 2),
                                                   "VALID", "max"))


def test_tf1_conv_net_program_trains():
    # The classic TF1 program shape: conv -> bias -> relu -> pool -> batch norm
    # -> dense, sparse softmax loss, SGD. One step's update equals -lr * the
    # gradient the same session reports, and the net fits a fixed batch.
    images = np.random.default_rng(0).random((16, 8, 8, 1)).astype(np.float32)
    labels = (images.mean(axis=(1, 2, 3)) > images.mean()).astype(np.int64)
    x = nd.placeholder(nd.float32, [None, 8, 8, 1])
    y = nd.placeholder(nd.int64, [None])
    w = nd.Variable(nd.truncated_normal([3, 3, 1, 4], stddev=0.3, seed=1))
    b = nd.Variable(nd.zeros([4]))
    h = nd.nn.max_pool(nd.nn.relu(nd.nn.bias_add(nd.nn.conv2d(x, w, 1, "SAME"), b)),
                       [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    h, _, _ = nd.nn.fused_batch_norm(h, nd.ones([4]), nd.zeros([4]))
    dense = nd.Variable(nd.truncated_normal([64, 2], stddev=0.1, seed=2))
    logits = nd.matmul(nd.reshape(h, [-1, 64]), dense)
    loss = nd.reduce_mean(nd.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y, logits=logits))
    (gw,) = nd.gradients(loss, [w])
    train = nd.train.GradientDescentOptimizer(0.5).minimize(loss)
    feed = {x: images, y: labels}
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        w0, g0, first = s.run([w, gw, loss], feed)
        s.run(train, feed)
        np.testing.assert_allclose(s.run(w), w0 - 0.5 * g0, rtol=1e-4, atol=1e-6)
        for _ in range(40):
            s.run(train, feed)
        last = s.run(loss, feed)
    assert last < 0.5 * first, (first, last)
