"""NumPy kernels of ``nbdist.ops.array_ops_partition``: ``DynamicPartition``,
``DynamicStitch``, ``UniqueWithCounts``, ``ListDiff``, ``LowerBound`` and
``UpperBound``."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, numpy_type, op_error
from nbdist.ops import array_ops_partition  # noqa: F401  (registers the ops)


@register_kernel("DynamicPartition")
def dynamic_partition_kernel(node):
    n = node.attrs["num_partitions"]

    def compute(step, data, partitions):
        data, parts = np.asarray(data), np.asarray(partitions)
        if data.shape[:parts.ndim] != parts.shape:
            raise op_error(node, f"data.shape must start with partitions.shape, got "
                                 f"data.shape = {fmt(data.shape)}, partitions.shape"
                                 f" = {fmt(parts.shape)}")
        flat = parts.ravel()
        bad = (flat < 0) | (flat >= n)
        if bad.any():
            i = int(np.argmax(bad))
            raise op_error(node, f"partitions[{i}] = {int(flat[i])} is not in "
                                 f"[0, {n})")
        rows = data.reshape((flat.size,) + data.shape[parts.ndim:])
        return tuple(rows[flat == i] for i in range(n))

    return compute


@register_kernel("DynamicStitch", "ParallelDynamicStitch")
def dynamic_stitch_kernel(node):
    n = node.attrs["N"]

    def compute(step, *args):
        indices = [np.asarray(i) for i in args[:n]]
        data = [np.asarray(d) for d in args[n:]]
        inner = None
        for m, (ind, dat) in enumerate(zip(indices, data)):
            if dat.shape[:ind.ndim] != ind.shape:
                raise op_error(node, f"data[{m}].shape = {fmt(dat.shape)} does not "
                                     f"start with indices[{m}].shape = "
                                     f"{fmt(ind.shape)}")
            rest = dat.shape[ind.ndim:]
            if inner is None:
                inner = rest
            elif rest != inner:
                raise op_error(node, f"data[{m}] has inner shape {fmt(rest)}, "
                                     f"data[0] {fmt(inner)}")
        size = max((int(i.max()) + 1 for i in indices if i.size), default=0)
        out = np.zeros((size,) + tuple(inner), data[0].dtype)
        for m, (ind, dat) in enumerate(zip(indices, data)):
            flat = ind.ravel()
            if flat.size and flat.min() < 0:
                raise op_error(node, f"indices[{int(np.argmin(flat))}] is out of "
                                     "range")
            out[flat] = dat.reshape((flat.size,) + tuple(inner))
        return out

    return compute


def _first_order_unique(x):
    """The distinct elements in order of first appearance, each element's
    position among them, and their counts."""
    values, first, inverse, counts = np.unique(
        x, return_index=True, return_inverse=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return values[order], rank[inverse.ravel()], counts[order]


@register_kernel("UniqueWithCounts")
def unique_with_counts_kernel(node):
    idx_type = numpy_type(node.attrs["out_idx"])

    def compute(step, x):
        x = np.asarray(x)
        if x.ndim != 1:
            raise op_error(node, f"unique expects a 1D vector, got shape "
                                 f"{fmt(x.shape)}")
        y, idx, count = _first_order_unique(x)
        return y, idx.astype(idx_type), count.astype(idx_type)

    return compute


@register_kernel("ListDiff")
def list_diff_kernel(node):
    idx_type = numpy_type(node.attrs["out_idx"])

    def compute(step, x, y):
        x, y = np.asarray(x), np.asarray(y)
        if x.ndim != 1 or y.ndim != 1:
            raise op_error(node, f"x and y must be 1-D, got shapes {fmt(x.shape)} "
                                 f"and {fmt(y.shape)}")
        keep = ~np.isin(x, y)
        return x[keep], np.flatnonzero(keep).astype(idx_type)

    return compute


def _bound(side):
    def factory(node):
        out_type = numpy_type(node.attrs["out_type"])

        def compute(step, sorted_inputs, values):
            s, v = np.asarray(sorted_inputs), np.asarray(values)
            if s.ndim == 0 or s.ndim != v.ndim:
                raise op_error(node, "sorted_inputs and values must have one rank, "
                                     "at least 1")
            if s.shape[:-1] != v.shape[:-1]:
                raise op_error(node, "Leading dim_size of both tensors must match.")
            rows_s = s.reshape(-1, s.shape[-1])
            rows_v = v.reshape(-1, v.shape[-1])
            out = np.zeros(rows_v.shape, np.int64)
            for k in range(rows_v.shape[0]):
                out[k] = np.searchsorted(rows_s[k], rows_v[k], side=side)
            return out.reshape(v.shape).astype(out_type)

        return compute

    return factory


register_kernel("LowerBound")(_bound("left"))
register_kernel("UpperBound")(_bound("right"))
