"""``nd.contrib.seq2seq.sequence_loss`` against a NumPy oracle of TF 1.15's
documented reductions (the hunkim char-RNN labs call it with weights of ones)."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

RNG = np.random.RandomState(0)
LOGITS = RNG.randn(2, 3, 4).astype(np.float32)
TARGETS = np.array([[0, 1, 3], [2, 2, 0]], np.int32)
WEIGHTS = np.array([[1.0, 0.5, 0.0], [1.0, 1.0, 2.0]], np.float32)


def _xent():
    z = LOGITS - LOGITS.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, TARGETS[..., None], -1)[..., 0] * WEIGHTS


@pytest.mark.parametrize("kwargs,oracle", [
    ({}, lambda c: c.sum() / WEIGHTS.sum()),
    ({"average_across_batch": False}, lambda c: c.sum(1) / WEIGHTS.sum(1)),
    ({"average_across_timesteps": False}, lambda c: c.sum(0) / WEIGHTS.sum(0)),
    ({"average_across_timesteps": False, "average_across_batch": False}, lambda c: c),
    ({"average_across_timesteps": False, "average_across_batch": False,
      "sum_over_timesteps": True, "sum_over_batch": True},
     lambda c: c.sum() / np.count_nonzero(WEIGHTS)),
    ({"average_across_timesteps": False, "average_across_batch": False,
      "sum_over_timesteps": True},
     lambda c: c.sum(1) / np.count_nonzero(WEIGHTS, axis=1)),
])
def test_sequence_loss_reductions_match_numpy(kwargs, oracle):
    with nd.Graph().as_default():
        loss = nd.contrib.seq2seq.sequence_loss(LOGITS, TARGETS, WEIGHTS, **kwargs)
        with nd.Session() as s:
            np.testing.assert_allclose(s.run(loss), oracle(_xent()), rtol=1e-5)


def test_sequence_loss_trains_through_tf_compat_name():
    import nbdist.compat.v1 as tf

    with tf.Graph().as_default():
        logits = tf.Variable(np.zeros((2, 3, 4), np.float32))
        loss = tf.contrib.seq2seq.sequence_loss(logits, TARGETS, tf.ones([2, 3]))
        step = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            first = s.run(loss)
            for _ in range(3):
                s.run(step)
            assert first == pytest.approx(np.log(4.0), rel=1e-5)
            assert s.run(loss) < first


@pytest.mark.parametrize("logits,targets,weights,match", [
    (np.zeros((2, 4)), TARGETS, WEIGHTS, "Logits must be"),
    (LOGITS, TARGETS[0], WEIGHTS, "Targets must be"),
    (LOGITS, TARGETS, WEIGHTS[0], "Weights must be"),
])
def test_sequence_loss_rank_errors_name_the_argument(logits, targets, weights, match):
    with nd.Graph().as_default(), pytest.raises(ValueError, match=match):
        nd.contrib.seq2seq.sequence_loss(logits, targets, weights)


def test_sequence_loss_average_and_sum_together_is_an_error():
    with nd.Graph().as_default(), pytest.raises(ValueError, match="same time"):
        nd.contrib.seq2seq.sequence_loss(LOGITS, TARGETS, WEIGHTS,
                                         sum_over_timesteps=True)
