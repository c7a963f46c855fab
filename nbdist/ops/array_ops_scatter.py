"""Gathering and scattering by N-dimensional index: ``GatherNd``, ``ScatterNd``,
the ``TensorScatter*`` ops (a copy of a tensor with slices replaced, added to...),
and their variable forms (``ScatterNdUpdate``... and ``ScatterMul``...), with
``batch_gather`` and ``batch_scatter_update`` built on them.

An index vector ``indices[..., :K]`` addresses a slice ``params[i0, ..., iK-1]``
of the first K dimensions. The kernels are in
``nbdist/executor/kernels/scatter_nd_kernels.py``.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.gather_nd([[1, 2], [3, 4]], [[1, 0], [0, 1]])).tolist()
[3, 2]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable, register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import (
    INDEX,
    check_type,
    const_ints,
    fmt_dims,
    is_tensor_like,
    op_scope,
)
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops as A
from nbdist.ops.array_ops_join import pack_if_needed
from nbdist.ops.math_ops_elementwise import cast, equal, multiply, negative
from nbdist.ops.state_ops import _as_ref

__all__ = [
    "batch_gather",
    "batch_scatter_update",
    "gather_nd",
    "scatter_div",
    "scatter_max",
    "scatter_min",
    "scatter_mul",
    "scatter_nd",
    "scatter_nd_add",
    "scatter_nd_sub",
    "scatter_nd_update",
    "tensor_scatter_add",
    "tensor_scatter_nd_add",
    "tensor_scatter_nd_max",
    "tensor_scatter_nd_min",
    "tensor_scatter_nd_sub",
    "tensor_scatter_nd_update",
    "tensor_scatter_sub",
    "tensor_scatter_update",
]


# -- shape functions ------------------------------------------------------------------
def _index_depth(c, i: int):
    check_type(c, i, INDEX, "indices")
    s = c.shape(i)
    if s.rank == 0:
        raise ValueError(f"{c.op_type}: indices must be at least a vector, got a "
                         "scalar")
    return None if s.rank is None else s[-1]


def _gather_nd_infer(c):
    params, indices = c.shape(0), c.shape(1)
    k = _index_depth(c, 1)
    d = c.dtype(0)
    if indices.rank is None or k is None or params.rank is None:
        return [(d, TensorShape(None))]
    if k > params.rank:
        raise ValueError(
            f"indices.shape[-1] must be <= params.rank, but saw indices shape: "
            f"{fmt_dims(indices.as_list())} and params shape: "
            f"{fmt_dims(params.as_list())}")
    return [(d, indices[:-1].concatenate(params[k:]))]


def check_updates_shape(c, indices: TensorShape, updates: TensorShape,
                        target: TensorShape):
    """``updates`` must be ``indices.shape[:-1] + target.shape[K:]`` (TF's
    wording); returns the target shape."""
    if indices.rank is None or updates.rank is None or indices[-1] is None:
        return target
    outer = indices.rank - 1
    lead_i, lead_u = indices[:-1], updates[:outer]
    if updates.rank < outer or not lead_i.is_compatible_with(lead_u):
        raise ValueError(
            f"Dimensions [0,{outer}) of indices[shape={fmt_dims(indices.as_list())}]"
            f" = {fmt_dims(lead_i.as_list())} must match dimensions [0,{outer}) of "
            f"updates[shape={fmt_dims(updates.as_list())}] = "
            f"{fmt_dims(lead_u.as_list())}")
    if target.rank is None:
        return target
    k = indices[-1]
    if k > target.rank:
        raise ValueError(
            f"{c.op_type}: indices.shape[-1] = {k} is larger than the rank "
            f"{target.rank} of the output shape {fmt_dims(target.as_list())}")
    inner_t, inner_u = target[k:], updates[outer:]
    if not inner_t.is_compatible_with(inner_u):
        raise ValueError(
            f"Dimensions [{k},{target.rank}) of input[shape="
            f"{fmt_dims(target.as_list())}] = {fmt_dims(inner_t.as_list())} must "
            f"match dimensions [{outer},{updates.rank}) of updates[shape="
            f"{fmt_dims(updates.as_list())}] = {fmt_dims(inner_u.as_list())}")
    return target


def _scatter_nd_infer(c):
    _index_depth(c, 0)
    check_type(c, 2, INDEX, "shape")
    dims = const_ints(c, 2)
    if dims is not None:
        target = TensorShape(dims)
    elif c.shape(2).rank == 1 and c.shape(2)[0] is not None:
        target = TensorShape([None] * c.shape(2)[0])
    else:
        target = TensorShape(None)
    return [(c.dtype(1), check_updates_shape(c, c.shape(0), c.shape(1), target))]


def _tensor_scatter_infer(c):
    _index_depth(c, 1)
    if c.dtype(0) is not c.dtype(2):
        raise TypeError(f"{c.op_type}: updates ({c.dtype(2).name}) must have the "
                        f"dtype of tensor ({c.dtype(0).name})")
    return [(c.dtype(0), check_updates_shape(c, c.shape(1), c.shape(2), c.shape(0)))]


def _ref_scatter_nd_infer(c):
    if not c.input_dtypes[0].is_ref_dtype:
        raise TypeError(f"{c.op_type} needs a variable reference")
    _index_depth(c, 1)
    check_updates_shape(c, c.shape(1), c.shape(2), c.shape(0))
    return [(c.input_dtypes[0], c.shape(0))]


def _ref_scatter_infer(c):
    if not c.input_dtypes[0].is_ref_dtype:
        raise TypeError(f"{c.op_type} needs a variable reference")
    check_type(c, 1, INDEX, "indices")
    var, ind, upd = c.shape(0), c.shape(1), c.shape(2)
    if var.rank is not None and ind.rank is not None and upd.rank is not None:
        want = ind.concatenate(var[1:])
        if upd.rank != 0 and not want.is_compatible_with(upd):
            raise ValueError(
                f"Shapes must be equal rank, or updates must be a scalar: updates "
                f"shape {fmt_dims(upd.as_list())} is not indices.shape + "
                f"ref.shape[1:] = {fmt_dims(want.as_list())}")
    return [(c.input_dtypes[0], var)]


_ND_ATTRS = {"T": ("type", None), "Tindices": ("type", dtypes.int32)}
register_op("GatherNd", _gather_nd_infer,
            attrs={"Tparams": ("type", None), "Tindices": ("type", dtypes.int32)},
            num_inputs=2)
register_op("ScatterNd", _scatter_nd_infer, attrs=_ND_ATTRS, num_inputs=3)
TENSOR_SCATTER_OPS = ("TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub",
                      "TensorScatterMax", "TensorScatterMin")
for _t in TENSOR_SCATTER_OPS:
    register_op(_t, _tensor_scatter_infer, attrs=_ND_ATTRS, num_inputs=3)
_REF_ATTRS = dict(_ND_ATTRS, use_locking=("bool", False))
for _t in ("ScatterNdUpdate", "ScatterNdAdd", "ScatterNdSub"):
    register_op(_t, _ref_scatter_nd_infer, attrs=_REF_ATTRS, num_inputs=3,
                ref_inputs=(0,), stateful=True)
for _t in ("ScatterMul", "ScatterDiv", "ScatterMax", "ScatterMin"):
    register_op(_t, _ref_scatter_infer, attrs=_REF_ATTRS, num_inputs=3,
                ref_inputs=(0,), stateful=True)


# -- wrappers -------------------------------------------------------------------------
def _indices(indices):
    i = convert_to_tensor(indices, name="indices")
    if i.dtype.base_dtype not in INDEX:
        raise TypeError(f"indices must be int32 or int64, got {i.dtype.name}")
    return i


def leading_coordinates(like, n: int):
    """An int tensor of ``shape(like) + [n]`` whose ``[..., j]`` is each element's
    position along axis ``j`` of ``like`` (j < n): the batch part of an index."""
    s = A.shape(like, out_type=like.dtype.base_dtype)
    if n == 0:
        return A.zeros(A.concat([s, [0]], 0), dtype=like.dtype.base_dtype)
    r = like.shape.rank
    axes = []
    for j in range(n):
        pos = A.reshape(A.range(s[j], dtype=like.dtype.base_dtype),
                        [1] * j + [-1] + [1] * (r - j - 1))
        axes.append(A.broadcast_to(pos, s))
    return A.stack(axes, axis=-1)


def _with_batch(indices, batch_dims: int):
    if batch_dims == 0:
        return indices
    if indices.shape.rank is None:
        raise ValueError("batch_dims needs indices of known rank")
    lead = leading_coordinates(indices[..., 0], batch_dims)
    return A.concat([lead, indices], axis=-1)


def gather_nd(params, indices, name=None, batch_dims=0):
    """The slices of ``params`` at the index vectors in ``indices``' last
    dimension: ``out[i...] = params[indices[i..., 0], ..., indices[i..., K-1]]``;
    the first ``batch_dims`` dimensions of both are batch dimensions.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.gather_nd([[1, 2], [3, 4]], [[1]])).tolist()
    [[3, 4]]
    """
    with op_scope(name, "GatherNd", [params, indices]) as (g, scope):
        p = convert_to_tensor(params, name="params")
        i = _with_batch(_indices(indices), int(batch_dims))
        return g.create_op("GatherNd", [p, i], {"Tparams": p.dtype.base_dtype,
                                               "Tindices": i.dtype.base_dtype},
                           name=scope).outputs[0]


def scatter_nd(indices, updates, shape, name=None):
    """A zero tensor of ``shape`` with ``updates`` summed into the slices named by
    ``indices`` (repeated indices add up).

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.scatter_nd([[1], [3], [1]], [1, 2, 3], [5])).tolist()
    [0, 4, 0, 2, 0]
    """
    with op_scope(name, "ScatterNd", [indices, updates]) as (g, scope):
        i = _indices(indices)
        u = convert_to_tensor(updates, name="updates")
        s = pack_if_needed(shape, None if is_tensor_like(shape) else
                           i.dtype.base_dtype, name="shape")
        if s.dtype.base_dtype != i.dtype.base_dtype:
            s = cast(s, i.dtype.base_dtype)
        return g.create_op("ScatterNd", [i, u, s],
                           {"T": u.dtype.base_dtype,
                            "Tindices": i.dtype.base_dtype}, name=scope).outputs[0]


def _tensor_scatter(op_type, tensor, indices, updates, name):
    with op_scope(name, op_type, [tensor, indices, updates]) as (g, scope):
        t = convert_to_tensor(tensor, name="tensor")
        i = _indices(indices)
        u = convert_to_tensor(updates, dtype=t.dtype.base_dtype, name="updates")
        return g.create_op(op_type, [t, i, u],
                           {"T": t.dtype.base_dtype,
                            "Tindices": i.dtype.base_dtype}, name=scope).outputs[0]


def tensor_scatter_nd_update(tensor, indices, updates, name=None):
    """A copy of ``tensor`` with the slices at ``indices`` replaced by
    ``updates``.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.tensor_scatter_nd_update([1, 2, 3], [[0]], [9])).tolist()
    [9, 2, 3]
    """
    return _tensor_scatter("TensorScatterUpdate", tensor, indices, updates, name)


def tensor_scatter_nd_add(tensor, indices, updates, name=None):
    """A copy of ``tensor`` with ``updates`` added at ``indices``."""
    return _tensor_scatter("TensorScatterAdd", tensor, indices, updates, name)


def tensor_scatter_nd_sub(tensor, indices, updates, name=None):
    """A copy of ``tensor`` with ``updates`` subtracted at ``indices``."""
    return _tensor_scatter("TensorScatterSub", tensor, indices, updates, name)


def tensor_scatter_nd_max(tensor, indices, updates, name=None):
    """A copy of ``tensor`` with each slice at ``indices`` the larger of it and
    ``updates``."""
    return _tensor_scatter("TensorScatterMax", tensor, indices, updates, name)


def tensor_scatter_nd_min(tensor, indices, updates, name=None):
    """A copy of ``tensor`` with each slice at ``indices`` the smaller of it and
    ``updates``."""
    return _tensor_scatter("TensorScatterMin", tensor, indices, updates, name)


tensor_scatter_update = tensor_scatter_nd_update
tensor_scatter_add = tensor_scatter_nd_add
tensor_scatter_sub = tensor_scatter_nd_sub


def _ref_scatter(op_type, ref, indices, updates, use_locking, name):
    ref = _as_ref(ref)
    with op_scope(name, op_type, [ref]) as (g, scope):
        i = _indices(indices)
        u = convert_to_tensor(updates, dtype=ref.dtype.base_dtype, name="updates")
        return g.create_op(op_type, [ref, i, u],
                           {"T": ref.dtype.base_dtype,
                            "Tindices": i.dtype.base_dtype,
                            "use_locking": bool(use_locking)}, name=scope).outputs[0]


def scatter_nd_update(ref, indices, updates, use_locking=True, name=None):
    """Writes ``updates`` into the variable ``ref`` at the N-d ``indices``;
    returns ``ref`` after the update.

    >>> import nbdist as nd
    >>> v = nd.Variable([1, 2, 3, 4])
    >>> up = nd.scatter_nd_update(v, [[1], [3]], [9, 8])
    >>> with nd.Session() as s:
    ...     _ = s.run(v.initializer)
    ...     s.run(up).tolist()
    [1, 9, 3, 8]
    """
    return _ref_scatter("ScatterNdUpdate", ref, indices, updates, use_locking, name)


def _ref_scatter_wrapper(op_type, name, doc):
    def wrapper(ref, indices, updates, use_locking=False, name=None):
        return _ref_scatter(op_type, ref, indices, updates, use_locking, name)

    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = doc
    return wrapper


scatter_nd_add = _ref_scatter_wrapper(
    "ScatterNdAdd", "scatter_nd_add",
    "Adds ``updates`` to the variable ``ref`` at the N-d ``indices``.")
scatter_nd_sub = _ref_scatter_wrapper(
    "ScatterNdSub", "scatter_nd_sub",
    "Subtracts ``updates`` from the variable ``ref`` at the N-d ``indices``.")
scatter_mul = _ref_scatter_wrapper(
    "ScatterMul", "scatter_mul",
    "Multiplies the rows ``indices`` of the variable ``ref`` by ``updates``.")
scatter_div = _ref_scatter_wrapper(
    "ScatterDiv", "scatter_div",
    "Divides the rows ``indices`` of the variable ``ref`` by ``updates``.")
scatter_max = _ref_scatter_wrapper(
    "ScatterMax", "scatter_max",
    "Sets the rows ``indices`` of ``ref`` to their maximum with ``updates``.")
scatter_min = _ref_scatter_wrapper(
    "ScatterMin", "scatter_min",
    "Sets the rows ``indices`` of ``ref`` to their minimum with ``updates``.")


def batch_gather(params, indices, name=None):
    """``params[b..., indices[b..., j]]``: a gather along the axis after the
    batch dimensions, which are all but the last of ``indices``.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.batch_gather([[1, 2], [3, 4]], [[1], [0]])).tolist()
    [[2], [3]]
    """
    with op_scope(name, "BatchGather", [params, indices]):
        p = convert_to_tensor(params, name="params")
        i = _indices(indices)
        if i.shape.rank is None:
            raise ValueError("batch_gather needs indices of known rank")
        full = A.concat([leading_coordinates(i, i.shape.rank - 1),
                         A.expand_dims(i, -1)], axis=-1)
        return gather_nd(p, full)


def batch_scatter_update(ref, indices, updates, use_locking=True, name=None):
    """Writes ``updates`` into the variable ``ref`` at ``ref[b..., indices[b...,
    j]]`` (the batch form of ``scatter_update``)."""
    with op_scope(name, "BatchScatterUpdate", [indices, updates]):
        i = _indices(indices)
        if i.shape.rank is None:
            raise ValueError("batch_scatter_update needs indices of known rank")
        full = A.concat([leading_coordinates(i, i.shape.rank - 1),
                         A.expand_dims(i, -1)], axis=-1)
        return scatter_nd_update(ref, full, updates, use_locking=use_locking)


# -- gradients --------------------------------------------------------------------------
def _shape_as(t, like):
    return A.shape(t, out_type=like.dtype.base_dtype)


@register_gradient("GatherNd")
def _gather_nd_grad(op, grad):
    params, indices = op.inputs
    return [scatter_nd(indices, grad, _shape_as(params, indices)), None]


@register_gradient("ScatterNd")
def _scatter_nd_grad(op, grad):
    return [None, gather_nd(grad, op.inputs[0]), None]


@register_gradient("TensorScatterUpdate")
def _tensor_scatter_update_grad(op, grad):
    indices, updates = op.inputs[1], op.inputs[2]
    cleared = tensor_scatter_nd_update(grad, indices, A.zeros_like(updates))
    return [cleared, None, gather_nd(grad, indices)]


@register_gradient("TensorScatterAdd")
def _tensor_scatter_add_grad(op, grad):
    return [grad, None, gather_nd(grad, op.inputs[1])]


@register_gradient("TensorScatterSub")
def _tensor_scatter_sub_grad(op, grad):
    return [grad, None, negative(gather_nd(grad, op.inputs[1]))]


def _tensor_scatter_extremum_grad(op, grad):
    # The gradient goes to whichever of tensor and update is the output (both on
    # a tie, as TF).
    tensor, indices, updates = op.inputs
    out = op.outputs[0]
    d = grad.dtype.base_dtype
    tensor_grad = multiply(grad, cast(equal(tensor, out), d))
    updates_grad = multiply(gather_nd(grad, indices),
                            cast(equal(updates, gather_nd(out, indices)), d))
    return [tensor_grad, None, updates_grad]


register_gradient("TensorScatterMax")(_tensor_scatter_extremum_grad)
register_gradient("TensorScatterMin")(_tensor_scatter_extremum_grad)
for _t in ("ScatterNdUpdate", "ScatterNdAdd", "ScatterNdSub", "ScatterMul",
           "ScatterDiv", "ScatterMax", "ScatterMin"):
    NotDifferentiable(_t)
