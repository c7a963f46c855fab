"""TF1 ``tf.nn`` functions built from other ops: activations (``selu``,
``swish``/``silu``, ``crelu``, ``relu_layer``), losses (``log_poisson_loss``,
``compute_average_loss``, ``scale_regularization_loss``), moments
(``sufficient_statistics``, ``normalize_moments``, ``weighted_moments``,
``batch_norm_with_global_normalization``), 1-D pooling and the generic ``pool``,
``conv1d_transpose``, ``depth_to_space``/``space_to_depth``, ``approx_max_k``/
``approx_min_k``. Gradients come from the ops they are made of.
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.constant_op import identity
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.ops import array_ops as A
from nbdist.ops import math_ops as M
from nbdist.ops.nn_conv_ops import (
    conv2d_transpose,
    depthwise_conv2d_native_backprop_filter,
    depthwise_conv2d_native_backprop_input,
)
from nbdist.ops.nn_conv3d_ops import conv3d_transpose
from nbdist.ops.nn_norm_ops import batch_normalization, top_k
from nbdist.ops.nn_ops import elu, relu, xw_plus_b
from nbdist.ops.nn_pool_ops import avg_pool, max_pool

# TF1 exports the native depthwise gradients under these names too.
depthwise_conv2d_backprop_filter = depthwise_conv2d_native_backprop_filter
depthwise_conv2d_backprop_input = depthwise_conv2d_native_backprop_input

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _scope(name, default):
    return get_default_graph().name_scope(name or default)


# -- activations -----------------------------------------------------------------------
def selu(features, name=None):
    """Scaled ELU: ``scale * (x if x > 0 else alpha * (exp(x) - 1))`` with TF's
    alpha 1.6733 and scale 1.0507.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     round(float(s.run(nd.nn.selu(1.0))), 4)
    1.0507
    """
    with _scope(name, "selu") as scope:
        x = convert_to_tensor(features, name="features")
        dt = x.dtype.base_dtype
        neg = M.multiply(convert_to_tensor(_SELU_ALPHA, dtype=dt), elu(x))
        return M.multiply(convert_to_tensor(_SELU_SCALE, dtype=dt),
                          A.where(M.greater(x, M.cast(0, dt)), x, neg), name=scope)


def swish(features, beta=1.0, name=None):
    """``x * sigmoid(beta * x)`` (also ``silu``)."""
    with _scope(name, "swish") as scope:
        x = convert_to_tensor(features, name="features")
        b = convert_to_tensor(beta, dtype=x.dtype.base_dtype, name="beta")
        return M.multiply(x, M.sigmoid(M.multiply(b, x)), name=scope)


silu = swish


def crelu(features, name=None, axis=-1):
    """``concat([relu(x), relu(-x)], axis)``: doubles the depth."""
    with _scope(name, "CRelu") as scope:
        x = convert_to_tensor(features, name="features")
        return relu(A.concat([x, M.negative(x)], axis), name=scope)


def relu_layer(x, weights, biases, name=None):
    """``relu(matmul(x, weights) + biases)``."""
    with _scope(name, "relu_layer") as scope:
        return relu(xw_plus_b(x, weights, biases), name=scope)


# -- losses ----------------------------------------------------------------------------
def log_poisson_loss(targets, log_input, compute_full_loss=False, name=None):
    """``exp(log_input) - targets * log_input``, plus Stirling's approximation of
    ``log(targets!)`` for targets > 1 when ``compute_full_loss``."""
    with _scope(name, "log_poisson_loss") as scope:
        log_input = convert_to_tensor(log_input, name="log_input")
        targets = convert_to_tensor(targets, dtype=log_input.dtype.base_dtype,
                                    name="targets")
        if targets.shape.is_fully_defined() and log_input.shape.is_fully_defined() \
                and targets.shape != log_input.shape:
            raise ValueError(f"log_input and targets must have the same shape "
                             f"({log_input.shape} vs {targets.shape})")
        result = M.subtract(M.exp(log_input), M.multiply(log_input, targets))
        if not compute_full_loss:
            return identity(result, name=scope)
        dt = targets.dtype.base_dtype
        safe = A.where(M.greater(targets, M.cast(1, dt)), targets,
                       A.ones_like(targets))
        stirling = M.add(M.subtract(M.multiply(safe, M.log(safe)), safe),
                         M.multiply(0.5, M.log(M.multiply(2 * np.pi, safe))))
        stirling = A.where(M.greater(targets, M.cast(1, dt)), stirling,
                           A.zeros_like(targets))
        return M.add(result, stirling, name=scope)


def compute_average_loss(per_example_loss, sample_weight=None,
                         global_batch_size=None):
    """``sum(per_example_loss * sample_weight) / global_batch_size`` (default: the
    batch size, one replica)."""
    with _scope(None, "average_loss") as scope:
        loss = convert_to_tensor(per_example_loss, name="per_example_loss")
        if sample_weight is not None:
            loss = M.multiply(loss, convert_to_tensor(sample_weight,
                                                      dtype=loss.dtype.base_dtype))
        total = M.reduce_sum(loss)
        if global_batch_size is None:
            n = M.cast(A.shape(loss)[0], loss.dtype.base_dtype)
        else:
            if isinstance(global_batch_size, int) and global_batch_size <= 0:
                raise ValueError("global_batch_size must be positive.")
            n = convert_to_tensor(global_batch_size, dtype=loss.dtype.base_dtype)
        return M.divide(total, n, name=scope)


def scale_regularization_loss(regularization_loss):
    """The summed regularization loss divided by the number of replicas (one
    outside a distribution strategy)."""
    with _scope(None, "scale_regularization_loss") as scope:
        return M.reduce_sum(convert_to_tensor(regularization_loss), name=scope)


# -- moments ---------------------------------------------------------------------------
def sufficient_statistics(x, axes, shift=None, keep_dims=None, name=None,
                          keepdims=None):
    """(count, sum of (x - shift), sum of squares of (x - shift), shift) over
    ``axes``; ``shift`` None sums x itself."""
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with _scope(name, "sufficient_statistics"):
        x = convert_to_tensor(x, name="x")
        dt = x.dtype.base_dtype
        shape = A.shape(x)
        counts = M.cast(M.reduce_prod(A.gather(shape, list(axes))), dt,
                        name="count")
        if shift is not None:
            shift = convert_to_tensor(shift, dtype=dt, name="shift")
            d = M.subtract(x, shift)
        else:
            d = x
        m_ss = M.reduce_sum(d, axes, keepdims=keep, name="mean_ss")
        v_ss = M.reduce_sum(M.square(d), axes, keepdims=keep, name="var_ss")
        return counts, m_ss, v_ss, shift


def normalize_moments(counts, mean_ss, variance_ss, shift, name=None):
    """(mean, variance) from ``sufficient_statistics``' sums."""
    with _scope(name, "normalize"):
        divisor = M.reciprocal(convert_to_tensor(counts), name="divisor")
        if shift is not None:
            shifted = M.multiply(mean_ss, divisor)
            mean = M.add(shifted, shift, name="mean")
        else:
            shifted = M.multiply(mean_ss, divisor, name="mean")
            mean = shifted
        variance = M.subtract(M.multiply(variance_ss, divisor), M.square(shifted),
                              name="variance")
        return mean, variance


def weighted_moments(x, axes, frequency_weights, name=None, keep_dims=None,
                     keepdims=None):
    """(mean, variance) of ``x`` over ``axes``, each element counted
    ``frequency_weights`` times (broadcast against x)."""
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with _scope(name, "weighted_moments"):
        x = convert_to_tensor(x, name="x")
        w = convert_to_tensor(frequency_weights, dtype=x.dtype.base_dtype,
                              name="frequency_weights")
        total = M.reduce_sum(M.multiply(w, x), axes, keepdims=True)
        weights = M.reduce_sum(M.add(w, A.zeros_like(x)), axes, keepdims=True)
        mean = M.divide(total, weights)
        var = M.divide(M.reduce_sum(M.multiply(w, M.squared_difference(x, mean)),
                                    axes, keepdims=True), weights)
        if not keep:
            mean, var = A.squeeze(mean, list(axes)), A.squeeze(var, list(axes))
        return mean, var


def batch_norm_with_global_normalization(t=None, m=None, v=None, beta=None,
                                         gamma=None, variance_epsilon=None,
                                         scale_after_normalization=None, name=None,
                                         input=None, mean=None,  # noqa: A002
                                         variance=None):
    """TF1's older batch normalisation: ``gamma`` applies only with
    ``scale_after_normalization``."""
    t = input if t is None else t
    m = mean if m is None else m
    v = variance if v is None else v
    return batch_normalization(t, m, v, beta,
                               gamma if scale_after_normalization else None,
                               variance_epsilon, name=name)


# -- pooling ---------------------------------------------------------------------------
def _one(v, channels_last):
    """The window value of an int, [k] or [1, k, 1] (NWC) / [1, 1, k] (NCW)."""
    if isinstance(v, int):
        return v
    v = list(v)
    return v[0] if len(v) == 1 else v[-2 if channels_last else -1]


def _pool1d(fn, x, ksize, strides, padding, data_format, name):
    x = convert_to_tensor(x, name="input")
    if data_format not in ("NWC", "NCW", "NHWC", "NCHW"):
        raise ValueError(f"data_format must be NWC or NCW, got {data_format!r}")
    last = data_format in ("NWC", "NHWC")
    k, s = (_one(v, last) for v in (ksize, strides))
    with _scope(name, "pool1d") as scope:
        x4 = A.expand_dims(x, 1 if last else 2)
        fmt = "NHWC" if last else "NCHW"
        size = [1, 1, k, 1] if last else [1, 1, 1, k]
        step = [1, 1, s, 1] if last else [1, 1, 1, s]
        return A.squeeze(fn(x4, size, step, padding, data_format=fmt),
                         [1 if last else 2], name=scope)


def max_pool1d(input, ksize, strides, padding, data_format="NWC",  # noqa: A002
               name=None):
    """Max pooling over the width of [batch, width, channels]."""
    return _pool1d(max_pool, input, ksize, strides, padding, data_format, name)


def avg_pool1d(input, ksize, strides, padding, data_format="NWC",  # noqa: A002
               name=None):
    """Average pooling over the width of [batch, width, channels]."""
    return _pool1d(avg_pool, input, ksize, strides, padding, data_format, name)


def _four(v, fmt):
    if isinstance(v, int):
        v = [v, v]
    v = list(v)
    if len(v) == 1:
        v = v * 2
    if len(v) == 2:
        return [1, *v, 1] if fmt == "NHWC" else [1, 1, *v]
    return v


def max_pool_v2(input, ksize, strides, padding, data_format=None,  # noqa: A002
                name=None):
    """TF2's ``max_pool``: ksize/strides as ints or lists; 1-D or 2-D by rank."""
    x = convert_to_tensor(input, name="input")
    if x.shape.rank == 3:
        return max_pool1d(x, ksize, strides, padding, data_format or "NWC", name)
    fmt = data_format or "NHWC"
    return max_pool(x, _four(ksize, fmt), _four(strides, fmt), padding, fmt, name)


def avg_pool_v2(input, ksize, strides, padding, data_format=None,  # noqa: A002
                name=None):
    """TF2's ``avg_pool``: ksize/strides as ints or lists; 1-D or 2-D by rank."""
    x = convert_to_tensor(input, name="input")
    if x.shape.rank == 3:
        return avg_pool1d(x, ksize, strides, padding, data_format or "NWC", name)
    fmt = data_format or "NHWC"
    return avg_pool(x, _four(ksize, fmt), _four(strides, fmt), padding, fmt, name)


def pool(input, window_shape, pooling_type, padding, dilation_rate=None,  # noqa: A002
         strides=None, name=None, data_format=None, dilations=None):
    """N-D pooling, ``pooling_type`` "MAX" or "AVG", over the 1 or 2 spatial axes
    of ``input`` (dilation 1)."""
    rate = dilation_rate if dilation_rate is not None else dilations
    if rate is not None and any(r != 1 for r in rate):
        raise ValueError("nd.nn.pool supports dilation_rate 1 only")
    if pooling_type not in ("MAX", "AVG"):
        raise ValueError(f"Invalid pooling_type: {pooling_type}")
    strides = strides or [1] * len(window_shape)
    fn = max_pool_v2 if pooling_type == "MAX" else avg_pool_v2
    if len(window_shape) not in (1, 2):
        raise ValueError("nd.nn.pool handles 1-D and 2-D windows")
    return fn(input, list(window_shape), list(strides), padding, data_format, name)


def conv1d_transpose(input, filters, output_shape, strides,  # noqa: A002
                     padding="SAME", data_format="NWC", dilations=None, name=None):
    """The transpose (gradient) of ``conv1d``: ``filters`` [k, out, in]."""
    if data_format not in ("NWC", None):
        raise ValueError("conv1d_transpose supports data_format NWC")
    if dilations not in (None, 1, [1], [1, 1, 1]):
        raise ValueError("conv1d_transpose supports dilations 1")
    s = strides if isinstance(strides, int) else list(strides)[-2 if len(strides) == 3
                                                               else 0]
    with _scope(name, "conv1d_transpose") as scope:
        x4 = A.expand_dims(convert_to_tensor(input, name="input"), 1)
        f4 = A.expand_dims(convert_to_tensor(filters, name="filters"), 0)
        shape = convert_to_tensor(output_shape, dtype=dtypes.int32)
        shape4 = A.concat([shape[:1], [1], shape[1:]], 0)
        out = conv2d_transpose(x4, f4, shape4, [1, 1, s, 1], padding)
        return A.squeeze(out, [1], name=scope)


# -- space / depth, approximate top-k --------------------------------------------------
def depth_to_space(input, block_size, name=None, data_format="NHWC"):  # noqa: A002
    """[n, h, w, c * b * b] to [n, h * b, w * b, c], TF's DCR order."""
    x = convert_to_tensor(input, name="input")
    b = int(block_size)
    if data_format != "NHWC":
        raise ValueError("depth_to_space supports data_format NHWC")
    n, h, w, c = x.shape.as_list()
    if c is not None and c % (b * b):
        raise ValueError(f"Dimension size must be evenly divisible by {b * b} but "
                         f"is {c}")
    with _scope(name, "DepthToSpace") as scope:
        s = A.shape(x)
        t = A.reshape(x, A.stack([s[0], s[1], s[2], b, b, s[3] // (b * b)]))
        t = A.transpose(t, [0, 1, 3, 2, 4, 5])
        out = A.reshape(t, A.stack([s[0], s[1] * b, s[2] * b, s[3] // (b * b)]),
                        name=scope)
        out.set_shape([n, h and h * b, w and w * b, c and c // (b * b)])
        return out


def space_to_depth(input, block_size, name=None, data_format="NHWC"):  # noqa: A002
    """[n, h * b, w * b, c] to [n, h, w, c * b * b], the inverse of
    ``depth_to_space``."""
    x = convert_to_tensor(input, name="input")
    b = int(block_size)
    if data_format != "NHWC":
        raise ValueError("space_to_depth supports data_format NHWC")
    n, h, w, c = x.shape.as_list()
    for d in (h, w):
        if d is not None and d % b:
            raise ValueError(f"Dimension size must be evenly divisible by {b} but "
                             f"is {d}")
    with _scope(name, "SpaceToDepth") as scope:
        s = A.shape(x)
        t = A.reshape(x, A.stack([s[0], s[1] // b, b, s[2] // b, b, s[3]]))
        t = A.transpose(t, [0, 1, 3, 2, 4, 5])
        out = A.reshape(t, A.stack([s[0], s[1] // b, s[2] // b, s[3] * b * b]),
                        name=scope)
        out.set_shape([n, h and h // b, w and w // b, c and c * b * b])
        return out


def _approx_k(operand, k, reduction_dimension, largest, name):
    x = convert_to_tensor(operand, name="operand")
    rank = x.shape.rank
    dim = reduction_dimension % rank
    perm = [i for i in range(rank) if i != dim] + [dim]
    moved = A.transpose(x, perm) if dim != rank - 1 else x
    vals, idx = top_k(moved if largest else M.negative(moved), k)
    if not largest:
        vals = M.negative(vals)
    if dim != rank - 1:
        back = list(np.argsort(perm))
        vals, idx = A.transpose(vals, back), A.transpose(idx, back)
    return vals, idx


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True,
                 name=None):
    """(values, indices) of the ``k`` largest along ``reduction_dimension``;
    nbdist computes them exactly (recall 1)."""
    return _approx_k(operand, k, reduction_dimension, True, name)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True,
                 name=None):
    """(values, indices) of the ``k`` smallest along ``reduction_dimension``."""
    return _approx_k(operand, k, reduction_dimension, False, name)


# -- transposed convolutions by rank, space to batch -----------------------------------
def conv_transpose(input, filters, output_shape, strides, padding="SAME",  # noqa: A002
                   data_format=None, dilations=None, name=None):
    """The transposed convolution for 1-D, 2-D or 3-D ``input`` (by its rank)."""
    x = convert_to_tensor(input, name="input")
    rank = x.shape.rank
    if rank == 3:
        return conv1d_transpose(x, filters, output_shape, strides, padding,
                                data_format or "NWC", dilations, name)
    if rank == 4:
        fmt = data_format or "NHWC"
        return conv2d_transpose(x, filters, output_shape, _four(strides, fmt),
                                padding, fmt, name,
                                dilations=None if dilations is None else
                                _four(dilations, fmt))
    if rank == 5:
        s = [strides] * 3 if isinstance(strides, int) else list(strides)
        return conv3d_transpose(x, filters, output_shape, s, padding,
                                data_format or "NDHWC", name)
    raise ValueError(f"input must have rank 3, 4 or 5, got {rank}")


def atrous_conv2d_transpose(value, filters, output_shape, rate, padding,
                            name=None):
    """The transpose of ``atrous_conv2d``: a transposed convolution with
    ``rate - 1`` zeros between the filter's taps."""
    if rate < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    if padding not in ("SAME", "VALID"):
        raise ValueError(f"padding must be either VALID or SAME: {padding}")
    return conv2d_transpose(value, filters, output_shape, [1, 1, 1, 1], padding,
                            name=name or "atrous_conv2d_transpose",
                            dilations=[1, rate, rate, 1])


def space_to_batch(input, paddings, block_size=None, name=None,  # noqa: A002
                   block_shape=None):
    """Zero-pads [n, h, w, c] by ``paddings`` and moves each ``block_size``
    x ``block_size`` block's positions into the batch: [b * b * n, h / b, w / b,
    c], batch index ``(i * b + j) * n + k`` as TF."""
    b = int(block_size if block_size is not None else np.ravel(block_shape)[0])
    with _scope(name, "SpaceToBatchND") as scope:
        x = A.pad(convert_to_tensor(input, name="input"), [[0, 0], *paddings, [0, 0]])
        n, h, w, c = x.shape.as_list()
        for d in (h, w):
            if d is not None and d % b:
                raise ValueError(f"padded spatial dimensions must be divisible by "
                                 f"block_size {b}, got {d}")
        s = A.shape(x)
        t = A.reshape(x, A.stack([s[0], s[1] // b, b, s[2] // b, b, s[3]]))
        t = A.transpose(t, [2, 4, 0, 1, 3, 5])
        out = A.reshape(t, A.stack([s[0] * b * b, s[1] // b, s[2] // b, s[3]]),
                        name=scope)
        out.set_shape([n and n * b * b, h and h // b, w and w // b, c])
        return out


__all__ = [
    "atrous_conv2d_transpose", "conv_transpose", "space_to_batch",
    "depthwise_conv2d_backprop_filter", "depthwise_conv2d_backprop_input",
    "approx_max_k", "approx_min_k", "avg_pool1d", "avg_pool_v2",
    "batch_norm_with_global_normalization", "compute_average_loss",
    "conv1d_transpose", "crelu", "depth_to_space", "log_poisson_loss", "max_pool1d",
    "max_pool_v2", "normalize_moments", "pool", "relu_layer",
    "scale_regularization_loss", "selu", "silu", "space_to_depth",
    "sufficient_statistics", "swish", "weighted_moments",
]
