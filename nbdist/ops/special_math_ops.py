"""Special functions: the gamma family (``lgamma``, ``digamma``, ``polygamma``,
``igamma``/``igammac``, ``lbeta``, ``betainc``, ``zeta``), the error function
family (``erf``, ``erfc``, ``erfinv``, ``erfcinv``, ``ndtri``), the Bessel
functions, and the rest of ``tf.math.special`` (``dawsn``, ``expint``,
``fresnel_cos``/``fresnel_sin``, ``spence``). Gradients: ``special_math_grad``.

The kernels evaluate them with SciPy (``scipy.special``), the reference
implementation TF's own tests compare against.

>>> import nbdist as nd
>>> y = nd.lgamma(nd.constant([1.0, 5.0]))
>>> with nd.Session() as s:
...     [round(float(v), 4) for v in s.run(y)]
[0.0, 3.1781]
"""

from __future__ import annotations

import math

from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import FLOAT, check_type, convert_pair, op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import broadcast_shapes
from nbdist.ops import math_ops as M
from nbdist.ops.math_ops_elementwise import _binary, _binary_infer, _unary, _unary_infer

_T = {"T": ("type", None)}

# op type -> (Python name in ``nd.math`` or ``nd.math.special``, what it is)
UNARY_OPS = {
    "Lgamma": ("lgamma", "``log(abs(Gamma(x)))``"),
    "Digamma": ("digamma", "the derivative of ``lgamma`` (psi)"),
    "Erf": ("erf", "the error function"),
    "Erfc": ("erfc", "``1 - erf(x)``, accurate where erf(x) is near 1"),
    "Erfinv": ("erfinv", "the inverse of ``erf`` on (-1, 1); NaN outside [-1, 1]"),
    "Ndtri": ("ndtri", "the inverse of the standard normal CDF on (0, 1)"),
    "BesselI0": ("bessel_i0", "the modified Bessel function I0"),
    "BesselI0e": ("bessel_i0e", "``exp(-abs(x)) * bessel_i0(x)``"),
    "BesselI1": ("bessel_i1", "the modified Bessel function I1"),
    "BesselI1e": ("bessel_i1e", "``exp(-abs(x)) * bessel_i1(x)``"),
    "BesselJ0": ("bessel_j0", "the Bessel function J0"),
    "BesselJ1": ("bessel_j1", "the Bessel function J1"),
    "BesselY0": ("bessel_y0", "the Bessel function Y0"),
    "BesselY1": ("bessel_y1", "the Bessel function Y1"),
    "BesselK0": ("bessel_k0", "the modified Bessel function K0"),
    "BesselK0e": ("bessel_k0e", "``exp(x) * bessel_k0(x)``"),
    "BesselK1": ("bessel_k1", "the modified Bessel function K1"),
    "BesselK1e": ("bessel_k1e", "``exp(x) * bessel_k1(x)``"),
    "Dawsn": ("dawsn", "Dawson's integral ``exp(-x**2) * int_0^x exp(t**2) dt``"),
    "Expint": ("expint", "the exponential integral ``Ei(x)``"),
    "FresnelCos": ("fresnel_cos", "``int_0^x cos(pi * t**2 / 2) dt``"),
    "FresnelSin": ("fresnel_sin", "``int_0^x sin(pi * t**2 / 2) dt``"),
    "Spence": ("spence", "Spence's integral ``int_1^x log(t) / (1 - t) dt``"),
}
BINARY_OPS = ("Igamma", "Igammac", "IgammaGradA", "Zeta", "Polygamma")

for _t in UNARY_OPS:
    register_op(_t, _unary_infer(FLOAT), attrs=_T, num_inputs=1)
for _t in BINARY_OPS:
    register_op(_t, _binary_infer(FLOAT), attrs=_T, num_inputs=2)


def _betainc_infer(c):
    d = c.check_same_dtypes()
    check_type(c, 0, FLOAT, "a")
    shape = broadcast_shapes(broadcast_shapes(c.shape(0), c.shape(1)), c.shape(2))
    return [(d, shape)]


register_op("Betainc", _betainc_infer, attrs=_T, num_inputs=3)


def _unary_wrapper(op_type, py_name, what):
    def fn(x, name=None):
        return _unary(op_type, x, name)

    fn.__name__ = fn.__qualname__ = py_name
    fn.__doc__ = f"Element-wise {what} (op ``{op_type}``)."
    return fn


# lgamma, digamma, erf ... bessel_i0 ... spence
for _t, (_name, _what) in UNARY_OPS.items():
    globals()[_name] = _unary_wrapper(_t, _name, _what)


def igamma(a, x, name=None):
    """The lower regularized incomplete gamma function ``P(a, x)``.

    >>> import nbdist as nd
    >>> with nd.Session() as s:  # P(1, x) = 1 - exp(-x)
    ...     round(float(s.run(nd.igamma(1.0, 2.0))), 4)
    0.8647
    """
    return _binary("Igamma", a, x, name)


def igammac(a, x, name=None):
    """The upper regularized incomplete gamma function ``Q(a, x) = 1 - P(a, x)``."""
    return _binary("Igammac", a, x, name)


def igamma_grad_a(a, x, name=None):
    """``d igamma(a, x) / da`` (the gradient of ``igamma`` with respect to a)."""
    return _binary("IgammaGradA", a, x, name)


def zeta(x, q, name=None):
    """The Hurwitz zeta function ``sum_n (n + q) ** -x``; ``zeta(2, 1)`` is
    ``pi**2 / 6``."""
    return _binary("Zeta", x, q, name)


def polygamma(a, x, name=None):
    """The ``a``-th derivative of ``digamma`` (``a`` a non-negative integer value;
    NaN otherwise)."""
    return _binary("Polygamma", a, x, name)


def betainc(a, b, x, name=None):
    """The regularized incomplete beta function ``I_x(a, b)``."""
    with op_scope(name, "Betainc", [a, b, x]) as (g, scope):
        a, x = convert_pair(a, x, "a", "x")
        b = convert_to_tensor(b, dtype=a.dtype.base_dtype, name="b")
        return g.create_op("Betainc", [a, b, x], {"T": a.dtype.base_dtype},
                           name=scope).outputs[0]


def erfcinv(x, name=None):
    """The inverse of ``erfc`` on (0, 2): ``-ndtri(x / 2) / sqrt(2)``."""
    with op_scope(name, "erfcinv", [x]) as (_g, scope):
        x = convert_to_tensor(x, name="x")
        half = convert_to_tensor(0.5, dtype=x.dtype.base_dtype)
        root2 = convert_to_tensor(math.sqrt(2.0), dtype=x.dtype.base_dtype)
        return M.realdiv(M.negative(_unary("Ndtri", M.multiply(x, half), None)),
                         root2, name=scope)


def lbeta(x, name=None):
    """``log(abs(Beta(x)))`` over the last axis: ``sum(lgamma(x)) -
    lgamma(sum(x))``; -inf for an empty last axis.

    >>> import nbdist as nd
    >>> with nd.Session() as s:  # Beta(1, 2) = 1/2
    ...     round(float(s.run(nd.lbeta([1.0, 2.0]))), 4)
    -0.6931
    """
    with op_scope(name, "lbeta", [x]) as (_g, scope):
        x = convert_to_tensor(x, name="x")
        if x.dtype.base_dtype not in FLOAT:
            raise TypeError(f"lbeta: x must be a float tensor, got "
                            f"{x.dtype.base_dtype.name}")
        log_prod_gamma = M.reduce_sum(_unary("Lgamma", x, None), axis=[-1])
        log_gamma_sum = _unary("Lgamma", M.reduce_sum(x, axis=[-1]), None)
        return M.subtract(log_prod_gamma, log_gamma_sum, name=scope)


__all__ = ["betainc", "digamma", "erf", "erfc", "igamma", "igammac", "lbeta",
           "lgamma", "polygamma", "zeta"]
