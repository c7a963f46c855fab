"""Kernels of the sparse ops (``SparseToDense``, ``SparseTensorDenseMatMul``,
``SparseReduceSum``, ``SparseConcat``) and ``Unique``, as TF's CPU kernels."""

from __future__ import annotations

from itertools import pairwise

import numpy as np

import nbdist.ops.sparse_ops  # noqa: F401  (registers the op definitions)
from nbdist import errors
from nbdist.executor.kernel import register_kernel


def _invalid(node, msg):
    return errors.InvalidArgumentError(None, node.name, msg)


def _check_indices(node, indices, shape, what="indices"):
    """Raises unless ``indices`` ([N, rank]) lie within ``shape``."""
    if indices.ndim != 2 or indices.shape[1] != len(shape):
        raise _invalid(node, f"{what} must be a [N, {len(shape)}] matrix, got "
                       f"shape {list(indices.shape)}")
    if indices.size:
        bad = (indices < 0) | (indices >= np.asarray(shape, np.int64))
        if bad.any():
            row = int(np.argwhere(bad.any(axis=1))[0, 0])
            raise _invalid(node, f"{what}[{row}] = {indices[row].tolist()} is out of "
                           f"bounds: need 0 <= index < {list(shape)}")


@register_kernel("Unique")
def unique_kernel(node):
    out_idx = node.attrs["out_idx"].as_numpy_dtype

    def compute(step, x):
        x = np.asarray(x)
        if x.ndim != 1:
            raise _invalid(node, f"unique expects a 1D vector, got shape "
                           f"{list(x.shape)}")
        # np.unique sorts; TF keeps the order of first appearance.
        _, first, inverse = np.unique(x, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank_of = np.empty_like(order)
        rank_of[order] = np.arange(order.size)
        return x[first[order]], rank_of[inverse.reshape(-1)].astype(out_idx)

    return compute


_FEW = 64  # indices checked in Python below this: NumPy's per-call cost is more


def _raise_first_bad(node, idx, shape, validate):
    """TF's error for the first index, in order, that is out of bounds or (with
    ``validate``) not after the one before it."""
    def fmt(ints):
        return f"[{','.join(map(str, ints))}]"

    prev = None
    for i, index in enumerate(idx.tolist()):
        if not all(0 <= v < d for v, d in zip(index, shape)):
            if not validate:
                raise _invalid(node, "Indices are not valid (out of bounds).  "
                               f"Shape: {fmt(shape)}")
            raise _invalid(node, f"indices[{i}] = {fmt(index)} is out of bounds: "
                           f"need 0 <= index < {fmt(shape)}")
        if validate and prev is not None and index <= prev:
            why = "is repeated" if index == prev else (
                "is out of order. Many sparse ops require sorted indices.")
            raise _invalid(node, f"indices[{i}] = {fmt(index)} {why}")
        prev = index


@register_kernel("SparseToDense")
def sparse_to_dense_kernel(node):
    validate = node.attrs.get("validate_indices", True)

    def compute(step, indices, output_shape, values, default):
        shape = tuple(np.asarray(output_shape, np.int64).reshape(-1).tolist())
        idx = np.asarray(indices, dtype=np.int64)
        if idx.ndim < 2:
            idx = idx.reshape(-1, 1)
        if idx.ndim != 2 or idx.shape[1] != len(shape):
            raise _invalid(node, f"sparse_indices must be a [N, {len(shape)}] "
                           f"matrix, got shape {list(idx.shape)}")
        n = idx.shape[0]
        values = np.asarray(values)
        if values.ndim not in (0, 1) or (values.ndim == 1 and values.size != n):
            raise _invalid(node, f"sparse_values has incorrect shape "
                           f"{list(values.shape)}, should be [] or [{n}]")
        out = np.empty(shape, dtype=values.dtype)
        out.fill(default)
        if not n:
            return out
        if n <= _FEW:  # one record's features: a Python pass over a few rows
            rows = idx.tolist()
            good = (all(0 <= v < d for row in rows for v, d in zip(row, shape))
                    and (not validate or all(a < b for a, b in pairwise(rows))))
        else:
            good = not ((idx < 0) | (idx >= np.asarray(shape, np.int64))).any()
        if good:
            if len(shape) == 1:
                flat = idx.reshape(-1)
            else:
                flat = np.ravel_multi_index(tuple(idx.T), shape) if shape else (
                    np.zeros(n, np.int64))
            if validate and n > _FEW:  # row-major order: flat indices ascend
                good = bool((flat[1:] > flat[:-1]).all())
        if not good:
            _raise_first_bad(node, idx, shape, validate)
        out.reshape(-1)[flat] = values
        return out

    return compute


@register_kernel("SparseTensorDenseMatMul")
def sparse_matmul_kernel(node):
    adj_a, adj_b = node.attrs["adjoint_a"], node.attrs["adjoint_b"]

    def compute(step, indices, values, a_shape, b):
        shape = tuple(int(d) for d in np.ravel(a_shape))
        if len(shape) != 2:
            raise _invalid(node, f"Tensor 'a_shape' is not a vector of 2 elements: "
                           f"{list(shape)}")
        idx = np.asarray(indices, dtype=np.int64)
        _check_indices(node, idx, shape, "a_indices")
        b = np.asarray(b)
        if b.ndim != 2:
            raise _invalid(node, f"b must be a matrix, got shape {list(b.shape)}")
        bm = b.T if adj_b else b
        rows, cols = (idx[:, 1], idx[:, 0]) if adj_a else (idx[:, 0], idx[:, 1])
        out_rows, inner = (shape[1], shape[0]) if adj_a else shape
        if bm.shape[0] != inner:
            raise _invalid(node, f"Cannot multiply A and B because inner dimension "
                           f"does not match: {inner} vs. {bm.shape[0]}. Did you "
                           "forget a transpose? Dimensions of A: "
                           f"[{shape[0]}, {shape[1]}). Dimensions of B: "
                           f"{list(b.shape)}")
        out = np.zeros((out_rows, bm.shape[1]), dtype=b.dtype)
        np.add.at(out, rows, values[:, None] * bm[cols])
        return out

    return compute


@register_kernel("SparseReduceSum")
def sparse_reduce_sum_kernel(node):
    keep_dims = node.attrs["keep_dims"]

    def compute(step, indices, values, shape, axes):
        shape = tuple(int(d) for d in np.ravel(shape))
        rank = len(shape)
        idx = np.asarray(indices, dtype=np.int64)
        _check_indices(node, idx, shape, "input_indices")
        axes = np.ravel(axes).astype(np.int64)
        if axes.size and ((axes < -rank) | (axes >= rank)).any():
            raise _invalid(node, f"Invalid reduction dimension {axes.tolist()} for "
                           f"input with {rank} dimensions")
        reduced = {int(a) % rank for a in axes} if axes.size else set(range(rank))
        kept = [i for i in range(rank) if i not in reduced]
        out_shape = tuple(shape[i] for i in kept)
        out = np.zeros(out_shape, dtype=np.asarray(values).dtype)
        if kept:
            np.add.at(out, tuple(idx[:, i] for i in kept), values)
        else:
            out = np.asarray(np.sum(values), dtype=out.dtype)
        if keep_dims:
            out = out.reshape([1 if i in reduced else shape[i] for i in range(rank)])
        return out

    return compute


@register_kernel("SparseConcat")
def sparse_concat_kernel(node):
    n = node.attrs["N"]
    axis = node.attrs["concat_dim"]

    def compute(step, *args):
        inds = [np.asarray(a, np.int64) for a in args[:n]]
        vals = [np.asarray(a) for a in args[n:2 * n]]
        shapes = [tuple(int(d) for d in np.ravel(s)) for s in args[2 * n:]]
        rank = len(shapes[0])
        if not -rank <= axis < rank:
            raise _invalid(node, f"Concat dimension must be in range [{-rank}, "
                           f"{rank}), got {axis}")
        ax = axis % rank
        for i, s in enumerate(shapes):
            if len(s) != rank:
                raise _invalid(node, f"Ranks of all input tensors must match: "
                               f"shapes[0] = {list(shapes[0])} vs. shapes[{i}] = "
                               f"{list(s)}")
            for d in range(rank):
                if d != ax and s[d] != shapes[0][d]:
                    raise _invalid(node, f"Input shapes must match: shapes[0] = "
                                   f"{list(shapes[0])} vs. shapes[{i}] = {list(s)}")
            _check_indices(node, inds[i], s, f"indices[{i}]")
        offsets = np.cumsum([0] + [s[ax] for s in shapes[:-1]])
        moved = []
        for ind, off in zip(inds, offsets):
            ind = ind.copy()
            ind[:, ax] += off
            moved.append(ind)
        out_ind = np.concatenate(moved).reshape(-1, rank)
        out_val = np.concatenate(vals)
        out_shape = list(shapes[0])
        out_shape[ax] = int(sum(s[ax] for s in shapes))
        # Row-major order, as TF's output (the inputs are each in order).
        order = np.lexsort(out_ind.T[::-1]) if out_ind.size else np.arange(0)
        return (out_ind[order], out_val[order],
                np.asarray(out_shape, dtype=np.int64))

    return compute
