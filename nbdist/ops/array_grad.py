"""Gradients of the array ops (reshape, transpose, concat/split, slicing, gather,
tile, select...)."""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.ops import math_grad as _mg
from nbdist.framework.gradient_registry import NotDifferentiable, register_gradient
from nbdist.framework.ops import Tensor, convert_to_tensor


def _m():
    from nbdist.ops import math_ops

    return math_ops


def _a():
    from nbdist.ops import array_ops

    return array_ops


def _passthrough(op, grad):
    return [grad] + [None] * (len(op.inputs) - 1)


for _t in ("Identity", "PlaceholderWithDefault"):
    register_gradient(_t)(_passthrough)

for _t in ("StopGradient", "Shape", "Size", "Rank", "ZerosLike",
           "OnesLike", "OneHot", "Range", "Where", "InvertPermutation", "Const",
           "Placeholder", "VariableV2", "NoOp", "IsVariableInitialized"):
    NotDifferentiable(_t)


def _reshape_to_input(op, grad):
    return [_a().reshape(grad, _mg.shape_of(op.inputs[0]))] + [None] * (
        len(op.inputs) - 1)


for _t in ("Reshape", "ExpandDims", "Squeeze"):
    register_gradient(_t)(_reshape_to_input)


@register_gradient("Transpose")
def _transpose_grad(op, grad):
    A = _a()
    perm = op.inputs[1]
    values = _mg.static_ints(perm)
    if values is not None:
        inverse = np.argsort(np.asarray(values)).astype(
            perm.dtype.base_dtype.as_numpy_dtype)
        return [A.transpose(grad, convert_to_tensor(inverse)), None]
    return [A.transpose(grad, A.invert_permutation(perm)), None]


# -- concat / stack / split ------------------------------------------------------------
def _static_axis(axis_t: Tensor, rank):
    v = _mg.static_ints(axis_t)
    if v is None or rank is None or not -rank <= v[0] < rank:
        return None
    return v[0] % rank


@register_gradient("ConcatV2")
def _concat_grad(op, grad):
    A = _a()
    values, axis_t = op.inputs[:-1], op.inputs[-1]
    if len(values) == 1:
        return [grad, None]
    rank = values[0].shape.rank
    if rank is None:
        rank = grad.shape.rank
    axis = _static_axis(axis_t, rank)
    sizes = [v.shape[axis] if axis is not None and v.shape.rank is not None
             else None for v in values]
    out = []
    if axis is not None and all(s is not None for s in sizes):
        offset = 0
        for s in sizes:
            begin = [0] * rank
            begin[axis] = offset
            size = [-1] * rank
            size[axis] = s
            out.append(A.slice(grad, begin, size))
            offset += s
        return out + [None]
    from nbdist.ops.nn_ops import concat_offset

    axis32 = _m().cast(axis_t, dtypes.int32)
    shapes = [A.shape(v) for v in values]
    offsets = concat_offset(axis32, shapes)
    return [A.slice(grad, o, s) for o, s in zip(offsets, shapes)] + [None]


@register_gradient("Pack")
def _pack_grad(op, grad):
    return list(_a().unstack(grad, num=op.get_attr("N"), axis=op.get_attr("axis")))


@register_gradient("Unpack")
def _unpack_grad(op, *grads):
    return [_a().stack(list(grads), axis=op.get_attr("axis"))]


@register_gradient("Split")
def _split_grad(op, *grads):
    return [None, _a().concat(list(grads), op.inputs[0])]


@register_gradient("SplitV")
def _split_v_grad(op, *grads):
    return [_a().concat(list(grads), op.inputs[2]), None, None]


# -- slicing ---------------------------------------------------------------------------
@register_gradient("Slice")
def _slice_grad(op, grad):
    A, M = _a(), _m()
    x, begin_t = op.inputs[0], op.inputs[1]
    y = op.outputs[0]
    begin = _mg.static_ints(begin_t)
    if begin is not None and x.shape.is_fully_defined() and (
            y.shape.is_fully_defined()):
        dims, out = x.shape.as_list(), y.shape.as_list()
        paddings = [[b, d - b - s] for b, d, s in zip(begin, dims, out)]
        if all(p == [0, 0] for p in paddings):
            return [grad, None, None]
        return [A.pad(grad, np.asarray(paddings, dtype=np.int32)), None, None]
    index = begin_t.dtype.base_dtype
    input_shape = A.shape(x, out_type=index)
    slice_size = A.shape(y, out_type=index)
    before = A.expand_dims(begin_t, 1)
    after = A.expand_dims(M.subtract(M.subtract(input_shape, slice_size), begin_t), 1)
    return [A.pad(grad, A.concat([before, after], 1)), None, None]


_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
          "shrink_axis_mask")


@register_gradient("StridedSlice")
def _strided_slice_grad(op, grad):
    from nbdist.ops.nn_ops import strided_slice_grad

    x, begin, end, strides = op.inputs
    index = begin.dtype.base_dtype
    if x.shape.is_fully_defined():
        shape = convert_to_tensor(np.asarray(x.shape.as_list(),
                                             dtype=index.as_numpy_dtype))
    else:
        shape = _a().shape(x, out_type=index)
    masks = {m: op.get_attr(m) for m in _MASKS}
    return [strided_slice_grad(shape, begin, end, strides, grad, **masks),
            None, None, None]


def _gather_slices(op, grad, params, indices):
    # As TF: the gradient of an axis-0 gather is the IndexedSlices of the rows
    # it read (so an optimizer updates just those rows where params live).
    from nbdist.framework import dtypes
    from nbdist.ops.indexed_slices import IndexedSlices

    A = _a()
    g = op.graph
    if params.shape.is_fully_defined():
        from nbdist.framework.constant_op import constant

        dense_shape = constant(params.shape.as_list(), dtype=dtypes.int32)
        tail = params.shape.as_list()[1:]
    else:
        with g.colocate_with(params.op):
            dense_shape = A.shape(params)
        tail = dense_shape[1:]
    flat = A.reshape(indices, [-1])
    if isinstance(tail, list):
        values = A.reshape(grad, [-1] + tail)
    else:
        values = A.reshape(grad, A.concat([[-1], tail], 0))
    return IndexedSlices(values, flat, dense_shape)


@register_gradient("GatherV2")
def _gather_grad(op, grad):
    from nbdist.ops.nn_ops import unsorted_segment_sum

    A = _a()
    params, indices, axis_t = op.inputs
    prank = params.shape.rank
    axis = _static_axis(axis_t, prank)
    if axis is None:
        raise NotImplementedError(
            f"The gradient of {op.name} needs a constant axis and params of known "
            "rank")
    if params.shape[axis] is not None:
        n = params.shape[axis]
    else:
        n = A.gather(A.shape(params), axis)
    if axis == 0:
        return [_gather_slices(op, grad, params, indices), None, None]
    irank = indices.shape.rank
    if irank is None:
        raise NotImplementedError(
            f"The gradient of {op.name} along axis {axis} needs indices of known rank")
    # grad is params.shape[:axis] + indices.shape + params.shape[axis+1:]: move
    # the indices dimensions first, sum into segments, move the axis back.
    grank = prank - 1 + irank
    perm = (list(range(axis, axis + irank)) + list(range(axis))
            + list(range(axis + irank, grank)))
    moved = A.transpose(grad, perm)
    summed = unsorted_segment_sum(moved, indices, n)
    back = list(range(1, axis + 1)) + [0] + list(range(axis + 1, prank))
    return [A.transpose(summed, back), None, None]


# -- tile, fill, pad, reverse, broadcast -----------------------------------------------
@register_gradient("Tile")
def _tile_grad(op, grad):
    A, M = _a(), _m()
    x, multiples_t = op.inputs
    multiples = _mg.static_ints(multiples_t)
    if multiples is not None and x.shape.is_fully_defined():
        dims = x.shape.as_list()
        if all(m == 1 for m in multiples):
            return [grad, None]
        split = [v for m, d in zip(multiples, dims) for v in (m, d)]
        axes = list(range(0, 2 * len(dims), 2))
        return [M.reduce_sum(A.reshape(grad, split), axes), None]
    input_shape = A.shape(x, out_type=multiples_t.dtype.base_dtype)
    split = A.reshape(A.transpose(A.stack([multiples_t, input_shape])), [-1])
    rank = x.shape.rank
    if rank is not None:
        axes = list(range(0, 2 * rank, 2))
    else:
        axes = A.range(0, A.size(split), 2)
    return [M.reduce_sum(A.reshape(grad, split), axes), None]


@register_gradient("Fill")
def _fill_grad(op, grad):
    return [None, _m().reduce_sum(grad)]


def _pad_grad(op, grad):
    A = _a()
    x, paddings = op.inputs[0], op.inputs[1]
    pads = _mg.static_ints(paddings)
    rest = [None] * (len(op.inputs) - 1)
    if pads is not None and x.shape.is_fully_defined():
        begin = pads[0::2]
        if not any(pads):
            return [grad] + rest
        return [A.slice(grad, begin, x.shape.as_list())] + rest
    begin = A.reshape(A.slice(paddings, [0, 0], A.stack([A.rank(x), 1])), [-1])
    return [A.slice(grad, begin, A.shape(x, out_type=begin.dtype.base_dtype))] + rest


register_gradient("Pad")(_pad_grad)
register_gradient("PadV2")(_pad_grad)


@register_gradient("MirrorPad")
def _mirror_pad_grad(op, grad):
    from nbdist.ops.nn_ops import mirror_pad_grad

    return [mirror_pad_grad(grad, op.inputs[1], op.get_attr("mode")), None]


@register_gradient("MirrorPadGrad")
def _mirror_pad_grad_grad(op, grad):
    return [_a().pad(grad, op.inputs[1], mode=op.get_attr("mode")), None]


@register_gradient("ReverseV2")
def _reverse_grad(op, grad):
    return [_a().reverse(grad, op.inputs[1]), None]


@register_gradient("BroadcastTo")
def _broadcast_to_grad(op, grad):
    return [_mg.sum_to(grad, op.inputs[0]), None]


# -- select, clip ----------------------------------------------------------------------
@register_gradient("Select")
def _select_grad(op, grad):
    A = _a()
    c, x = op.inputs[0], op.inputs[1]
    zeros = A.zeros_like(x)
    return [None, A.where(c, grad, zeros), A.where(c, zeros, grad)]


@register_gradient("SelectV2")
def _select_v2_grad(op, grad):
    A = _a()
    c, x, y = op.inputs
    zeros = A.zeros_like(grad)
    gx = A.where_v2(c, grad, zeros)
    gy = A.where_v2(c, zeros, grad)
    return [None, _mg.sum_to(gx, x, [c, y]), _mg.sum_to(gy, y, [c, x])]


@register_gradient("ClipByValue")
def _clip_by_value_grad(op, grad):
    A, M = _a(), _m()
    x, lo, hi = op.inputs
    zeros = A.zeros_like(grad)
    below = M.less(x, lo)
    above = M.greater(x, hi)
    gx = A.where_v2(M.logical_or(below, above), zeros, grad)
    glo = A.where_v2(below, grad, zeros)
    ghi = A.where_v2(above, grad, zeros)
    return [_mg.sum_to(gx, x, [lo, hi]), _mg.sum_to(glo, lo, [x, hi]),
            _mg.sum_to(ghi, hi, [x, lo])]


__all__: list[str] = []
