"""Counting and spread: ``bincount`` (op ``Bincount``), ``confusion_matrix``
(a ``bincount`` of ``label * num_classes + prediction``), and the reductions
``reduce_variance``, ``reduce_std`` and ``reduce_euclidean_norm`` (composites,
so their gradients are those of the ops they are built from).

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.bincount([1, 1, 3])).tolist()
[0, 2, 0, 1]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import (
    COMPLEX,
    FLOAT,
    INTEGER,
    NUMERIC,
    check_scalar_input,
    check_type,
    op_scope,
)
from nbdist.framework.constant_op import identity
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops as A
from nbdist.ops import check_ops
from nbdist.ops import math_ops as M
from nbdist.ops.complex_ops import abs as complex_abs


def _bincount_infer(c):
    check_type(c, 0, (dtypes.int32,), "arr")
    check_type(c, 1, (dtypes.int32,), "size")
    check_scalar_input(c, 1, "size")
    d = check_type(c, 2, NUMERIC, "weights")
    size = c.constant(1)
    return [(d, TensorShape([None if size is None else int(size)]))]


register_op("Bincount", _bincount_infer, attrs={"T": ("type", None)}, num_inputs=3)
NotDifferentiable("Bincount")


def bincount(arr, weights=None, minlength=None, maxlength=None,
             dtype=dtypes.int32, name=None):
    """How often each value of the non-negative int32 ``arr`` occurs (or the sum
    of ``weights`` at those places): a vector of length ``max(arr) + 1``, at least
    ``minlength`` and at most ``maxlength`` (larger values are not counted)."""
    with op_scope(name, "bincount", [arr, weights]) as (g, scope):
        arr = convert_to_tensor(arr, name="arr", dtype=dtypes.int32)
        flat = A.reshape(arr, [-1])
        # max(arr) + 1, or 0 for an empty arr
        size = M.reduce_max(A.concat([M.add(flat, 1), [0]], 0))
        if minlength is not None:
            size = M.maximum(convert_to_tensor(minlength, dtype=dtypes.int32), size)
        if maxlength is not None:
            size = M.minimum(convert_to_tensor(maxlength, dtype=dtypes.int32), size)
        if weights is None:
            weights = A.zeros([0], dtype=dtype)
        else:
            weights = A.reshape(convert_to_tensor(weights, name="weights"), [-1])
        return g.create_op("Bincount", [flat, size, weights],
                           {"T": weights.dtype.base_dtype}, name=scope).outputs[0]


def confusion_matrix(labels, predictions, num_classes=None, dtype=dtypes.int32,
                     name=None, weights=None):
    """``out[i, j]``: how many examples of class ``i`` (``labels``) were predicted
    as ``j`` (or the sum of their ``weights``), a ``[num_classes, num_classes]``
    matrix. Without ``num_classes``, one more than the largest label or
    prediction.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.confusion_matrix([1, 2, 4], [2, 2, 4])).tolist()[2]
    [0, 0, 1, 0, 0]
    """
    with op_scope(name, "confusion_matrix", [labels, predictions, weights]) as (
            _g, scope):
        labels, predictions = _squeeze_pair(
            convert_to_tensor(labels, name="labels"),
            convert_to_tensor(predictions, name="predictions"))
        labels = M.cast(labels, dtypes.int32)
        predictions = M.cast(predictions, dtypes.int32)
        zero = convert_to_tensor(0, dtype=dtypes.int32)
        checks = [
            check_ops.assert_less_equal(
                zero, labels, message="`labels` contains negative values"),
            check_ops.assert_less_equal(
                zero, predictions, message="`predictions` contains negative values"),
        ]
        if num_classes is None:
            n = M.add(M.maximum(M.reduce_max(labels), M.reduce_max(predictions)), 1)
        else:
            # An int64 num_classes (as a metric's is) works, as in TF.
            n = M.cast(convert_to_tensor(num_classes), dtypes.int32)
            checks += [
                check_ops.assert_less(labels, n, message="`labels` out of bound"),
                check_ops.assert_less(predictions, n,
                                      message="`predictions` out of bound"),
            ]
        with labels.graph.control_dependencies(checks):
            flat = M.add(M.multiply(labels, n), predictions)
        dtype = dtypes.as_dtype(dtype)
        if weights is not None:
            weights = M.cast(weights, dtype)
        counts = bincount(flat, weights=weights, minlength=n * n, maxlength=n * n,
                          dtype=dtype)
        return A.reshape(counts, A.stack([n, n]), name=scope)


def _squeeze_pair(labels, predictions):
    # A trailing axis of size 1 that makes one rank exceed the other by one goes.
    lr, pr = labels.shape.rank, predictions.shape.rank
    if lr is not None and pr is not None:
        if lr == pr + 1 and labels.shape[-1] == 1:
            labels = A.squeeze(labels, [-1])
        elif pr == lr + 1 and predictions.shape[-1] == 1:
            predictions = A.squeeze(predictions, [-1])
    labels.shape.assert_is_compatible_with(predictions.shape)
    return labels, predictions


def _check_real_or_complex(x):
    d = x.dtype.base_dtype
    if d in INTEGER:
        raise TypeError(f"Input must be either real or complex. Received integer "
                        f"type <dtype: '{d.name}'>.")
    if d not in FLOAT + COMPLEX:
        raise TypeError(f"Input must be a float or complex tensor, got {d.name}")


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """The variance of the entries along ``axis`` (all by default): the mean of
    ``abs(x - mean(x)) ** 2``.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     float(s.run(nd.math.reduce_variance([1.0, 2.0, 3.0, 4.0])))
    1.25
    """
    with op_scope(name, "reduce_variance", [input_tensor]) as (_g, scope):
        x = convert_to_tensor(input_tensor, name="input_tensor")
        _check_real_or_complex(x)
        mean = M.reduce_mean(x, axis=axis, keepdims=True)
        deviation = M.subtract(x, mean)
        if x.dtype.base_dtype in COMPLEX:
            deviation = complex_abs(deviation)
        return M.reduce_mean(M.square(deviation), axis=axis, keepdims=keepdims,
                             name=scope)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """The standard deviation: the square root of :func:`reduce_variance`."""
    with op_scope(name, "reduce_std", [input_tensor]) as (_g, scope):
        x = convert_to_tensor(input_tensor, name="input_tensor")
        _check_real_or_complex(x)
        return M.sqrt(reduce_variance(x, axis=axis, keepdims=keepdims), name=scope)


def reduce_euclidean_norm(input_tensor, axis=None, keepdims=False, name=None):
    """``sqrt(sum(x ** 2))`` along ``axis``; integers keep their dtype (the root
    is truncated), as TF."""
    with op_scope(name, "reduce_euclidean_norm", [input_tensor]) as (_g, scope):
        x = convert_to_tensor(input_tensor, name="input_tensor")
        d = x.dtype.base_dtype
        if d not in NUMERIC:
            raise TypeError(f"reduce_euclidean_norm: expected a numeric tensor, got "
                            f"{d.name}")
        v = x if d in FLOAT else M.cast(x, dtypes.float64)
        norm = M.sqrt(M.reduce_sum(M.square(v), axis=axis, keepdims=keepdims))
        return M.cast(norm, d, name=scope) if d not in FLOAT else identity(
            norm, name=scope)


__all__ = ["bincount", "confusion_matrix"]
