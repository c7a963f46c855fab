"""Kernels of the segment reductions (``nbdist.ops.segment_ops``): sorted
``Segment{Sum,Mean,Max,Min,Prod}`` and ``UnsortedSegment{Sum,Max,Min,Prod}``.

Each scatters the rows of ``data`` into their segment's row of the output
with the reduction's ufunc (``np.maximum.at`` ...), starting from its identity.
Bad ids are ``InvalidArgumentError`` in TF's words.
"""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, ignore_fp_errors, op_error
from nbdist.ops import segment_ops  # noqa: F401  (registers the ops)

_UFUNC = {"Sum": np.add, "Mean": np.add, "Max": np.maximum, "Min": np.minimum,
          "Prod": np.multiply}


def _identity(kind, dtype):
    if kind in ("Sum", "Mean"):
        return 0
    if kind == "Prod":
        return 1
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    # The lowest finite value, not -inf, as TF fills an empty segment's max.
    return info.min if kind == "Max" else info.max


def _reduce(kind, data, ids, rows):
    """The segments of ``data`` by the (valid, non-negative) flat ``ids``."""
    out = np.full((rows,) + data.shape[1:], _identity(kind, data.dtype),
                  dtype=data.dtype)
    _UFUNC[kind].at(out, ids, data)
    if kind == "Mean":
        counts = np.bincount(ids, minlength=rows).reshape(
            (rows,) + (1,) * (data.ndim - 1))
        counts = np.maximum(counts, 1)
        if data.dtype.kind in "iu":  # C's integer division: toward zero
            q = np.abs(out) // counts
            out = np.where(out < 0, -q, q).astype(data.dtype)
        else:
            out = (out / counts).astype(data.dtype)
    return out


def _sorted_factory(kind):
    def factory(node):
        @ignore_fp_errors
        def compute(step, data, ids):
            data, ids = np.asarray(data), np.asarray(ids)
            if ids.ndim != 1:
                raise op_error(node, f"segment_ids should be a vector, got shape "
                                     f"{fmt(ids.shape)}")
            if data.ndim < 1 or ids.shape[0] != data.shape[0]:
                raise op_error(node, "segment_ids should be the same size as "
                                     "dimension 0 of input.")
            if ids.size and ids.min() < 0:
                raise op_error(node, "segment ids must be >= 0")
            if ids.size > 1 and np.any(ids[1:] < ids[:-1]):
                raise op_error(node, "segment ids are not increasing")
            rows = int(ids[-1]) + 1 if ids.size else 0
            out = _reduce(kind, data, ids.astype(np.int64), rows)
            if kind in ("Max", "Min"):  # an empty segment of a sorted op is 0
                empty = np.bincount(ids, minlength=rows) == 0
                out[empty] = 0
            return out

        return compute

    return factory


def _unsorted_factory(kind):
    def factory(node):
        @ignore_fp_errors
        def compute(step, data, ids, num_segments):
            data, ids = np.asarray(data), np.asarray(ids)
            n = int(np.asarray(num_segments))
            if n < 0:
                raise op_error(node, f"Input num_segments == {n} must not be "
                                     f"negative.")
            if data.shape[:ids.ndim] != ids.shape:
                raise op_error(node, f"data.shape = {fmt(data.shape)} does not "
                                     f"start with segment_ids.shape = "
                                     f"{fmt(ids.shape)}")
            flat_ids = ids.reshape(-1).astype(np.int64)
            bad = np.flatnonzero(flat_ids >= n)
            if bad.size:
                i = int(bad[0])
                raise op_error(node, f"segment_ids[{i}] = {flat_ids[i]} is out of "
                                     f"range [0, {n})")
            rows = data.reshape((flat_ids.size,) + data.shape[ids.ndim:])
            keep = flat_ids >= 0  # negative ids are dropped, as TF
            return _reduce(kind, rows[keep], flat_ids[keep], n)

        return compute

    return factory


for _kind in ("Sum", "Mean", "Max", "Min", "Prod"):
    register_kernel(f"Segment{_kind}")(_sorted_factory(_kind))
for _kind in ("Sum", "Max", "Min", "Prod"):
    register_kernel(f"UnsortedSegment{_kind}")(_unsorted_factory(_kind))
