"""Tensors made to a shape: ``Fill`` (``nd.zeros``, ``nd.ones``), ``ZerosLike``,
``OnesLike``, ``OneHot``, ``Range`` and ``BroadcastTo``.
"""

from __future__ import annotations

import builtins

import numpy as np

from nbdist.framework import dtypes
from nbdist.ops.array_ops_join import pack_if_needed
from nbdist.ops.array_ops_shape import partial_shape, set_partial_shape, shape
from nbdist.ops.math_ops_elementwise import cast
from nbdist.framework.op_def_registry import register_op, unchanged
from nbdist.framework.op_util import (
    FLOAT,
    INDEX,
    check_type,
    const_ints,
    is_tensor_like,
    op_scope,
    vector_len,
)
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape, as_shape, broadcast_shapes


# -- Fill, ZerosLike, OnesLike, OneHot, BroadcastTo ------------------------------------
def _shape_arg(c, i: int, arg: str) -> TensorShape:
    """The static shape described by the 1-D shape input ``i``."""
    check_type(c, i, INDEX, arg)
    n = vector_len(c, i, arg)
    dims = const_ints(c, i)
    if dims is None:
        return TensorShape(None if n is None else [None] * n)
    for d in dims:
        if d < 0:
            raise ValueError(f"'{arg}' must be non-negative, got {dims}")
    return TensorShape(dims)


def _fill_infer(c):
    s = c.shape(1)
    if s.rank not in (None, 0):
        raise ValueError(f"value must be a scalar, got shape {s}")
    return [(c.dtype(1), _shape_arg(c, 0, "dims"))]


register_op(
    "Fill",
    _fill_infer,
    attrs={"T": ("type", None), "index_type": ("type", dtypes.int32)},
    num_inputs=2,
)
register_op("ZerosLike", unchanged, attrs={"T": ("type", None)}, num_inputs=1)
register_op("OnesLike", unchanged, attrs={"T": ("type", None)}, num_inputs=1)


def _one_hot_infer(c):
    check_type(c, 0, (dtypes.uint8, dtypes.int32, dtypes.int64), "indices")
    check_type(c, 1, (dtypes.int32,), "depth")
    d = c.check_same_dtypes([2, 3])
    for i, arg in ((1, "depth"), (2, "on_value"), (3, "off_value")):
        if c.shape(i).rank not in (None, 0):
            raise ValueError(f"{arg} must be a scalar, got shape {c.shape(i)}")
    depth = const_ints(c, 1)
    depth = depth[0] if depth is not None else None
    if depth is not None and depth < 0:
        raise ValueError(f"depth must be non-negative, got: {depth}")
    shape, axis = c.shape(0), c.attr("axis")
    if shape.rank is None:
        return [(d, TensorShape(None))]
    if axis != -1 and not 0 <= axis <= shape.rank:
        raise ValueError(
            f"Expected axis to be -1 or between [0, {shape.rank}].  But "
            f"received: {axis}"
        )
    dims = shape.dims
    dims.insert(shape.rank if axis == -1 else axis, depth)
    return [(d, TensorShape(dims))]


register_op(
    "OneHot",
    _one_hot_infer,
    attrs={"axis": ("int", -1), "T": ("type", None), "TI": ("type", dtypes.int64)},
    num_inputs=4,
)


def _broadcast_to_infer(c):
    target = _shape_arg(c, 1, "shape")
    src = c.shape(0)
    if target.rank is not None and src.rank is not None:
        try:
            out = broadcast_shapes(src, target)
        except ValueError:
            out = None
        if (
            out is None
            or src.rank > target.rank
            or (target.is_fully_defined() and out.is_fully_defined() and out != target)
        ):
            raise ValueError(
                f"Cannot broadcast a tensor of shape {src} to shape {target}"
            )
        target = target.merge_with(out) if out.is_compatible_with(target) else target
    return [(c.dtype(0), target)]


register_op(
    "BroadcastTo",
    _broadcast_to_infer,
    attrs={"T": ("type", None), "Tidx": ("type", dtypes.int32)},
    num_inputs=2,
)


# -- Range -----------------------------------------------------------------------------
def range_size(start, limit, delta, integer: bool) -> int:
    """The number of elements of ``range(start, limit, delta)``, as TF checks it."""
    if delta == 0:
        raise ValueError(f"Requires delta != 0: {delta}")
    if delta > 0 and start > limit:
        raise ValueError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    if delta < 0 and start < limit:
        raise ValueError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    if integer:
        return (builtins.abs(limit - start) + builtins.abs(delta) - 1) // (
            builtins.abs(delta)
        )
    return int(np.ceil(builtins.abs((limit - start) / delta)))


def _range_infer(c):
    d = c.check_same_dtypes()
    check_type(c, 0, FLOAT + INDEX, "start")
    for i, arg in ((0, "start"), (1, "limit"), (2, "delta")):
        if c.shape(i).rank not in (None, 0):
            raise ValueError(f"{arg} must be a scalar, not shape {c.shape(i)}")
    vals = [c.constant(i) for i in builtins.range(3)]
    if any(v is None for v in vals):
        return [(d, TensorShape([None]))]
    start, limit, delta = (np.asarray(v).item() for v in vals)
    return [(d, TensorShape([range_size(start, limit, delta, d in INDEX)]))]


register_op("Range", _range_infer, attrs={"Tidx": ("type", dtypes.int32)}, num_inputs=3)


# -- wrappers --------------------------------------------------------------------------
def fill(dims, value, name=None):
    """A tensor of shape ``dims`` filled with the scalar ``value``."""
    with op_scope(name, "Fill", [dims, value]) as (g, scope):
        d = pack_if_needed(dims, name="dims")
        v = convert_to_tensor(value, name="value")
        out = g.create_op(
            "Fill",
            [d, v],
            {"T": v.dtype.base_dtype, "index_type": d.dtype.base_dtype},
            name=scope,
        ).outputs[0]
        if not out.shape.is_fully_defined():
            partial = partial_shape(d)
            if partial is not None:
                set_partial_shape(
                    out,
                    TensorShape(
                        [e if isinstance(e, int) and e >= 0 else None for e in partial]
                    ),
                )
        return out


def _filled(shape_arg, dtype, value, name, default_name):
    dtype = dtypes.as_dtype(dtype).base_dtype
    if dtype is dtypes.string:
        value = b"" if value == 0 else value
    elif dtype is dtypes.bool:
        value = builtins.bool(value)
    with op_scope(name, default_name, [shape_arg]) as (_g, scope):
        if isinstance(shape_arg, TensorShape) or not (
            is_tensor_like(shape_arg)
            or (
                isinstance(shape_arg, (list, tuple))
                and any(is_tensor_like(v) for v in shape_arg)
            )
        ):
            static = as_shape(shape_arg)
            n = static.num_elements()
            if n is not None and n < 1000:
                arr = np.full(
                    static.as_list(),
                    value,
                    dtype=object if dtype is dtypes.string else dtype.as_numpy_dtype,
                )
                return convert_to_tensor(arr, dtype=dtype, name=scope)
            if not static.is_fully_defined():
                raise ValueError(f"shape {static} must be fully defined (or a tensor)")
            shape_arg = np.array(static.as_list(), dtype=np.int32)
        v = convert_to_tensor(
            np.array(
                value, dtype=object if dtype is dtypes.string else dtype.as_numpy_dtype
            ),
            dtype=dtype,
            name="value",
        )
        return fill(shape_arg, v, name=scope)


def zeros(shape, dtype=dtypes.float32, name=None):  # noqa: F811
    """All zeros: a constant when small and static, else a ``Fill``."""
    return _filled(shape, dtype, 0, name, "zeros")


def ones(shape, dtype=dtypes.float32, name=None):  # noqa: F811
    """All ones: a constant when small and static, else a ``Fill``."""
    return _filled(shape, dtype, 1, name, "ones")


def zeros_like(tensor, dtype=None, name=None, optimize=True):
    """Zeros with the shape of ``tensor`` (and its dtype unless ``dtype``)."""
    with op_scope(name, "zeros_like", [tensor]) as (g, scope):
        x = convert_to_tensor(tensor, name="tensor")
        dt = (
            dtypes.as_dtype(dtype).base_dtype
            if dtype is not None
            else (x.dtype.base_dtype)
        )
        if optimize and x.shape.is_fully_defined():
            return zeros(x.shape.as_list(), dt, name=scope)
        if dt is not x.dtype.base_dtype:
            return zeros(shape(x), dt, name=scope)
        return g.create_op("ZerosLike", [x], {"T": dt}, name=scope).outputs[0]


def ones_like(tensor, dtype=None, name=None, optimize=True):
    """Ones with the shape of ``tensor`` (and its dtype unless ``dtype``)."""
    with op_scope(name, "ones_like", [tensor]) as (g, scope):
        x = convert_to_tensor(tensor, name="tensor")
        dt = (
            dtypes.as_dtype(dtype).base_dtype
            if dtype is not None
            else (x.dtype.base_dtype)
        )
        if optimize and x.shape.is_fully_defined():
            return ones(x.shape.as_list(), dt, name=scope)
        if dt is not x.dtype.base_dtype:
            out = ones(shape(x), dt, name=scope)
            set_partial_shape(out, x.shape)
            return out
        return g.create_op("OnesLike", [x], {"T": dt}, name=scope).outputs[0]


def _as_tensor_of(value, dtype, name):
    """``value`` as a tensor of ``dtype`` (TypeError, not ValueError, if it cannot)."""
    try:
        return convert_to_tensor(value, dtype=dtype, name=name)
    except ValueError as e:
        raise TypeError(str(e)) from None


def one_hot(
    indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None
):
    """One-hot vectors: ``on_value`` (1) at ``indices``, ``off_value`` (0) elsewhere;
    out-of-range indices give all ``off_value``."""
    with op_scope(name, "one_hot", [indices, depth, on_value, off_value]) as (g, scope):
        dt = dtypes.as_dtype(dtype).base_dtype if dtype is not None else None
        on = off = None
        if on_value is not None:
            on = (
                _as_tensor_of(on_value, dt, "on_value")
                if dt is not None
                else convert_to_tensor(
                    on_value, name="on_value", preferred_dtype=_dtype_of(off_value)
                )
            )
        if off_value is not None:
            off = (
                _as_tensor_of(off_value, dt, "off_value")
                if dt is not None
                else convert_to_tensor(
                    off_value, name="off_value", preferred_dtype=_dtype_of(on)
                )
            )
        if dt is None:
            dt = (
                on.dtype.base_dtype
                if on is not None
                else (off.dtype.base_dtype if off is not None else dtypes.float32)
            )
        if (
            on is not None
            and off is not None
            and on.dtype.base_dtype is not (off.dtype.base_dtype)
        ):
            raise TypeError(
                f"dtype {on.dtype.base_dtype.name} of on_value does not "
                f"match dtype {off.dtype.base_dtype.name} of off_value"
            )
        np_t = dt.as_numpy_dtype
        if on is None:
            on = convert_to_tensor(np.array(1, dtype=np_t), name="on_value")
        if off is None:
            off = convert_to_tensor(np.array(0, dtype=np_t), name="off_value")
        idx = convert_to_tensor(indices, name="indices")
        dep = convert_to_tensor(depth, dtype=dtypes.int32, name="depth")
        return g.create_op(
            "OneHot",
            [idx, dep, on, off],
            {
                "axis": -1 if axis is None else int(axis),
                "T": dt,
                "TI": idx.dtype.base_dtype,
            },
            name=scope,
        ).outputs[0]


def _dtype_of(v):
    if v is None:
        return None
    if is_tensor_like(v):
        return convert_to_tensor(v).dtype.base_dtype
    return None


_RANGE_ORDER = [dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64]


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001
    """``[start, start + delta, ...)`` up to ``limit`` (``range(n)`` starts at 0)."""
    if limit is None:
        start, limit = 0, start
    args = (("start", start), ("limit", limit), ("delta", delta))
    with op_scope(name, "Range", [start, limit, delta]) as (g, scope):
        want = dtypes.as_dtype(dtype).base_dtype if dtype is not None else None
        if want is None:
            ds = [
                convert_to_tensor(v).dtype.base_dtype
                if is_tensor_like(v)
                else dtypes.infer_dtype(v)
                for _, v in args
            ]
            for d in ds:
                if d not in _RANGE_ORDER:
                    raise TypeError(f"range does not support dtype {d.name}")
            want = builtins.max(ds, key=_RANGE_ORDER.index)
        # Python values become constants of the final dtype (no Cast), so the
        # output length stays static.
        ts = [
            cast(convert_to_tensor(v), want)
            if is_tensor_like(v)
            else convert_to_tensor(v, dtype=want, name=n)
            for n, v in args
        ]
        return g.create_op("Range", ts, {"Tidx": want}, name=scope).outputs[0]


def broadcast_to(input, shape, name=None):  # noqa: A002
    """``input`` broadcast (NumPy rules) to ``shape``."""
    with op_scope(name, "BroadcastTo", [input]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        s = pack_if_needed(shape, name="shape")
        out = g.create_op(
            "BroadcastTo",
            [x, s],
            {"T": x.dtype.base_dtype, "Tidx": s.dtype.base_dtype},
            name=scope,
        ).outputs[0]
        if not out.shape.is_fully_defined():
            partial = partial_shape(s)
            if partial is not None:
                set_partial_shape(
                    out,
                    TensorShape(
                        [e if isinstance(e, int) and e >= 0 else None for e in partial]
                    ),
                )
        return out
