"""Kernel of ``RandomIndexShuffle`` (``nbdist.ops.random_index_shuffle``)."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import op_error
from nbdist.ops.random_index_shuffle import shuffle_indices


@register_kernel("RandomIndexShuffle")
def random_index_shuffle_kernel(node):
    rounds = node.attrs["rounds"]

    def compute(step, index, seed, max_index):
        index, seed, top = np.asarray(index), np.asarray(seed), np.asarray(max_index)
        n = max(index.size, top.size, seed.size // 3)
        if not (index.ndim == 0 or (index.ndim == 1 and index.size == n)):
            raise op_error(node, "Index bust be a scalar or vector.")
        if not (seed.shape == (3,) or seed.shape == (n, 3)):
            raise op_error(node, f"Seed must be a vector of size [3] or a matrix of "
                                 f"size [{n}, 3] but got {list(seed.shape)}.")
        if not (top.ndim == 0 or (top.ndim == 1 and top.size == n)):
            raise op_error(node, "Maxval must be a scalar or a vector of the same "
                                 f"size as index but got {list(top.shape)}")
        # Each seed word is taken as a uint32 (the low 32 bits), as TF.
        keys = [tuple(k) for k in
                (seed.reshape(-1, 3).astype(np.int64) & 0xFFFFFFFF).tolist()]
        wide = np.uint64 if index.dtype.kind == "u" else np.int64
        idx = np.broadcast_to(index.astype(wide), (n,))
        tops = np.broadcast_to(top.astype(wide), (n,))
        if (idx < 0).any() or (tops < 0).any():
            what, bad = (("index", idx) if (idx < 0).any() else ("max_index", tops))
            raise op_error(node, f"{what} must be >= 0 but was {bad[bad < 0][0]}")
        if (tops < idx).any():
            j = int(np.argmax(tops < idx))
            raise op_error(node, f"max_index must be >= index, but {tops[j]} < "
                                 f"{idx[j]}")
        rows = np.broadcast_to(np.arange(len(keys)) if len(keys) > 1 else 0, (n,))
        out = np.empty(n, dtype=index.dtype)
        # One vectorised walk per (seed, max_index) the elements share.
        groups: dict = {}
        for j in range(n):
            groups.setdefault((int(rows[j]), int(tops[j])), []).append(j)
        for (row, m), members in groups.items():
            out[members] = shuffle_indices(idx[members], keys[row], m, rounds)
        all_scalar = index.ndim == 0 and seed.ndim == 1 and top.ndim == 0
        return out.reshape(()) if all_scalar else out

    return compute
