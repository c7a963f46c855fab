"""Sparse ops with kernels of their own: ``SparseReorder``, ``SparseReshape``,
``SparseSlice``, ``SparseSplit``, ``SparseFillEmptyRows``, ``SparseSoftmax``,
``SparseAdd``, ``SparseSparseMaximum``/``Minimum``, ``SparseReduceMax``,
``SparseReduceMaxSparse`` and ``SparseReduceSumSparse``.

Entries of a ``SparseTensor`` are (index row, value) pairs; "canonical" order
is row-major over the indices. The kernels are in
``nbdist/executor/kernels/sparse_transform_kernels.py``.

>>> import nbdist as nd
>>> sp = nd.SparseTensor([[1, 0], [0, 1]], [1.0, 2.0], [2, 2])
>>> with nd.Session() as s:
...     s.run(nd.sparse.reorder(sp)).indices.tolist()
[[0, 1], [1, 0]]
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.constant_op import identity
from nbdist.framework.gradient_registry import NotDifferentiable, register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.sparse_tensor import SparseTensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops as A
from nbdist.ops.sparse_ops import _gather_at, _sparse, sparse_reduce_sum

__all__ = [
    "sparse_add",
    "sparse_fill_empty_rows",
    "sparse_maximum",
    "sparse_minimum",
    "sparse_reduce_max",
    "sparse_reduce_max_sparse",
    "sparse_reduce_sum_sparse",
    "sparse_reorder",
    "sparse_reshape",
    "sparse_slice",
    "sparse_softmax",
    "sparse_split",
]

_I64 = dtypes.int64


def _rank(c, shape_input):
    s = c.shape(shape_input)
    return s[0] if s.rank == 1 else None


def _entries(c, values_input, rank):
    """Shapes of a sparse result: indices [?, rank], values [?]."""
    return [(_I64, TensorShape([None, rank])),
            (c.dtype(values_input), TensorShape([None]))]


register_op("SparseReorder", lambda c: [(_I64, c.shape(0)), (c.dtype(1), c.shape(1))],
            attrs={"T": ("type", None)}, num_inputs=3)
register_op("SparseReshape", lambda c: [(_I64, TensorShape([None, _rank(c, 2)])),
                                        (_I64, c.shape(2))],
            attrs={}, num_inputs=3)
register_op("SparseSlice", lambda c: _entries(c, 1, _rank(c, 2)) + [
    (_I64, c.shape(2))], attrs={"T": ("type", None)}, num_inputs=5)
register_op("SparseFillEmptyRows",
            lambda c: _entries(c, 1, _rank(c, 2)) + [
                (dtypes.bool, TensorShape([None])), (_I64, c.shape(1))],
            attrs={"T": ("type", None)}, num_inputs=4)
register_op("SparseSoftmax", lambda c: [(c.dtype(1), c.shape(1))],
            attrs={"T": ("type", None)}, num_inputs=3)
register_op("SparseAdd", lambda c: _entries(c, 1, _rank(c, 2)) + [
    (_I64, c.shape(2))], attrs={"T": ("type", None), "Treal": ("type", None)},
            num_inputs=7)
for _t in ("SparseSparseMaximum", "SparseSparseMinimum"):
    register_op(_t, lambda c: _entries(c, 1, _rank(c, 2)),
                attrs={"T": ("type", None)}, num_inputs=6)
    NotDifferentiable(_t)
register_op("SparseReduceMax", lambda c: [(c.dtype(1), TensorShape(None))],
            attrs={"T": ("type", None), "keep_dims": ("bool", False)}, num_inputs=4)
for _t in ("SparseReduceMaxSparse", "SparseReduceSumSparse"):
    register_op(_t, lambda c: _entries(c, 1, None) + [(_I64, TensorShape([None]))],
                attrs={"T": ("type", None), "keep_dims": ("bool", False)},
                num_inputs=4)
    NotDifferentiable(_t)


def _split_infer(c):
    n = c.attr("num_split")
    rank = _rank(c, 3)
    return ([(_I64, TensorShape([None, rank]))] * n
            + [(c.dtype(2), TensorShape([None]))] * n
            + [(_I64, TensorShape([rank]))] * n)


register_op("SparseSplit", _split_infer,
            attrs={"T": ("type", None), "num_split": ("int", None)}, num_inputs=4)
for _t in ("SparseReshape", "SparseSlice", "SparseSplit", "SparseReduceMax"):
    NotDifferentiable(_t)


def _parts(sp):
    return [sp.indices, sp.values, sp.dense_shape]


def sparse_reorder(sp_input, name=None):
    """``sp_input`` with its entries in canonical (row-major) order."""
    sp = _sparse(sp_input, "sparse_reorder")
    with op_scope(name, "SparseReorder", [sp.values]) as (g, scope):
        op = g.create_op("SparseReorder", _parts(sp), {"T": sp.dtype.base_dtype},
                         name=scope)
        return SparseTensor(op.outputs[0], op.outputs[1], sp.dense_shape)


@register_gradient("SparseReorder")
def _reorder_grad(op, _indices_grad, grad):
    # Reordering the positions 0..n-1 tells where each entry went.
    indices, _, shape = op.inputs
    n = A.shape(indices, out_type=_I64)[:1]
    positions = A.range(n[0], dtype=_I64)
    moved = sparse_reorder(SparseTensor(indices, positions, shape)).values
    from nbdist.ops.array_ops_scatter import scatter_nd

    return [None, scatter_nd(A.expand_dims(moved, -1), grad, n), None]


def sparse_reshape(sp_input, shape, name=None):
    """``sp_input`` reshaped to ``shape`` (one dimension may be -1), entries in
    the same row-major positions."""
    sp = _sparse(sp_input, "sparse_reshape")
    with op_scope(name, "SparseReshape", [sp.values]) as (g, scope):
        new = convert_to_tensor(shape, dtype=_I64, name="new_shape")
        op = g.create_op("SparseReshape", [sp.indices, sp.dense_shape, new], {},
                         name=scope)
        return SparseTensor(op.outputs[0], identity(sp.values), op.outputs[1])


def sparse_slice(sp_input, start, size, name=None):
    """The entries of ``sp_input`` in the box ``[start, start + size)`` (cut to
    the dense shape), with indices relative to ``start``."""
    sp = _sparse(sp_input, "sparse_slice")
    with op_scope(name, "SparseSlice", [sp.values]) as (g, scope):
        st = convert_to_tensor(start, dtype=_I64, name="start")
        sz = convert_to_tensor(size, dtype=_I64, name="size")
        op = g.create_op("SparseSlice", _parts(sp) + [st, sz],
                         {"T": sp.dtype.base_dtype}, name=scope)
        return SparseTensor(*op.outputs)


def sparse_split(keyword_required=None, sp_input=None, num_split=None, axis=None,
                 name=None, split_dim=None):
    """``sp_input`` split along ``axis`` into ``num_split`` sparse tensors (the
    first ones one larger when the size does not divide)."""
    if keyword_required is not None:
        raise ValueError("Keyword arguments are required for this function.")
    axis = split_dim if axis is None else axis
    if sp_input is None or num_split is None or axis is None:
        raise ValueError("sparse_split needs sp_input, num_split and axis")
    sp = _sparse(sp_input, "sparse_split")
    n = int(num_split)
    with op_scope(name, "SparseSplit", [sp.values]) as (g, scope):
        dim = convert_to_tensor(axis, dtype=_I64, name="split_dim")
        op = g.create_op("SparseSplit", [dim] + _parts(sp),
                         {"T": sp.dtype.base_dtype, "num_split": n}, name=scope)
        out = op.outputs
        return [SparseTensor(out[i], out[n + i], out[2 * n + i]) for i in range(n)]


def sparse_fill_empty_rows(sp_input, default_value, name=None):
    """(filled, empty_row_indicator): ``sp_input`` with an entry
    ``default_value`` at ``[row, 0, ...]`` for each row that has none, and
    which rows were empty."""
    sp = _sparse(sp_input, "sparse_fill_empty_rows")
    with op_scope(name, "SparseFillEmptyRows", [sp.values]) as (g, scope):
        d = convert_to_tensor(default_value, dtype=sp.dtype.base_dtype,
                              name="default_value")
        op = g.create_op("SparseFillEmptyRows", _parts(sp) + [d],
                         {"T": sp.dtype.base_dtype}, name=scope)
        return SparseTensor(op.outputs[0], op.outputs[1], sp.dense_shape), \
            op.outputs[2]


@register_gradient("SparseFillEmptyRows")
def _fill_empty_rows_grad(op, _i, grad, _e, _r):
    from nbdist.ops.math_ops_reduction import reduce_sum

    reverse_map = op.outputs[3]
    values_grad = A.gather(grad, reverse_map)
    return [None, values_grad, None, reduce_sum(grad) - reduce_sum(values_grad)]


def sparse_softmax(sp_input, name=None):
    """The softmax over the entries of each innermost row of ``sp_input`` (the
    missing entries do not take part)."""
    sp = _sparse(sp_input, "sparse_softmax")
    with op_scope(name, "SparseSoftmax", [sp.values]) as (g, scope):
        op = g.create_op("SparseSoftmax", _parts(sp), {"T": sp.dtype.base_dtype},
                         name=scope)
        return SparseTensor(sp.indices, op.outputs[0], sp.dense_shape)


@register_gradient("SparseSoftmax")
def _sparse_softmax_grad(op, grad):
    indices, _, shape = op.inputs
    y = op.outputs[0]
    rank = indices.shape[1] if indices.shape.rank == 2 else None
    if rank is None:
        raise ValueError(f"The gradient of {op.name} needs indices of known rank")
    # d x_i = y_i (g_i - sum over the row of g_j y_j)
    row_sums = sparse_reduce_sum(SparseTensor(indices, grad * y, shape), axis=-1,
                                 keepdims=True)
    keep = np.array([1] * (rank - 1) + [0], np.int64)
    return [None, y * (grad - _gather_at(row_sums, indices * keep)), None]


def sparse_add(a, b, threshold=0, thresh=None):
    """``a + b``: a ``SparseTensor`` when both are sparse (sums smaller than
    ``threshold`` in magnitude dropped), a dense tensor when one is dense."""
    from nbdist.framework.sparse_tensor import is_sparse

    threshold = thresh if thresh is not None else threshold
    if not is_sparse(a) and not is_sparse(b):
        raise TypeError("At least one input should be SparseTensor; do you mean "
                        "to use tf.add()?")
    if not (is_sparse(a) and is_sparse(b)):
        from nbdist.ops.array_ops_scatter import tensor_scatter_nd_add

        sp, dense = (a, b) if is_sparse(a) else (b, a)
        sp = _sparse(sp, "sparse_add")
        dense = convert_to_tensor(dense, dtype=sp.dtype.base_dtype)
        return tensor_scatter_nd_add(dense, sp.indices, sp.values)
    sa, sb = _sparse(a, "sparse_add"), _sparse(b, "sparse_add")
    with op_scope(None, "SparseAdd", [sa.values, sb.values]) as (g, scope):
        t = convert_to_tensor(threshold, dtype=_real(sa.dtype.base_dtype),
                              name="thresh")
        op = g.create_op("SparseAdd", _parts(sa) + _parts(sb) + [t],
                         {"T": sa.dtype.base_dtype, "Treal": t.dtype.base_dtype},
                         name=scope)
        return SparseTensor(*op.outputs)


def _real(d):
    return {dtypes.complex64: dtypes.float32,
            dtypes.complex128: dtypes.float64}.get(d, d)


@register_gradient("SparseAdd")
def _sparse_add_grad(op, _i, grad, _s):
    from nbdist.ops.sparse_ops import sparse_to_dense

    sum_indices, shape = op.outputs[0], op.outputs[2]
    dense = sparse_to_dense(sum_indices, shape, grad, validate_indices=False)
    return [None, _gather_at(dense, op.inputs[0]), None,
            None, _gather_at(dense, op.inputs[3]), None, None]


def _sparse_sparse(op_type, sp_a, sp_b, name):
    a, b = _sparse(sp_a, op_type), _sparse(sp_b, op_type)
    with op_scope(name, op_type, [a.values, b.values]) as (g, scope):
        op = g.create_op(op_type, _parts(a) + _parts(b), {"T": a.dtype.base_dtype},
                         name=scope)
        return SparseTensor(op.outputs[0], op.outputs[1], a.dense_shape)


def sparse_maximum(sp_a, sp_b, name=None):
    """The element-wise maximum of two ``SparseTensor`` s of one shape (a missing
    entry counts as 0)."""
    return _sparse_sparse("SparseSparseMaximum", sp_a, sp_b, name)


def sparse_minimum(sp_a, sp_b, name=None):
    """The element-wise minimum of two ``SparseTensor`` s of one shape (a missing
    entry counts as 0)."""
    return _sparse_sparse("SparseSparseMinimum", sp_a, sp_b, name)


def _reduce(op_type, sp_input, axis, keepdims, reduction_axes, keep_dims, name):
    sp = _sparse(sp_input, op_type)
    axis = reduction_axes if axis is None else axis
    keepdims = bool(keep_dims) if keepdims is None else bool(keepdims)
    with op_scope(name, op_type, [sp.values]) as (g, scope):
        axes = convert_to_tensor(np.asarray([], np.int32) if axis is None else axis,
                                 dtype=dtypes.int32, name="reduction_axes")
        return g.create_op(op_type, _parts(sp) + [axes],
                           {"T": sp.dtype.base_dtype, "keep_dims": keepdims},
                           name=scope).outputs


def sparse_reduce_max(sp_input, axis=None, keepdims=None, reduction_axes=None,
                      keep_dims=None, name=None):
    """The maximum of the entries of ``sp_input`` over ``axis`` (all axes when
    None) as a dense tensor; the missing entries do not take part, and a group
    with no entry is 0."""
    return _reduce("SparseReduceMax", sp_input, axis, keepdims, reduction_axes,
                   keep_dims, name)[0]


def sparse_reduce_max_sparse(sp_input, axis=None, keepdims=None,
                             reduction_axes=None, keep_dims=None, name=None):
    """:func:`sparse_reduce_max` as a ``SparseTensor`` of the groups that have
    entries."""
    return SparseTensor(*_reduce("SparseReduceMaxSparse", sp_input, axis, keepdims,
                                 reduction_axes, keep_dims, name))


def sparse_reduce_sum_sparse(sp_input, axis=None, keepdims=None,
                             reduction_axes=None, keep_dims=None, name=None):
    """The sum over ``axis`` as a ``SparseTensor`` of the groups that have
    entries."""
    return SparseTensor(*_reduce("SparseReduceSumSparse", sp_input, axis, keepdims,
                                 reduction_axes, keep_dims, name))
