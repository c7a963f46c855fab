"""nd.nn's CTC: the loss against a sum over every alignment path, its gradient
against finite differences, and the decoders (greedy against argmax by hand,
beam search against the exact most likely labelling)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import nbdist as nd

RS = np.random.RandomState(0)
X = RS.randn(5, 2, 4)                     # [time, batch, classes]; blank = 3
LENS = [5, 4]
LABELS = [[1, 2], [0, 0]]


def collapse(path, blank=3):
    merged = [c for i, c in enumerate(path) if i == 0 or c != path[i - 1]]
    return tuple(c for c in merged if c != blank)


def labelling_log_probs(logits):
    """log p(labelling) for every labelling, summing all alignment paths."""
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    out = {}
    for path in itertools.product(range(logits.shape[1]), repeat=len(logits)):
        score = sum(lp[t, c] for t, c in enumerate(path))
        key = collapse(path)
        out[key] = np.logaddexp(out.get(key, -np.inf), score)
    return out


def sparse_labels():
    return nd.SparseTensor([[0, 0], [0, 1], [1, 0], [1, 1]],
                           np.array([1, 2, 0, 0], np.int32), [2, 2])


def test_ctc_loss_and_gradient():
    with nd.Graph().as_default():
        tx = nd.placeholder(nd.float64, X.shape)
        loss = nd.nn.ctc_loss(sparse_labels(), tx, LENS)
        (g,) = nd.gradients(nd.reduce_sum(loss * [1.0, 2.0]), [tx])
        with nd.Session() as s:
            got, grad = s.run([loss, g], {tx: X})
            want = [-labelling_log_probs(X[:LENS[b], b])[tuple(LABELS[b])]
                    for b in range(2)]
            np.testing.assert_allclose(got, want, rtol=1e-10)
            assert not grad[4, 1].any()            # past example 1's length
            eps = 1e-6
            for idx in [(0, 0, 1), (3, 1, 0), (2, 0, 3), (1, 1, 2)]:
                up, down = X.copy(), X.copy()
                up[idx] += eps
                down[idx] -= eps
                num = (s.run(loss, {tx: up}) - s.run(loss, {tx: down})) @ [1, 2] / (
                    2 * eps)
                assert grad[idx] == pytest.approx(num, rel=1e-5, abs=1e-8)


def test_ctc_loss_errors_and_ignore_longer():
    with nd.Graph().as_default():
        labels = nd.SparseTensor([[0, 0], [0, 1], [0, 2]], np.array([1, 1, 2],
                                                                    np.int32),
                                 [1, 3])
        x = np.zeros((3, 1, 4), np.float32)
        # "1 1 2" needs a blank between the 1s: 4 steps, only 3 given.
        with nd.Session() as s:
            with pytest.raises(nd.errors.InvalidArgumentError,
                               match="Not enough time for target transition"):
                s.run(nd.nn.ctc_loss(labels, x, [3]))
            assert s.run(nd.nn.ctc_loss(labels, x, [3],
                                        ignore_longer_outputs_than_inputs=True)
                         ).tolist() == [0.0]
        with pytest.raises(TypeError, match="SparseTensor"):
            nd.nn.ctc_loss([[1]], x, [3])


def test_greedy_and_beam_search_decoders():
    with nd.Graph().as_default():
        (greedy,), glp = nd.nn.ctc_greedy_decoder(X, LENS)
        beams, blp = nd.nn.ctc_beam_search_decoder(X, LENS, beam_width=64,
                                                   top_paths=2)
        with nd.Session() as s:
            g, gl, b0, b1, bl = s.run([greedy, glp, beams[0], beams[1], blp])
    for b in range(2):
        best = X[:LENS[b], b].argmax(-1)
        want = collapse(best.tolist())
        assert tuple(g.values[g.indices[:, 0] == b]) == want
        assert gl[b, 0] == pytest.approx(-X[:LENS[b], b].max(-1).sum())
        # A wide beam finds the two most likely labellings exactly.
        exact = sorted(labelling_log_probs(X[:LENS[b], b]).items(),
                       key=lambda kv: -kv[1])[:2]
        for k, path in enumerate((b0, b1)):
            assert tuple(path.values[path.indices[:, 0] == b]) == exact[k][0]
            assert bl[b, k] == pytest.approx(exact[k][1], rel=1e-9)


def test_collapse_repeated_merges_runs_within_each_length():
    with nd.Graph().as_default():
        out, n = nd.nn.collapse_repeated([[1, 1, 2, 2, 1], [3, 3, 3, 4, 4]], [5, 4])
        with nd.Session() as s:
            got, lens = s.run([out, n])
    # Row 1 counts its first 4 entries only: 3 3 3 4 -> 3 4, zero-padded.
    assert got.tolist() == [[1, 2, 1], [3, 4, 0]] and lens.tolist() == [3, 2]
