"""Kernels for ``FusedBatchNormV3`` (+ grad), ``LRN`` (+ grad) and ``TopKV2``."""

from __future__ import annotations

import numpy as np

import nbdist.ops.nn_norm_ops  # noqa: F401  (registers the op definitions)
from nbdist import errors
from nbdist.executor.kernel import register_kernel


def _invalid(node, msg):
    return errors.InvalidArgumentError(None, node.name, msg)


def _nchw(node):
    fmt = node.attrs["data_format"]
    return (fmt.decode() if isinstance(fmt, bytes) else fmt) == "NCHW"


def _per_channel(node, x):
    """(x as [M, C] rows of channels (a view where possible), back-converter)."""
    if x.ndim != 4:
        raise _invalid(node, f"input must be 4-dimensional: {list(x.shape)}")
    if _nchw(node):
        t = x.transpose(0, 2, 3, 1)
        return t.reshape(-1, x.shape[1]), lambda r: np.ascontiguousarray(
            r.reshape(t.shape).transpose(0, 3, 1, 2))
    return x.reshape(-1, x.shape[3]), lambda r: r.reshape(x.shape)


def _check_vec(node, v, c, what, allow_empty=False):
    if v.ndim != 1 or (v.shape[0] != c and not (allow_empty and v.shape[0] == 0)):
        raise _invalid(node, f"{what} must be a 1-D tensor of {c} channels, got "
                       f"shape {list(v.shape)}")


@register_kernel("FusedBatchNormV3")
def fused_batch_norm_kernel(node):
    eps = node.attrs["epsilon"]
    training = node.attrs["is_training"]
    factor = node.attrs["exponential_avg_factor"]

    def compute(step, x, scale, offset, mean, variance):
        rows, back = _per_channel(node, x)
        c = rows.shape[1]
        _check_vec(node, scale, c, "scale")
        _check_vec(node, offset, c, "offset")
        u = scale.dtype
        if training:
            _check_vec(node, mean, c, "mean", allow_empty=True)
            _check_vec(node, variance, c, "variance", allow_empty=True)
            wide = rows.astype(np.promote_types(rows.dtype, np.float32), copy=False)
            m = wide.mean(axis=0)
            var = np.square(wide - m).mean(axis=0)
            n = rows.shape[0]
            unbiased = var * (n / max(n - 1, 1))
            if factor != 1.0 and mean.size:
                out_mean = (1 - factor) * mean + factor * m
                out_var = (1 - factor) * variance + factor * unbiased
            else:
                out_mean, out_var = m, unbiased
        else:
            _check_vec(node, mean, c, "mean")
            _check_vec(node, variance, c, "variance")
            m, var = mean, variance
            out_mean, out_var = mean, variance
        inv = 1.0 / np.sqrt(var + eps)
        y = (rows - m) * (inv * scale) + offset
        return (back(y.astype(x.dtype, copy=False)), out_mean.astype(u),
                out_var.astype(u), np.asarray(m, u), np.asarray(var, u),
                np.zeros([0], u))

    return compute


@register_kernel("FusedBatchNormGradV3")
def fused_batch_norm_grad_kernel(node):
    eps = node.attrs["epsilon"]
    training = node.attrs["is_training"]

    def compute(step, dy, x, scale, mean, var, unused):
        rows, back = _per_channel(node, x)
        dyr, _ = _per_channel(node, dy)
        inv = 1.0 / np.sqrt(var + eps)
        xhat = (rows - mean) * inv
        doffset = dyr.sum(axis=0)
        dscale = (dyr * xhat).sum(axis=0)
        if training:
            n = rows.shape[0]
            dx = (scale * inv) * (dyr - doffset / n - xhat * (dscale / n))
        else:
            dx = dyr * (scale * inv)
        u = scale.dtype
        return (back(dx.astype(x.dtype, copy=False)), dscale.astype(u),
                doffset.astype(u), np.zeros([0], u), np.zeros([0], u))

    return compute


def _channel_window_sum(v, r):
    """Sum over channels c - r .. c + r (clipped) along the last axis."""
    c = v.shape[-1]
    cs = np.cumsum(v, axis=-1)
    cs = np.concatenate([np.zeros(v.shape[:-1] + (1,), v.dtype), cs], axis=-1)
    hi = np.minimum(np.arange(c) + r + 1, c)
    lo = np.maximum(np.arange(c) - r, 0)
    return cs[..., hi] - cs[..., lo]


def _lrn_attrs(node):
    a = node.attrs
    return a["depth_radius"], a["bias"], a["alpha"], a["beta"]


@register_kernel("LRN")
def lrn_kernel(node):
    r, bias, alpha, beta = _lrn_attrs(node)

    def compute(step, x):
        if x.ndim != 4:
            raise _invalid(node, f"input must be 4-dimensional: {list(x.shape)}")
        wide = x.astype(np.promote_types(x.dtype, np.float32), copy=False)
        norm = bias + alpha * _channel_window_sum(np.square(wide), r)
        return (wide * norm ** -beta).astype(x.dtype, copy=False)

    return compute


@register_kernel("LRNGrad")
def lrn_grad_kernel(node):
    r, bias, alpha, beta = _lrn_attrs(node)

    def compute(step, dy, x, y):
        if not dy.shape == x.shape == y.shape or x.ndim != 4:
            raise _invalid(node, "LRNGrad needs 4-D input_grads, input_image and "
                           "output_image of one shape")
        wide = x.astype(np.promote_types(x.dtype, np.float32), copy=False)
        norm = bias + alpha * _channel_window_sum(np.square(wide), r)
        # d out_i / d x_j = [i == j] N_i^-b - 2 a b x_i x_j N_i^(-b-1), |i - j| <= r
        dx = dy * norm ** -beta - 2 * alpha * beta * wide * _channel_window_sum(
            dy * wide * norm ** (-beta - 1), r)
        return dx.astype(x.dtype, copy=False)

    return compute


@register_kernel("TopKV2")
def top_k_kernel(node):
    index_type = node.attrs["index_type"].as_numpy_dtype

    def compute(step, x, k):
        k = int(k)
        if x.ndim < 1:
            raise _invalid(node, "input must be at least 1-D")
        if k < 0:
            raise _invalid(node, f"Need k >= 0, got {k}")
        if x.shape[-1] < k:
            raise _invalid(node, f"input must have at least k columns. Had "
                           f"{x.shape[-1]}, needed {k}")
        # A stable sort of the negated keys: ties keep the lower index first.
        # (~ reverses integer order without -x's overflow at the minimum.)
        key = ~(x.view(np.uint8) if x.dtype == np.bool_ else x) if (
            x.dtype.kind in "iub") else -x
        idx = np.argsort(key, axis=-1, kind="stable")[..., :k]
        return np.take_along_axis(x, idx, axis=-1), idx.astype(index_type)

    return compute
