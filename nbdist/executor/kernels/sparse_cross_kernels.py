"""NumPy kernels of ``nbdist.ops.sparse_ops_cross``: ``SparseCross`` and
``SparseBincount``."""

from __future__ import annotations

import itertools

import farmhash
import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import ints, op_error
from nbdist.ops import sparse_ops_cross  # noqa: F401  (registers the ops)

_MASK = (1 << 64) - 1
_MUL = 0xC6A4A7935BD1E995  # the multiplier of TF's FingerprintCat64


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def fingerprint_cat64(fp1: int, fp2: int) -> int:
    """TF's combination of two 64-bit fingerprints (``FingerprintCat64``)."""
    result = fp1 ^ _MUL
    result ^= (_shift_mix((fp2 * _MUL) & _MASK) * _MUL) & _MASK
    result = (result * _MUL) & _MASK
    result = (_shift_mix(result) * _MUL) & _MASK
    return _shift_mix(result)


def _as_text(v) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode() if not isinstance(
        v, str) else v.encode()


def _feature_hash(v) -> int:
    if isinstance(v, (bytes, str)):
        return farmhash.fingerprint64(_as_text(v))
    return int(v) & _MASK


@register_kernel("SparseCross")
def sparse_cross_kernel(node):
    n = node.attrs["N"]
    hashed = node.attrs["hashed_output"]
    buckets, key = node.attrs["num_buckets"], node.attrs["hash_key"] & _MASK

    def compute(step, *args):
        ind, val, shp = args[:n], args[n:2 * n], args[2 * n:3 * n]
        dense = [np.asarray(d) for d in args[3 * n:]]
        sizes = [ints(s)[0] for s in shp] + [d.shape[0] for d in dense]
        if len(set(sizes)) > 1:
            raise op_error(node, f"Expected batch size {sizes[0]}, got {sizes}")
        batch = sizes[0] if sizes else 0
        columns = []
        for i, v in zip(ind, val):
            i, v = np.asarray(i), np.asarray(v)
            columns.append([list(v[i[:, 0] == b]) for b in range(batch)])
        for d in dense:
            columns.append([list(d[b].ravel()) for b in range(batch)])
        out_ind, out_val, width = [], [], 0
        for b in range(batch):
            combos = list(itertools.product(*[col[b] for col in columns]))
            width = max(width, len(combos))
            for k, combo in enumerate(combos):
                out_ind.append([b, k])
                if hashed:
                    h = key
                    for f in combo:
                        h = fingerprint_cat64(h, _feature_hash(f))
                    out_val.append(h % buckets if buckets > 0 else h % (2**63 - 1))
                else:
                    out_val.append(b"_X_".join(_as_text(f) for f in combo))
        values = np.array(out_val, np.int64 if hashed else object)
        if not hashed and values.size == 0:
            values = np.zeros(0, object)
        return (np.array(out_ind, np.int64).reshape(-1, 2), values,
                np.array([batch, width], np.int64))

    return compute


@register_kernel("SparseBincount")
def sparse_bincount_kernel(node):
    a = node.attrs
    axis, binary = a["axis"], a["binary_output"]
    minlength, maxlength = a["minlength"], a["maxlength"]

    def compute(step, indices, values, dense_shape, weights):
        ind, vals = np.asarray(indices), np.asarray(values)
        w = np.asarray(weights) if a["has_weights"] else None
        if vals.size and vals.min() < 0:
            raise op_error(node, "Input values must all be non-negative")
        keep = vals < maxlength if maxlength >= 0 else np.ones(vals.shape, bool)
        vals, ind = vals[keep], ind[keep]
        w = None if w is None else w[keep]
        size = int(vals.max()) + 1 if vals.size else 0
        size = max(size, minlength) if minlength >= 0 else size
        if maxlength >= 0:
            size = min(size, maxlength)
        rows = ind[:, 0] if axis == -1 and ind.shape[1] > 1 else np.zeros(
            vals.shape, np.int64)
        n_rows = ints(dense_shape)[0] if axis == -1 and ind.shape[1] > 1 else None
        counts: dict = {}
        for k, (r, v) in enumerate(zip(rows.tolist(), vals.tolist())):
            add = 1 if w is None else w[k]
            counts[(r, v)] = add if binary else counts.get((r, v), 0) + add
        keys = sorted(counts)
        dtype = vals.dtype if w is None else w.dtype
        out_vals = np.array([counts[k] for k in keys], dtype)
        if n_rows is None:
            return (np.array([[v] for _, v in keys], np.int64).reshape(-1, 1),
                    out_vals, np.array([size], np.int64))
        return (np.array(keys, np.int64).reshape(-1, 2), out_vals,
                np.array([n_rows, size], np.int64))

    return compute
