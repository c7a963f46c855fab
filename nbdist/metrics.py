"""``nd.metrics``: TF1's streaming metrics (``tf.metrics``). Each returns
``(value, update_op)``: ``update_op`` folds a batch into local variables (in
``LOCAL_VARIABLES`` and ``METRIC_VARIABLES``, named ``<metric>/total`` ...)
and returns the updated value; ``value`` reads the current one.
``nd.local_variables_initializer()`` resets them.

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     acc, update = nd.metrics.accuracy([1, 0, 1], [1, 1, 1])
...     with nd.Session() as s:
...         s.run(nd.local_variables_initializer())
...         round(float(s.run(update)), 4), round(float(s.run(acc)), 4)
(0.6667, 0.6667)
"""

from __future__ import annotations

import numpy as np

import nbdist as nd
from nbdist.framework.ops import GraphKeys

METRIC_VARIABLES = "metric_variables"


def metric_variable(shape, dtype, validate_shape=True, name=None):
    """A zero-initialised local variable in ``LOCAL_VARIABLES`` and
    ``METRIC_VARIABLES`` (not trainable, not saved by default)."""
    dtype = nd.as_dtype(dtype)
    return nd.Variable(lambda: nd.zeros(shape, dtype), trainable=False,
                       collections=[GraphKeys.LOCAL_VARIABLES, METRIC_VARIABLES],
                       validate_shape=validate_shape, name=name, dtype=dtype)


def _div_no_nan(num, den, name=None):
    zero = nd.equal(den, 0.0)
    safe = nd.where(zero, nd.ones_like(den), den)
    return nd.where(zero, nd.zeros_like(num), nd.divide(num, safe), name=name)


def _collect(value, update_op, metrics_collections, updates_collections):
    for c in metrics_collections or ():
        nd.add_to_collection(c, value)
    for c in updates_collections or ():
        nd.add_to_collection(c, update_op)
    return value, update_op


def _squeeze_pair(labels, predictions):
    """TF's ``remove_squeezable_dimensions``: drops a trailing size-1 axis that
    makes one rank exceed the other by one; then checks the shapes agree."""
    labels = nd.convert_to_tensor(labels)
    predictions = nd.convert_to_tensor(predictions)
    lr, pr = labels.shape.ndims, predictions.shape.ndims
    if lr is not None and pr is not None:
        if lr == pr + 1 and labels.shape.as_list()[-1] == 1:
            labels = nd.squeeze(labels, [-1])
        elif pr == lr + 1 and predictions.shape.as_list()[-1] == 1:
            predictions = nd.squeeze(predictions, [-1])
    if not predictions.shape.is_compatible_with(labels.shape):
        raise ValueError(f"Shapes {predictions.shape} and {labels.shape} are "
                         "incompatible")
    return labels, predictions


def _weights_like(weights, values):
    if weights is None:
        return nd.ones_like(values)
    return nd.multiply(nd.cast(weights, nd.float32), nd.ones_like(values))


def mean(values, weights=None, metrics_collections=None, updates_collections=None,
         name=None):
    """The (weighted) mean of all ``values`` seen: variables ``total``,
    ``count``."""
    with nd.variable_scope(name, "mean"):
        return _mean_here(values, weights, metrics_collections, updates_collections)


def accuracy(labels, predictions, weights=None, metrics_collections=None,
             updates_collections=None, name=None):
    """The fraction of ``predictions`` equal to ``labels`` (weighted)."""
    with nd.variable_scope(name, "accuracy"):
        labels, predictions = _squeeze_pair(labels, predictions)
        if labels.dtype.base_dtype != predictions.dtype.base_dtype:
            predictions = nd.cast(predictions, labels.dtype.base_dtype)
        correct = nd.cast(nd.equal(predictions, labels), nd.float32)
        return _mean_here(correct, weights, metrics_collections,
                          updates_collections)


def _mean_here(values, weights, metrics_collections, updates_collections):
    # ``mean``'s body in the caller's variable scope (``accuracy/total`` ...).
    values = nd.cast(values, nd.float32)
    total = metric_variable([], nd.float32, name="total")
    count = metric_variable([], nd.float32, name="count")
    w = _weights_like(weights, values)
    values = nd.multiply(values, w)
    update_total = nd.assign_add(total, nd.reduce_sum(values))
    with nd.control_dependencies([values]):
        update_count = nd.assign_add(count, nd.reduce_sum(w))
    value = _div_no_nan(total, count, name="value")
    update_op = _div_no_nan(update_total, update_count, name="update_op")
    return _collect(value, update_op, metrics_collections, updates_collections)


def mean_squared_error(labels, predictions, weights=None, metrics_collections=None,
                       updates_collections=None, name=None):
    """The running mean of ``(predictions - labels) ** 2``."""
    with nd.variable_scope(name, "mean_squared_error"):
        labels, predictions = _squeeze_pair(labels, predictions)
        sq = nd.squared_difference(nd.cast(predictions, nd.float32),
                                   nd.cast(labels, nd.float32))
        return _mean_here(sq, weights, metrics_collections, updates_collections)


def mean_absolute_error(labels, predictions, weights=None, metrics_collections=None,
                        updates_collections=None, name=None):
    """The running mean of ``|predictions - labels|``."""
    with nd.variable_scope(name, "mean_absolute_error"):
        labels, predictions = _squeeze_pair(labels, predictions)
        ab = nd.abs(nd.subtract(nd.cast(predictions, nd.float32),
                                nd.cast(labels, nd.float32)))
        return _mean_here(ab, weights, metrics_collections, updates_collections)


def root_mean_squared_error(labels, predictions, weights=None,
                            metrics_collections=None, updates_collections=None,
                            name=None):
    """The square root of the running mean squared error."""
    with nd.variable_scope(name, "root_mean_squared_error"):
        labels, predictions = _squeeze_pair(labels, predictions)
        sq = nd.squared_difference(nd.cast(predictions, nd.float32),
                                   nd.cast(labels, nd.float32))
        mse, update = _mean_here(sq, weights, None, None)
        value, update_op = nd.sqrt(mse, name="value"), nd.sqrt(update,
                                                               name="update_op")
        return _collect(value, update_op, metrics_collections, updates_collections)


def _bool_pair(labels, predictions):
    labels, predictions = _squeeze_pair(labels, predictions)
    return nd.cast(labels, nd.bool), nd.cast(predictions, nd.bool)


def _count_condition(condition, weights, metrics_collections, updates_collections):
    count = metric_variable([], nd.float32, name="count")
    values = nd.cast(condition, nd.float32)
    if weights is not None:
        values = nd.multiply(values, nd.cast(weights, nd.float32))
    value = count.read_value()
    update_op = nd.assign_add(count, nd.reduce_sum(values))
    return _collect(value, update_op, metrics_collections, updates_collections)


def _condition_metric(default, make):
    def metric(labels, predictions, weights=None, metrics_collections=None,
               updates_collections=None, name=None):
        with nd.variable_scope(name, default):
            labels, predictions = _bool_pair(labels, predictions)
            return _count_condition(make(labels, predictions), weights,
                                    metrics_collections, updates_collections)

    metric.__name__ = default
    metric.__doc__ = (f"The (weighted) number of {default.replace('_', ' ')} seen "
                      f"(variable ``{default}/count``).")
    return metric


true_positives = _condition_metric(
    "true_positives", lambda y, p: nd.logical_and(y, p))
false_positives = _condition_metric(
    "false_positives", lambda y, p: nd.logical_and(nd.logical_not(y), p))
false_negatives = _condition_metric(
    "false_negatives", lambda y, p: nd.logical_and(y, nd.logical_not(p)))
true_negatives = _condition_metric(
    "true_negatives", lambda y, p: nd.logical_and(nd.logical_not(y),
                                                  nd.logical_not(p)))


def _ratio_metric(default, second):
    def metric(labels, predictions, weights=None, metrics_collections=None,
               updates_collections=None, name=None):
        with nd.variable_scope(name, default):
            tp, tp_up = true_positives(labels, predictions, weights)
            other, other_up = second(labels, predictions, weights)

            def ratio(a, b, nm):
                den = nd.add(a, b)
                return nd.where(nd.greater(den, 0.0), _div_no_nan(a, den),
                                nd.zeros_like(a), name=nm)

            value = ratio(tp, other, "value")
            update_op = ratio(tp_up, other_up, "update_op")
            return _collect(value, update_op, metrics_collections,
                            updates_collections)

    metric.__name__ = default
    return metric


precision = _ratio_metric("precision", false_positives)
precision.__doc__ = "tp / (tp + fp) of boolean-cast labels and predictions."
recall = _ratio_metric("recall", false_negatives)
recall.__doc__ = "tp / (tp + fn) of boolean-cast labels and predictions."


def _auc_thresholds(num_thresholds):
    eps = 1e-7
    inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    return [0.0 - eps] + inner + [1.0 + eps]


def _confusion_at_thresholds(labels, predictions, thresholds, weights,
                             includes=("tp", "fn", "tn", "fp")):
    """tp, fn, tn, fp per threshold (prediction > threshold is positive) and
    their update ops, in variables named as TF's."""
    labels, predictions = _squeeze_pair(labels, predictions)
    predictions = nd.reshape(nd.cast(predictions, nd.float32), [1, -1])
    labels = nd.reshape(nd.cast(labels, nd.bool), [1, -1])
    thr = nd.reshape(nd.constant(thresholds, nd.float32), [-1, 1])
    pred_pos = nd.greater(predictions, thr)  # [T, N]
    pred_neg = nd.logical_not(pred_pos)
    label_pos = nd.tile(labels, [len(thresholds), 1])
    label_neg = nd.logical_not(label_pos)
    w = (None if weights is None
         else nd.reshape(nd.cast(weights, nd.float32) * nd.ones_like(predictions),
                         [1, -1]))
    out, updates = {}, {}
    for key, a, b in (("tp", label_pos, pred_pos), ("fn", label_pos, pred_neg),
                      ("tn", label_neg, pred_neg), ("fp", label_neg, pred_pos)):
        if key not in includes:
            continue
        name = {"tp": "true_positives", "fn": "false_negatives",
                "tn": "true_negatives", "fp": "false_positives"}[key]
        var = metric_variable([len(thresholds)], nd.float32, name=name)
        hit = nd.cast(nd.logical_and(a, b), nd.float32)
        if w is not None:
            hit = nd.multiply(hit, w)
        updates[key] = nd.assign_add(var, nd.reduce_sum(hit, 1))
        out[key] = var.read_value()
    return out, updates


def auc(labels, predictions, weights=None, num_thresholds=200,
        metrics_collections=None, updates_collections=None, curve="ROC", name=None,
        summation_method="trapezoidal", thresholds=None):
    """The area under the ROC (or ``curve="PR"``) curve, from confusion counts
    at ``num_thresholds`` thresholds spread over [0, 1] (with TF's endpoints
    -1e-7 and 1 + 1e-7), summed by the ``trapezoidal`` rule (or
    ``careful_interpolation``, ``minoring``, ``majoring``). Predictions are
    probabilities in [0, 1]."""
    if curve not in ("ROC", "PR"):
        raise ValueError(f"curve must be either ROC or PR, {curve} unknown")
    if summation_method not in ("trapezoidal", "careful_interpolation", "minoring",
                                "majoring"):
        raise ValueError(f"Invalid summation_method: {summation_method}")
    if thresholds is not None:
        eps = 1e-7
        thr = [0.0 - eps] + sorted(float(t) for t in thresholds) + [1.0 + eps]
    else:
        if num_thresholds < 2:
            raise ValueError("num_thresholds must be > 1.")
        thr = _auc_thresholds(num_thresholds)
    n = len(thr)
    with nd.variable_scope(name, "auc"):
        predictions = nd.convert_to_tensor(predictions)
        checks = [nd.assert_greater_equal(
                      nd.cast(predictions, nd.float32), 0.0,
                      message="predictions must be in [0, 1]"),
                  nd.assert_less_equal(nd.cast(predictions, nd.float32), 1.0,
                                       message="predictions must be in [0, 1]")]
        with nd.control_dependencies(checks):
            predictions = nd.identity(predictions)
        counts, updates = _confusion_at_thresholds(labels, predictions, thr, weights)
        eps = 1.0e-6

        def compute(c, nm):
            tp, fn, tn, fp = c["tp"], c["fn"], c["tn"], c["fp"]
            if curve == "PR" and summation_method == "careful_interpolation":
                return _interpolate_pr_auc(tp, fp, fn, n, nm)
            rec = nd.divide(tp + eps, tp + fn + eps)
            if curve == "ROC":
                x, y = nd.divide(fp, fp + tn + eps), rec
            else:
                x, y = rec, nd.divide(tp + eps, tp + fp + eps)
            dx = x[:n - 1] - x[1:]
            if summation_method == "minoring":
                height = nd.minimum(y[:n - 1], y[1:])
            elif summation_method == "majoring":
                height = nd.maximum(y[:n - 1], y[1:])
            else:
                height = (y[:n - 1] + y[1:]) / 2.0
            return nd.reduce_sum(nd.multiply(dx, height), name=nm)

        value = compute(counts, "value")
        update_op = compute(updates, "update_op")
        return _collect(value, update_op, metrics_collections, updates_collections)


def _interpolate_pr_auc(tp, fp, fn, n, name):
    # Davis & Goadrich's interpolation of precision between thresholds, as TF.
    dtp = tp[:n - 1] - tp[1:]
    p = tp + fp
    prec_slope = _div_no_nan(dtp, nd.maximum(p[:n - 1] - p[1:], 0.0))
    intercept = tp[1:] - nd.multiply(prec_slope, p[1:])
    safe_ratio = nd.where(nd.logical_and(nd.greater(p[:n - 1], 0.0),
                                         nd.greater(p[1:], 0.0)),
                          _div_no_nan(p[:n - 1], nd.maximum(p[1:], 0.0)),
                          nd.ones_like(p[1:]))
    safe_ratio = nd.where(nd.greater(safe_ratio, 0.0), safe_ratio,
                          nd.ones_like(safe_ratio))
    return nd.reduce_sum(_div_no_nan(
        prec_slope * (dtp + intercept * nd.log(safe_ratio)),
        nd.maximum(tp[1:] + fn[1:], 0.0)), name=name)


def _confusion_matrix(labels, predictions, num_classes, weights):
    labels = nd.reshape(nd.cast(labels, nd.int32), [-1])
    predictions = nd.reshape(nd.cast(predictions, nd.int32), [-1])
    idx = labels * num_classes + predictions
    w = (nd.ones_like(idx, dtype=nd.float64) if weights is None else
         nd.reshape(nd.cast(weights, nd.float64) * nd.ones_like(
             nd.cast(idx, nd.float64)), [-1]))
    flat = nd.unsorted_segment_sum(w, idx, num_classes * num_classes)
    return nd.reshape(flat, [num_classes, num_classes])


def mean_iou(labels, predictions, num_classes, weights=None,
             metrics_collections=None, updates_collections=None, name=None):
    """The mean over classes of intersection over union, from a running
    ``total_confusion_matrix`` (float64 ``[num_classes, num_classes]``); classes
    never seen are left out of the mean. ``update_op`` returns the matrix."""
    with nd.variable_scope(name, "mean_iou"):
        labels, predictions = _squeeze_pair(labels, predictions)
        total = metric_variable([num_classes, num_classes], nd.float64,
                                name="total_confusion_matrix")
        current = _confusion_matrix(labels, predictions, num_classes, weights)
        update_op = nd.assign_add(total, current)
        cm = nd.cast(total.read_value(), nd.float32)
        rows, cols = nd.reduce_sum(cm, 0), nd.reduce_sum(cm, 1)
        diag = nd.reduce_sum(cm * nd.constant(np.eye(num_classes, dtype=np.float32)),
                             1)
        den = rows + cols - diag
        valid = nd.reduce_sum(nd.cast(nd.not_equal(den, 0.0), nd.float32))
        den = nd.where(nd.greater(den, 0.0), den, nd.ones_like(den))
        iou = nd.divide(diag, den)
        value = nd.where(nd.greater(valid, 0.0),
                         _div_no_nan(nd.reduce_sum(iou), valid), 0.0 * valid,
                         name="mean_iou")
        return _collect(value, update_op, metrics_collections, updates_collections)


def _at_thresholds(default, keys, combine=None):
    def metric(labels, predictions, thresholds, weights=None,
               metrics_collections=None, updates_collections=None, name=None):
        with nd.variable_scope(name, default):
            counts, updates = _confusion_at_thresholds(
                labels, predictions, [float(t) for t in thresholds], weights,
                keys)
            if combine is None:
                value, update_op = counts[keys[0]], updates[keys[0]]
            else:
                value = combine(counts, "value")
                update_op = combine(updates, "update_op")
            return _collect(value, update_op, metrics_collections,
                            updates_collections)

    metric.__name__ = default
    return metric


def _ratio_at(second):
    def combine(c, name):
        return nd.divide(c["tp"], 1e-7 + c["tp"] + c[second], name=name)

    return combine


true_positives_at_thresholds = _at_thresholds("true_positives", ("tp",))
false_positives_at_thresholds = _at_thresholds("false_positives", ("fp",))
true_negatives_at_thresholds = _at_thresholds("true_negatives", ("tn",))
false_negatives_at_thresholds = _at_thresholds("false_negatives", ("fn",))
precision_at_thresholds = _at_thresholds("precision_at_thresholds", ("tp", "fp"),
                                         _ratio_at("fp"))
precision_at_thresholds.__doc__ = ("tp / (tp + fp) at each threshold (a "
                                   "prediction above it is positive).")
recall_at_thresholds = _at_thresholds("recall_at_thresholds", ("tp", "fn"),
                                      _ratio_at("fn"))
recall_at_thresholds.__doc__ = "tp / (tp + fn) at each threshold."


def mean_per_class_accuracy(labels, predictions, num_classes, weights=None,
                            metrics_collections=None, updates_collections=None,
                            name=None):
    """The mean over all ``num_classes`` classes of the accuracy on the
    examples of that class (variables ``total`` and ``count`` per class)."""
    with nd.variable_scope(name, "mean_accuracy"):
        labels, predictions = _squeeze_pair(labels, predictions)
        labels = nd.reshape(nd.cast(labels, nd.int64), [-1])
        predictions = nd.reshape(nd.cast(predictions, nd.int64), [-1])
        total = metric_variable([num_classes], nd.float32, name="total")
        count = metric_variable([num_classes], nd.float32, name="count")
        w = (nd.ones_like(labels, dtype=nd.float32) if weights is None else
             nd.reshape(nd.cast(weights, nd.float32) * nd.ones_like(
                 labels, dtype=nd.float32), [-1]))
        correct = nd.cast(nd.equal(labels, predictions), nd.float32) * w
        update_total = nd.assign_add(total, nd.unsorted_segment_sum(
            w, labels, num_classes))
        update_count = nd.assign_add(count, nd.unsorted_segment_sum(
            correct, labels, num_classes))

        def compute(cnt, tot, nm):
            return nd.reduce_mean(_div_no_nan(cnt, nd.maximum(tot, 0.0)), name=nm)

        value = compute(count, total, "mean_accuracy")
        update_op = compute(update_count, update_total, "update_op")
        return _collect(value, update_op, metrics_collections, updates_collections)


def mean_tensor(values, weights=None, metrics_collections=None,
                updates_collections=None, name=None):
    """The element-wise running mean of ``values`` (of a fixed shape)."""
    with nd.variable_scope(name, "mean"):
        values = nd.cast(values, nd.float32)
        if not values.shape.is_fully_defined():
            raise ValueError(f"mean_tensor needs a fully defined shape, got "
                             f"{values.shape}")
        shape = values.shape.as_list()
        total = metric_variable(shape, nd.float32, name="total_tensor")
        count = metric_variable(shape, nd.float32, name="count_tensor")
        w = _weights_like(weights, values)
        weighted = nd.multiply(values, w)
        update_total = nd.assign_add(total, weighted)
        with nd.control_dependencies([values]):
            update_count = nd.assign_add(count, w)
        value = _div_no_nan(total, count, name="value")
        update_op = _div_no_nan(update_total, update_count, name="update_op")
        return _collect(value, update_op, metrics_collections, updates_collections)


def percentage_below(values, threshold, weights=None, metrics_collections=None,
                     updates_collections=None, name=None):
    """The (weighted) fraction of ``values`` below ``threshold``."""
    with nd.variable_scope(name, "percentage_below_threshold"):
        below = nd.cast(nd.less(values, threshold), nd.float32)
        return _mean_here(below, weights, metrics_collections, updates_collections)


def mean_relative_error(labels, predictions, normalizer, weights=None,
                        metrics_collections=None, updates_collections=None,
                        name=None):
    """The running mean of ``|predictions - labels| / normalizer`` (0 where
    the normalizer is 0)."""
    with nd.variable_scope(name, "mean_relative_error"):
        labels, predictions = _squeeze_pair(labels, predictions)
        predictions = nd.cast(predictions, nd.float32)
        labels = nd.cast(labels, nd.float32)
        normalizer = nd.cast(normalizer, nd.float32)
        err = _div_no_nan(nd.abs(labels - predictions),
                          normalizer * nd.ones_like(labels))
        return _mean_here(err, weights, metrics_collections, updates_collections)


def mean_cosine_distance(labels, predictions, dim, weights=None,
                         metrics_collections=None, updates_collections=None,
                         name=None):
    """1 - the running mean of ``sum(labels * predictions, dim)`` (unit
    vectors)."""
    with nd.variable_scope(name, "mean_cosine_distance"):
        labels, predictions = _squeeze_pair(labels, predictions)
        dots = nd.reduce_sum(nd.multiply(nd.cast(predictions, nd.float32),
                                         nd.cast(labels, nd.float32)),
                             axis=[dim], keepdims=True)
        mean_dot, update = _mean_here(dots, weights, None, None)
        value = nd.subtract(1.0, mean_dot, name="value")
        update_op = nd.subtract(1.0, update, name="update_op")
        return _collect(value, update_op, metrics_collections, updates_collections)


__all__ = [
    "accuracy",
    "auc",
    "false_negatives",
    "false_negatives_at_thresholds",
    "false_positives",
    "false_positives_at_thresholds",
    "mean",
    "mean_absolute_error",
    "mean_cosine_distance",
    "mean_iou",
    "mean_per_class_accuracy",
    "mean_relative_error",
    "mean_squared_error",
    "mean_tensor",
    "metric_variable",
    "percentage_below",
    "precision",
    "precision_at_thresholds",
    "recall",
    "recall_at_thresholds",
    "root_mean_squared_error",
    "true_negatives",
    "true_negatives_at_thresholds",
    "true_positives",
    "true_positives_at_thresholds",
]
