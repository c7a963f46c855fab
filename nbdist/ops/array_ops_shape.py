"""Shapes and reshaping: ``Shape``, ``Size``, ``Rank``, ``Reshape``, ``ExpandDims``
and ``Squeeze``, and the static partial values of shape tensors, which let
``reshape``, ``fill`` and ``broadcast_to`` keep what is known of their output
shape (as TF's shape functions see through ``nd.shape(x)[0]``).
"""

from __future__ import annotations

import builtins

import numpy as np

from nbdist.framework import dtypes
from nbdist.ops.array_ops_join import pack_if_needed
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import (
    INDEX,
    check_axis,
    check_scalar_input,
    check_type,
    const_ints,
    fmt_dims,
    op_scope,
    vector_len,
)
from nbdist.framework.ops import Tensor, convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape


# -- Reshape -------------------------------------------------------------------------
def reshape_shape(in_shape: TensorShape, target) -> TensorShape:
    """The shape of reshaping ``in_shape`` to ``target`` (ints, one may be -1)."""
    if builtins.sum(1 for d in target if d == -1) > 1:
        raise ValueError(
            f"Cannot infer multiple unknown dimensions in shape {fmt_dims(target)}"
        )
    for d in target:
        if d < -1:
            raise ValueError(
                f"Dimension size must be non-negative, got {d} in "
                f"shape {fmt_dims(target)}"
            )
    known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
    n = in_shape.num_elements()
    if -1 not in target:
        if n is not None and n != known:
            raise ValueError(
                f"Cannot reshape a tensor with {n} elements to shape "
                f"{fmt_dims(target)} ({known} elements)"
            )
        return TensorShape(target)
    dims = [None if d == -1 else d for d in target]
    if n is not None:
        if known == 0:
            if n != 0:
                raise ValueError(
                    f"Cannot reshape a tensor with {n} elements to "
                    f"shape {fmt_dims(target)} (0 elements)"
                )
        elif n % known:
            raise ValueError(
                f"Cannot reshape a tensor with {n} elements to shape "
                f"{fmt_dims(target)}: {n} is not divisible by {known}"
            )
        else:
            dims[target.index(-1)] = n // known
    return TensorShape(dims)


def _reshape_infer(c):
    check_type(c, 1, INDEX, "shape")
    n = vector_len(c, 1, "shape")
    target = const_ints(c, 1)
    if target is None:
        return [(c.dtype(0), TensorShape(None if n is None else [None] * n))]
    return [(c.dtype(0), reshape_shape(c.shape(0), target))]


register_op(
    "Reshape",
    _reshape_infer,
    attrs={"T": ("type", None), "Tshape": ("type", dtypes.int32)},
    num_inputs=2,
)


# -- Shape, Size, Rank -----------------------------------------------------------------
def _shape_infer(c):
    out = c.attr("out_type")
    if out not in INDEX:
        raise TypeError(f"out_type must be int32 or int64, got {out.name}")
    r = c.shape(0).rank
    return [(out, TensorShape([r]))]


register_op(
    "Shape",
    _shape_infer,
    attrs={"T": ("type", None), "out_type": ("type", dtypes.int32)},
    num_inputs=1,
)


def _size_infer(c):
    out = c.attr("out_type")
    if out not in INDEX:
        raise TypeError(f"out_type must be int32 or int64, got {out.name}")
    return [(out, TensorShape([]))]


register_op(
    "Size",
    _size_infer,
    attrs={"T": ("type", None), "out_type": ("type", dtypes.int32)},
    num_inputs=1,
)
register_op(
    "Rank",
    lambda c: [(dtypes.int32, TensorShape([]))],
    attrs={"T": ("type", None)},
    num_inputs=1,
)


# -- ExpandDims, Squeeze -------------------------------------------------------------
def _expand_dims_infer(c):
    check_type(c, 1, INDEX, "dim")
    check_scalar_input(c, 1, "dim")
    shape = c.shape(0)
    if shape.rank is None:
        return [(c.dtype(0), TensorShape(None))]
    dim = const_ints(c, 1)
    if dim is None:
        return [(c.dtype(0), TensorShape([None] * (shape.rank + 1)))]
    a = dim[0]
    if a < -shape.rank - 1 or a > shape.rank:
        raise ValueError(
            f"Tried to expand dim index {a} for tensor with {shape.rank} dimensions."
        )
    dims = shape.dims
    dims.insert(a if a >= 0 else a + shape.rank + 1, 1)
    return [(c.dtype(0), TensorShape(dims))]


register_op(
    "ExpandDims",
    _expand_dims_infer,
    attrs={"T": ("type", None), "Tdim": ("type", dtypes.int32)},
    num_inputs=2,
)


def squeezed_dims(dims, axes):
    """``dims`` without the size-1 ``axes`` (all size-1 dims when empty)."""
    rank = len(dims)
    if axes:
        drop = set()
        for a in axes:
            k = check_axis(a, rank, "squeeze dimension")
            if dims[k] is not None and dims[k] != 1:
                raise ValueError(
                    f"Can not squeeze dim[{k}], expected a dimension "
                    f"of 1, got {dims[k]}"
                )
            drop.add(k)
        return [d for i, d in enumerate(dims) if i not in drop]
    if any(d is None for d in dims):
        return None
    return [d for d in dims if d != 1]


def _squeeze_infer(c):
    shape = c.shape(0)
    if shape.rank is None:
        return [(c.dtype(0), TensorShape(None))]
    return [
        (c.dtype(0), TensorShape(squeezed_dims(shape.dims, c.attr("squeeze_dims"))))
    ]


register_op(
    "Squeeze",
    _squeeze_infer,
    attrs={"T": ("type", None), "squeeze_dims": ("list(int)", [])},
    num_inputs=1,
)


# -- static partial values -----------------------------------------------------------
# Static (partial) values of shape tensors, to refine reshape/fill outputs the way
# TF's shape functions see through ``nd.shape(x)[0]``. An entry is an int, None, or
# ("dim", tensor, i): the (unknown) size of dimension i of tensor.
def _partial_scalar(t):
    op = t.op
    if op.type == "Const":
        v = op.get_attr("value")
        return int(v) if np.ndim(v) == 0 else None
    if (
        op.type == "StridedSlice"
        and op.get_attr("shrink_axis_mask") == 1
        and not (op.get_attr("ellipsis_mask") or op.get_attr("new_axis_mask"))
    ):
        src, begin = op.inputs[0], op.inputs[1]
        if begin.op.type != "Const" or np.size(begin.op.get_attr("value")) != 1:
            return None
        i = int(np.ravel(begin.op.get_attr("value"))[0])
        if src.op.type == "Const":
            v = np.ravel(src.op.get_attr("value"))
            return int(v[i]) if -len(v) <= i < len(v) else None
        if src.op.type == "Shape":
            x = src.op.inputs[0]
            r = x.shape.rank
            if r is None or not -r <= i < r:
                return None
            i %= r
            return x.shape[i] if x.shape[i] is not None else ("dim", x, i)
    return None


def partial_shape(t):
    """A list of entries for a 1-D shape tensor, or None when even its length is
    unknown."""
    op = t.op
    if op.type == "Const":
        v = op.get_attr("value")
        return [int(x) for x in v] if np.ndim(v) == 1 else None
    if op.type == "Shape":
        x = op.inputs[0]
        if x.shape.rank is None:
            return None
        return [
            d if d is not None else ("dim", x, i) for i, d in enumerate(x.shape.dims)
        ]
    if op.type == "Pack" and op.get_attr("axis") == 0:
        return [_partial_scalar(v) for v in op.inputs]
    if op.type == "ConcatV2":
        axis = op.inputs[-1]
        if axis.op.type != "Const" or int(
            np.ravel(axis.op.get_attr("value"))[0]
        ) not in (0, -1):
            return None
        out = []
        for v in op.inputs[:-1]:
            p = partial_shape(v)
            if p is None:
                return None
            out.extend(p)
        return out
    if t.shape.rank == 1 and t.shape[0] is not None:
        return [None] * t.shape[0]
    return None


def _refined_reshape(x: Tensor, target) -> TensorShape:
    dims = [e if isinstance(e, int) and e >= 0 else None for e in target]
    unknown = [i for i, e in enumerate(target) if isinstance(e, int) and e == -1]
    if len(unknown) != 1 or x.shape.rank is None:
        return TensorShape(dims)
    used, rest = set(), 1
    for i, e in enumerate(target):
        if i == unknown[0]:
            continue
        if isinstance(e, tuple) and e[1] is x and e[2] not in used:
            used.add(e[2])
        elif isinstance(e, int) and e >= 0:
            rest *= e
        else:
            return TensorShape(dims)
    remaining = [d for j, d in enumerate(x.shape.dims) if j not in used]
    if rest > 0 and all(d is not None for d in remaining):
        total = int(np.prod(remaining, dtype=np.int64))
        if total % rest == 0:
            dims[unknown[0]] = total // rest
    return TensorShape(dims)


def set_partial_shape(out: Tensor, shape: TensorShape):
    try:
        out.set_shape(shape)
    except ValueError:
        pass  # the run-time check reports the real mismatch


# -- wrappers --------------------------------------------------------------------------
def reshape(tensor, shape, name=None):  # noqa: F811 - TF's argument name
    """``tensor`` with a new shape; one entry of ``shape`` may be -1 (inferred)."""
    with op_scope(name, "Reshape", [tensor]) as (g, scope):
        x = convert_to_tensor(tensor, name="tensor")
        s = pack_if_needed(shape, name="shape")
        out = g.create_op(
            "Reshape",
            [x, s],
            {"T": x.dtype.base_dtype, "Tshape": s.dtype.base_dtype},
            name=scope,
        ).outputs[0]
        if not out.shape.is_fully_defined():
            partial = partial_shape(s)
            if partial is not None and len(partial) == (out.shape.rank or len(partial)):
                set_partial_shape(out, _refined_reshape(x, partial))
        return out


def shape(input, name=None, out_type=dtypes.int32):  # noqa: A002 - TF's names
    """The shape of ``input`` as a 1-D tensor (a constant when fully known)."""
    out_type = dtypes.as_dtype(out_type)
    with op_scope(name, "Shape", [input]) as (g, scope):
        x = convert_to_tensor(input)
        if x.shape.is_fully_defined():
            return convert_to_tensor(
                np.array(x.shape.as_list(), dtype=out_type.as_numpy_dtype), name=scope
            )
        return g.create_op(
            "Shape", [x], {"T": x.dtype.base_dtype, "out_type": out_type}, name=scope
        ).outputs[0]


def size(input, name=None, out_type=dtypes.int32):  # noqa: A002
    """The number of elements of ``input`` (a constant when the shape is known)."""
    out_type = dtypes.as_dtype(out_type)
    with op_scope(name, "Size", [input]) as (g, scope):
        x = convert_to_tensor(input)
        n = x.shape.num_elements()
        if n is not None:
            return convert_to_tensor(
                np.array(n, dtype=out_type.as_numpy_dtype), name=scope
            )
        return g.create_op(
            "Size", [x], {"T": x.dtype.base_dtype, "out_type": out_type}, name=scope
        ).outputs[0]


def rank(input, name=None):  # noqa: A002
    """The number of dimensions of ``input`` (a constant when it is known)."""
    with op_scope(name, "Rank", [input]) as (g, scope):
        x = convert_to_tensor(input)
        if x.shape.rank is not None:
            return convert_to_tensor(np.int32(x.shape.rank), name=scope)
        return g.create_op("Rank", [x], {"T": x.dtype.base_dtype}, name=scope).outputs[
            0
        ]


def expand_dims(input, axis=None, name=None, dim=None):  # noqa: A002
    """Inserts a dimension of size 1 at ``axis``."""
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = axis if axis is not None else dim
    if axis is None:
        raise ValueError("Must specify an axis argument to nd.expand_dims()")
    with op_scope(name, "ExpandDims", [input]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        a = convert_to_tensor(axis, name="dim")
        return g.create_op(
            "ExpandDims",
            [x, a],
            {"T": x.dtype.base_dtype, "Tdim": a.dtype.base_dtype},
            name=scope,
        ).outputs[0]


def squeeze(input, axis=None, name=None, squeeze_dims=None):  # noqa: A002
    """Removes dimensions of size 1 (only ``axis`` ones when given)."""
    if axis is not None and squeeze_dims is not None:
        raise ValueError("Cannot specify both 'axis' and 'squeeze_dims'")
    axis = axis if axis is not None else squeeze_dims
    if isinstance(axis, (int, np.integer)):
        axis = [axis]
    with op_scope(name, "Squeeze", [input]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        return g.create_op(
            "Squeeze",
            [x],
            {"T": x.dtype.base_dtype, "squeeze_dims": [int(a) for a in axis or []]},
            name=scope,
        ).outputs[0]
