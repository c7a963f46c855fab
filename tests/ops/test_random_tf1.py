"""``tf.random``'s other samplers: ``categorical``/``multinomial``, ``gamma``,
``poisson`` and the stateless family.

Oracles are the distributions' moments and frequencies (NumPy/SciPy formulas,
20 000 draws, tolerances of > 5 standard errors) and the determinism TF
promises: a stateless op's values depend only on its seed; a seeded stateful op
repeats across sessions. The values themselves differ from TF's (its Philox
kernels are not reproduced; see ``random_distribution_ops``).
"""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

R = nd.compat.v1.random
N = 20000


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def run(x):
    with nd.Session() as s:
        return s.run(x)


def test_categorical_frequencies_follow_softmax():
    probs = np.array([0.1, 0.2, 0.7])
    draws = run(R.categorical(np.log([probs, probs[::-1]]), N, seed=1))
    assert draws.shape == (2, N) and draws.dtype == np.int64
    for row, p in zip(draws, (probs, probs[::-1])):
        freq = np.bincount(row, minlength=3) / N
        np.testing.assert_allclose(freq, p, atol=5 * np.sqrt(0.25 / N))
    # -inf logits are never drawn; multinomial takes output_dtype.
    m = run(R.multinomial([[0.0, -np.inf]], 50, output_dtype=nd.int32))
    assert m.dtype == np.int32 and not m.any()


def test_seeded_stateful_samplers_repeat_across_sessions():
    nd.set_random_seed(7)
    c = R.categorical([[0.0, 1.0]], 10)
    g = R.gamma([5], 2.0)
    assert np.array_equal(run(c), run(c)) and np.array_equal(run(g), run(g))


def test_gamma_and_poisson_moments():
    alpha, beta = np.array([2.0, 5.0]), np.array([1.0, 2.0])
    g = run(R.gamma([N], alpha, beta=beta, seed=2))
    assert g.shape == (N, 2) and g.dtype == np.float32
    # Gamma(alpha, rate beta): mean alpha/beta, variance alpha/beta**2.
    se = np.sqrt(alpha / beta**2 / N)
    assert np.all(np.abs(g.mean(0) - alpha / beta) < 6 * se)
    lam = np.array([3.0, 10.0])
    p = run(R.poisson(lam, [N], seed=4))
    assert p.shape == (N, 2) and p.dtype == np.float32
    assert np.all(np.abs(p.mean(0) - lam) < 6 * np.sqrt(lam / N))
    np.testing.assert_allclose(p.var(0), lam, rtol=0.1)


def test_stateless_values_depend_only_on_the_seed():
    a = R.stateless_uniform([4], seed=[1, 2])
    b = R.stateless_uniform([4], seed=[1, 2])
    c = R.stateless_uniform([4], seed=[1, 3])
    va, vb, vc = run([a, b, c])
    assert np.array_equal(va, vb) and not np.array_equal(va, vc)
    assert np.array_equal(va, run(a))   # and across runs / sessions
    with pytest.raises(ValueError, match="shape \\[2\\]"):
        R.stateless_normal([2], seed=[1, 2, 3])


def test_stateless_distributions():
    ints = run(R.stateless_uniform([N], seed=[1, 2], minval=3, maxval=7,
                                   dtype=nd.int32))
    assert ints.dtype == np.int32 and set(np.unique(ints)) == {3, 4, 5, 6}
    with pytest.raises(ValueError, match="maxval"):
        R.stateless_uniform([2], seed=[1, 2], dtype=nd.int32)
    normal = run(R.stateless_normal([N], seed=[5, 6], mean=1.0, stddev=2.0))
    assert abs(normal.mean() - 1.0) < 6 * 2 / np.sqrt(N)
    trunc = run(R.stateless_truncated_normal([N], seed=[5, 6]))
    assert np.abs(trunc).max() <= 2.0
    lo, hi = 0.5, 1.0
    ptn = run(R.stateless_parameterized_truncated_normal(
        [N], seed=[1, 2], minvals=lo, maxvals=hi))
    assert ptn.min() >= lo and ptn.max() <= hi
    binom = run(R.stateless_binomial([N], seed=[1, 1], counts=10.0, probs=0.3))
    assert abs(binom.mean() - 3.0) < 6 * np.sqrt(2.1 / N)
    pois = run(R.stateless_poisson([N], seed=[1, 1], lam=2.0))
    assert pois.dtype == np.int32 and abs(pois.mean() - 2.0) < 6 * np.sqrt(2 / N)
    gam = run(R.stateless_gamma([N], seed=[1, 1], alpha=3.0))
    assert abs(gam.mean() - 3.0) < 6 * np.sqrt(3 / N)
    cat = run(R.stateless_categorical([[0.0, np.log(3.0)]], N, seed=[7, 7]))
    assert abs(cat.mean() - 0.75) < 6 * np.sqrt(0.1875 / N)


def test_categorical_rejects_a_vector_of_logits():
    with pytest.raises(ValueError, match="matrix"):
        R.categorical([0.0, 1.0], 3)
