"""nd.losses as TF1's tf.losses: per-element formulas, weights, reductions
(SUM_BY_NONZERO_WEIGHTS by default), label smoothing and the collections."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def _run(t):
    with nd.Session() as s:
        return s.run(t)


LABELS = np.array([[1.0, 0.0, 2.0], [0.5, 1.0, -1.0]], np.float32)
PREDS = np.array([[1.5, 0.0, 0.0], [0.0, 3.0, -1.5]], np.float32)
W = np.array([[2.0], [0.0]], np.float32)  # second row weighted out


def _weighted_mean(per_elem, w=W):
    w = np.broadcast_to(w, per_elem.shape)
    return (per_elem * w).sum() / (w != 0).sum()


def test_regression_losses_with_weights():
    err = PREDS - LABELS
    huber = np.where(np.abs(err) <= 1, 0.5 * err ** 2, np.abs(err) - 0.5)
    cases = [
        (nd.losses.mean_squared_error, err ** 2),
        (nd.losses.absolute_difference, np.abs(err)),
        (nd.losses.huber_loss, huber),
    ]
    for fn, per_elem in cases:
        assert _run(fn(LABELS, PREDS)) == pytest.approx(per_elem.mean(), rel=1e-6)
        assert _run(fn(LABELS, PREDS, weights=W)) == pytest.approx(
            _weighted_mean(per_elem), rel=1e-6)
    assert len(nd.losses.get_losses()) == 6


def test_reductions():
    per_elem = (PREDS - LABELS) ** 2
    w = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 1.0]], np.float32)
    R = nd.losses.Reduction
    got = {r: _run(nd.losses.mean_squared_error(LABELS, PREDS, w, reduction=r))
           for r in (R.NONE, R.SUM, R.MEAN, R.SUM_OVER_BATCH_SIZE,
                     R.SUM_BY_NONZERO_WEIGHTS)}
    np.testing.assert_allclose(got[R.NONE], per_elem * w)
    assert got[R.SUM] == pytest.approx((per_elem * w).sum())
    assert got[R.MEAN] == pytest.approx((per_elem * w).sum() / w.sum())
    assert got[R.SUM_OVER_BATCH_SIZE] == pytest.approx((per_elem * w).sum() / 6)
    assert got[R.SUM_BY_NONZERO_WEIGHTS] == pytest.approx((per_elem * w).sum() / 4)
    assert R.SUM_OVER_NONZERO_WEIGHTS == R.SUM_BY_NONZERO_WEIGHTS
    with pytest.raises(ValueError, match="Invalid Reduction Key"):
        nd.losses.mean_squared_error(LABELS, PREDS, reduction="bogus")
    zero = nd.losses.mean_squared_error(LABELS, PREDS, weights=0.0)
    assert _run(zero) == 0.0  # no present elements: 0, not nan


def test_cross_entropies_and_label_smoothing():
    logits = np.array([[1.0, 2.0, 0.5], [3.0, 1.0, -1.0]], np.float32)
    onehot = np.array([[0, 1, 0], [1, 0, 0]], np.float32)

    def xent(labels):
        lse = np.log(np.exp(logits).sum(1, keepdims=True))
        return -(labels * (logits - lse)).sum(1)

    smooth = onehot * 0.7 + 0.3 / 3
    assert _run(nd.losses.softmax_cross_entropy(onehot, logits)) == pytest.approx(
        xent(onehot).mean(), rel=1e-5)
    assert _run(nd.losses.softmax_cross_entropy(
        onehot, logits, weights=[1.0, 3.0], label_smoothing=0.3)) == pytest.approx(
        (xent(smooth) * [1, 3]).sum() / 2, rel=1e-5)
    sparse = nd.losses.sparse_softmax_cross_entropy([[1], [0]], logits)
    assert _run(sparse) == pytest.approx(xent(onehot).mean(), rel=1e-5)

    z, y = logits, np.array([[1, 0, 1], [0, 0, 1]], np.float32)
    ys = y * 0.8 + 0.5 * 0.2

    def sig(lbl):
        return np.maximum(z, 0) - z * lbl + np.log1p(np.exp(-np.abs(z)))

    assert _run(nd.losses.sigmoid_cross_entropy(y, z)) == pytest.approx(
        sig(y).mean(), rel=1e-5)
    assert _run(nd.losses.sigmoid_cross_entropy(
        y, z, label_smoothing=0.2)) == pytest.approx(sig(ys).mean(), rel=1e-5)


def test_log_hinge_cosine():
    p = np.array([0.9, 0.2, 0.6], np.float32)
    y = np.array([1.0, 0.0, 0.0], np.float32)
    eps = 1e-7
    want = -y * np.log(p + eps) - (1 - y) * np.log(1 - p + eps)
    assert _run(nd.losses.log_loss(y, p)) == pytest.approx(want.mean(), rel=1e-5)
    hinge = np.maximum(0, 1 - (2 * y - 1) * np.array([2.0, -0.5, 0.3]))
    assert _run(nd.losses.hinge_loss(y, [2.0, -0.5, 0.3])) == pytest.approx(
        hinge.mean(), rel=1e-6)
    a = np.array([[1.0, 0.0], [0.6, 0.8]], np.float32)
    b = np.array([[0.6, 0.8], [0.6, 0.8]], np.float32)
    assert _run(nd.losses.cosine_distance(a, b, axis=1)) == pytest.approx(
        np.mean(1 - (a * b).sum(1)), rel=1e-6)
    with pytest.raises(ValueError, match="You must specify 'axis'"):
        nd.losses.cosine_distance(a, b)


def test_collections_total_loss_and_errors():
    w = nd.get_variable("w", [2], initializer=nd.ones_initializer(),
                        regularizer=lambda v: 0.5 * nd.reduce_sum(v))
    direct = nd.losses.absolute_difference([0.0], [2.0], loss_collection=None)
    assert nd.losses.get_losses() == []
    mse = nd.losses.mean_squared_error([0.0], [3.0])
    nd.losses.add_loss(nd.constant(1.0))
    assert len(nd.losses.get_losses()) == 2
    assert len(nd.losses.get_regularization_losses()) == 1
    with nd.Session() as s:
        s.run(w.initializer)
        vals = s.run([direct, mse, nd.losses.get_regularization_loss(),
                      nd.losses.get_total_loss(),
                      nd.losses.get_total_loss(add_regularization_losses=False)])
    assert [float(v) for v in vals] == [2.0, 9.0, 1.0, 11.0, 10.0]
    with pytest.raises(ValueError, match="incompatible"):
        nd.losses.mean_squared_error([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="labels must not be None"):
        nd.losses.mean_squared_error(None, [1.0])
    with pytest.raises(ValueError, match="broadcast"):
        nd.losses.mean_squared_error(LABELS, PREDS, weights=[1.0, 2.0])


def test_compute_weighted_loss_gradient():
    x = nd.constant([1.0, -2.0, 3.0], dtype=nd.float64)
    loss = nd.losses.huber_loss(nd.zeros([3], nd.float64), x, weights=[1.0, 2.0, 0.0],
                                delta=1.5)
    g = nd.gradients(loss, x)[0]
    # d/dx: huber'(x) * w / 2 nonzero weights
    want = np.array([1.0 * 1, -1.5 * 2, 0.0]) / 2
    np.testing.assert_allclose(_run(g), want, rtol=1e-6)


def test_mean_pairwise_squared_error():
    labels = np.array([[1.0, 9.0, 2.0], [-5.0, -2.0, 6.0]], np.float32)
    preds = np.array([[4.0, 8.0, 12.0], [8.0, 1.0, 3.0]], np.float32)
    w = np.array([1.5, 2.0], np.float32)
    loss = nd.losses.mean_pairwise_squared_error(labels, preds, weights=w)
    d = preds - labels
    per_example = [np.mean([(r[i] - r[j]) ** 2 for i in range(3) for j in range(3)
                            if i != j]) for r in d]
    assert _run(loss) == pytest.approx(np.sum(np.array(per_example) * w), rel=1e-5)
