"""Kernels of the 3-D convolution and pooling ops. Each loops over the kernel's
offsets (kd * kh * kw of them): one strided slice of the padded input per
offset, contracted with that tap of the filter, so memory stays that of the
output."""

from __future__ import annotations

import itertools

import numpy as np

import nbdist.ops.nn_conv3d_ops  # noqa: F401  (registers the op definitions)
from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.ops.nn_conv3d_ops import out_size, pad_before


class _Geometry:
    """Padding and output sizes of one op on one input shape."""

    def __init__(self, node, in_shape, ksize, ksize_is_pool=False):
        a = node.attrs
        self.strides = a["strides"][1:4]
        self.dil = [1, 1, 1] if ksize_is_pool else a["dilations"][1:4]
        self.k = list(ksize)
        pad = a["padding"]
        sp = in_shape[1:4]
        self.out = [out_size(n, k, s, d, pad) for n, k, s, d in
                    zip(sp, self.k, self.strides, self.dil)]
        self.before = [pad_before(n, k, s, d, pad) for n, k, s, d in
                       zip(sp, self.k, self.strides, self.dil)]
        # Enough padding after for every tap's strided slice.
        self.padded = [max(n + b, (o - 1) * s + (k - 1) * d + 1) for n, b, o, s, k, d
                       in zip(sp, self.before, self.out, self.strides, self.k,
                              self.dil)]

    def pad(self, x, value=0.0):
        n, c = x.shape[0], x.shape[4]
        out = np.full((n, *self.padded, c), value, dtype=x.dtype)
        b = self.before
        out[:, b[0]:b[0] + x.shape[1], b[1]:b[1] + x.shape[2],
            b[2]:b[2] + x.shape[3]] = x
        return out

    def unpad(self, x, shape):
        b = self.before
        return x[:, b[0]:b[0] + shape[1], b[1]:b[1] + shape[2], b[2]:b[2] + shape[3]]

    def taps(self):
        """(tap index, slices of the padded input it reads) per kernel offset."""
        for t in itertools.product(*(range(k) for k in self.k)):
            yield t, (slice(None),) + tuple(
                slice(i * d, i * d + (o - 1) * s + 1, s)
                for i, d, o, s in zip(t, self.dil, self.out, self.strides))


def _check(node, x, what="input"):
    if x.ndim != 5:
        raise errors.InvalidArgumentError(
            None, node.name, f"{what} must be 5-dimensional, got {list(x.shape)}")


@register_kernel("Conv3D")
def conv3d_kernel(node):
    def compute(step, x, f):
        _check(node, x)
        if f.ndim != 5 or f.shape[3] != x.shape[4]:
            raise errors.InvalidArgumentError(
                None, node.name, f"input depth {x.shape[4]} must equal filter depth "
                f"{f.shape[3] if f.ndim == 5 else '?'}")
        geo = _Geometry(node, x.shape, f.shape[:3])
        xp = geo.pad(x)
        out = np.zeros((x.shape[0], *geo.out, f.shape[4]), x.dtype)
        for t, sl in geo.taps():
            out += np.tensordot(xp[sl], f[t], ([4], [0])).astype(x.dtype, copy=False)
        return out

    return compute


@register_kernel("Conv3DBackpropInputV2")
def conv3d_backprop_input_kernel(node):
    def compute(step, sizes, f, g):
        shape = [int(v) for v in np.ravel(sizes)]
        geo = _Geometry(node, shape, f.shape[:3])
        gp = np.zeros((shape[0], *geo.padded, shape[4]), g.dtype)
        for t, sl in geo.taps():
            gp[sl] += np.tensordot(g, f[t], ([4], [1])).astype(g.dtype, copy=False)
        return np.ascontiguousarray(geo.unpad(gp, shape))

    return compute


@register_kernel("Conv3DBackpropFilterV2")
def conv3d_backprop_filter_kernel(node):
    def compute(step, x, sizes, g):
        _check(node, x)
        fshape = [int(v) for v in np.ravel(sizes)]
        geo = _Geometry(node, x.shape, fshape[:3])
        xp = geo.pad(x)
        out = np.zeros(fshape, x.dtype)
        for t, sl in geo.taps():
            out[t] = np.tensordot(xp[sl], g, ([0, 1, 2, 3], [0, 1, 2, 3]))
        return out

    return compute


def _pool_geometry(node, shape):
    return _Geometry(node, shape, node.attrs["ksize"][1:4], ksize_is_pool=True)


@register_kernel("MaxPool3D")
def max_pool3d_kernel(node):
    def compute(step, x):
        _check(node, x)
        geo = _pool_geometry(node, x.shape)
        xp = geo.pad(x, -np.inf)
        out = np.full((x.shape[0], *geo.out, x.shape[4]), -np.inf, x.dtype)
        for _, sl in geo.taps():
            np.maximum(out, xp[sl], out=out)
        return out

    return compute


@register_kernel("MaxPool3DGrad")
def max_pool3d_grad_kernel(node):
    def compute(step, x, y, g):
        geo = _pool_geometry(node, x.shape)
        xp = geo.pad(x, -np.inf)
        gp = np.zeros(xp.shape, g.dtype)
        taken = np.zeros(y.shape, bool)
        # Each output's gradient goes to the first input in its window that
        # holds the maximum, as TF.
        for _, sl in geo.taps():
            hit = (xp[sl] == y) & ~taken
            gp[sl] += np.where(hit, g, 0)
            taken |= hit
        return np.ascontiguousarray(geo.unpad(gp, x.shape))

    return compute


def _window_counts(geo, shape):
    ones = geo.pad(np.ones((1, *shape[1:4], 1)))
    count = np.zeros((1, *geo.out, 1))
    for _, sl in geo.taps():
        count += ones[sl]
    return count


@register_kernel("AvgPool3D")
def avg_pool3d_kernel(node):
    def compute(step, x):
        _check(node, x)
        geo = _pool_geometry(node, x.shape)
        xp = geo.pad(x)
        total = np.zeros((x.shape[0], *geo.out, x.shape[4]), np.float64)
        for _, sl in geo.taps():
            total += xp[sl]
        return (total / _window_counts(geo, x.shape)).astype(x.dtype)

    return compute


@register_kernel("AvgPool3DGrad")
def avg_pool3d_grad_kernel(node):
    def compute(step, sizes, g):
        shape = [int(v) for v in np.ravel(sizes)]
        geo = _pool_geometry(node, shape)
        share = g / _window_counts(geo, shape)
        gp = np.zeros((shape[0], *geo.padded, shape[4]), np.float64)
        for _, sl in geo.taps():
            gp[sl] += share
        return np.ascontiguousarray(geo.unpad(gp, shape)).astype(g.dtype)

    return compute
