"""Kernels for the neural-network ops and for the helper ops gradient functions
build (``BroadcastGradientArgs``, ``StridedSliceGrad``...); ``UnsortedSegmentSum``'s
kernel is with the other segment reductions, in ``segment_kernels``.

Softmax and the cross-entropies subtract each row's maximum first, so large
logits never overflow.
"""

from __future__ import annotations

import numpy as np

import nbdist.ops.nn_ops  # noqa: F401  (registers the op definitions)
from nbdist import errors
from nbdist.executor.kernel import register_kernel


def _invalid(node, msg):
    return errors.InvalidArgumentError(None, node.name, msg)


# -- activations -------------------------------------------------------------------
@register_kernel("Relu")
def relu_kernel(node):
    return lambda step, x: np.maximum(x, np.zeros((), x.dtype))


@register_kernel("Relu6")
def relu6_kernel(node):
    return lambda step, x: np.clip(x, np.zeros((), x.dtype), np.full((), 6, x.dtype))


@register_kernel("Elu")
def elu_kernel(node):
    def compute(step, x):
        with np.errstate(over="ignore"):
            return np.where(x > 0, x, np.expm1(np.minimum(x, 0))).astype(x.dtype)

    return compute


@register_kernel("Softplus")
def softplus_kernel(node):
    def compute(step, x):
        return (np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))).astype(x.dtype)

    return compute


@register_kernel("LeakyRelu")
def leaky_relu_kernel(node):
    alpha = node.attrs["alpha"]

    def compute(step, x):
        return np.where(x > 0, x, x * x.dtype.type(alpha)).astype(x.dtype)

    return compute


@register_kernel("ReluGrad")
def relu_grad_kernel(node):
    # TF's functor: gradients * (features > 0), so a NaN gradient stays NaN.
    return lambda step, g, x: np.multiply(g, np.greater(x, 0), dtype=g.dtype)


@register_kernel("Relu6Grad")
def relu6_grad_kernel(node):
    return lambda step, g, x: np.multiply(g, (x > 0) & (x < 6), dtype=g.dtype)


@register_kernel("EluGrad")
def elu_grad_kernel(node):
    # inputs: gradients, outputs (of Elu)
    return lambda step, g, y: np.where(y > 0, g, g * (y + 1)).astype(g.dtype)


@register_kernel("SoftplusGrad")
def softplus_grad_kernel(node):
    def compute(step, g, x):
        with np.errstate(over="ignore"):
            return (g / (1 + np.exp(-x))).astype(g.dtype)

    return compute


@register_kernel("LeakyReluGrad")
def leaky_relu_grad_kernel(node):
    alpha = node.attrs["alpha"]
    return lambda step, g, x: np.where(x > 0, g, g * g.dtype.type(alpha))


# -- softmax and cross-entropies -----------------------------------------------------
def _shifted(x):
    return x - np.maximum.reduce(x, axis=-1, keepdims=True)


@register_kernel("Softmax")
def softmax_kernel(node):
    def compute(step, x):
        if x.ndim < 1:
            raise _invalid(node, "logits must have >= 1 dimension")
        e = np.exp(_shifted(x))
        return e / np.sum(e, axis=-1, keepdims=True)

    return compute


@register_kernel("LogSoftmax")
def log_softmax_kernel(node):
    def compute(step, x):
        if x.ndim < 1:
            raise _invalid(node, "logits must have >= 1 dimension")
        s = _shifted(x)
        return s - np.log(np.sum(np.exp(s), axis=-1, keepdims=True))

    return compute


@register_kernel("SoftmaxCrossEntropyWithLogits")
def xent_kernel(node):
    def compute(step, logits, labels):
        if logits.ndim != 2 or logits.shape != labels.shape:
            raise _invalid(node, f"logits and labels must be same size: logits_size="
                           f"{list(logits.shape)} labels_size={list(labels.shape)}")
        s = _shifted(logits)
        e = np.exp(s)
        sum_exp = np.add.reduce(e, axis=-1, keepdims=True)
        loss = np.add.reduce(labels * (np.log(sum_exp) - s), axis=-1)
        backprop = np.subtract(e / sum_exp, labels, out=e)
        return loss.astype(logits.dtype, copy=False), backprop.astype(
            logits.dtype, copy=False)

    return compute


@register_kernel("SparseSoftmaxCrossEntropyWithLogits")
def sparse_xent_kernel(node):
    def compute(step, logits, labels):
        if logits.ndim != 2 or labels.ndim != 1 or (
                logits.shape[0] != labels.shape[0]):
            raise _invalid(node, f"logits and labels must have the same first "
                           f"dimension, got logits shape {list(logits.shape)} and "
                           f"labels shape {list(labels.shape)}")
        n = logits.shape[1]
        bad = (labels < 0) | (labels >= n)
        if bad.any():
            raise _invalid(node, f"Received a label value of {labels[bad][0]} which "
                           f"is outside the valid range of [0, {n}).  Label values: "
                           f"{' '.join(str(v) for v in labels.tolist())}")
        s = _shifted(logits)
        e = np.exp(s)
        sum_exp = np.add.reduce(e, axis=-1)
        rows = np.arange(logits.shape[0])
        loss = np.log(sum_exp) - s[rows, labels]
        # As TF's SparseXentGradGenerator: exp / sum_exp - onehot (one exp).
        backprop = np.divide(e, sum_exp[:, None], out=e)
        backprop[rows, labels] -= 1
        return loss.astype(logits.dtype, copy=False), backprop.astype(
            logits.dtype, copy=False)

    return compute


# -- bias, losses, metrics -----------------------------------------------------------
def _channel_axis(node, rank):
    fmt = node.attrs["data_format"]
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    return 1 if fmt == "NCHW" else rank - 1


@register_kernel("BiasAdd")
def bias_add_kernel(node):
    def compute(step, value, bias):
        if value.ndim < 2:
            raise _invalid(node, f"Input tensor must be at least 2D: "
                           f"{list(value.shape)}")
        axis = _channel_axis(node, value.ndim)
        if bias.ndim != 1 or bias.shape[0] != value.shape[axis]:
            raise _invalid(node, f"Must provide as many biases as the channel "
                           f"dimension of the input tensor: {list(bias.shape)} vs. "
                           f"{list(value.shape)}")
        shape = [1] * value.ndim
        shape[axis] = bias.shape[0]
        return value + bias.reshape(shape)

    return compute


@register_kernel("BiasAddGrad")
def bias_add_grad_kernel(node):
    def compute(step, g):
        if g.ndim < 2:
            raise _invalid(node, f"Input tensor must be at least 2D: {list(g.shape)}")
        axis = _channel_axis(node, g.ndim)
        others = tuple(i for i in range(g.ndim) if i != axis)
        return np.add.reduce(g, axis=others).astype(g.dtype, copy=False)

    return compute


@register_kernel("L2Loss")
def l2_loss_kernel(node):
    return lambda step, x: x.dtype.type(np.sum(np.square(x)) / 2)


@register_kernel("InTopKV2")
def in_top_k_kernel(node):
    def compute(step, predictions, targets, k):
        if predictions.ndim != 2 or targets.shape != (predictions.shape[0],):
            raise _invalid(node, f"predictions {list(predictions.shape)} must be "
                           f"[batch, classes] and targets {list(targets.shape)} "
                           "[batch]")
        n = predictions.shape[1]
        rows = np.arange(predictions.shape[0])
        valid = (targets >= 0) & (targets < n)
        safe = np.where(valid, targets, 0)
        target_p = predictions[rows, safe]
        higher = np.sum(predictions > target_p[:, None], axis=1)
        return valid & np.isfinite(target_p) & (higher < int(k))

    return compute


# -- gradient helpers ----------------------------------------------------------------
@register_kernel("BroadcastGradientArgs")
def broadcast_gradient_args_kernel(node):
    def compute(step, s0, s1):
        a, b = np.asarray(s0).tolist(), np.asarray(s1).tolist()
        n = max(len(a), len(b))
        pa, pb = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
        r0, r1 = [], []
        for i, (x, y) in enumerate(zip(pa, pb)):
            if x == y:
                if x == 1:
                    r0.append(i)
                    r1.append(i)
            elif x == 1:
                r0.append(i)
            elif y == 1:
                r1.append(i)
            else:
                raise _invalid(node, f"Incompatible shapes: {a} vs. {b}")
        dt = s0.dtype
        return np.array(r0, dtype=dt), np.array(r1, dtype=dt)

    return compute


@register_kernel("ReducedShape")
def reduced_shape_kernel(node):
    def compute(step, shape, axes):
        out = np.array(shape, copy=True)
        rank = out.shape[0]
        ax = np.asarray(axes).reshape(-1)
        if ax.size and (ax.min() < -rank or ax.max() >= rank):
            raise _invalid(node, f"axes {ax.tolist()} out of range for rank {rank}")
        out[ax % rank if rank else ax] = 1
        return out

    return compute


@register_kernel("ConcatOffset")
def concat_offset_kernel(node):
    def compute(step, axis, *shapes):
        rank = shapes[0].shape[0]
        ax = int(axis)
        if not -rank <= ax < rank:
            raise _invalid(node, f"Concat dim {ax} out of range for rank {rank}")
        ax %= rank
        outs, offset = [], 0
        for s in shapes:
            o = np.zeros(rank, dtype=np.int32)
            o[ax] = offset
            offset += int(s[ax])
            outs.append(o)
        return tuple(outs) if len(outs) > 1 else outs[0]

    return compute


def _normalize_axes(node, axes, rank):
    ax = np.asarray(axes).reshape(-1)
    if ax.size and (ax.min() < -rank or ax.max() >= rank):
        raise _invalid(node, f"axes {ax.tolist()} out of range for rank {rank}")
    return sorted({int(a) % rank for a in ax})


@register_kernel("ReduceProdOthers")
def reduce_prod_others_kernel(node):
    def compute(step, x, axes):
        x = np.asarray(x)
        red = _normalize_axes(node, axes, x.ndim)
        if x.size == 0:
            return np.zeros(x.shape, dtype=x.dtype)
        keep = [i for i in range(x.ndim) if i not in red]
        perm = red + keep
        t = np.transpose(x, perm)
        n = int(np.prod([x.shape[i] for i in red], dtype=np.int64))
        flat = t.reshape(n, -1)
        ones = np.ones((1, flat.shape[1]), dtype=x.dtype)
        left = np.cumprod(np.concatenate([ones, flat[:-1]]), axis=0)
        right = np.cumprod(np.concatenate([ones, flat[:0:-1]]), axis=0)[::-1]
        out = (left * right).reshape(t.shape)
        return np.transpose(out, np.argsort(perm)).astype(x.dtype)

    return compute


def strided_slice_index(begin, end, strides, attrs) -> tuple:
    """The NumPy index that TF's StridedSlice (with its masks) selects."""
    bm, em = attrs["begin_mask"], attrs["end_mask"]
    ellipsis, new_axis = attrs["ellipsis_mask"], attrs["new_axis_mask"]
    shrink = attrs["shrink_axis_mask"]
    idx = []
    for i in range(len(begin)):
        bit = 1 << i
        if ellipsis & bit:
            idx.append(Ellipsis)
        elif new_axis & bit:
            idx.append(None)
        elif shrink & bit:
            idx.append(int(begin[i]))
        else:
            idx.append(slice(None if bm & bit else int(begin[i]),
                             None if em & bit else int(end[i]), int(strides[i])))
    return tuple(idx)


@register_kernel("StridedSliceGrad")
def strided_slice_grad_kernel(node):
    attrs = node.attrs

    def compute(step, shape, begin, end, strides, dy):
        if np.any(np.asarray(strides) == 0):
            raise _invalid(node, "strides must be non-zero")
        out = np.zeros(tuple(int(d) for d in shape), dtype=dy.dtype)
        idx = strided_slice_index(begin, end, strides, attrs)
        view_shape = out[idx].shape
        out[idx] = np.reshape(dy, view_shape)
        return out

    return compute


@register_kernel("MirrorPadGrad")
def mirror_pad_grad_kernel(node):
    mode = node.attrs["mode"]
    mode = (mode.decode() if isinstance(mode, bytes) else mode).lower()

    def compute(step, grad, paddings):
        pads = np.asarray(paddings).reshape(-1, 2)
        if pads.shape[0] != grad.ndim:
            raise _invalid(node, f"paddings must have {grad.ndim} rows, got "
                           f"{pads.shape[0]}")
        out = np.asarray(grad)
        for axis, (before, after) in enumerate(pads.tolist()):
            n = out.shape[axis] - before - after
            if n < 0:
                raise _invalid(node, f"paddings {pads.tolist()} too large for "
                               f"gradient shape {list(grad.shape)}")
            if before == 0 and after == 0:
                continue
            # Where each padded position was copied from, as np.pad computes it.
            src = np.pad(np.arange(n), (before, after), mode=mode)
            moved = np.moveaxis(out, axis, 0)
            acc = np.zeros((n,) + moved.shape[1:], dtype=out.dtype)
            np.add.at(acc, src, moved)
            out = np.moveaxis(acc, 0, axis)
        return np.array(out, copy=True)

    return compute


@register_kernel("PreventGradient")
def prevent_gradient_kernel(node):
    return lambda step, x: x
