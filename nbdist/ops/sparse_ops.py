"""Ops on ``SparseTensor`` s (TF's ``sparse_ops``), and ``unique``.

======================== ==================================================
op                       meaning
======================== ==================================================
SparseToDense            dense tensor of ``output_shape``: ``sparse_values``
                         at ``sparse_indices``, ``default_value`` elsewhere
SparseTensorDenseMatMul  ``A @ B`` for a sparse matrix A, dense B (adjoints)
SparseReduceSum          the sum over ``reduction_axes`` (a dense tensor)
SparseConcat             concatenation along ``concat_dim`` (a sparse tensor,
                         entries in row-major order)
Unique                   the distinct elements and each element's position
======================== ==================================================

The kernels are in ``nbdist/executor/kernels/sparse_kernels.py``. Public
names also live under ``nd.sparse`` (``nd.sparse.to_dense`` ...), as TF2.
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable, register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.framework.sparse_tensor import (
    SparseTensor,
    SparseTensorValue,
    convert_to_tensor_or_sparse_tensor,
)


# -- op definitions --------------------------------------------------------------
def _unique_infer(c):
    if c.shape(0).rank not in (None, 1):
        raise ValueError(f"unique expects a 1D vector, got shape {c.shape(0)}")
    return [(c.dtype(0), TensorShape([None])), (c.attr("out_idx"), c.shape(0))]


register_op("Unique", _unique_infer,
            attrs={"T": ("type", None), "out_idx": ("type", dtypes.int32)},
            num_inputs=1)
NotDifferentiable("Unique")


def _shape_from_constant(value, rank_hint):
    if value is not None:
        return TensorShape([None if int(d) < 0 else int(d) for d in np.ravel(value)])
    return TensorShape(None if rank_hint is None else [None] * rank_hint)


def _to_dense_infer(c):
    if c.shape(1).rank not in (None, 0, 1):
        raise ValueError(f"SparseToDense: output_shape must be a vector, got shape "
                         f"{c.shape(1)}")
    if c.shape(3).rank not in (None, 0):
        raise ValueError(f"SparseToDense: default_value must be a scalar, got shape "
                         f"{c.shape(3)}")
    if c.dtype(2) is not c.dtype(3):
        raise TypeError(f"SparseToDense: sparse_values ({c.dtype(2).name}) and "
                        f"default_value ({c.dtype(3).name}) must have one dtype")
    rank = c.shape(1)[0] if c.shape(1).rank == 1 else None
    return [(c.dtype(2), _shape_from_constant(c.constant(1), rank))]


register_op("SparseToDense", _to_dense_infer,
            attrs={"T": ("type", None), "Tindices": ("type", None),
                   "validate_indices": ("bool", True)}, num_inputs=4)


def _matmul_infer(c):
    for i, what in ((0, "a_indices"), (3, "b")):
        if c.shape(i).rank not in (None, 2):
            raise ValueError(f"SparseTensorDenseMatMul: {what} must be a matrix, got "
                             f"shape {c.shape(i)}")
    if c.dtype(1) is not c.dtype(3):
        raise TypeError(f"SparseTensorDenseMatMul: a_values ({c.dtype(1).name}) and "
                        f"b ({c.dtype(3).name}) must have one dtype")
    a = _shape_from_constant(c.constant(2), 2)
    if a.rank is not None and a.rank != 2:
        raise ValueError(f"SparseTensorDenseMatMul: a must be a matrix, got shape {a}")
    b = c.shape(3) if c.shape(3).rank == 2 else TensorShape([None, None])
    a_rows, a_inner = (a[1], a[0]) if c.attr("adjoint_a") else (a[0], a[1])
    b_inner, b_cols = (b[1], b[0]) if c.attr("adjoint_b") else (b[0], b[1])
    if a_inner is not None and b_inner is not None and a_inner != b_inner:
        raise ValueError(f"SparseTensorDenseMatMul: cannot multiply A (inner "
                         f"dimension {a_inner}) by B (inner dimension {b_inner})")
    return [(c.dtype(1), TensorShape([a_rows, b_cols]))]


register_op("SparseTensorDenseMatMul", _matmul_infer,
            attrs={"T": ("type", None), "Tindices": ("type", dtypes.int64),
                   "adjoint_a": ("bool", False), "adjoint_b": ("bool", False)},
            num_inputs=4)


def _reduce_sum_infer(c):
    shape = c.constant(2)
    axes = c.constant(3)
    if shape is None or axes is None:
        return [(c.dtype(1), TensorShape(None))]
    dims = [int(d) for d in np.ravel(shape)]
    rank = len(dims)
    axes = {int(a) % rank for a in np.ravel(axes)} if np.size(axes) else set(
        range(rank))
    if c.attr("keep_dims"):
        out = [1 if i in axes else d for i, d in enumerate(dims)]
    else:
        out = [d for i, d in enumerate(dims) if i not in axes]
    return [(c.dtype(1), TensorShape(out))]


register_op("SparseReduceSum", _reduce_sum_infer,
            attrs={"T": ("type", None), "keep_dims": ("bool", False)}, num_inputs=4)


def _concat_infer(c):
    n = c.attr("N")
    if len(c.input_dtypes) != 3 * n:
        raise ValueError(f"SparseConcat expects 3*N = {3 * n} inputs")
    rank = None
    for i in range(n):
        s = c.shape(2 * n + i)
        if s.rank == 1 and s[0] is not None:
            rank = s[0]
    return [(dtypes.int64, TensorShape([None, rank])),
            (c.dtype(n), TensorShape([None])),
            (dtypes.int64, TensorShape([rank]))]


register_op("SparseConcat", _concat_infer,
            attrs={"T": ("type", None), "N": ("int", None), "concat_dim": ("int", 0)},
            min_inputs=3)
NotDifferentiable("SparseConcat")


# -- wrappers -------------------------------------------------------------------
def unique(x, out_idx=dtypes.int32, name=None):
    """(y, idx): the distinct elements of the vector ``x`` in order of first
    appearance, and for each element of ``x`` its position in ``y``."""
    x = convert_to_tensor(x)
    op = x.graph.create_op("Unique", [x], {"T": x.dtype.base_dtype,
                                           "out_idx": dtypes.as_dtype(out_idx)},
                           name=name or "Unique")
    return op.outputs[0], op.outputs[1]


def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value=0,
                    validate_indices=True, name=None):
    """The dense tensor of ``output_shape`` holding ``sparse_values`` at
    ``sparse_indices`` (a scalar, a vector of rows, or an ``[N, rank]`` matrix)
    and ``default_value`` elsewhere. With ``validate_indices`` the indices must
    be sorted in row-major order without repeats (InvalidArgumentError)."""
    with op_scope(name, "SparseToDense",
                  [sparse_indices, output_shape, sparse_values]) as (g, scope):
        indices = convert_to_tensor(sparse_indices, name="sparse_indices")
        if not indices.dtype.is_integer:
            raise TypeError(f"SparseToDense: sparse_indices must be integers, got "
                            f"{indices.dtype.name}")
        shape = convert_to_tensor(output_shape, dtype=indices.dtype.base_dtype,
                                  name="output_shape")
        values = convert_to_tensor(sparse_values, name="sparse_values")
        default = convert_to_tensor(default_value, dtype=values.dtype.base_dtype,
                                    name="default_value")
        return g.create_op(
            "SparseToDense", [indices, shape, values, default],
            {"T": values.dtype.base_dtype, "Tindices": indices.dtype.base_dtype,
             "validate_indices": bool(validate_indices)}, name=scope).outputs[0]


def _sparse(sp_input, what):
    sp = convert_to_tensor_or_sparse_tensor(sp_input)
    if not isinstance(sp, SparseTensor):
        raise TypeError(f"{what}: input must be a SparseTensor, got {sp_input!r:.80}")
    return sp


def sparse_tensor_to_dense(sp_input, default_value=0, validate_indices=True,
                           name=None):
    """``sp_input`` as a dense tensor, ``default_value`` where it has no entry."""
    sp = _sparse(sp_input, "sparse_tensor_to_dense")
    return sparse_to_dense(sp.indices, sp.dense_shape, sp.values,
                           default_value=default_value,
                           validate_indices=validate_indices,
                           name=name or "SparseToDense")


def sparse_tensor_dense_matmul(sp_a, b, adjoint_a=False, adjoint_b=False,
                               name=None):
    """``op(sp_a) @ op(b)`` for a rank-2 ``SparseTensor`` ``sp_a`` and a dense
    matrix ``b`` (``op`` transposes when the adjoint flag is set); differentiable
    with respect to ``sp_a.values`` and ``b``."""
    sp = _sparse(sp_a, "sparse_tensor_dense_matmul")
    with op_scope(name, "SparseTensorDenseMatMul",
                  [sp.indices, sp.values, b]) as (g, scope):
        b = convert_to_tensor(b, name="b", dtype=sp.dtype.base_dtype)
        return g.create_op(
            "SparseTensorDenseMatMul", [sp.indices, sp.values, sp.dense_shape, b],
            {"T": b.dtype.base_dtype, "Tindices": sp.indices.dtype.base_dtype,
             "adjoint_a": bool(adjoint_a), "adjoint_b": bool(adjoint_b)},
            name=scope).outputs[0]


def sparse_reduce_sum(sp_input, axis=None, keepdims=None, reduction_axes=None,
                      keep_dims=None, name=None):
    """The sum of ``sp_input`` over ``axis`` (all axes when None) as a dense
    tensor; ``keepdims`` keeps the reduced axes with length 1."""
    sp = _sparse(sp_input, "sparse_reduce_sum")
    if axis is None:
        axis = reduction_axes
    if keepdims is None:
        keepdims = bool(keep_dims)
    with op_scope(name, "SparseReduceSum", [sp.values]) as (g, scope):
        axes = convert_to_tensor(np.asarray([], np.int32) if axis is None else axis,
                                 dtype=dtypes.int32, name="reduction_axes")
        return g.create_op(
            "SparseReduceSum", [sp.indices, sp.values, sp.dense_shape, axes],
            {"T": sp.dtype.base_dtype, "keep_dims": bool(keepdims)},
            name=scope).outputs[0]


def sparse_concat(axis, sp_inputs, name=None, expand_nonconcat_dim=False,
                  concat_dim=None, expand_nonconcat_dims=None):
    """The ``SparseTensor`` s of ``sp_inputs`` joined along ``axis``; the other
    dimensions must match unless ``expand_nonconcat_dim`` (then each is the
    largest of the inputs')."""
    if concat_dim is not None:
        axis = concat_dim
    if expand_nonconcat_dims is not None:
        expand_nonconcat_dim = expand_nonconcat_dims
    if not isinstance(sp_inputs, (list, tuple)) or not sp_inputs:
        raise TypeError("sparse_concat: sp_inputs must be a non-empty list of "
                        "SparseTensors")
    sps = [_sparse(s, "sparse_concat") for s in sp_inputs]
    n = len(sps)
    with op_scope(name, "SparseConcat", [s.values for s in sps]) as (g, scope):
        shapes = [s.dense_shape for s in sps]
        if expand_nonconcat_dim:
            from nbdist.ops.array_ops import one_hot, stack
            from nbdist.ops.math_ops_elementwise import cast, multiply
            from nbdist.ops.math_ops_reduction import reduce_max

            rank = sps[0].shape.rank
            if rank is None:
                raise ValueError("sparse_concat with expand_nonconcat_dim needs "
                                 "inputs of known rank")
            biggest = reduce_max(stack(shapes), axis=0)
            keep = cast(1 - one_hot(axis % rank, rank, dtype=dtypes.int32),
                        dtypes.int64)
            shapes = [s * (1 - keep) + multiply(biggest, keep) for s in shapes]
        op = g.create_op(
            "SparseConcat", [s.indices for s in sps] + [s.values for s in sps]
            + shapes, {"T": sps[0].dtype.base_dtype, "N": n,
                       "concat_dim": int(axis)}, name=scope)
        return SparseTensor(*op.outputs)


# -- gradients ------------------------------------------------------------------
def _gather_at(dense, indices):
    """``dense[indices[i]]`` for each row of the ``[N, rank]`` int ``indices``."""
    from nbdist.ops.array_ops import gather, reshape, shape, stack
    from nbdist.ops.math_ops_elementwise import cast
    from nbdist.ops.math_ops_reduction import reduce_prod, reduce_sum

    rank = dense.shape.rank
    if rank is None:
        raise ValueError(f"The gradient needs {dense.name} of known rank")
    if rank == 0:
        return dense
    dims = cast(shape(dense), dtypes.int64)
    strides = stack([reduce_prod(dims[k + 1:]) for k in range(rank)])
    flat_pos = reduce_sum(cast(indices, dtypes.int64) * strides, axis=1)
    return gather(reshape(dense, [-1]), flat_pos)


@register_gradient("SparseToDense")
def _sparse_to_dense_grad(op, grad):
    from nbdist.ops.array_ops import reshape
    from nbdist.ops.math_ops_reduction import reduce_sum

    indices = op.inputs[0]
    if indices.shape.rank == 2:
        values_grad = _gather_at(grad, indices)
    elif indices.shape.rank in (0, 1):
        values_grad = _gather_at(grad, reshape(indices, [-1, 1]))
        if indices.shape.rank == 0:
            values_grad = reshape(values_grad, [])
    else:
        raise ValueError(f"The gradient of {op.name} needs sparse_indices of known "
                         "rank")
    default_grad = reduce_sum(grad) - reduce_sum(values_grad)
    return [None, None, values_grad, default_grad]


@register_gradient("SparseTensorDenseMatMul")
def _sparse_matmul_grad(op, grad):
    from nbdist.ops.array_ops import gather, transpose
    from nbdist.ops.math_ops_reduction import reduce_sum

    indices, values, dense_shape, b = op.inputs
    adj_a, adj_b = op.get_attr("adjoint_a"), op.get_attr("adjoint_b")
    sp = SparseTensor(indices, values, dense_shape)
    b_grad = sparse_tensor_dense_matmul(sp, grad, adjoint_a=not adj_a)
    if adj_b:
        b_grad = transpose(b_grad)
    rows, cols = indices[:, 0], indices[:, 1]
    parts_a = gather(grad, cols if adj_a else rows)
    parts_b = gather(transpose(b) if adj_b else b, rows if adj_a else cols)
    return [None, reduce_sum(parts_a * parts_b, axis=1), None, b_grad]


@register_gradient("SparseReduceSum")
def _sparse_reduce_sum_grad(op, grad):
    from nbdist.ops.array_ops import fill, reshape, shape
    from nbdist.ops.math_ops_elementwise import cast

    indices, values, dense_shape, axes = op.inputs
    rank = indices.shape[1] if indices.shape.rank == 2 else None
    axes_v = op.inputs[3].op._attrs.get("value") if axes.op.type == "Const" else None
    if rank is None or axes_v is None:
        raise ValueError(f"The gradient of {op.name} needs constant axes and "
                         "indices of known rank")
    reduced = ({int(a) % rank for a in np.ravel(axes_v)} if np.size(axes_v)
               else set(range(rank)))
    if len(reduced) == rank:
        return [None, fill(shape(values), reshape(grad, [])), None, None]
    keep = np.array([0 if i in reduced else 1 for i in range(rank)], np.int64)
    kept_shape = dense_shape * keep + (1 - keep)
    grad_kept = reshape(grad, cast(kept_shape, dtypes.int32))
    return [None, _gather_at(grad_kept, indices * keep), None, None]


__all__ = [
    "SparseTensor",
    "SparseTensorValue",
    "sparse_concat",
    "sparse_reduce_sum",
    "sparse_tensor_dense_matmul",
    "sparse_tensor_to_dense",
    "sparse_to_dense",
    "unique",
]
