"""Canned estimators as TF 1.15's (behaviours of tensorflow/estimator's
``dnn_test*.py``, ``linear_test*.py``, ``dnn_linear_combined_test.py`` and
``baseline_test.py``, our own tests): each trains on a small synthetic data
set to a stated accuracy, writes TF 1.15's variable names (the names those
tests spell: ``dnn/hiddenlayer_%d/kernel``, ``dnn/logits/kernel``,
``linear/linear_model/<col>/weights``, ``linear/linear_model/bias_weights``,
``baseline/bias``) and its optimizer's slots beside them.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import nbdist as nd

fc = nd.feature_column
N = 240
RNG = np.random.RandomState(0)
X = RNG.randn(N, 2).astype(np.float32)
COLOR = RNG.choice(["R", "G", "B"], N)
SIZE = RNG.choice(["S", "L"], N)
# Class 1: above the line x0 + x1 = 0.5, or red.
Y = ((X[:, 0] + X[:, 1] > 0.5) | (COLOR == "R")).astype(np.int64)
COLOR_COL = fc.categorical_column_with_vocabulary_list("color", ["R", "G", "B"])


def input_fn(labels, epochs=None, batch=40, **features):
    features = features or {"x": X, "color": COLOR}

    def fn():
        ds = nd.data.Dataset.from_tensor_slices(
            features if labels is None else (features, labels))
        if epochs is None:
            ds = ds.shuffle(N, seed=1)
        return ds.repeat(epochs).batch(batch)

    return fn


def train_and_evaluate(est, labels=Y, steps=120, **features):
    est.train(input_fn(labels, **features), steps=steps)
    return est.evaluate(input_fn(labels, epochs=1, **features))


def test_dnn_classifier_reaches_accuracy_with_tf_variable_names(tmp_path):
    est = nd.estimator.DNNClassifier(
        hidden_units=[8, 4], model_dir=str(tmp_path),
        feature_columns=[fc.numeric_column("x", shape=2),
                         fc.embedding_column(COLOR_COL, 2)],
        optimizer=nd.train.AdagradOptimizer(0.3))
    metrics = train_and_evaluate(est, steps=80)
    assert metrics["accuracy"] >= 0.95
    assert set(metrics) == {"accuracy", "accuracy_baseline", "auc",
                            "auc_precision_recall", "average_loss", "label/mean",
                            "loss", "precision", "prediction/mean", "recall",
                            "global_step"}
    assert metrics["label/mean"] == pytest.approx(Y.mean())
    model = ["dnn/hiddenlayer_0/bias", "dnn/hiddenlayer_0/kernel",
             "dnn/hiddenlayer_1/bias", "dnn/hiddenlayer_1/kernel",
             "dnn/input_from_feature_columns/input_layer/color_embedding/"
             "embedding_weights", "dnn/logits/bias", "dnn/logits/kernel"]
    assert sorted(est.get_variable_names()) == sorted(
        model + [m + "/Adagrad" for m in model] + ["global_step"])
    assert est.get_variable_value("dnn/hiddenlayer_0/kernel").shape == (4, 8)
    first = next(iter(est.predict(input_fn(Y, epochs=1))))
    assert first["class_ids"][0] == np.argmax(first["probabilities"])
    assert first["classes"][0] == str(first["class_ids"][0]).encode()


def test_linear_classifier_learns_a_cross(tmp_path):
    # Class 1 when color is red xor size is large: no weighted sum of the color
    # and size ids separates it, one weight per (color, size) pair does.
    labels = ((COLOR == "R") ^ (SIZE == "L")).astype(np.int64)
    cross = fc.crossed_column([COLOR_COL, "size"], 30)
    feats = {"color": COLOR, "size": SIZE, "x": X}
    crossed = nd.estimator.LinearClassifier([COLOR_COL, cross],
                                            model_dir=str(tmp_path / "cross"))
    assert train_and_evaluate(crossed, labels, steps=50, **feats)["accuracy"] == 1.0
    model = ["linear/linear_model/bias_weights", "linear/linear_model/color/weights",
             "linear/linear_model/color_X_size/weights"]
    # FTRL's two slots per variable ("Ftrl" and "Ftrl_1"), as TF names them.
    assert sorted(crossed.get_variable_names()) == sorted(
        model + [m + s for m in model for s in ("/Ftrl", "/Ftrl_1")]
        + ["global_step"])
    assert crossed.get_variable_value("linear/linear_model/color_X_size/weights"
                                      ).shape == (30, 1)


def test_dnn_linear_combined_trains_each_part_with_its_optimizer(tmp_path):
    est = nd.estimator.DNNLinearCombinedClassifier(
        model_dir=str(tmp_path), linear_feature_columns=[COLOR_COL],
        dnn_feature_columns=[fc.numeric_column("x", shape=2)], dnn_hidden_units=[8],
        dnn_optimizer=nd.train.AdagradOptimizer(0.3),
        linear_optimizer=nd.train.FtrlOptimizer(0.3))
    metrics = train_and_evaluate(est, steps=80)
    assert metrics["accuracy"] >= 0.9
    assert metrics["global_step"] == 80  # one step per batch, not one per part
    names = set(est.get_variable_names())
    assert {"dnn/hiddenlayer_0/kernel/Adagrad", "dnn/logits/kernel/Adagrad",
            "linear/linear_model/color/weights/Ftrl"} <= names
    assert not any(n.startswith("linear/") and "Adagrad" in n for n in names)
    red = est.get_variable_value("linear/linear_model/color/weights")[0, 0]
    assert red > 0  # red examples are all class 1


def test_regressors_fit_a_line_and_a_mean(tmp_path):
    y = (2 * X[:, 0] - X[:, 1] + 1).astype(np.float32)
    linear = nd.estimator.LinearRegressor(
        [fc.numeric_column("x", shape=2)], model_dir=str(tmp_path / "linear"),
        optimizer=nd.train.GradientDescentOptimizer(0.01))
    metrics = train_and_evaluate(linear, y, steps=150, x=X)
    assert metrics["average_loss"] < 1e-3
    np.testing.assert_allclose(
        linear.get_variable_value("linear/linear_model/x/weights")[:, 0], [2, -1],
        atol=0.02)
    np.testing.assert_allclose(
        linear.get_variable_value("linear/linear_model/bias_weights"), [1], atol=0.02)
    base = nd.estimator.BaselineRegressor(
        model_dir=str(tmp_path / "base"),
        optimizer=nd.train.GradientDescentOptimizer(0.01))
    train_and_evaluate(base, y, steps=60, x=X)
    # The baseline predicts one value for all: the label mean.
    assert base.get_variable_value("baseline/bias")[0] == pytest.approx(y.mean(),
                                                                        abs=0.05)
    predictions = [p["predictions"][0] for p in base.predict(input_fn(y, 1, x=X))]
    assert len(predictions) == N and np.ptp(predictions) == 0


def test_baseline_classifier_predicts_the_label_frequencies(tmp_path):
    est = nd.estimator.BaselineClassifier(
        model_dir=str(tmp_path), n_classes=3,
        optimizer=nd.train.GradientDescentOptimizer(0.01))
    labels = RNG.choice(3, N, p=[0.2, 0.3, 0.5])
    train_and_evaluate(est, labels, steps=100, x=X)
    first = next(iter(est.predict(input_fn(labels, 1, x=X))))
    np.testing.assert_allclose(first["probabilities"],
                               np.bincount(labels, minlength=3) / N, atol=0.03)
    assert est.get_variable_names() == ["baseline/bias", "global_step"]


def test_a_tensorflow_dnn_checkpoint_restores_predicts_and_trains_on(tmp_path):
    # Written by TF 2.21 as TF 1.15's DNNClassifier model_fn builds the model
    # (scripts/make_tf_canned_fixtures.py); the weights are repeated here.
    from helpers import FIXTURES

    shutil.copytree(FIXTURES / "canned_dnn", tmp_path / "model")
    embedding = np.array([[0.5, -1.0], [0.25, 0.75], [-0.5, 2.0]], np.float32)
    hidden_k = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 8
    hidden_b = np.array([0.1, -0.2, 0.3, 0.0], np.float32)
    logits_k = np.array([[1.0], [-0.5], [0.25], [2.0]], np.float32)
    logits_b = np.array([-0.75], np.float32)
    est = nd.estimator.DNNClassifier(
        hidden_units=[4], model_dir=str(tmp_path / "model"),
        feature_columns=[fc.embedding_column(COLOR_COL, 2), fc.numeric_column("x")])
    colors, x = np.array(["B", "R", "G"]), np.array([0.5, -2.0, 1.5], np.float32)
    got = [p["logits"][0] for p in est.predict(
        input_fn(None, epochs=1, color=colors, x=x))]
    # input_layer orders columns by name: color_embedding, then x.
    net = np.hstack([embedding[[2, 0, 1]], x[:, None]])
    hidden = np.maximum(net @ hidden_k + hidden_b, 0)
    np.testing.assert_allclose(got, (hidden @ logits_k + logits_b)[:, 0], rtol=1e-5)
    # Training goes on from TF's step and Adagrad slots.
    est.train(input_fn(np.array([1, 0, 1]), color=colors, x=x), steps=2)
    assert est.get_variable_value("global_step") == 9
    assert not np.allclose(est.get_variable_value("dnn/logits/kernel"), logits_k)
