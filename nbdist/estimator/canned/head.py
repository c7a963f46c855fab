"""Heads: what a canned estimator does with its logits, as TF 1.15's
``canned/head.py``: the loss against the labels, the predictions dict, the
evaluation metrics and the train op, in one ``create_estimator_spec``.

* binary classification: sigmoid cross entropy; predictions ``logits``,
  ``logistic``, ``probabilities``, ``class_ids``, ``classes``,
  ``all_class_ids``, ``all_classes``; metrics ``accuracy``, ``precision``,
  ``recall``, ``auc``, ``auc_precision_recall``, ``average_loss``,
  ``label/mean``, ``prediction/mean``, ``accuracy_baseline``;
* multi-class: softmax cross entropy; metrics ``accuracy``, ``average_loss``;
* regression: squared error; predictions ``predictions``; metrics
  ``average_loss``, ``label/mean``, ``prediction/mean``.

The training loss is the per-example loss times its weight, reduced by
``loss_reduction`` (``SUM`` by default, as TF 1.15's canned estimators).

>>> import nbdist as nd
>>> from nbdist.estimator.canned import head as head_lib
>>> with nd.Graph().as_default():
...     head = head_lib._binary_logistic_head_with_sigmoid_cross_entropy_loss()
...     spec = head.create_estimator_spec(
...         features={}, mode=nd.estimator.ModeKeys.EVAL,
...         logits=nd.constant([[0.0], [2.0]]), labels=nd.constant([[1], [1]]))
...     with nd.Session() as s:
...         round(float(s.run(spec.loss)), 4)
0.8201
"""

from __future__ import annotations

import collections
import inspect

import nbdist as nd
from nbdist.estimator.canned.metric_keys import MetricKeys, PredictionKeys
from nbdist.estimator.export import export_output
from nbdist.estimator.model_fn import EstimatorSpec, ModeKeys
from nbdist.feature_column.base import _LazyBuilder
from nbdist.feature_column.dense_columns import _NumericColumn, numeric_column
from nbdist.framework.sparse_tensor import SparseTensor

DEFAULT_SERVING_KEY = "serving_default"
CLASSIFY_SERVING_KEY = "classification"
REGRESS_SERVING_KEY = "regression"
PREDICT_SERVING_KEY = "predict"

LossSpec = collections.namedtuple(
    "LossSpec", ["training_loss", "unreduced_loss", "weights", "processed_labels"])


def _summary_key(head_name, key):
    return f"{key}/{head_name}" if head_name else key


def check_dense_labels_match_logits_and_reshape(labels, logits,
                                                expected_labels_dimension):
    """``labels`` as ``[batch, expected_labels_dimension]`` (a vector gets a
    last dimension), checked against ``logits``."""
    if labels is None:
        raise ValueError("You must provide a labels Tensor. Given: None. Suggested "
                         "troubleshooting steps: Check that your data contain your "
                         "label feature. Check that your input_fn properly parses "
                         "and returns labels.")
    if isinstance(labels, dict):
        raise ValueError(f"labels must be a Tensor, got a dict of {sorted(labels)}")
    with nd.name_scope(None, "labels"):
        if not isinstance(labels, SparseTensor):
            labels = nd.convert_to_tensor(labels)
        if isinstance(labels, SparseTensor):
            d = expected_labels_dimension
            raise ValueError(f"SparseTensor labels are not supported. labels must be "
                             f"a Tensor of shape [D0, D1, ..., DN, {d}], e.g. "
                             f"[batch_size, {d}]. Suggested Fix (1): Check the label "
                             f"feature in your data. Each example must contain {d} "
                             f"value(s). If not, your choice of label was probably "
                             f"incorrect. Suggested Fix (2): In your input_fn, use "
                             f"tf.sparse_tensor_to_dense() to turn labels into a "
                             f"Tensor.")
        rank, logits_rank = labels.shape.rank, logits.shape.rank
        if rank is not None and logits_rank is not None and rank == logits_rank - 1:
            labels = nd.expand_dims(labels, -1)
        last = labels.shape[-1] if labels.shape.rank else None
        last = getattr(last, "value", last)
        if last is not None and last != expected_labels_dimension:
            raise ValueError(f"Mismatched label shape. Expected labels "
                             f"dimension={expected_labels_dimension}.  Received "
                             f"{last}. Suggested Fix:If your classifier expects "
                             f"one-hot encoding label,check your n_classes argument "
                             f"to the estimator and/or the shape of your label."
                             f"Otherwise, check the shape of your label.")
        return labels


def check_logits_final_dim(logits, expected_logits_dimension):
    with nd.name_scope(None, "logits"):
        logits = nd.cast(logits, nd.float32)
        last = logits.shape[-1] if logits.shape.rank else None
        last = getattr(last, "value", last)
        if last is not None and last != expected_logits_dimension:
            if logits.shape.rank == 1:
                raise ValueError(f"logits shape must be [D0, D1, ... DN, "
                                 f"logits_dimension], got {logits.shape}.")
            raise ValueError(f"logits shape must be [D0, D1, ... DN, "
                             f"logits_dimension={expected_logits_dimension}], got "
                             f"{logits.shape}.")
        return logits


def get_weights_and_check_match_logits(features, weight_column, logits):
    """1.0 without a ``weight_column``; else its feature as float
    ``[batch, 1]``."""
    if weight_column is None:
        return 1.0
    with nd.name_scope(None, "weights"):
        if isinstance(weight_column, str):
            weight_column = numeric_column(key=weight_column, shape=(1,))
        if not isinstance(weight_column, _NumericColumn):
            raise TypeError(f"Weight column must be either a string or "
                            f"_NumericColumn. Given type: {type(weight_column)}.")
        weights = weight_column._get_dense_tensor(_LazyBuilder(features))
        if not (weights.dtype.is_floating or weights.dtype.is_integer):
            raise ValueError(f"Weight column should be castable to float. Given "
                             f"dtype: {weights.dtype}")
        weights = nd.cast(weights, nd.float32, name="weights")
        if weights.shape.rank == logits.shape.rank - 1:
            weights = nd.expand_dims(weights, -1)
        return weights


def _assert_range(labels, n_classes, message=None):
    with nd.name_scope(None, "assert_range"):
        upper = nd.constant(n_classes, labels.dtype)
        checks = [
            nd.assert_less(labels, upper, message=message or
                           "Labels must <= n_classes - 1"),
            nd.assert_non_negative(labels, message=message or "Labels must >= 0")]
        with nd.control_dependencies(checks):
            return nd.identity(labels)


def _all_class_ids(logits, n_classes):
    batch = nd.shape(logits)[0]
    return nd.tile(nd.expand_dims(nd.range(n_classes), 0), nd.stack([batch, 1]))


def _all_classes(logits, n_classes, label_vocabulary=None):
    if label_vocabulary:
        batch = nd.shape(logits)[0]
        vocab = nd.constant(list(label_vocabulary), nd.string)
        return nd.tile(nd.expand_dims(vocab, 0), nd.stack([batch, 1]))
    return nd.as_string(_all_class_ids(logits, n_classes))


def _classification_output(scores, n_classes, label_vocabulary=None):
    batch = nd.shape(scores)[0]
    if label_vocabulary:
        classes = nd.constant(list(label_vocabulary), nd.string)
    else:
        classes = nd.as_string(nd.range(n_classes))
    tiled = nd.tile(nd.expand_dims(classes, 0), nd.stack([batch, 1]))
    return export_output.ClassificationOutput(scores=scores, classes=tiled)


def _label_ids(labels, label_vocabulary, n_classes):
    """Integer class ids of ``labels`` (strings looked up in the vocabulary)."""
    if label_vocabulary is None:
        if not labels.dtype.is_integer:
            raise ValueError(f"Labels dtype should be integer. Instead got "
                             f"{labels.dtype}.")
        ids = labels
    else:
        if labels.dtype != nd.string:
            raise ValueError("Labels dtype should be string if there is a "
                             "vocabulary. Instead got {}".format(labels.dtype))
        ids = nd.lookup.index_table_from_tensor(
            vocabulary_list=tuple(label_vocabulary),
            name="class_id_lookup").lookup(labels)
    return _assert_range(ids, n_classes)


def _append_update_ops(train_op):
    update_ops = nd.get_collection(nd.GraphKeys.UPDATE_OPS)
    return nd.group(train_op, *update_ops) if update_ops else train_op


def _mean_metric(values, weights, name):
    with nd.name_scope(None, name):
        if not isinstance(weights, float):
            weights = weights * nd.ones_like(values)
            return nd.metrics.mean(values, weights=weights, name=name)
        return nd.metrics.mean(values, name=name)


def _auc(labels, predictions, weights, curve, name):
    # One value per example: the weights broadcast to the predictions, flat.
    flat = [nd.reshape(labels, [-1]), nd.reshape(predictions, [-1])]
    if weights is not None:
        weights = nd.reshape(weights * nd.ones_like(predictions), [-1])
    return nd.metrics.auc(*flat, weights=weights, curve=curve, name=name)


class _Head:
    """A head: ``name``, ``logits_dimension``, ``create_loss`` and
    ``create_estimator_spec(features, mode, logits, labels, optimizer,
    train_op_fn, regularization_losses)``."""

    def __init__(self, weight_column, loss_reduction, loss_fn, name):
        reductions = {v for k, v in vars(nd.losses.Reduction).items()
                      if k.isupper()}
        if loss_reduction not in reductions or loss_reduction == (
                nd.losses.Reduction.NONE):
            raise ValueError(f"Invalid loss_reduction: {loss_reduction}")
        self._weight_column = weight_column
        self._loss_reduction = loss_reduction
        self._loss_fn = loss_fn
        self._name = name

    @property
    def name(self):
        return self._name

    @property
    def logits_dimension(self):
        return self._logits_dimension

    def _weighted_loss(self, features, unweighted_loss, logits, labels):
        weights = get_weights_and_check_match_logits(features, self._weight_column,
                                                     logits)
        training_loss = nd.losses.compute_weighted_loss(
            unweighted_loss, weights=weights, reduction=self._loss_reduction)
        return LossSpec(training_loss, unweighted_loss, weights, labels)

    def _unweighted_loss(self, labels, logits, features, default):
        if self._loss_fn is None:
            return default()
        # As TF: features are passed only to a loss_fn that takes them.
        extra = ({"features": features}
                 if "features" in inspect.signature(self._loss_fn).parameters else {})
        loss = nd.convert_to_tensor(self._loss_fn(labels=labels, logits=logits,
                                                  **extra))
        if loss.shape.rank is not None and logits.shape.rank is not None and (
                loss.shape.rank != logits.shape.rank):
            raise ValueError(f"loss_fn must return Tensor of shape [D0, D1, ... DN, "
                             f"1]. Given: {loss.shape}")
        return loss

    def create_estimator_spec(self, features, mode, logits, labels=None,
                              optimizer=None, train_op_fn=None,
                              regularization_losses=None):
        """The ``EstimatorSpec`` of ``mode`` for ``logits``: predictions only
        in ``PREDICT``; with the loss and metrics in ``EVAL``; with a train op
        from ``optimizer`` (or ``train_op_fn(loss)``) in ``TRAIN``."""
        with nd.name_scope(self._name, "head"):
            logits = check_logits_final_dim(logits, self.logits_dimension)
            predictions = self._predictions(logits)
            if mode == ModeKeys.PREDICT:
                return EstimatorSpec(mode, predictions=predictions,
                                     export_outputs=self._export_outputs(predictions))
            loss_spec = self.create_loss(features, mode, logits, labels)
            training_loss = loss_spec.training_loss
            regularization_loss = None
            if regularization_losses:
                regularization_loss = nd.add_n(regularization_losses)
                training_loss = nd.add_n([training_loss, regularization_loss])
            if mode == ModeKeys.EVAL:
                metrics = self._eval_metric_ops(predictions, loss_spec,
                                                regularization_loss)
                return EstimatorSpec(mode, predictions=predictions, loss=training_loss,
                                     eval_metric_ops=metrics)
            if optimizer is not None:
                if train_op_fn is not None:
                    raise ValueError("train_op_fn and optimizer cannot both be set.")
                train_op = optimizer.minimize(
                    training_loss, global_step=nd.train.get_global_step())
            elif train_op_fn is not None:
                train_op = train_op_fn(training_loss)
            else:
                raise ValueError("train_op_fn and optimizer cannot both be None.")
            train_op = _append_update_ops(train_op)
            mean_loss = None
            if self._loss_reduction == nd.losses.Reduction.SUM:
                weight_sum = nd.reduce_sum(
                    loss_spec.weights * nd.ones_like(loss_spec.unreduced_loss))
                mean_loss = loss_spec.training_loss / weight_sum
        with nd.name_scope(""):
            nd.summary.scalar(_summary_key(self._name, MetricKeys.LOSS), training_loss)
            if mean_loss is not None:
                nd.summary.scalar(_summary_key(self._name, MetricKeys.LOSS_MEAN),
                                  mean_loss)
            if regularization_loss is not None:
                nd.summary.scalar(
                    _summary_key(self._name, MetricKeys.LOSS_REGULARIZATION),
                    regularization_loss)
        return EstimatorSpec(mode, predictions=predictions, loss=training_loss,
                             train_op=train_op)

    def _common_metrics(self, loss_spec, regularization_loss):
        with nd.name_scope(None, "metrics"):
            metrics = {_summary_key(self._name, MetricKeys.LOSS_MEAN): _mean_metric(
                loss_spec.unreduced_loss, loss_spec.weights, MetricKeys.LOSS_MEAN)}
            if regularization_loss is not None:
                metrics[_summary_key(self._name, MetricKeys.LOSS_REGULARIZATION)] = (
                    nd.metrics.mean(regularization_loss,
                                    name=MetricKeys.LOSS_REGULARIZATION))
        return metrics


class _BinaryLogisticHeadWithSigmoidCrossEntropyLoss(_Head):
    """See ``_binary_logistic_head_with_sigmoid_cross_entropy_loss``."""

    _logits_dimension = 1

    def __init__(self, weight_column=None, thresholds=None, label_vocabulary=None,
                 loss_reduction=nd.losses.Reduction.SUM, loss_fn=None, name=None):
        super().__init__(weight_column, loss_reduction, loss_fn, name)
        self._thresholds = tuple(thresholds) if thresholds else ()
        for t in self._thresholds:
            if not 0 < t < 1:
                raise ValueError(f"thresholds not in (0, 1): {self._thresholds}.")
        self._label_vocabulary = label_vocabulary

    def _predictions(self, logits):
        keys = PredictionKeys
        logistic = nd.sigmoid(logits, name=keys.LOGISTIC)
        two_class_logits = nd.concat((nd.zeros_like(logits), logits), axis=-1,
                                     name="two_class_logits")
        probabilities = nd.nn.softmax(two_class_logits, name=keys.PROBABILITIES)
        class_ids = nd.expand_dims(nd.argmax(two_class_logits, axis=-1,
                                             name=keys.CLASS_IDS), axis=-1)
        if self._label_vocabulary:
            table = nd.lookup.index_to_string_table_from_tensor(
                vocabulary_list=self._label_vocabulary, name="class_string_lookup")
            classes = table.lookup(class_ids)
        else:
            classes = nd.as_string(class_ids, name="str_classes")
        return {keys.LOGITS: logits, keys.LOGISTIC: logistic,
                keys.PROBABILITIES: probabilities, keys.CLASS_IDS: class_ids,
                keys.CLASSES: classes,
                keys.ALL_CLASS_IDS: _all_class_ids(logits, 2),
                keys.ALL_CLASSES: _all_classes(logits, 2, self._label_vocabulary)}

    def _export_outputs(self, predictions):
        keys = PredictionKeys
        classifier = _classification_output(predictions[keys.PROBABILITIES], 2,
                                             self._label_vocabulary)
        return {DEFAULT_SERVING_KEY: classifier, CLASSIFY_SERVING_KEY: classifier,
                REGRESS_SERVING_KEY: export_output.RegressionOutput(
                    value=predictions[keys.LOGISTIC]),
                PREDICT_SERVING_KEY: export_output.PredictOutput(predictions)}

    def create_loss(self, features, mode, logits, labels):
        """Sigmoid cross entropy per example, weighted and reduced."""
        del mode
        labels = check_dense_labels_match_logits_and_reshape(labels, logits, 1)
        if self._label_vocabulary is not None:
            labels = nd.lookup.index_table_from_tensor(
                vocabulary_list=tuple(self._label_vocabulary),
                name="class_id_lookup").lookup(labels)
        labels = _assert_range(nd.cast(labels, nd.float32), 2)
        unweighted = self._unweighted_loss(
            labels, logits, features,
            lambda: nd.nn.sigmoid_cross_entropy_with_logits(labels=labels,
                                                            logits=logits))
        return self._weighted_loss(features, unweighted, logits, labels)

    def _eval_metric_ops(self, predictions, loss_spec, regularization_loss):
        keys, p = MetricKeys, PredictionKeys
        labels, weights = loss_spec.processed_labels, loss_spec.weights
        w = None if isinstance(weights, float) else weights
        logistic, class_ids = predictions[p.LOGISTIC], predictions[p.CLASS_IDS]
        metrics = self._common_metrics(loss_spec, regularization_loss)
        with nd.name_scope(None, "metrics"):
            label_mean = _mean_metric(labels, weights, keys.LABEL_MEAN)
            value, update = label_mean
            for key, metric in (
                    (keys.ACCURACY, nd.metrics.accuracy(
                        labels, class_ids, weights=w, name=keys.ACCURACY)),
                    (keys.PRECISION, nd.metrics.precision(
                        labels, class_ids, weights=w, name=keys.PRECISION)),
                    (keys.RECALL, nd.metrics.recall(
                        labels, class_ids, weights=w, name=keys.RECALL)),
                    (keys.PREDICTION_MEAN, _mean_metric(logistic, weights,
                                                        keys.PREDICTION_MEAN)),
                    (keys.LABEL_MEAN, label_mean),
                    (keys.ACCURACY_BASELINE, (
                        nd.maximum(value, 1.0 - value, name="value"),
                        nd.maximum(update, 1.0 - update, name="update_op"))),
                    (keys.AUC, _auc(labels, logistic, w, "ROC", keys.AUC)),
                    (keys.AUC_PR, _auc(labels, logistic, w, "PR", keys.AUC_PR))):
                metrics[_summary_key(self._name, key)] = metric
            for t in self._thresholds:
                above = nd.cast(nd.greater_equal(logistic, t), nd.float32)
                for key, fn in ((keys.ACCURACY_AT_THRESHOLD, nd.metrics.accuracy),
                                (keys.PRECISION_AT_THRESHOLD, nd.metrics.precision),
                                (keys.RECALL_AT_THRESHOLD, nd.metrics.recall)):
                    metrics[_summary_key(self._name, key % t)] = fn(
                        labels, above, weights=w, name=key % t)
        return metrics


class _MultiClassHeadWithSoftmaxCrossEntropyLoss(_Head):
    """See ``_multi_class_head_with_softmax_cross_entropy_loss``."""

    def __init__(self, n_classes, weight_column=None, label_vocabulary=None,
                 loss_reduction=nd.losses.Reduction.SUM, loss_fn=None, name=None):
        if n_classes is None or n_classes <= 2:
            raise ValueError(f"n_classes must be > 2: {n_classes}.")
        if label_vocabulary is not None and len(label_vocabulary) != n_classes:
            raise ValueError(f"Length of label_vocabulary must be n_classes "
                             f"({n_classes}). Given: {len(label_vocabulary)}")
        super().__init__(weight_column, loss_reduction, loss_fn, name)
        self._n_classes = n_classes
        self._logits_dimension = n_classes
        self._label_vocabulary = label_vocabulary

    def _predictions(self, logits):
        keys = PredictionKeys
        probabilities = nd.nn.softmax(logits, name=keys.PROBABILITIES)
        class_ids = nd.expand_dims(nd.argmax(logits, axis=-1, name=keys.CLASS_IDS),
                                   axis=-1)
        if self._label_vocabulary:
            classes = nd.lookup.index_to_string_table_from_tensor(
                vocabulary_list=self._label_vocabulary,
                name="class_string_lookup").lookup(class_ids)
        else:
            classes = nd.as_string(class_ids, name="str_classes")
        n = self._n_classes
        return {keys.LOGITS: logits, keys.PROBABILITIES: probabilities,
                keys.CLASS_IDS: class_ids, keys.CLASSES: classes,
                keys.ALL_CLASS_IDS: _all_class_ids(logits, n),
                keys.ALL_CLASSES: _all_classes(logits, n, self._label_vocabulary)}

    def _export_outputs(self, predictions):
        classifier = _classification_output(
            predictions[PredictionKeys.PROBABILITIES], self._n_classes,
            self._label_vocabulary)
        return {DEFAULT_SERVING_KEY: classifier, CLASSIFY_SERVING_KEY: classifier,
                PREDICT_SERVING_KEY: export_output.PredictOutput(predictions)}

    def create_loss(self, features, mode, logits, labels):
        """Softmax cross entropy per example (``[batch, 1]``), weighted and
        reduced."""
        del mode
        labels = check_dense_labels_match_logits_and_reshape(labels, logits, 1)
        label_ids = _label_ids(labels, self._label_vocabulary, self._n_classes)

        def default():
            loss = nd.nn.sparse_softmax_cross_entropy_with_logits(
                labels=nd.squeeze(label_ids, axis=[-1]), logits=logits)
            return nd.expand_dims(loss, -1)

        unweighted = self._unweighted_loss(label_ids, logits, features, default)
        return self._weighted_loss(features, unweighted, logits, label_ids)

    def _eval_metric_ops(self, predictions, loss_spec, regularization_loss):
        weights = loss_spec.weights
        metrics = self._common_metrics(loss_spec, regularization_loss)
        with nd.name_scope(None, "metrics"):
            metrics[_summary_key(self._name, MetricKeys.ACCURACY)] = (
                nd.metrics.accuracy(
                    loss_spec.processed_labels, predictions[PredictionKeys.CLASS_IDS],
                    weights=None if isinstance(weights, float) else weights,
                    name=MetricKeys.ACCURACY))
        return metrics


class _RegressionHeadWithMeanSquaredErrorLoss(_Head):
    """See ``_regression_head``."""

    def __init__(self, label_dimension=1, weight_column=None,
                 loss_reduction=nd.losses.Reduction.SUM, loss_fn=None,
                 inverse_link_fn=None, name=None):
        if label_dimension < 1:
            raise ValueError(f"Invalid label_dimension {label_dimension}.")
        super().__init__(weight_column, loss_reduction, loss_fn, name)
        self._logits_dimension = label_dimension
        self._inverse_link_fn = inverse_link_fn

    def _predictions(self, logits):
        keys = PredictionKeys
        if self._inverse_link_fn:
            return {keys.PREDICTIONS: self._inverse_link_fn(logits),
                    keys.LOGITS: logits}
        return {keys.PREDICTIONS: logits}

    def _export_outputs(self, predictions):
        value = predictions[PredictionKeys.PREDICTIONS]
        out = {PREDICT_SERVING_KEY: export_output.PredictOutput(predictions)}
        if self._logits_dimension == 1:
            regression = export_output.RegressionOutput(value=value)
            out.update({DEFAULT_SERVING_KEY: regression,
                        REGRESS_SERVING_KEY: regression})
        else:
            out[DEFAULT_SERVING_KEY] = out[PREDICT_SERVING_KEY]
        return out

    def create_loss(self, features, mode, logits, labels):
        """Squared error per example and dimension, weighted and reduced."""
        del mode
        labels = check_dense_labels_match_logits_and_reshape(
            labels, logits, self._logits_dimension)
        labels = nd.cast(labels, nd.float32)
        unweighted = self._unweighted_loss(
            labels, logits, features, lambda: nd.square(logits - labels))
        return self._weighted_loss(features, unweighted, logits, labels)

    def _eval_metric_ops(self, predictions, loss_spec, regularization_loss):
        keys = MetricKeys
        weights = loss_spec.weights
        metrics = self._common_metrics(loss_spec, regularization_loss)
        with nd.name_scope(None, "metrics"):
            metrics[_summary_key(self._name, keys.PREDICTION_MEAN)] = _mean_metric(
                predictions[PredictionKeys.PREDICTIONS], weights,
                keys.PREDICTION_MEAN)
            metrics[_summary_key(self._name, keys.LABEL_MEAN)] = _mean_metric(
                loss_spec.processed_labels, weights, keys.LABEL_MEAN)
        return metrics


def _binary_logistic_head_with_sigmoid_cross_entropy_loss(
        weight_column=None, thresholds=None, label_vocabulary=None,
        loss_reduction=nd.losses.Reduction.SUM, loss_fn=None, name=None):
    """A head for binary classification with sigmoid cross entropy."""
    return _BinaryLogisticHeadWithSigmoidCrossEntropyLoss(
        weight_column, thresholds, label_vocabulary, loss_reduction, loss_fn, name)


def _multi_class_head_with_softmax_cross_entropy_loss(
        n_classes, weight_column=None, label_vocabulary=None,
        loss_reduction=nd.losses.Reduction.SUM, loss_fn=None, name=None):
    """A head for ``n_classes`` > 2 classes with softmax cross entropy."""
    return _MultiClassHeadWithSoftmaxCrossEntropyLoss(
        n_classes, weight_column, label_vocabulary, loss_reduction, loss_fn, name)


def _regression_head(weight_column=None, label_dimension=1,
                     loss_reduction=nd.losses.Reduction.SUM, loss_fn=None,
                     inverse_link_fn=None, name=None):
    """A head for regression with squared error."""
    return _RegressionHeadWithMeanSquaredErrorLoss(
        label_dimension, weight_column, loss_reduction, loss_fn, inverse_link_fn,
        name)


def _binary_logistic_or_multi_class_head(n_classes, weight_column, label_vocabulary,
                                         loss_reduction):
    """The binary head for 2 classes, the multi-class head for more."""
    if n_classes == 2:
        return _binary_logistic_head_with_sigmoid_cross_entropy_loss(
            weight_column=weight_column, label_vocabulary=label_vocabulary,
            loss_reduction=loss_reduction)
    return _multi_class_head_with_softmax_cross_entropy_loss(
        n_classes=n_classes, weight_column=weight_column,
        label_vocabulary=label_vocabulary, loss_reduction=loss_reduction)
