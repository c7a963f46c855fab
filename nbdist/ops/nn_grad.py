"""Gradients of the neural-network ops (``Relu``, ``Softmax``, the
cross-entropies, ``BiasAdd``, ``L2Loss``...)."""

from __future__ import annotations

from nbdist.ops import nn_ops
from nbdist.framework.gradient_registry import NotDifferentiable, register_gradient


def _m():
    from nbdist.ops import math_ops

    return math_ops


def _a():
    from nbdist.ops import array_ops

    return array_ops


@register_gradient("Relu")
def _relu_grad(op, grad):
    return [nn_ops.relu_grad(grad, op.outputs[0])]


@register_gradient("ReluGrad")
def _relu_grad_grad(op, grad):
    x = op.inputs[1]
    return [nn_ops.relu_grad(grad, x), _a().zeros_like(x)]


@register_gradient("Relu6")
def _relu6_grad(op, grad):
    return [nn_ops._grad_op("Relu6Grad", grad, op.inputs[0])]


@register_gradient("Relu6Grad")
def _relu6_grad_grad(op, grad):
    x = op.inputs[1]
    return [nn_ops._grad_op("Relu6Grad", grad, x), _a().zeros_like(x)]


@register_gradient("Elu")
def _elu_grad(op, grad):
    return [nn_ops._grad_op("EluGrad", grad, op.outputs[0])]


@register_gradient("EluGrad")
def _elu_grad_grad(op, grad):
    A, M = _a(), _m()
    g, y = op.inputs
    return [nn_ops._grad_op("EluGrad", grad, y),
            A.where(M.less(y, 0), M.multiply(grad, g), A.zeros_like(y))]


@register_gradient("Softplus")
def _softplus_grad(op, grad):
    return [nn_ops._grad_op("SoftplusGrad", grad, op.inputs[0])]


@register_gradient("SoftplusGrad")
def _softplus_grad_grad(op, grad):
    M = _m()
    g, x = op.inputs
    ddy = nn_ops._grad_op("SoftplusGrad", grad, x)
    denom = M.add(M.add(M.exp(M.negative(x)), 2.0), M.exp(x))
    return [ddy, M.realdiv(M.multiply(grad, g), denom)]


@register_gradient("LeakyRelu")
def _leaky_relu_grad(op, grad):
    return [nn_ops._grad_op("LeakyReluGrad", grad, op.inputs[0],
                            alpha=op.get_attr("alpha"))]


@register_gradient("LeakyReluGrad")
def _leaky_relu_grad_grad(op, grad):
    x = op.inputs[1]
    return [nn_ops._grad_op("LeakyReluGrad", grad, x, alpha=op.get_attr("alpha")),
            _a().zeros_like(x)]


@register_gradient("Softmax")
def _softmax_grad(op, grad):
    M = _m()
    y = op.outputs[0]
    inner = M.reduce_sum(M.multiply(grad, y), -1, keepdims=True)
    return [M.multiply(M.subtract(grad, inner), y)]


@register_gradient("LogSoftmax")
def _log_softmax_grad(op, grad):
    M = _m()
    softmax = M.exp(op.outputs[0])
    return [M.subtract(grad, M.multiply(M.reduce_sum(grad, -1, keepdims=True),
                                        softmax))]


def _is_zero(t) -> bool:
    return t is None or t.op.type in ("ZerosLike", "Zeros")


def _broadcast_mul(vec, mat):
    """vec[:, None] * mat."""
    M, A = _m(), _a()
    return M.multiply(A.expand_dims(vec, -1), mat)


@register_gradient("SoftmaxCrossEntropyWithLogits")
def _xent_grad(op, grad_loss, grad_grad):
    M = _m()
    logits = op.inputs[0]
    grad = _broadcast_mul(grad_loss, op.outputs[1])
    if not _is_zero(grad_grad):
        softmax = nn_ops.softmax(logits)
        inner = M.reduce_sum(M.multiply(grad_grad, softmax), -1, keepdims=True)
        grad = M.add(grad, M.multiply(M.subtract(grad_grad, inner), softmax))
    return [grad, _broadcast_mul(grad_loss, M.negative(nn_ops.log_softmax(logits)))]


@register_gradient("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_xent_grad(op, grad_loss, grad_grad):
    backprop = nn_ops.prevent_gradient(
        op.outputs[1], message="Currently there is no way to take the second "
        "derivative of sparse_softmax_cross_entropy_with_logits due to the fused "
        "implementation's interaction with nd.gradients()")
    return [_broadcast_mul(grad_loss, backprop), None]


@register_gradient("PreventGradient")
def _prevent_gradient_grad(op, grad):
    msg = op.get_attr("message")
    msg = msg.decode() if isinstance(msg, bytes) else msg
    raise LookupError(f"Gradient explicitly disabled. Reason: {msg}")


@register_gradient("BiasAdd")
def _bias_add_grad(op, grad):
    fmt = op.get_attr("data_format")
    return [grad, nn_ops.bias_add_grad(grad, data_format=fmt)]


@register_gradient("BiasAddGrad")
def _bias_add_grad_grad(op, grad):
    # The bias gradient broadcast back along the channel dimension.
    x = op.inputs[0]
    fmt = op.get_attr("data_format")
    zeros = _a().zeros_like(x)
    return [x.graph.create_op("BiasAdd", [zeros, grad],
                              {"T": x.dtype.base_dtype, "data_format": fmt},
                              name="BiasAdd").outputs[0]]


@register_gradient("L2Loss")
def _l2_loss_grad(op, grad):
    return [_m().multiply(op.inputs[0], grad)]


@register_gradient("StridedSliceGrad")
def _strided_slice_grad_grad(op, grad):
    A = _a()
    _, begin, end, strides, _ = op.inputs
    masks = {m: op.get_attr(m) for m in ("begin_mask", "end_mask", "ellipsis_mask",
                                         "new_axis_mask", "shrink_axis_mask")}
    return [None, None, None, None, A.strided_slice(grad, begin, end, strides,
                                                    **masks)]


for _t in ("BroadcastGradientArgs", "ReducedShape", "ConcatOffset", "InTopKV2",
           "ReduceProdOthers",
           "RandomStandardNormal", "RandomUniform", "RandomUniformInt",
           "TruncatedNormal", "RandomShuffle"):
    NotDifferentiable(_t)

# The convolution / pooling / normalisation gradients live in their own modules.
from nbdist.ops import nn_conv_grad, nn_norm_grad  # noqa: E402,F401
