"""Kernel of ``Bincount`` (``nbdist.ops.statistics_ops``): the count, or the sum
of the weights, of each value of ``arr`` below ``size``."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, op_error, scalar_int
from nbdist.ops import statistics_ops  # noqa: F401  (registers the op)


@register_kernel("Bincount")
def bincount_kernel(node):
    out_type = np.dtype(node.attrs["T"].as_numpy_dtype)

    def compute(step, arr, size, weights):
        arr, weights = np.asarray(arr).reshape(-1), np.asarray(weights).reshape(-1)
        size = scalar_int(node, size, "size")
        if size < 0:
            raise op_error(node, f"size ({size}) must be non-negative")
        if arr.size and arr.min() < 0:
            raise op_error(node, "Input arr must be non-negative!")
        if weights.size and weights.size != arr.size:
            raise op_error(node, f"weights must be empty or have the shape of arr "
                                 f"{fmt(arr.shape)}, got {fmt(weights.shape)}")
        keep = arr < size  # values at or above size are not counted
        w = weights[keep] if weights.size else None
        counts = np.bincount(arr[keep], weights=w, minlength=size)[:size]
        return counts.astype(out_type)

    return compute
