"""``tf.compat.v1.random``'s stateful ``Generator`` API, in a graph, and the
stateless seed helpers ``fold_in``/``split``.

What a program relies on: a generator is reproducible from its seed (two
generators, two sessions), each run of a draw op gives new numbers (the state
variable's counter moves on), ``reset_from_seed`` replays, ``split`` streams
are independent and reproducible, and the draws have the right ranges and
moments. The numbers are NumPy's Philox, not TF's (not bit-exact with TF).
"""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

R = nd.compat.v1.random


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def session():
    s = nd.Session()
    s.run(nd.global_variables_initializer())
    return s


def test_create_rng_state_has_tf_layout():
    # TF: create_rng_state(1234, "philox") == [1234, 0, 0]; a seed wider than
    # 64 bits fills the next word; ThreeFry's state has two words.
    assert R.create_rng_state(1234, "philox").tolist() == [1234, 0, 0]
    assert R.create_rng_state(2**64 + 5, R.Algorithm.PHILOX).tolist() == [5, 1, 0]
    assert R.create_rng_state(7, R.Algorithm.THREEFRY).tolist() == [7, 0]
    assert [a.value for a in R.Algorithm] == [1, 2, 3]
    with pytest.raises(ValueError, match="unsupported value"):
        R.Generator.from_seed(1, alg="mersenne")


def test_same_seed_same_sequence_and_each_run_moves_on():
    g1, g2 = R.Generator.from_seed(1234), R.Generator.from_seed(1234)
    x1, x2 = g1.normal([4]), g2.normal([4])
    assert g1.state.name == "random_generator/StateVar:0"
    assert g1.algorithm == 1
    with session() as s:
        assert s.run(g1.state).tolist() == [1234, 0, 0]
        a1, b1 = s.run(x1), s.run(x1)
        a2, b2 = s.run(x2), s.run(x2)
        assert s.run(g1.state)[0] > 1234  # the counter moved past the draws
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(b1, b2)
    assert not np.any(a1 == b1)
    with session() as s:  # a new session starts the sequence again
        np.testing.assert_array_equal(s.run(x1), a1)


def test_reset_from_seed_replays_and_different_seeds_differ():
    g, other = R.Generator.from_seed(5), R.Generator.from_seed(6)
    u, v = g.uniform([6]), other.uniform([6])
    reset = g.reset_from_seed(5)
    with session() as s:
        first = s.run(u)
        s.run(u)
        s.run(reset)
        np.testing.assert_array_equal(s.run(u), first)
        assert not np.any(s.run(v) == first)


def test_split_streams_are_independent_and_reproducible():
    def build():
        parent = R.Generator.from_seed(9)
        kids = parent.split(3)
        return [parent.normal([5])] + [k.normal([5]) for k in kids]

    with nd.Graph().as_default():
        draws = build()
        with session() as s:
            first = s.run(draws)
    with nd.Graph().as_default():
        draws = build()
        with session() as s:
            again = s.run(draws)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    flat = np.concatenate(first)
    assert len(np.unique(flat)) == flat.size  # no stream repeats another


def test_draws_have_their_ranges_and_moments():
    g = R.Generator.from_seed(3)
    n = 20000
    ops = {"normal": g.normal([n], mean=2.0, stddev=3.0),
           "uniform": g.uniform([n], minval=-1.0, maxval=4.0),
           "int": g.uniform([n], minval=3, maxval=7, dtype=nd.int32),
           "trunc": g.truncated_normal([n]),
           "binom": g.binomial([n], counts=10.0, probs=0.25),
           "full": g.uniform([n], minval=None, maxval=None, dtype=nd.int64)}
    with session() as s:
        v = s.run(ops)
    se = 5 / np.sqrt(n)
    assert abs(v["normal"].mean() - 2.0) < 3 * se and abs(v["normal"].std() - 3) < .1
    assert v["uniform"].min() >= -1 and v["uniform"].max() < 4
    assert abs(v["uniform"].mean() - 1.5) < 5 * se * 1.5
    assert v["int"].dtype == np.int32 and set(np.unique(v["int"])) == {3, 4, 5, 6}
    assert np.abs(v["trunc"]).max() <= 2.0
    assert v["binom"].min() >= 0 and v["binom"].max() <= 10
    assert abs(v["binom"].mean() - 2.5) < 10 * se
    assert v["full"].dtype == np.int64 and (v["full"] < 0).any() and (v["full"] > 0).any()


def test_skip_make_seeds_and_global_generator():
    g = R.Generator.from_seed(100)
    skip = g.skip(5)
    seeds = g.make_seeds(3)
    with session() as s:
        assert s.run(skip).tolist() == [100, 0, 0]  # the state before
        assert s.run(g.state).tolist() == [105, 0, 0]
        sv = s.run(seeds)
    assert sv.shape == (2, 3) and (sv[1] == 0).all()
    mine = R.Generator.from_seed(1)
    R.set_global_generator(mine)
    assert R.get_global_generator() is mine
    with nd.Graph().as_default():  # each graph has its own global generator
        assert R.get_global_generator() is not mine
    with pytest.raises(TypeError, match="needs a Generator"):
        R.set_global_generator(3)


def test_fold_in_and_split_are_functions_of_the_seed():
    a, b = R.split([1, 2], 3), R.split([1, 2], 3)
    f = R.fold_in([1, 2], 7)
    with nd.Session() as s:
        av, bv, fv = s.run([a, b, f])
    assert av.shape == (3, 2) and av.dtype == np.int32
    np.testing.assert_array_equal(av, bv)
    assert fv.tolist()[1] == 7
