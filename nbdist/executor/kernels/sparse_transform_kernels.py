"""NumPy kernels of ``nbdist.ops.sparse_ops_transform``: reorder, reshape,
slice, split, fill empty rows, softmax, add, maximum/minimum and the max/sum
reductions of ``SparseTensor`` s (indices int64 ``[N, rank]``)."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, ints, op_error, scalar_int
from nbdist.ops import sparse_ops_transform  # noqa: F401  (registers the ops)


def _parts(node, indices, values, shape):
    ind = np.asarray(indices, np.int64)
    dims = ints(shape)
    vals = np.asarray(values)
    if ind.ndim != 2 or ind.shape[1] != len(dims):
        raise op_error(node, f"indices must be a [N, {len(dims)}] matrix, got "
                             f"{fmt(ind.shape)}")
    if vals.shape != (ind.shape[0],):
        raise op_error(node, f"values must be a vector of {ind.shape[0]} entries, "
                             f"got {fmt(vals.shape)}")
    return ind, vals, dims


def _row_major(ind):
    """The permutation putting the index rows in row-major order."""
    if ind.shape[0] == 0 or ind.shape[1] == 0:
        return np.arange(ind.shape[0])
    return np.lexsort(ind.T[::-1])


@register_kernel("SparseReorder")
def reorder_kernel(node):
    def compute(step, indices, values, shape):
        ind, vals, _ = _parts(node, indices, values, shape)
        order = _row_major(ind)
        return ind[order], vals[order]

    return compute


@register_kernel("SparseReshape")
def reshape_kernel(node):
    def compute(step, indices, shape, new_shape):
        ind = np.asarray(indices, np.int64)
        dims, new = ints(shape), ints(new_shape)
        size = int(np.prod(dims))
        unknown = [i for i, d in enumerate(new) if d == -1]
        if len(unknown) > 1:
            raise op_error(node, f"only one output dimension may be -1, not both "
                                 f"{unknown[0]} and {unknown[1]}")
        known = int(np.prod([d for d in new if d != -1]))
        if unknown:
            if known == 0 or size % known:
                raise op_error(node, f"Input to reshape is a SparseTensor with "
                                     f"{size} dense values, but the requested "
                                     f"shape requires a multiple of {known}")
            new[unknown[0]] = size // known
        if int(np.prod(new)) != size:
            raise op_error(node, f"Input to reshape is a tensor with {size} dense "
                                 f"values, but the requested shape has "
                                 f"{int(np.prod(new))}")
        flat = np.ravel_multi_index(ind.T, dims) if ind.size else np.zeros(
            ind.shape[0], np.int64)
        out = np.stack(np.unravel_index(flat, new), axis=1) if new else np.zeros(
            (ind.shape[0], 0), np.int64)
        return out.astype(np.int64).reshape(ind.shape[0], len(new)), np.asarray(
            new, np.int64)

    return compute


@register_kernel("SparseSlice")
def slice_kernel(node):
    def compute(step, indices, values, shape, start, size):
        ind, vals, dims = _parts(node, indices, values, shape)
        st, sz = np.asarray(ints(start)), np.asarray(ints(size))
        if st.size != len(dims) or sz.size != len(dims):
            raise op_error(node, f"Expected start and size of length {len(dims)}")
        end = np.minimum(st + sz, dims)
        keep = np.all((ind >= st) & (ind < end), axis=1)
        out_shape = np.maximum(0, end - np.minimum(st, dims))
        if not keep.any():
            out_shape = np.zeros(len(dims), np.int64) if (st >= dims).any() else (
                out_shape)
        return ind[keep] - st, vals[keep], out_shape.astype(np.int64)

    return compute


@register_kernel("SparseSplit")
def split_kernel(node):
    n = node.attrs["num_split"]

    def compute(step, split_dim, indices, values, shape):
        ind, vals, dims = _parts(node, indices, values, shape)
        axis = scalar_int(node, split_dim, "split_dim")
        if not -len(dims) <= axis < len(dims):
            raise op_error(node, f"split_dim must be in [{-len(dims)}, {len(dims)}),"
                                 f" got {axis}")
        axis %= len(dims)
        size = dims[axis]
        if n > size:
            raise op_error(node, f"num_split must be in the interval (0, {size}]")
        sizes = [size // n + (1 if i < size % n else 0) for i in range(n)]
        bounds = np.cumsum([0] + sizes)
        order = _row_major(ind)
        ind, vals = ind[order], vals[order]
        out_ind, out_val, out_shape = [], [], []
        for i in range(n):
            keep = (ind[:, axis] >= bounds[i]) & (ind[:, axis] < bounds[i + 1])
            part = ind[keep].copy()
            part[:, axis] -= bounds[i]
            out_ind.append(part)
            out_val.append(vals[keep])
            d = list(dims)
            d[axis] = sizes[i]
            out_shape.append(np.asarray(d, np.int64))
        return tuple(out_ind + out_val + out_shape)

    return compute


@register_kernel("SparseFillEmptyRows")
def fill_empty_rows_kernel(node):
    def compute(step, indices, values, shape, default_value):
        ind, vals, dims = _parts(node, indices, values, shape)
        if not dims:
            raise op_error(node, "dense_shape must be at least a vector")
        rows = dims[0]
        if ind.size and (ind[:, 0].min() < 0 or ind[:, 0].max() >= rows):
            raise op_error(node, f"indices row out of range [0, {rows})")
        empty = np.ones(rows, bool)
        empty[ind[:, 0]] = False
        fill = np.zeros((int(empty.sum()), len(dims)), np.int64)
        fill[:, 0] = np.flatnonzero(empty)
        all_ind = np.concatenate([ind, fill])
        all_val = np.concatenate([vals, np.full(fill.shape[0], default_value,
                                                vals.dtype)])
        order = np.argsort(all_ind[:, 0], kind="stable")
        where = np.empty_like(order)
        where[order] = np.arange(order.size)
        return (all_ind[order], all_val[order], empty,
                where[:ind.shape[0]].astype(np.int64))

    return compute


def _groups(ind, keep_axes):
    """For each entry, the id of its group (entries equal on ``keep_axes``), and
    the key of each group."""
    keys = ind[:, keep_axes]
    if keys.shape[1] == 0:
        return np.zeros(ind.shape[0], np.int64), np.zeros((1, 0), np.int64)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    return inverse.ravel(), uniq


@register_kernel("SparseSoftmax")
def softmax_kernel(node):
    def compute(step, indices, values, shape):
        ind, vals, dims = _parts(node, indices, values, shape)
        if len(dims) < 2:
            raise op_error(node, f"input must be at least a matrix, got rank "
                                 f"{len(dims)}")
        group, _ = _groups(ind, list(range(len(dims) - 1)))
        out = np.empty_like(vals)
        for gid in np.unique(group):
            at = group == gid
            e = np.exp(vals[at] - vals[at].max())
            out[at] = e / e.sum()
        return out

    return compute


def _union(node, a, b):
    """The sorted union of the index rows of two sparse tensors, and each one's
    values at it (0 where it has no entry)."""
    (ai, av, ad), (bi, bv, bd) = a, b
    if ad != bd:
        raise op_error(node, f"Operands' shapes do not match: {fmt(ad)} vs. "
                             f"{fmt(bd)}")
    both = np.concatenate([ai, bi])
    keys, inverse = np.unique(both, axis=0, return_inverse=True) if both.size else (
        np.zeros((0, len(ad)), np.int64), np.zeros(0, np.int64))
    inverse = inverse.ravel()
    va = np.zeros(keys.shape[0], av.dtype)
    vb = np.zeros(keys.shape[0], av.dtype)
    np.add.at(va, inverse[:ai.shape[0]], av)
    np.add.at(vb, inverse[ai.shape[0]:], bv.astype(av.dtype))
    return keys, va, vb


@register_kernel("SparseAdd")
def add_kernel(node):
    def compute(step, a_ind, a_val, a_shape, b_ind, b_val, b_shape, thresh):
        a = _parts(node, a_ind, a_val, a_shape)
        b = _parts(node, b_ind, b_val, b_shape)
        keys, va, vb = _union(node, a, b)
        total = va + vb
        keep = np.abs(total) >= float(np.asarray(thresh))
        return keys[keep], total[keep], np.asarray(a[2], np.int64)

    return compute


def _extremum(fn):
    def factory(node):
        def compute(step, a_ind, a_val, a_shape, b_ind, b_val, b_shape):
            a = _parts(node, a_ind, a_val, a_shape)
            b = _parts(node, b_ind, b_val, b_shape)
            keys, va, vb = _union(node, a, b)
            return keys, fn(va, vb)

        return compute

    return factory


register_kernel("SparseSparseMaximum")(_extremum(np.maximum))
register_kernel("SparseSparseMinimum")(_extremum(np.minimum))


def _reduce_groups(node, indices, values, shape, axes, ufunc):
    ind, vals, dims = _parts(node, indices, values, shape)
    rank = len(dims)
    ax = ints(axes)
    for a in ax:
        if not -rank <= a < rank:
            raise op_error(node, f"Invalid reduction dimension {a}, for input with "
                                 f"{rank} dimensions.")
    reduced = {a % rank for a in ax} if ax else set(range(rank))
    kept = [i for i in range(rank) if i not in reduced]
    group, keys = _groups(ind, kept)
    n_groups = keys.shape[0] if ind.shape[0] else 0
    if ufunc is np.add:
        out = np.zeros(n_groups, vals.dtype)
    else:
        low = -np.inf if vals.dtype.kind == "f" else np.iinfo(vals.dtype).min
        out = np.full(n_groups, low, vals.dtype)
    ufunc.at(out, group, vals)
    return out, keys[:n_groups], dims, kept, reduced


def _reduce_dense(node, keep_dims):
    def compute(step, indices, values, shape, axes):
        vals, keys, dims, kept, reduced = _reduce_groups(
            node, indices, values, shape, axes, np.maximum)
        out = np.zeros([dims[i] for i in kept], vals.dtype)
        if kept and keys.shape[0]:
            out[tuple(keys.T)] = vals
        elif vals.size:
            out[()] = vals[0]
        if keep_dims:
            out = out.reshape([1 if i in reduced else d for i, d in enumerate(dims)])
        return out

    return compute


@register_kernel("SparseReduceMax")
def reduce_max_kernel(node):
    return _reduce_dense(node, node.attrs["keep_dims"])


def _reduce_sparse(ufunc):
    def factory(node):
        keep_dims = node.attrs["keep_dims"]

        def compute(step, indices, values, shape, axes):
            vals, keys, dims, kept, reduced = _reduce_groups(
                node, indices, values, shape, axes, ufunc)
            if keep_dims:
                full = np.zeros((keys.shape[0], len(dims)), np.int64)
                full[:, kept] = keys
                out_dims = [1 if i in reduced else d for i, d in enumerate(dims)]
                return full, vals, np.asarray(out_dims, np.int64)
            return (keys.astype(np.int64), vals,
                    np.asarray([dims[i] for i in kept], np.int64))

        return compute

    return factory


register_kernel("SparseReduceMaxSparse")(_reduce_sparse(np.maximum))
register_kernel("SparseReduceSumSparse")(_reduce_sparse(np.add))
