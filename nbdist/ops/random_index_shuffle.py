"""``random_index_shuffle`` (TF's ``RandomIndexShuffle``): where ``index``
lands in a pseudorandom permutation of ``[0, ..., max_index]`` fixed by a
3-word ``seed``, computed one index at a time (no permutation is built), so
``random_index_shuffle(range(n), seed, n - 1)`` is a shuffle of ``range(n)``.

The permutation is TensorFlow's, value for value: a Simon block cipher (Beaulieu
et al., 2013) over the smallest even block of at least 16 bits that holds
``max_index``, with ``rounds`` Feistel rounds keyed by the seed, walked until
the result is at most ``max_index`` (a cycle-walking cipher).

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.random_index_shuffle(nd.range(10, dtype=nd.int64),
...                                    nd.constant([1, 2, 3], nd.int64), 9)).tolist()
[2, 0, 6, 4, 8, 1, 7, 9, 5, 3]
"""

from __future__ import annotations

import math

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape

_INDEX_TYPES = (dtypes.int32, dtypes.int64, dtypes.uint32, dtypes.uint64)
# The Simon key schedule's constants (the z sequence and c), per the paper.
_Z = 0x7369F885192C0EF5
_C = 0xFFFFFFFC


def _rotl(x, r: int, w: int, mask):
    """Rotates the ``w``-bit words ``x`` (ints or uint64 arrays) left by ``r``."""
    return ((x << r) | (x >> (w - r))) & mask


def _round_keys(key, rounds: int, w: int) -> list[int]:
    mask = (1 << w) - 1
    keys = [k & mask for k in key]
    z = _Z & mask
    for i in range(3, rounds):
        prev = keys[i - 1]
        rot3 = _rotl(prev, w - 3, w, mask)  # a right rotation by 3
        rot4 = _rotl(prev, w - 4, w, mask)
        keys.append((_C & mask) ^ (z & 1) ^ keys[i - 3] ^ rot3 ^ rot4)
        z >>= 1
    return keys


def _encrypt(values: np.ndarray, keys: list[int], w: int) -> np.ndarray:
    """The Simon encryption of each ``2w``-bit block of ``values`` (uint64)."""
    mask = np.uint64((1 << w) - 1)
    width = np.uint64(w)

    def rotl(x, r):
        r = np.uint64(r)
        return ((x << r) | (x >> (width - r))) & mask

    def f(x):
        return (rotl(x, 1) & rotl(x, 8)) ^ rotl(x, 2)

    left, right = (values >> width) & mask, values & mask
    for i in range(0, len(keys) - 1, 2):
        left = left ^ f(right) ^ np.uint64(keys[i])
        right = right ^ f(left) ^ np.uint64(keys[i + 1])
    return (left << width) | right


def shuffle_indices(indices, key, max_index: int, rounds: int) -> np.ndarray:
    """Where each of ``indices`` goes in the permutation of ``[0, max_index]``
    that ``key`` (3 uint32 words) picks."""
    indices = np.asarray(indices, dtype=np.uint64)
    if max_index == 0:
        return np.zeros_like(indices)
    bits = math.ceil(math.log2(max_index))
    w = max(bits + bits % 2, 16) // 2
    keys = _round_keys(key, rounds, w)
    out = indices.copy()
    pending = np.arange(out.size)
    # Cycle walking: re-encrypt until inside [0, max_index]; each walk ends,
    # as the cipher permutes its finite block.
    while pending.size:
        out[pending] = _encrypt(out[pending], keys, w)
        pending = pending[out[pending] > np.uint64(max_index)]
    return out


def _infer(c):
    for i, what in ((0, "index"), (2, "max_index")):
        if c.dtype(i) not in _INDEX_TYPES:
            raise TypeError(f"RandomIndexShuffle ({c.name}): {what} must be int32, "
                            f"int64, uint32 or uint64, got {c.dtype(i).name}")
    rounds = c.attr("rounds")
    if rounds < 4 or rounds % 2:
        raise ValueError(f"RandomIndexShuffle ({c.name}): rounds must be an even "
                         f"integer >= 4, got {rounds}")
    idx, seed, top = c.shape(0), c.shape(1), c.shape(2)
    if idx.rank == 0 and seed.rank == 1 and top.rank == 0:
        return [(c.dtype(0), TensorShape([]))]
    n = None
    for s in (idx, top):
        if s.rank == 1 and s.as_list()[0] is not None:
            n = s.as_list()[0]
    if seed.rank == 2 and seed.as_list()[0] is not None:
        n = seed.as_list()[0]
    return [(c.dtype(0), TensorShape([n]))]


register_op("RandomIndexShuffle", _infer,
            attrs={"rounds": ("int", 4), "dtype": ("type", None),
                   "Tseed": ("type", None)}, num_inputs=3)
NotDifferentiable("RandomIndexShuffle")


def random_index_shuffle(index, seed, max_index, rounds=4, name=None):
    """The position of ``index`` (a scalar or vector) in the permutation of
    ``[0, max_index]`` that ``seed`` (shape [3], or [n, 3]) picks."""
    with op_scope(name, "RandomIndexShuffle", [index, seed, max_index]) as (g, scope):
        i = convert_to_tensor(index, name="index")
        s = convert_to_tensor(seed, name="seed")
        m = convert_to_tensor(max_index, dtype=i.dtype.base_dtype, name="max_index")
        return g.create_op("RandomIndexShuffle", [i, s, m],
                           {"rounds": int(rounds), "dtype": i.dtype.base_dtype,
                            "Tseed": s.dtype.base_dtype}, name=scope).outputs[0]


__all__ = ["random_index_shuffle"]
