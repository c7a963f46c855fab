"""NumPy kernels of ``nbdist.ops.array_ops_sequence``: ``ReverseSequence``,
``Roll``, ``LinSpace``, ``BroadcastArgs``, ``UnravelIndex`` and
``EditDistance``."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, ints, op_error, scalar_int
from nbdist.ops import array_ops_sequence  # noqa: F401  (registers the ops)


@register_kernel("ReverseSequence")
def reverse_sequence_kernel(node):
    seq, batch = node.attrs["seq_dim"], node.attrs["batch_dim"]

    def compute(step, x, seq_lengths):
        x = np.asarray(x)
        lens = ints(seq_lengths)
        if max(seq, batch) >= x.ndim:
            raise op_error(node, f"seq_dim and batch_dim must be < input rank "
                                 f"{x.ndim}")
        if len(lens) != x.shape[batch]:
            raise op_error(node, f"Length of seq_lengths != input.dims({batch}), "
                                 f"({len(lens)} vs. {x.shape[batch]})")
        out = np.array(x, copy=True)
        for b, n in enumerate(lens):
            if n < 0:
                raise op_error(node, f"seq_lens({b}) < 0")
            if n > x.shape[seq]:
                raise op_error(node, f"seq_lens({b}) > input.dims({seq})")
            at = [slice(None)] * x.ndim
            at[batch] = b
            at[seq] = slice(0, n)
            rev = list(at)
            rev[seq] = slice(n - 1, None, -1) if n else slice(0, 0)
            out[tuple(at)] = x[tuple(rev)]
        return out

    return compute


@register_kernel("Roll")
def roll_kernel(node):
    def compute(step, x, shift, axis):
        x = np.asarray(x)
        shifts, axes = ints(shift), ints(axis)
        if len(shifts) != len(axes):
            raise op_error(node, f"shift and axis must have the same size, got "
                                 f"{len(shifts)} and {len(axes)}")
        for a in axes:
            if not -x.ndim <= a < x.ndim:
                raise op_error(node, f"axis {a} is out of range for a rank "
                                     f"{x.ndim} input")
        return np.roll(x, shifts, axes) if axes else np.array(x, copy=True)

    return compute


@register_kernel("LinSpace")
def linspace_kernel(node):
    def compute(step, start, stop, num):
        n = scalar_int(node, num, "num")
        if n <= 0:
            raise op_error(node, f"Requires num > 0: {n}")
        dtype = np.asarray(start).dtype
        if n == 1:
            return np.array([start], dtype)
        # As TF: start + i * step, with the last value exactly stop.
        step_ = (np.float64(stop) - np.float64(start)) / (n - 1)
        out = np.float64(start) + np.arange(n) * step_
        out[-1] = stop
        return out.astype(dtype)

    return compute


@register_kernel("BroadcastArgs")
def broadcast_args_kernel(node):
    def compute(step, s0, s1):
        a, b = ints(s0), ints(s1)
        try:
            out = np.broadcast_shapes(tuple(a), tuple(b))
        except ValueError:
            raise op_error(node, f"Incompatible shapes: {fmt(a)} vs. "
                                 f"{fmt(b)}") from None
        return np.asarray(out, np.asarray(s0).dtype)

    return compute


@register_kernel("UnravelIndex")
def unravel_index_kernel(node):
    def compute(step, indices, dims):
        idx, shape = np.asarray(indices), tuple(ints(dims))
        if any(d <= 0 for d in shape):
            raise op_error(node, f"All dimensions must be positive, got {fmt(shape)}")
        size = int(np.prod(shape))
        if idx.size and (idx.min() < 0 or idx.max() >= size):
            raise op_error(node, f"index out of range: the indices must be in "
                                 f"[0, {size})")
        out = np.asarray(np.unravel_index(idx, shape))
        return out.astype(idx.dtype)

    return compute


def _levenshtein(a, b) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def _sequences(node, indices, values, shape, what):
    """Each sequence of a SparseTensor (the last dimension), by its outer index."""
    ind = np.asarray(indices).reshape(-1, len(ints(shape)))
    if ind.shape[0] != np.size(values):
        raise op_error(node, f"{what}_indices has {ind.shape[0]} rows but "
                             f"{what}_values has {np.size(values)} values")
    groups: dict = {}
    order = np.lexsort(ind.T[::-1]) if ind.size else np.arange(0)
    for k in order:
        groups.setdefault(tuple(ind[k, :-1].tolist()), []).append(
            np.ravel(values)[k])
    return groups


@register_kernel("EditDistance")
def edit_distance_kernel(node):
    normalize = node.attrs["normalize"]

    def compute(step, h_ind, h_val, h_shape, t_ind, t_val, t_shape):
        hs, ts = ints(h_shape), ints(t_shape)
        if len(hs) != len(ts):
            raise op_error(node, f"hypothesis and truth must have one rank, got "
                                 f"{len(hs)} and {len(ts)}")
        hyp = _sequences(node, h_ind, h_val, hs, "hypothesis")
        truth = _sequences(node, t_ind, t_val, ts, "truth")
        out_shape = tuple(max(a, b) for a, b in zip(hs[:-1], ts[:-1]))
        out = np.zeros(out_shape, np.float32)
        for at in np.ndindex(*out_shape):
            h, t = hyp.get(at, []), truth.get(at, [])
            d = float(_levenshtein(h, t))
            if normalize:
                d = d / len(t) if t else (np.inf if h else 0.0)
            out[at] = d
        return out

    return compute
