"""nd.metrics' *_at_k family and sensitivity/specificity operating points.
Numbers marked "TF" are what TensorFlow 2.21's tf.compat.v1.metrics gave on the
same inputs (RandomState(0)); the small cases are worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

M = nd.metrics
RS = np.random.RandomState(0)
PRED = RS.rand(6, 5).astype(np.float32)
LABELS = np.array([[0, 3], [1, 1], [4, -1], [2, 0], [3, 4], [1, 2]], np.int64)
W = np.array([1.0, 2.0, 0.5, 1.0, 0.0, 3.0])
P2 = RS.rand(50).astype(np.float32)
L2 = (RS.rand(50) > 0.4).astype(np.int64)


def value_after_update(make):
    with nd.Graph().as_default():
        value, update = make()
        with nd.Session() as s:
            s.run(nd.local_variables_initializer())
            first = s.run(update)
            assert s.run(value) == pytest.approx(first)
            return float(first)


@pytest.mark.parametrize("make,want", [
    (lambda: M.precision_at_k(LABELS, PRED, 2), 0.16666666666666666),
    (lambda: M.precision_at_k(LABELS, PRED, 3, weights=W), 0.2222222222222222),
    # The dense -1 counts as a label never found, as TF's set operations do.
    (lambda: M.recall_at_k(LABELS, PRED, 2), 0.18181818181818182),
    (lambda: M.recall_at_k(LABELS, PRED, 3, weights=W), 0.38461538461538464),
    (lambda: M.average_precision_at_k(LABELS, PRED, 3), 0.18055555555555555),
    (lambda: M.sparse_average_precision_at_k(LABELS, PRED, 2, weights=W),
     0.23333333333333334),
    (lambda: M.precision_at_top_k(LABELS, nd.nn.top_k(PRED, 2)[1]),
     0.16666666666666666),
    # k only names the metric: all three columns count.
    (lambda: M.recall_at_top_k(LABELS, nd.nn.top_k(PRED, 3)[1], k=2),
     0.36363636363636365),
    (lambda: M.sensitivity_at_specificity(L2, P2, 0.7), 0.5),
    (lambda: M.sensitivity_at_specificity(L2, P2, 0.3, num_thresholds=10), 0.65625),
    (lambda: M.specificity_at_sensitivity(L2, P2, 0.6), 0.3888888955116272),
])
def test_matches_tf(make, want):
    assert value_after_update(make) == pytest.approx(want, rel=1e-6)     # TF


@pytest.mark.parametrize("class_id,precision,recall", [
    (None, 0.5, 0.5), (2, 1.0, 1.0), (0, 0.0, 0.0), (1, 0.0, 0.0)])
def test_by_hand_with_class_id(class_id, precision, recall):
    # Top 2 of [0.1, 0.2, 0.7] are classes 2 and 1; the labels are 2 and 0.
    labels, pred = [[2, 0]], [[0.1, 0.2, 0.7]]
    assert value_after_update(lambda: M.precision_at_k(
        labels, pred, 2, class_id=class_id)) == precision
    assert value_after_update(lambda: M.recall_at_k(
        labels, pred, 2, class_id=class_id)) == recall


def test_sparse_labels_streaming_and_names():
    pred = [[0.1, 0.2, 0.7], [0.5, 0.4, 0.1]]
    with nd.Graph().as_default():
        labels = nd.SparseTensor([[0, 0], [1, 0], [1, 1]],
                                 np.array([2, 1, 0], np.int64), [2, 2])
        value, update = M.precision_at_k(labels, pred, 1)
        names = sorted(v.op.name for v in nd.local_variables())
        assert names == ["precision_at_1/false_positive_at_1",
                         "precision_at_1/true_positive_at_1"]
        assert value.dtype == nd.float64
        with nd.Session() as s:
            s.run(nd.local_variables_initializer())
            assert s.run(update) == 1.0          # 2 in {2}, 0 in {1, 0}
            assert s.run(update) == 1.0 and s.run(value) == 1.0
        ap, ap_up = M.average_precision_at_k([[1, 7]], [[0.9, 0.8, 0.1]], 2)
        with nd.Session() as s:
            s.run(nd.local_variables_initializer())
            # Rank 2 hits: precision 1/2 there, over min(k, 2 labels) = 2.
            assert s.run(ap_up) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="must be in the range"):
        M.sensitivity_at_specificity([1], [0.5], 1.5)
