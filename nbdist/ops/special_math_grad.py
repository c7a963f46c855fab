"""Gradients of the special functions of ``special_math_ops``.

As in TF, ``Betainc`` has a gradient for ``x`` only, ``Zeta`` for ``q`` only and
``Polygamma`` for ``x`` only (the other inputs get None); ``Igamma`` and
``Igammac`` have both (``IgammaGradA`` for ``a``).
"""

from __future__ import annotations

import math

from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.ops import convert_to_tensor
from nbdist.ops import array_ops as A
from nbdist.ops import elementary_math_ops as E
from nbdist.ops import math_ops as M
from nbdist.ops import special_math_ops as S
from nbdist.ops.elementary_math_grad import unary_gradient
from nbdist.ops.math_grad import sum_to


def _c(value, like):
    return convert_to_tensor(value, dtype=like.dtype.base_dtype)


def _y_over_x(x, y, at_zero):
    # y / x, with its limit at x == 0 (where y is 0 too).
    is_zero = M.equal(x, _c(0, x))
    safe_x = A.where(is_zero, A.ones_like(x), x)
    return A.where(is_zero, A.fill(A.shape(x), _c(at_zero, x)), M.realdiv(y, safe_x))


@unary_gradient("Lgamma")
def _lgamma(x, y):
    return S.digamma(x)


@unary_gradient("Digamma")
def _digamma(x, y):
    return S.polygamma(_c(1, x), x)


@unary_gradient("Erf")
def _erf(x, y):
    return M.multiply(_c(2 / math.sqrt(math.pi), x), M.exp(M.negative(M.square(x))))


@unary_gradient("Erfc")
def _erfc(x, y):
    return M.negative(_erf(x, y))


@unary_gradient("Erfinv")
def _erfinv(x, y):
    return M.multiply(_c(math.sqrt(math.pi) / 2, x), M.exp(M.square(y)))


@unary_gradient("Ndtri")
def _ndtri(x, y):
    return M.multiply(_c(math.sqrt(2 * math.pi), x),
                      M.exp(M.multiply(_c(0.5, x), M.square(y))))


@unary_gradient("BesselI0")
def _i0(x, y):
    return S.bessel_i1(x)


@unary_gradient("BesselI0e")
def _i0e(x, y):
    return M.subtract(S.bessel_i1e(x), M.multiply(M.sign(x), y))


@unary_gradient("BesselI1")
def _i1(x, y):
    # I1'(x) = I0(x) - I1(x) / x, 1/2 at 0.
    return M.subtract(S.bessel_i0(x), _y_over_x(x, y, 0.5))


@unary_gradient("BesselI1e")
def _i1e(x, y):
    return M.subtract(M.subtract(S.bessel_i0e(x), M.multiply(M.sign(x), y)),
                      _y_over_x(x, y, 0.5))


@unary_gradient("BesselJ0")
def _j0(x, y):
    return M.negative(S.bessel_j1(x))


@unary_gradient("BesselJ1")
def _j1(x, y):
    return M.subtract(S.bessel_j0(x), _y_over_x(x, y, 0.5))


@unary_gradient("BesselY0")
def _y0(x, y):
    return M.negative(S.bessel_y1(x))


@unary_gradient("BesselY1")
def _y1(x, y):
    return M.subtract(S.bessel_y0(x), M.realdiv(y, x))


@unary_gradient("BesselK0")
def _k0(x, y):
    return M.negative(S.bessel_k1(x))


@unary_gradient("BesselK0e")
def _k0e(x, y):
    return M.subtract(y, S.bessel_k1e(x))


@unary_gradient("BesselK1")
def _k1(x, y):
    return M.negative(M.add(S.bessel_k0(x), M.realdiv(y, x)))


@unary_gradient("BesselK1e")
def _k1e(x, y):
    return M.subtract(M.subtract(y, M.realdiv(y, x)), S.bessel_k0e(x))


@unary_gradient("Dawsn")
def _dawsn(x, y):
    return M.subtract(_c(1, x), M.multiply(_c(2, x), M.multiply(x, y)))


@unary_gradient("Expint")
def _expint(x, y):
    return M.realdiv(M.exp(x), x)


@unary_gradient("FresnelCos")
def _fresnel_cos(x, y):
    return M.cos(M.multiply(_c(math.pi / 2, x), M.square(x)))


@unary_gradient("FresnelSin")
def _fresnel_sin(x, y):
    return M.sin(M.multiply(_c(math.pi / 2, x), M.square(x)))


@unary_gradient("Spence")
def _spence(x, y):
    # log(x) / (1 - x), -1 at x == 1.
    is_one = M.equal(x, _c(1, x))
    safe = A.where(is_one, A.fill(A.shape(x), _c(2, x)), x)
    ratio = M.realdiv(M.log(safe), M.subtract(_c(1, x), safe))
    return A.where(is_one, A.fill(A.shape(x), _c(-1, x)), ratio)


def _igamma_partials(op):
    a, x = op.inputs
    # dP/dx = x**(a-1) exp(-x) / Gamma(a)
    log_px = M.subtract(M.subtract(M.multiply(M.subtract(a, _c(1, a)), M.log(x)), x),
                        S.lgamma(a))
    return S.igamma_grad_a(a, x), M.exp(log_px)


@register_gradient("Igamma")
def _igamma_grad(op, grad):
    a, x = op.inputs
    da, dx = _igamma_partials(op)
    return [sum_to(M.multiply(grad, da), a, [x]), sum_to(M.multiply(grad, dx), x, [a])]


@register_gradient("Igammac")
def _igammac_grad(op, grad):
    a, x = op.inputs
    da, dx = _igamma_partials(op)
    grad = M.negative(grad)
    return [sum_to(M.multiply(grad, da), a, [x]), sum_to(M.multiply(grad, dx), x, [a])]


@register_gradient("Betainc")
def _betainc_grad(op, grad):
    a, b, x = op.inputs
    log_beta = M.subtract(M.add(S.lgamma(a), S.lgamma(b)), S.lgamma(M.add(a, b)))
    one = _c(1, x)
    log_dx = M.subtract(
        M.add(M.multiply(M.subtract(b, one), E.log1p(M.negative(x))),
              E.xlogy(M.subtract(a, one), x)),
        log_beta)
    return [None, None, sum_to(M.multiply(grad, M.exp(log_dx)), x, [a, b])]


@register_gradient("Zeta")
def _zeta_grad(op, grad):
    x, q = op.inputs
    dq = M.negative(M.multiply(x, S.zeta(M.add(x, _c(1, x)), q)))
    return [None, sum_to(M.multiply(grad, dq), q, [x])]


@register_gradient("Polygamma")
def _polygamma_grad(op, grad):
    a, x = op.inputs
    dx = S.polygamma(M.add(a, _c(1, a)), x)
    return [None, sum_to(M.multiply(grad, dx), x, [a])]
