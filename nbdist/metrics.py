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


# -- sensitivity / specificity ---------------------------------------------------------
def _at_operating_point(default, target_name, pick):
    def metric(labels, predictions, target, weights=None, num_thresholds=200,
               metrics_collections=None, updates_collections=None, name=None):
        if not 0 <= target <= 1:
            raise ValueError(f"`{target_name}` must be in the range [0, 1]. "
                             f"Currently, `{target_name}` is {target}.")
        if num_thresholds < 2:
            raise ValueError(f"`num_thresholds` must be > 1. Currently, "
                             f"`num_thresholds` is {num_thresholds}.")
        with nd.variable_scope(name, default):
            counts, updates = _confusion_at_thresholds(
                labels, predictions, _auc_thresholds(num_thresholds), weights)
            value = pick(counts, float(target), "value")
            update_op = pick(updates, float(target), "update_op")
            return _collect(value, update_op, metrics_collections,
                            updates_collections)

    metric.__name__ = default
    return metric


def _sensitivity_at(c, specificity, name):
    # The threshold whose specificity is nearest the target (the first such).
    spec = nd.divide(c["tn"], c["tn"] + c["fp"] + 1e-7)
    i = nd.cast(nd.argmin(nd.abs(spec - specificity), 0), nd.int32)
    return nd.divide(c["tp"][i], c["tp"][i] + c["fn"][i] + 1e-7, name=name)


def _specificity_at(c, sensitivity, name):
    # The last threshold whose sensitivity is nearest the target, as TF.
    gap = nd.abs(nd.divide(c["tp"], c["tp"] + c["fn"] + 1e-7) - sensitivity)
    at_min = nd.cast(nd.equal(gap, nd.reduce_min(gap)), nd.int64)
    i = nd.cast(nd.argmax(nd.cumsum(at_min), 0), nd.int32)
    return nd.divide(c["tn"][i], c["tn"][i] + c["fp"][i] + 1e-7, name=name)


sensitivity_at_specificity = _at_operating_point(
    "sensitivity_at_specificity", "specificity", _sensitivity_at)
sensitivity_at_specificity.__doc__ = (
    "The sensitivity (recall) at the threshold whose specificity is closest to "
    "``specificity``, from confusion counts at ``num_thresholds`` thresholds.")
specificity_at_sensitivity = _at_operating_point(
    "specificity_at_sensitivity", "sensitivity", _specificity_at)
specificity_at_sensitivity.__doc__ = (
    "The specificity at the threshold whose sensitivity is closest to "
    "``sensitivity``.")


# -- the *_at_k family -----------------------------------------------------------------
def _label_sets(labels, top):
    """Per row: whether each of ``top``'s [batch, k] ids is a label, and the
    number of distinct labels. ``labels`` are ids [batch] or [batch, n], or a
    SparseTensor of them."""
    if isinstance(labels, nd.SparseTensor):
        present = nd.SparseTensor(labels.indices, nd.ones_like(labels.values, nd.bool),
                                  labels.dense_shape)
        valid = nd.sparse_tensor_to_dense(present, default_value=False)
        labels = nd.cast(nd.sparse_tensor_to_dense(labels, default_value=-1),
                         nd.int64)
    else:
        # As TF's set operations: every entry of a dense row is a label, even
        # an out-of-range one (it counts as a false negative).
        labels = nd.cast(nd.convert_to_tensor(labels), nd.int64)
        if labels.shape.ndims == 1:
            labels = nd.expand_dims(labels, -1)
        valid = nd.ones_like(labels, nd.bool)
    eq = nd.logical_and(nd.equal(nd.expand_dims(top, 2), nd.expand_dims(labels, 1)),
                        nd.expand_dims(valid, 1))
    hit = nd.reduce_any(eq, 2)                                       # [batch, k]
    n = labels.shape.as_list()[-1]
    earlier = nd.constant(np.tril(np.ones((n, n), bool), -1))
    repeat = nd.reduce_any(nd.logical_and(
        nd.equal(nd.expand_dims(labels, 2), nd.expand_dims(labels, 1)), earlier), 2)
    distinct = nd.reduce_sum(nd.cast(nd.logical_and(valid, nd.logical_not(repeat)),
                                     nd.float64), 1)
    return hit, distinct, labels, valid


def _row_weights(weights, like):
    if weights is None:
        return nd.ones_like(like)
    w = nd.cast(weights, nd.float64)
    if w.shape.ndims == 2:
        w = nd.squeeze(w, [1])          # [batch, 1], as TF allows
    return nd.multiply(w, nd.ones_like(like))


def _streaming_ratio(num, other, weights, metric_names, collections):
    """Two float64 count variables, their ratio num / (num + other)."""
    w = _row_weights(weights, num)
    tp = metric_variable([], nd.float64, name=metric_names[0])
    fx = metric_variable([], nd.float64, name=metric_names[1])
    up_tp = nd.assign_add(tp, nd.reduce_sum(num * w))
    up_fx = nd.assign_add(fx, nd.reduce_sum(other * w))
    value = _div_no_nan(tp.read_value(), tp.read_value() + fx.read_value(),
                        name="value")
    update_op = _div_no_nan(up_tp, up_tp + up_fx, name="update_op")
    return _collect(value, update_op, *collections)


def _top_counts(labels, top, class_id):
    """Per-row (true positives, false positives, false negatives), float64."""
    hit, distinct, lab, valid = _label_sets(labels, top)
    f = nd.float64
    if class_id is None:
        tp = nd.reduce_sum(nd.cast(hit, f), 1)
        return tp, nd.cast(nd.shape(top)[1], f) - tp, distinct - tp
    in_top = nd.cast(nd.reduce_any(nd.equal(top, class_id), 1), f)
    in_lab = nd.cast(nd.reduce_any(nd.logical_and(nd.equal(lab, class_id), valid),
                                   1), f)
    return in_top * in_lab, in_top * (1 - in_lab), in_lab * (1 - in_top)


def _at_k_name(kind, k, class_id):
    return f"{kind}_at_{k}" + ("" if class_id is None else f"_class{class_id}")


def precision_at_top_k(labels, predictions_idx, k=None, class_id=None, weights=None,
                       metrics_collections=None, updates_collections=None,
                       name=None):
    """Of the predicted ids per row (``predictions_idx`` [batch, k]), the
    fraction that are labels (only ``class_id`` when given), as float64. As TF,
    ``k`` only names the metric: every column of ``predictions_idx`` counts."""
    top = nd.cast(nd.convert_to_tensor(predictions_idx), nd.int64)
    k = top.shape.as_list()[-1] if k is None else k
    with nd.variable_scope(name, _at_k_name("precision", k, class_id)):
        tp, fp, _ = _top_counts(labels, top, class_id)
        return _streaming_ratio(
            tp, fp, weights, (_at_k_name("true_positive", k, class_id),
                              _at_k_name("false_positive", k, class_id)),
            (metrics_collections, updates_collections))


def recall_at_top_k(labels, predictions_idx, k=None, class_id=None, weights=None,
                    metrics_collections=None, updates_collections=None, name=None):
    """The fraction of each row's labels among its ``k`` predicted ids."""
    top = nd.cast(nd.convert_to_tensor(predictions_idx), nd.int64)
    k = top.shape.as_list()[-1] if k is None else k
    with nd.variable_scope(name, _at_k_name("recall", k, class_id)):
        tp, _, fn = _top_counts(labels, top, class_id)
        return _streaming_ratio(
            tp, fn, weights, (_at_k_name("true_positive", k, class_id),
                              _at_k_name("false_negative", k, class_id)),
            (metrics_collections, updates_collections))


def _top_k_ids(predictions, k):
    return nd.cast(nd.nn.top_k(nd.convert_to_tensor(predictions), k)[1], nd.int64)


def precision_at_k(labels, predictions, k, class_id=None, weights=None,
                   metrics_collections=None, updates_collections=None, name=None):
    """precision_at_top_k of the ``k`` highest ``predictions`` [batch, classes].

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     p, up = nd.metrics.precision_at_k([[2, 0]], [[0.1, 0.2, 0.7]], k=2)
    ...     with nd.Session() as s:
    ...         s.run(nd.local_variables_initializer())
    ...         float(s.run(up))
    0.5
    """
    return precision_at_top_k(labels, _top_k_ids(predictions, k), k, class_id,
                              weights, metrics_collections, updates_collections,
                              name or _at_k_name("precision", k, class_id))


sparse_precision_at_k = precision_at_k


def recall_at_k(labels, predictions, k, class_id=None, weights=None,
                metrics_collections=None, updates_collections=None, name=None):
    """recall_at_top_k of the ``k`` highest ``predictions``."""
    return recall_at_top_k(labels, _top_k_ids(predictions, k), k, class_id, weights,
                           metrics_collections, updates_collections,
                           name or _at_k_name("recall", k, class_id))


def average_precision_at_k(labels, predictions, k, weights=None,
                           metrics_collections=None, updates_collections=None,
                           name=None):
    """The running mean over rows of AP@k: the mean of precision@i over the
    ranks i <= k that hit a label, divided by min(k, number of labels)."""
    if k < 1:
        raise ValueError(f"Invalid k={k}.")
    with nd.variable_scope(name, _at_k_name("average_precision", k, None)):
        top = _top_k_ids(predictions, k)
        hit, distinct, _, _ = _label_sets(labels, top)
        rel = nd.cast(hit, nd.float64)
        ranks = nd.constant(np.arange(1, k + 1, dtype=np.float64))
        prec = nd.divide(nd.cumsum(rel, axis=1), ranks)
        ap = _div_no_nan(nd.reduce_sum(prec * rel, 1), nd.minimum(distinct,
                                                                  float(k)))
        w = _row_weights(weights, ap)
        total = metric_variable([], nd.float64, name="total")
        count = metric_variable([], nd.float64, name="max")
        up_total = nd.assign_add(total, nd.reduce_sum(ap * w))
        up_count = nd.assign_add(count, nd.reduce_sum(w))
        value = _div_no_nan(total.read_value(), count.read_value(), name="value")
        update_op = _div_no_nan(up_total, up_count, name="update_op")
        return _collect(value, update_op, metrics_collections, updates_collections)


sparse_average_precision_at_k = average_precision_at_k


__all__ = [
    "accuracy",
    "average_precision_at_k",
    "precision_at_k",
    "precision_at_top_k",
    "recall_at_k",
    "recall_at_top_k",
    "sensitivity_at_specificity",
    "sparse_average_precision_at_k",
    "sparse_precision_at_k",
    "specificity_at_sensitivity",
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
