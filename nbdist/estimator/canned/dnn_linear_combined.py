"""Wide-and-deep estimators as TF 1.15's ``canned/dnn_linear_combined.py``:
the logits of a linear model (scope ``linear``, FTRL) plus those of a DNN
(scope ``dnn``, Adagrad), each part trained by its own optimizer on its own
variables, then the global step moved once.

>>> import nbdist as nd
>>> fc = nd.feature_column
>>> est = nd.estimator.DNNLinearCombinedClassifier(
...     linear_feature_columns=[fc.categorical_column_with_hash_bucket("w", 10)],
...     dnn_feature_columns=[fc.numeric_column("x")], dnn_hidden_units=[4])
>>> type(est).__name__
'DNNLinearCombinedClassifier'
"""

from __future__ import annotations

import math

import nbdist as nd
from nbdist.estimator.canned import head as head_lib
from nbdist.estimator.canned import optimizers
from nbdist.estimator.canned.dnn import (add_layer_summary, check_features,
                                         dnn_logit_fn_builder, num_ps_replicas)
from nbdist.estimator.canned.linear import linear_logit_fn_builder
from nbdist.estimator.estimator import Estimator

# TF's defaults: the DNN part's Adagrad rate, and the cap on the linear part's
# FTRL rate (else 1/sqrt(number of linear columns)).
_DNN_LEARNING_RATE = 0.001
_LINEAR_LEARNING_RATE = 0.005


def _linear_learning_rate(num_linear_feature_columns):
    return min(_LINEAR_LEARNING_RATE, 1.0 / math.sqrt(num_linear_feature_columns))


def _check_no_sync_replicas_optimizer(optimizer):
    if isinstance(optimizer, nd.train.SyncReplicasOptimizer):
        raise ValueError(f"SyncReplicasOptimizer does not support multi optimizers "
                         f"case. Therefore, it is not supported in "
                         f"DNNLinearCombined model. If you want to use this "
                         f"optimizer, please use either DNN or Linear model. Given: "
                         f"{optimizer}")


def _dnn_linear_combined_model_fn(
        features, labels, mode, head, linear_feature_columns=None,
        linear_optimizer="Ftrl", dnn_feature_columns=None, dnn_optimizer="Adagrad",
        dnn_hidden_units=None, dnn_activation_fn=nd.nn.relu, dnn_dropout=None,
        input_layer_partitioner=None, config=None, batch_norm=False,
        linear_sparse_combiner="sum"):
    """The wide-and-deep ``model_fn``: the sum of both parts' logits."""
    if not linear_feature_columns and not dnn_feature_columns:
        raise ValueError("Either linear_feature_columns or dnn_feature_columns must "
                         "be defined.")
    check_features(features)
    ps = num_ps_replicas(config)
    input_layer_partitioner = input_layer_partitioner or (
        nd.min_max_variable_partitioner(max_partitions=ps, min_slice_size=64 << 20))
    dnn_logits = linear_logits = None
    if dnn_feature_columns:
        dnn_optimizer = optimizers.get_optimizer_instance(
            dnn_optimizer, learning_rate=_DNN_LEARNING_RATE)
        _check_no_sync_replicas_optimizer(dnn_optimizer)
        if not dnn_hidden_units:
            raise ValueError("dnn_hidden_units must be defined when "
                             "dnn_feature_columns is specified.")
        with nd.variable_scope(
                "dnn", values=tuple(features.values()),
                partitioner=nd.min_max_variable_partitioner(max_partitions=ps)) as s:
            dnn_scope = s.name
            dnn_logits = dnn_logit_fn_builder(
                units=head.logits_dimension, hidden_units=dnn_hidden_units,
                feature_columns=dnn_feature_columns, activation_fn=dnn_activation_fn,
                dropout=dnn_dropout, input_layer_partitioner=input_layer_partitioner,
                batch_norm=batch_norm)(features=features, mode=mode)
    if linear_feature_columns:
        linear_optimizer = optimizers.get_optimizer_instance(
            linear_optimizer,
            learning_rate=_linear_learning_rate(len(linear_feature_columns)))
        _check_no_sync_replicas_optimizer(linear_optimizer)
        with nd.variable_scope("linear", values=tuple(features.values()),
                               partitioner=input_layer_partitioner) as s:
            linear_scope = s.name
            linear_logits = linear_logit_fn_builder(
                units=head.logits_dimension, feature_columns=linear_feature_columns,
                sparse_combiner=linear_sparse_combiner)(features=features)
            add_layer_summary(linear_logits, s.name)
    if dnn_logits is not None and linear_logits is not None:
        logits = dnn_logits + linear_logits
    else:
        logits = dnn_logits if dnn_logits is not None else linear_logits

    def _train_op_fn(loss):
        train_ops = []
        trainable = nd.GraphKeys.TRAINABLE_VARIABLES
        if dnn_logits is not None:
            train_ops.append(dnn_optimizer.minimize(
                loss, var_list=nd.get_collection(trainable, scope=dnn_scope)))
        if linear_logits is not None:
            train_ops.append(linear_optimizer.minimize(
                loss, var_list=nd.get_collection(trainable, scope=linear_scope)))
        with nd.control_dependencies([nd.group(*train_ops)]):
            return nd.assign_add(nd.train.get_global_step(), 1).op

    return head.create_estimator_spec(features=features, mode=mode, labels=labels,
                                      train_op_fn=_train_op_fn, logits=logits)


class DNNLinearCombinedEstimator(Estimator):
    """Wide and deep, with the loss, predictions and metrics of ``head``."""

    def __init__(self, head, model_dir=None, linear_feature_columns=None,
                 linear_optimizer="Ftrl", dnn_feature_columns=None,
                 dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=nd.nn.relu, dnn_dropout=None,
                 input_layer_partitioner=None, config=None, warm_start_from=None,
                 batch_norm=False, linear_sparse_combiner="sum"):
        linear_feature_columns = list(linear_feature_columns or [])
        dnn_feature_columns = list(dnn_feature_columns or [])
        if not linear_feature_columns + dnn_feature_columns:
            raise ValueError("Either linear_feature_columns or dnn_feature_columns "
                             "must be defined.")

        def _model_fn(features, labels, mode, config):
            return _dnn_linear_combined_model_fn(
                features=features, labels=labels, mode=mode, head=head,
                linear_feature_columns=linear_feature_columns,
                linear_optimizer=linear_optimizer,
                dnn_feature_columns=dnn_feature_columns, dnn_optimizer=dnn_optimizer,
                dnn_hidden_units=dnn_hidden_units,
                dnn_activation_fn=dnn_activation_fn, dnn_dropout=dnn_dropout,
                input_layer_partitioner=input_layer_partitioner, config=config,
                batch_norm=batch_norm, linear_sparse_combiner=linear_sparse_combiner)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class DNNLinearCombinedClassifier(DNNLinearCombinedEstimator):
    """A wide-and-deep classifier of ``n_classes`` classes."""

    def __init__(self, model_dir=None, linear_feature_columns=None,
                 linear_optimizer="Ftrl", dnn_feature_columns=None,
                 dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=nd.nn.relu, dnn_dropout=None, n_classes=2,
                 weight_column=None, label_vocabulary=None,
                 input_layer_partitioner=None, config=None, warm_start_from=None,
                 loss_reduction=nd.losses.Reduction.SUM, batch_norm=False,
                 linear_sparse_combiner="sum"):
        head = head_lib._binary_logistic_or_multi_class_head(
            n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(head, model_dir, linear_feature_columns, linear_optimizer,
                         dnn_feature_columns, dnn_optimizer, dnn_hidden_units,
                         dnn_activation_fn, dnn_dropout, input_layer_partitioner,
                         config, warm_start_from, batch_norm, linear_sparse_combiner)


class DNNLinearCombinedRegressor(DNNLinearCombinedEstimator):
    """A wide-and-deep regressor of ``label_dimension`` outputs."""

    def __init__(self, model_dir=None, linear_feature_columns=None,
                 linear_optimizer="Ftrl", dnn_feature_columns=None,
                 dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=nd.nn.relu, dnn_dropout=None, label_dimension=1,
                 weight_column=None, input_layer_partitioner=None, config=None,
                 warm_start_from=None, loss_reduction=nd.losses.Reduction.SUM,
                 batch_norm=False, linear_sparse_combiner="sum"):
        head = head_lib._regression_head(weight_column=weight_column,
                                         label_dimension=label_dimension,
                                         loss_reduction=loss_reduction)
        super().__init__(head, model_dir, linear_feature_columns, linear_optimizer,
                         dnn_feature_columns, dnn_optimizer, dnn_hidden_units,
                         dnn_activation_fn, dnn_dropout, input_layer_partitioner,
                         config, warm_start_from, batch_norm, linear_sparse_combiner)
