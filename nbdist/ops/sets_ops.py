"""Set operations on the last dimension of dense or sparse tensors (TF's
``sets_impl``): ``set_size``, ``set_intersection``, ``set_union`` and
``set_difference``, each row's result sorted, as a ``SparseTensor``.

The kernels are in ``nbdist/executor/kernels/set_kernels.py``.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.sets.intersection([[1, 2, 3]], [[3, 1, 7]])).values.tolist()
[1, 3]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.sparse_tensor import SparseTensor, is_sparse
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops as A

__all__: list[str] = []

_TYPES = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8,
          dtypes.string)


def _set_infer(c):
    if c.dtype(1) is not c.dtype(4):
        raise TypeError(f"{c.op_type}: both sets must have one dtype, got "
                        f"{c.dtype(1).name} and {c.dtype(4).name}")
    return [(dtypes.int64, TensorShape([None, None])), (c.dtype(1), TensorShape([None])),
            (dtypes.int64, TensorShape([None]))]


register_op("SparseToSparseSetOperation", _set_infer,
            attrs={"set_operation": ("string", None), "T": ("type", None),
                   "validate_indices": ("bool", True)}, num_inputs=6)
register_op("SetSize", lambda c: [(dtypes.int32, TensorShape(None))],
            attrs={"T": ("type", None), "validate_indices": ("bool", True)},
            num_inputs=3)
NotDifferentiable("SparseToSparseSetOperation")
NotDifferentiable("SetSize")


def _as_sparse(x, what):
    if is_sparse(x):
        return x
    t = convert_to_tensor(x, name=what)
    if t.dtype.base_dtype not in _TYPES:
        raise TypeError(f"Invalid dtype {t.dtype.name} for sets.")
    if t.shape.rank is not None and t.shape.rank < 2:
        raise ValueError(f"Expected rank >= 2 for {what}, got {t.shape}")
    # A dense set holds every entry of its rows.
    everywhere = A.where(A.ones_like(t, dtype=dtypes.bool))
    return SparseTensor(everywhere, A.reshape(t, [-1]),
                        A.shape(t, out_type=dtypes.int64))


def _set_operation(a, b, operation, validate_indices):
    sa, sb = _as_sparse(a, "a"), _as_sparse(b, "b")
    with op_scope(None, "SetOperation", [sa.values, sb.values]) as (g, scope):
        vb = convert_to_tensor(sb.values, dtype=sa.dtype.base_dtype)
        op = g.create_op("SparseToSparseSetOperation",
                         [sa.indices, sa.values, sa.dense_shape, sb.indices, vb,
                          sb.dense_shape],
                         {"set_operation": operation, "T": sa.dtype.base_dtype,
                          "validate_indices": bool(validate_indices)}, name=scope)
        return SparseTensor(*op.outputs)


def set_size(a, validate_indices=True):
    """The number of distinct values in each row (last dimension) of ``a``."""
    sp = _as_sparse(a, "a")
    with op_scope(None, "SetSize", [sp.values]) as (g, scope):
        return g.create_op("SetSize", [sp.indices, sp.values, sp.dense_shape],
                           {"T": sp.dtype.base_dtype,
                            "validate_indices": bool(validate_indices)},
                           name=scope).outputs[0]


def set_intersection(a, b, validate_indices=True):
    """The values in both ``a``'s and ``b``'s row, per row, sorted."""
    return _set_operation(a, b, "intersection", validate_indices)


def set_union(a, b, validate_indices=True):
    """The values in ``a``'s or ``b``'s row, per row, sorted."""
    return _set_operation(a, b, "union", validate_indices)


def set_difference(a, b, aminusb=True, validate_indices=True):
    """The values of ``a``'s row not in ``b``'s (``b`` minus ``a`` when
    ``aminusb`` is False), per row, sorted."""
    return _set_operation(a, b, "a-b" if aminusb else "b-a", validate_indices)
