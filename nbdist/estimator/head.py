"""The public head classes of TF 1.15's ``tf.estimator`` (``BinaryClassHead``,
``MultiClassHead``, ``RegressionHead``, ``LogisticRegressionHead``,
``PoissonRegressionHead``), for ``DNNEstimator``, ``LinearEstimator`` and
``DNNLinearCombinedEstimator`` or a ``model_fn`` of one's own. They are the
canned heads (``nbdist.estimator.canned.head``) with TF 2's defaults (the
loss averaged over the batch, ``SUM_OVER_BATCH_SIZE``) and methods
(``loss``, ``predictions``, ``create_estimator_spec`` with
``trainable_variables``).

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
from nbdist.estimator.model_fn import ModeKeys

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


__all__ = ["BinaryClassHead", "Head", "LogisticRegressionHead", "MultiClassHead",
           "PoissonRegressionHead", "RegressionHead"]
