"""Deep neural network estimators as TF 1.15's ``canned/dnn.py``:
``dnn_logit_fn_builder`` (feature columns through ``input_layer``, then
fully connected ReLU layers and a linear logits layer) and the
``DNNClassifier``, ``DNNRegressor`` and ``DNNEstimator`` over it, trained by
Adagrad (learning rate 0.05) unless told otherwise.

Variables are TF's: ``dnn/input_from_feature_columns/input_layer/<col>/...``,
``dnn/hiddenlayer_<i>/kernel`` and ``/bias``, ``dnn/logits/kernel`` and
``/bias``; under the scope ``dnn`` a partitioner over the ps tasks makes them
``.../part_0`` in the graph, saved under the names above.

>>> import nbdist as nd
>>> fc = nd.feature_column
>>> from nbdist.estimator.canned.dnn import dnn_logit_fn_builder
>>> with nd.Graph().as_default():
...     with nd.variable_scope("dnn"):
...         logit_fn = dnn_logit_fn_builder(
...             units=1, hidden_units=[4], feature_columns=[fc.numeric_column("x")],
...             activation_fn=nd.nn.relu, dropout=None,
...             input_layer_partitioner=None, batch_norm=False)
...         logits = logit_fn({"x": [[1.0], [2.0]]}, mode="train")
...     names = sorted(v.op.name for v in nd.trainable_variables())
>>> names[:2]
['dnn/hiddenlayer_0/bias', 'dnn/hiddenlayer_0/kernel']
>>> names[2:]
['dnn/logits/bias', 'dnn/logits/kernel']
"""

from __future__ import annotations

import nbdist as nd
from nbdist.estimator.canned import head as head_lib
from nbdist.estimator.canned import optimizers
from nbdist.estimator.estimator import Estimator
from nbdist.estimator.model_fn import ModeKeys

# TF's default learning rate of a DNN's Adagrad.
_LEARNING_RATE = 0.05


def add_layer_summary(value, tag):
    nd.summary.scalar(f"{tag}/fraction_of_zero_values", nd.nn.zero_fraction(value))
    nd.summary.histogram(f"{tag}/activation", value)


def _dense(net, units, activation, scope_name):
    """A fully connected layer with TF's variables ``kernel`` (Glorot
    uniform) and ``bias`` (zeros) under the variable scope ``scope_name``."""
    with nd.variable_scope(scope_name, values=(net,)) as scope:
        kernel = nd.get_variable("kernel", shape=[net.shape[-1], units],
                                 initializer=nd.glorot_uniform_initializer())
        bias = nd.get_variable("bias", shape=[units],
                               initializer=nd.zeros_initializer())
        out = nd.nn.bias_add(nd.matmul(net, kernel), bias)
        if activation is not None:
            out = activation(out)
        return out, scope


def check_features(features):
    if not isinstance(features, dict):
        raise ValueError(f"features should be a dictionary of `Tensor`s. Given "
                         f"type: {type(features)}")


def dnn_logit_fn_builder(units, hidden_units, feature_columns, activation_fn,
                         dropout, input_layer_partitioner, batch_norm):
    """``logit_fn(features, mode)``: the ``[batch, units]`` logits of a DNN
    with ``hidden_units`` per layer over ``input_layer(feature_columns)``;
    dropout (a rate) only in training."""
    if not isinstance(units, int):
        raise ValueError(f"units must be an int.  Given type: {type(units)}")

    def dnn_logit_fn(features, mode):
        is_training = mode == ModeKeys.TRAIN
        with nd.variable_scope("input_from_feature_columns",
                               partitioner=input_layer_partitioner):
            net = nd.feature_column.input_layer(features, feature_columns)
        for i, width in enumerate(hidden_units):
            net, scope = _dense(net, width, activation_fn, f"hiddenlayer_{i}")
            with nd.variable_scope(scope):
                if dropout is not None and is_training:
                    net = nd.nn.dropout(net, rate=dropout)
                if batch_norm:
                    # TF's momentum: 0.99 "crashes on certain problems".
                    net = nd.layers.batch_normalization(
                        net, momentum=0.999, training=is_training,
                        name=f"batchnorm_{i}")
            add_layer_summary(net, scope.name)
        logits, scope = _dense(net, units, None, "logits")
        add_layer_summary(logits, scope.name)
        return logits

    return dnn_logit_fn


def num_ps_replicas(config):
    return config.num_ps_replicas if config else 0


def _dnn_model_fn(features, labels, mode, head, hidden_units, feature_columns,
                  optimizer="Adagrad", activation_fn=nd.nn.relu, dropout=None,
                  input_layer_partitioner=None, config=None, batch_norm=False):
    """The DNN ``model_fn``: logits under the scope ``dnn`` (variables
    partitioned over the ps tasks), the ``head``'s spec, ``optimizer``."""
    optimizer = optimizers.get_optimizer_instance(optimizer,
                                                  learning_rate=_LEARNING_RATE)
    check_features(features)
    ps = num_ps_replicas(config)
    partitioner = nd.min_max_variable_partitioner(max_partitions=ps)
    with nd.variable_scope("dnn", values=tuple(features.values()),
                           partitioner=partitioner):
        input_layer_partitioner = input_layer_partitioner or (
            nd.min_max_variable_partitioner(max_partitions=ps,
                                            min_slice_size=64 << 20))
        logit_fn = dnn_logit_fn_builder(
            units=head.logits_dimension, hidden_units=hidden_units,
            feature_columns=feature_columns, activation_fn=activation_fn,
            dropout=dropout, input_layer_partitioner=input_layer_partitioner,
            batch_norm=batch_norm)
        logits = logit_fn(features=features, mode=mode)
        return head.create_estimator_spec(features=features, mode=mode,
                                          labels=labels, optimizer=optimizer,
                                          logits=logits)


class DNNEstimator(Estimator):
    """A DNN whose loss, predictions and metrics are those of ``head``."""

    def __init__(self, head, hidden_units, feature_columns, model_dir=None,
                 optimizer="Adagrad", activation_fn=nd.nn.relu, dropout=None,
                 input_layer_partitioner=None, config=None, warm_start_from=None,
                 batch_norm=False):
        columns = tuple(feature_columns or [])

        def _model_fn(features, labels, mode, config):
            return _dnn_model_fn(
                features=features, labels=labels, mode=mode, head=head,
                hidden_units=hidden_units, feature_columns=columns,
                optimizer=optimizer, activation_fn=activation_fn, dropout=dropout,
                input_layer_partitioner=input_layer_partitioner, config=config,
                batch_norm=batch_norm)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class DNNClassifier(DNNEstimator):
    """A DNN classifier of ``n_classes`` classes (sigmoid cross entropy for
    2, softmax for more); labels are class ids, or strings of
    ``label_vocabulary``.

    >>> import nbdist as nd
    >>> fc = nd.feature_column
    >>> est = nd.estimator.DNNClassifier(hidden_units=[8],
    ...                                  feature_columns=[fc.numeric_column("x")])
    >>> type(est).__name__
    'DNNClassifier'
    """

    def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2,
                 weight_column=None, label_vocabulary=None, optimizer="Adagrad",
                 activation_fn=nd.nn.relu, dropout=None, input_layer_partitioner=None,
                 config=None, warm_start_from=None,
                 loss_reduction=nd.losses.Reduction.SUM, batch_norm=False):
        head = head_lib._binary_logistic_or_multi_class_head(
            n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(head, hidden_units, feature_columns, model_dir, optimizer,
                         activation_fn, dropout, input_layer_partitioner, config,
                         warm_start_from, batch_norm)


class DNNRegressor(DNNEstimator):
    """A DNN regressor of ``label_dimension`` outputs, squared error."""

    def __init__(self, hidden_units, feature_columns, model_dir=None,
                 label_dimension=1, weight_column=None, optimizer="Adagrad",
                 activation_fn=nd.nn.relu, dropout=None, input_layer_partitioner=None,
                 config=None, warm_start_from=None,
                 loss_reduction=nd.losses.Reduction.SUM, batch_norm=False):
        head = head_lib._regression_head(weight_column=weight_column,
                                         label_dimension=label_dimension,
                                         loss_reduction=loss_reduction)
        super().__init__(head, hidden_units, feature_columns, model_dir, optimizer,
                         activation_fn, dropout, input_layer_partitioner, config,
                         warm_start_from, batch_norm)
