"""Set ops over the last dimension (TF's ``tf.sets``): ``set_size``,
``set_intersection``, ``set_union``, ``set_difference``. Each row of the last
dimension of a dense tensor or ``SparseTensor`` is a set; the results are
``SparseTensor``s whose rows hold the sorted members.

>>> import nbdist as nd
>>> c = nd.sets.set_intersection([[1, 2, 3], [4, 5, 6]], [[2, 3, 9], [6, 6, 7]])
>>> with nd.Session() as s:
...     v = s.run(c)
>>> v.values.tolist(), v.dense_shape.tolist()
([2, 3, 6], [2, 2])
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import INTEGER
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.sparse_tensor import SparseTensor, SparseTensorValue
from nbdist.framework.tensor_shape import TensorShape

_SET_TYPES = INTEGER + (dtypes.uint16, dtypes.string)
_OPERATIONS = ("a-b", "b-a", "intersection", "union")


def _rank_of(c, i, sparse):
    if sparse:
        n = c.shape(i + 2)
        return n[0] if n.rank == 1 else None
    return c.shape(i).rank


def _set_op_infer(sparse_a, sparse_b):
    def infer(c):
        ia, ib = (1, 4 if sparse_a else 2) if sparse_a else (0, 1 if not sparse_b
                                                               else 2)
        ta = c.dtype(ia)
        if ta not in _SET_TYPES:
            raise TypeError(f"{c.op_type}: set values must be an integer or string "
                            f"type, got {ta.name}")
        tb = c.dtype(ib)
        if tb is not ta:
            raise TypeError(f"{c.op_type}: sets of {ta.name} and {tb.name}")
        rank = _rank_of(c, 0, sparse_a)
        if rank is None:
            rank = _rank_of(c, 3 if sparse_a else 1, sparse_b)
        if rank is not None and rank < 2:
            raise ValueError(f"{c.op_type}: sets must have rank >= 2 (a batch of "
                             f"sets along the last dimension), got rank {rank}")
        return [(dtypes.int64, TensorShape([None, rank])),
                (ta, TensorShape([None])), (dtypes.int64, TensorShape([rank]))]

    return infer


_ATTRS = {"set_operation": ("string", "intersection"),
          "validate_indices": ("bool", True), "T": ("type", None)}
register_op("DenseToDenseSetOperation", _set_op_infer(False, False), attrs=_ATTRS,
            num_inputs=2)
register_op("DenseToSparseSetOperation", _set_op_infer(False, True), attrs=_ATTRS,
            num_inputs=4)
register_op("SparseToSparseSetOperation", _set_op_infer(True, True), attrs=_ATTRS,
            num_inputs=6)


def _set_size_infer(c):
    n = c.shape(2)
    rank = n[0] if n.rank == 1 else None
    return [(dtypes.int32, TensorShape(None if rank is None else [None] * (rank - 1)))]


register_op("SetSize", _set_size_infer,
            attrs={"validate_indices": ("bool", True), "T": ("type", None)},
            num_inputs=3)
for _t in ("DenseToDenseSetOperation", "DenseToSparseSetOperation",
           "SparseToSparseSetOperation", "SetSize"):
    NotDifferentiable(_t)


def _as_set_input(x, name):
    if isinstance(x, SparseTensorValue):
        x = SparseTensor.from_value(x)
    if isinstance(x, SparseTensor):
        return x
    return convert_to_tensor(x, name=name)


def set_size(a, validate_indices=True):
    """The number of distinct members of each set (last dimension) of the
    ``SparseTensor`` ``a``, as int32 of shape ``a.dense_shape[:-1]``."""
    if isinstance(a, SparseTensorValue):
        a = SparseTensor.from_value(a)
    if not isinstance(a, SparseTensor):
        raise TypeError("Expected `SparseTensor`, got %s." % (a,))
    g = a.values.graph
    return g.create_op("SetSize", [a.indices, a.values, a.dense_shape],
                       {"validate_indices": bool(validate_indices),
                        "T": a.values.dtype.base_dtype},
                       name="SetSize").outputs[0]


def _set_operation(a, b, set_operation, validate_indices=True):
    a, b = _as_set_input(a, "a"), _as_set_input(b, "b")
    if isinstance(a, SparseTensor) and not isinstance(b, SparseTensor):
        # TF has no sparse-to-dense kernel: swap, and the difference with it.
        a, b = b, a
        set_operation = {"a-b": "b-a", "b-a": "a-b"}.get(set_operation,
                                                        set_operation)
    sparse_a, sparse_b = isinstance(a, SparseTensor), isinstance(b, SparseTensor)
    parts = ([a.indices, a.values, a.dense_shape] if sparse_a else [a]) + (
        [b.indices, b.values, b.dense_shape] if sparse_b else [b])
    op_type = ("SparseToSparseSetOperation" if sparse_a else
               "DenseToSparseSetOperation" if sparse_b else "DenseToDenseSetOperation")
    dtype = (a.values if sparse_a else a).dtype.base_dtype
    g = parts[0].graph
    op = g.create_op(op_type, parts, {"set_operation": set_operation,
                                      "validate_indices": bool(validate_indices),
                                      "T": dtype}, name=op_type)
    return SparseTensor(*op.outputs)


def set_intersection(a, b, validate_indices=True):
    """The members each set of ``a`` shares with the matching set of ``b``
    (sorted, as a ``SparseTensor``); ``a`` and ``b`` dense or sparse."""
    return _set_operation(a, b, "intersection", validate_indices)


def set_union(a, b, validate_indices=True):
    """The members of each set of ``a`` or of the matching set of ``b``."""
    return _set_operation(a, b, "union", validate_indices)


def set_difference(a, b, aminusb=True, validate_indices=True):
    """``a - b`` per set (``b - a`` when not ``aminusb``)."""
    return _set_operation(a, b, "a-b" if aminusb else "b-a", validate_indices)


__all__ = ["set_difference", "set_intersection", "set_size", "set_union"]
