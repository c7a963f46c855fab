"""The element-wise math of ``nd.math``: trigonometric, hyperbolic and special
functions, the division variants, ``check_numerics`` and the small composites,
against TensorFlow's own values (computed once with TF 2.21, kept here), with
gradients against finite differences and TF's error wording."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_gradients import check_gradient
from test_math_ops import graph, run  # noqa: F401  (graph: a fresh one per test)

import nbdist as nd
from nbdist import errors

NAN, INF = float("nan"), float("inf")
M = nd.math


# name: (x, what TF 2.21 computes in float64), checked with /work/tfvenv
TF_UNARY = {
    "lgamma": ([-0.5, 0.5, 1.5, 3.0],
              [1.265512123, 0.5723649429, -0.1207822376, 0.6931471806]),
    "digamma": ([0.25, 0.5, 1.5, 3.0],
               [-4.227453533, -1.963510026, 0.03648997398, 0.9227843351]),
    "erf": ([-0.5, 0.1, 1.5, 3.0],
           [-0.5204998778, 0.112462916, 0.9661051465, 0.9999779095]),
    "erfc": ([-0.5, 0.1, 1.5, 3.0],
            [1.520499878, 0.887537084, 0.03389485352, 2.2090497e-05]),
    "erfinv": ([-0.5, 0.1, 0.9, 0.99],
              [-0.4769362762, 0.08885599049, 1.163087154, 1.821386368]),
    "erfcinv": ([0.1, 0.5, 1.5, 1.9],
               [1.163087154, 0.4769362762, -0.4769362762, -1.163087154]),
    "ndtri": ([0.1, 0.5, 0.75, 0.99],
             [-1.281551566, 0.0, 0.6744897502, 2.326347874]),
    "bessel_i0": ([-1.0, 0.5, 1.5, 3.0],
                 [1.266065878, 1.063483371, 1.64672319, 4.880792586]),
    "bessel_i0e": ([-1.0, 0.5, 1.5, 3.0],
                  [0.4657596076, 0.6450352704, 0.3674336091, 0.2430003542]),
    "bessel_i1": ([-1.0, 0.5, 1.5, 3.0],
                 [-0.565159104, 0.2578943054, 0.9816664286, 3.953370217]),
    "bessel_i1e": ([-1.0, 0.5, 1.5, 3.0],
                  [-0.2079104153, 0.1564208032, 0.2190393874, 0.1968267133]),
    "bessel_j0": ([0.25, 0.5, 1.5, 3.0],
                 [0.9844359293, 0.9384698072, 0.5118276717, -0.2600519549]),
    "bessel_j1": ([0.25, 0.5, 1.5, 3.0],
                 [0.1240259773, 0.2422684577, 0.5579365079, 0.3390589585]),
    "bessel_y0": ([0.25, 0.5, 1.5, 3.0],
                 [-0.9315730249, -0.4445187335, 0.3824489238, 0.37685001]),
    "bessel_y1": ([0.25, 0.5, 1.5, 3.0],
                 [-2.704105229, -1.471472393, -0.412308627, 0.3246744248]),
    "bessel_k0": ([0.25, 0.5, 1.5, 3.0],
                 [1.541506751, 0.9244190712, 0.2138055626, 0.03473950439]),
    "bessel_k0e": ([0.25, 0.5, 1.5, 3.0],
                  [1.979333849, 1.524109386, 0.9582100533, 0.697761598]),
    "bessel_k1": ([0.25, 0.5, 1.5, 3.0],
                 [3.747025974, 1.65644112, 0.2773878005, 0.04015643113]),
    "bessel_k1e": ([0.25, 0.5, 1.5, 3.0],
                  [4.811276588, 2.731009708, 1.243165874, 0.8065634801]),
    "dawsn": ([-1.0, 0.5, 1.5, 3.0],
             [-0.5380795069, 0.4244363835, 0.4282490711, 0.1782710306]),
    "expint": ([-1.0, 0.5, 1.5, 3.0],
              [NAN, 0.4542199049, 3.301285449, 9.933832571]),
    "fresnel_cos": ([-1.0, 0.5, 1.5, 3.0],
                   [-0.7798934004, 0.4923442259, 0.445261176, 0.6057207893]),
    "fresnel_sin": ([-1.0, 0.5, 1.5, 3.0],
                   [-0.4382591474, 0.06473243286, 0.6975049601, 0.496312999]),
    "spence": ([0.25, 0.5, 1.5, 3.0],
              [0.9784693929, 0.5822405265, -0.4484142069, -1.436746367]),
    "tan": ([-1.0, 0.5, 1.5, 3.0],
           [-1.557407725, 0.5463024898, 14.10141995, -0.1425465431]),
    "asin": ([-0.9, 0.1, 0.5, 0.99],
            [-1.119769515, 0.1001674212, 0.5235987756, 1.429256853]),
    "acos": ([-0.9, 0.1, 0.5, 0.99],
            [2.690565842, 1.470628906, 1.047197551, 0.1415394733]),
    "atan": ([-1.0, 0.5, 1.5, 3.0],
            [-0.7853981634, 0.463647609, 0.9827937232, 1.249045772]),
    "sinh": ([-1.0, 0.5, 1.5, 3.0],
            [-1.175201194, 0.5210953055, 2.129279455, 10.01787493]),
    "cosh": ([-1.0, 0.5, 1.5, 3.0],
            [1.543080635, 1.127625965, 2.352409615, 10.067662]),
    "asinh": ([-1.0, 0.5, 1.5, 3.0],
             [-0.881373587, 0.4812118251, 1.194763217, 1.818446459]),
    "acosh": ([1.0, 1.5, 2.0, 3.0],
             [0.0, 0.9624236501, 1.316957897, 1.762747174]),
    "atanh": ([-0.9, 0.1, 0.5, 0.99],
             [-1.47221949, 0.1003353477, 0.5493061443, 2.646652412]),
    "log1p": ([-0.5, 1e-08, 1.5, 3.0],
             [-0.6931471806, 9.99999995e-09, 0.9162907319, 1.386294361]),
    "expm1": ([-0.5, 1e-08, 1.5, 3.0],
             [-0.3934693403, 1.000000005e-08, 3.48168907, 19.08553692]),
    "softsign": ([-1.0, 0.5, 1.5, 3.0],
                [-0.5, 0.3333333333, 0.6, 0.75]),
    "log_sigmoid": ([-100.0, 0.5, 1.5, 3.0],
                   [-100.0, -0.4740769842, -0.201413278, -0.04858735157]),
}
# name: (x, y, what TF 2.21 computes in float64)
TF_BINARY = {
    "igamma": ([0.5, 1.0, 2.5, 4.0], [0.3, 2.0, 1.0, 4.5],
              [0.5614219739, 0.8646647168, 0.1508549639, 0.6577040442]),
    "igammac": ([0.5, 1.0, 2.5, 4.0], [0.3, 2.0, 1.0, 4.5],
               [0.4385780261, 0.1353352832, 0.8491450361, 0.3422959558]),
    "zeta": ([1.5, 2.0, 3.0, 4.5], [0.5, 1.0, 2.0, 3.0],
            [4.776537948, 1.644934067, 0.2020569032, 0.01051333694]),
    "polygamma": ([0.0, 1.0, 2.0, 3.0], [0.5, 1.0, 2.0, 3.0],
                 [-1.963510026, 1.644934067, -0.4041138063, 0.1189394023]),
    "atan2": ([-1.0, 1.0, 0.0, 2.0], [-1.0, -1.0, 1.0, 0.5],
             [-2.35619449, 2.35619449, 0.0, 1.325817664]),
    "xlogy": ([0.0, 1.0, 2.0, 3.0], [0.0, 0.5, 2.0, 3.0],
             [0.0, -0.6931471806, 1.386294361, 3.295836866]),
    "xdivy": ([0.0, 1.0, 2.0, 3.0], [0.0, 0.5, 2.0, 3.0],
             [0.0, 2.0, 1.0, 1.0]),
    "xlog1py": ([0.0, 1.0, 2.0, 3.0], [-1.0, 0.5, 2.0, 3.0],
               [0.0, 0.4054651081, 2.197224577, 4.158883083]),
    "div_no_nan": ([0.0, 1.0, 2.0, 3.0], [0.0, 0.0, 2.0, 4.0],
                           [0.0, 0.0, 1.0, 0.75]),
    "multiply_no_nan": ([INF, 1.0, 2.0, 3.0], [0.0, 0.0, 2.0, 4.0],
                                [0.0, 0.0, 4.0, 12.0]),
    "truncatediv": ([-7.5, 7.0, 2.0, -3.0], [2.0, -2.0, 3.0, 4.0],
                   [-3.0, -3.0, 0.0, -0.0]),
    "truncatemod": ([-7.5, 7.0, 2.0, -3.0], [2.0, -2.0, 3.0, 4.0],
                   [-1.5, 1.0, 2.0, -3.0]),
}

def _fn(name):
    return getattr(M, name, None) or getattr(M.special, name)


@pytest.mark.parametrize("name", sorted(TF_UNARY))
def test_unary_functions_match_tensorflow(name):
    x, want = TF_UNARY[name]
    got = run(_fn(name)(nd.constant(x, nd.float64)))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("name", sorted(TF_BINARY))
def test_binary_functions_match_tensorflow(name):
    x, y, want = TF_BINARY[name]
    fn = {"div_no_nan": M.divide_no_nan, "truncatediv": nd.truncatediv,
          "truncatemod": nd.truncatemod}.get(name) or getattr(M, name)
    got = run(fn(nd.constant(x, nd.float64), nd.constant(y, nd.float64)))
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)


def test_betainc_rint_lbeta_polyval_match_tensorflow():
    got = run([
        nd.betainc(nd.constant([0.5, 1.0, 2.0, 3.0], nd.float64),
                   nd.constant([2.0, 1.0, 3.0, 0.5], nd.float64),
                   nd.constant([0.2, 0.5, 0.7, 0.9], nd.float64)),
        nd.rint([0.5, 1.5, 2.5, -0.5, -1.7]),
        nd.lbeta(nd.constant([[1.0, 2.0], [0.5, 0.5]], nd.float64)),
        M.polyval([1.0, 2.0, 3.0], 2.0),
        nd.lbeta(nd.zeros([0])),
    ])
    np.testing.assert_allclose(got[0], [0.6260990337, 0.5, 0.9163, 0.4454155553],
                               rtol=1e-8)
    assert got[1].tolist() == [0.0, 2.0, 2.0, -0.0, -2.0]  # halves to even
    np.testing.assert_allclose(got[2], [-math.log(2), math.log(math.pi)])
    assert got[3] == 11.0  # 1*4 + 2*2 + 3
    assert got[4] == -INF  # an empty last axis


def test_float32_and_float16_keep_their_dtype():
    x32 = nd.constant([0.5, 1.5], nd.float32)
    x16 = nd.constant([0.5, 1.5], nd.float16)
    got = run([nd.lgamma(x32), nd.erf(x16), nd.asinh(x16), M.bessel_i1e(x32),
               nd.igamma(x32, x32), M.xlogy(x16, x16)])
    assert [g.dtype for g in got] == [np.float32, np.float16, np.float16,
                                      np.float32, np.float32, np.float16]
    np.testing.assert_allclose(got[0], [0.5723649429, -0.1207822376], rtol=1e-6)


def test_integer_truncation_and_division_by_zero():
    q, r = run([nd.truncatediv([-7, 7, 2, -3], [2, -2, 3, 4]),
                nd.truncatemod([-7, 7, 2, -3], [2, -2, 3, 4])])
    assert q.tolist() == [-3, -3, 0, 0] and r.tolist() == [-1, 1, 2, -3]
    with pytest.raises(errors.InvalidArgumentError, match="Integer division by zero"):
        run(nd.truncatediv([1, 2], [1, 0]))
    # integers divide as truediv does, then 0 where y is 0
    got = run(nd.div_no_nan([1, 2], [0, 2]))
    assert got.dtype == np.float64 and got.tolist() == [0.0, 1.0]


def test_polygamma_of_a_non_integer_order_is_nan_as_tf():
    got = run(nd.polygamma([0.5, 1.0], [2.0, 2.0]))
    assert np.isnan(got[0]) and got[1] == pytest.approx(0.6449341, rel=1e-6)


# -- gradients --------------------------------------------------------------------------
X = [0.3, 0.7, 1.2]
UNIT = [-0.6, 0.2, 0.5]
UNARY_GRADIENTS = {
    "tan": UNIT, "asin": UNIT, "acos": UNIT, "atan": X, "sinh": X, "cosh": X,
    "asinh": X, "acosh": [1.5, 2.0, 3.0], "atanh": UNIT, "log1p": X, "expm1": X,
    "softsign": [-1.5, 0.5, 2.0], "log_sigmoid": [-3.0, 0.5, 2.0],
    "lgamma": X, "digamma": X, "erf": UNIT, "erfc": UNIT, "erfinv": UNIT,
    "erfcinv": [0.3, 1.0, 1.6], "ndtri": [0.2, 0.5, 0.9], "bessel_i0": UNIT,
    "bessel_i0e": UNIT, "bessel_i1": UNIT, "bessel_i1e": UNIT, "bessel_j0": X,
    "bessel_j1": X, "bessel_y0": X, "bessel_y1": X, "bessel_k0": X,
    "bessel_k0e": X, "bessel_k1": X, "bessel_k1e": X, "dawsn": UNIT,
    "expint": X, "fresnel_cos": UNIT, "fresnel_sin": UNIT, "spence": X,
    "reciprocal_no_nan": [-2.0, 0.5, 3.0],
}


@pytest.mark.parametrize("name", sorted(UNARY_GRADIENTS))
def test_unary_gradients_match_finite_differences(name):
    check_gradient(_fn(name), [UNARY_GRADIENTS[name]], atol=1e-5)


def test_derivatives_at_the_removable_points_are_the_limits():
    # I1'(0) = J1'(0) = 1/2 and d spence/dx at 1 is -1: finite, not NaN.
    x = nd.constant([0.0, 0.0, 0.0, 1.0], nd.float64)
    ys = [M.bessel_i1(x[0]), M.bessel_i1e(x[1]), M.special.bessel_j1(x[2]),
          M.special.spence(x[3])]
    (g,) = nd.gradients(nd.add_n(ys), [x])
    np.testing.assert_allclose(run(g), [0.5, 0.5, 0.5, -1.0])


A3 = [0.5, 1.5, 3.0]
BINARY_GRADIENTS = [
    (nd.atan2, [[0.3, -1.0, 2.0], [1.5, 0.7, -0.4]], None),
    (M.divide_no_nan, [[0.3, -1.0, 2.0], [1.5, 0.7, -0.4]], None),
    (M.multiply_no_nan, [[0.3, -1.0, 2.0], [1.5, 0.7, -0.4]], None),
    (M.xlogy, [[0.3, -1.0, 2.0], [1.5, 0.7, 2.5]], None),
    (M.xdivy, [[0.3, -1.0, 2.0], [1.5, 0.7, 2.5]], None),
    (M.xlog1py, [[0.3, -1.0, 2.0], [1.5, 0.7, 2.5]], None),
    (nd.atan2, [[[0.3], [-1.0]], [1.5, 0.7, -0.4]], None),  # broadcast
    (nd.igamma, [A3, [0.4, 2.0, 2.5]], None),
    (nd.igammac, [A3, [0.4, 2.0, 2.5]], None),
    (lambda a, x: nd.igamma(a, x), [[2.0], [0.4, 2.0, 6.5]], None),
    (nd.igamma, [[900.0, 1500.0], [950.0, 1480.0]], None),  # far in the tail
    (nd.zeta, [[2.0, 3.0, 4.5], [0.5, 1.0, 2.0]], [1]),
    (nd.polygamma, [[0.0, 1.0, 2.0], [0.5, 1.0, 2.0]], [1]),
    (lambda a, b, x: nd.betainc(a, b, x), [A3, [2.0, 0.5, 1.5], [0.2, 0.5, 0.9]],
     [2]),
]


@pytest.mark.parametrize("case", range(len(BINARY_GRADIENTS)))
def test_binary_gradients_match_finite_differences(case):
    fn, inputs, wrt = BINARY_GRADIENTS[case]
    check_gradient(fn, inputs, wrt=wrt, atol=1e-5)


def test_only_the_inputs_tf_differentiates_get_gradients():
    a, b, x = (nd.constant(v, nd.float64) for v in ([1.0], [2.0], [0.5]))
    assert nd.gradients(nd.betainc(a, b, x), [a, b]) == [None, None]
    assert nd.gradients(nd.zeta(a, b), [a])[0] is None
    assert nd.gradients(nd.polygamma(a, b), [a])[0] is None
    assert nd.gradients(nd.rint(x), [x])[0] is None
    assert nd.gradients(nd.truncatediv(x, b), [x, b]) == [None, None]


# -- check_numerics ---------------------------------------------------------------------
@pytest.mark.parametrize("values, what", [([1.0, NAN], "NaN"), ([INF, 1.0], "Inf"),
                                          ([NAN, -INF], "Inf and NaN")])
def test_check_numerics_fails_with_tf_wording(values, what):
    y = nd.check_numerics(nd.constant(values), "bad thing")
    with pytest.raises(errors.InvalidArgumentError,
                       match=f"bad thing : Tensor had {what} values"):
        run(y)


def test_check_numerics_passes_finite_values_and_checks_the_gradient():
    x = nd.placeholder(nd.float32, [2])
    y = nd.check_numerics(x * 2.0, "y")
    assert y.shape.as_list() == [2]
    assert run(y, {x: [1.0, 2.0]}).tolist() == [2.0, 4.0]
    (g,) = nd.gradients(y, [x], grad_ys=nd.constant([NAN, 1.0]))
    with pytest.raises(errors.InvalidArgumentError,
                       match="Not a number .NaN. or infinity .Inf. values detected "
                             "in gradient. y : Tensor had NaN values"):
        run(g, {x: [1.0, 2.0]})
    with pytest.raises(TypeError, match="DataType int32 not in list of allowed"):
        nd.check_numerics([1, 2], "ints")


# -- composites ---------------------------------------------------------------------------
def test_scalar_mul_scales_tensors_and_indexed_slices():
    s = nd.IndexedSlices(nd.constant([[1.0, 2.0]]), nd.constant([3]),
                         nd.constant([5, 2]))
    out = nd.scalar_mul(3.0, s)
    assert isinstance(out, nd.IndexedSlices)
    values, dense = run([out.values, nd.scalar_mul(2.0, [1.0, 2.0])])
    assert values.tolist() == [[3.0, 6.0]] and dense.tolist() == [2.0, 4.0]
    with pytest.raises(ValueError, match="Only scalar multiply works"):
        nd.scalar_mul([2.0, 3.0], [1.0, 2.0])


def test_accumulate_n_sums_and_checks_shapes():
    assert run(nd.accumulate_n([[1.0, 2.0], [3.0, 4.0]])).tolist() == [4.0, 6.0]
    with pytest.raises(ValueError, match="not compatible|incompatible"):
        nd.accumulate_n([[1.0, 2.0]], shape=[3])
    with pytest.raises(ValueError, match="at least one Tensor"):
        nd.accumulate_n([])


def test_monotonic_predicates_on_the_flattened_tensor():
    got = run([nd.is_non_decreasing([[1, 2], [2, 5]]),
               nd.is_strictly_increasing([[1, 2], [2, 5]]),
               nd.is_strictly_increasing([4.0]), nd.is_non_decreasing([3, 1])])
    assert [bool(v) for v in got] == [True, False, True, False]


def test_sobol_sample_is_tfs_sequence():
    # TF 2.21: tf.math.sobol_sample(3, 3, skip=2)
    got = run(M.sobol_sample(3, 3, skip=2, dtype=nd.float64))
    assert got.tolist() == [[0.25, 0.75, 0.75], [0.375, 0.375, 0.625],
                            [0.875, 0.875, 0.125]]
    assert M.sobol_sample(3, 5).shape.as_list() == [5, 3]


def test_static_shapes_broadcast_and_mismatches_name_the_op():
    x = nd.placeholder(nd.float32, [None, 3])
    assert nd.atan2(x, nd.zeros([1, 3])).shape.as_list() == [None, 3]
    assert nd.igamma(x, 1.0).shape.as_list() == [None, 3]
    assert nd.betainc(1.0, 2.0, x).shape.as_list() == [None, 3]
    with pytest.raises(ValueError, match="'Xlogy'"):
        M.xlogy(nd.zeros([2, 3]), nd.zeros([4]))
    with pytest.raises(TypeError, match="int32 not in list"):
        nd.lgamma([1, 2])
