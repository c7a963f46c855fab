"""NumPy kernels of ``nbdist.ops.elementary_math_ops``: trigonometric and
hyperbolic functions, ``Log1p``/``Expm1``/``Rint``/``Softsign``, the division and
product variants, ``NextAfter`` and ``CheckNumerics``.

As the other element-wise kernels, they run with NumPy's floating-point warnings
off (``atanh(1)`` is inf, ``asin(2)`` NaN) and integer division by zero is an
``InvalidArgumentError`` naming the node.
"""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, ignore_fp_errors, op_error
from nbdist.executor.kernels.math_kernels import _unary_factory
from nbdist.ops import elementary_math_ops  # noqa: F401  (registers the ops)


def _same_dtype(fn):
    # NumPy may widen (float16 through float32); the output keeps x's dtype.
    def out(x, *rest):
        r = fn(x, *rest)
        return np.asarray(r).astype(np.asarray(x).dtype, copy=False)

    return out


def _where_x_zero(fn):
    # xlogy & co.: 0 where x is 0, whatever y is (NaN, inf, 0).
    def out(x, y):
        x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
        return np.where(x == 0, np.zeros((), x.dtype), fn(x, y)).astype(x.dtype)

    return out


def _where_y_zero(fn):
    def out(x, y):
        x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
        return np.where(y == 0, np.zeros((), x.dtype), fn(x, y)).astype(x.dtype)

    return out


_UNARY = {
    "Tan": np.tan,
    "Asin": np.arcsin,
    "Acos": np.arccos,
    "Atan": np.arctan,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Asinh": np.arcsinh,
    "Acosh": np.arccosh,
    "Atanh": np.arctanh,
    "Log1p": np.log1p,
    "Expm1": np.expm1,
    "Rint": np.rint,
    "Softsign": _same_dtype(lambda x: x / (np.abs(x) + 1)),
}
_BINARY = {
    "Atan2": np.arctan2,
    "DivNoNan": _where_y_zero(np.true_divide),
    "MulNoNan": _where_y_zero(np.multiply),
    "Xlogy": _where_x_zero(lambda x, y: x * np.log(y)),
    "Xdivy": _where_x_zero(np.true_divide),
    "Xlog1py": _where_x_zero(lambda x, y: x * np.log1p(y)),
    "NextAfter": np.nextafter,
}


def _truncate_div(x, y):
    if np.asarray(x).dtype.kind in "iu":
        q = np.abs(x) // np.abs(y)
        return np.where((np.asarray(x) < 0) != (np.asarray(y) < 0), -q, q).astype(
            np.result_type(x, y))
    return np.trunc(np.true_divide(x, y))


def _binary_factory(fn, int_division=False):
    def factory(node):
        @ignore_fp_errors
        def compute(step, x, y):
            if int_division and np.asarray(y).dtype.kind in "iu" and not np.all(y):
                raise op_error(node, "Integer division by zero")
            try:
                np.broadcast_shapes(np.shape(x), np.shape(y))
            except ValueError:
                raise op_error(node, f"Incompatible shapes: {fmt(np.shape(x))} vs. "
                                     f"{fmt(np.shape(y))}") from None
            return fn(x, y)

        return compute

    return factory


for _t, _fn in _UNARY.items():
    register_kernel(_t)(_unary_factory(_fn))
for _t, _fn in _BINARY.items():
    register_kernel(_t)(_binary_factory(_fn))
register_kernel("TruncateDiv")(_binary_factory(_truncate_div, int_division=True))
register_kernel("TruncateMod")(_binary_factory(np.fmod, int_division=True))


@register_kernel("CheckNumerics")
def check_numerics_kernel(node):
    message = node.attrs.get("message", "")
    if isinstance(message, bytes):
        message = message.decode()

    def compute(step, x):
        x = np.asarray(x)
        if not np.isfinite(x).all():
            nan, inf = bool(np.isnan(x).any()), bool(np.isinf(x).any())
            what = "Inf and NaN" if nan and inf else "NaN" if nan else "Inf"
            raise op_error(node, f"{message} : Tensor had {what} values")
        return x.copy()

    return compute
