"""Gradients of ``If`` and ``While``.

A branch's gradient is a graph function too: the branch's body rebuilt in a
graph of its own and differentiated there with ``gradients`` (so nested
control flow differentiates through its own registered gradient). ``If``'s
gradient is another ``If`` on the same ``pred`` over the gradient branches.
``While``'s is a ``_WhileGrad`` op: its kernel runs the loop forward again,
keeping every iteration's loop variables, then walks them backwards through
the body's gradient function, summing the gradients of the captured tensors.
"""

from __future__ import annotations

from nbdist.framework.constant_op import placeholder
from nbdist.ops.array_ops_creation import zeros_like
from nbdist.framework.function_def import (
    function_graph,
    function_name,
    needed_trace,
    to_function_def,
)
from nbdist.framework.gradient_registry import register_gradient
from nbdist.ops.gradients import gradients
from nbdist.proto import function_pb2


def _is_float(t) -> bool:
    return t.dtype.base_dtype.is_floating


def _fdef(op, attr: str) -> function_pb2.FunctionDef:
    return function_pb2.FunctionDef.FromString(bytes(op._attrs[f"_{attr}_fdef"]))


def grad_function_def(fdef, arg_shapes, wrt, out_idx, name):
    """A function of (``fdef``'s arguments, one gradient per output in
    ``out_idx``) returning the gradients of the arguments in ``wrt`` (zeros
    where they do not reach an output)."""
    g, args, outs = function_graph(fdef, arg_shapes)
    with g.as_default():
        gys = [placeholder(outs[i].dtype.base_dtype, outs[i].shape, name="grad_y")
               for i in out_idx]
        xs = [args[i] for i in wrt]
        grads = gradients([outs[i] for i in out_idx], xs, grad_ys=gys,
                          unconnected_gradients="zero")
    return to_function_def(needed_trace(g, args, grads), name, extra_args=gys)


@register_gradient("If")
def _if_grad(op, *grads):
    caps = op.inputs[1:]
    out_idx = [i for i, t in enumerate(op.outputs)
               if _is_float(t) and grads[i] is not None]
    wrt = [j for j, t in enumerate(caps) if _is_float(t)]
    none = [None] * len(op.inputs)
    if not out_idx or not wrt:
        return none
    shapes = [t.shape for t in caps]
    fds = [grad_function_def(_fdef(op, a), shapes, wrt, out_idx,
                             function_name(f"{op.name}_{a}_grad"))
           for a in ("then_branch", "else_branch")]
    attrs = {"then_branch": fds[0].name, "else_branch": fds[1].name,
             "Tout": [caps[j].dtype.base_dtype for j in wrt],
             "output_shapes": [caps[j].shape for j in wrt],
             "_then_branch_fdef": fds[0].SerializeToString(),
             "_else_branch_fdef": fds[1].SerializeToString()}
    gop = op.graph.create_op("If", [op.inputs[0]] + caps + [grads[i] for i in out_idx],
                             attrs, name="If")
    for k, j in enumerate(wrt):
        none[1 + j] = gop.outputs[k]
    return none


@register_gradient("While")
def _while_grad(op, *grads):
    n = len(op.outputs)
    xs, caps = op.inputs[:n], op.inputs[n:]
    float_x = [i for i in range(n) if _is_float(op.outputs[i])]
    float_c = [j for j, t in enumerate(caps) if _is_float(t)]
    none = [None] * len(op.inputs)
    if not op._attrs.get("back_prop", True) or not float_x:
        return none
    shapes = list(op._attrs["output_shapes"]) + [t.shape for t in caps]
    fd = grad_function_def(_fdef(op, "body"), shapes,
                           float_x + [n + j for j in float_c], float_x,
                           function_name(f"{op.name}_body_grad"))
    g_in = [grads[i] if grads[i] is not None else zeros_like(op.outputs[i])
            for i in float_x]
    wrt = [xs[i] for i in float_x] + [caps[j] for j in float_c]
    attrs = {"cond": op._attrs["cond"], "body": op._attrs["body"],
             "grad_body": fd.name, "num_loop_vars": n,
             "float_x": float_x, "float_c": float_c,
             "Tout": [t.dtype.base_dtype for t in wrt],
             "output_shapes": [t.shape for t in wrt],
             "_cond_fdef": op._attrs["_cond_fdef"],
             "_body_fdef": op._attrs["_body_fdef"],
             "_grad_body_fdef": fd.SerializeToString()}
    gop = op.graph.create_op("_WhileGrad", list(op.inputs) + g_in, attrs,
                             name="WhileGrad")
    for k, i in enumerate(float_x + [n + j for j in float_c]):
        none[i] = gop.outputs[k]
    return none


__all__ = ["grad_function_def"]


@register_gradient("IdentityN")
def _identity_n_grad(op, *grads):
    return list(grads)
