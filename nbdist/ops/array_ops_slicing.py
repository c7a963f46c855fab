"""Slicing, gathering and selecting: ``Slice``, ``StridedSlice`` (``t[1:, None]``
through ``slice_helper``, which ``math_ops`` installs as ``Tensor.__getitem__``),
``GatherV2``, ``Select``/``SelectV2`` (``nd.where`` with x and y) and ``Where``.
"""

from __future__ import annotations

import builtins

import numpy as np

from nbdist.framework import dtypes
from nbdist.ops.array_ops_creation import ones_like
from nbdist.ops.array_ops_join import pack_if_needed
from nbdist.ops.math_ops_elementwise import add
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import (
    INDEX,
    NUMERIC,
    check_axis,
    check_scalar_input,
    check_type,
    const_ints,
    convert_pair,
    is_tensor_like,
    op_scope,
    vector_len,
)
from nbdist.framework.ops import Tensor, convert_to_tensor
from nbdist.framework.tensor_shape import (Dimension, TensorShape, broadcast_shapes,
                                           dimensions_to_ints)

_INT_ONLY = INDEX + (dtypes.uint8, dtypes.int8, dtypes.int16)


# -- Slice, StridedSlice ---------------------------------------------------------------
def _slice_infer(c):
    check_type(c, 1, INDEX, "begin")
    check_type(c, 2, INDEX, "size")
    if c.dtype(1) is not c.dtype(2):
        raise TypeError(
            f"begin and size must have the same dtype, got "
            f"{c.dtype(1).name} and {c.dtype(2).name}"
        )
    shape = c.shape(0)
    nb, ns = vector_len(c, 1, "begin"), vector_len(c, 2, "size")
    n = nb if nb is not None else ns
    if nb is not None and ns is not None and nb != ns:
        raise ValueError(f"begin and size must have the same length, got {nb} and {ns}")
    if n is not None and shape.rank is not None and n != shape.rank:
        raise ValueError(
            f"Length of begin and size ({n}) must equal the rank of the "
            f"input ({shape.rank})"
        )
    rank = shape.rank if shape.rank is not None else n
    if rank is None:
        return [(c.dtype(0), TensorShape(None))]
    begin, size = const_ints(c, 1), const_ints(c, 2)
    dims = shape.dims if shape.rank is not None else [None] * rank
    out = []
    for i in builtins.range(rank):
        b = begin[i] if begin is not None else None
        s = size[i] if size is not None else None
        d = dims[i]
        if b is not None and (b < 0 or (d is not None and b > d)):
            raise ValueError(f"Expected begin[{i}] in [0, {d}], but got {b}")
        if s is None:
            out.append(None)
        elif s == -1:
            out.append(d - b if d is not None and b is not None else None)
        else:
            if s < -1 or (d is not None and b is not None and b + s > d):
                bound = "?" if d is None else d - (b or 0)
                raise ValueError(f"Expected size[{i}] in [0, {bound}], but got {s}")
            out.append(s)
    return [(c.dtype(0), TensorShape(out))]


register_op(
    "Slice",
    _slice_infer,
    attrs={"T": ("type", None), "Index": ("type", dtypes.int32)},
    num_inputs=3,
)


def dense_slice_spec(rank: int, n: int, masks: dict):
    """TF's dense spec: for each entry of a strided slice, what it does.

    Returns a list of ``("new",)``, ``("shrink", i, dim)``, ``("slice", i, dim)``
    or ``("full", None, dim)`` (dims covered by an ellipsis or not mentioned).
    """
    ell, new = masks["ellipsis_mask"], masks["new_axis_mask"]
    shrink = masks["shrink_axis_mask"]
    ellipsis_seen, new_after = False, 0
    for i in builtins.range(n):
        if ellipsis_seen and (new >> i) & 1 and not (ell >> i) & 1:
            new_after += 1
        if (ell >> i) & 1:
            if ellipsis_seen:
                raise ValueError("Multiple ellipses in slice spec not allowed")
            ellipsis_seen = True
    if not ellipsis_seen:
        ell |= 1 << n
        n += 1
    out, full = [], 0
    for i in builtins.range(n):
        if (ell >> i) & 1:
            nxt = builtins.min(rank - (n - i) + 1 + new_after, rank)
            while full < nxt:
                out.append(("full", None, full))
                full += 1
        elif (new >> i) & 1:
            out.append(("new",))
        else:
            if full >= rank:
                raise ValueError(
                    f"Index out of range using input dim {full}; input "
                    f"has only {rank} dims"
                )
            out.append(("shrink" if (shrink >> i) & 1 else "slice", i, full))
            full += 1
    return out


SLICE_MASKS = (
    "begin_mask",
    "end_mask",
    "ellipsis_mask",
    "new_axis_mask",
    "shrink_axis_mask",
)


def _strided_slice_infer(c):
    for i, arg in ((1, "begin"), (2, "end"), (3, "strides")):
        check_type(c, i, INDEX, arg)
    lens = {
        vector_len(c, i, a) for i, a in ((1, "begin"), (2, "end"), (3, "strides"))
    } - {None}
    if len(lens) > 1:
        raise ValueError(
            f"begin, end and strides must have the same length, got {sorted(lens)}"
        )
    shape = c.shape(0)
    if not lens or shape.rank is None:
        return [(c.dtype(0), TensorShape(None))]
    n = lens.pop()
    masks = {m: c.attr(m) for m in SLICE_MASKS}
    begin, end, strides = const_ints(c, 1), const_ints(c, 2), const_ints(c, 3)
    out = []
    for entry in dense_slice_spec(shape.rank, n, masks):
        if entry[0] == "new":
            out.append(1)
            continue
        kind, i, k = entry
        d = shape[k]
        if kind == "full":
            out.append(d)
            continue
        if kind == "shrink":
            if begin is not None and d is not None and not -d <= begin[i] < d:
                raise ValueError(
                    f"slice index {begin[i]} of dimension {k} out of bounds."
                )
            continue
        if strides is None:
            out.append(None)
            continue
        s = strides[i]
        if s == 0:
            raise ValueError(f"strides[{i}] must be non-zero")
        b = (
            None
            if (masks["begin_mask"] >> i) & 1
            else (begin[i] if begin is not None else "?")
        )
        e = (
            None
            if (masks["end_mask"] >> i) & 1
            else (end[i] if end is not None else "?")
        )
        if d is None or b == "?" or e == "?":
            out.append(d if b is None and e is None and s in (1, -1) else None)
            continue
        out.append(len(builtins.range(*builtins.slice(b, e, s).indices(d))))
    return [(c.dtype(0), TensorShape(out))]


register_op(
    "StridedSlice",
    _strided_slice_infer,
    attrs=dict(
        {m: ("int", 0) for m in SLICE_MASKS},
        T=("type", None),
        Index=("type", dtypes.int32),
    ),
    num_inputs=4,
)


# -- GatherV2 --------------------------------------------------------------------------
def _gather_infer(c):
    check_type(c, 1, _INT_ONLY, "indices")
    check_type(c, 2, INDEX, "axis")
    check_scalar_input(c, 2, "axis")
    if c.attr("batch_dims") != 0:
        raise ValueError("batch_dims other than 0 is not supported")
    params, indices = c.shape(0), c.shape(1)
    d = c.dtype(0)
    axis = const_ints(c, 2)
    if params.rank is None:
        return [(d, TensorShape(None))]
    if params.rank == 0:
        raise ValueError("params must be at least 1 dimensional")
    if axis is None:
        if indices.rank is None:
            return [(d, TensorShape(None))]
        return [(d, TensorShape([None] * (params.rank - 1 + indices.rank)))]
    a = check_axis(axis[0], params.rank)
    return [(d, params[:a].concatenate(indices).concatenate(params[a + 1 :]))]


register_op(
    "GatherV2",
    _gather_infer,
    attrs={
        "Tparams": ("type", None),
        "Tindices": ("type", dtypes.int32),
        "Taxis": ("type", dtypes.int32),
        "batch_dims": ("int", 0),
    },
    num_inputs=3,
)


# -- Select, SelectV2, Where -----------------------------------------------------------
def _select_infer(c):
    check_type(c, 0, (dtypes.bool,), "condition")
    d = c.check_same_dtypes([1, 2])
    if not c.shape(1).is_compatible_with(c.shape(2)):
        raise ValueError(
            f"Shapes must be equal rank, and all dimensions equal: "
            f"{c.shape(1)} and {c.shape(2)}"
        )
    out = c.shape(1).merge_with(c.shape(2))
    cond = c.shape(0)
    if cond.rank is not None and out.rank is not None and cond.rank != 0:
        if cond.rank == 1 and out.rank > 1:
            if not TensorShape([cond[0]]).is_compatible_with([out[0]]):
                raise ValueError(
                    f"Dimensions must be equal, but are {cond[0]} and "
                    f"{out[0]} (condition vector and first dimension "
                    "of x)"
                )
        elif not cond.is_compatible_with(out):
            raise ValueError(
                f"Shapes must be equal rank, and all dimensions equal: "
                f"condition {cond} and x {out}"
            )
        else:
            out = out.merge_with(cond)
    return [(d, out)]


register_op("Select", _select_infer, attrs={"T": ("type", None)}, num_inputs=3)


def _select_v2_infer(c):
    check_type(c, 0, (dtypes.bool,), "condition")
    d = c.check_same_dtypes([1, 2])
    out = broadcast_shapes(broadcast_shapes(c.shape(0), c.shape(1)), c.shape(2))
    return [(d, out)]


register_op("SelectV2", _select_v2_infer, attrs={"T": ("type", None)}, num_inputs=3)


def _where_infer(c):
    check_type(c, 0, NUMERIC + (dtypes.bool,), "condition")
    return [(dtypes.int64, TensorShape([None, c.shape(0).rank]))]


register_op("Where", _where_infer, attrs={"T": ("type", dtypes.bool)}, num_inputs=1)


# -- wrappers --------------------------------------------------------------------------
def slice(input_, begin, size, name=None):  # noqa: A001 - TF's name
    """The block of ``input_`` at ``begin`` of ``size`` (-1: to the end)."""
    with op_scope(name, "Slice", [input_]) as (g, scope):
        x = convert_to_tensor(input_, name="input")
        b = pack_if_needed(begin, name="begin")
        s = pack_if_needed(
            size,
            dtype=b.dtype.base_dtype if not is_tensor_like(size) else None,
            name="size",
        )
        return g.create_op(
            "Slice",
            [x, b, s],
            {"T": x.dtype.base_dtype, "Index": b.dtype.base_dtype},
            name=scope,
        ).outputs[0]


def strided_slice(
    input_,
    begin,
    end,
    strides=None,
    begin_mask=0,
    end_mask=0,
    ellipsis_mask=0,
    new_axis_mask=0,
    shrink_axis_mask=0,
    var=None,
    name=None,
):
    """TF's ``strided_slice``: Python slicing with masks; ``t[...]`` builds one."""
    with op_scope(name, "StridedSlice", [input_]) as (g, scope):
        x = convert_to_tensor(input_, name="input")
        b = pack_if_needed(begin, name="begin")
        e = pack_if_needed(
            end, dtype=None if is_tensor_like(end) else b.dtype.base_dtype, name="end"
        )
        if strides is None:
            strides = ones_like(b)
        st = pack_if_needed(
            strides,
            dtype=None if is_tensor_like(strides) else b.dtype.base_dtype,
            name="strides",
        )
        return g.create_op(
            "StridedSlice",
            [x, b, e, st],
            {
                "begin_mask": int(begin_mask),
                "end_mask": int(end_mask),
                "ellipsis_mask": int(ellipsis_mask),
                "new_axis_mask": int(new_axis_mask),
                "shrink_axis_mask": int(shrink_axis_mask),
                "T": x.dtype.base_dtype,
                "Index": b.dtype.base_dtype,
            },
            name=scope,
        ).outputs[0]


_INDEX_ERROR = (
    "Only integers, slices (`:`), ellipsis (`...`), nd.newaxis (`None`) "
    "and scalar nd.int32/nd.int64 tensors are valid indices, got {!r}"
)


def _check_index(v):
    if isinstance(v, Dimension):  # TF1 indexes with a shape's Dimension too
        v = dimensions_to_ints(v)
    if v is None or (
        isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
    ):
        return v
    if is_tensor_like(v):
        t = convert_to_tensor(v)
        if t.dtype.base_dtype not in INDEX or t.shape.rank not in (None, 0):
            raise TypeError(_INDEX_ERROR.format(v))
        return t
    raise TypeError(_INDEX_ERROR.format(v))


def slice_helper(tensor, slice_spec, var=None):
    """``tensor[slice_spec]`` as a ``StridedSlice`` (TF's ``slice_helper``)."""
    if not isinstance(slice_spec, (list, tuple)):
        slice_spec = [slice_spec]
    begin, end, strides = [], [], []
    masks = dict.fromkeys(SLICE_MASKS, 0)
    for index, s in enumerate(slice_spec):
        bit = 1 << index
        if isinstance(s, builtins.slice):
            start, stop, step = (
                _check_index(s.start),
                _check_index(s.stop),
                _check_index(s.step),
            )
            if start is None:
                masks["begin_mask"] |= bit
            if stop is None:
                masks["end_mask"] |= bit
            begin.append(0 if start is None else start)
            end.append(0 if stop is None else stop)
            strides.append(1 if step is None else step)
        elif s is Ellipsis:
            begin.append(0), end.append(0), strides.append(1)
            masks["ellipsis_mask"] |= bit
        elif s is None:
            begin.append(0), end.append(0), strides.append(1)
            masks["new_axis_mask"] |= bit
        else:
            s = _check_index(s)
            begin.append(s)
            if isinstance(s, Tensor):
                end.append(add(s, 1))
            else:
                end.append(s + 1)
            strides.append(1)
            masks["shrink_axis_mask"] |= bit
    with op_scope(None, "strided_slice", [tensor]) as (_g, scope):
        tensors = [v for v in begin + end + strides if isinstance(v, Tensor)]
        if tensors:
            dt = tensors[0].dtype.base_dtype
            packed = [
                pack_if_needed(v, dtype=dt, name="stack") for v in (begin, end, strides)
            ]
        else:
            vals = begin + end + strides
            big = vals and (
                builtins.max(vals) >= 2**31 or builtins.min(vals) < -(2**31)
            )
            np_type = np.int64 if big else np.int32
            packed = [
                convert_to_tensor(np.array(v, dtype=np_type), name="stack")
                for v in (begin, end, strides)
            ]
        return strided_slice(tensor, *packed, var=var, name=scope, **masks)


def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims=0):
    """Slices of ``params`` at ``indices`` along ``axis`` (default 0)."""
    with op_scope(name, "GatherV2", [params, indices]) as (g, scope):
        p = convert_to_tensor(params, name="params")
        i = convert_to_tensor(indices, name="indices")
        a = convert_to_tensor(0 if axis is None else axis, name="axis")
        return g.create_op(
            "GatherV2",
            [p, i, a],
            {
                "Tparams": p.dtype.base_dtype,
                "Tindices": i.dtype.base_dtype,
                "Taxis": a.dtype.base_dtype,
                "batch_dims": int(batch_dims),
            },
            name=scope,
        ).outputs[0]


def _where_impl(condition, x, y, name, select_type):
    if (x is None) != (y is None):
        raise ValueError("x and y must both be non-None or both be None.")
    if x is None:
        with op_scope(name, "Where", [condition]) as (g, scope):
            c = convert_to_tensor(condition, name="condition")
            return g.create_op(
                "Where", [c], {"T": c.dtype.base_dtype}, name=scope
            ).outputs[0]
    with op_scope(name, select_type, [condition, x, y]) as (g, scope):
        c = convert_to_tensor(condition, name="condition")
        x, y = convert_pair(x, y, "x", "y")
        return g.create_op(
            select_type, [c, x, y], {"T": x.dtype.base_dtype}, name=scope
        ).outputs[0]


def where(condition, x=None, y=None, name=None):
    """``x`` where ``condition`` else ``y`` (``condition`` is x's shape or a vector
    over its first dimension); with only ``condition``: the [N, rank] int64
    coordinates of its true elements."""
    return _where_impl(condition, x, y, name, "Select")


def where_v2(condition, x=None, y=None, name=None):
    """As :func:`where`, with NumPy broadcasting of all three."""
    return _where_impl(condition, x, y, name, "SelectV2")
