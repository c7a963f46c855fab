"""NumPy kernels of ``nbdist.ops.array_ops_shape_utils``: ``EnsureShape`` and
``Bitcast``."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, numpy_type, op_error
from nbdist.ops import array_ops_shape_utils  # noqa: F401  (registers the ops)


@register_kernel("EnsureShape")
def ensure_shape_kernel(node):
    want = node.attrs["shape"]

    def compute(step, x):
        x = np.asarray(x)
        if not want.is_compatible_with(x.shape):
            dims = "?" if want.rank is None else fmt_partial(want.as_list())
            raise op_error(node, f"Shape of tensor {node.name} {fmt(x.shape)} is not "
                                 f"compatible with expected shape {dims}.")
        return x

    return compute


def fmt_partial(dims) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


@register_kernel("Bitcast")
def bitcast_kernel(node):
    out_type = numpy_type(node.attrs["type"])

    def compute(step, x):
        x = np.ascontiguousarray(x)
        a, b = x.dtype.itemsize, out_type.itemsize
        if a < b and (x.ndim == 0 or x.shape[-1] * a != b):
            raise op_error(node, f"Cannot bitcast from {x.dtype} to {out_type}: "
                                 f"shape {fmt(x.shape)}")
        out = x.view(out_type)
        if a > b:
            return out.reshape(x.shape + (a // b,))
        if a < b:
            return out.reshape(x.shape[:-1])
        return out

    return compute
