"""TF1's 3-D convolution and pooling layers (``Conv3D``, ``Conv3DTranspose``,
``MaxPooling3D``, ``AveragePooling3D``) and ``SeparableConv1D``, with their
functional forms; variables named as TF1 (``conv3d/kernel``,
``separable_conv1d/depthwise_kernel`` ...). 3-D layers take channels_last
``[batch, depth, height, width, channels]``."""

from __future__ import annotations

import nbdist as nd
from nbdist.layers.base import InputSpec
from nbdist.layers.convolutional import (
    SeparableConv2D,
    _Conv,
    _conv_fn,
    _deconv_length,
    _Pooling,
    _pool_fn,
)


def _channels_last(layer):
    if layer.data_format != "channels_last":
        raise ValueError(f"{type(layer).__name__}: nbdist's 3-D ops take "
                         f"channels_last (NDHWC) only")


class Conv3D(_Conv):
    """3-D convolution: kernel ``[kd, kh, kw, in, filters]``."""

    rank = 3

    def _conv(self, inputs):
        _channels_last(self)
        return nd.nn.conv3d(inputs, self.kernel, [1, *self.strides, 1], self.padding,
                            dilations=[1, *self.dilation_rate, 1])


class Conv3DTranspose(_Conv):
    """The transposed 3-D convolution: kernel ``[kd, kh, kw, filters, in]``."""

    rank = 3

    def _kernel_shape(self, in_ch):
        return list(self.kernel_size) + [self.filters, in_ch]

    def _conv(self, inputs):
        _channels_last(self)
        dims = inputs.shape.as_list()
        sizes = [_deconv_length(n, k, self.padding, s) for n, k, s in
                 zip(dims[1:4], self.kernel_size, self.strides)]
        if None in sizes:
            raise ValueError("Conv3DTranspose needs the inputs' depth, height and "
                             "width known statically")
        out = nd.stack([nd.shape(inputs)[0], *sizes, self.filters])
        outputs = nd.nn.conv3d_transpose(inputs, self.kernel, out,
                                         [1, *self.strides, 1], self.padding)
        outputs.set_shape([dims[0], *sizes, self.filters])
        return outputs


class _Pooling3D(_Pooling):
    rank = 3

    def call(self, inputs):
        _channels_last(self)
        pool = nd.nn.max_pool3d if self.op == "max" else nd.nn.avg_pool3d
        return pool(inputs, [1, *self.pool_size, 1], [1, *self.strides, 1],
                    self.padding)


class MaxPooling3D(_Pooling3D):
    """Max pooling over ``[batch, depth, height, width, channels]``."""

    op = "max"


class AveragePooling3D(_Pooling3D):
    """Average pooling over ``[batch, depth, height, width, channels]``."""

    op = "avg"


class SeparableConv1D(SeparableConv2D):
    """A depthwise 1-D convolution (``depthwise_kernel`` [k, in, m]) then a
    pointwise one to ``filters`` (``pointwise_kernel`` [1, in * m, filters])."""

    rank = 1

    def __init__(self, filters, kernel_size, strides=1, padding="valid",
                 data_format="channels_last", dilation_rate=1, **kwargs):
        super().__init__(filters, kernel_size, strides=strides, padding=padding,
                         data_format=data_format, dilation_rate=dilation_rate,
                         **kwargs)
        self.input_spec = InputSpec(ndim=3)

    def build(self, input_shape):
        _channels_last(self)
        in_ch = nd.TensorShape(input_shape).as_list()[-1]
        if in_ch is None:
            raise ValueError("The channel dimension of the inputs should be defined. "
                             "Found `None`.")
        m = self.depth_multiplier
        self.input_spec = InputSpec(ndim=3, axes={-1: in_ch})
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel", shape=[self.kernel_size[0], in_ch, m],
            initializer=self.depthwise_initializer,
            regularizer=self.depthwise_regularizer,
            constraint=self.depthwise_constraint)
        self.pointwise_kernel = self.add_weight(
            "pointwise_kernel", shape=[1, in_ch * m, self.filters],
            initializer=self.pointwise_initializer,
            regularizer=self.pointwise_regularizer,
            constraint=self.pointwise_constraint)
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", shape=[self.filters], initializer=self.bias_initializer,
                regularizer=self.bias_regularizer, constraint=self.bias_constraint)
        self.built = True

    def _conv(self, inputs):
        x = nd.expand_dims(inputs, 1)
        rate = None if self.dilation_rate == (1,) else (1, self.dilation_rate[0])
        out = nd.nn.separable_conv2d(
            x, nd.expand_dims(self.depthwise_kernel, 0),
            nd.expand_dims(self.pointwise_kernel, 0), [1, 1, self.strides[0], 1],
            self.padding, rate=rate)
        return nd.squeeze(out, [1])


conv3d = _conv_fn(Conv3D)
conv3d.__name__ = "conv3d"
conv3d.__doc__ = "The functional form of ``Conv3D`` (variables ``conv3d/kernel``)."


def conv3d_transpose(inputs, filters, kernel_size, strides=(1, 1, 1),
                     padding="valid", data_format="channels_last", activation=None,
                     use_bias=True, kernel_initializer=None,
                     bias_initializer=None, kernel_regularizer=None,
                     bias_regularizer=None, activity_regularizer=None,
                     kernel_constraint=None, bias_constraint=None, trainable=True,
                     name=None, reuse=None):
    """The functional form of ``Conv3DTranspose``."""
    return Conv3DTranspose(
        filters, kernel_size, strides=strides, padding=padding,
        data_format=data_format, activation=activation, use_bias=use_bias,
        kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
        kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
        activity_regularizer=activity_regularizer,
        kernel_constraint=kernel_constraint, bias_constraint=bias_constraint,
        trainable=trainable, name=name, _scope=name, _reuse=reuse)(inputs)


def separable_conv1d(inputs, filters, kernel_size, strides=1, padding="valid",
                     data_format="channels_last", dilation_rate=1,
                     depth_multiplier=1, activation=None, use_bias=True,
                     trainable=True, name=None, reuse=None, **kwargs):
    """The functional form of ``SeparableConv1D`` (initializers, regularizers
    and constraints as keyword arguments, as ``SeparableConv2D``)."""
    return SeparableConv1D(
        filters, kernel_size, strides=strides, padding=padding,
        data_format=data_format, dilation_rate=dilation_rate,
        depth_multiplier=depth_multiplier, activation=activation,
        use_bias=use_bias, trainable=trainable, name=name, _scope=name,
        _reuse=reuse, **kwargs)(inputs)


max_pooling3d = _pool_fn(MaxPooling3D, "max_pooling3d")
average_pooling3d = _pool_fn(AveragePooling3D, "average_pooling3d")

__all__ = [
    "AveragePooling3D", "Conv3D", "Conv3DTranspose", "MaxPooling3D",
    "SeparableConv1D", "average_pooling3d", "conv3d", "conv3d_transpose",
    "max_pooling3d", "separable_conv1d",
]
