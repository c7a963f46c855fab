"""``nd.losses``: TF1's ``tf.losses`` (``tf.compat.v1.losses``). Each loss weighs
its per-element losses by ``weights`` (broadcast), reduces them as
``reduction`` says (by default the mean over the elements of nonzero weight)
and adds the result to ``loss_collection`` (``GraphKeys.LOSSES``).

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     loss = nd.losses.mean_squared_error([1.0, 2.0], [1.0, 4.0])
...     with nd.Session() as s:
...         float(s.run(loss)), nd.losses.get_losses() == [loss]
(2.0, True)
"""

from __future__ import annotations

import nbdist as nd
from nbdist.framework.ops import GraphKeys

REGULARIZATION_LOSSES = "regularization_losses"


class Reduction:
    """How a weighted loss is reduced (TF1's ``tf.losses.Reduction``)."""

    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls):
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE,
                cls.SUM_OVER_NONZERO_WEIGHTS, cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key):
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}.")


def _safe_div(num, den):
    """num / den, 0 where den is 0 (TF's ``div_no_nan``)."""
    zero = nd.equal(den, 0.0)
    return nd.where(zero, nd.zeros_like(num),
                    nd.divide(num, nd.where(zero, nd.ones_like(den), den)))


def _num_present(losses, weights):
    present = nd.where(nd.equal(weights, 0.0), nd.zeros_like(weights),
                       nd.ones_like(weights))
    present = nd.multiply(present, nd.ones_like(losses))
    return nd.reduce_sum(present)


def add_loss(loss, loss_collection=GraphKeys.LOSSES):
    """Adds ``loss`` to ``loss_collection`` (nothing when it is None)."""
    if loss_collection:
        nd.add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=GraphKeys.LOSSES):
    """The losses in ``loss_collection`` (whose names match ``scope``)."""
    return nd.get_collection(loss_collection, scope)


def get_regularization_losses(scope=None):
    """The losses in ``GraphKeys.REGULARIZATION_LOSSES``."""
    return nd.get_collection(REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    """The sum of the regularisation losses (0.0 when there are none)."""
    losses = get_regularization_losses(scope)
    if losses:
        return nd.add_n(losses, name=name)
    return nd.constant(0.0)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
    """The sum of ``get_losses()`` (and the regularisation losses)."""
    losses = get_losses(scope=scope)
    if add_regularization_losses:
        losses = losses + get_regularization_losses(scope=scope)
    if not losses:
        raise ValueError("No losses to add: get_losses() and the regularization "
                         "losses are empty")
    return nd.add_n(losses, name=name)


def compute_weighted_loss(losses, weights=1.0, scope=None,
                          loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``losses * weights`` reduced by ``reduction``; added to
    ``loss_collection``. ``weights`` must broadcast to ``losses``' shape."""
    Reduction.validate(reduction)
    with nd.name_scope(scope, "weighted_loss"):
        losses = nd.convert_to_tensor(losses)
        input_dtype = losses.dtype.base_dtype
        losses = nd.cast(losses, nd.float32)
        weights = nd.cast(nd.convert_to_tensor(weights), nd.float32)
        _check_weights(losses, weights)
        weighted = nd.multiply(losses, weights)
        if reduction == Reduction.NONE:
            loss = weighted
        else:
            loss = nd.reduce_sum(weighted)
            if reduction == Reduction.MEAN:
                loss = _safe_div(loss, nd.reduce_sum(
                    nd.multiply(nd.ones_like(losses), weights)))
            elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                loss = _safe_div(loss, _num_present(losses, weights))
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = _safe_div(loss, nd.cast(nd.size(losses), nd.float32))
        loss = nd.cast(loss, input_dtype)
        if reduction != Reduction.NONE:
            loss = nd.identity(loss, name="value")
        add_loss(loss, loss_collection)
        return loss


def _check_weights(losses, weights):
    ws, ls = weights.shape, losses.shape
    if ws.ndims is None or ls.ndims is None or ws.ndims == 0:
        return
    if ws.ndims > ls.ndims:
        raise ValueError(f"weights can not be broadcast to values. "
                         f"values.rank={ls.ndims}. weights.rank={ws.ndims}. "
                         f"values.shape={ls}. weights.shape={ws}.")
    for w, v in zip(reversed(ws.as_list()), reversed(ls.as_list())):
        if w is not None and v is not None and w not in (1, v):
            raise ValueError(f"weights can not be broadcast to values. "
                             f"values.shape={ls}. weights.shape={ws}.")


def _prepare(labels, predictions, what="predictions", dtype=nd.float32):
    if labels is None:
        raise ValueError("labels must not be None.")
    if predictions is None:
        raise ValueError(f"{what} must not be None.")
    predictions = nd.cast(nd.convert_to_tensor(predictions), dtype)
    labels = nd.cast(nd.convert_to_tensor(labels), dtype)
    if not predictions.shape.is_compatible_with(labels.shape):
        raise ValueError(f"Shapes {predictions.shape} and {labels.shape} are "
                         "incompatible")
    return labels, predictions


def absolute_difference(labels, predictions, weights=1.0, scope=None,
                        loss_collection=GraphKeys.LOSSES,
                        reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted ``|predictions - labels|``."""
    with nd.name_scope(scope, "absolute_difference") as sc:
        labels, predictions = _prepare(labels, predictions)
        losses = nd.abs(nd.subtract(predictions, labels))
        return compute_weighted_loss(losses, weights, sc, loss_collection,
                                     reduction)


def mean_squared_error(labels, predictions, weights=1.0, scope=None,
                       loss_collection=GraphKeys.LOSSES,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted ``(predictions - labels) ** 2``."""
    with nd.name_scope(scope, "mean_squared_error") as sc:
        labels, predictions = _prepare(labels, predictions)
        losses = nd.squared_difference(predictions, labels)
        return compute_weighted_loss(losses, weights, sc, loss_collection,
                                     reduction)


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None,
               loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``0.5 * e**2`` where ``|e| <= delta``, else ``delta * (|e| - 0.5 * delta)``."""
    with nd.name_scope(scope, "huber_loss") as sc:
        labels, predictions = _prepare(labels, predictions)
        err = nd.abs(nd.subtract(predictions, labels))
        quadratic = nd.minimum(err, delta)
        linear = nd.subtract(err, quadratic)
        losses = nd.add(nd.multiply(0.5, nd.square(quadratic)),
                        nd.multiply(float(delta), linear))
        return compute_weighted_loss(losses, weights, sc, loss_collection,
                                     reduction)


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None,
             loss_collection=GraphKeys.LOSSES,
             reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``-labels * log(p + eps) - (1 - labels) * log(1 - p + eps)``."""
    with nd.name_scope(scope, "log_loss") as sc:
        labels, predictions = _prepare(labels, predictions)
        losses = nd.subtract(
            nd.negative(nd.multiply(labels, nd.log(predictions + epsilon))),
            nd.multiply(1.0 - labels, nd.log(1.0 - predictions + epsilon)))
        return compute_weighted_loss(losses, weights, sc, loss_collection,
                                     reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None,
               loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``max(0, 1 - (2 * labels - 1) * logits)`` for labels in {0, 1}."""
    with nd.name_scope(scope, "hinge_loss") as sc:
        labels, logits = _prepare(labels, logits, "logits")
        signs = nd.subtract(nd.multiply(2.0, labels), 1.0)
        losses = nd.nn.relu(nd.subtract(1.0, nd.multiply(logits, signs)))
        return compute_weighted_loss(losses, weights, sc, loss_collection,
                                     reduction)


def cosine_distance(labels, predictions, axis=None, weights=1.0, scope=None,
                    loss_collection=GraphKeys.LOSSES,
                    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS, dim=None):
    """``1 - sum(labels * predictions, axis)`` for unit-normalised inputs."""
    if dim is not None:
        if axis is not None:
            raise ValueError("Cannot specify both 'axis' and 'dim'")
        axis = dim
    if axis is None:
        raise ValueError("You must specify 'axis'.")
    with nd.name_scope(scope, "cosine_distance_loss") as sc:
        labels, predictions = _prepare(labels, predictions)
        losses = nd.subtract(1.0, nd.reduce_sum(nd.multiply(predictions, labels),
                                                axis=axis, keepdims=True))
        return compute_weighted_loss(losses, weights, sc, loss_collection,
                                     reduction)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0,
                          label_smoothing=0, scope=None,
                          loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Sigmoid cross-entropy; ``label_smoothing`` moves labels towards 0.5:
    ``labels * (1 - s) + 0.5 * s``."""
    with nd.name_scope(scope, "sigmoid_cross_entropy_loss") as sc:
        if logits is None:
            raise ValueError("logits must not be None.")
        logits = nd.convert_to_tensor(logits)
        labels, logits = _prepare(multi_class_labels, logits, "logits",
                                  logits.dtype.base_dtype)
        if label_smoothing > 0:
            labels = labels * (1.0 - label_smoothing) + 0.5 * label_smoothing
        losses = nd.nn.sigmoid_cross_entropy_with_logits(labels=labels,
                                                         logits=logits,
                                                         name="xentropy")
        return compute_weighted_loss(losses, weights, sc, loss_collection,
                                     reduction)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0,
                          scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Softmax cross-entropy of one-hot labels; ``label_smoothing`` s gives
    ``labels * (1 - s) + s / num_classes``. ``weights`` per example."""
    with nd.name_scope(scope, "softmax_cross_entropy_loss") as sc:
        if logits is None:
            raise ValueError("logits must not be None.")
        logits = nd.convert_to_tensor(logits)
        labels, logits = _prepare(onehot_labels, logits, "logits",
                                  logits.dtype.base_dtype)
        if label_smoothing > 0:
            classes = nd.cast(nd.shape(labels)[-1], labels.dtype)
            labels = labels * (1.0 - label_smoothing) + label_smoothing / classes
        losses = nd.nn.softmax_cross_entropy_with_logits_v2(
            labels=nd.stop_gradient(labels), logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, sc, loss_collection,
                                     reduction)


def _squeeze_last(t, other_rank):
    if t.shape.ndims is not None and other_rank is not None and \
            t.shape.ndims == other_rank + 1 and t.shape.as_list()[-1] == 1:
        return nd.squeeze(t, [-1])
    return t


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None,
                                 loss_collection=GraphKeys.LOSSES,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Softmax cross-entropy of integer class ``labels`` ([batch] or
    [batch, 1])."""
    with nd.name_scope(scope, "sparse_softmax_cross_entropy_loss") as sc:
        if labels is None:
            raise ValueError("labels must not be None.")
        if logits is None:
            raise ValueError("logits must not be None.")
        logits = nd.convert_to_tensor(logits)
        labels = nd.convert_to_tensor(labels)
        rank = logits.shape.ndims
        labels = _squeeze_last(labels, None if rank is None else rank - 1)
        weights = nd.convert_to_tensor(weights)
        weights = _squeeze_last(weights, labels.shape.ndims)
        losses = nd.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, sc, loss_collection,
                                     reduction)


def mean_pairwise_squared_error(labels, predictions, weights=1.0, scope=None,
                                loss_collection=GraphKeys.LOSSES):
    """For each example, the mean of ``((p_i - l_i) - (p_j - l_j)) ** 2`` over
    the pairs of its elements, weighted by ``weights`` (per example) and
    summed over the batch, as TF1."""
    with nd.name_scope(scope, "mean_pairwise_squared_error"):
        labels, predictions = _prepare(labels, predictions)
        weights = nd.cast(nd.convert_to_tensor(weights), nd.float32)
        diffs = nd.subtract(predictions, labels)
        if diffs.shape.ndims is None or diffs.shape.ndims < 2:
            raise ValueError(f"mean_pairwise_squared_error needs a batch of "
                             f"examples of rank >= 1, got shape {diffs.shape}")
        axes = list(range(1, diffs.shape.ndims))
        if weights.shape.ndims == 1:  # one weight per example
            weights = nd.reshape(weights, [-1] + [1] * len(axes))
        present = nd.where(nd.equal(weights, 0.0), nd.zeros_like(weights),
                           nd.ones_like(weights))
        present = nd.reduce_sum(nd.multiply(present, nd.ones_like(diffs)),
                                axis=axes, keepdims=True)
        sum_sq = nd.reduce_sum(nd.square(diffs), axis=axes, keepdims=True)
        term1 = 2.0 * _safe_div(sum_sq, nd.maximum(present - 1.0, 0.0))
        sum_d = nd.reduce_sum(diffs, axis=axes, keepdims=True)
        term2 = 2.0 * _safe_div(nd.square(sum_d), nd.maximum(
            present * (present - 1.0), 0.0))
        loss = nd.reduce_sum(nd.multiply(term1 - term2, weights))
        loss = nd.where(nd.greater(nd.reduce_sum(present), 0.0), loss,
                        nd.zeros_like(loss), name="value")
        add_loss(loss, loss_collection)
        return loss


__all__ = [
    "Reduction", "absolute_difference", "add_loss", "compute_weighted_loss",
    "cosine_distance", "get_losses", "get_regularization_loss",
    "get_regularization_losses", "get_total_loss", "hinge_loss", "huber_loss",
    "log_loss", "mean_pairwise_squared_error", "mean_squared_error",
    "sigmoid_cross_entropy", "softmax_cross_entropy",
    "sparse_softmax_cross_entropy",
]
