"""Joining and splitting: ``ConcatV2``, ``Pack`` (``nd.stack``), ``Unpack``,
``Split`` and ``SplitV``, and TF's autopacking (``pack_if_needed``): a Python list
mixing ints and scalar tensors, given as a shape, axis or index argument of any
array op, is stacked into one tensor (``nd.reshape(x, [nd.shape(x)[0], -1])``).
"""

from __future__ import annotations

import builtins

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.constant_op import identity
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.op_util import (
    INDEX,
    check_axis,
    check_scalar_input,
    check_type,
    const_ints,
    fmt_dims,
    is_tensor_like,
    op_scope,
    vector_len,
)
from nbdist.framework.ops import Tensor, convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape, dimensions_to_ints


# -- ConcatV2, Pack, Unpack, Split, SplitV ---------------------------------------------
def _merge_all(shapes, what):
    out = TensorShape(None)
    for i, s in enumerate(shapes):
        if out.rank is not None and s.rank is not None and out.rank != s.rank:
            raise ValueError(
                f"Shapes must be equal rank, but are {out.rank} and "
                f"{s.rank} ({what} {i})"
            )
        if not out.is_compatible_with(s):
            raise ValueError(
                f"Shapes of all inputs must match: {what}[0].shape = "
                f"{fmt_dims(out.dims)} != {what}[{i}].shape = "
                f"{fmt_dims(s.dims)}"
            )
        out = out.merge_with(s)
    return out


def _concat_infer(c):
    n = len(c.input_dtypes) - 1
    if n < 1:
        raise ValueError("ConcatV2 needs at least one value and an axis")
    d = c.check_same_dtypes(list(builtins.range(n)))
    check_type(c, n, INDEX, "axis")
    check_scalar_input(c, n, "axis")
    shapes = [c.shape(i) for i in builtins.range(n)]
    ranks = {s.rank for s in shapes if s.rank is not None}
    if len(ranks) > 1:
        a, b = sorted(ranks)[:2]
        raise ValueError(f"Shape must be rank {a} but is rank {b} for concat")
    if not ranks:
        return [(d, TensorShape(None))]
    rank = ranks.pop()
    if rank == 0:
        raise ValueError("Can't concatenate scalars (use nd.stack instead)")
    axis = const_ints(c, n)
    if axis is None:
        return [(d, TensorShape([None] * rank))]
    a = check_axis(axis[0], rank, "concatenating dimensions")
    dims = []
    for i in builtins.range(rank):
        if i == a:
            sizes = [s[i] if s.rank is not None else None for s in shapes]
            dims.append(None if None in sizes else builtins.sum(sizes))
            continue
        merged = None
        for s in shapes:
            if s.rank is None or s[i] is None:
                continue
            if merged is not None and merged != s[i]:
                raise ValueError(
                    f"Dimension {i} in both shapes must be equal, but "
                    f"are {merged} and {s[i]}. Shapes are "
                    f"{[fmt_dims(x.dims) for x in shapes if x.rank]}"
                )
            merged = s[i]
        dims.append(merged)
    return [(d, TensorShape(dims))]


register_op(
    "ConcatV2",
    _concat_infer,
    attrs={"N": ("int", None), "T": ("type", None), "Tidx": ("type", dtypes.int32)},
    min_inputs=2,
)


def _pack_infer(c):
    n = len(c.input_dtypes)
    d = c.check_same_dtypes()
    s = _merge_all([c.shape(i) for i in builtins.range(n)], "values")
    if s.rank is None:
        return [(d, TensorShape(None))]
    axis = c.attr("axis")
    if axis < -(s.rank + 1) or axis > s.rank:
        raise ValueError(
            f"Argument 'axis' = {axis} not in range [{-(s.rank + 1)}, {s.rank + 1})"
        )
    a = axis if axis >= 0 else axis + s.rank + 1
    dims = s.dims
    dims.insert(a, n)
    return [(d, TensorShape(dims))]


register_op(
    "Pack",
    _pack_infer,
    attrs={"N": ("int", None), "T": ("type", None), "axis": ("int", 0)},
    min_inputs=1,
)


def _unpack_infer(c):
    d, shape, num = c.dtype(0), c.shape(0), c.attr("num")
    if num < 0:
        raise ValueError(f"num must be >= 0, got {num}")
    if shape.rank is None:
        return [(d, TensorShape(None))] * num
    if shape.rank == 0:
        raise ValueError("Cannot unstack a scalar")
    a = check_axis(c.attr("axis"), shape.rank)
    if shape[a] is not None and shape[a] != num:
        raise ValueError(
            f"Dimension must be {shape[a]} but is {num} (unstacking "
            f"axis {a} of shape {shape})"
        )
    dims = shape.dims
    del dims[a]
    return [(d, TensorShape(dims))] * num


register_op(
    "Unpack",
    _unpack_infer,
    attrs={"num": ("int", REQUIRED), "T": ("type", None), "axis": ("int", 0)},
    num_inputs=1,
)


def _split_infer(c):
    check_type(c, 0, INDEX, "axis")
    check_scalar_input(c, 0, "axis")
    d, shape, n = c.dtype(1), c.shape(1), c.attr("num_split")
    if n < 1:
        raise ValueError(f"num_split must be >= 1, got {n}")
    if shape.rank is None:
        return [(d, TensorShape(None))] * n
    axis = const_ints(c, 0)
    if axis is None:
        return [(d, TensorShape([None] * shape.rank))] * n
    a = check_axis(axis[0], shape.rank)
    dims = shape.dims
    if dims[a] is not None:
        if dims[a] % n:
            raise ValueError(
                f"Number of ways to split should evenly divide the split "
                f"dimension, but got split_dim {a} (size = {dims[a]}) "
                f"and num_split {n}"
            )
        dims[a] //= n
    return [(d, TensorShape(dims))] * n


register_op(
    "Split",
    _split_infer,
    attrs={"num_split": ("int", REQUIRED), "T": ("type", None)},
    num_inputs=2,
)


def split_sizes(sizes, dim):
    """``sizes`` with its -1 filled in from ``dim`` (None when unknown);
    ValueError when they cannot split ``dim``."""
    if builtins.sum(1 for s in sizes if s == -1) > 1:
        raise ValueError(f"Cannot infer multiple unknown split sizes in {sizes}")
    if any(s < -1 for s in sizes):
        raise ValueError(f"Split sizes must be >= -1, got {sizes}")
    known = builtins.sum(s for s in sizes if s != -1)
    if dim is None:
        return [None if s == -1 else s for s in sizes]
    if -1 in sizes:
        if known > dim:
            raise ValueError(
                f"Split sizes {sizes} add up to more than the size "
                f"{dim} of the split dimension"
            )
        return [dim - known if s == -1 else s for s in sizes]
    if known != dim:
        raise ValueError(
            f"Determined shape must either match input shape along "
            f"split_dim exactly if fully specified, or be less than the "
            f"size of the input along split_dim if not fully specified. "
            f" Got: {known} (sizes {sizes}, dimension {dim})"
        )
    return list(sizes)


def _split_v_infer(c):
    check_type(c, 1, INDEX, "size_splits")
    check_type(c, 2, INDEX, "axis")
    check_scalar_input(c, 2, "axis")
    d, shape, n = c.dtype(0), c.shape(0), c.attr("num_split")
    m = vector_len(c, 1, "size_splits")
    if m is not None and m != n:
        raise ValueError(f"size_splits has {m} entries but num_split is {n}")
    if shape.rank is None:
        return [(d, TensorShape(None))] * n
    axis, sizes = const_ints(c, 2), const_ints(c, 1)
    if axis is None:
        return [(d, TensorShape([None] * shape.rank))] * n
    a = check_axis(axis[0], shape.rank)
    sizes = split_sizes(sizes, shape[a]) if sizes is not None else [None] * n
    out = []
    for s in sizes:
        dims = shape.dims
        dims[a] = s
        out.append((d, TensorShape(dims)))
    return out


register_op(
    "SplitV",
    _split_v_infer,
    attrs={
        "num_split": ("int", REQUIRED),
        "T": ("type", None),
        "Tlen": ("type", dtypes.int32),
    },
    num_inputs=3,
)


# -- autopacking -----------------------------------------------------------------------
def pack_if_needed(value, dtype=None, name=None) -> Tensor:
    """``value`` as a tensor; a list holding tensors is stacked (TF's autopacking)."""
    if isinstance(value, (list, tuple)) and any(is_tensor_like(v) for v in value):
        ts = [v for v in value if is_tensor_like(v)]
        first = convert_to_tensor(ts[0], dtype=dtype)
        want = dtype or first.dtype.base_dtype
        items = [convert_to_tensor(v, dtype=want) for v in value]
        return stack(items, name=name or "packed")
    if dtype is None and not is_tensor_like(value):
        # Index arguments: [] is an int32 vector, as TF's op_def defaults give.
        return convert_to_tensor(value, name=name, preferred_dtype=dtypes.int32)
    return convert_to_tensor(value, dtype=dtype, name=name)


def _convert_list(values, name="values"):
    """Converts a list; Python values prefer the dtype of its first tensor."""
    pref = None
    for v in values:
        if is_tensor_like(v):
            pref = convert_to_tensor(v).dtype.base_dtype
            break
    out = []
    for v in values:
        if isinstance(v, (list, tuple)) and any(is_tensor_like(e) for e in v):
            out.append(pack_if_needed(v))
        else:
            out.append(convert_to_tensor(v, preferred_dtype=pref, name=name))
    return out


# -- wrappers --------------------------------------------------------------------------
def concat(values, axis, name="concat"):
    """Joins ``values`` along ``axis`` (an existing dimension)."""
    if not isinstance(values, (list, tuple)):
        values = [values]
    with op_scope(name, "concat", list(values)) as (g, scope):
        if len(values) == 1:
            axis_t = convert_to_tensor(axis, name="concat_dim")
            if axis_t.shape.rank not in (None, 0):
                raise ValueError(f"axis must be a scalar, got shape {axis_t.shape}")
            return identity(values[0], name=scope)
        ts = _convert_list(values)
        axis_t = convert_to_tensor(axis, name="axis")
        return g.create_op(
            "ConcatV2",
            ts + [axis_t],
            {
                "N": len(ts),
                "T": ts[0].dtype.base_dtype,
                "Tidx": axis_t.dtype.base_dtype,
            },
            name=scope,
        ).outputs[0]


def stack(values, axis=0, name="stack"):
    """Stacks rank-R tensors into one rank-(R+1) tensor along a new ``axis``."""
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError("stack needs a non-empty list of tensors")
    with op_scope(name, "stack", list(values)) as (g, scope):
        ts = _convert_list(values)
        return g.create_op(
            "Pack",
            ts,
            {"N": len(ts), "T": ts[0].dtype.base_dtype, "axis": int(axis)},
            name=scope,
        ).outputs[0]


def unstack(value, num=None, axis=0, name="unstack"):
    """The list of slices of ``value`` along ``axis``."""
    with op_scope(name, "unstack", [value]) as (g, scope):
        x = convert_to_tensor(value)
        if num is None:
            shape = x.shape
            if shape.rank is None:
                raise ValueError(f"Cannot infer num from shape {shape}")
            a = check_axis(axis, shape.rank) if shape.rank else axis
            num = shape[a] if shape.rank else None
            if num is None:
                raise ValueError(f"Cannot infer num from shape {shape}")
        return g.create_op(
            "Unpack",
            [x],
            {"num": int(num), "T": x.dtype.base_dtype, "axis": int(axis)},
            name=scope,
        ).outputs


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """Splits into ``num_or_size_splits`` equal parts, or parts of the given sizes."""
    with op_scope(name, "split", [value]) as (g, scope):
        x = convert_to_tensor(value, name="value")
        num_or_size_splits = dimensions_to_ints(num_or_size_splits)
        if isinstance(num_or_size_splits, (int, np.integer)) and not isinstance(
            num_or_size_splits, bool
        ):
            axis_t = convert_to_tensor(axis, name="split_dim")
            return g.create_op(
                "Split",
                [axis_t, x],
                {"num_split": int(num_or_size_splits), "T": x.dtype.base_dtype},
                name=scope,
            ).outputs
        sizes = pack_if_needed(num_or_size_splits, name="size_splits")
        if num is None:
            s = sizes.shape
            num = s[0] if s.rank == 1 else None
            if num is None:
                raise ValueError(f"Cannot infer num from shape {s}")
        axis_t = convert_to_tensor(axis, name="split_dim")
        return g.create_op(
            "SplitV",
            [x, sizes, axis_t],
            {
                "num_split": int(num),
                "T": x.dtype.base_dtype,
                "Tlen": sizes.dtype.base_dtype,
            },
            name=scope,
        ).outputs
