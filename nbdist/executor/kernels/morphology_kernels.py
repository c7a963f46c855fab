"""Kernels of ``Dilation2D`` and its gradients: a max over the filter's taps,
one strided slice of the (-inf padded) input per tap; the gradients go to the
first tap reaching the maximum, as TF."""

from __future__ import annotations

import itertools

import numpy as np

import nbdist.ops.nn_morphology_ops  # noqa: F401  (registers the op definitions)
from nbdist.executor.kernel import register_kernel
from nbdist.ops.nn_conv3d_ops import out_size, pad_before


def _taps(node, x_shape, f_shape):
    """Output (h, w), the padded input's before-padding and per-tap slices."""
    a = node.attrs
    s, r = a["strides"][1:3], a["rates"][1:3]
    pad = a["padding"]
    out = [out_size(n, k, st, rt, pad) for n, k, st, rt in
           zip(x_shape[1:3], f_shape[:2], s, r)]
    before = [pad_before(n, k, st, rt, pad) for n, k, st, rt in
              zip(x_shape[1:3], f_shape[:2], s, r)]
    size = [max(n + b, (o - 1) * st + (k - 1) * rt + 1) for n, b, o, st, k, rt in
            zip(x_shape[1:3], before, out, s, f_shape[:2], r)]
    taps = [((i, j), (slice(None), slice(i * r[0], i * r[0] + (out[0] - 1) * s[0] + 1,
                                          s[0]),
                      slice(j * r[1], j * r[1] + (out[1] - 1) * s[1] + 1, s[1])))
            for i, j in itertools.product(range(f_shape[0]), range(f_shape[1]))]
    return out, before, size, taps


def _padded(x, before, size):
    p = np.full((x.shape[0], *size, x.shape[3]), -np.inf, x.dtype)
    p[:, before[0]:before[0] + x.shape[1], before[1]:before[1] + x.shape[2]] = x
    return p


def _winners(node, x, f):
    """(output, per-tap masks of the first winning tap)."""
    out_hw, before, size, taps = _taps(node, x.shape, f.shape)
    xp = _padded(x, before, size)
    best = np.full((x.shape[0], *out_hw, x.shape[3]), -np.inf, x.dtype)
    for t, sl in taps:
        np.maximum(best, xp[sl] + f[t], out=best)
    taken = np.zeros(best.shape, bool)
    masks = []
    for t, sl in taps:
        hit = (xp[sl] + f[t] == best) & ~taken
        taken |= hit
        masks.append((t, sl, hit))
    return best, masks, before, size


@register_kernel("Dilation2D")
def dilation2d_kernel(node):
    return lambda step, x, f: _winners(node, x, f)[0]


@register_kernel("Dilation2DBackpropInput")
def dilation2d_backprop_input_kernel(node):
    def compute(step, x, f, g):
        _, masks, before, size = _winners(node, x, f)
        gp = np.zeros((x.shape[0], *size, x.shape[3]), g.dtype)
        for _, sl, hit in masks:
            gp[sl] += np.where(hit, g, 0)
        return np.ascontiguousarray(gp[:, before[0]:before[0] + x.shape[1],
                                       before[1]:before[1] + x.shape[2]])

    return compute


@register_kernel("Dilation2DBackpropFilter")
def dilation2d_backprop_filter_kernel(node):
    def compute(step, x, f, g):
        _, masks, _, _ = _winners(node, x, f)
        out = np.zeros_like(f)
        for t, _, hit in masks:
            out[t] = np.where(hit, g, 0).sum((0, 1, 2))
        return out

    return compute
