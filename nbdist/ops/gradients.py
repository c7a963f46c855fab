"""Symbolic reverse-mode differentiation: ``nd.gradients(ys, xs)``.

As TF1, the gradient is built as graph ops: starting from ``ys`` (seeded with
``grad_ys``, ones by default), every op on a path between ``xs`` and ``ys`` gets
its registered gradient function called, under the name scope
``gradients/<op name>_grad/``; several gradients reaching one tensor are summed
with ``AddN``. Gradient functions live in ``math_grad``, ``array_grad`` and
``nn_grad`` and are registered with ``@register_gradient("OpType")`` in the
table of ``gradient_registry``.

>>> import nbdist as nd
>>> x = nd.constant(3.0)
>>> (g,) = nd.gradients(x * x, [x])
>>> with nd.Session() as s:
...     float(s.run(g))
6.0
"""

from __future__ import annotations

import collections

import numpy as np

# The gradient modules fill the table when imported.
from nbdist.ops import array_grad, math_grad, nn_grad  # noqa: F401
from nbdist.ops import (  # noqa: F401
    elementary_math_grad,
    segment_grad,
    special_math_grad,
)
from nbdist.ops import image_grad  # noqa: F401
from nbdist.framework.gradient_registry import (
    NotDifferentiable,
    RegisterGradient,
    get_gradient_function,
    no_gradient,
    register_gradient,
)
from nbdist.ops.indexed_slices import IndexedSlices, aggregate_indexed_slices
from nbdist.ops.indexed_slices import gate as gate_slices
from nbdist.ops.indexed_slices import to_dense as slices_to_dense
from nbdist.framework.ops import Operation, Tensor, _graph_of, convert_to_tensor

# Ops whose gradient passes an IndexedSlices through as it is; any other op
# gets the slices as a dense tensor.
_SLICES_PASS_THROUGH = frozenset({"Identity", "PlaceholderWithDefault"})


# -- the graph walk --------------------------------------------------------------------
def _as_list(v):
    if v is None:
        return []
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _to_tensor(x, as_ref=False) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if hasattr(x, "_ref") and as_ref:
        return x._ref()
    if isinstance(x, Operation):
        raise TypeError(f"Expected a Tensor, got the Operation {x.name}")
    return convert_to_tensor(x)


def _is_differentiable(t: Tensor) -> bool:
    return t.dtype.base_dtype.is_floating


def _consumers_map(graph) -> dict:
    """id(op) -> ops that take one of its outputs as a (data) input."""
    out = collections.defaultdict(list)
    for op in graph._ops_list:
        seen = set()
        for t in op._inputs:
            key = id(t.op)
            if key not in seen:
                seen.add(key)
                out[key].append(op)
    return out


def _between_ops(to_ops, from_ops, consumers):
    """The ops on a path from one of ``from_ops`` to one of ``to_ops``."""
    reached = {id(op) for op in from_ops}
    stack = list(from_ops)
    while stack:
        op = stack.pop()
        for c in consumers.get(id(op), ()):
            if id(c) not in reached:
                reached.add(id(c))
                stack.append(c)
    between = {}
    stack = [op for op in to_ops if id(op) in reached]
    for op in stack:
        between[id(op)] = op
    while stack:
        op = stack.pop()
        for t in op._inputs:
            inp = t.op
            if id(inp) in reached and id(inp) not in between:
                between[id(inp)] = inp
                stack.append(inp)
    return reached, between


def _aggregate(grads: list):
    """One gradient from several; None when there is none."""
    grads = [g for g in grads if g is not None]
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    if any(isinstance(g, IndexedSlices) for g in grads):
        # As TF: slices reaching one tensor are concatenated, not densified.
        return aggregate_indexed_slices(grads)
    from nbdist.ops.math_ops import add_n

    return add_n(grads)


def _zeros_like(t: Tensor):
    from nbdist.ops.array_ops import zeros_like

    return zeros_like(t)


def gradients(ys, xs, grad_ys=None, name="gradients",
              colocate_gradients_with_ops=False, gate_gradients=False,
              aggregation_method=None, stop_gradients=None,
              unconnected_gradients="none"):
    """The symbolic partial derivatives of ``sum(ys)`` with respect to each x.

    ``xs`` may hold tensors or Variables (differentiated through their ref);
    an x that no y depends on gets None (or zeros with
    ``unconnected_gradients="zero"``). ``grad_ys`` weight each y (default ones).
    Gradients do not flow through ``stop_gradients`` nor ``StopGradient`` ops.
    An op on the path without a registered gradient raises TypeError.
    """
    ys_list = [_to_tensor(y) for y in _as_list(ys)]
    xs_list = [_to_tensor(x, as_ref=True) for x in _as_list(xs)]
    if not ys_list:
        raise ValueError("ys must be a tensor or a non-empty list of tensors")
    gys = _as_list(grad_ys)
    if grad_ys is not None and len(gys) != len(ys_list):
        raise ValueError(f"Passed {len(gys)} grad_ys for {len(ys_list)} ys")
    if grad_ys is None:
        gys = [None] * len(ys_list)
    stops = [_to_tensor(t) for t in _as_list(stop_gradients)]
    unconnected = getattr(unconnected_gradients, "value", unconnected_gradients)
    if unconnected not in ("none", "zero"):
        raise ValueError(f"Unknown value for unconnected_gradients: "
                         f"{unconnected_gradients!r}")
    graph = _graph_of(ys_list + xs_list)
    if graph._capture_fn is not None:
        # Inside nd.function: outer variables are the function's captures.
        xs_list = [x if x.graph is graph else graph._capture_fn(x) for x in xs_list]
    for t in ys_list + xs_list + stops:
        if t.graph is not graph:
            raise ValueError(f"{t.name} is not from the same graph as the other "
                             "ys and xs")
    with graph.as_default(), graph.name_scope(name or "gradients"):
        grads = _build(graph, ys_list, xs_list, gys, stops,
                       colocate_gradients_with_ops, gate_gradients)
        out = []
        for x in xs_list:
            g = grads.get(id(x))
            if isinstance(g, list):
                g = _aggregate(g)
            if g is None and unconnected == "zero":
                g = _zeros_like(x)
            out.append(g)
    return out


def _default_grad_ys(graph, ys, gys):
    from nbdist.framework.constant_op import constant
    from nbdist.ops.array_ops import fill, shape

    out = []
    for i, (y, gy) in enumerate(zip(ys, gys)):
        dt = y.dtype.base_dtype
        if gy is None:
            if not dt.is_numeric:
                raise TypeError(f"Gradients of {dt.name} tensors are not supported "
                                f"(y = {y.name})")
            dims = (np.asarray(y.shape.as_list(), dtype=np.int32)
                    if y.shape.is_fully_defined() else shape(y))
            gy = fill(dims, constant(1, dtype=dt, name=f"grad_ys_{i}"))
        else:
            gy = convert_to_tensor(gy, dtype=dt)
            if not y.shape.is_compatible_with(gy.shape):
                raise ValueError(f"grad_ys[{i}] has shape {gy.shape}, which is not "
                                 f"compatible with y {y.name} of shape {y.shape}")
        out.append(gy)
    return out


def _build(graph, ys, xs, gys, stops, colocate, gate):
    to_ops = [y.op for y in ys]
    from_ops = [x.op for x in xs]
    consumers = _consumers_map(graph)
    _, between = _between_ops(to_ops, from_ops, consumers)
    pending = collections.Counter()
    for op in between.values():
        for t in op._inputs:
            if id(t.op) in between:
                pending[id(t.op)] += 1
    stop_ops = {id(t.op) for t in stops}
    for op in from_ops:
        # As TF: do not back-propagate past an x unless another x depends on it.
        if all(pending[id(t.op)] == 0 for t in op._inputs):
            stop_ops.add(id(op))

    # id(tensor) -> list of gradients, then (once its op is reached) the sum
    grads: dict[int, object] = {}
    for y, gy in zip(ys, _default_grad_ys(graph, ys, gys)):
        grads.setdefault(id(y), []).append(gy)

    queue = collections.deque()
    queued = set()
    for op in to_ops:
        if id(op) in between and pending[id(op)] == 0 and id(op) not in queued:
            queued.add(id(op))
            queue.append(op)

    while queue:
        op = queue.popleft()
        with graph.colocate_with(op if colocate else None):
            out_grads = []
            for t in op._outputs:
                g = grads.get(id(t))
                if isinstance(g, list):
                    g = _aggregate(g)
                    grads[id(t)] = g
                out_grads.append(g)
            has_grads = any(g is not None for g in out_grads)
            in_grads = [None] * len(op._inputs)
            if has_grads and id(op) not in stop_ops:
                fn = _grad_fn(op)
                if fn is not None:
                    with graph.name_scope(op.name + "_grad"):
                        for i, t in enumerate(op._outputs):
                            # As TF: a float output nothing depends on gets zeros.
                            if out_grads[i] is None and _is_differentiable(t):
                                out_grads[i] = _zeros_like(t)
                            elif (isinstance(out_grads[i], IndexedSlices)
                                  and op.type not in _SLICES_PASS_THROUGH):
                                out_grads[i] = slices_to_dense(out_grads[i])
                        in_grads = _call(fn, op, out_grads)
                        # Gradients no x depends on are dropped before gating, so
                        # the step never computes them (TF's GATE_OP would).
                        in_grads = [g if id(t.op) in between else None
                                    for t, g in zip(op._inputs, in_grads)]
                        if gate and sum(g is not None for g in in_grads) > 1:
                            in_grads = gate_slices(in_grads)
            for t, g in zip(op._inputs, in_grads):
                if g is None:
                    continue
                if isinstance(g, Tensor) and t.shape.rank is not None:
                    try:
                        g.set_shape(t.shape)
                    except ValueError:
                        raise ValueError(
                            f"Gradient of {op.name} (op {op.type}) for input "
                            f"{t.name} has shape {g.shape}, incompatible with "
                            f"{t.shape}") from None
                grads.setdefault(id(t), []).append(g)
        for t in op._inputs:
            key = id(t.op)
            if key not in between:
                continue
            pending[key] -= 1
            if pending[key] == 0 and key not in queued:
                queued.add(key)
                queue.append(t.op)
    return grads


def _grad_fn(op):
    try:
        return get_gradient_function(op)
    except LookupError:
        raise TypeError(f"No gradient defined for operation '{op.name}' (op type: "
                        f"{op.type})") from None


def _call(fn, op, out_grads):
    in_grads = fn(op, *out_grads)
    if isinstance(in_grads, Tensor) or in_grads is None:
        in_grads = [in_grads]
    in_grads = list(in_grads)
    if len(in_grads) != len(op._inputs):
        raise ValueError(f"Num gradients {len(in_grads)} generated for op "
                         f"{op.name} (type {op.type}) do not match num inputs "
                         f"{len(op._inputs)}")
    for i, (t, g) in enumerate(zip(op._inputs, in_grads)):
        if g is not None and not isinstance(g, (Tensor, IndexedSlices)):
            in_grads[i] = convert_to_tensor(g, dtype=t.dtype.base_dtype)
    return in_grads


def hessians(ys, xs, name="hessians", colocate_gradients_with_ops=False,
             gate_gradients=False, aggregation_method=None):
    """Second derivatives of ``sum(ys)`` for each x (flattened, as TF)."""
    from nbdist.ops import array_ops

    xs_list = [_to_tensor(x, as_ref=True) for x in _as_list(xs)]
    out = []
    with _graph_of(xs_list).name_scope(name):
        for x, g in zip(xs_list, gradients(ys, xs_list)):
            if g is None:
                out.append(None)
                continue
            n = x.shape.num_elements()
            if n is None:
                raise ValueError(f"hessians needs {x.name} to have a fully defined "
                                 "shape")
            flat = array_ops.reshape(g, [-1])
            rows = []
            for i in range(n):
                gi = gradients(array_ops.gather(flat, i), x)[0]
                rows.append(gi if gi is not None else _zeros_like(x))
            shape = x.shape.as_list()
            out.append(array_ops.reshape(array_ops.stack(rows),
                                              shape + shape))
    return out


__all__ = ["gradients", "hessians", "RegisterGradient", "register_gradient",
           "NotDifferentiable", "no_gradient", "get_gradient_function"]
