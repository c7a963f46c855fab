"""Kernels of ``nbdist.ops.spectral_nd_ops`` on ``numpy.fft``'s N-D transforms."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import op_error

_FUNCTIONS = {"FFTND": np.fft.fftn, "IFFTND": np.fft.ifftn, "RFFTND": np.fft.rfftn,
              "IRFFTND": np.fft.irfftn}


def _factory(op_type):
    fn = _FUNCTIONS[op_type]

    def factory(node):
        out_attr = {"RFFTND": "Tcomplex", "IRFFTND": "Treal"}.get(op_type)

        def compute(step, x, fft_length, axes):
            x = np.asarray(x)
            lengths = [int(v) for v in np.ravel(fft_length)]
            axes = [int(v) for v in np.ravel(axes)]
            if len(lengths) != len(axes):
                raise op_error(node, f"fft_length and axes must have the same "
                                     f"length, got {len(lengths)} and {len(axes)}")
            if any(not -x.ndim <= a < x.ndim for a in axes):
                raise op_error(node, f"axes {axes} out of range for an input of "
                                     f"rank {x.ndim}")
            out = np.dtype(node.attrs[out_attr].as_numpy_dtype if out_attr
                           else x.dtype)
            if not axes:
                return x.astype(out)
            return fn(x, s=lengths, axes=axes).astype(out)

        return compute

    return factory


for _t in _FUNCTIONS:
    register_kernel(_t)(_factory(_t))
