"""``nd.layers`` core layers: ``Dense``, ``Dropout``, ``Flatten`` and their
functional forms ``dense``, ``dropout``, ``flatten``, as TF1's ``tf.layers``.

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     y = nd.layers.dense(nd.ones([2, 4]), 3, activation=nd.nn.relu)
...     y.shape.as_list(), y.op.name
([2, 3], 'dense/Relu')
"""

from __future__ import annotations

import numpy as np

import nbdist as nd
from nbdist.layers.base import (
    InputSpec,
    Layer,
    get_activation,
    get_initializer,
    smart_cond,
)


class Dense(Layer):
    """``outputs = activation(inputs @ kernel + bias)``; ``kernel`` is
    ``[input_dim, units]`` (glorot-uniform by default), ``bias`` zeros."""

    def __init__(self, units, activation=None, use_bias=True,
                 kernel_initializer=None, bias_initializer=None,
                 kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None,
                 bias_constraint=None, trainable=True, name=None, **kwargs):
        super().__init__(trainable=trainable, name=name,
                         activity_regularizer=activity_regularizer, **kwargs)
        self.units = int(units)
        self.activation = get_activation(activation)
        self.use_bias = use_bias
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.bias_initializer = get_initializer(bias_initializer) or \
            nd.zeros_initializer()
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint
        self.input_spec = InputSpec(min_ndim=2)

    def build(self, input_shape):
        input_shape = nd.TensorShape(input_shape)
        last = input_shape.as_list()[-1] if input_shape.ndims else None
        if last is None:
            raise ValueError("The last dimension of the inputs to `Dense` should be "
                             "defined. Found `None`.")
        self.input_spec = InputSpec(min_ndim=2, axes={-1: last})
        self.kernel = self.add_weight(
            "kernel", shape=[last, self.units], initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", shape=[self.units], initializer=self.bias_initializer,
                regularizer=self.bias_regularizer, constraint=self.bias_constraint)
        self.built = True

    def call(self, inputs):
        rank = inputs.shape.ndims
        if rank is not None and rank > 2:
            # TF's tensordot over the last axis: [..., in] -> [..., units].
            flat = nd.reshape(inputs, [-1, inputs.shape.as_list()[-1]])
            out = nd.matmul(flat, self.kernel)
            lead = inputs.shape.as_list()[:-1]
            if all(d is not None for d in lead):
                target = lead + [self.units]
            else:
                target = nd.concat([nd.shape(inputs)[:-1], [self.units]], 0)
            outputs = nd.reshape(out, target, name="Tensordot")
            outputs.set_shape(lead + [self.units])
        else:
            outputs = nd.matmul(inputs, self.kernel)
        if self.use_bias:
            outputs = nd.nn.bias_add(outputs, self.bias)
        if self.activation is not None:
            return self.activation(outputs)
        return outputs

    def compute_output_shape(self, input_shape):
        return nd.TensorShape(nd.TensorShape(input_shape).as_list()[:-1]
                              + [self.units])


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer=None, kernel_regularizer=None, bias_regularizer=None,
          activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
          trainable=True, name=None, reuse=None):
    """The functional form of ``Dense``: variables ``<name or dense>/kernel`` and
    ``/bias``; ``name`` with ``reuse=True`` shares an earlier layer's."""
    layer = Dense(units, activation=activation, use_bias=use_bias,
                  kernel_initializer=kernel_initializer,
                  bias_initializer=bias_initializer,
                  kernel_regularizer=kernel_regularizer,
                  bias_regularizer=bias_regularizer,
                  activity_regularizer=activity_regularizer,
                  kernel_constraint=kernel_constraint,
                  bias_constraint=bias_constraint, trainable=trainable, name=name,
                  _scope=name, _reuse=reuse)
    return layer(inputs)


class Dropout(Layer):
    """Drops each input with probability ``rate`` (scaling the rest by
    1 / (1 - rate)) when called with ``training=True`` (a bool or a boolean
    tensor); the identity otherwise."""

    def __init__(self, rate=0.5, noise_shape=None, seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.rate = rate
        self.noise_shape = noise_shape
        self.seed = seed

    def call(self, inputs, training=False):
        def dropped():
            return nd.nn.dropout(inputs, rate=self.rate,
                                 noise_shape=self.noise_shape, seed=self.seed)

        return smart_cond(training, dropped, lambda: nd.identity(inputs))

    def compute_output_shape(self, input_shape):
        return nd.TensorShape(input_shape)


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False,
            name=None):
    """``Dropout(rate)(inputs, training=training)``; off unless ``training``."""
    return Dropout(rate, noise_shape=noise_shape, seed=seed, name=name)(
        inputs, training=training)


class Flatten(Layer):
    """``[batch, d1, d2, ...]`` to ``[batch, d1 * d2 * ...]``."""

    def __init__(self, data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.data_format = data_format or "channels_last"
        self.input_spec = InputSpec(min_ndim=1)

    def call(self, inputs):
        if self.data_format == "channels_first" and inputs.shape.ndims and \
                inputs.shape.ndims > 2:
            perm = [0] + list(range(2, inputs.shape.ndims)) + [1]
            inputs = nd.transpose(inputs, perm)
        dims = inputs.shape.as_list()
        if inputs.shape.ndims == 1:
            return nd.expand_dims(inputs, 1)
        rest = dims[1:]
        if all(d is not None for d in rest):
            return nd.reshape(inputs, [-1, int(np.prod(rest))])
        return nd.reshape(inputs, nd.stack([nd.shape(inputs)[0], -1]))

    def compute_output_shape(self, input_shape):
        dims = nd.TensorShape(input_shape).as_list()
        rest = dims[1:]
        flat = int(np.prod(rest)) if all(d is not None for d in rest) else None
        return nd.TensorShape([dims[0], flat])


def flatten(inputs, name=None, data_format="channels_last"):
    """Flattens all but the first (batch) dimension."""
    return Flatten(name=name, data_format=data_format)(inputs)
