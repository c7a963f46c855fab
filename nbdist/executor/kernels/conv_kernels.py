"""Kernels for the convolution and pooling ops.

Convolutions are im2col + BLAS: the padded input is viewed (without a copy) as
its [N, Ho, Wo, kh, kw, C] windows through ``as_strided``, flattened into a
[N*Ho*Wo, kh*kw*C] matrix and multiplied by the filter. With 16+ channels the
forward pass and the filter gradient do one GEMM per filter row instead
([N*Ho*Wo, kw*C] each, which measured faster), and the input gradient one GEMM
per filter tap added straight into its slice of the result; with few channels
the input gradient multiplies into window space and adds each tap's slice into
place. Loops run over filter rows and taps, never over pixels. Pools loop over the
window taps the same way. Kernels work in NHWC; NCHW is transposed in and out.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

import nbdist.ops.nn_conv_ops  # noqa: F401  (registers the op definitions)
import nbdist.ops.nn_pool_ops  # noqa: F401
from nbdist import errors
from nbdist.executor.kernel import register_kernel


def _invalid(node, msg):
    return errors.InvalidArgumentError(None, node.name, msg)


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


class Geometry:
    """Where a window op's windows fall: sizes, strides, dilations, padding."""

    __slots__ = ("n", "h", "w", "c", "kh", "kw", "sh", "sw", "dh", "dw", "ho", "wo",
                 "pt", "pb", "pl", "pr")

    def __init__(self, node, shape, kh, kw, dilated=True):
        nchw = _s(node.attrs["data_format"]) == "NCHW"
        a = node.attrs
        hi, wi = (2, 3) if nchw else (1, 2)
        self.n, self.h, self.w, self.c = shape[0], shape[hi], shape[wi], shape[
            1 if nchw else 3]
        self.kh, self.kw = kh, kw
        self.sh, self.sw = a["strides"][hi], a["strides"][wi]
        dil = a.get("dilations", [1, 1, 1, 1]) if dilated else [1, 1, 1, 1]
        self.dh, self.dw = dil[hi], dil[wi]
        pad = _s(a["padding"])
        ex = list(a.get("explicit_paddings", []) or [])
        self.ho, self.pt, self.pb = self._axis(node, pad, self.h, kh, self.sh,
                                               self.dh, ex[2 * hi:2 * hi + 2])
        self.wo, self.pl, self.pr = self._axis(node, pad, self.w, kw, self.sw,
                                               self.dw, ex[2 * wi:2 * wi + 2])

    @staticmethod
    def _axis(node, pad, size, k, s, d, explicit):
        eff = (k - 1) * d + 1
        if pad == "SAME":
            out = -(-size // s)
            total = max((out - 1) * s + eff - size, 0)
            return out, total // 2, total - total // 2
        lo, hi = (explicit or (0, 0)) if pad == "EXPLICIT" else (0, 0)
        if size + lo + hi < eff:
            raise _invalid(node, f"Computed output size would be negative: the "
                           f"window of {eff} exceeds the padded input of "
                           f"{size + lo + hi}")
        return (size + lo + hi - eff) // s + 1, lo, hi

    def pad(self, x, value=0):
        if not (self.pt or self.pb or self.pl or self.pr):
            return x
        return np.pad(x, ((0, 0), (self.pt, self.pb), (self.pl, self.pr), (0, 0)),
                      constant_values=value)

    def windows(self, xp):
        """The [N, Ho, Wo, kh, kw, C] view of padded NHWC ``xp``."""
        s = xp.strides
        return as_strided(xp, (xp.shape[0], self.ho, self.wo, self.kh, self.kw,
                               xp.shape[3]),
                          (s[0], s[1] * self.sh, s[2] * self.sw, s[1] * self.dh,
                           s[2] * self.dw, s[3]), writeable=False)

    def tap(self, i, j):
        """The slices of padded input that filter tap (i, j) sees, for all outputs."""
        h0, w0 = i * self.dh, j * self.dw
        return (slice(None), slice(h0, h0 + self.sh * (self.ho - 1) + 1, self.sh),
                slice(w0, w0 + self.sw * (self.wo - 1) + 1, self.sw), slice(None))

    def padded_zeros(self, c, dtype):
        return np.zeros((self.n, self.h + self.pt + self.pb,
                         self.w + self.pl + self.pr, c), dtype)

    def crop(self, xp):
        return xp[:, self.pt:self.pt + self.h, self.pl:self.pl + self.w, :]

    def col2im(self, cols, c, dtype):
        """Adds [N, Ho, Wo, kh, kw, C] window values back onto the input."""
        xp = self.padded_zeros(c, dtype)
        for i in range(self.kh):
            for j in range(self.kw):
                xp[self.tap(i, j)] += cols[:, :, :, i, j, :]
        return self.crop(xp)


def _to_nhwc(node, x):
    return x.transpose(0, 2, 3, 1) if _s(node.attrs["data_format"]) == "NCHW" else x


def _from_nhwc(node, y):
    if _s(node.attrs["data_format"]) == "NCHW":
        return np.ascontiguousarray(y.transpose(0, 3, 1, 2))
    return y


def _rank4(node, x, what):
    if x.ndim != 4:
        raise _invalid(node, f"{what} must be 4-dimensional: {list(x.shape)}")


def _sizes(node, v, what):
    v = np.asarray(v).ravel()
    if v.size != 4 or np.any(v < 0):
        raise _invalid(node, f"{what} must be 4 nonnegative sizes, got {v.tolist()}")
    return tuple(int(d) for d in v)


def _check_out(node, g, dy):
    want = (g.n, g.ho, g.wo)
    if (dy.shape[0], dy.shape[1], dy.shape[2]) != want:
        raise _invalid(node, f"out_backprop has shape {list(dy.shape)} (NHWC), but "
                       f"the convolution's output is {list(want)} + [channels]")


def _check_depth(node, c, f):
    if c != f.shape[2]:
        raise _invalid(node, f"input depth ({c}) must match the filter's input depth "
                       f"({f.shape[2]})")


# -- Conv2D ------------------------------------------------------------------------
# Below this many channels the GEMM of one filter row (or tap) is too thin for
# BLAS to run well, and one im2col GEMM over all taps is faster.
_TAP_GEMM_MIN_CHANNELS = 16


def _per_tap(*channels):
    return min(channels) >= _TAP_GEMM_MIN_CHANNELS


@register_kernel("Conv2D")
def conv2d_kernel(node):
    def compute(step, x, f):
        _rank4(node, x, "input")
        _rank4(node, f, "filter")
        g = Geometry(node, x.shape, f.shape[0], f.shape[1])
        _check_depth(node, g.c, f)
        kh, kw, c, o = f.shape
        xp = g.pad(_to_nhwc(node, x))
        win = g.windows(xp)
        if _per_tap(c):
            # One GEMM per filter row over that row's [kw * C] windows, summed:
            # smaller copies than one [N*Ho*Wo, kh*kw*C] matrix, and faster.
            y = np.dot(win[:, :, :, 0].reshape(-1, kw * c), f[0].reshape(-1, o))
            for i in range(1, kh):
                y += np.dot(win[:, :, :, i].reshape(-1, kw * c), f[i].reshape(-1, o))
        else:
            y = np.dot(win.reshape(-1, kh * kw * c), f.reshape(-1, o))
        return _from_nhwc(node, y.reshape(g.n, g.ho, g.wo, o))

    return compute


@register_kernel("Conv2DBackpropInput")
def conv2d_backprop_input_kernel(node):
    def compute(step, sizes, f, dy):
        _rank4(node, f, "filter")
        _rank4(node, dy, "out_backprop")
        shape = _sizes(node, sizes, "input_sizes")
        g = Geometry(node, shape, f.shape[0], f.shape[1])
        _check_depth(node, g.c, f)
        dy = _to_nhwc(node, dy)
        _check_out(node, g, dy)
        kh, kw, c, o = f.shape
        if dy.shape[3] != o:
            raise _invalid(node, f"out_backprop depth ({dy.shape[3]}) must match the "
                           f"filter's output depth ({o})")
        dy2 = dy.reshape(-1, o)
        if _per_tap(c, o):
            # Each tap's GEMM adds straight into its slice of the input gradient.
            dxp = g.padded_zeros(c, np.result_type(dy, f))
            for i in range(kh):
                for j in range(kw):
                    dxp[g.tap(i, j)] += np.dot(dy2, f[i, j].T).reshape(
                        g.n, g.ho, g.wo, c)
            dx = g.crop(dxp)
        else:
            cols = np.dot(dy2, f.reshape(-1, o).T)
            dx = g.col2im(cols.reshape(g.n, g.ho, g.wo, kh, kw, c), c, cols.dtype)
        return _from_nhwc(node, np.ascontiguousarray(dx))

    return compute


@register_kernel("Conv2DBackpropFilter")
def conv2d_backprop_filter_kernel(node):
    def compute(step, x, sizes, dy):
        _rank4(node, x, "input")
        _rank4(node, dy, "out_backprop")
        kh, kw, c, o = _sizes(node, sizes, "filter_sizes")
        g = Geometry(node, x.shape, kh, kw)
        if g.c != c:
            raise _invalid(node, f"input depth ({g.c}) must match filter_sizes' "
                           f"input depth ({c})")
        dy = _to_nhwc(node, dy)
        _check_out(node, g, dy)
        xp = g.pad(_to_nhwc(node, x))
        dy2 = dy.reshape(-1, o)
        if not _per_tap(c):
            cols = g.windows(xp).reshape(-1, kh * kw * c)
            return np.dot(cols.T, dy2).reshape(kh, kw, c, o)
        # One GEMM per filter row over that row's [kw * C] windows.
        rows = g.windows(xp)
        df = np.empty((kh, kw * c, o), np.result_type(x, dy))
        for i in range(kh):
            df[i] = np.dot(rows[:, :, :, i].reshape(-1, kw * c).T, dy2)
        return df.reshape(kh, kw, c, o)

    return compute


# -- DepthwiseConv2dNative ---------------------------------------------------------
def _depthwise_cols(g, x):
    """[C, N*Ho*Wo, kh*kw] windows of NHWC ``x``."""
    win = g.windows(g.pad(x))
    return win.reshape(-1, g.kh * g.kw, g.c).transpose(2, 0, 1)


@register_kernel("DepthwiseConv2dNative")
def depthwise_kernel(node):
    def compute(step, x, f):
        _rank4(node, x, "input")
        _rank4(node, f, "filter")
        g = Geometry(node, x.shape, f.shape[0], f.shape[1])
        _check_depth(node, g.c, f)
        m = f.shape[3]
        w = f.reshape(-1, g.c, m).transpose(1, 0, 2)          # [C, kh*kw, M]
        y = np.matmul(_depthwise_cols(g, _to_nhwc(node, x)), w)  # [C, NHW, M]
        y = y.transpose(1, 0, 2).reshape(g.n, g.ho, g.wo, g.c * m)
        return _from_nhwc(node, y)

    return compute


@register_kernel("DepthwiseConv2dNativeBackpropInput")
def depthwise_backprop_input_kernel(node):
    def compute(step, sizes, f, dy):
        shape = _sizes(node, sizes, "input_sizes")
        g = Geometry(node, shape, f.shape[0], f.shape[1])
        _check_depth(node, g.c, f)
        m = f.shape[3]
        dy = _to_nhwc(node, dy)
        _check_out(node, g, dy)
        dyc = dy.reshape(-1, g.c, m).transpose(1, 0, 2)       # [C, NHW, M]
        w = f.reshape(-1, g.c, m).transpose(1, 2, 0)          # [C, M, kh*kw]
        cols = np.matmul(dyc, w).transpose(1, 2, 0)           # [NHW, kh*kw, C]
        dx = g.col2im(cols.reshape(g.n, g.ho, g.wo, g.kh, g.kw, g.c), g.c, dy.dtype)
        return _from_nhwc(node, np.ascontiguousarray(dx))

    return compute


@register_kernel("DepthwiseConv2dNativeBackpropFilter")
def depthwise_backprop_filter_kernel(node):
    def compute(step, x, sizes, dy):
        kh, kw, c, m = _sizes(node, sizes, "filter_sizes")
        g = Geometry(node, x.shape, kh, kw)
        dy = _to_nhwc(node, dy)
        _check_out(node, g, dy)
        cols = _depthwise_cols(g, _to_nhwc(node, x))          # [C, NHW, kh*kw]
        dyc = dy.reshape(-1, c, m).transpose(1, 0, 2)         # [C, NHW, M]
        dw = np.matmul(cols.transpose(0, 2, 1), dyc)          # [C, kh*kw, M]
        return np.ascontiguousarray(dw.transpose(1, 0, 2).reshape(kh, kw, c, m))

    return compute


# -- pooling -----------------------------------------------------------------------
def _pool_geometry(node, shape):
    nchw = _s(node.attrs["data_format"]) == "NCHW"
    k = node.attrs["ksize"]
    return Geometry(node, shape, k[2 if nchw else 1], k[3 if nchw else 2], False)


def _first_max_taps(g, xp):
    """(max of each window, index i*kw+j of its first maximum)."""
    best = xp[g.tap(0, 0)].copy()
    arg = np.zeros(best.shape, np.int32)
    better = np.empty(best.shape, bool)
    for t in range(1, g.kh * g.kw):
        v = xp[g.tap(*divmod(t, g.kw))]
        np.greater(v, best, out=better)
        np.copyto(best, v, where=better)
        np.copyto(arg, t, where=better)
    return best, arg


def _neg_pad(g, x):
    return g.pad(x, -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min)


@register_kernel("MaxPool")
def max_pool_kernel(node):
    def compute(step, x):
        _rank4(node, x, "input")
        g = _pool_geometry(node, x.shape)
        xp = _neg_pad(g, _to_nhwc(node, x))
        out = xp[g.tap(0, 0)].copy()
        for t in range(1, g.kh * g.kw):
            np.maximum(out, xp[g.tap(*divmod(t, g.kw))], out=out)
        return _from_nhwc(node, out)

    return compute


@register_kernel("MaxPoolGrad")
def max_pool_grad_kernel(node):
    def compute(step, x, y, dy):
        _rank4(node, x, "orig_input")
        g = _pool_geometry(node, x.shape)
        xp = _neg_pad(g, _to_nhwc(node, x))
        y, dy = _to_nhwc(node, y), _to_nhwc(node, dy)
        _check_out(node, g, dy)
        if y.shape != dy.shape:
            raise _invalid(node, f"orig_output {list(y.shape)} and grad "
                           f"{list(dy.shape)} must have the same shape")
        dxp = g.padded_zeros(g.c, dy.dtype)
        # Windows that do not overlap are written once each: assign, don't add.
        disjoint = g.sh >= g.kh and g.sw >= g.kw
        taken = np.zeros(y.shape, bool)
        hit = np.empty(y.shape, bool)
        last = g.kh * g.kw - 1
        for t in range(last + 1):
            tap = g.tap(*divmod(t, g.kw))
            np.equal(xp[tap], y, out=hit)
            if t:
                # hit & ~taken in one pass: the window's first maximum takes it all.
                np.greater(hit, taken, out=hit)
            if t < last:
                taken |= hit
            if disjoint:
                np.multiply(dy, hit, out=dxp[tap])
            else:
                dxp[tap] += dy * hit
        return _from_nhwc(node, np.ascontiguousarray(g.crop(dxp)))

    return compute


@register_kernel("MaxPoolGradGrad")
def max_pool_grad_grad_kernel(node):
    def compute(step, x, y, ddx):
        _rank4(node, x, "orig_input")
        g = _pool_geometry(node, x.shape)
        _, arg = _first_max_taps(g, _neg_pad(g, _to_nhwc(node, x)))
        gp = g.pad(_to_nhwc(node, ddx))
        out = np.zeros(arg.shape, ddx.dtype)
        for t in range(g.kh * g.kw):
            np.copyto(out, gp[g.tap(*divmod(t, g.kw))], where=arg == t)
        return _from_nhwc(node, out)

    return compute


@register_kernel("MaxPoolWithArgmax")
def max_pool_with_argmax_kernel(node):
    targ = node.attrs["Targmax"].as_numpy_dtype
    with_batch = node.attrs["include_batch_in_index"]

    def compute(step, x):
        _rank4(node, x, "input")
        g = _pool_geometry(node, x.shape)
        best, arg = _first_max_taps(g, _neg_pad(g, x))
        hh = (np.arange(g.ho) * g.sh)[None, :, None, None] + arg // g.kw - g.pt
        ww = (np.arange(g.wo) * g.sw)[None, None, :, None] + arg % g.kw - g.pl
        idx = (hh * g.w + ww) * g.c + np.arange(g.c)
        if with_batch:
            idx = idx + (np.arange(g.n) * g.h * g.w * g.c)[:, None, None, None]
        return best, idx.astype(targ)

    return compute


def _avg_counts(g):
    """[Ho, Wo, 1] number of real (unpadded) input elements in each window."""
    def axis(out, s, k, pad, size):
        start = np.arange(out) * s - pad
        return np.minimum(start + k, size) - np.maximum(start, 0)

    return (axis(g.ho, g.sh, g.kh, g.pt, g.h)[:, None] *
            axis(g.wo, g.sw, g.kw, g.pl, g.w)[None, :])[:, :, None]


@register_kernel("AvgPool")
def avg_pool_kernel(node):
    def compute(step, x):
        _rank4(node, x, "input")
        g = _pool_geometry(node, x.shape)
        xp = g.pad(_to_nhwc(node, x))
        out = xp[g.tap(0, 0)].copy()
        for t in range(1, g.kh * g.kw):
            out += xp[g.tap(*divmod(t, g.kw))]
        out /= _avg_counts(g).astype(x.dtype)
        return _from_nhwc(node, out)

    return compute


@register_kernel("AvgPoolGrad")
def avg_pool_grad_kernel(node):
    def compute(step, sizes, dy):
        g = _pool_geometry(node, _sizes(node, sizes, "orig_input_shape"))
        dy = _to_nhwc(node, dy)
        _check_out(node, g, dy)
        share = dy / _avg_counts(g).astype(dy.dtype)
        dxp = g.padded_zeros(g.c, dy.dtype)
        for t in range(g.kh * g.kw):
            dxp[g.tap(*divmod(t, g.kw))] += share
        return _from_nhwc(node, np.ascontiguousarray(g.crop(dxp)))

    return compute
