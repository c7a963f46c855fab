"""Kernels of ``nbdist.ops.special_math_ops``, on ``scipy.special``, and of
``SobolSample`` (``nbdist.ops.sobol_ops``), on ``scipy.stats.qmc``.

SciPy is imported by the first kernel built, not with this module: it takes
about half a second, which only graphs that use a special function should pay.
Results keep the input's dtype (SciPy computes float16 in float32).
"""

from __future__ import annotations

import functools
import importlib
import warnings

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, ignore_fp_errors, op_error
from nbdist.ops import sobol_ops, special_math_ops  # noqa: F401  (registers the ops)


@functools.cache
def _scipy_special():
    return importlib.import_module("scipy.special")


@functools.cache
def _scipy_qmc():
    return importlib.import_module("scipy.stats.qmc")


# op type -> function of scipy.special (by name), or of the module
_UNARY = {
    "Lgamma": "gammaln", "Digamma": "psi", "Erf": "erf", "Erfc": "erfc",
    "Erfinv": "erfinv", "Ndtri": "ndtri", "BesselI0": "i0", "BesselI0e": "i0e",
    "BesselI1": "i1", "BesselI1e": "i1e", "BesselJ0": "j0", "BesselJ1": "j1",
    "BesselY0": "y0", "BesselY1": "y1", "BesselK0": "k0", "BesselK0e": "k0e",
    "BesselK1": "k1", "BesselK1e": "k1e", "Dawsn": "dawsn",
    # Ei(x) for x >= 0 only: TF gives NaN below 0 (SciPy the real part of Ei)
    "Expint": lambda sp: lambda x: np.where(np.asarray(x) < 0, np.nan, sp.expi(x)),
    "FresnelCos": lambda sp: lambda x: sp.fresnel(x)[1],
    "FresnelSin": lambda sp: lambda x: sp.fresnel(x)[0],
    "Spence": "spence",
}
_BINARY = {
    "Igamma": "gammainc", "Igammac": "gammaincc", "Zeta": "zeta",
    "Polygamma": lambda sp: functools.partial(_polygamma, sp),
    "IgammaGradA": lambda sp: functools.partial(_igamma_grad_a, sp),
}


def _function(spec):
    sp = _scipy_special()
    return getattr(sp, spec) if isinstance(spec, str) else spec(sp)


def _polygamma(sp, a, x):
    # Defined for non-negative integer orders only (NaN elsewhere), as TF.
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    ok = (a >= 0) & (a == np.floor(a))
    out = np.full(a.shape, np.nan)
    out[ok] = sp.polygamma(a[ok].astype(np.int64), x[ok])
    return out


def _igamma_grad_a(sp, a, x, series_below=1000.0):
    """dP(a, x)/da. For x below ``series_below``, from the series P = sum_n
    x**(a+n) e**-x / Gamma(a+n+1) differentiated term by term (sum_n term_n *
    (log x - psi(a+n+1))), whose terms peak near n = x; above, where that
    series would need thousands of terms, by Richardson-extrapolated central
    differences of ``gammainc``."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    shape = a.shape
    a, x = a.ravel(), x.ravel()
    out = np.zeros(a.shape)
    out[~((x >= 0) & (a > 0))] = np.nan
    far = (a > 0) & (x >= series_below) & np.isfinite(x)
    if far.any():
        af, xf = a[far], x[far]

        def slope(h):
            return (sp.gammainc(af + h, xf) - sp.gammainc(af - h, xf)) / (2 * h)

        h = 1e-3 * np.minimum(af, 1.0)
        out[far] = (4 * slope(h / 2) - slope(h)) / 3
    live = (x > 0) & (a > 0) & (x < series_below)
    log_x = np.log(np.where(live, x, 1.0))
    terms = int(series_below + 12 * np.sqrt(series_below) + 60)
    for n in range(terms):
        if not live.any():
            break
        idx = np.flatnonzero(live)
        an = a[idx] + n
        log_term = an * log_x[idx] - x[idx] - sp.gammaln(an + 1)
        term = np.exp(log_term) * (log_x[idx] - sp.psi(an + 1))
        out[idx] += term
        # Past the peak (n > x) the terms only shrink: stop once negligible.
        done = (an > x[idx]) & (np.abs(term) <= 1e-17 * np.abs(out[idx]))
        done |= (an > x[idx]) & (log_term < -745)  # exp underflows to 0
        live[idx[done]] = False
    return out.reshape(shape)


def _same_dtype(fn):
    def run(*args):
        dtype = np.result_type(*[np.asarray(v).dtype for v in args])
        return np.asarray(fn(*args)).astype(dtype, copy=False)

    return run


def _factory(spec, arity):
    def factory(node):
        fn = _same_dtype(_function(spec))

        @ignore_fp_errors
        def compute(step, *args):
            if arity > 1:
                try:
                    np.broadcast_shapes(*[np.shape(v) for v in args])
                except ValueError:
                    shapes = " vs. ".join(fmt(np.shape(v)) for v in args)
                    raise op_error(node, f"Incompatible shapes: {shapes}") from None
            return fn(*args)

        return compute

    return factory


for _t, _spec in _UNARY.items():
    register_kernel(_t)(_factory(_spec, 1))
for _t, _spec in _BINARY.items():
    register_kernel(_t)(_factory(_spec, 2))
register_kernel("Betainc")(_factory("betainc", 3))


@register_kernel("SobolSample")
def sobol_sample_kernel(node):
    qmc = _scipy_qmc()
    out_type = np.dtype(node.attrs["dtype"].as_numpy_dtype)

    def compute(step, dim, num_results, skip):
        dim, n, skip = int(dim), int(num_results), int(skip)
        for what, v, low in (("dim", dim, 1), ("num_results", n, 1),
                             ("skip", skip, 0)):
            if v < low:
                raise op_error(node, f"{what} must be at least {low}, got {v}")
        engine = qmc.Sobol(dim, scramble=False)
        engine.fast_forward(skip + 1)  # TF's sequence starts after the zero point
        with warnings.catch_warnings():
            # (SciPy warns that n not a power of 2 loses balance: TF's n is free)
            warnings.simplefilter("ignore", UserWarning)
            return engine.random(n).astype(out_type)

    return compute
