"""NumPy kernels of ``nbdist.ops.sets_ops``: ``SetSize`` and
``SparseToSparseSetOperation``."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, ints, op_error
from nbdist.ops import sets_ops  # noqa: F401  (registers the ops)


def _rows(node, indices, values, shape, what):
    """{outer index: set of values} of a sparse set tensor, and its shape."""
    ind, vals, dims = np.asarray(indices), np.asarray(values), ints(shape)
    if len(dims) < 2:
        raise op_error(node, f"{what} must have rank >= 2, got shape {fmt(dims)}")
    rows: dict = {}
    for k in range(ind.shape[0]):
        rows.setdefault(tuple(ind[k, :-1].tolist()), set()).add(vals[k])
    return rows, dims


@register_kernel("SetSize")
def set_size_kernel(node):
    def compute(step, indices, values, shape):
        rows, dims = _rows(node, indices, values, shape, "set")
        out = np.zeros(dims[:-1], np.int32)
        for at, s in rows.items():
            out[at] = len(s)
        return out

    return compute


_OPS = {
    "intersection": lambda a, b: a & b,
    "union": lambda a, b: a | b,
    "a-b": lambda a, b: a - b,
    "b-a": lambda a, b: b - a,
}


@register_kernel("SparseToSparseSetOperation")
def set_operation_kernel(node):
    op = node.attrs["set_operation"]
    op = op.decode() if isinstance(op, bytes) else op
    if op not in _OPS:
        raise op_error(node, f"Invalid set_operation {op}")

    def compute(step, a_ind, a_val, a_shape, b_ind, b_val, b_shape):
        a, da = _rows(node, a_ind, a_val, a_shape, "a")
        b, db = _rows(node, b_ind, b_val, b_shape, "b")
        if da[:-1] != db[:-1]:
            raise op_error(node, f"Shapes {fmt(da)} and {fmt(db)} must match in "
                                 "all but the last dimension")
        out_ind, out_val, width = [], [], 0
        for at in np.ndindex(*da[:-1]):
            result = sorted(_OPS[op](a.get(at, set()), b.get(at, set())))
            width = max(width, len(result))
            for k, v in enumerate(result):
                out_ind.append(list(at) + [k])
                out_val.append(v)
        dtype = np.asarray(a_val).dtype
        return (np.array(out_ind, np.int64).reshape(-1, len(da)),
                np.array(out_val, dtype), np.array(list(da[:-1]) + [width], np.int64))

    return compute
