"""NumPy kernel of ``Einsum`` (``nbdist.ops.einsum_ops``)."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import op_error
from nbdist.ops import einsum_ops  # noqa: F401  (registers the op)


@register_kernel("Einsum")
def einsum_kernel(node):
    equation = node.attrs["equation"]
    equation = equation.decode() if isinstance(equation, bytes) else equation

    def compute(step, *inputs):
        try:
            return np.asarray(np.einsum(equation, *inputs))
        except ValueError as e:
            raise op_error(node, f"einsum {equation!r}: {e}") from None

    return compute
