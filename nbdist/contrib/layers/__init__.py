"""``nd.contrib.layers``: the core of TF1's ``tf.contrib.layers`` (slim's
layers, initializers and regularizers).

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     y = nd.contrib.layers.fully_connected(nd.ones([2, 3]), 4)
...     [v.op.name for v in nd.model_variables()]
['fully_connected/weights', 'fully_connected/biases']
"""

from __future__ import annotations

from nbdist.contrib.layers.initializers import (
    variance_scaling_initializer,
    xavier_initializer,
    xavier_initializer_conv2d,
)
from nbdist.contrib.layers.layers import (
    avg_pool2d,
    batch_norm,
    conv2d,
    conv2d_transpose,
    convolution2d,
    convolution2d_transpose,
    dropout,
    flatten,
    fully_connected,
    layer_norm,
    max_pool2d,
    one_hot_encoding,
    repeat,
    stack,
)
from nbdist.contrib.layers.regularizers import (
    apply_regularization,
    l1_l2_regularizer,
    l1_regularizer,
    l2_regularizer,
    sum_regularizer,
)


def _linear(inputs, num_outputs, **kwargs):
    kwargs["activation_fn"] = None
    return fully_connected(inputs, num_outputs, **kwargs)


linear = _linear

__all__ = [
    "apply_regularization",
    "avg_pool2d",
    "batch_norm",
    "conv2d",
    "conv2d_transpose",
    "convolution2d",
    "convolution2d_transpose",
    "dropout",
    "flatten",
    "fully_connected",
    "l1_l2_regularizer",
    "l1_regularizer",
    "l2_regularizer",
    "layer_norm",
    "linear",
    "max_pool2d",
    "one_hot_encoding",
    "repeat",
    "stack",
    "sum_regularizer",
    "variance_scaling_initializer",
    "xavier_initializer",
    "xavier_initializer_conv2d",
]
