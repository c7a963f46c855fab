"""Gradients of the normalisation, ranking and resizing ops (``FusedBatchNormV3``,
``LRN``, ``TopKV2``, ``ResizeBilinear``, ``ResizeNearestNeighbor``)."""

from __future__ import annotations

import numpy as np

from nbdist.ops import image_ops  # noqa: F401  (the Resize* op definitions)
from nbdist.ops import nn_norm_ops as N
from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.ops import convert_to_tensor


@register_gradient("FusedBatchNormV3")
def _fused_batch_norm_grad(op, dy, *unused):
    x, scale, _, mean, variance = op.inputs
    training = op.get_attr("is_training")
    # Training normalised with the batch statistics the op saved (outputs 3, 4);
    # inference with the given mean and variance.
    saved_mean, saved_var = ((op.outputs[3], op.outputs[4]) if training
                             else (mean, variance))
    dx, dscale, doffset = N.fused_batch_norm_grad(
        dy, x, scale, saved_mean, saved_var, op.outputs[5],
        op.get_attr("epsilon"), op.get_attr("data_format"), training)
    return [dx, dscale, doffset, None, None]


@register_gradient("LRN")
def _lrn_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    attrs = {k: op.get_attr(k) for k in ("depth_radius", "bias", "alpha", "beta")}
    return [op.graph.create_op("LRNGrad", [grad, x, y],
                               dict(attrs, T=x.dtype.base_dtype),
                               name="LRNGrad").outputs[0]]


@register_gradient("TopKV2")
def _top_k_grad(op, grad, unused_indices_grad):
    # Each value's gradient goes back to the position it was taken from.
    from nbdist.ops import array_ops as A
    from nbdist.ops import math_ops as M
    from nbdist.ops.nn_ops import unsorted_segment_sum

    x, indices = op.inputs[0], op.outputs[1]
    shape = A.shape(x)
    last = A.gather(shape, -1 + A.size(shape))
    k = A.gather(A.shape(indices), -1 + A.size(shape))
    rows = M.cast(M.floordiv(M.cast(A.size(indices), last.dtype), k), last.dtype)
    offsets = A.expand_dims(M.multiply(A.range(rows), last), -1)
    flat = A.reshape(M.add(A.reshape(M.cast(indices, last.dtype), [-1, k]), offsets),
                     [-1])
    total = M.multiply(rows, last)
    dx = unsorted_segment_sum(A.reshape(grad, [-1]), flat, total)
    return [A.reshape(dx, shape), None]



@register_gradient("ResizeBilinear")
def _resize_bilinear_grad(op, grad):
    x = op.inputs[0]
    attrs = {k: op.get_attr(k) for k in ("align_corners", "half_pixel_centers")}
    if not x.dtype.is_floating:
        return [None, None]
    return [op.graph.create_op("ResizeBilinearGrad", [grad, x],
                               dict(attrs, T=x.dtype.base_dtype),
                               name="ResizeBilinearGrad").outputs[0], None]


@register_gradient("ResizeNearestNeighbor")
def _resize_nearest_grad(op, grad):
    from nbdist.ops import array_ops as A

    x = op.inputs[0]
    attrs = {k: op.get_attr(k) for k in ("align_corners", "half_pixel_centers")}
    shape = A.shape(x)
    size = A.slice(shape, [1], [2]) if not x.shape[1:3].is_fully_defined() else \
        convert_to_tensor(np.asarray(x.shape[1:3].as_list(), np.int32))
    return [op.graph.create_op("ResizeNearestNeighborGrad", [grad, size],
                               dict(attrs, T=grad.dtype.base_dtype),
                               name="ResizeNearestNeighborGrad").outputs[0], None]
