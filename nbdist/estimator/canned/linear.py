"""Linear estimators as TF 1.15's ``canned/linear.py``:
``linear_logit_fn_builder`` (``linear_model`` under the scope ``linear``,
so variables ``linear/linear_model/<col>/weights`` and
``linear/linear_model/bias_weights``) and ``LinearClassifier``,
``LinearRegressor`` and ``LinearEstimator``, trained by FTRL unless told
otherwise.

>>> import nbdist as nd
>>> fc = nd.feature_column
>>> from nbdist.estimator.canned.linear import linear_logit_fn_builder
>>> with nd.Graph().as_default():
...     with nd.variable_scope("linear"):
...         logits = linear_logit_fn_builder(1, [fc.numeric_column("x")])(
...             {"x": [[1.0]]})
...     sorted(v.op.name for v in nd.trainable_variables())
['linear/linear_model/bias_weights', 'linear/linear_model/x/weights']
"""

from __future__ import annotations

import math

import nbdist as nd
from nbdist.estimator.canned import head as head_lib
from nbdist.estimator.canned import optimizers
from nbdist.estimator.canned.dnn import check_features, num_ps_replicas
from nbdist.estimator.estimator import Estimator

# TF's cap on FTRL's default learning rate (else 1/sqrt(number of columns)).
_LEARNING_RATE = 0.2


def _get_default_optimizer(feature_columns):
    rate = min(_LEARNING_RATE, 1.0 / math.sqrt(len(feature_columns)))
    return nd.train.FtrlOptimizer(learning_rate=rate)


def _fraction_of_zero(variables):
    zeros, total = [], []
    for v in variables:
        total.append(nd.cast(nd.size(v), nd.float32))
        zeros.append(nd.nn.zero_fraction(v) * total[-1])
    return nd.add_n(zeros) / nd.add_n(total)


def linear_logit_fn_builder(units, feature_columns, sparse_combiner="sum"):
    """``logit_fn(features)``: ``linear_model(features, feature_columns,
    units)``, with summaries of its bias and of its weights' fraction of
    zeros."""

    def linear_logit_fn(features):
        cols_to_vars = {}
        logits = nd.feature_column.linear_model(
            features, feature_columns, units=units, sparse_combiner=sparse_combiner,
            cols_to_vars=cols_to_vars)
        bias = cols_to_vars.pop("bias")
        bias = nd.concat(bias, 0) if len(bias) > 1 else nd.convert_to_tensor(bias[0])
        if units > 1:
            nd.summary.histogram("bias", bias)
        else:
            nd.summary.scalar("bias", bias[0])
        weights = [v for vs in cols_to_vars.values() for v in vs]
        nd.summary.scalar("fraction_of_zero_weights", _fraction_of_zero(weights))
        return logits

    return linear_logit_fn


def _linear_model_fn(features, labels, mode, head, feature_columns, optimizer,
                     partitioner, config, sparse_combiner="sum"):
    """The linear ``model_fn``: logits under the scope ``linear``."""
    check_features(features)
    optimizer = optimizers.get_optimizer_instance(
        optimizer or _get_default_optimizer(feature_columns),
        learning_rate=_LEARNING_RATE)
    partitioner = partitioner or nd.min_max_variable_partitioner(
        max_partitions=num_ps_replicas(config), min_slice_size=64 << 20)
    with nd.variable_scope("linear", values=tuple(features.values()),
                           partitioner=partitioner):
        logits = linear_logit_fn_builder(head.logits_dimension, feature_columns,
                                         sparse_combiner)(features)
        return head.create_estimator_spec(features=features, mode=mode,
                                          labels=labels, optimizer=optimizer,
                                          logits=logits)


class LinearEstimator(Estimator):
    """A linear model whose loss, predictions and metrics are ``head``'s."""

    def __init__(self, head, feature_columns, model_dir=None, optimizer="Ftrl",
                 config=None, partitioner=None, warm_start_from=None,
                 sparse_combiner="sum"):
        if sparse_combiner not in ("mean", "sqrtn", "sum"):
            raise ValueError(f"sparse_combiner must be one of 'mean', 'sqrtn' or "
                             f"'sum', got {sparse_combiner}")
        columns = tuple(feature_columns or [])

        def _model_fn(features, labels, mode, config):
            return _linear_model_fn(
                features=features, labels=labels, mode=mode, head=head,
                feature_columns=columns, optimizer=optimizer,
                partitioner=partitioner, config=config,
                sparse_combiner=sparse_combiner)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class LinearClassifier(LinearEstimator):
    """A linear classifier of ``n_classes`` classes (logistic regression for
    2, softmax for more)."""

    def __init__(self, feature_columns, model_dir=None, n_classes=2,
                 weight_column=None, label_vocabulary=None, optimizer="Ftrl",
                 config=None, partitioner=None, warm_start_from=None,
                 loss_reduction=nd.losses.Reduction.SUM, sparse_combiner="sum"):
        head = head_lib._binary_logistic_or_multi_class_head(
            n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(head, feature_columns, model_dir, optimizer, config,
                         partitioner, warm_start_from, sparse_combiner)


class LinearRegressor(LinearEstimator):
    """Linear regression of ``label_dimension`` outputs, squared error."""

    def __init__(self, feature_columns, model_dir=None, label_dimension=1,
                 weight_column=None, optimizer="Ftrl", config=None, partitioner=None,
                 warm_start_from=None, loss_reduction=nd.losses.Reduction.SUM,
                 sparse_combiner="sum"):
        head = head_lib._regression_head(weight_column=weight_column,
                                         label_dimension=label_dimension,
                                         loss_reduction=loss_reduction)
        super().__init__(head, feature_columns, model_dir, optimizer, config,
                         partitioner, warm_start_from, sparse_combiner)
