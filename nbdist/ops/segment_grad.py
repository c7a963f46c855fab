"""Gradients of the segment reductions of ``segment_ops``.

Each row of ``data`` gets the gradient of the segment it fell in, gathered by
its id: as it is for a sum, over the segment's size for a mean, split evenly
among the rows equal to the result for a max or min, and times the product of
the segment's other rows for a product (zeros handled without dividing by
them). Rows with a negative id (dropped by the unsorted ops) get 0.
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.ops import _static_value, convert_to_tensor
from nbdist.ops import array_ops as A
from nbdist.ops import math_ops as M
from nbdist.ops import segment_ops as S


def _gather_rows(params, ids, like):
    """``params[ids]``, shaped like ``like`` (the op's data), 0 where an id is
    negative."""
    known = _static_value(ids)
    if known is not None and (np.asarray(known) >= 0).all():
        return A.gather(params, ids)
    zero = convert_to_tensor(0, dtype=ids.dtype.base_dtype)
    gathered = A.gather(params, M.maximum(ids, zero))
    keep = M.greater_equal(ids, zero)
    extra = like.shape.rank - ids.shape.rank if (
        like.shape.rank is not None and ids.shape.rank is not None) else None
    if extra is None:
        extra_t = M.subtract(A.rank(like), A.rank(ids))
        tail = A.ones(A.expand_dims(extra_t, 0), dtype=dtypes.int32)
    else:
        tail = A.ones([extra], dtype=dtypes.int32)
    keep = A.reshape(keep, A.concat([A.shape(ids), tail], 0))
    keep = M.logical_and(keep, A.ones_like(gathered, dtype=dtypes.bool))
    return A.where(keep, gathered, A.zeros_like(gathered))


def _reducer(op):
    """The segment sum matching ``op`` (sorted, or unsorted with its count)."""
    ids = op.inputs[1]
    if op.type.startswith("Unsorted"):
        n = op.inputs[2]
        return lambda x: S.unsorted_segment_sum(x, ids, n)
    return lambda x: S.segment_sum(x, ids)


@register_gradient("UnsortedSegmentSum")
def _unsorted_segment_sum_grad(op, grad):
    return [_gather_rows(grad, op.inputs[1], op.inputs[0]), None, None]


@register_gradient("SegmentSum")
def _segment_sum_grad(op, grad):
    return [A.gather(grad, op.inputs[1]), None]


@register_gradient("SegmentMean")
def _segment_mean_grad(op, grad):
    data, ids = op.inputs
    sizes = S._segment_sizes(data, ids, A.shape(grad)[0])
    return [A.gather(M.realdiv(grad, sizes), ids), None]


def _min_or_max_grad(op, grad):
    data, ids = op.inputs[0], op.inputs[1]
    is_selected = M.equal(data, _gather_rows(op.outputs[0], ids, data))
    selected = M.cast(is_selected, grad.dtype.base_dtype)
    num_selected = _reducer(op)(selected)
    share = _gather_rows(M.realdiv(grad, num_selected), ids, data)
    return [M.multiply(share, selected)] + [None] * (len(op.inputs) - 1)


for _t in ("SegmentMax", "SegmentMin", "UnsortedSegmentMax", "UnsortedSegmentMin"):
    register_gradient(_t)(_min_or_max_grad)


def _prod_grad(op, grad):
    data, ids = op.inputs[0], op.inputs[1]
    dt = data.dtype.base_dtype
    reduce = _reducer(op)
    is_zero = M.equal(data, convert_to_tensor(0, dtype=dt))
    num_zeros = reduce(M.cast(is_zero, dt))
    # Two zeros or more: every partial derivative of the product is 0.
    grad = A.where(M.greater(num_zeros, convert_to_tensor(1, dtype=dt)),
                   A.zeros_like(grad), grad)
    nonzero = A.where(is_zero, A.ones_like(data), data)
    if op.type.startswith("Unsorted"):
        nonzero_prod = S.unsorted_segment_prod(nonzero, ids, op.inputs[2])
    else:
        nonzero_prod = S.segment_prod(nonzero, ids)
    others = A.where(is_zero, _gather_rows(nonzero_prod, ids, data),
                     M.realdiv(_gather_rows(op.outputs[0], ids, data), nonzero))
    return [M.multiply(_gather_rows(grad, ids, data), others)] + [None] * (
        len(op.inputs) - 1)


register_gradient("SegmentProd")(_prod_grad)
register_gradient("UnsortedSegmentProd")(_prod_grad)
