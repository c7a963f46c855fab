"""Gradients of the convolution and pooling ops."""

from __future__ import annotations

from nbdist.ops import nn_conv_ops as C
from nbdist.ops import nn_pool_ops as P
from nbdist.framework.gradient_registry import register_gradient


def _shape(t):
    from nbdist.ops import array_ops

    if t.shape.is_fully_defined():
        return t.shape.as_list()
    return array_ops.shape(t)


def _conv_attrs(op):
    return {k: op.get_attr(k) for k in ("strides", "padding", "explicit_paddings",
                                        "data_format", "dilations")}


def _conv(op_type, inputs, op):
    a = _conv_attrs(op)
    attrs = dict(a, T=op.inputs[-1].dtype.base_dtype)
    if op_type.startswith("Conv2D"):
        attrs["use_cudnn_on_gpu"] = op.get_attr("use_cudnn_on_gpu")
    return op.graph.create_op(op_type, inputs, attrs, name=op_type).outputs[0]


def _t(v):
    return C._sizes(v)


@register_gradient("Conv2D")
def _conv2d_grad(op, grad):
    x, w = op.inputs
    return [_conv("Conv2DBackpropInput", [_t(_shape(x)), w, grad], op),
            _conv("Conv2DBackpropFilter", [x, _t(_shape(w)), grad], op)]


@register_gradient("Conv2DBackpropInput")
def _conv2d_backprop_input_grad(op, grad):
    _, w, dy = op.inputs
    return [None, _conv("Conv2DBackpropFilter", [grad, _t(_shape(w)), dy], op),
            _conv("Conv2D", [grad, w], op)]


@register_gradient("Conv2DBackpropFilter")
def _conv2d_backprop_filter_grad(op, grad):
    x, _, dy = op.inputs
    return [_conv("Conv2DBackpropInput", [_t(_shape(x)), grad, dy], op), None,
            _conv("Conv2D", [x, grad], op)]


@register_gradient("DepthwiseConv2dNative")
def _depthwise_grad(op, grad):
    x, w = op.inputs
    return [_conv("DepthwiseConv2dNativeBackpropInput", [_t(_shape(x)), w, grad], op),
            _conv("DepthwiseConv2dNativeBackpropFilter", [x, _t(_shape(w)), grad],
                  op)]


@register_gradient("DepthwiseConv2dNativeBackpropInput")
def _depthwise_backprop_input_grad(op, grad):
    _, w, dy = op.inputs
    return [None,
            _conv("DepthwiseConv2dNativeBackpropFilter", [grad, _t(_shape(w)), dy],
                  op),
            _conv("DepthwiseConv2dNative", [grad, w], op)]


@register_gradient("DepthwiseConv2dNativeBackpropFilter")
def _depthwise_backprop_filter_grad(op, grad):
    x, _, dy = op.inputs
    return [_conv("DepthwiseConv2dNativeBackpropInput", [_t(_shape(x)), grad, dy],
                  op), None,
            _conv("DepthwiseConv2dNative", [x, grad], op)]


def _pool_args(op):
    return dict(ksize=op.get_attr("ksize"), strides=op.get_attr("strides"),
                padding=op.get_attr("padding"), data_format=op.get_attr("data_format"))


@register_gradient("MaxPool")
def _max_pool_grad(op, grad):
    return [P.max_pool_grad(op.inputs[0], op.outputs[0], grad, **_pool_args(op))]


@register_gradient("MaxPoolGrad")
def _max_pool_grad_grad(op, grad):
    from nbdist.ops import array_ops as A

    x, y, _ = op.inputs
    return [A.zeros_like(x), A.zeros_like(y),
            P.max_pool_grad_grad(x, y, grad, **_pool_args(op))]


@register_gradient("MaxPoolGradGrad")
def _max_pool_grad_grad_grad(op, grad):
    from nbdist.ops import array_ops as A

    x, y, _ = op.inputs
    return [A.zeros_like(x), A.zeros_like(y),
            P.max_pool_grad(x, y, grad, **_pool_args(op))]


@register_gradient("AvgPool")
def _avg_pool_grad(op, grad):
    return [P.avg_pool_grad(_shape(op.inputs[0]), grad, **_pool_args(op))]


@register_gradient("AvgPoolGrad")
def _avg_pool_grad_grad(op, grad):
    a = _pool_args(op)
    return [None, P.avg_pool(grad, a["ksize"], a["strides"], a["padding"],
                             a["data_format"])]


@register_gradient("MaxPoolWithArgmax")
def _max_pool_with_argmax_grad(op, grad, unused_argmax_grad):
    a = _pool_args(op)
    return [P.max_pool_grad(op.inputs[0], op.outputs[0], grad, **a)]

