"""Kernels for ``Bucketize`` and ``SparseCross`` (hashed), the transforms of
TF's feature columns. The cross hashes as TF's ``sparse_cross_op.cc``: a
string's Farmhash Fingerprint64 (an int64 is its own hash), chained from
``hash_key`` with ``FingerprintCat64``; combinations in row-major order
(the last input varies fastest), sparse inputs before dense ones.
"""

from __future__ import annotations

import itertools

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel

_MASK = (1 << 64) - 1
_MUL = 0xC6A4A7935BD1E995  # TF's hash.h FingerprintCat64 multiplier
_INT64_MAX = (1 << 63) - 1


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def fingerprint_cat64(fp1: int, fp2: int) -> int:
    """TF's ``FingerprintCat64`` on unsigned 64-bit ints."""
    result = fp1 ^ _MUL
    result ^= (_shift_mix((fp2 * _MUL) & _MASK) * _MUL) & _MASK
    result = (result * _MUL) & _MASK
    result = (_shift_mix(result) * _MUL) & _MASK
    return _shift_mix(result)


def _fingerprint_cat64_arrays(fp1, fp2):
    """``fingerprint_cat64`` of uint64 arrays, element by element (numpy's
    uint64 array arithmetic wraps modulo 2**64 as C's does)."""
    mul, shift = np.uint64(_MUL), np.uint64(47)
    result = fp1 ^ mul
    t = fp2 * mul
    result ^= (t ^ (t >> shift)) * mul
    result = result * mul
    result = (result ^ (result >> shift)) * mul
    return result ^ (result >> shift)


def _one_per_row(columns, batch, key, buckets):
    """The cross when every input has one value per row: one id per row,
    computed on whole columns."""
    h = np.full(batch, key, dtype=np.uint64)
    for c in columns:
        h = _fingerprint_cat64_arrays(h, np.array([row[0] for row in c],
                                                  dtype=np.uint64))
    out = h % np.uint64(buckets if buckets > 0 else _INT64_MAX)
    return (np.stack([np.arange(batch), np.zeros(batch, np.int64)], 1),
            out.astype(np.int64), np.asarray([batch, 1 if batch else 0], np.int64))


@register_kernel("Bucketize")
def bucketize_kernel(node):
    boundaries = np.asarray(node.attrs["boundaries"], dtype=np.float64)

    def compute(step, x):
        x = np.asarray(x)
        return np.searchsorted(boundaries, x, side="right").astype(np.int32)

    return compute


def _hashes(values) -> list[int]:
    import farmhash  # pyfarmhash: Google's Farmhash, TF's Fingerprint64

    if values.dtype == object or values.dtype.kind in "SU":
        return [farmhash.fingerprint64(v if isinstance(v, bytes) else str(v).encode())
                for v in values]
    return [int(v) & _MASK for v in values]


def _rows_of_sparse(node, indices, values, shape, batch):
    rows = [[] for _ in range(batch)]
    hashed = _hashes(np.asarray(values).reshape(-1))
    for (r, *_), h in zip(np.asarray(indices).reshape(-1, 2).tolist(), hashed):
        if not 0 <= r < batch:
            raise errors.InvalidArgumentError(
                None, node.name, f"Invalid row index {r} for batch size {batch}")
        rows[r].append(h)
    return rows


@register_kernel("SparseCross")
def sparse_cross_kernel(node):
    n = node.attrs["N"]
    buckets = node.attrs["num_buckets"]
    key = node.attrs["hash_key"] & _MASK

    def compute(step, *args):
        indices, values, shapes = args[:n], args[n:2 * n], args[2 * n:3 * n]
        dense = [np.asarray(d) for d in args[3 * n:]]
        batches = {int(np.asarray(s)[0]) for s in shapes} | {d.shape[0] for d in dense}
        if len(batches) != 1:
            raise errors.InvalidArgumentError(
                None, node.name, f"Expected batch size {sorted(batches)[0]} got "
                f"{sorted(batches)[-1]}")
        batch = batches.pop()
        columns = [_rows_of_sparse(node, i, v, s, batch)
                   for i, v, s in zip(indices, values, shapes)]
        columns += [[_hashes(row) for row in d] for d in dense]
        if batch and all(len(row) == 1 for c in columns for row in c):
            return _one_per_row(columns, batch, key, buckets)
        out_idx, out_val = [], []
        width = 0
        for r in range(batch):
            crosses = itertools.product(*(c[r] for c in columns))
            for j, combo in enumerate(crosses):
                h = key
                for v in combo:
                    h = fingerprint_cat64(h, v)
                out_idx.append((r, j))
                out_val.append(h % buckets if buckets > 0 else h % _INT64_MAX)
                width = max(width, j + 1)
        return (np.asarray(out_idx, np.int64).reshape(-1, 2),
                np.asarray(out_val, dtype=np.uint64).astype(np.int64),
                np.asarray([batch, width], np.int64))

    return compute
