"""NumPy kernels of ``nbdist.ops.bitwise_ops``."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.elementary_math_kernels import _binary_factory
from nbdist.executor.kernels.math_kernels import _unary_factory
from nbdist.ops import bitwise_ops  # noqa: F401  (registers the ops)


def _shift(fn):
    def shift(x, y):
        x, y = np.asarray(x), np.asarray(y)
        # TF clamps the shift into [0, bits - 1] rather than leave it undefined.
        bits = x.dtype.itemsize * 8
        return fn(x, np.clip(y, 0, bits - 1).astype(x.dtype)).astype(x.dtype)

    return shift


_BINARY = {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or,
           "BitwiseXor": np.bitwise_xor, "LeftShift": _shift(np.left_shift),
           "RightShift": _shift(np.right_shift)}
for _t, _fn in _BINARY.items():
    register_kernel(_t)(_binary_factory(_fn))
register_kernel("Invert")(_unary_factory(np.invert))
