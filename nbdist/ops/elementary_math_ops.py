"""Element-wise functions beyond ``math_ops_elementwise``: the rest of the
trigonometric and hyperbolic functions, ``log1p``/``expm1``/``rint``/``softsign``,
the division and product variants (``truncatediv``, ``div_no_nan``, ``xlogy``,
``multiply_no_nan`` ...), ``nextafter``, ``check_numerics``, and the small
composites TF builds from them (``scalar_mul``, ``polyval``, ``accumulate_n``,
``log_sigmoid``, ``is_non_decreasing`` ...). Gradients: ``elementary_math_grad``.

>>> import nbdist as nd
>>> y = nd.atan2(nd.constant([1.0]), nd.constant([1.0]))
>>> with nd.Session() as s:
...     round(float(s.run(y)[0]), 4)
0.7854
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import (
    COMPLEX,
    FLOAT,
    NUMERIC,
    check_type,
    convert_pair,
    op_scope,
)
from nbdist.framework.constant_op import identity
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops
from nbdist.ops import math_ops as M
from nbdist.ops.indexed_slices import IndexedSlices
from nbdist.ops.math_ops_elementwise import (
    _TRUEDIV_CAST,
    _binary,
    _binary_infer,
    _unary,
    _unary_infer,
)
from nbdist.ops.nn_ops import softplus

_T = {"T": ("type", None)}

UNARY_OPS = {
    **{t: FLOAT + COMPLEX for t in ("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
                                    "Asinh", "Acosh", "Atanh", "Log1p", "Expm1")},
    "Rint": FLOAT,
    "Softsign": FLOAT,
}
BINARY_OPS = {
    "Atan2": FLOAT,
    "TruncateDiv": NUMERIC,
    "TruncateMod": NUMERIC,
    "DivNoNan": FLOAT + COMPLEX,
    "MulNoNan": FLOAT + COMPLEX,
    "Xlogy": FLOAT + COMPLEX,
    "Xdivy": FLOAT + COMPLEX,
    "Xlog1py": FLOAT + COMPLEX,
    "NextAfter": (dtypes.float32, dtypes.float64),
}
for _t, _allowed in UNARY_OPS.items():
    register_op(_t, _unary_infer(_allowed), attrs=_T, num_inputs=1)
for _t, _allowed in BINARY_OPS.items():
    register_op(_t, _binary_infer(_allowed), attrs=_T, num_inputs=2)


def _check_numerics_infer(c):
    d = check_type(c, 0, FLOAT, "tensor")
    return [(d, c.shape(0))]


register_op("CheckNumerics", _check_numerics_infer,
            attrs=dict(_T, message=("string", "")), num_inputs=1)


# -- unary wrappers -------------------------------------------------------------------
def tan(x, name=None):
    return _unary("Tan", x, name)


def asin(x, name=None):
    """The inverse sine, in [-pi/2, pi/2]; NaN outside [-1, 1]."""
    return _unary("Asin", x, name)


def acos(x, name=None):
    """The inverse cosine, in [0, pi]; NaN outside [-1, 1]."""
    return _unary("Acos", x, name)


def atan(x, name=None):
    return _unary("Atan", x, name)


def sinh(x, name=None):
    return _unary("Sinh", x, name)


def cosh(x, name=None):
    return _unary("Cosh", x, name)


def asinh(x, name=None):
    return _unary("Asinh", x, name)


def acosh(x, name=None):
    """The inverse hyperbolic cosine; NaN below 1."""
    return _unary("Acosh", x, name)


def atanh(x, name=None):
    """The inverse hyperbolic tangent; +-inf at +-1, NaN outside [-1, 1]."""
    return _unary("Atanh", x, name)


def log1p(x, name=None):
    """``log(1 + x)``, accurate for small ``x``."""
    return _unary("Log1p", x, name)


def expm1(x, name=None):
    """``exp(x) - 1``, accurate for small ``x``."""
    return _unary("Expm1", x, name)


def rint(x, name=None):
    """The nearest integer, halves to even: ``rint([0.5, 1.5, -2.5])`` is
    ``[0, 2, -2]``."""
    return _unary("Rint", x, name)


def softsign(features, name=None):
    """``features / (abs(features) + 1)``."""
    return _unary("Softsign", features, name)


# -- binary wrappers ------------------------------------------------------------------
def _named_binary(op_type, a, b, names, name):
    # As _binary, with TF's names for the inputs (in conversion errors).
    with op_scope(name, op_type, [a, b]) as (g, scope):
        a, b = convert_pair(a, b, *names)
        return g.create_op(op_type, [a, b], {"T": a.dtype.base_dtype},
                           name=scope).outputs[0]


def atan2(y, x, name=None):
    """The angle of the point ``(x, y)``, in [-pi, pi] (note: ``y`` first)."""
    return _named_binary("Atan2", y, x, ("y", "x"), name)


def truncatediv(x, y, name=None):
    """``x / y`` rounded toward zero (C's integer division): ``-7 // 2`` is -3."""
    return _binary("TruncateDiv", x, y, name)


def truncatemod(x, y, name=None):
    """The remainder of :func:`truncatediv` (C's ``%``, ``fmod``): it has the sign
    of ``x``."""
    return _binary("TruncateMod", x, y, name)


def div_no_nan(x, y, name=None):
    """``x / y``, but 0 where ``y`` is 0 (even when ``x`` is 0, inf or NaN).

    Integers are divided as :func:`nd.truediv` divides them (int32 to float64).

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.div_no_nan([1.0, 4.0], [0.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    with op_scope(name, "div_no_nan", [x, y]) as (g, scope):
        x, y = convert_pair(x, y)
        xd, yd = x.dtype.base_dtype, y.dtype.base_dtype
        if xd is not yd:
            raise TypeError(f"`x` and `y` must have the same dtype, got {xd.name} "
                            f"!= {yd.name}.")
        target = _TRUEDIV_CAST.get(xd)
        if target is not None:
            x, y = M.cast(x, target), M.cast(y, target)
        return g.create_op("DivNoNan", [x, y], {"T": x.dtype.base_dtype},
                           name=scope).outputs[0]


divide_no_nan = div_no_nan


def multiply_no_nan(x, y, name=None):
    """``x * y``, but 0 where ``y`` is 0 (even when ``x`` is inf or NaN)."""
    return _binary("MulNoNan", x, y, name)


def reciprocal_no_nan(x, name=None):
    """``1 / x``, but 0 where ``x`` is 0."""
    with op_scope(name, "reciprocal_no_nan", [x]) as (_g, scope):
        x = convert_to_tensor(x, name="x")
        if x.dtype.base_dtype not in FLOAT + COMPLEX:
            raise TypeError(f"x needs to be a floating point or complex tensor, got "
                            f"{x.dtype.base_dtype.name}.")
        one = convert_to_tensor(1, dtype=x.dtype.base_dtype)
        return div_no_nan(one, x, name=scope)


def xlogy(x, y, name=None):
    """``x * log(y)``, 0 where ``x`` is 0."""
    return _binary("Xlogy", x, y, name)


def xdivy(x, y, name=None):
    """``x / y``, 0 where ``x`` is 0."""
    return _binary("Xdivy", x, y, name)


def xlog1py(x, y, name=None):
    """``x * log1p(y)``, 0 where ``x`` is 0."""
    return _binary("Xlog1py", x, y, name)


def nextafter(x1, x2, name=None):
    """The next representable value after ``x1`` toward ``x2``."""
    return _named_binary("NextAfter", x1, x2, ("x1", "x2"), name)


def check_numerics(tensor, message, name=None):
    """``tensor``, or at run time ``InvalidArgumentError('<message> : Tensor had
    NaN values')`` (or ``Inf values``) when it has any."""
    with op_scope(name, "CheckNumerics", [tensor]) as (g, scope):
        tensor = convert_to_tensor(tensor, name="tensor")
        return g.create_op(
            "CheckNumerics", [tensor],
            {"T": tensor.dtype.base_dtype, "message": str(message)},
            name=scope).outputs[0]


# -- composites ----------------------------------------------------------------------
def scalar_mul(scalar, x, name=None):
    """``scalar * x`` for a scalar (0-D) ``scalar``; ``x`` may be ``IndexedSlices``
    (only its values are scaled)."""
    with op_scope(name, "scalar_mul", [x]) as (_g, scope):
        values = x.values if isinstance(x, IndexedSlices) else x
        values = convert_to_tensor(values, name="x")
        scalar = convert_to_tensor(scalar, dtype=values.dtype.base_dtype,
                                   name="scalar")
        if scalar.shape.rank not in (None, 0):
            raise ValueError(f"Only scalar multiply works, got shape {scalar.shape}")
        if isinstance(x, IndexedSlices):
            return IndexedSlices(M.multiply(scalar, values, name=scope), x.indices,
                                 x.dense_shape)
        return M.multiply(scalar, values, name=scope)


def polyval(coeffs, x, name=None):
    """``coeffs[0] * x**(n-1) + ... + coeffs[n-1]`` (Horner's scheme); zeros like
    ``x`` for no coefficients."""
    if not isinstance(coeffs, list):
        raise ValueError(f"Argument coeffs must be list type found "
                         f"{type(coeffs)}.")
    with op_scope(name, "polyval", coeffs + [x]) as (_g, scope):
        x = convert_to_tensor(x, name="x")
        if not coeffs:
            return array_ops.zeros_like(x, name=scope)
        p = convert_to_tensor(coeffs[0], dtype=x.dtype.base_dtype)
        for c in coeffs[1:]:
            p = M.add(convert_to_tensor(c, dtype=x.dtype.base_dtype),
                      M.multiply(p, x))
        return identity(p, name=scope)


def accumulate_n(inputs, shape=None, tensor_dtype=None, name=None):
    """The element-wise sum of ``inputs`` (as :func:`nd.add_n`), after checking
    that they share one dtype and a shape compatible with ``shape``."""
    if not inputs or not isinstance(inputs, (list, tuple)):
        raise ValueError("inputs must be a list of at least one Tensor/"
                         "IndexedSlices with the same dtype and shape")
    inputs = [convert_to_tensor(t) for t in inputs]
    if not all(t.dtype.base_dtype is inputs[0].dtype.base_dtype for t in inputs):
        raise ValueError("inputs must be a list of at least one Tensor/"
                         "IndexedSlices with the same dtype and shape")
    shape = TensorShape(shape)
    for t in inputs:
        shape = shape.merge_with(t.shape)
    if tensor_dtype is not None and (
            dtypes.as_dtype(tensor_dtype).base_dtype
            is not inputs[0].dtype.base_dtype):
        raise TypeError(f"tensor_dtype is {dtypes.as_dtype(tensor_dtype).name}, but "
                        f"input is of type {inputs[0].dtype.base_dtype.name}")
    return M.add_n(inputs, name=name)


def log_sigmoid(x, name=None):
    """``log(1 / (1 + exp(-x)))``, computed as ``-softplus(-x)`` (no overflow)."""
    with op_scope(name, "LogSigmoid", [x]) as (_g, scope):
        x = convert_to_tensor(x, name="x")
        return M.negative(softplus(M.negative(x)), name=scope)


def _monotonic(x, name, default_name, compare):
    with op_scope(name, default_name, [x]) as (_g, scope):
        x = convert_to_tensor(x, name="x")
        if x.dtype.base_dtype not in NUMERIC:
            raise TypeError(f"Expected x to be numeric, got {x.dtype.name}")
        flat = array_ops.reshape(x, [-1])
        diff = M.subtract(flat[1:], flat[:-1])
        zero = convert_to_tensor(0, dtype=x.dtype.base_dtype)
        return M.reduce_all(compare(zero, diff), name=scope)


def is_non_decreasing(x, name=None):
    """True when ``x`` (flattened) never decreases; True for 0 or 1 elements."""
    return _monotonic(x, name, "is_non_decreasing", M.less_equal)


def is_strictly_increasing(x, name=None):
    """True when ``x`` (flattened) always increases; True for 0 or 1 elements."""
    return _monotonic(x, name, "is_strictly_increasing", M.less)


__all__ = [
    "accumulate_n", "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh",
    "check_numerics", "cosh", "div_no_nan", "expm1", "is_non_decreasing",
    "is_strictly_increasing", "log1p", "log_sigmoid", "rint", "scalar_mul", "sinh",
    "tan", "truncatediv", "truncatemod",
]
