"""Clipping: ``clip_by_value`` (the ``ClipByValue`` op), ``clip_by_norm``,
``global_norm`` and ``clip_by_global_norm`` (built from math ops)."""

from __future__ import annotations

from nbdist.framework.constant_op import identity
from nbdist.ops.array_ops import ones_like, where
from nbdist.ops.indexed_slices import IndexedSlices
from nbdist.ops.math_ops import (
    add,
    add_n,
    cast,
    greater,
    maximum,
    minimum,
    multiply,
    reduce_sum,
    sqrt,
    square,
    subtract,
    truediv,
)
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import NUMERIC, check_type, op_scope
from nbdist.framework.ops import colocate_with, convert_to_tensor
from nbdist.framework.tensor_shape import broadcast_shapes


def _clip_by_value_infer(c):
    d = c.check_same_dtypes()
    check_type(c, 0, NUMERIC, "t")
    shape = c.shape(0)
    for i, arg in ((1, "clip_value_min"), (2, "clip_value_max")):
        out = broadcast_shapes(shape, c.shape(i))
        if shape.rank is not None and out.rank is not None and (
                out.rank != shape.rank or not out.is_compatible_with(shape)):
            raise ValueError(f"{arg} of shape {c.shape(i)} does not fit t of shape "
                             f"{shape}")
    return [(d, shape)]


register_op("ClipByValue", _clip_by_value_infer, attrs={"T": ("type", None)},
            num_inputs=3)


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """``t`` with values below ``clip_value_min`` / above ``clip_value_max`` set to
    them; the bounds are scalars or broadcast to ``t``'s shape."""
    with op_scope(name, "clip_by_value", [t, clip_value_min, clip_value_max]) as (
            g, scope):
        t = convert_to_tensor(t, name="t")
        d = t.dtype.base_dtype
        lo = convert_to_tensor(clip_value_min, name="clip_value_min",
                               preferred_dtype=d)
        hi = convert_to_tensor(clip_value_max, name="clip_value_max",
                               preferred_dtype=d)
        return g.create_op("ClipByValue", [t, lo, hi], {"T": d},
                           name=scope).outputs[0]


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """``t * clip_norm / max(l2norm(t), clip_norm)`` (the L2 norm over ``axes``)."""
    with op_scope(name, "clip_by_norm", [t, clip_norm]) as (_g, scope):
        t = convert_to_tensor(t, name="t")
        d = t.dtype.base_dtype
        clip_norm = convert_to_tensor(clip_norm, name="clip_norm", preferred_dtype=d)
        l2sum = reduce_sum(multiply(t, t), axes, keepdims=True)
        pred = greater(l2sum, 0)
        l2sum_safe = where(pred, l2sum, ones_like(l2sum))
        l2norm = where(pred, sqrt(l2sum_safe), l2sum)
        intermediate = multiply(t, clip_norm)
        return identity(truediv(intermediate, maximum(l2norm, clip_norm)),
                        name=scope)


def _present(t_list):
    if not isinstance(t_list, (list, tuple)) or isinstance(t_list, str):
        raise TypeError("t_list should be a sequence")
    # An IndexedSlices counts by its values (the rows it holds), as TF.
    return [t.values if isinstance(t, IndexedSlices) else convert_to_tensor(t)
            for t in t_list if t is not None]


def global_norm(t_list, name=None):
    """``sqrt(sum(reduce_sum(t ** 2) for t in t_list))``; None entries are skipped."""
    ts = _present(t_list)
    if not ts:
        raise ValueError("global_norm needs at least one tensor")
    with op_scope(name, "global_norm", ts) as (_g, scope):
        sums = []
        for t in ts:
            with colocate_with(t):
                sums.append(reduce_sum(square(t)))
        dt = sums[0].dtype.base_dtype
        sums = [cast(s, dt) for s in sums]
        total = add_n(sums) if len(sums) > 1 else sums[0]
        return sqrt(total, name=scope)


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """Scales every tensor by ``clip_norm / max(global_norm, clip_norm)``.

    Returns ``(list_clipped, global_norm)``; None entries stay None, and an
    infinite or NaN norm makes every clipped value NaN, as in TF.
    """
    present = _present(t_list)
    if use_norm is None:
        use_norm = global_norm(present, name)
    use_norm = convert_to_tensor(use_norm)
    with op_scope(name, "clip_by_global_norm", present + [use_norm]) as (_g, scope):
        nd_ = use_norm.dtype.base_dtype
        clip_norm = convert_to_tensor(clip_norm, name="clip_norm", preferred_dtype=nd_)
        clip_norm = cast(clip_norm, nd_)
        one = convert_to_tensor(1.0, dtype=nd_)
        scale_for_finite = multiply(
            clip_norm, minimum(truediv(one, use_norm), truediv(one, clip_norm)))
        # NaN or inf norms give NaN scales (and so NaN outputs), as TF does.
        scale = add(scale_for_finite, subtract(use_norm, use_norm))
        out = []
        i = 0
        for t in t_list:
            if t is None:
                out.append(None)
                continue
            slices = t if isinstance(t, IndexedSlices) else None
            t = slices.values if slices is not None else convert_to_tensor(t)
            with colocate_with(t):
                s = scale if t.dtype.base_dtype is nd_ else cast(
                    scale, t.dtype.base_dtype)
                clipped = identity(multiply(t, s), name=f"{scope[:-1]}_{i}"
                                   if scope else f"clip_{i}")
            out.append(clipped if slices is None else IndexedSlices(
                clipped, slices.indices, slices.dense_shape))
            i += 1
        return out, use_norm


__all__ = ["clip_by_global_norm", "clip_by_norm", "clip_by_value", "global_norm"]
