"""Gradients of the ``TensorArrayFlow*`` ops (see ``tensor_array_ops``).

The gradient of a flow is itself an array: of the gradients of the elements
(indices nothing was written to count as zeros). Reading an element
(``read``, ``gather``, ``stack``, ``concat``) turns the gradient of the
result into such an array; writing one (``write``, ``scatter``, ``unstack``,
``split``) passes the array on to the older flow and reads the written
element's gradient out of it, zeros shaped like the written value where the
array has nothing.
"""

from __future__ import annotations

from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.ops import get_default_graph


def _make(op_type, inputs, name):
    return get_default_graph().create_op(op_type, list(inputs), {},
                                         name=name).outputs[0]


@register_gradient("TensorArrayFlowCreate")
def _create_grad(op, gflow):
    return [None]


@register_gradient("TensorArrayFlowWrite")
def _write_grad(op, gflow):
    _, index, value = op.inputs
    return [gflow, None, _make("TensorArrayFlowGradRead", [gflow, index, value],
                               "TensorArrayGradRead")]


@register_gradient("TensorArrayFlowScatter")
def _scatter_grad(op, gflow):
    _, indices, value = op.inputs
    return [gflow, None, _make("TensorArrayFlowGradGather", [gflow, indices, value],
                               "TensorArrayGradGather")]


@register_gradient("TensorArrayFlowUnstack")
def _unstack_grad(op, gflow):
    return [gflow, _make("TensorArrayFlowGradUnstack", [gflow, op.inputs[1]],
                         "TensorArrayGradUnstack")]


@register_gradient("TensorArrayFlowSplit")
def _split_grad(op, gflow):
    _, value, lengths = op.inputs
    return [gflow, _make("TensorArrayFlowGradSplit", [gflow, lengths, value],
                         "TensorArrayGradSplit"), None]


@register_gradient("TensorArrayFlowRead")
def _read_grad(op, dy):
    return [_make("TensorArrayFlowGradFromRead", [op.inputs[1], dy],
                  "TensorArrayGradFromRead"), None]


@register_gradient("TensorArrayFlowGather")
def _gather_grad(op, dy):
    return [_make("TensorArrayFlowGradFromGather", [op.inputs[1], dy],
                  "TensorArrayGradFromGather"), None]


@register_gradient("TensorArrayFlowStack")
def _stack_grad(op, dy):
    return [_make("TensorArrayFlowGradFromStack", [dy], "TensorArrayGradFromStack")]


@register_gradient("TensorArrayFlowConcat")
def _concat_grad(op, dy, dlengths):
    return [_make("TensorArrayFlowGradFromConcat", [dy, op.outputs[1]],
                  "TensorArrayGradFromConcat")]


@register_gradient("TensorArrayFlowSize")
def _size_grad(op, dsize):
    return [None]
