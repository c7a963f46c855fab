"""``nd.layers`` convolution and pooling layers: ``Conv1D``, ``Conv2D``,
``Conv2DTranspose``, ``MaxPooling1D/2D``, ``AveragePooling1D/2D`` and their
functional forms, as TF1's ``tf.layers`` (``padding`` ``"valid"`` by default,
``kernel`` ``[kh, kw, in, filters]``, NHWC unless ``channels_first``).

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     x = nd.zeros([1, 8, 8, 3])
...     y = nd.layers.conv2d(x, 4, 3, strides=2, padding="same")
...     y.shape.as_list(), nd.global_variables()[0].name
([1, 4, 4, 4], 'conv2d/kernel:0')
"""

from __future__ import annotations

import nbdist as nd
from nbdist.layers.base import InputSpec, Layer, get_activation, get_initializer


def _tuple(value, n, what):
    if isinstance(value, int):
        return (value,) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise ValueError(f"The `{what}` argument must be a tuple of {n} integers. "
                         f"Received: {value}")
    return value


def _padding(padding):
    p = str(padding).upper()
    if p not in ("VALID", "SAME"):
        raise ValueError(f"The `padding` argument must be one of \"valid\", "
                         f"\"same\". Received: {padding}")
    return p


def _data_format(data_format):
    fmt = (data_format or "channels_last").lower()
    if fmt not in ("channels_last", "channels_first"):
        raise ValueError(f"The `data_format` argument must be one of "
                         f"\"channels_first\", \"channels_last\". Received: "
                         f"{data_format}")
    return fmt


def _out_length(size, k, padding, stride, dilation=1):
    if size is None:
        return None
    k = k + (k - 1) * (dilation - 1)
    if padding == "SAME":
        return -(-size // stride)
    return -(-(size - k + 1) // stride)


def _deconv_length(size, k, padding, stride):
    if size is None:
        return None
    return size * stride if padding == "SAME" else size * stride + max(k - stride, 0)


class _Conv(Layer):
    rank = 2

    def __init__(self, filters, kernel_size, strides=1, padding="valid",
                 data_format="channels_last", dilation_rate=1, activation=None,
                 use_bias=True, kernel_initializer=None,
                 bias_initializer=None, kernel_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, trainable=True,
                 name=None, **kwargs):
        super().__init__(trainable=trainable, name=name,
                         activity_regularizer=activity_regularizer, **kwargs)
        n = self.rank
        self.filters = int(filters)
        self.kernel_size = _tuple(kernel_size, n, "kernel_size")
        self.strides = _tuple(strides, n, "strides")
        self.padding = _padding(padding)
        self.data_format = _data_format(data_format)
        self.dilation_rate = _tuple(dilation_rate, n, "dilation_rate")
        self.activation = get_activation(activation)
        self.use_bias = use_bias
        self.kernel_initializer = get_initializer(kernel_initializer)
        self.bias_initializer = get_initializer(bias_initializer) or \
            nd.zeros_initializer()
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint
        self.input_spec = InputSpec(ndim=n + 2)

    @property
    def _channel_axis(self):
        return 1 if self.data_format == "channels_first" else -1

    def _kernel_shape(self, in_ch):
        return list(self.kernel_size) + [in_ch, self.filters]

    def build(self, input_shape):
        in_ch = nd.TensorShape(input_shape).as_list()[self._channel_axis]
        if in_ch is None:
            raise ValueError("The channel dimension of the inputs should be defined. "
                             "Found `None`.")
        self.input_spec = InputSpec(ndim=self.rank + 2,
                                    axes={self._channel_axis: in_ch})
        self.kernel = self.add_weight(
            "kernel", shape=self._kernel_shape(in_ch),
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                "bias", shape=[self.filters], initializer=self.bias_initializer,
                regularizer=self.bias_regularizer, constraint=self.bias_constraint)
        self.built = True

    def _conv(self, inputs):
        fmt = "NHWC" if self.data_format == "channels_last" else "NCHW"
        s, d = self.strides, self.dilation_rate
        if self.rank == 1:
            return nd.nn.conv1d(inputs, self.kernel, stride=s[0],
                                padding=self.padding,
                                data_format="NWC" if fmt == "NHWC" else "NCW",
                                dilations=d[0])
        full = [1, s[0], s[1], 1] if fmt == "NHWC" else [1, 1, s[0], s[1]]
        dil = [1, d[0], d[1], 1] if fmt == "NHWC" else [1, 1, d[0], d[1]]
        return nd.nn.conv2d(inputs, self.kernel, strides=full, padding=self.padding,
                            data_format=fmt, dilations=dil, name="Conv2D")

    def call(self, inputs):
        outputs = self._conv(inputs)
        if self.use_bias:
            fmt = "NCHW" if (self.data_format == "channels_first"
                             and self.rank == 2) else "NHWC"
            outputs = nd.nn.bias_add(outputs, self.bias, data_format=fmt)
        if self.activation is not None:
            return self.activation(outputs)
        return outputs


class Conv1D(_Conv):
    """1-D convolution over ``[batch, width, channels]``."""

    rank = 1


class Conv2D(_Conv):
    """2-D convolution: ``filters`` output channels, ``kernel_size`` an int or
    (kh, kw), ``strides``, ``padding`` ``"valid"``/``"same"``."""

    rank = 2


class Conv2DTranspose(_Conv):
    """The transposed ("deconvolution") 2-D convolution; its kernel is
    ``[kh, kw, filters, in_channels]``."""

    rank = 2

    def _kernel_shape(self, in_ch):
        return list(self.kernel_size) + [self.filters, in_ch]

    def _conv(self, inputs):
        fmt = "NHWC" if self.data_format == "channels_last" else "NCHW"
        h_axis, w_axis = (1, 2) if fmt == "NHWC" else (2, 3)
        dims = inputs.shape.as_list()
        kh, kw = self.kernel_size
        sh, sw = self.strides
        oh = _deconv_length(dims[h_axis], kh, self.padding, sh)
        ow = _deconv_length(dims[w_axis], kw, self.padding, sw)
        if oh is None or ow is None:
            dyn = nd.shape(inputs)
            oh_t = (dyn[h_axis] * sh if self.padding == "SAME"
                    else dyn[h_axis] * sh + max(kh - sh, 0)) if oh is None else oh
            ow_t = (dyn[w_axis] * sw if self.padding == "SAME"
                    else dyn[w_axis] * sw + max(kw - sw, 0)) if ow is None else ow
        else:
            oh_t, ow_t = oh, ow
        batch = nd.shape(inputs)[0]
        out = ([batch, oh_t, ow_t, self.filters] if fmt == "NHWC"
               else [batch, self.filters, oh_t, ow_t])
        strides = [1, sh, sw, 1] if fmt == "NHWC" else [1, 1, sh, sw]
        outputs = nd.nn.conv2d_transpose(inputs, self.kernel, nd.stack(out),
                                         strides=strides, padding=self.padding,
                                         data_format=fmt)
        static = ([dims[0], oh, ow, self.filters] if fmt == "NHWC"
                  else [dims[0], self.filters, oh, ow])
        outputs.set_shape(static)
        return outputs


class SeparableConv2D(_Conv):
    """A depthwise convolution (``depth_multiplier`` filters per input channel,
    ``depthwise_kernel`` [kh, kw, in, m]) then a 1x1 convolution to ``filters``
    (``pointwise_kernel`` [1, 1, in * m, filters])."""

    rank = 2

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid",
                 data_format="channels_last", dilation_rate=(1, 1),
                 depth_multiplier=1, activation=None, use_bias=True,
                 depthwise_initializer=None, pointwise_initializer=None,
                 bias_initializer=None, depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, depthwise_constraint=None,
                 pointwise_constraint=None, bias_constraint=None, trainable=True,
                 name=None, **kwargs):
        super().__init__(filters, kernel_size, strides=strides, padding=padding,
                         data_format=data_format, dilation_rate=dilation_rate,
                         activation=activation, use_bias=use_bias,
                         bias_initializer=bias_initializer,
                         bias_regularizer=bias_regularizer,
                         activity_regularizer=activity_regularizer,
                         bias_constraint=bias_constraint, trainable=trainable,
                         name=name, **kwargs)
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = get_initializer(depthwise_initializer)
        self.pointwise_initializer = get_initializer(pointwise_initializer)
        self.depthwise_regularizer = depthwise_regularizer
        self.pointwise_regularizer = pointwise_regularizer
        self.depthwise_constraint = depthwise_constraint
        self.pointwise_constraint = pointwise_constraint

    def build(self, input_shape):
        in_ch = nd.TensorShape(input_shape).as_list()[self._channel_axis]
        if in_ch is None:
            raise ValueError("The channel dimension of the inputs should be defined. "
                             "Found `None`.")
        self.input_spec = InputSpec(ndim=4, axes={self._channel_axis: in_ch})
        m = self.depth_multiplier
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel", shape=list(self.kernel_size) + [in_ch, m],
            initializer=self.depthwise_initializer,
            regularizer=self.depthwise_regularizer,
            constraint=self.depthwise_constraint)
        self.pointwise_kernel = self.add_weight(
            "pointwise_kernel", shape=[1, 1, in_ch * m, self.filters],
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
        fmt = "NHWC" if self.data_format == "channels_last" else "NCHW"
        s = self.strides
        strides = [1, s[0], s[1], 1] if fmt == "NHWC" else [1, 1, s[0], s[1]]
        rate = self.dilation_rate if self.dilation_rate != (1, 1) else None
        return nd.nn.separable_conv2d(inputs, self.depthwise_kernel,
                                      self.pointwise_kernel, strides, self.padding,
                                      rate=rate, data_format=fmt)


def separable_conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
                     data_format="channels_last", dilation_rate=(1, 1),
                     depth_multiplier=1, activation=None, use_bias=True,
                     depthwise_initializer=None, pointwise_initializer=None,
                     bias_initializer=None, depthwise_regularizer=None,
                     pointwise_regularizer=None, bias_regularizer=None,
                     activity_regularizer=None, depthwise_constraint=None,
                     pointwise_constraint=None, bias_constraint=None,
                     trainable=True, name=None, reuse=None):
    """The functional form of ``SeparableConv2D`` (variables
    ``separable_conv2d/depthwise_kernel``, ``/pointwise_kernel``, ``/bias``)."""
    layer = SeparableConv2D(
        filters, kernel_size, strides=strides, padding=padding,
        data_format=data_format, dilation_rate=dilation_rate,
        depth_multiplier=depth_multiplier, activation=activation,
        use_bias=use_bias, depthwise_initializer=depthwise_initializer,
        pointwise_initializer=pointwise_initializer,
        bias_initializer=bias_initializer,
        depthwise_regularizer=depthwise_regularizer,
        pointwise_regularizer=pointwise_regularizer,
        bias_regularizer=bias_regularizer,
        activity_regularizer=activity_regularizer,
        depthwise_constraint=depthwise_constraint,
        pointwise_constraint=pointwise_constraint,
        bias_constraint=bias_constraint, trainable=trainable, name=name,
        _scope=name, _reuse=reuse)
    return layer(inputs)


def _conv_fn(cls):
    def fn(inputs, filters, kernel_size, strides=1, padding="valid",
           data_format="channels_last", dilation_rate=1, activation=None,
           use_bias=True, kernel_initializer=None, bias_initializer=None,
           kernel_regularizer=None, bias_regularizer=None,
           activity_regularizer=None, kernel_constraint=None,
           bias_constraint=None, trainable=True, name=None, reuse=None):
        kwargs = {}
        if cls is not Conv2DTranspose:
            kwargs["dilation_rate"] = dilation_rate
        layer = cls(filters, kernel_size, strides=strides, padding=padding,
                    data_format=data_format, activation=activation,
                    use_bias=use_bias, kernel_initializer=kernel_initializer,
                    bias_initializer=bias_initializer,
                    kernel_regularizer=kernel_regularizer,
                    bias_regularizer=bias_regularizer,
                    activity_regularizer=activity_regularizer,
                    kernel_constraint=kernel_constraint,
                    bias_constraint=bias_constraint, trainable=trainable,
                    name=name, _scope=name, _reuse=reuse, **kwargs)
        return layer(inputs)

    return fn


conv1d = _conv_fn(Conv1D)
conv1d.__name__ = "conv1d"
conv1d.__doc__ = "The functional form of ``Conv1D`` (variables ``conv1d/kernel``)."
conv2d = _conv_fn(Conv2D)
conv2d.__name__ = "conv2d"
conv2d.__doc__ = ("The functional form of ``Conv2D``: variables "
                  "``<name or conv2d>/kernel`` and ``/bias``.")
conv2d_transpose = _conv_fn(Conv2DTranspose)
conv2d_transpose.__name__ = "conv2d_transpose"
conv2d_transpose.__doc__ = ("The functional form of ``Conv2DTranspose`` (variables "
                            "``conv2d_transpose/kernel``, ``/bias``).")


class _Pooling(Layer):
    rank = 2
    op = "max"

    def __init__(self, pool_size, strides, padding="valid",
                 data_format="channels_last", name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.pool_size = _tuple(pool_size, self.rank, "pool_size")
        self.strides = _tuple(strides, self.rank, "strides")
        self.padding = _padding(padding)
        self.data_format = _data_format(data_format)
        self.input_spec = InputSpec(ndim=self.rank + 2)

    def call(self, inputs):
        pool = nd.nn.max_pool if self.op == "max" else nd.nn.avg_pool
        last = self.data_format == "channels_last"
        x = inputs
        p, s = self.pool_size, self.strides
        if self.rank == 1:
            x = nd.expand_dims(x, 1 if last else 2)
            p, s = (1,) + p, (1,) + s
        ksize = [1, p[0], p[1], 1] if last else [1, 1, p[0], p[1]]
        strides = [1, s[0], s[1], 1] if last else [1, 1, s[0], s[1]]
        out = pool(x, ksize, strides, self.padding,
                   data_format="NHWC" if last else "NCHW")
        if self.rank == 1:
            out = nd.squeeze(out, [1 if last else 2])
        return out


class MaxPooling1D(_Pooling):
    """Max pooling over ``[batch, width, channels]``."""

    rank, op = 1, "max"


class AveragePooling1D(_Pooling):
    """Average pooling over ``[batch, width, channels]``."""

    rank, op = 1, "avg"


class MaxPooling2D(_Pooling):
    """Max pooling over windows of ``pool_size`` moved by ``strides``."""

    rank, op = 2, "max"


class AveragePooling2D(_Pooling):
    """Average pooling (``"same"`` padding averages only the real inputs)."""

    rank, op = 2, "avg"


def _pool_fn(cls, fname):
    def fn(inputs, pool_size, strides, padding="valid",
           data_format="channels_last", name=None):
        return cls(pool_size, strides, padding=padding, data_format=data_format,
                   name=name)(inputs)

    fn.__name__ = fname
    fn.__doc__ = f"The functional form of ``{cls.__name__}``."
    return fn


max_pooling1d = _pool_fn(MaxPooling1D, "max_pooling1d")
average_pooling1d = _pool_fn(AveragePooling1D, "average_pooling1d")
max_pooling2d = _pool_fn(MaxPooling2D, "max_pooling2d")
average_pooling2d = _pool_fn(AveragePooling2D, "average_pooling2d")
