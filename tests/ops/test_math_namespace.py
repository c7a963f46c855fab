"""``nd.math`` has every name of TF1's ``tf.compat.v1.math``, and ``nd`` every
math name TF1 has at its top level; each forwards to the one op nbdist has."""

from __future__ import annotations

import nbdist as nd

# The names of TF 2.21's tf.compat.v1.math, generated with /work/tfvenv:
#   python -c "import tensorflow as tf; print(sorted(n for n in
#              dir(tf.compat.v1.math) if not n.startswith('_')))"
TF_MATH = [
    "abs", "accumulate_n", "acos", "acosh", "add", "add_n", "angle", "approx_max_k",
    "approx_min_k", "argmax", "argmin", "asin", "asinh", "atan", "atan2", "atanh",
    "bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e", "betainc", "bincount",
    "ceil", "confusion_matrix", "conj", "cos", "cosh", "count_nonzero", "cumprod",
    "cumsum", "cumulative_logsumexp", "digamma", "divide", "divide_no_nan", "equal",
    "erf", "erfc", "erfcinv", "erfinv", "exp", "expm1", "floor", "floordiv",
    "floormod", "greater", "greater_equal", "igamma", "igammac", "imag", "in_top_k",
    "invert_permutation", "is_finite", "is_inf", "is_nan", "is_non_decreasing",
    "is_strictly_increasing", "l2_normalize", "lbeta", "less", "less_equal",
    "lgamma", "log", "log1p", "log_sigmoid", "log_softmax", "logical_and",
    "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "mod",
    "multiply", "multiply_no_nan", "ndtri", "negative", "nextafter", "not_equal",
    "polygamma", "polyval", "pow", "real", "reciprocal", "reciprocal_no_nan",
    "reduce_all", "reduce_any", "reduce_euclidean_norm", "reduce_logsumexp",
    "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_std",
    "reduce_sum", "reduce_variance", "rint", "round", "rsqrt", "scalar_mul",
    "segment_max", "segment_mean", "segment_min", "segment_prod", "segment_sum",
    "sigmoid", "sign", "sin", "sinh", "sobol_sample", "softmax", "softplus",
    "softsign", "special", "sqrt", "square", "squared_difference", "subtract",
    "tan", "tanh", "top_k", "truediv", "unsorted_segment_max",
    "unsorted_segment_mean", "unsorted_segment_min", "unsorted_segment_prod",
    "unsorted_segment_sqrt_n", "unsorted_segment_sum", "xdivy", "xlog1py", "xlogy",
    "zero_fraction", "zeta",
]

# The math names TF 2.21 has at the top level of tf.compat.v1 (the names above
# that are also in dir(tf.compat.v1), plus cumsum ... truncatemod, sort,
# argsort, check_numerics, div_no_nan and realdiv), generated with /work/tfvenv.
TF_TOP_LEVEL_MATH = [
    "abs", "accumulate_n", "acos", "acosh", "add", "add_n", "angle", "argmax",
    "argmin", "argsort", "asin", "asinh", "atan", "atan2", "atanh", "betainc",
    "bincount", "ceil", "check_numerics", "confusion_matrix", "conj", "cos", "cosh",
    "count_nonzero", "cumprod", "cumsum", "digamma", "div", "div_no_nan", "divide",
    "equal", "erf", "erfc", "exp", "expm1", "floor", "floordiv", "floormod",
    "greater", "greater_equal", "igamma", "igammac", "imag", "invert_permutation",
    "is_finite", "is_inf", "is_nan", "is_non_decreasing", "is_strictly_increasing",
    "lbeta", "less", "less_equal", "lgamma", "log", "log1p", "log_sigmoid",
    "logical_and", "logical_not", "logical_or", "logical_xor", "maximum", "minimum",
    "mod", "multiply", "negative", "not_equal", "polygamma", "pow", "real",
    "realdiv", "reciprocal", "reduce_all", "reduce_any", "reduce_logsumexp",
    "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "rint",
    "round", "rsqrt", "scalar_mul", "segment_max", "segment_mean", "segment_min",
    "segment_prod", "segment_sum", "sigmoid", "sign", "sin", "sinh", "sort", "sqrt",
    "square", "squared_difference", "subtract", "tan", "tanh", "truediv",
    "truncatediv", "truncatemod", "unsorted_segment_max", "unsorted_segment_mean",
    "unsorted_segment_min", "unsorted_segment_prod", "unsorted_segment_sqrt_n",
    "unsorted_segment_sum", "zeta",
]


def test_every_tf_math_name_resolves_in_nd_math():
    missing = [n for n in TF_MATH if not hasattr(nd.math, n)]
    assert missing == []
    assert sorted(nd.math.__all__) == sorted(TF_MATH)


def test_every_tf1_top_level_math_name_resolves_in_nd():
    assert [n for n in TF_TOP_LEVEL_MATH if not hasattr(nd, n)] == []


def test_math_names_are_the_ops_nbdist_has_elsewhere():
    for n in ("add", "reduce_sum", "cumsum", "segment_sum", "lgamma", "atan2",
              "unsorted_segment_sum", "abs"):
        assert getattr(nd.math, n) is getattr(nd, n), n
    for n in ("softplus", "softmax", "log_softmax", "top_k", "in_top_k",
              "l2_normalize", "zero_fraction", "softsign"):
        assert getattr(nd.math, n) is getattr(nd.nn, n), n
    assert nd.compat.v1.math is nd.math
    assert nd.math.special.bessel_i0 is nd.math.bessel_i0

