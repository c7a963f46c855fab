"""Baseline estimators as TF 1.15's ``canned/baseline.py``: the logits are
one learned bias (``baseline/bias``), the same for every example, so the
model predicts the label distribution (classifier) or mean (regressor) and
ignores the features; a yardstick for real models.

>>> import nbdist as nd
>>> type(nd.estimator.BaselineRegressor()).__name__
'BaselineRegressor'
"""

from __future__ import annotations

import nbdist as nd
from nbdist.estimator.canned import head as head_lib
from nbdist.estimator.canned import optimizers
from nbdist.estimator.estimator import Estimator

# TF's default learning rate of the baseline's FTRL.
_LEARNING_RATE = 0.3


def _batch_size(features, weight_column):
    if isinstance(features, dict):
        values = [v for k, v in sorted(features.items()) if k != weight_column]
        values = values or list(features.values())
    else:
        values = [features]
    if not values:
        raise ValueError("Baseline needs at least one feature to know the batch "
                         "size")
    first = values[0]
    first = first.dense_shape if isinstance(first, nd.SparseTensor) else nd.shape(
        nd.convert_to_tensor(first))
    return nd.cast(first[0], nd.int32)


def _baseline_logit_fn_builder(num_outputs, weight_column=None):
    def baseline_logit_fn(features):
        with nd.variable_scope("baseline"):
            bias = nd.get_variable("bias", shape=[num_outputs],
                                   initializer=nd.zeros_initializer())
            batch = _batch_size(features, weight_column)
            return nd.ones(nd.stack([batch, num_outputs])) * bias

    return baseline_logit_fn


def _baseline_model_fn(features, labels, mode, head, optimizer, weight_column=None,
                       config=None):
    del config
    name = weight_column.key if hasattr(weight_column, "key") else weight_column
    logits = _baseline_logit_fn_builder(head.logits_dimension, name)(features)
    optimizer = optimizers.get_optimizer_instance(optimizer,
                                                  learning_rate=_LEARNING_RATE)
    return head.create_estimator_spec(features=features, mode=mode, logits=logits,
                                      labels=labels, optimizer=optimizer)


class BaselineEstimator(Estimator):
    """A baseline whose loss, predictions and metrics are those of ``head``."""

    def __init__(self, head, model_dir=None, optimizer="Ftrl", config=None,
                 weight_column=None):
        def _model_fn(features, labels, mode, config):
            return _baseline_model_fn(features=features, labels=labels, mode=mode,
                                      head=head, optimizer=optimizer,
                                      weight_column=weight_column, config=config)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config)


class BaselineClassifier(BaselineEstimator):
    """Predicts each class with the frequency the training labels have."""

    def __init__(self, model_dir=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, optimizer="Ftrl", config=None,
                 loss_reduction=nd.losses.Reduction.SUM):
        head = head_lib._binary_logistic_or_multi_class_head(
            n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(head, model_dir, optimizer, config, weight_column)


class BaselineRegressor(BaselineEstimator):
    """Predicts the mean of the training labels."""

    def __init__(self, model_dir=None, label_dimension=1, weight_column=None,
                 optimizer="Ftrl", config=None,
                 loss_reduction=nd.losses.Reduction.SUM):
        head = head_lib._regression_head(weight_column=weight_column,
                                         label_dimension=label_dimension,
                                         loss_reduction=loss_reduction)
        super().__init__(head, model_dir, optimizer, config, weight_column)
