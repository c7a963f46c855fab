"""Normalisation and ranking ops: ``FusedBatchNormV3`` (+ grad), ``LRN`` (+ grad),
``TopKV2``, and the ``nd.nn`` wrappers ``fused_batch_norm``,
``batch_normalization``, ``local_response_normalization`` / ``lrn``, ``top_k``,
``zero_fraction``, ``weighted_cross_entropy_with_logits``.
"""

from __future__ import annotations

import collections

import numpy as np

from nbdist.framework import dtypes
from nbdist.ops.nn_conv_ops import _s, op_error, rank4, spatial_axes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape

_FLOATS = (dtypes.float16, dtypes.float32, dtypes.float64)


# -- FusedBatchNormV3 ------------------------------------------------------------------
def _channels(c, x):
    return x[spatial_axes(c.attr("data_format"))[3]]


def _check_vector(c, i, what, ch):
    s = c.shape(i)
    if s.rank is not None and s.rank != 1:
        raise op_error(c, f"Shape must be rank 1 but is rank {s.rank}")
    n = s[0] if s.rank == 1 else None
    if n is not None and ch is not None and n != ch and not (
            what in ("mean", "variance") and n == 0):
        raise op_error(c, f"Dimensions must be equal, but are {ch} and {n}")


def _fused_bn_infer(c):
    t, u = c.dtype(0), c.attr("U")
    if t not in _FLOATS or u not in _FLOATS:
        raise TypeError(f"{c.op_type} needs floating point inputs, got {t.name}")
    x = rank4(c, 0)
    ch = _channels(c, x)
    for i, what in ((1, "scale"), (2, "offset"), (3, "mean"), (4, "variance")):
        if c.dtype(i) is not u:
            raise TypeError(f"{what} must be {u.name}, got {c.dtype(i).name}")
        _check_vector(c, i, what, ch)
    vec = TensorShape([ch])
    return [(t, x)] + [(u, vec)] * 4 + [(u, TensorShape([0]))]


def _fused_bn_grad_infer(c):
    t, u = c.dtype(0), c.attr("U")
    x = rank4(c, 1)
    ch = _channels(c, x)
    vec = TensorShape([ch])
    return [(t, x.merge_with(rank4(c, 0))), (u, vec), (u, vec), (u, TensorShape([0])),
            (u, TensorShape([0]))]


_BN_ATTRS = {"T": ("type", None), "U": ("type", dtypes.float32),
             "epsilon": ("float", 1e-4), "exponential_avg_factor": ("float", 1.0),
             "data_format": ("string", "NHWC"), "is_training": ("bool", True)}
register_op("FusedBatchNormV3", _fused_bn_infer, attrs=_BN_ATTRS, num_inputs=5)
register_op("FusedBatchNormGradV3", _fused_bn_grad_infer,
            attrs={k: v for k, v in _BN_ATTRS.items()
                   if k != "exponential_avg_factor"}, num_inputs=6)


def fused_batch_norm(x, scale, offset, mean=None, variance=None, epsilon=0.001,
                     data_format="NHWC", is_training=True, name=None,
                     exponential_avg_factor=1.0):
    """Batch normalisation of 4-D ``x`` over all but the channel axis, in one op.

    Returns ``(y, batch_mean, batch_variance)``. Training normalises with the
    biased batch variance but returns the unbiased (n / (n - 1)) one, as TF;
    inference (``is_training=False``) uses and returns ``mean``/``variance``.
    """
    g = get_default_graph()
    with g.name_scope(name or "FusedBatchNormV3") as scope:
        x = convert_to_tensor(x, name="input")
        scale = convert_to_tensor(scale, name="scale")
        u = scale.dtype.base_dtype
        offset = convert_to_tensor(offset, dtype=u, name="offset")
        if not is_training and (mean is None or variance is None):
            raise ValueError("fused_batch_norm needs mean and variance when "
                             "is_training is False")
        empty = np.zeros([0], u.as_numpy_dtype)
        mean = convert_to_tensor(empty if mean is None else mean, dtype=u,
                                 name="mean")
        variance = convert_to_tensor(empty if variance is None else variance,
                                     dtype=u, name="variance")
        # TF's floor on epsilon (cuDNN's requirement, kept everywhere).
        epsilon = max(float(epsilon), 1.001e-5)
        op = g.create_op("FusedBatchNormV3", [x, scale, offset, mean, variance],
                         {"T": x.dtype.base_dtype, "U": u, "epsilon": epsilon,
                          "exponential_avg_factor": float(exponential_avg_factor),
                          "data_format": _s(data_format),
                          "is_training": bool(is_training)}, name=scope)
        return op.outputs[0], op.outputs[1], op.outputs[2]


def fused_batch_norm_grad(y_backprop, x, scale, reserve_1, reserve_2, reserve_3,
                          epsilon, data_format, is_training, name=None):
    g = get_default_graph()
    op = g.create_op("FusedBatchNormGradV3",
                     [y_backprop, x, scale, reserve_1, reserve_2, reserve_3],
                     {"T": x.dtype.base_dtype, "U": scale.dtype.base_dtype,
                      "epsilon": epsilon, "data_format": data_format,
                      "is_training": is_training},
                     name=name or "FusedBatchNormGradV3")
    return op.outputs[:3]


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon,
                        name=None):
    """(x - mean) * scale / sqrt(variance + variance_epsilon) + offset, with
    broadcasting; ``offset`` and ``scale`` may be None."""
    from nbdist.ops import math_ops as M

    with get_default_graph().name_scope(name or "batchnorm") as scope:
        x = convert_to_tensor(x, name="x")
        dt = x.dtype.base_dtype
        mean = convert_to_tensor(mean, dtype=dt, name="mean")
        variance = convert_to_tensor(variance, dtype=dt, name="variance")
        inv = M.rsqrt(M.add(variance, convert_to_tensor(variance_epsilon, dtype=dt)))
        if scale is not None:
            inv = M.multiply(inv, convert_to_tensor(scale, dtype=dt, name="scale"))
        shift = M.negative(M.multiply(mean, inv)) if offset is None else M.subtract(
            convert_to_tensor(offset, dtype=dt, name="offset"), M.multiply(mean, inv))
        return M.add(M.multiply(x, inv), shift, name=scope)


# -- LRN -------------------------------------------------------------------------------
def _lrn_infer(c):
    d = c.dtype(0)
    if d not in _FLOATS:
        raise TypeError(f"LRN needs a floating point input, got {d.name}")
    return [(d, rank4(c, 0))]


def _lrn_grad_infer(c):
    d = c.check_same_dtypes([0, 1, 2])
    return [(d, rank4(c, 0).merge_with(rank4(c, 1)).merge_with(rank4(c, 2)))]


_LRN_ATTRS = {"T": ("type", dtypes.float32), "depth_radius": ("int", 5),
              "bias": ("float", 1.0), "alpha": ("float", 1.0), "beta": ("float", 0.5)}
register_op("LRN", _lrn_infer, attrs=_LRN_ATTRS, num_inputs=1)
register_op("LRNGrad", _lrn_grad_infer, attrs=_LRN_ATTRS, num_inputs=3)


def local_response_normalization(input, depth_radius=5, bias=1.0,
                                 alpha=1.0, beta=0.5, name=None):
    """input / (bias + alpha * sqr_sum) ** beta, where sqr_sum sums the squares
    of the ``depth_radius`` channels either side (last axis of a 4-D input)."""
    x = convert_to_tensor(input, name="input")
    return x.graph.create_op(
        "LRN", [x], {"T": x.dtype.base_dtype, "depth_radius": int(depth_radius),
                     "bias": float(bias), "alpha": float(alpha), "beta": float(beta)},
        name=name or "LRN").outputs[0]


lrn = local_response_normalization


# -- TopKV2 ----------------------------------------------------------------------------
def _top_k_infer(c):
    if not c.dtype(0).is_numeric:
        raise TypeError(f"top_k needs a numeric input, got {c.dtype(0).name}")
    if c.dtype(1) is not dtypes.int32:
        raise TypeError(f"k must be int32, got {c.dtype(1).name}")
    x = c.shape(0)
    if x.rank == 0:
        raise op_error(c, "Shape must be at least rank 1 but is rank 0")
    k = c.constant(1)
    k = None if k is None else int(np.asarray(k))
    if k is not None and k < 0:
        raise op_error(c, f"Need k >= 0, got {k}")
    if x.rank is None:
        out = TensorShape(None)
    else:
        last = x[x.rank - 1]
        if k is not None and last is not None and last < k:
            raise op_error(c, f"input must have last dimension >= k = {k} but is "
                           f"{last}")
        out = x[:x.rank - 1].concatenate([k])
    return [(c.dtype(0), out), (c.attr("index_type"), out)]


register_op("TopKV2", _top_k_infer,
            attrs={"T": ("type", None), "sorted": ("bool", True),
                   "index_type": ("type", dtypes.int32)}, num_inputs=2)


# TF's result type: ``top_k(x).indices`` reads as in TF1.
TopKV2 = collections.namedtuple("TopKV2", ["values", "indices"])


def top_k(input, k=1, sorted=True, name=None,
          index_type=dtypes.int32):
    """(values, indices) of the ``k`` largest entries of each last-axis row,
    largest first; equal values keep their order (the lower index first)."""
    x = convert_to_tensor(input, name="input")
    k = convert_to_tensor(k, dtype=dtypes.int32, name="k")
    op = x.graph.create_op("TopKV2", [x, k],
                           {"T": x.dtype.base_dtype, "sorted": bool(sorted),
                            "index_type": dtypes.as_dtype(index_type)},
                           name=name or "TopKV2")
    return TopKV2(op.outputs[0], op.outputs[1])


# -- composites ------------------------------------------------------------------------
def zero_fraction(value, name=None):
    """The fraction of entries of ``value`` that are zero (a float32 scalar)."""
    from nbdist.ops import math_ops as M

    with get_default_graph().name_scope(name or "zero_fraction") as scope:
        value = convert_to_tensor(value, name="value")
        zero = convert_to_tensor(0, dtype=value.dtype.base_dtype)
        return M.reduce_mean(M.cast(M.equal(value, zero), dtypes.float32),
                             name=scope)


def weighted_cross_entropy_with_logits(labels=None, logits=None, pos_weight=None,
                                       name=None, targets=None):
    """Sigmoid cross-entropy with the positive term weighted by ``pos_weight``:
    (1 - z) * x + (1 + (q - 1) * z) * log(1 + exp(-x)), computed stably."""
    from nbdist.ops import math_ops as M
    from nbdist.ops.nn_ops import softplus

    labels = targets if labels is None else labels
    if labels is None or logits is None or pos_weight is None:
        raise ValueError("weighted_cross_entropy_with_logits needs labels, logits "
                         "and pos_weight")
    with get_default_graph().name_scope(name or "logistic_loss") as scope:
        logits = convert_to_tensor(logits, name="logits")
        dt = logits.dtype.base_dtype
        labels = convert_to_tensor(labels, dtype=dt, name="labels")
        if (logits.shape.rank is not None and labels.shape.rank is not None
                and not logits.shape.is_compatible_with(labels.shape)):
            raise ValueError(f"logits and labels must have the same shape "
                             f"({logits.shape} vs {labels.shape})")
        one = convert_to_tensor(1, dtype=dt)
        q = convert_to_tensor(pos_weight, dtype=dt, name="pos_weight")
        log_weight = M.add(one, M.multiply(M.subtract(q, one), labels))
        softplus_neg = softplus(M.negative(logits))   # log(1 + exp(-x)), stably
        return M.add(M.multiply(M.subtract(one, labels), logits),
                     M.multiply(log_weight, softplus_neg), name=scope)


__all__ = [
    "batch_normalization",
    "fused_batch_norm",
    "local_response_normalization",
    "lrn",
    "top_k",
    "weighted_cross_entropy_with_logits",
    "zero_fraction",
]
