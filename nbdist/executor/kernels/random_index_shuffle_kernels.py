"""Kernel of ``RandomIndexShuffle`` (``nbdist.ops.random_index_shuffle``)."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import op_error
from nbdist.ops.random_index_shuffle import shuffle_index


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
        keys = (seed.reshape(-1, 3).astype(np.int64) & 0xFFFFFFFF).tolist()
        out = np.empty(n, dtype=index.dtype)
        for j in range(n):
            i = int(index if index.ndim == 0 else index[j])
            m = int(top if top.ndim == 0 else top[j])
            if i < 0 or m < 0:
                raise op_error(node, f"{'index' if i < 0 else 'max_index'} must be "
                                     f">= 0 but was {min(i, m)}")
            if m < i:
                raise op_error(node, f"max_index must be >= index, but {m} < {i}")
            out[j] = shuffle_index(i, keys[0 if len(keys) == 1 else j], m, rounds)
        all_scalar = index.ndim == 0 and seed.ndim == 1 and top.ndim == 0
        return out.reshape(()) if all_scalar else out

    return compute
