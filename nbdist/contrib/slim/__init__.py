"""``nd.contrib.slim``: the core of TF-Slim (``tf.contrib.slim``): its layers
(``conv2d``, ``fully_connected``, ``max_pool2d``, ``batch_norm`` ...),
``arg_scope``, the variable helpers, ``losses``, ``learning`` and
``prefetch_queue``.

>>> import nbdist as nd
>>> slim = nd.contrib.slim
>>> with nd.Graph().as_default():
...     with slim.arg_scope([slim.conv2d], padding="VALID"):
...         net = slim.conv2d(nd.zeros([1, 8, 8, 3]), 4, [3, 3], scope="conv1")
...     net.shape.as_list(), net.op.name
([1, 6, 6, 4], 'conv1/Relu')
"""

from __future__ import annotations

from nbdist.contrib import losses as losses
from nbdist.contrib.framework import (
                                      add_arg_scope,
                                      arg_scope,
                                      arg_scoped_arguments,
                                      assert_or_get_global_step,
                                      create_global_step,
                                      current_arg_scope,
                                      get_global_step,
                                      get_local_variables,
                                      get_model_variables,
                                      get_or_create_global_step,
                                      get_trainable_variables,
                                      get_unique_variable,
                                      get_variables,
                                      get_variables_by_name,
                                      get_variables_by_suffix,
                                      get_variables_to_restore,
                                      has_arg_scope,
                                      local_variable,
                                      model_variable,
                                      variable,
)
from nbdist.contrib.layers import (
                                      apply_regularization,
                                      avg_pool2d,
                                      batch_norm,
                                      conv2d,
                                      conv2d_transpose,
                                      convolution2d,
                                      convolution2d_transpose,
                                      dropout,
                                      flatten,
                                      fully_connected,
                                      l1_l2_regularizer,
                                      l1_regularizer,
                                      l2_regularizer,
                                      layer_norm,
                                      linear,
                                      max_pool2d,
                                      one_hot_encoding,
                                      repeat,
                                      stack,
                                      sum_regularizer,
                                      variance_scaling_initializer,
                                      xavier_initializer,
                                      xavier_initializer_conv2d,
)
from nbdist.contrib.slim import learning as learning
from nbdist.contrib.slim import prefetch_queue as prefetch_queue

__all__ = [
                                      "add_arg_scope",
                                      "apply_regularization",
                                      "arg_scope",
                                      "arg_scoped_arguments",
                                      "assert_or_get_global_step",
                                      "avg_pool2d",
                                      "batch_norm",
                                      "conv2d",
                                      "conv2d_transpose",
                                      "convolution2d",
                                      "convolution2d_transpose",
                                      "create_global_step",
                                      "current_arg_scope",
                                      "dropout",
                                      "flatten",
                                      "fully_connected",
                                      "get_global_step",
                                      "get_local_variables",
                                      "get_model_variables",
                                      "get_or_create_global_step",
                                      "get_trainable_variables",
                                      "get_unique_variable",
                                      "get_variables",
                                      "get_variables_by_name",
                                      "get_variables_by_suffix",
                                      "get_variables_to_restore",
                                      "has_arg_scope",
                                      "l1_l2_regularizer",
                                      "l1_regularizer",
                                      "l2_regularizer",
                                      "layer_norm",
                                      "learning",
                                      "linear",
                                      "local_variable",
                                      "losses",
                                      "max_pool2d",
                                      "model_variable",
                                      "one_hot_encoding",
                                      "prefetch_queue",
                                      "repeat",
                                      "stack",
                                      "sum_regularizer",
                                      "variable",
                                      "variance_scaling_initializer",
                                      "xavier_initializer",
                                      "xavier_initializer_conv2d",
]
