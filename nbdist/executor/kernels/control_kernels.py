"""Kernels for ``NoOp`` and the functional control flow ops ``If``, ``While``
and ``_WhileGrad``: their branches are FunctionDefs compiled once, when the
graph is registered, and run inside the calling step (sharing its
cancellation, deadline and rendezvous)."""

from __future__ import annotations

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels import tensor_array_kernels  # noqa: F401  (registers)
from nbdist.executor.kernels.function_kernels import CompiledFunction, function_def_for
from nbdist.executor.kernels.tensor_array_kernels import as_tensor_array


@register_kernel("NoOp")
def no_op_kernel(node):
    return lambda step, *inputs: None


def _compile(node, attr: str) -> CompiledFunction:
    fdef, library = function_def_for(node, attr)
    return CompiledFunction(fdef, node, library)


def _truth(node, value, what: str) -> bool:
    a = np.asarray(value)
    if a.ndim != 0 or a.dtype != np.bool_:
        raise errors.InvalidArgumentError(
            None, node.name, f"{what} of node {node.name} must be a bool scalar, got "
            f"{a.dtype} of shape {a.shape}")
    return bool(a)


def _result(values):
    if len(values) == 1:
        return values[0]
    return tuple(values) if values else None


@register_kernel("If")
def if_kernel(node):
    then_fn, else_fn = _compile(node, "then_branch"), _compile(node, "else_branch")

    def compute(step, pred, *args):
        fn = then_fn if _truth(node, pred, "The predicate") else else_fn
        return _result(fn.run(step, args))

    return compute


def _run_loop(node, step, cond_fn, body_fn, xs, caps, history=None):
    while _truth(node, cond_fn.run(step, xs + caps)[0], "The loop condition"):
        if history is not None:
            history.append(xs)
        xs = list(body_fn.run(step, xs + caps))
        step.check()
    return xs


@register_kernel("While")
def while_kernel(node):
    cond_fn, body_fn = _compile(node, "cond"), _compile(node, "body")
    n = len(node.attrs["T"])

    def compute(step, *inputs):
        xs, caps = list(inputs[:n]), list(inputs[n:])
        return _result(_run_loop(node, step, cond_fn, body_fn, xs, caps))

    return compute


def _add(a, b):
    # A captured TensorArray's gradients are arrays of gradients: they add up
    # element by element (TensorArrayValue.__add__).
    ta = as_tensor_array(a)
    if ta is not None or as_tensor_array(b) is not None:
        return (ta if ta is not None else as_tensor_array(b)) + (
            b if ta is not None else a)
    return np.asarray(a) + np.asarray(b)


def _zeros_like(x):
    if as_tensor_array(x) is not None:
        return b""  # an empty array of gradients
    return np.zeros_like(np.asarray(x))


@register_kernel("_WhileGrad")
def while_grad_kernel(node):
    cond_fn, body_fn = _compile(node, "cond"), _compile(node, "body")
    grad_fn = _compile(node, "grad_body")
    n = node.attrs["num_loop_vars"]
    float_c = list(node.attrs["float_c"])
    n_grads = len(node.attrs["float_x"])

    def compute(step, *inputs):
        nx = len(inputs) - n_grads
        xs, caps = list(inputs[:n]), list(inputs[n:nx])
        g = list(inputs[nx:])
        # The forward loop again, keeping each iteration's loop variables.
        history: list = []
        _run_loop(node, step, cond_fn, body_fn, xs, caps, history)
        gc: list = [None] * len(float_c)
        for x in reversed(history):
            out = grad_fn.run(step, x + caps + g)
            g = list(out[:len(g)])
            gc = [b if a is None else _add(a, b) for a, b in zip(gc, out[len(g):])]
            step.check()
        gc = [_zeros_like(caps[j]) if a is None else a for j, a in zip(float_c, gc)]
        return _result(g + gc)

    return compute


@register_kernel("IdentityN")
def identity_n_kernel(node):
    return lambda step, *xs: xs[0] if len(xs) == 1 else tuple(xs)


def _summarize(value, limit: int) -> str:
    a = np.asarray(value)
    if a.dtype == object and a.ndim == 0:
        v = a.item()
        return v.decode(errors="replace") if isinstance(v, bytes) else str(v)
    flat = a.reshape(-1)
    if limit >= 0:
        flat = flat[:limit]
    items = [v.decode(errors="replace") if isinstance(v, bytes) else str(v)
             for v in flat.tolist()]
    more = "..." if 0 <= limit < a.size else ""
    return " ".join(items) + more


@register_kernel("Assert")
def assert_kernel(node):
    limit = int(node.attrs.get("summarize", 3))

    def compute(step, condition, *data):
        c = np.asarray(condition)
        if c.size != 1:
            raise errors.InvalidArgumentError(
                None, node.name, f"In[0] of {node.name} (Assert) should be a "
                f"scalar, got shape {c.shape}")
        if not bool(c.reshape(())):
            parts = " ".join(f"[{_summarize(d, limit)}]" for d in data)
            raise errors.InvalidArgumentError(
                None, node.name, f"assertion failed: {parts}")

    return compute
