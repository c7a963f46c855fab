"""``nd.contrib.losses`` (``slim.losses``): TF1's deprecated
``tf.contrib.losses`` names, whose cross-entropies take ``logits`` first, over
``nd.losses``.

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     loss = nd.contrib.losses.softmax_cross_entropy([[0.0, 0.0]], [[1.0, 0.0]])
...     with nd.Session() as s:
...         round(float(s.run(loss)), 4)
0.6931
"""

from __future__ import annotations

from nbdist import losses as _losses
from nbdist.losses import (
    absolute_difference,
    add_loss,
    compute_weighted_loss,
    cosine_distance,
    get_losses,
    get_regularization_losses,
    get_total_loss,
    hinge_loss,
    log_loss,
    mean_pairwise_squared_error,
)

mean_squared_error = _losses.mean_squared_error


def softmax_cross_entropy(logits, onehot_labels, weights=1.0, label_smoothing=0,
                          scope=None):
    """``nd.losses.softmax_cross_entropy`` with ``logits`` first."""
    return _losses.softmax_cross_entropy(onehot_labels, logits, weights,
                                         label_smoothing, scope)


def sparse_softmax_cross_entropy(logits, labels, weights=1.0, scope=None):
    """``nd.losses.sparse_softmax_cross_entropy`` with ``logits`` first."""
    return _losses.sparse_softmax_cross_entropy(labels, logits, weights, scope)


def sigmoid_cross_entropy(logits, multi_class_labels, weights=1.0,
                          label_smoothing=0, scope=None):
    """``nd.losses.sigmoid_cross_entropy`` with ``logits`` first."""
    return _losses.sigmoid_cross_entropy(multi_class_labels, logits, weights,
                                         label_smoothing, scope)


__all__ = [
    "absolute_difference", "add_loss", "compute_weighted_loss", "cosine_distance",
    "get_losses", "get_regularization_losses", "get_total_loss", "hinge_loss",
    "log_loss", "mean_pairwise_squared_error", "mean_squared_error",
    "sigmoid_cross_entropy", "softmax_cross_entropy",
    "sparse_softmax_cross_entropy",
]
