"""The rest of TF1's ``tf.train`` (issue 34): ``AdagradDAOptimizer`` (numbers
from TensorFlow 2.21's ``tf.compat.v1.train.AdagradDAOptimizer`` on the same
program), ``noisy_linear_cosine_decay`` and ``warm_start``."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

tf = nd.compat.v1


@pytest.fixture(autouse=True)
def _fresh_graph():
    with nd.Graph().as_default():
        yield


# (l1, l2) -> var0, var1 after steps 1..3, from TF 2.21 (lr 3.0, initial 0.1,
# grads [0.1, -0.2] and [0.01, 0.02] each step).
TF_ADAGRAD_DA = {
    (0.0, 0.0): [([-0.9045341, 1.6035675], [-0.09482093, -0.18935831]),
                 ([-1.7320509, 2.8284273], [-0.1895472, -0.37796447]),
                 ([-2.496151, 3.8376129], [-0.284179, -0.56582516])],
    (0.1, 0.2): [([0.0, 0.3079558], [0.0, 0.0]),
                 ([0.0, 0.36939806], [0.0, 0.0]),
                 ([0.0, 0.39664325], [0.0, 0.0])],
}


@pytest.mark.parametrize("l1,l2", list(TF_ADAGRAD_DA))
def test_adagrad_da_matches_tensorflow(l1, l2):
    gs = tf.Variable(0, dtype=nd.int64, name="gs")
    var0, var1 = tf.Variable([1.0, 2.0]), tf.Variable([4.0, 3.0])
    opt = tf.train.AdagradDAOptimizer(
        3.0, global_step=gs, initial_gradient_squared_accumulator_value=0.1,
        l1_regularization_strength=l1, l2_regularization_strength=l2)
    update = opt.apply_gradients([(nd.constant([0.1, -0.2]), var0),
                                  (nd.constant([0.01, 0.02]), var1)], global_step=gs)
    assert opt.get_slot_names() == ["gradient_accumulator",
                                    "gradient_squared_accumulator"]
    # TF's slot variable names.
    assert opt.get_slot(var0, "gradient_accumulator").op.name == "Variable/AdagradDA"
    with nd.Session() as s:
        s.run(tf.global_variables_initializer())
        for step, (want0, want1) in enumerate(TF_ADAGRAD_DA[(l1, l2)], 1):
            s.run(update)
            got0, got1, got_gs = s.run([var0, var1, gs])
            np.testing.assert_allclose(got0, want0, rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(got1, want1, rtol=1e-5, atol=1e-7)
            assert got_gs == step
        acc, sq = s.run([opt.get_slot(var0, n) for n in opt.get_slot_names()])
    np.testing.assert_allclose(acc, [0.3, -0.6], rtol=1e-6)
    np.testing.assert_allclose(sq, [0.13, 0.22], rtol=1e-6)


def test_adagrad_da_sparse_moves_only_the_gradient_rows():
    gs = tf.Variable(0, dtype=nd.int64)
    emb = tf.Variable([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    opt = tf.train.AdagradDAOptimizer(1.0, global_step=gs)
    loss = nd.reduce_sum(nd.gather(emb, [2]))
    train = opt.minimize(loss, global_step=gs)
    with nd.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(train)
        value = s.run(emb)
    # Row 2: acc 1, squared 0.1 + 1, t 1 -> -1 / sqrt(1.1); rows 0, 1 untouched.
    np.testing.assert_allclose(value[:2], [[1, 1], [2, 2]])
    np.testing.assert_allclose(value[2], [-1 / np.sqrt(1.1)] * 2, rtol=1e-6)


def test_adagrad_da_needs_a_positive_initial_value():
    with pytest.raises(ValueError, match="must be positive"):
        tf.train.AdagradDAOptimizer(0.1, global_step=None,
                                    initial_gradient_squared_accumulator_value=0.0)


def test_noisy_linear_cosine_decay_is_linear_cosine_plus_scaled_noise():
    step = tf.Variable(4, dtype=nd.int64)
    decay_steps, variance, vdecay = 10, 0.5, 0.55
    quiet = tf.train.noisy_linear_cosine_decay(1.0, step, decay_steps,
                                               initial_variance=0.0)
    clean = tf.train.linear_cosine_decay(1.0, step, decay_steps)
    noisy = tf.train.noisy_linear_cosine_decay(1.0, step, decay_steps,
                                               initial_variance=variance,
                                               variance_decay=vdecay)
    assert noisy.op.name.startswith("NoisyLinearCosineDecay")
    with nd.Session() as s:
        s.run(step.initializer)
        q, c = s.run([quiet, clean])
        samples = np.array([s.run(noisy) for _ in range(400)])
    np.testing.assert_allclose(q, c, rtol=1e-6)
    # noise enters multiplied by the cosine part: 0.5 * (1 + cos(pi * 0.4))
    cosine = 0.5 * (1 + np.cos(np.pi * 2 * 0.5 * 4 / decay_steps))
    noise = (samples - c) / cosine
    want_std = np.sqrt(variance / (1 + 4) ** vdecay)
    assert abs(noise.mean()) < 4 * want_std / np.sqrt(400)
    assert abs(noise.std() / want_std - 1) < 0.15


def test_warm_start_by_regex_and_renaming(tmp_path):
    with nd.Graph().as_default():
        w = tf.get_variable("old_scope/w", initializer=np.array([1.0, 2.0],
                                                                np.float32))
        b = tf.get_variable("b", initializer=np.array([5.0], np.float32))
        with nd.Session() as s:
            s.run(tf.global_variables_initializer())
            tf.train.Saver([w, b]).save(s, str(tmp_path / "ckpt"))
    w = tf.get_variable("new_scope/w", [2], initializer=tf.zeros_initializer())
    b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
    other = tf.get_variable("other", [1], initializer=tf.ones_initializer())
    tf.train.warm_start(str(tmp_path / "ckpt"), vars_to_warm_start="new_scope|b",
                        var_name_to_prev_var_name={"new_scope/w": "old_scope/w"})
    with nd.Session() as s:
        s.run(tf.global_variables_initializer())
        got_w, got_b, got_other = s.run([w, b, other])
    assert got_w.tolist() == [1.0, 2.0] and got_b.tolist() == [5.0]
    assert got_other.tolist() == [1.0]
    assert tf.train.VocabInfo is nd.estimator.VocabInfo
    with pytest.raises(ValueError, match="not used"):
        tf.train.warm_start(str(tmp_path / "ckpt"), vars_to_warm_start="b",
                            var_name_to_prev_var_name={"typo": "b"})
