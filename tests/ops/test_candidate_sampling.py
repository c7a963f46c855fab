"""The candidate samplers, compute_accidental_hits, nce_loss and
sampled_softmax_loss as TF 1.15 defines them.

Oracles: TF's formulas for the sampling probabilities and expected counts
(``p * num_sampled``; ``1 - (1 - p)^tries`` with unique sampling), the
observed frequencies of many draws, TF's numbering of a sharded fixed unigram
(the figures of a run of TF 2.21, below), and NumPy for the losses. The losses
on weights partitioned over shards give ``IndexedSlices`` gradients and
sparse updates, as a parameter server applies them.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist import errors

TRUE = np.array([[0], [2]], np.int64)


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


def log_uniform_p(k, n):
    return np.log((k + 2.0) / (k + 1.0)) / np.log(n + 1.0)


def tries_of(count, p):
    """The number of draws that gives expected count ``count`` for ``p``."""
    return np.log1p(-count) / np.log1p(-p)


# -- samplers ---------------------------------------------------------------------
def test_expected_counts_follow_tfs_formulas(graph):
    n, k = 10, 5
    uni = nd.nn.uniform_candidate_sampler(TRUE, 1, k, False, n, seed=1)
    log_u = nd.random.log_uniform_candidate_sampler(TRUE, 1, k, True, n, seed=2)
    ids, true_c, samp_c = run(uni)
    assert ids.dtype == np.int64 and ids.shape == (k,) and ids.max() < n
    np.testing.assert_allclose(true_c, np.full((2, 1), k / n), rtol=1e-6)
    np.testing.assert_allclose(samp_c, np.full(k, k / n), rtol=1e-6)
    for _ in range(3):
        ids, true_c, samp_c = run(log_u)
        assert len(set(ids.tolist())) == k  # unique
        p = log_uniform_p(ids, n)
        tries = tries_of(samp_c.astype(np.float64), p)
        # One number of tries, a whole one, at least num_sampled, explains all.
        assert np.allclose(tries, np.round(tries[0]), atol=2e-3)
        assert tries[0] >= k - 1e-3
        want_true = -np.expm1(np.round(tries[0]) * np.log1p(-log_uniform_p(TRUE, n)))
        np.testing.assert_allclose(true_c, want_true, rtol=1e-5)


def test_draws_follow_the_distributions(graph):
    n, draws = 6, 30000
    log_u = nd.nn.log_uniform_candidate_sampler(TRUE, 1, draws, False, n, seed=3)
    unigrams = [5.0, 1.0, 3.0, 9.0, 2.0, 4.0]
    fixed = nd.nn.fixed_unigram_candidate_sampler(TRUE, 1, draws, False, n,
                                                  unigrams=unigrams, distortion=0.75,
                                                  seed=4)
    a, b = run([log_u[0], fixed[0]])
    want_fixed = np.array(unigrams) ** 0.75 / np.sum(np.array(unigrams) ** 0.75)
    for ids, want in ((a, log_uniform_p(np.arange(n), n)), (b, want_fixed)):
        freq = np.bincount(ids, minlength=n) / draws
        # Within 4 binomial standard deviations of each probability.
        assert np.all(np.abs(freq - want) < 4 * np.sqrt(want * (1 - want) / draws))


def test_fixed_unigram_shards_number_as_tf(graph):
    # TF 2.21 gives, for these arguments: true counts [[1.4470856], [2.5064259]]
    # and 2.046488 for sampled id 1 (six draws, non-unique).
    s = nd.nn.fixed_unigram_candidate_sampler(
        TRUE, 1, 6, False, 3, unigrams=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        distortion=0.5, num_reserved_ids=1, num_shards=2, shard=1, seed=1)
    w = np.sqrt([2.0, 4.0, 6.0])
    p = w / w.sum()
    ids, true_c, samp_c = run(s)
    np.testing.assert_allclose(true_c[:, 0], [6 * p[0], 6 * p[2]], rtol=1e-6)
    np.testing.assert_allclose(true_c[:, 0], [1.4470856, 2.5064259], rtol=1e-6)
    np.testing.assert_allclose(samp_c, 6 * p[ids], rtol=1e-6)


def test_fixed_unigram_from_a_vocab_file(graph, tmp_path):
    vocab = tmp_path / "vocab.csv"
    vocab.write_text("the,7\nof,2\nzebra,1\n")
    s = nd.nn.fixed_unigram_candidate_sampler(TRUE, 1, 4, False, 3,
                                              vocab_file=str(vocab), seed=1)
    np.testing.assert_allclose(run(s[1])[:, 0], [4 * 0.7, 4 * 0.1], rtol=1e-6)


def test_learned_unigram_counts_the_true_classes_it_saw(graph):
    # TF 2.21: 0.8 for every id on the first run, then 1.1428572 for ids 0 and 2
    # and 0.5714286 for id 1 (weights 1 + times seen: [2, 1, 2, 1, 1] / 7).
    s = nd.nn.learned_unigram_candidate_sampler(TRUE, 1, 4, False, 5, seed=3)
    with nd.Session() as sess:
        first = sess.run(s)
        second = sess.run(s)
    np.testing.assert_allclose(first[1], 0.8, rtol=1e-6)
    np.testing.assert_allclose(second[1][:, 0], [8 / 7, 8 / 7], rtol=1e-6)
    weights = np.array([2.0, 1.0, 2.0, 1.0, 1.0]) / 7
    np.testing.assert_allclose(second[2], 4 * weights[second[0]], rtol=1e-6)


def test_all_sampler_seeds_and_errors(graph):
    ids, true_c, samp_c = run(nd.nn.all_candidate_sampler(TRUE, 1, 4, True))
    np.testing.assert_array_equal(ids, [0, 1, 2, 3])
    np.testing.assert_array_equal(true_c, np.ones((2, 1)))
    np.testing.assert_array_equal(samp_c, np.ones(4))
    nd.set_random_seed(7)
    a = nd.nn.uniform_candidate_sampler(TRUE, 1, 8, False, 1000)[0]
    first = [run(a), run(a)]
    np.testing.assert_array_equal(first[0], first[1])  # a new session repeats
    with pytest.raises(ValueError, match="range is too small"):
        nd.nn.uniform_candidate_sampler(TRUE, 1, 8, True, 5)
    with pytest.raises(ValueError, match="num_true columns"):
        nd.nn.uniform_candidate_sampler(TRUE, 2, 3, True, 5)
    with pytest.raises(errors.InvalidArgumentError, match="out of range"):
        run(nd.nn.uniform_candidate_sampler([[9]], 1, 2, True, 5))
    assert nd.gradients(nd.cast(a, nd.float32), [a])[0] is None


def test_compute_accidental_hits(graph):
    # TF 2.21 gives indices [0, 0, 1], ids [2, 3, 3] (a repeated id: its last
    # position) and -FLT_MAX weights.
    rows, ids, w = run(nd.nn.compute_accidental_hits(
        nd.constant([[1, 2], [2, 7]], nd.int64), nd.constant([2, 5, 1, 2], nd.int64),
        num_true=2))
    np.testing.assert_array_equal(rows, [0, 0, 1])
    np.testing.assert_array_equal(ids, [2, 3, 3])
    np.testing.assert_array_equal(w, np.full(3, -np.finfo(np.float32).max))
    assert rows.dtype == np.int32 and ids.dtype == np.int64


# -- losses -----------------------------------------------------------------------
def np_sampled_logits(w, b, labels, x, sampled, true_c, samp_c, remove_hits):
    true_logits = np.einsum("bd,btd->bt", x, w[labels]) + b[labels] - np.log(true_c)
    samp_logits = x @ w[sampled].T + b[sampled] - np.log(samp_c)
    if remove_hits:
        for i, row in enumerate(labels):
            for j, s in enumerate(sampled):
                if s in row:
                    samp_logits[i, j] += -np.finfo(np.float32).max
    logits = np.concatenate([true_logits, samp_logits], 1)
    targets = np.concatenate([np.full(true_logits.shape, 1 / labels.shape[1]),
                              np.zeros(samp_logits.shape)], 1)
    return logits, targets


@pytest.mark.parametrize("remove_hits", [False, True])
def test_nce_and_sampled_softmax_against_numpy(graph, remove_hits):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((12, 3))
    b = rng.standard_normal(12)
    x = rng.standard_normal((4, 3))
    labels = np.array([[1, 4], [0, 2], [7, 3], [5, 5]])
    sampled = np.array([2, 9, 5, 11, 0], np.int64)
    true_c = rng.uniform(0.1, 1, (4, 2))
    samp_c = rng.uniform(0.1, 1, 5)
    sv = (sampled, true_c.astype(np.float32), samp_c.astype(np.float32))
    args = dict(weights=nd.constant(w), biases=nd.constant(b), labels=labels,
                inputs=nd.constant(x), num_sampled=5, num_classes=12, num_true=2,
                sampled_values=sv, remove_accidental_hits=remove_hits)
    nce, ssm = run([nd.nn.nce_loss(**args), nd.nn.sampled_softmax_loss(**args)])
    logits, targets = np_sampled_logits(w, b, labels, x, sampled,
                                        true_c.astype(np.float32),
                                        samp_c.astype(np.float32), remove_hits)
    want_nce = np.sum(np.maximum(logits, 0) - logits * targets
                      + np.log1p(np.exp(-np.abs(logits))), 1)
    shifted = logits - logits.max(1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    want_ssm = -np.sum(targets * log_softmax, 1)
    np.testing.assert_allclose(nce, want_nce, rtol=1e-6)
    np.testing.assert_allclose(ssm, want_ssm, rtol=1e-6)


def test_nce_gradient_matches_finite_differences(graph):
    rng = np.random.default_rng(1)
    w0, x0 = rng.standard_normal((8, 3)), rng.standard_normal((2, 3))
    wp = nd.placeholder(nd.float64, [8, 3])
    xp = nd.placeholder(nd.float64, [2, 3])
    sv = (np.array([3, 5, 6], np.int64), np.full((2, 1), 0.5, np.float32),
          np.full(3, 0.25, np.float32))
    loss = nd.reduce_sum(nd.nn.nce_loss(wp, nd.zeros([8], nd.float64), [[1], [5]],
                                        xp, 3, 8, sampled_values=sv,
                                        remove_accidental_hits=True))
    gw, gx = nd.gradients(loss, [wp, xp])
    with nd.Session() as s:
        sym_w, sym_x = s.run([nd.convert_to_tensor(gw), gx], {wp: w0, xp: x0})

        def f(w, x):
            return s.run(loss, {wp: w, xp: x})

        eps = 1e-6
        for sym, base, pick in ((sym_w, w0, 0), (sym_x, x0, 1)):
            num = np.zeros_like(base)
            for idx in np.ndindex(base.shape):
                d = np.zeros_like(base)
                d[idx] = eps
                args_p = [w0, x0]
                args_m = [w0, x0]
                args_p[pick], args_m[pick] = base + d, base - d
                num[idx] = (f(*args_p) - f(*args_m)) / (2 * eps)
            np.testing.assert_allclose(sym, num, atol=1e-6)
    np.testing.assert_array_equal(sym_w[[0, 2, 4, 7]], 0)  # rows never looked up


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_partitioned_weights_get_sparse_updates(graph, strategy):
    rng = np.random.default_rng(2)
    full = rng.standard_normal((10, 4)).astype(np.float32)
    order = (np.r_[0:10:2, 1:10:2] if strategy == "mod" else np.arange(10))
    shards = [full[order[:5]], full[order[5:]]]  # mod: ids 0,2,4..; div: 0-4
    weights = [nd.Variable(s, name=f"w_{i}") for i, s in enumerate(shards)]
    biases = nd.Variable(np.zeros(10, np.float32), name="b")
    x = rng.standard_normal((3, 4)).astype(np.float32)
    sv = (np.array([6, 1, 8], np.int64), np.full((3, 1), 0.5, np.float32),
          np.full(3, 0.3, np.float32))
    labels = [[2], [3], [9]]
    loss = nd.reduce_sum(nd.nn.nce_loss(weights, biases, labels, x, 3, 10,
                                        sampled_values=sv,
                                        partition_strategy=strategy))
    grads = nd.gradients(loss, weights)
    assert all(isinstance(g, nd.IndexedSlices) for g in grads)
    step = nd.train.GradientDescentOptimizer(0.1).minimize(loss)
    logits, targets = np_sampled_logits(full, np.zeros(10), np.array(labels), x,
                                        sv[0], sv[1], sv[2], False)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        got = s.run(loss)
        s.run(step)
        after = np.concatenate(s.run(weights))[np.argsort(order)]
    want = np.sum(np.maximum(logits, 0) - logits * targets
                  + np.log1p(np.exp(-np.abs(logits))))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    touched = sorted({2, 3, 9, 6, 1, 8})
    untouched = [i for i in range(10) if i not in touched]
    np.testing.assert_array_equal(after[untouched], full[untouched])
    assert np.all(np.any(after[touched] != full[touched], axis=1))


def test_word2vec_style_training_lowers_the_loss(graph):
    """Skip-gram pairs (i -> (i + 1) mod V) learned with nce_loss and the
    default log-uniform sampler on weights in two shards: the loss falls."""
    vocab, dim, batch = 40, 8, 32
    nd.set_random_seed(3)
    emb = nd.get_variable("emb", [vocab, dim],
                          initializer=nd.random_uniform_initializer(-1.0, 1.0),
                          partitioner=nd.fixed_size_partitioner(2))
    nce_w = nd.get_variable("nce_w", [vocab, dim],
                            partitioner=nd.fixed_size_partitioner(2))
    nce_b = nd.get_variable("nce_b", [vocab], initializer=nd.zeros_initializer())
    centers = nd.placeholder(nd.int32, [batch])
    context = nd.placeholder(nd.int64, [batch, 1])
    loss = nd.reduce_mean(nd.nn.nce_loss(
        nce_w, nce_b, context, nd.nn.embedding_lookup(emb, centers), 8, vocab))
    train = nd.train.GradientDescentOptimizer(1.0).minimize(loss)
    rng = np.random.default_rng(0)
    losses = []
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        for _ in range(150):
            c = rng.integers(0, vocab, batch)
            feed = {centers: c, context: ((c + 1) % vocab)[:, None]}
            losses.append(s.run([loss, train], feed)[0])
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10]), losses
