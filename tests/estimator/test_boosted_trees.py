"""Boosted trees as TF 1.15's ``BoostedTreesClassifier``/``Regressor``
(behaviours of tensorflow/estimator's ``boosted_trees_test.py``, our own
tests): a separable problem is learnt, the regressor's loss falls as trees
are added, a one-split tree is the split a NumPy oracle picks by the rule
``gain = GL²/(HL+l2) + GR²/(HR+l2) - G²/(H+l2)`` with leaf values
``-lr * G/(H+l2)``, training stops after ``n_trees`` trees, and a new
estimator on the same ``model_dir`` predicts what the trained one did.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

fc = nd.feature_column
RNG = np.random.RandomState(0)
N = 200
X = RNG.uniform(-1, 1, (N, 2)).astype(np.float32)
COLOR = RNG.choice(["R", "G"], N)
# Class 1: x0 > 0.2 and not green, or x1 < -0.6.
Y = (((X[:, 0] > 0.2) & (COLOR != "G")) | (X[:, 1] < -0.6)).astype(np.int64)
BOUNDARIES = [float(b) for b in np.linspace(-0.9, 0.9, 10)]
COLUMNS = [fc.bucketized_column(fc.numeric_column("x", shape=(2,)), BOUNDARIES),
           fc.indicator_column(
               fc.categorical_column_with_vocabulary_list("color", ["R", "G"]))]


def input_fn(labels, batch=N, repeat=True, **features):
    features = features or {"x": X, "color": COLOR}

    def fn():
        ds = nd.data.Dataset.from_tensor_slices((features, labels.reshape(-1, 1)))
        ds = ds.batch(batch)
        return ds.repeat() if repeat else ds

    return fn


def test_classifier_learns_a_separable_problem_and_stops_after_n_trees(tmp_path):
    est = nd.estimator.BoostedTreesClassifier(
        COLUMNS, n_batches_per_layer=2, n_trees=8, max_depth=3, learning_rate=0.5,
        model_dir=str(tmp_path))
    est.train(input_fn(Y, batch=N // 2), steps=1000)
    # 8 trees of at most 3 layers of 2 batches: far fewer than 1000 steps.
    assert est.get_variable_value("global_step") <= 8 * 3 * 2
    assert est.get_variable_value("boosted_trees/state")[0] == 8
    metrics = est.evaluate(input_fn(Y, repeat=False))
    assert metrics["accuracy"] >= 0.95
    classes = [int(p["class_ids"][0]) for p in est.predict(input_fn(Y, repeat=False))]
    assert np.mean(np.array(classes) == Y) == pytest.approx(metrics["accuracy"])


def test_regressor_loss_falls_as_trees_are_added(tmp_path):
    target = (np.where(X[:, 0] > 0, 2.0, -1.0) + X[:, 1]).astype(np.float32)
    losses = []
    for n_trees in (1, 3, 10):
        est = nd.estimator.BoostedTreesRegressor(
            COLUMNS[:1], n_batches_per_layer=1, n_trees=n_trees, max_depth=2,
            learning_rate=0.5, model_dir=str(tmp_path / str(n_trees)))
        est.train(input_fn(target), max_steps=100)
        losses.append(est.evaluate(input_fn(target, repeat=False))["average_loss"])
    start = float(np.mean(target ** 2))  # the loss of the empty ensemble
    assert start > losses[0] > losses[1] > losses[2]
    assert losses[2] < 0.1 * start


def test_one_split_tree_is_the_numpy_oracles_split(tmp_path):
    x = np.array([0.1, 0.3, 1.2, 1.4, 2.2, 2.9, 3.5, 3.6], np.float32)
    y = np.array([1.0, 1.5, 1.2, 1.4, 4.5, 3.8, 4.2, 4.4], np.float32)
    boundaries = [1.0, 2.0, 3.0]
    l2, rate = 0.1, 0.7
    est = nd.estimator.BoostedTreesRegressor(
        [fc.bucketized_column(fc.numeric_column("x"), boundaries)],
        n_batches_per_layer=1, n_trees=1, max_depth=1, learning_rate=rate,
        l2_regularization=l2, model_dir=str(tmp_path))
    est.train(input_fn(y, x=x.reshape(-1, 1)), max_steps=5)

    # Oracle: squared error averaged over the batch, from zero logits.
    g, h = -2.0 * y / len(y), np.full(len(y), 2.0 / len(y))
    bucket = np.searchsorted(boundaries, x, side="right")
    best = None
    for t in range(len(boundaries)):
        left = bucket <= t
        gl, hl, gr, hr = g[left].sum(), h[left].sum(), g[~left].sum(), h[~left].sum()
        gain = gl ** 2 / (hl + l2) + gr ** 2 / (hr + l2) - g.sum() ** 2 / (h.sum() + l2)
        if best is None or gain > best[0]:
            best = (gain, t, -rate * gl / (hl + l2), -rate * gr / (hr + l2))
    _, threshold, left_value, right_value = best
    assert threshold == 1  # neither the first nor the last candidate

    assert est.get_variable_value("boosted_trees/tree_feature")[0, :3].tolist() == [
        0, -1, -1]
    assert est.get_variable_value("boosted_trees/tree_threshold")[0, 0] == threshold
    np.testing.assert_allclose(
        est.get_variable_value("boosted_trees/tree_value")[0, :3],
        [0.0, left_value, right_value], rtol=1e-5)
    predictions = [p["predictions"][0] for p in est.predict(
        input_fn(y, x=x.reshape(-1, 1), repeat=False))]
    np.testing.assert_allclose(
        predictions, np.where(bucket <= threshold, left_value, right_value),
        rtol=1e-5)


def test_a_new_estimator_on_the_checkpoint_predicts_the_same(tmp_path):
    def make():
        return nd.estimator.BoostedTreesClassifier(
            COLUMNS, n_batches_per_layer=1, n_trees=3, max_depth=2,
            center_bias=True, model_dir=str(tmp_path))

    def probabilities(est):
        return np.array([p["probabilities"] for p in est.predict(
            input_fn(Y, repeat=False))])

    trained = make()
    trained.train(input_fn(Y), max_steps=100)
    # center_bias: the bias is the log-odds Newton step from zero logits.
    p = Y.mean()
    assert trained.get_variable_value("boosted_trees/bias") == pytest.approx(
        (p - 0.5) / 0.25, rel=1e-5)
    before = probabilities(trained)
    np.testing.assert_array_equal(probabilities(make()), before)
    assert len(np.unique(before[:, 1])) > 2  # the trees, not the bias alone


@pytest.mark.parametrize("make, message", [
    (lambda: nd.estimator.BoostedTreesClassifier(
        [fc.numeric_column("x")], n_batches_per_layer=1).train(
            input_fn(Y, x=X[:, :1]), steps=1), "bucketized_column"),
    (lambda: nd.estimator.BoostedTreesClassifier(
        COLUMNS, n_batches_per_layer=1, n_classes=3), "only binary"),
    (lambda: nd.estimator.BoostedTreesRegressor(
        COLUMNS, n_batches_per_layer=0), "n_batches_per_layer"),
], ids=["numeric_column", "multi_class", "n_batches_per_layer"])
def test_unsupported_input_is_refused_by_name(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_weight_column_decides_which_examples_the_trees_fit(tmp_path):
    # Each x appears twice with opposite labels; weight 0 on the second copy
    # leaves the first copy's labels as the weighted least-squares answer.
    x = np.tile(np.array([0.2, 0.8, 1.5, 2.5], np.float32), 2).reshape(-1, 1)
    y = np.concatenate([[1.0, 3.0, -2.0, 0.5], [-1.0, -3.0, 2.0, -0.5]])
    w = np.repeat([1.0, 0.0], 4).astype(np.float32).reshape(-1, 1)
    est = nd.estimator.BoostedTreesRegressor(
        [fc.bucketized_column(fc.numeric_column("x"), [0.5, 1.0, 2.0])],
        n_batches_per_layer=1, n_trees=30, max_depth=2, learning_rate=1.0,
        weight_column="w", model_dir=str(tmp_path))
    y = y.astype(np.float32)
    est.train(input_fn(y, x=x, w=w), max_steps=200)
    predictions = [p["predictions"][0] for p in est.predict(
        input_fn(y[:4], x=x[:4], w=w[:4], repeat=False))]
    np.testing.assert_allclose(predictions, y[:4], atol=1e-3)
