"""Kernels of the scans of ``nbdist.ops.cumulative_ops`` (``Cumsum``,
``Cumprod``, ``CumulativeLogsumexp``): NumPy's ``accumulate`` along the axis,
on the flipped input for ``reverse``, shifted by one for ``exclusive``."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, ignore_fp_errors, op_error
from nbdist.ops import cumulative_ops  # noqa: F401  (registers the ops)

_SCANS = {"Cumsum": (np.add, 0), "Cumprod": (np.multiply, 1),
          "CumulativeLogsumexp": (np.logaddexp, -np.inf)}


def _factory(op_type):
    ufunc, identity = _SCANS[op_type]

    def factory(node):
        exclusive, reverse = node.attrs["exclusive"], node.attrs["reverse"]

        @ignore_fp_errors
        def compute(step, x, axis):
            x, axis = np.asarray(x), np.asarray(axis)
            if axis.ndim != 0:
                raise op_error(node, f"ScanOp: axis must be a scalar, not "
                                     f"{fmt(axis.shape)}")
            a, rank = int(axis), max(x.ndim, 1)
            if a < -rank or a >= rank:
                raise op_error(node, f"ScanOp: Expected scan axis in the range "
                                     f"[{-rank}, {rank}), but got {a}")
            if x.ndim == 0:
                return x.copy()
            a %= rank
            v = np.flip(x, a) if reverse else x
            out = ufunc.accumulate(v, axis=a, dtype=x.dtype)
            if exclusive and out.shape[a]:
                first = np.full_like(np.take(out, [0], axis=a), identity)
                out = np.concatenate(
                    [first, np.take(out, np.arange(out.shape[a] - 1), axis=a)],
                    axis=a)
            return np.flip(out, a).copy() if reverse else out

        return compute

    return factory


for _t in _SCANS:
    register_kernel(_t)(_factory(_t))
