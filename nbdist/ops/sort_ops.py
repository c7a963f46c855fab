"""``sort`` and ``argsort`` along any axis, and ``approx_max_k``/``approx_min_k``,
built as TF builds them: ``TopKV2`` over the whole last axis (the axis moved
last by a transpose), on negated values for ascending order. Their gradients
are those of ``TopKV2``, ``Neg`` and ``Transpose``.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run([nd.sort([3, 1, 2]), nd.argsort([3, 1, 2], direction="DESCENDING")])
[array([1, 2, 3], dtype=int32), array([0, 2, 1], dtype=int32)]
"""

from __future__ import annotations

import numpy as np

from nbdist.framework.op_util import NUMERIC, op_scope
from nbdist.framework.constant_op import identity
from nbdist.framework.ops import convert_to_tensor
from nbdist.ops import array_ops as A
from nbdist.ops import math_ops as M
from nbdist.ops.nn_norm_ops import top_k

_DIRECTIONS = ("ASCENDING", "DESCENDING")


def _top_k_along(x, axis, k, largest, what):
    """(values, indices) of the ``k`` largest (or smallest) entries along
    ``axis`` (static), largest (smallest) first."""
    rank = x.shape.rank
    if rank is None:
        raise ValueError(f"{what}: the rank of values must be known")
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"{what}: axis {axis} is out of bounds for a tensor of "
                         f"rank {rank}")
    if x.dtype.base_dtype not in NUMERIC:
        raise TypeError(f"{what}: values must be a real numeric tensor, got "
                        f"{x.dtype.base_dtype.name}")
    axis %= rank
    perm = None
    if axis != rank - 1:
        perm = list(range(rank))
        perm[axis], perm[-1] = rank - 1, axis
        x = A.transpose(x, perm)
    if k is None:
        k = x.shape[-1] if x.shape[-1] is not None else A.shape(x)[-1]
    values, indices = top_k(x if largest else _reverse_order(x), k)
    if not largest:
        values = _reverse_order(values)
    if perm is not None:
        values, indices = A.transpose(values, perm), A.transpose(indices, perm)
    return values, indices


def _reverse_order(x):
    """An order-reversing involution: -x for floats; for integers ``~x`` (as
    ``-1 - x``) and ``max - x``, which never overflow."""
    d = x.dtype.base_dtype
    if d.is_floating:
        return M.negative(x)
    top = np.iinfo(d.as_numpy_dtype).max if d.is_unsigned else -1
    return M.subtract(convert_to_tensor(top, dtype=d), x)


def _check_direction(direction):
    if direction not in _DIRECTIONS:
        raise ValueError(f"Argument `direction` should be one of "
                         f"{', '.join(_DIRECTIONS)}. Received: "
                         f"direction={direction}")


def sort(values, axis=-1, direction="ASCENDING", name=None):
    """``values`` sorted along ``axis`` (``"ASCENDING"`` or ``"DESCENDING"``)."""
    _check_direction(direction)
    with op_scope(name, "sort", [values]) as (_g, scope):
        x = convert_to_tensor(values, name="values")
        out, _ = _top_k_along(x, axis, None, direction == "DESCENDING", "sort")
        return identity(out, name=scope)


def argsort(values, axis=-1, direction="ASCENDING", stable=False, name=None):
    """The int32 indices that sort ``values`` along ``axis``; equal values keep
    their order (so ``stable`` holds either way)."""
    del stable  # TopKV2 is stable already
    _check_direction(direction)
    with op_scope(name, "argsort", [values]) as (_g, scope):
        x = convert_to_tensor(values, name="values")
        _, idx = _top_k_along(x, axis, None, direction == "DESCENDING", "argsort")
        return identity(idx, name=scope)


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True,
                 name=None):
    """(values, indices) of the ``k`` largest entries along
    ``reduction_dimension``. TF's TPU kernel may miss some (``recall_target``);
    this one is exact, which meets every recall target."""
    del recall_target, reduction_input_size_override, aggregate_to_topk
    with op_scope(name, "ApproxTopK", [operand]):
        x = convert_to_tensor(operand, name="operand")
        return _top_k_along(x, reduction_dimension, k, True, "approx_max_k")


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True,
                 name=None):
    """(values, indices) of the ``k`` smallest entries (see :func:`approx_max_k`)."""
    del recall_target, reduction_input_size_override, aggregate_to_topk
    with op_scope(name, "ApproxTopK", [operand]):
        x = convert_to_tensor(operand, name="operand")
        return _top_k_along(x, reduction_dimension, k, False, "approx_min_k")


__all__ = ["argsort", "sort"]
