"""NumPy kernels of the linear-algebra ops (``nbdist.ops.linalg_ops``)."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import numpy_type, op_error
from nbdist.ops import linalg_ops  # noqa: F401  (registers the ops)


@register_kernel("Qr")
def qr_kernel(node):
    mode = "complete" if node.attrs["full_matrices"] else "reduced"
    out_type = numpy_type(node.attrs["T"])

    def compute(step, x):
        x = np.asarray(x)
        if x.ndim < 2:
            raise op_error(node, f"input must have rank >= 2, got shape {x.shape}")
        # float16 has no LAPACK routine: decompose in float32.
        work = x.astype(np.float32) if x.dtype == np.float16 else x
        q, r = np.linalg.qr(work, mode=mode)
        return q.astype(out_type), r.astype(out_type)

    return compute
