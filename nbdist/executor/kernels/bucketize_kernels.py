"""Kernel of ``Bucketize`` (``nbdist.ops.bucketize_ops``): a value equal to a
boundary goes to the bucket above it (``searchsorted`` to the right)."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel


@register_kernel("Bucketize")
def bucketize_kernel(node):
    boundaries = np.asarray(node.attrs["boundaries"], dtype=np.float64)

    def compute(step, x):
        return np.searchsorted(boundaries, np.asarray(x), side="right").astype(
            np.int32)

    return compute
