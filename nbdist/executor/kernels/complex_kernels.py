"""NumPy kernels of the complex-number ops (``nbdist.ops.complex_ops``)."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import ignore_fp_errors, numpy_type
from nbdist.ops import complex_ops  # noqa: F401  (registers the ops)

_TO_REAL = {
    "Real": np.real,
    "Imag": np.imag,
    "Angle": np.angle,
    "ComplexAbs": np.abs,
}


def _to_real_factory(fn):
    def factory(node):
        out_type = numpy_type(node.attrs["Tout"])

        @ignore_fp_errors
        def compute(step, x):
            return np.asarray(fn(np.asarray(x)), dtype=out_type).copy()

        return compute

    return factory


for _op, _fn in _TO_REAL.items():
    register_kernel(_op)(_to_real_factory(_fn))


@register_kernel("Complex")
def complex_kernel(node):
    out_type = numpy_type(node.attrs["Tout"])

    def compute(step, re, im):
        re, im = np.asarray(re), np.asarray(im)
        out = np.empty(np.broadcast_shapes(re.shape, im.shape), dtype=out_type)
        out.real, out.imag = re, im
        return out

    return compute


@register_kernel("Conj")
def conj_kernel(node):
    def compute(step, x):
        return np.conj(np.asarray(x))

    return compute
