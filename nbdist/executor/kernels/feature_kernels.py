"""The kernel of ``Bucketize``, a transform of TF's feature columns (their
hashed cross is ``SparseCross``, in ``sparse_cross_kernels``).
"""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel


@register_kernel("Bucketize")
def bucketize_kernel(node):
    boundaries = np.asarray(node.attrs["boundaries"], dtype=np.float64)

    def compute(step, x):
        x = np.asarray(x)
        return np.searchsorted(boundaries, x, side="right").astype(np.int32)

    return compute
