"""The public head classes of TF 1.15's ``tf.estimator`` (``BinaryClassHead``,
``MultiClassHead``, ``RegressionHead``, ``LogisticRegressionHead``,
``PoissonRegressionHead``, ``MultiLabelHead``, ``MultiHead``), for
``DNNEstimator``, ``LinearEstimator`` and ``DNNLinearCombinedEstimator`` or a
``model_fn`` of one's own. They are the canned heads
(``nbdist.estimator.canned.head``) with TF 2's defaults (the loss averaged over
the batch, ``SUM_OVER_BATCH_SIZE``) and methods (``loss``, ``predictions``,
``create_estimator_spec`` with ``trainable_variables``).

>>> import nbdist as nd
>>> head = nd.estimator.BinaryClassHead()
>>> with nd.Graph().as_default():
...     loss = head.loss(labels=nd.constant([[1], [0]]),
...                      logits=nd.constant([[0.0], [0.0]]))
...     with nd.Session() as s:
...         round(float(s.run(loss)), 4)
0.6931
"""

from __future__ import annotations

import math

import nbdist as nd
from nbdist.estimator.canned import head as head_lib
from nbdist.estimator.export import export_output
from nbdist.estimator.model_fn import EstimatorSpec, ModeKeys

# Keras' names of the reductions, as TF 2's heads take them.
_KERAS_REDUCTIONS = {"sum_over_batch_size": nd.losses.Reduction.SUM_OVER_BATCH_SIZE,
                     "auto": nd.losses.Reduction.SUM_OVER_BATCH_SIZE,
                     "sum": nd.losses.Reduction.SUM}
SUM_OVER_BATCH_SIZE = nd.losses.Reduction.SUM_OVER_BATCH_SIZE


def _reduction(loss_reduction):
    return _KERAS_REDUCTIONS.get(loss_reduction, loss_reduction)


class Head:
    """What a head offers a ``model_fn``: ``name``, ``logits_dimension``,
    ``loss_reduction``, ``loss``, ``predictions`` and
    ``create_estimator_spec``."""

    @property
    def loss_reduction(self):
        return self._loss_reduction

    def loss(self, labels, logits, features=None, mode=None,
             regularization_losses=None):
        """The reduced training loss of ``logits`` against ``labels``."""
        logits = head_lib.check_logits_final_dim(logits, self.logits_dimension)
        loss = self.create_loss(features or {}, mode, logits, labels).training_loss
        if regularization_losses:
            loss = nd.add_n([loss] + list(regularization_losses))
        return loss

    def predictions(self, logits, keys=None):
        """The predictions dict of ``logits`` (only ``keys``, if given)."""
        logits = head_lib.check_logits_final_dim(logits, self.logits_dimension)
        out = self._predictions(logits)
        return out if keys is None else {k: out[k] for k in keys}

    def create_estimator_spec(self, features, mode, logits, labels=None,
                              optimizer=None, trainable_variables=None,
                              train_op_fn=None, update_ops=None,
                              regularization_losses=None):
        """The ``EstimatorSpec`` of ``mode``; in ``TRAIN`` the ``optimizer``
        minimizes the loss over ``trainable_variables`` (default: all)."""
        if mode == ModeKeys.TRAIN and optimizer is not None:
            if train_op_fn is not None:
                raise ValueError("train_op_fn and optimizer cannot both be set.")

            def train_op_fn(loss):
                return optimizer.minimize(loss, var_list=trainable_variables,
                                          global_step=nd.train.get_global_step())

        if update_ops:
            given = train_op_fn

            def train_op_fn(loss):
                return nd.group(given(loss), *update_ops)

        return head_lib._Head.create_estimator_spec(
            self, features, mode, logits, labels=labels, train_op_fn=train_op_fn,
            regularization_losses=regularization_losses)


class BinaryClassHead(Head, head_lib._BinaryLogisticHeadWithSigmoidCrossEntropyLoss):
    """Two classes: sigmoid cross entropy of one logit."""

    def __init__(self, weight_column=None, thresholds=None, label_vocabulary=None,
                 loss_reduction=SUM_OVER_BATCH_SIZE, loss_fn=None, name=None):
        super().__init__(weight_column, thresholds, label_vocabulary,
                         _reduction(loss_reduction), loss_fn, name)


class MultiClassHead(Head, head_lib._MultiClassHeadWithSoftmaxCrossEntropyLoss):
    """``n_classes`` classes: softmax cross entropy."""

    def __init__(self, n_classes, weight_column=None, label_vocabulary=None,
                 loss_reduction=SUM_OVER_BATCH_SIZE, loss_fn=None, name=None):
        super().__init__(n_classes, weight_column, label_vocabulary,
                         _reduction(loss_reduction), loss_fn, name)


class RegressionHead(Head, head_lib._RegressionHeadWithMeanSquaredErrorLoss):
    """Real labels of ``label_dimension``: squared error (or ``loss_fn``),
    predictions ``inverse_link_fn(logits)``."""

    def __init__(self, label_dimension=1, weight_column=None,
                 loss_reduction=SUM_OVER_BATCH_SIZE, loss_fn=None,
                 inverse_link_fn=None, name=None):
        super().__init__(label_dimension, weight_column, _reduction(loss_reduction),
                         loss_fn, inverse_link_fn, name)


def _logistic_loss(labels, logits, features=None):
    del features
    return nd.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)


class LogisticRegressionHead(RegressionHead):
    """Labels in [0, 1]: sigmoid cross entropy; predictions the sigmoid."""

    def __init__(self, weight_column=None, loss_reduction=SUM_OVER_BATCH_SIZE,
                 name=None):
        super().__init__(weight_column=weight_column, loss_reduction=loss_reduction,
                         loss_fn=_logistic_loss, inverse_link_fn=nd.sigmoid,
                         name=name)


class PoissonRegressionHead(RegressionHead):
    """Counts: Poisson loss of the log-rate logits; predictions ``exp``."""

    def __init__(self, label_dimension=1, weight_column=None,
                 loss_reduction=SUM_OVER_BATCH_SIZE, compute_full_loss=True,
                 name=None):
        def poisson_loss(labels, logits, features=None):
            # TF's log_poisson_loss: exp(x) - x * y, plus Stirling's terms for
            # y > 1 with compute_full_loss.
            loss = nd.exp(logits) - logits * labels
            if compute_full_loss:
                safe = nd.maximum(labels, 1.0)
                stirling = (labels * nd.log(safe) - labels
                            + 0.5 * nd.log(2 * math.pi * safe))
                loss += nd.where(nd.greater(labels, 1.0), stirling,
                                 nd.zeros_like(labels))
            return loss

        super().__init__(label_dimension, weight_column, loss_reduction,
                         loss_fn=poisson_loss, inverse_link_fn=nd.exp, name=name)


class MultiLabelHead(Head, head_lib._Head):
    """Each example holds any subset of ``n_classes`` classes: sigmoid cross
    entropy per class, averaged over the classes. Labels are multi-hot
    ``[batch, n_classes]``, or a ``SparseTensor`` of class ids (of strings of
    ``label_vocabulary``). Metrics: ``average_loss``, ``auc``,
    ``auc_precision_recall`` and, per threshold, accuracy, precision and
    recall."""

    def __init__(self, n_classes, weight_column=None, thresholds=None,
                 label_vocabulary=None, loss_reduction=SUM_OVER_BATCH_SIZE,
                 loss_fn=None, classes_for_class_based_metrics=None, name=None):
        if n_classes is None or n_classes < 2:
            raise ValueError(f"n_classes must be > 1 for multi-label "
                             f"classification. Given: {n_classes}")
        if label_vocabulary is not None and len(label_vocabulary) != n_classes:
            raise ValueError(f"Length of label_vocabulary must be n_classes "
                             f"({n_classes}). Given: {len(label_vocabulary)}")
        super().__init__(weight_column, _reduction(loss_reduction), loss_fn, name)
        self._n_classes = self._logits_dimension = n_classes
        self._thresholds = tuple(thresholds) if thresholds else ()
        self._label_vocabulary = label_vocabulary
        self._classes_for_class_based_metrics = classes_for_class_based_metrics

    def _predictions(self, logits):
        keys = head_lib.PredictionKeys
        n = self._n_classes
        return {keys.LOGITS: logits,
                keys.PROBABILITIES: nd.sigmoid(logits, name=keys.PROBABILITIES),
                keys.ALL_CLASS_IDS: head_lib._all_class_ids(logits, n),
                keys.ALL_CLASSES: head_lib._all_classes(logits, n,
                                                        self._label_vocabulary)}

    def _export_outputs(self, predictions):
        keys = head_lib.PredictionKeys
        classifier = export_output.ClassificationOutput(
            scores=predictions[keys.PROBABILITIES],
            classes=predictions[keys.ALL_CLASSES])
        return {head_lib.DEFAULT_SERVING_KEY: classifier,
                head_lib.CLASSIFY_SERVING_KEY: classifier,
                head_lib.PREDICT_SERVING_KEY: export_output.PredictOutput(
                    predictions)}

    def _multi_hot(self, labels):
        if labels is None:
            return head_lib.check_dense_labels_match_logits_and_reshape(
                labels, None, self._n_classes)
        if not isinstance(labels, nd.SparseTensor):
            labels = nd.convert_to_tensor(labels)
            if self._label_vocabulary is not None or not labels.dtype.is_integer:
                raise ValueError(f"Labels must be a multi-hot integer Tensor of "
                                 f"shape [batch, {self._n_classes}], or a "
                                 f"SparseTensor of class ids or strings.")
            return labels
        ids = labels.values
        if self._label_vocabulary is not None:
            ids = nd.lookup.index_table_from_tensor(
                vocabulary_list=tuple(self._label_vocabulary),
                name="class_id_lookup").lookup(ids)
        ids = head_lib._assert_range(nd.cast(ids, nd.int64), self._n_classes)
        rows = labels.indices[:, 0]
        batch = nd.cast(labels.dense_shape[0], nd.int32)
        cells = nd.cast(rows * self._n_classes + ids, nd.int32)
        hot = nd.unsorted_segment_sum(nd.ones_like(cells), cells,
                                      batch * self._n_classes)
        return nd.minimum(nd.reshape(hot, nd.stack([batch, self._n_classes])), 1)

    def create_loss(self, features, mode, logits, labels):
        """Sigmoid cross entropy per class, averaged over the classes."""
        del mode
        labels = head_lib._assert_range(self._multi_hot(labels), 2)
        labels = head_lib.check_dense_labels_match_logits_and_reshape(
            labels, logits, self._n_classes)
        labels = nd.cast(labels, nd.float32)
        per_class = self._unweighted_loss(
            labels, logits, features,
            lambda: nd.nn.sigmoid_cross_entropy_with_logits(labels=labels,
                                                            logits=logits))
        unweighted = nd.reduce_mean(per_class, axis=-1, keepdims=True)
        return self._weighted_loss(features, unweighted, logits, labels)

    def _eval_metric_ops(self, predictions, loss_spec, regularization_loss):
        keys = head_lib.MetricKeys
        labels, weights = loss_spec.processed_labels, loss_spec.weights
        w = None if isinstance(weights, float) else weights
        probabilities = predictions[head_lib.PredictionKeys.PROBABILITIES]
        metrics = self._common_metrics(loss_spec, regularization_loss)
        key = head_lib._summary_key
        with nd.name_scope(None, "metrics"):
            metrics[key(self._name, keys.AUC)] = head_lib._auc(
                labels, probabilities, w, "ROC", keys.AUC)
            metrics[key(self._name, keys.AUC_PR)] = head_lib._auc(
                labels, probabilities, w, "PR", keys.AUC_PR)
            for t in self._thresholds:
                above = nd.cast(nd.greater_equal(probabilities, t), nd.float32)
                for name, fn in ((keys.ACCURACY_AT_THRESHOLD, nd.metrics.accuracy),
                                 (keys.PRECISION_AT_THRESHOLD, nd.metrics.precision),
                                 (keys.RECALL_AT_THRESHOLD, nd.metrics.recall)):
                    weight = None if w is None else w * nd.ones_like(labels)
                    metrics[key(self._name, name % t)] = fn(
                        labels, above, weights=weight, name=name % t)
        return metrics


class MultiHead(Head):
    """Several named heads over one model: ``logits`` a dict by head name
    (or one tensor split in the heads' order), ``labels`` a dict by head
    name; the loss is the sum of the heads' losses (times ``head_weights``);
    predictions are keyed ``(head name, key)``, metrics ``<key>/<head
    name>`` plus ``loss/<head name>``.

    >>> import nbdist as nd
    >>> head = nd.estimator.MultiHead([nd.estimator.BinaryClassHead(name="a"),
    ...                                nd.estimator.RegressionHead(name="b")])
    >>> head.name, head.logits_dimension
    ('a_b', 2)
    """

    def __init__(self, heads, head_weights=None):
        if not heads:
            raise ValueError(f"Must specify heads. Given: {heads}")
        if head_weights and len(head_weights) != len(heads):
            raise ValueError(f"heads and head_weights must have the same size. Given "
                             f"len(heads): {len(heads)}. Given len(head_weights): "
                             f"{len(head_weights)}.")
        for head in heads:
            if head.name is None:
                raise ValueError(f"All given heads must have name specified. Given: "
                                 f"{head}")
        self._heads = tuple(heads)
        self._head_weights = tuple(head_weights) if head_weights else None
        self._logits_dimension = sum(h.logits_dimension for h in heads)
        self._loss_reduction = heads[0].loss_reduction

    name = property(lambda self: "_".join(h.name for h in self._heads))
    logits_dimension = property(lambda self: self._logits_dimension)
    heads = property(lambda self: self._heads)

    def _split_logits(self, logits):
        if isinstance(logits, dict):
            missing = [h.name for h in self._heads if h.name not in logits]
            if missing:
                raise ValueError(f"logits has no entry for heads {missing}")
            return {h.name: logits[h.name] for h in self._heads}
        out, begin = {}, 0
        for h in self._heads:
            out[h.name] = logits[..., begin:begin + h.logits_dimension]
            begin += h.logits_dimension
        return out

    def _per_head(self, features, mode, logits, labels):
        if labels is not None and not isinstance(labels, dict):
            raise ValueError(f"labels must be a dict by head name. Given: {labels}")
        logits = self._split_logits(logits)
        parts = []
        for h in self._heads:
            with nd.name_scope(h.name):
                lg = head_lib.check_logits_final_dim(logits[h.name],
                                                     h.logits_dimension)
                spec = None if labels is None else h.create_loss(
                    features, mode, lg, labels.get(h.name))
                parts.append((h, h._predictions(lg), spec))
        return parts

    def loss(self, labels, logits, features=None, mode=None,
             regularization_losses=None):
        parts = self._per_head(features or {}, mode, logits, labels)
        loss = self._total([spec for _, _, spec in parts])
        if regularization_losses:
            loss = nd.add_n([loss] + list(regularization_losses))
        return loss

    def _total(self, specs):
        weights = self._head_weights or [1.0] * len(specs)
        return nd.add_n([w * spec.training_loss for w, spec in zip(weights, specs)])

    def predictions(self, logits, keys=None):
        out = {}
        for h, predictions, _ in self._per_head({}, None, logits, None):
            out.update({(h.name, k): v for k, v in predictions.items()
                        if keys is None or k in keys})
        return out

    def create_estimator_spec(self, features, mode, logits, labels=None,
                              optimizer=None, trainable_variables=None,
                              train_op_fn=None, update_ops=None,
                              regularization_losses=None):
        with nd.name_scope(None, "multi_head"):
            parts = self._per_head(features, mode, logits,
                                   None if mode == ModeKeys.PREDICT else labels)
        predictions = {(h.name, k): v for h, p, _ in parts for k, v in p.items()}
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions,
                                              export_outputs=self._exports(parts))
        loss = self._total([spec for _, _, spec in parts])
        regularization = None
        if regularization_losses:
            regularization = nd.add_n(regularization_losses)
            loss = nd.add_n([loss, regularization])
        if mode == ModeKeys.EVAL:
            metrics = {}
            for h, p, spec in parts:
                metrics.update(h._eval_metric_ops(p, spec, None))
                metrics[f"loss/{h.name}"] = nd.metrics.mean(spec.training_loss)
            if regularization is not None:
                metrics["regularization_loss"] = nd.metrics.mean(regularization)
            return EstimatorSpec(mode, predictions=predictions,
                                              loss=loss, eval_metric_ops=metrics)
        if optimizer is not None:
            if train_op_fn is not None:
                raise ValueError("train_op_fn and optimizer cannot both be set.")
            train_op = optimizer.minimize(loss, var_list=trainable_variables,
                                          global_step=nd.train.get_global_step())
        elif train_op_fn is not None:
            train_op = train_op_fn(loss)
        else:
            raise ValueError("train_op_fn and optimizer cannot both be None.")
        if update_ops:
            train_op = nd.group(train_op, *update_ops)
        for h, _, spec in parts:
            nd.summary.scalar(f"loss/{h.name}", spec.training_loss)
        return EstimatorSpec(mode, predictions=predictions, loss=loss,
                                          train_op=train_op)

    def _exports(self, parts):
        # Each head's outputs as "<head>" (its default) and "<head>/<key>"; the
        # default serves all heads' predictions, as TF merges them.
        out, merged = {}, {}
        for h, predictions, _ in parts:
            for key, value in h._export_outputs(predictions).items():
                out[h.name if key == head_lib.DEFAULT_SERVING_KEY
                    else f"{h.name}/{key}"] = value
            merged.update({f"{h.name}/{k}": v for k, v in predictions.items()})
        out[head_lib.DEFAULT_SERVING_KEY] = export_output.PredictOutput(merged)
        return out


__all__ = ["BinaryClassHead", "Head", "LogisticRegressionHead", "MultiClassHead",
           "MultiHead", "MultiLabelHead", "PoissonRegressionHead", "RegressionHead"]
