"""Canned heads as TF 1.15's ``canned/head.py`` (behaviours of TF's
``head_test.py``, our own tests): predictions, the summed training loss
with example weights, evaluation metrics and export outputs, checked
against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist import errors
from nbdist.estimator import ModeKeys
from nbdist.estimator.canned import head as head_lib


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def run_metrics(spec):
    with nd.Session() as s:
        s.run([nd.local_variables_initializer(), nd.tables_initializer()])
        s.run([op for _, op in spec.eval_metric_ops.values()])
        return s.run({k: v for k, (v, _) in spec.eval_metric_ops.items()})


LOGITS = np.array([[-1.0], [0.5], [2.0], [-3.0]], np.float32)
LABELS = np.array([[0], [0], [1], [1]])
WEIGHTS = np.array([[1.0], [2.0], [0.5], [1.0]], np.float32)


def test_binary_head_predictions_and_export_outputs():
    head = head_lib._binary_logistic_head_with_sigmoid_cross_entropy_loss(
        label_vocabulary=["no", "yes"])
    spec = head.create_estimator_spec(features={}, mode=ModeKeys.PREDICT,
                                      logits=nd.constant(LOGITS))
    assert set(spec.export_outputs) == {"serving_default", "classification",
                                        "regression", "predict"}
    with nd.Session() as s:
        s.run(nd.tables_initializer())
        p = s.run(spec.predictions)
    assert sorted(p) == ["all_class_ids", "all_classes", "class_ids", "classes",
                         "logistic", "logits", "probabilities"]
    np.testing.assert_allclose(p["logistic"], sigmoid(LOGITS), rtol=1e-6)
    np.testing.assert_allclose(p["probabilities"],
                               np.hstack([1 - sigmoid(LOGITS), sigmoid(LOGITS)]),
                               rtol=1e-6)
    assert p["class_ids"].tolist() == [[0], [1], [1], [0]]
    assert p["classes"].tolist() == [[b"no"], [b"yes"], [b"yes"], [b"no"]]
    assert p["all_class_ids"].tolist() == [[0, 1]] * 4
    assert p["all_classes"].tolist() == [[b"no", b"yes"]] * 4


def test_binary_head_weighted_sum_loss_and_metrics_against_numpy():
    head = head_lib._binary_logistic_head_with_sigmoid_cross_entropy_loss(
        weight_column="w")
    features = {"w": nd.constant(WEIGHTS)}
    spec = head.create_estimator_spec(features=features, mode=ModeKeys.EVAL,
                                      logits=nd.constant(LOGITS),
                                      labels=nd.constant(LABELS))
    y, w = LABELS.astype(np.float32), WEIGHTS
    per_example = np.maximum(LOGITS, 0) - LOGITS * y + np.log1p(
        np.exp(-np.abs(LOGITS)))
    with nd.Session() as s:
        # TF 1.15's canned loss: the weighted sum over the batch (Reduction.SUM).
        np.testing.assert_allclose(s.run(spec.loss), (per_example * w).sum(),
                                   rtol=1e-5)
    m = run_metrics(spec)
    predicted = (LOGITS > 0).astype(np.float32)
    true_pos = (w * predicted * y).sum()
    label_mean = (w * y).sum() / w.sum()
    expected = {
        "accuracy": (w * (predicted == y)).sum() / w.sum(),
        "precision": true_pos / (w * predicted).sum(),
        "recall": true_pos / (w * y).sum(),
        "average_loss": (w * per_example).sum() / w.sum(),
        "label/mean": label_mean,
        "prediction/mean": (w * sigmoid(LOGITS)).sum() / w.sum(),
        "accuracy_baseline": max(label_mean, 1 - label_mean),
    }
    for key, value in expected.items():
        np.testing.assert_allclose(m[key], value, rtol=1e-5, err_msg=key)
    assert {"auc", "auc_precision_recall"} <= set(m)


def test_binary_head_trains_with_the_optimizer_and_moves_the_global_step():
    step = nd.train.get_or_create_global_step()
    logits_var = nd.Variable(LOGITS)
    head = head_lib._binary_logistic_head_with_sigmoid_cross_entropy_loss()
    spec = head.create_estimator_spec(
        features={}, mode=ModeKeys.TRAIN, logits=logits_var.value(),
        labels=nd.constant(LABELS), optimizer=nd.train.GradientDescentOptimizer(1.0))
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        s.run(spec.train_op)
        # d(sum of sigmoid cross entropy)/d logits = sigmoid(logits) - labels.
        np.testing.assert_allclose(s.run(logits_var),
                                   LOGITS - (sigmoid(LOGITS) - LABELS), rtol=1e-5)
        assert s.run(step) == 1
    with pytest.raises(ValueError, match="train_op_fn and optimizer cannot both be"):
        head.create_estimator_spec(features={}, mode=ModeKeys.TRAIN,
                                   logits=nd.constant(LOGITS),
                                   labels=nd.constant(LABELS))


def test_multi_class_head_softmax_loss_vocabulary_and_label_range():
    logits = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]], np.float32)
    head = head_lib._multi_class_head_with_softmax_cross_entropy_loss(
        3, label_vocabulary=["a", "b", "c"])
    spec = head.create_estimator_spec(features={}, mode=ModeKeys.EVAL,
                                      logits=nd.constant(logits),
                                      labels=nd.constant([["b"], ["a"]]))
    log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    per_example = -log_p[[0, 1], [1, 0]]
    with nd.Session() as s:
        s.run(nd.tables_initializer())
        np.testing.assert_allclose(s.run(spec.loss), per_example.sum(), rtol=1e-5)
        p = s.run(spec.predictions)
    assert p["classes"].tolist() == [[b"b"], [b"c"]]
    np.testing.assert_allclose(p["probabilities"], np.exp(log_p), rtol=1e-5)
    m = run_metrics(spec)
    assert m["accuracy"] == pytest.approx(0.5)
    assert m["average_loss"] == pytest.approx(per_example.mean(), rel=1e-5)
    ids_head = head_lib._multi_class_head_with_softmax_cross_entropy_loss(3)
    fed = nd.placeholder(nd.int64, [None, 1])
    bad = ids_head.create_estimator_spec(features={}, mode=ModeKeys.EVAL,
                                         logits=nd.constant(logits), labels=fed)
    with nd.Session() as s, pytest.raises(errors.InvalidArgumentError,
                                          match="Labels must <= n_classes - 1"):
        s.run(bad.loss, {fed: [[1], [3]]})
    with pytest.raises(ValueError, match="n_classes must be > 2"):
        head_lib._multi_class_head_with_softmax_cross_entropy_loss(2)


def test_regression_head_squared_error_and_metrics():
    logits = np.array([[1.0, 2.0], [3.0, -1.0], [0.0, 0.5]], np.float32)
    labels = np.array([[1.5, 2.0], [2.0, 0.0], [0.0, 1.5]], np.float32)
    head = head_lib._regression_head(label_dimension=2)
    spec = head.create_estimator_spec(features={}, mode=ModeKeys.EVAL,
                                      logits=nd.constant(logits),
                                      labels=nd.constant(labels))
    with nd.Session() as s:
        np.testing.assert_allclose(s.run(spec.loss), ((logits - labels) ** 2).sum(),
                                   rtol=1e-6)
    m = run_metrics(spec)
    assert m["average_loss"] == pytest.approx(((logits - labels) ** 2).mean())
    assert m["label/mean"] == pytest.approx(labels.mean())
    assert m["prediction/mean"] == pytest.approx(logits.mean())
    predict = head.create_estimator_spec(features={}, mode=ModeKeys.PREDICT,
                                         logits=nd.constant(logits))
    assert list(predict.predictions) == ["predictions"]


def test_heads_reject_missing_sparse_or_misshapen_labels():
    head = head_lib._regression_head()
    logits = nd.constant([[1.0], [2.0]])
    with pytest.raises(ValueError, match="You must provide a labels Tensor"):
        head.create_loss({}, ModeKeys.EVAL, logits, None)
    with pytest.raises(ValueError, match="SparseTensor labels are not supported"):
        head.create_loss({}, ModeKeys.EVAL, logits,
                         nd.SparseTensor([[0, 0]], [1.0], [2, 1]))
    with pytest.raises(ValueError, match="Expected labels dimension=1"):
        head.create_loss({}, ModeKeys.EVAL, logits, nd.constant([[1.0, 2.0]] * 2))
    with pytest.raises(ValueError, match="logits shape must be"):
        head.create_estimator_spec({}, ModeKeys.PREDICT, nd.constant([[1.0, 2.0]]))


def test_public_heads_average_over_the_batch_and_plug_into_canned_estimators(
        tmp_path):
    labels = np.array([[0.0], [1.0], [3.0]], np.float32)
    logits = np.array([[0.5], [-1.0], [1.0]], np.float32)
    poisson = nd.estimator.PoissonRegressionHead(compute_full_loss=False)
    logistic = nd.estimator.LogisticRegressionHead()
    with nd.Session() as s:
        # TF 2's default reduction: the mean over the batch.
        np.testing.assert_allclose(
            s.run(poisson.loss(labels=labels, logits=nd.constant(logits))),
            np.mean(np.exp(logits) - logits * labels), rtol=1e-6)
        p = s.run(logistic.predictions(nd.constant(logits)))
    np.testing.assert_allclose(p["predictions"], sigmoid(logits), rtol=1e-6)
    np.testing.assert_allclose(p["logits"], logits)
    x = np.random.RandomState(1).randn(90, 2).astype(np.float32)
    y = np.argmax(x @ [[1.0, -1.0, 0.0], [0.0, 1.0, -1.0]], axis=1)
    est = nd.estimator.DNNEstimator(
        head=nd.estimator.MultiClassHead(3), hidden_units=[8],
        feature_columns=[nd.feature_column.numeric_column("x", shape=2)],
        model_dir=str(tmp_path), optimizer=nd.train.AdamOptimizer(0.05))

    def input_fn():
        return nd.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(30)

    est.train(input_fn, steps=60)
    assert est.evaluate(input_fn, steps=3)["accuracy"] >= 0.9


def test_multi_label_head_averages_sigmoid_loss_over_classes():
    logits = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], np.float32)
    multi_hot = np.array([[1, 0, 1], [0, 1, 1]])
    head = nd.estimator.MultiLabelHead(3, label_vocabulary=["a", "b", "c"],
                                       thresholds=[0.5])
    # The same labels as strings per example: {a, c} and {b, c}.
    sparse = nd.SparseTensor([[0, 0], [0, 1], [1, 0], [1, 1]], ["a", "c", "b", "c"],
                             [2, 2])
    spec = head.create_estimator_spec({}, ModeKeys.EVAL, nd.constant(logits),
                                      labels=sparse)
    per_class = np.maximum(logits, 0) - logits * multi_hot + np.log1p(
        np.exp(-np.abs(logits)))
    with nd.Session() as s:
        s.run(nd.tables_initializer())
        np.testing.assert_allclose(s.run(spec.loss), per_class.mean(), rtol=1e-5)
    m = run_metrics(spec)
    # ROC AUC: the share of (positive, negative) pairs scored in order (7 of 8).
    pos, neg = logits[multi_hot == 1], logits[multi_hot == 0]
    assert m["auc"] == pytest.approx(np.mean(pos[:, None] > neg[None, :]), abs=1e-3)
    assert m["accuracy/positive_threshold_0.5"] == pytest.approx(
        np.mean((sigmoid(logits) >= 0.5) == multi_hot))
    with pytest.raises(ValueError, match="n_classes must be > 1"):
        nd.estimator.MultiLabelHead(1)


def test_multi_head_sums_weighted_losses_and_keys_by_head():
    binary = nd.estimator.BinaryClassHead(name="click")
    regression = nd.estimator.RegressionHead(name="time")
    head = nd.estimator.MultiHead([binary, regression], head_weights=[1.0, 0.5])
    logits = np.array([[0.5, 2.0], [-1.0, 0.0]], np.float32)
    labels = {"click": np.array([[1], [0]]),
              "time": np.array([[1.0], [0.5]], np.float32)}
    spec = head.create_estimator_spec({}, ModeKeys.EVAL, nd.constant(logits),
                                      labels={k: nd.constant(v)
                                              for k, v in labels.items()})
    sig = np.log1p(np.exp(-np.abs(logits[:, 0]))) + np.maximum(logits[:, 0], 0) - (
        logits[:, 0] * labels["click"][:, 0])
    squared = (logits[:, 1] - labels["time"][:, 0]) ** 2
    with nd.Session() as s:
        # Each head averages over the batch; the heads' losses add with weights.
        np.testing.assert_allclose(s.run(spec.loss),
                                   sig.mean() + 0.5 * squared.mean(), rtol=1e-5)
        p = s.run(spec.predictions)
    np.testing.assert_allclose(p[("time", "predictions")], logits[:, 1:])
    np.testing.assert_allclose(p[("click", "logistic")], sigmoid(logits[:, :1]),
                               rtol=1e-6)
    assert {"accuracy/click", "auc/click", "average_loss/time", "loss/click",
            "loss/time"} <= set(spec.eval_metric_ops)
    predict = head.create_estimator_spec({}, ModeKeys.PREDICT, nd.constant(logits))
    assert {"serving_default", "click", "time", "click/predict"} <= set(
        predict.export_outputs)
