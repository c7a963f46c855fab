"""NumPy kernels of ``nbdist.ops.set_ops``: the sets of each input are grouped by
their leading indices, combined with Python sets and written back sorted."""

from __future__ import annotations

import itertools

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, op_error
from nbdist.ops import set_ops  # noqa: F401  (registers the ops)


def _dense_sets(x):
    x = np.asarray(x)
    batch = x.shape[:-1]
    return batch, {idx: set(x[idx].tolist()) for idx in np.ndindex(*batch)}


def _sparse_sets(node, indices, values, shape, validate):
    indices, shape = np.asarray(indices), np.asarray(shape)
    if validate and len(indices) > 1:
        flat = np.ravel_multi_index(indices.T, shape) if shape.all() else None
        if flat is not None and np.any(np.diff(flat) <= 0):
            raise op_error(node, "indices are not in canonical (row-major) order "
                                 "or hold duplicates")
    sets: dict = {}
    for idx, v in zip(map(tuple, indices[:, :-1].tolist()),
                      np.asarray(values).tolist()):
        sets.setdefault(idx, set()).add(v)
    return tuple(int(d) for d in shape[:-1]), sets


def _combine(operation, a, b):
    if operation == "intersection":
        return a & b
    if operation == "union":
        return a | b
    return a - b if operation == "a-b" else b - a


def _to_sparse(batch, rows, dtype):
    members = {idx: sorted(s) for idx, s in rows.items() if s}
    width = max((len(m) for m in members.values()), default=0)
    indices = [list(idx) + [j] for idx in sorted(members)
               for j in range(len(members[idx]))]
    values = [v for idx in sorted(members) for v in members[idx]]
    rank = len(batch) + 1
    return (np.asarray(indices, dtype=np.int64).reshape(len(indices), rank),
            np.asarray(values, dtype=dtype) if dtype != object
            else np.array(values + [None], dtype=object)[:-1],
            np.asarray(list(batch) + [width], dtype=np.int64))


def _set_kernel(sparse_a, sparse_b):
    def factory(node):
        operation = node.attrs["set_operation"]
        validate = node.attrs["validate_indices"]

        def compute(step, *inputs):
            parts = list(inputs)
            if sparse_a:
                batch_a, a = _sparse_sets(node, *parts[:3], validate)
                parts = parts[3:]
                dtype = np.asarray(inputs[1]).dtype
            else:
                batch_a, a = _dense_sets(parts.pop(0))
                dtype = np.asarray(inputs[0]).dtype
            batch_b, b = (_sparse_sets(node, *parts, validate) if sparse_b
                          else _dense_sets(parts[0]))
            if len(batch_a) != len(batch_b) or (
                    not (sparse_a or sparse_b) and batch_a != batch_b):
                raise op_error(node, f"Shapes {fmt(batch_a)} and {fmt(batch_b)} of "
                                     "the sets' leading dimensions differ")
            batch = tuple(max(x, y) for x, y in zip(batch_a, batch_b))
            rows = {idx: _combine(operation, a.get(idx, set()), b.get(idx, set()))
                    for idx in itertools.chain(a, b)}
            return _to_sparse(batch, rows, dtype)

        return compute

    return factory


register_kernel("DenseToDenseSetOperation")(_set_kernel(False, False))
register_kernel("DenseToSparseSetOperation")(_set_kernel(False, True))
register_kernel("SparseToSparseSetOperation")(_set_kernel(True, True))


@register_kernel("SetSize")
def set_size_kernel(node):
    validate = node.attrs["validate_indices"]

    def compute(step, indices, values, shape):
        batch, sets = _sparse_sets(node, indices, values, shape, validate)
        out = np.zeros(batch, dtype=np.int32)
        for idx, s in sets.items():
            out[idx] = len(s)
        return out

    return compute
