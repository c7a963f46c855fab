"""nd.metrics as TF1's tf.metrics: (value, update_op) pairs over local metric
variables, streaming over batches, reset by local_variables_initializer."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def test_accuracy_streams_and_resets():
    labels = nd.placeholder(nd.int64, [None])
    preds = nd.placeholder(nd.int64, [None])
    acc, update = nd.metrics.accuracy(labels, preds)
    names = [v.op.name for v in nd.local_variables()]
    assert names == ["accuracy/total", "accuracy/count"]
    assert nd.get_collection(nd.GraphKeys.METRIC_VARIABLES) == nd.local_variables()
    assert nd.global_variables() == [] and nd.trainable_variables() == []
    with nd.Session() as s:
        s.run(nd.local_variables_initializer())
        assert s.run(acc) == 0.0  # nothing seen yet: 0, not nan
        assert s.run(update, {labels: [1, 0, 1], preds: [1, 1, 1]}) == \
            pytest.approx(2 / 3)
        s.run(update, {labels: [2, 2], preds: [2, 2]})
        assert s.run(acc) == pytest.approx(4 / 5)
        s.run(nd.local_variables_initializer())
        assert s.run(acc) == 0.0


def test_mean_weighted_and_collections():
    values = nd.placeholder(nd.float32, [None])
    weights = nd.placeholder(nd.float32, [None])
    m, update = nd.metrics.mean(values, weights, metrics_collections=["m"],
                                updates_collections=["u"], name="my_mean")
    assert nd.get_collection("m") == [m] and nd.get_collection("u") == [update]
    assert [v.op.name for v in nd.local_variables()] == ["my_mean/total",
                                                         "my_mean/count"]
    with nd.Session() as s:
        s.run(nd.local_variables_initializer())
        s.run(update, {values: [1.0, 2.0, 3.0], weights: [1.0, 0.0, 2.0]})
        s.run(update, {values: [10.0], weights: [1.0]})
        assert s.run(m) == pytest.approx((1 + 6 + 10) / 4)


def test_regression_metrics():
    y = nd.placeholder(nd.float32, [None])
    p = nd.placeholder(nd.float32, [None])
    mse, mse_up = nd.metrics.mean_squared_error(y, p)
    mae, mae_up = nd.metrics.mean_absolute_error(y, p)
    rmse, rmse_up = nd.metrics.root_mean_squared_error(y, p)
    batches = [([1.0, 2.0], [2.0, 2.0]), ([0.0], [3.0])]
    with nd.Session() as s:
        s.run(nd.local_variables_initializer())
        for yy, pp in batches:
            s.run([mse_up, mae_up, rmse_up], {y: yy, p: pp})
        got = s.run([mse, mae, rmse])
    err = np.array([1.0, 0.0, 3.0])
    np.testing.assert_allclose(got, [np.mean(err ** 2), np.mean(np.abs(err)),
                                     np.sqrt(np.mean(err ** 2))], rtol=1e-6)


def test_counts_precision_recall():
    y = nd.constant([1, 0, 1, 1, 0, 0])
    p = nd.constant([True, True, False, True, False, False])
    fns = {"tp": nd.metrics.true_positives, "fp": nd.metrics.false_positives,
           "fn": nd.metrics.false_negatives, "tn": nd.metrics.true_negatives}
    pairs = {k: f(y, p) for k, f in fns.items()}
    prec = nd.metrics.precision(y, p)
    rec = nd.metrics.recall(y, p, weights=[1.0, 1.0, 3.0, 1.0, 1.0, 1.0])
    assert "precision/true_positives/count" in [v.op.name
                                                for v in nd.local_variables()]
    with nd.Session() as s:
        s.run(nd.local_variables_initializer())
        s.run([u for _, u in pairs.values()] + [prec[1], rec[1]])
        s.run(prec[1])  # a second batch of the same: ratios unchanged
        counts = {k: float(s.run(v)) for k, (v, _) in pairs.items()}
        assert counts == {"tp": 2.0, "fp": 1.0, "fn": 1.0, "tn": 2.0}
        assert s.run(prec[0]) == pytest.approx(2 / 3)
        assert s.run(rec[0]) == pytest.approx(2 / 5)  # weighted fn counts 3


def _exact_roc_auc(y, p):
    pos, neg = p[y == 1], p[y == 0]
    return np.mean([(a > b) + 0.5 * (a == b) for a in pos for b in neg])


def test_auc_roc_pr_and_thresholds():
    rng = np.random.RandomState(0)
    y = (rng.rand(400) < 0.4).astype(np.int64)
    p = np.clip(0.3 * y + 0.7 * rng.rand(400), 0, 1).astype(np.float32)
    labels = nd.placeholder(nd.int64, [None])
    preds = nd.placeholder(nd.float32, [None])
    roc, roc_up = nd.metrics.auc(labels, preds, num_thresholds=1000)
    pr, pr_up = nd.metrics.auc(labels, preds, curve="PR",
                               summation_method="careful_interpolation")
    assert [v.op.name for v in nd.local_variables()][:4] == [
        "auc/true_positives", "auc/false_negatives", "auc/true_negatives",
        "auc/false_positives"]
    assert nd.local_variables()[0].shape.as_list() == [1000]
    with nd.Session() as s:
        s.run(nd.local_variables_initializer())
        for i in range(0, 400, 100):
            s.run([roc_up, pr_up], {labels: y[i:i + 100], preds: p[i:i + 100]})
        roc_v, pr_v = s.run([roc, pr])
        with pytest.raises(nd.errors.InvalidArgumentError, match=r"\[0, 1\]"):
            s.run(roc_up, {labels: [1], preds: [1.5]})
    assert roc_v == pytest.approx(_exact_roc_auc(y, p), abs=2e-3)
    # average precision as an oracle for the interpolated PR area
    order = np.argsort(-p)
    hits = y[order].cumsum()
    ap = np.sum((hits / np.arange(1, 401))[y[order] == 1]) / y.sum()
    assert pr_v == pytest.approx(ap, abs=0.02)
    with pytest.raises(ValueError, match="curve must be either ROC or PR"):
        nd.metrics.auc(labels, preds, curve="XY")


def test_auc_trapezoid_matches_numpy_formula():
    y = np.array([0, 0, 1, 1, 1, 0])
    p = np.array([0.1, 0.4, 0.35, 0.8, 0.9, 0.6], np.float32)
    _, update = nd.metrics.auc(y, p, num_thresholds=5)
    thr = np.array([-1e-7, 0.25, 0.5, 0.75, 1 + 1e-7])
    pos = p[None, :] > thr[:, None]
    tp = (pos & (y == 1)).sum(1)
    fp = (pos & (y == 0)).sum(1)
    fn, tn = 3 - tp, 3 - fp
    eps = 1e-6
    tpr, fpr = (tp + eps) / (tp + fn + eps), fp / (fp + tn + eps)
    want = np.sum((fpr[:-1] - fpr[1:]) * (tpr[:-1] + tpr[1:]) / 2)
    with nd.Session() as s:
        s.run(nd.local_variables_initializer())
        assert s.run(update) == pytest.approx(want, rel=1e-5)


def test_mean_iou():
    y = nd.constant([0, 1, 2, 2, 1])
    p = nd.constant([0, 1, 1, 2, 0])
    miou, update = nd.metrics.mean_iou(y, p, num_classes=4)
    assert nd.local_variables()[0].op.name == "mean_iou/total_confusion_matrix"
    with nd.Session() as s:
        s.run(nd.local_variables_initializer())
        cm = s.run(update)
        value = s.run(miou)
    want_cm = np.zeros((4, 4))
    for a, b in zip([0, 1, 2, 2, 1], [0, 1, 1, 2, 0]):
        want_cm[a, b] += 1
    np.testing.assert_array_equal(cm, want_cm)
    inter = np.diag(want_cm)
    union = want_cm.sum(0) + want_cm.sum(1) - inter
    assert value == pytest.approx(np.mean(inter[union > 0] / union[union > 0]))


def test_threshold_metrics():
    y = np.array([1, 0, 1, 1, 0])
    p = np.array([0.9, 0.6, 0.4, 0.7, 0.1], np.float32)
    thr = [0.3, 0.5, 0.8]
    tp, tp_up = nd.metrics.true_positives_at_thresholds(y, p, thr)
    fp, fp_up = nd.metrics.false_positives_at_thresholds(y, p, thr)
    prec, prec_up = nd.metrics.precision_at_thresholds(y, p, thr)
    rec, rec_up = nd.metrics.recall_at_thresholds(y, p, thr)
    with nd.Session() as s:
        s.run(nd.local_variables_initializer())
        s.run([tp_up, fp_up, prec_up, rec_up])
        got = s.run([tp, fp, prec, rec])
    pos = p[None, :] > np.array(thr)[:, None]
    want_tp = (pos & (y == 1)).sum(1)
    want_fp = (pos & (y == 0)).sum(1)
    np.testing.assert_array_equal(got[0], want_tp)
    np.testing.assert_array_equal(got[1], want_fp)
    np.testing.assert_allclose(got[2], want_tp / (want_tp + want_fp), rtol=1e-5)
    np.testing.assert_allclose(got[3], want_tp / 3, rtol=1e-5)


def test_mean_per_class_accuracy_tensor_and_friends():
    labels = nd.constant([0, 0, 1, 2, 2, 2])
    preds = nd.constant([0, 1, 1, 2, 0, 2])
    mpca, mpca_up = nd.metrics.mean_per_class_accuracy(labels, preds, 4)
    values = nd.placeholder(nd.float32, [2])
    mt, mt_up = nd.metrics.mean_tensor(values)
    pb, pb_up = nd.metrics.percentage_below(nd.constant([1.0, 5.0, 2.0, 7.0]), 3.0)
    mre, mre_up = nd.metrics.mean_relative_error([2.0, 4.0], [3.0, 4.0],
                                                 normalizer=[2.0, 0.0])
    mcd, mcd_up = nd.metrics.mean_cosine_distance([[1.0, 0.0]], [[0.6, 0.8]], dim=1)
    with nd.Session() as s:
        s.run(nd.local_variables_initializer())
        s.run([mpca_up, pb_up, mre_up, mcd_up])
        s.run(mt_up, {values: [1.0, 2.0]})
        s.run(mt_up, {values: [3.0, 6.0]})
        got = s.run([mpca, mt, pb, mre, mcd])
    assert got[0] == pytest.approx((0.5 + 1.0 + 2 / 3 + 0.0) / 4)  # unseen class: 0
    np.testing.assert_allclose(got[1], [2.0, 4.0])
    assert got[2] == pytest.approx(0.5)
    assert got[3] == pytest.approx((0.5 + 0.0) / 2)
    assert got[4] == pytest.approx(1 - 0.6)
