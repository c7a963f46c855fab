"""``nd.layers``: TF1's ``tf.layers`` (``tf.compat.v1.layers``): layers as
classes (``Dense``, ``Conv2D``, ``MaxPooling2D``, ``BatchNormalization`` ...)
and as functions (``dense``, ``conv2d``, ``max_pooling2d``,
``batch_normalization`` ...), with TF1's variable names (``dense/kernel``,
``conv2d_1/bias``), defaults, ``reuse=`` and ``UPDATE_OPS``.

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     x = nd.placeholder(nd.float32, [None, 28, 28, 1])
...     h = nd.layers.conv2d(x, 32, 5, padding="same", activation=nd.nn.relu)
...     h = nd.layers.max_pooling2d(h, 2, 2)
...     logits = nd.layers.dense(nd.layers.flatten(h), 10)
...     logits.shape.as_list()
[None, 10]
"""

from __future__ import annotations

from nbdist.layers.base import InputSpec, Layer
from nbdist.layers.convolutional import (
                                         AveragePooling1D,
                                         AveragePooling2D,
                                         Conv1D,
                                         Conv2D,
                                         Conv2DTranspose,
                                         MaxPooling1D,
                                         MaxPooling2D,
                                         SeparableConv2D,
                                         average_pooling1d,
                                         average_pooling2d,
                                         conv1d,
                                         conv2d,
                                         conv2d_transpose,
                                         max_pooling1d,
                                         max_pooling2d,
                                         separable_conv2d,
)
from nbdist.layers.convolutional3d import (
    AveragePooling3D,
    Conv3D,
    Conv3DTranspose,
    MaxPooling3D,
    SeparableConv1D,
    average_pooling3d,
    conv3d,
    conv3d_transpose,
    max_pooling3d,
    separable_conv1d,
)
from nbdist.layers.core import Dense, Dropout, Flatten, dense, dropout, flatten
from nbdist.layers.normalization import BatchNormalization, batch_normalization

Convolution2D = Conv2D
Convolution2DTranspose = Conv2DTranspose
Deconvolution2D = Deconv2D = Conv2DTranspose
MaxPool2D = MaxPooling2D
AveragePool2D = AvgPool2D = AveragePooling2D
BatchNorm = BatchNormalization

SeparableConvolution2D = SeparableConv2D

__all__ = [
                                         "AveragePool2D",
                                         "AveragePooling1D",
                                         "AveragePooling2D",
                                         "AvgPool2D",
                                         "BatchNorm",
                                         "BatchNormalization",
                                         "Conv1D",
                                         "Conv2D",
                                         "Conv2DTranspose",
                                         "Convolution2D",
                                         "Convolution2DTranspose",
                                         "Deconv2D",
                                         "Deconvolution2D",
                                         "Dense",
                                         "Dropout",
                                         "Flatten",
                                         "InputSpec",
                                         "Layer",
                                         "MaxPool2D",
                                         "MaxPooling1D",
                                         "MaxPooling2D",
                                         "SeparableConv2D",
                                         "SeparableConvolution2D",
                                         "average_pooling1d",
                                         "average_pooling2d",
                                         "batch_normalization",
                                         "conv1d",
                                         "conv2d",
                                         "conv2d_transpose",
                                         "dense",
                                         "dropout",
                                         "flatten",
                                         "max_pooling1d",
                                         "max_pooling2d",
                                         "separable_conv2d",
    "AveragePooling3D",
    "Conv3D",
    "Conv3DTranspose",
    "MaxPooling3D",
    "SeparableConv1D",
    "average_pooling3d",
    "conv3d",
    "conv3d_transpose",
    "max_pooling3d",
    "separable_conv1d",
]
