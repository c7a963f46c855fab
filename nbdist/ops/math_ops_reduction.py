"""Reductions: ``Sum``, ``Mean``, ``Max``, ``Min``, ``Prod``, ``All``, ``Any``,
``ArgMax`` and ``ArgMin``, with their shape functions and wrappers
(``nd.reduce_sum``...), and ``reduce_logsumexp`` and ``count_nonzero`` built from
other ops.
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.constant_op import stop_gradient
from nbdist.ops.array_ops_creation import range as _range
from nbdist.ops.array_ops_creation import zeros_like
from nbdist.ops.array_ops_join import pack_if_needed
from nbdist.ops.array_ops_shape import rank, reshape, shape
from nbdist.ops.array_ops_slicing import where
from nbdist.ops.math_ops_elementwise import (
    add,
    cast,
    exp,
    is_finite,
    log,
    not_equal,
    subtract,
)
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import (
    COMPLEX,
    INDEX,
    NUMERIC,
    check_type,
    const_ints,
    is_tensor_like,
    op_scope,
)
from nbdist.framework.ops import Tensor, convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape


def reduced_shape(shape: TensorShape, axes, keep_dims: bool) -> TensorShape:
    """The shape after reducing ``axes`` (Python ints, may be negative)."""
    if shape.rank is None:
        return TensorShape(None)
    rank = shape.rank
    norm = set()
    for a in axes:
        if a < -rank or a >= rank:
            raise ValueError(
                f"Invalid reduction dimension {a} for input with {rank} dimensions"
            )
        norm.add(a % rank)
    dims = []
    for i, d in enumerate(shape.dims):
        if i not in norm:
            dims.append(d)
        elif keep_dims:
            dims.append(1)
    return TensorShape(dims)


def _reduction_infer(allowed):
    def infer(c):
        d = check_type(c, 0, allowed, "input")
        check_type(c, 1, INDEX, "reduction_indices")
        shape, keep = c.shape(0), c.attr("keep_dims")
        if c.shape(1).rank is not None and c.shape(1).rank > 1:
            raise ValueError(
                f"reduction_indices must be a scalar or a vector, got "
                f"shape {c.shape(1)}"
            )
        axes = const_ints(c, 1)
        if axes is None:
            if c.shape(1).num_elements() == 0:
                return [(d, shape)]
            if keep and shape.rank is not None:
                return [(d, TensorShape([None] * shape.rank))]
            return [(d, TensorShape(None))]
        return [(d, reduced_shape(shape, axes, keep))]

    return infer


_REDUCTION_ATTRS = {
    "keep_dims": ("bool", False),
    "T": ("type", None),
    "Tidx": ("type", dtypes.int32),
}
for _t in ("Sum", "Mean", "Max", "Min", "Prod"):
    # TF sums, averages and multiplies complex values too; Max/Min need an order.
    _allowed = NUMERIC if _t in ("Max", "Min") else NUMERIC + COMPLEX
    register_op(_t, _reduction_infer(_allowed), attrs=_REDUCTION_ATTRS, num_inputs=2)
for _t in ("All", "Any"):
    register_op(
        _t,
        _reduction_infer((dtypes.bool,)),
        attrs={"keep_dims": ("bool", False), "Tidx": ("type", dtypes.int32)},
        num_inputs=2,
    )


def _arg_reduce_infer(c):
    check_type(c, 0, NUMERIC + (dtypes.bool,), "input")
    check_type(c, 1, INDEX, "dimension")
    out = c.attr("output_type")
    if out not in INDEX:
        raise TypeError(f"output_type must be int32 or int64, got {out.name}")
    if c.shape(1).rank not in (None, 0):
        raise ValueError(f"dimension must be a scalar, got shape {c.shape(1)}")
    shape = c.shape(0)
    if shape.rank is None:
        return [(out, TensorShape(None))]
    if shape.rank == 0:
        raise ValueError("Expected dimension in the range [0, 0) for a scalar input")
    dim = const_ints(c, 1)
    if dim is None:
        return [(out, TensorShape([None] * (shape.rank - 1)))]
    a = dim[0]
    if a < -shape.rank or a >= shape.rank:
        raise ValueError(
            f"Expected dimension in the range [{-shape.rank}, "
            f"{shape.rank}), but got {a}"
        )
    return [(out, reduced_shape(shape, [a], False))]


for _t in ("ArgMax", "ArgMin"):
    register_op(
        _t,
        _arg_reduce_infer,
        attrs={
            "T": ("type", None),
            "Tidx": ("type", dtypes.int32),
            "output_type": ("type", dtypes.int64),
        },
        num_inputs=2,
    )


# -- wrappers --------------------------------------------------------------------------
def _keep_dims(keepdims, keep_dims):
    if keepdims is not None and keep_dims is not None:
        raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'")
    v = keepdims if keepdims is not None else keep_dims
    return bool(v) if v is not None else False


def _axis_arg(axis, reduction_indices, name="axis", old="reduction_indices"):
    if axis is not None and reduction_indices is not None:
        raise ValueError(f"Cannot specify both '{name}' and '{old}'")
    return axis if axis is not None else reduction_indices


def reduction_dims(x: Tensor, axis):
    """``axis`` as an index tensor; every axis of ``x`` when ``axis`` is None."""
    if axis is None:
        if x.shape.rank is not None:
            return convert_to_tensor(
                np.arange(x.shape.rank, dtype=np.int32), name="reduction_indices"
            )
        return _range(0, rank(x), 1)
    if is_tensor_like(axis):
        return convert_to_tensor(axis)
    return pack_if_needed(axis, name="reduction_indices")


def _reduce(op_type, input_tensor, axis, keepdims, name, reduction_indices, keep_dims):
    axis = _axis_arg(axis, reduction_indices)
    keep = _keep_dims(keepdims, keep_dims)
    with op_scope(name, op_type, [input_tensor]) as (g, scope):
        x = convert_to_tensor(input_tensor, name="input_tensor")
        axes = reduction_dims(x, axis)
        attrs = {"keep_dims": keep, "Tidx": axes.dtype.base_dtype}
        if op_type not in ("All", "Any"):
            attrs["T"] = x.dtype.base_dtype
        return g.create_op(op_type, [x, axes], attrs, name=scope).outputs[0]


def reduce_sum(
    input_tensor,
    axis=None,
    keepdims=None,
    name=None,
    reduction_indices=None,
    keep_dims=None,
):
    """Sums over ``axis`` (all axes when None); ``keepdims`` keeps them as 1."""
    return _reduce(
        "Sum", input_tensor, axis, keepdims, name, reduction_indices, keep_dims
    )


def reduce_mean(
    input_tensor,
    axis=None,
    keepdims=None,
    name=None,
    reduction_indices=None,
    keep_dims=None,
):
    """Mean over ``axis``; integer inputs give a truncated integer mean, as TF."""
    return _reduce(
        "Mean", input_tensor, axis, keepdims, name, reduction_indices, keep_dims
    )


def reduce_max(
    input_tensor,
    axis=None,
    keepdims=None,
    name=None,
    reduction_indices=None,
    keep_dims=None,
):
    return _reduce(
        "Max", input_tensor, axis, keepdims, name, reduction_indices, keep_dims
    )


def reduce_min(
    input_tensor,
    axis=None,
    keepdims=None,
    name=None,
    reduction_indices=None,
    keep_dims=None,
):
    return _reduce(
        "Min", input_tensor, axis, keepdims, name, reduction_indices, keep_dims
    )


def reduce_prod(
    input_tensor,
    axis=None,
    keepdims=None,
    name=None,
    reduction_indices=None,
    keep_dims=None,
):
    return _reduce(
        "Prod", input_tensor, axis, keepdims, name, reduction_indices, keep_dims
    )


def reduce_all(
    input_tensor,
    axis=None,
    keepdims=None,
    name=None,
    reduction_indices=None,
    keep_dims=None,
):
    return _reduce(
        "All", input_tensor, axis, keepdims, name, reduction_indices, keep_dims
    )


def reduce_any(
    input_tensor,
    axis=None,
    keepdims=None,
    name=None,
    reduction_indices=None,
    keep_dims=None,
):
    return _reduce(
        "Any", input_tensor, axis, keepdims, name, reduction_indices, keep_dims
    )


def reduce_logsumexp(
    input_tensor,
    axis=None,
    keepdims=None,
    name=None,
    reduction_indices=None,
    keep_dims=None,
):
    """``log(sum(exp(x)))`` computed stably (the max is subtracted first)."""
    axis = _axis_arg(axis, reduction_indices)
    keep = _keep_dims(keepdims, keep_dims)
    with op_scope(name, "ReduceLogSumExp", [input_tensor]) as (_g, scope):
        x = convert_to_tensor(input_tensor, name="input_tensor")
        raw_max = reduce_max(x, axis, keepdims=True)
        my_max = stop_gradient(where(is_finite(raw_max), raw_max, zeros_like(raw_max)))
        result = log(reduce_sum(exp(subtract(x, my_max)), axis, keepdims=keep))
        if not keep:
            my_max = reshape(my_max, shape(result))
        return add(result, my_max, name=scope)


def count_nonzero(
    input_tensor,
    axis=None,
    keepdims=None,
    dtype=dtypes.int64,
    name=None,
    reduction_indices=None,
    keep_dims=None,
):
    """The number of non-zero elements over ``axis``, as ``dtype``."""
    axis = _axis_arg(axis, reduction_indices)
    keep = _keep_dims(keepdims, keep_dims)
    with op_scope(name, "count_nonzero", [input_tensor]) as (_g, scope):
        x = convert_to_tensor(input_tensor, name="input_tensor")
        zero = np.zeros((), dtype=x.dtype.base_dtype.as_numpy_dtype)
        nz = cast(not_equal(x, zero), dtypes.int64)
        return cast(reduce_sum(nz, axis, keepdims=keep), dtype, name=scope)


def _arg_reduce(op_type, input, axis, name, dimension, output_type):  # noqa: A002
    axis = _axis_arg(axis, dimension, "axis", "dimension")
    if axis is None:
        axis = 0
    with op_scope(name, op_type, [input]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        dim = convert_to_tensor(axis, name="dimension")
        return g.create_op(
            op_type,
            [x, dim],
            {
                "T": x.dtype.base_dtype,
                "Tidx": dim.dtype.base_dtype,
                "output_type": dtypes.as_dtype(output_type),
            },
            name=scope,
        ).outputs[0]


def argmax(
    input,  # noqa: A002
    axis=None,
    name=None,
    dimension=None,
    output_type=dtypes.int64,
):
    """The index of the largest value along ``axis`` (default 0), as int64."""
    return _arg_reduce("ArgMax", input, axis, name, dimension, output_type)


def argmin(
    input,  # noqa: A002
    axis=None,
    name=None,
    dimension=None,
    output_type=dtypes.int64,
):
    return _arg_reduce("ArgMin", input, axis, name, dimension, output_type)
