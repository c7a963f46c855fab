"""Sparse ops built from other ops (so differentiable where those are):
``sparse_retain``, ``sparse_transpose``, ``sparse_reset_shape``,
``sparse_merge``, ``sparse_to_indicator``, ``sparse_mask`` (on
``IndexedSlices``), ``sparse_matmul``, and ``nd.sparse``'s ``expand_dims``,
``eye`` and ``from_dense``.

>>> import nbdist as nd
>>> sp = nd.SparseTensor([[0, 0], [1, 2]], [1.0, 2.0], [2, 3])
>>> with nd.Session() as s:
...     s.run(nd.sparse_transpose(sp)).indices.tolist()
[[0, 0], [2, 1]]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.constant_op import identity
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.sparse_tensor import SparseTensor
from nbdist.ops import array_ops as A
from nbdist.ops.math_ops_elementwise import cast, not_equal
from nbdist.ops.math_ops_reduction import reduce_max
from nbdist.ops.sparse_ops import _sparse
from nbdist.ops.sparse_ops_transform import sparse_reorder

__all__ = [
    "sparse_mask",
    "sparse_matmul",
    "sparse_merge",
    "sparse_reset_shape",
    "sparse_retain",
    "sparse_to_indicator",
    "sparse_transpose",
]

_I64 = dtypes.int64


def sparse_retain(sp_input, to_retain):
    """The entries of ``sp_input`` where the boolean vector ``to_retain`` is
    true."""
    sp = _sparse(sp_input, "sparse_retain")
    keep = convert_to_tensor(to_retain, dtype=dtypes.bool, name="to_retain")
    if keep.shape.rank not in (None, 1):
        raise ValueError(f"to_retain must be a vector, got shape {keep.shape}")
    where = A.reshape(A.where(keep), [-1])
    return SparseTensor(A.gather(sp.indices, where), A.gather(sp.values, where),
                        identity(sp.dense_shape))


def sparse_transpose(sp_input, perm=None, name=None):
    """``sp_input`` with its dimensions permuted (reversed by default), entries
    in canonical order."""
    sp = _sparse(sp_input, "sparse_transpose")
    with op_scope(name, "SparseTranspose", [sp.values]):
        rank = sp.indices.shape[1] if sp.indices.shape.rank == 2 else None
        if perm is None:
            if rank is None:
                raise ValueError("sparse_transpose needs perm or indices of known "
                                 "rank")
            perm = list(range(rank - 1, -1, -1))
        p = convert_to_tensor(perm, dtype=dtypes.int32, name="perm")
        indices = A.transpose(A.gather(A.transpose(sp.indices), p))
        shape = A.gather(sp.dense_shape, p)
        return sparse_reorder(SparseTensor(indices, sp.values, shape))


def sparse_reset_shape(sp_input, new_shape=None):
    """``sp_input`` with dense shape ``new_shape``, or with the tightest one
    (each dimension one past the largest index) when None."""
    sp = _sparse(sp_input, "sparse_reset_shape")
    if new_shape is None:
        shape = reduce_max(sp.indices, 0) + 1
    else:
        shape = convert_to_tensor(new_shape, dtype=_I64, name="new_shape")
    return SparseTensor(identity(sp.indices), identity(sp.values), shape)


def sparse_merge(sp_ids, sp_values, vocab_size, name=None, already_sorted=False):
    """The ``SparseTensor`` with ``sp_values[..., j]`` at column
    ``sp_ids[..., j]`` of a last dimension of ``vocab_size`` (ids and values of
    one sparsity pattern)."""
    ids = _sparse(sp_ids, "sparse_merge")
    vals = _sparse(sp_values, "sparse_merge")
    with op_scope(name, "SparseMerge", [ids.values, vals.values]):
        size = convert_to_tensor(vocab_size, dtype=_I64, name="vocab_size")
        column = A.expand_dims(cast(ids.values, _I64), 1)
        indices = A.concat([ids.indices[:, :-1], column], 1)
        shape = A.concat([ids.dense_shape[:-1], A.reshape(size, [1])], 0)
        out = SparseTensor(indices, vals.values, shape)
        return out if already_sorted else sparse_reorder(out)


def sparse_to_indicator(sp_input, vocab_size, name=None):
    """A dense bool tensor with a last dimension of ``vocab_size``: true at
    ``[..., id]`` for each id of ``sp_input``'s rows."""
    from nbdist.ops.array_ops_scatter import scatter_nd

    sp = _sparse(sp_input, "sparse_to_indicator")
    with op_scope(name, "SparseToIndicator", [sp.values]):
        size = convert_to_tensor(vocab_size, dtype=_I64, name="vocab_size")
        column = A.expand_dims(cast(sp.values, _I64), 1)
        indices = A.concat([sp.indices[:, :-1], column], 1)
        shape = A.concat([sp.dense_shape[:-1], A.reshape(size, [1])], 0)
        hits = scatter_nd(indices, A.ones_like(sp.values, dtype=dtypes.int32),
                          shape)
        return not_equal(hits, 0)


def sparse_mask(a, mask_indices, name=None):
    """The slices of the ``IndexedSlices`` ``a`` whose index is not in
    ``mask_indices``."""
    from nbdist.ops.array_ops_partition import setdiff1d
    from nbdist.ops.indexed_slices import IndexedSlices

    with op_scope(name, "sparse_mask", [a.indices, mask_indices]):
        kept, positions = setdiff1d(a.indices, mask_indices)
        return IndexedSlices(A.gather(a.values, positions), kept, a.dense_shape)


def sparse_matmul(a, b, transpose_a=False, transpose_b=False, a_is_sparse=False,
                  b_is_sparse=False, name=None):
    """``matmul`` of dense matrices (TF's hints that one is mostly zeros change
    nothing here)."""
    from nbdist.ops.math_ops import matmul

    return matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b, name=name)


def expand_dims(sp_input, axis=None, name=None):
    """``sp_input`` with a dimension of size 1 inserted at ``axis``."""
    sp = _sparse(sp_input, "sparse.expand_dims")
    rank = sp.indices.shape[1] if sp.indices.shape.rank == 2 else None
    if rank is None:
        raise ValueError("sparse.expand_dims needs indices of known rank")
    axis = int(axis or 0)
    if not -rank - 1 <= axis <= rank:
        raise ValueError(f"axis must be in [{-rank - 1}, {rank}], got {axis}")
    axis %= rank + 1
    with op_scope(name, "ExpandDims", [sp.values]):
        zeros = A.zeros_like(sp.indices[:, :1])
        indices = A.concat([sp.indices[:, :axis], zeros, sp.indices[:, axis:]], 1)
        shape = A.concat([sp.dense_shape[:axis], [1], sp.dense_shape[axis:]], 0)
        return SparseTensor(indices, identity(sp.values), shape)


def eye(num_rows, num_columns=None, dtype=dtypes.float32, name=None):
    """The identity matrix as a ``SparseTensor``."""
    from nbdist.ops.math_ops_elementwise import minimum

    with op_scope(name, "eye", [num_rows, num_columns]):
        rows = convert_to_tensor(num_rows, dtype=_I64, name="num_rows")
        cols = rows if num_columns is None else convert_to_tensor(
            num_columns, dtype=_I64, name="num_columns")
        diag = A.range(minimum(rows, cols), dtype=_I64)
        return SparseTensor(A.stack([diag, diag], 1),
                            A.ones_like(diag, dtype=dtype), A.stack([rows, cols]))


def from_dense(tensor, name=None):
    """The non-zero entries of ``tensor`` as a ``SparseTensor``."""
    from nbdist.ops.array_ops_scatter import gather_nd

    with op_scope(name, "dense_to_sparse", [tensor]):
        x = convert_to_tensor(tensor, name="tensor")
        indices = A.where(not_equal(x, A.zeros_like(x)))
        return SparseTensor(indices, gather_nd(x, indices),
                            A.shape(x, out_type=_I64))
