"""Gradients of the ops of ``elementary_math_ops`` (trigonometric, hyperbolic,
``Log1p``/``Expm1``, ``Softsign``, ``Atan2``, the no-NaN divisions and
products, ``Xlogy``/``Xdivy``/``Xlog1py``, ``CheckNumerics``).

``Rint``, ``TruncateDiv`` and ``NextAfter`` have none (their inputs get None), as
in TF; ``TruncateMod`` has no entry, as in TF.
"""

from __future__ import annotations

from nbdist.framework.gradient_registry import NotDifferentiable, register_gradient
from nbdist.framework.ops import convert_to_tensor
from nbdist.ops import elementary_math_ops as E
from nbdist.ops import math_ops as M
from nbdist.ops.math_grad import sum_to


def _one(x):
    return convert_to_tensor(1, dtype=x.dtype.base_dtype)


def _broadcast_pair(op, gx, gy):
    x, y = op.inputs[0], op.inputs[1]
    return [sum_to(gx, x, [y]), sum_to(gy, y, [x])]


def unary_gradient(op_type):
    """Registers ``derivative(x, y) -> dy/dx`` (``y`` the op's output) as the
    gradient of the element-wise ``op_type``: ``grad * derivative``."""

    def deco(derivative):
        @register_gradient(op_type)
        def grad_fn(op, grad):
            return [M.multiply(grad, derivative(op.inputs[0], op.outputs[0]))]

        return derivative

    return deco


def _one_minus_square(x):
    return M.subtract(_one(x), M.square(x))


@unary_gradient("Tan")
def _tan(x, y):
    return M.square(M.reciprocal(M.cos(x)))


@unary_gradient("Asin")
def _asin(x, y):
    return M.rsqrt(_one_minus_square(x))


@unary_gradient("Acos")
def _acos(x, y):
    return M.negative(M.rsqrt(_one_minus_square(x)))


@unary_gradient("Atan")
def _atan(x, y):
    return M.reciprocal(M.add(_one(x), M.square(x)))


@unary_gradient("Sinh")
def _sinh(x, y):
    return E.cosh(x)


@unary_gradient("Cosh")
def _cosh(x, y):
    return E.sinh(x)


@unary_gradient("Asinh")
def _asinh(x, y):
    return M.reciprocal(E.cosh(y))


@unary_gradient("Acosh")
def _acosh(x, y):
    return M.reciprocal(E.sinh(y))


@unary_gradient("Atanh")
def _atanh(x, y):
    return M.reciprocal(_one_minus_square(x))


@unary_gradient("Log1p")
def _log1p(x, y):
    return M.reciprocal(M.add(_one(x), x))


@unary_gradient("Expm1")
def _expm1(x, y):
    return M.exp(x)


@unary_gradient("Softsign")
def _softsign(x, y):
    return M.reciprocal(M.square(M.add(_one(x), M.abs(x))))


for _t in ("Rint", "TruncateDiv", "NextAfter"):
    NotDifferentiable(_t)


@register_gradient("Atan2")
def _atan2_grad(op, grad):
    y, x = op.inputs
    scale = M.realdiv(grad, M.add(M.square(x), M.square(y)))
    return _broadcast_pair(op, M.multiply(x, scale), M.negative(M.multiply(y, scale)))


@register_gradient("DivNoNan")
def _div_no_nan_grad(op, grad):
    x, y = op.inputs
    gx = E.div_no_nan(grad, y)
    gy = M.multiply(grad, E.div_no_nan(E.div_no_nan(M.negative(x), y), y))
    return _broadcast_pair(op, gx, gy)


@register_gradient("MulNoNan")
def _mul_no_nan_grad(op, grad):
    x, y = op.inputs
    return _broadcast_pair(op, E.multiply_no_nan(grad, y), E.multiply_no_nan(x, grad))


def _nonzero(x):
    return M.cast(M.not_equal(x, convert_to_tensor(0, dtype=x.dtype.base_dtype)),
                  x.dtype.base_dtype)


@register_gradient("Xlogy")
def _xlogy_grad(op, grad):
    x, y = op.inputs
    # d/dx is log(y) where x != 0 and 0 where x == 0, as the forward value.
    gx = M.multiply(grad, E.xlogy(_nonzero(x), y))
    return _broadcast_pair(op, gx, M.multiply(grad, E.xdivy(x, y)))


@register_gradient("Xdivy")
def _xdivy_grad(op, grad):
    x, y = op.inputs
    gx = M.multiply(grad, E.xdivy(_nonzero(x), y))
    gy = M.multiply(grad, E.xdivy(M.negative(x), M.square(y)))
    return _broadcast_pair(op, gx, gy)


@register_gradient("Xlog1py")
def _xlog1py_grad(op, grad):
    x, y = op.inputs
    gx = M.multiply(grad, E.xlog1py(_nonzero(x), y))
    gy = M.multiply(grad, E.xdivy(x, M.add(y, _one(y))))
    return _broadcast_pair(op, gx, gy)


@register_gradient("CheckNumerics")
def _check_numerics_grad(op, grad):
    message = op.get_attr("message")
    if isinstance(message, bytes):
        message = message.decode()
    return [E.check_numerics(grad, "Not a number (NaN) or infinity (Inf) values "
                                 "detected in gradient. " + message)]
