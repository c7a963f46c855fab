"""Kernel of ``CheckPinned`` (``nbdist.ops.host_memory_ops``): NumPy memory is
never pinned for a GPU, so it fails with TF's message."""

from __future__ import annotations

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import op_error


@register_kernel("CheckPinned")
def check_pinned_kernel(node):
    def compute(step, x):
        raise op_error(node, "not pinned")

    return compute
