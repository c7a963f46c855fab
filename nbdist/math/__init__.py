"""``nd.math``: TF1's ``tf.compat.v1.math``, every name of it.

Most names are the top-level ops (``nd.math.add is nd.add``) or ``nd.nn``'s
(``nd.math.softplus is nd.nn.softplus``); the rest (``xlogy``, ``erfinv``,
``reduce_std``, ``sobol_sample`` ...) live here only, as in TF, and
``nd.math.special`` holds ``tf.math.special``.

Left out: none (TF 2.21's ``tf.compat.v1.math`` has no ragged or eager-only
names). ``approx_max_k``/``approx_min_k``, TF's TPU approximations, are exact
here, which meets any ``recall_target``.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.math.cumsum([1, 2, 3])).tolist()
[1, 3, 6]
"""

from __future__ import annotations

import importlib

from nbdist.math import special

# module -> the names of ``tf.math`` it defines
_SOURCES = {
    "nbdist.ops.math_ops_elementwise": """
        add add_n ceil cos divide equal exp floor floordiv floormod greater
        greater_equal is_finite is_inf is_nan less less_equal log logical_and
        logical_not logical_or logical_xor maximum minimum mod multiply negative
        not_equal pow reciprocal round rsqrt sigmoid sign sin sqrt square
        squared_difference subtract tanh truediv""",
    "nbdist.ops.math_ops_reduction": """
        argmax argmin count_nonzero reduce_all reduce_any reduce_logsumexp
        reduce_max reduce_mean reduce_min reduce_prod reduce_sum""",
    "nbdist.ops.complex_ops": "abs angle conj imag real",
    "nbdist.ops.array_ops_transform": "invert_permutation",
    "nbdist.ops.nn_ops": "in_top_k l2_normalize log_softmax softmax softplus",
    "nbdist.ops.nn_norm_ops": "top_k zero_fraction",
    "nbdist.ops.elementary_math_ops": """
        accumulate_n acos acosh asin asinh atan atan2 atanh cosh divide_no_nan
        expm1 is_non_decreasing is_strictly_increasing log1p log_sigmoid
        multiply_no_nan nextafter polyval reciprocal_no_nan rint scalar_mul sinh
        softsign tan xdivy xlog1py xlogy""",
    "nbdist.ops.special_math_ops": """
        betainc bessel_i0 bessel_i0e bessel_i1 bessel_i1e digamma erf erfc
        erfcinv erfinv igamma igammac lbeta lgamma ndtri polygamma zeta""",
    "nbdist.ops.segment_ops": """
        segment_max segment_mean segment_min segment_prod segment_sum
        unsorted_segment_max unsorted_segment_mean unsorted_segment_min
        unsorted_segment_prod unsorted_segment_sqrt_n unsorted_segment_sum""",
    "nbdist.ops.cumulative_ops": "cumprod cumsum cumulative_logsumexp",
    "nbdist.ops.sort_ops": "approx_max_k approx_min_k",
    "nbdist.ops.statistics_ops": """
        bincount confusion_matrix reduce_euclidean_norm reduce_std
        reduce_variance""",
    "nbdist.ops.sobol_ops": "sobol_sample",
}

__all__ = ["special"]
for _module, _names in _SOURCES.items():
    _mod = importlib.import_module(_module)
    for _n in _names.split():
        globals()[_n] = getattr(_mod, _n)
        __all__.append(_n)
__all__.sort()
