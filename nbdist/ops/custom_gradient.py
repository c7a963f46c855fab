"""``nd.custom_gradient``: a function that says how to differentiate itself
(TF1's graph-mode ``tf.custom_gradient``).

The decorated function returns ``(y, grad_fn)``. Its results pass through one
``IdentityN`` op together with its inputs and the variables it reads; that op
carries a gradient override (``_gradient_op_type``) naming a gradient that
calls ``grad_fn`` instead of differentiating the function's ops. So
``nd.gradients`` of anything built on ``y`` asks ``grad_fn(dy)`` for ``dx``
(and, for the variables the function reads, ``grad_fn(dy, variables=...)``
returns ``(dx, dvariables)``).

>>> import nbdist as nd
>>> @nd.custom_gradient
... def clipped_identity(x):
...     def grad(dy):
...         return nd.clip_by_value(dy, -1.0, 1.0)
...     return nd.identity(x), grad
>>> x = nd.constant(2.0)
>>> (g,) = nd.gradients(clipped_identity(x) * 5.0, [x])
>>> with nd.Session() as s:
...     float(s.run(g))
1.0
"""

from __future__ import annotations

import functools
import inspect
import itertools

from nbdist.framework.gradient_registry import RegisterGradient
from nbdist.framework.nest import flatten, pack_sequence_as
from nbdist.framework.ops import GraphKeys, Tensor, _graph_of, convert_to_tensor

_ids = itertools.count(1)


def custom_gradient(f=None):
    """Decorator: ``f(*xs)`` returns ``(y, grad_fn)`` with ``grad_fn(*dys)``
    returning the gradients of ``xs`` (one per x, None for no gradient). A
    function reading variables gets ``grad_fn(*dys, variables=[...])``, which
    returns ``(grads of xs, grads of the variables)``."""
    if f is None:
        return custom_gradient

    @functools.wraps(f)
    def decorated(*args, **kwargs):
        if kwargs:
            raise ValueError("The custom_gradient decorator currently supports "
                             "keywords arguments only when eager execution is "
                             "enabled.")
        return _call(f, args)

    return decorated


def _variables_read(results, inputs, graph):
    """The variables whose values ``results`` depend on without going
    through ``inputs``, sorted by name (as TF)."""
    stop = {id(t.op) for t in inputs}
    seen, stack, var_ops = set(), [t.op for t in results], {}
    while stack:
        op = stack.pop()
        if id(op) in seen or id(op) in stop:
            continue
        seen.add(id(op))
        if op.type == "VariableV2":
            var_ops[id(op)] = op
            continue
        stack.extend(t.op for t in op._inputs)
    found = {}
    for key in (GraphKeys.GLOBAL_VARIABLES, GraphKeys.LOCAL_VARIABLES):
        for v in graph.get_collection(key):
            op = getattr(v, "op", None)
            if op is not None and id(op) in var_ops:
                found[v.name] = v
    return [found[k] for k in sorted(found)]


def _takes_variables(fn) -> bool:
    try:
        spec = inspect.getfullargspec(fn)
    except TypeError:
        return False
    return ("variables" in spec.args or "variables" in spec.kwonlyargs
            or spec.varkw is not None)


def _call(f, args):
    xs = [convert_to_tensor(a) for a in args]
    res, grad_fn = f(*xs)
    if not callable(grad_fn):
        raise TypeError("custom_gradient: the function must return (result, "
                        "grad_fn) with a callable grad_fn")
    flat = [convert_to_tensor(t) for t in flatten(res)]
    g = _graph_of(flat + xs)
    variables = _variables_read(flat, xs, g)
    takes_variables = _takes_variables(grad_fn)
    if variables and not takes_variables:
        raise TypeError("@custom_gradient grad_fn must accept keyword argument "
                        f"'variables', since function uses variables: "
                        f"{[v.name for v in variables]}")
    n_res, n_x = len(flat), len(xs)
    name = f"CustomGradient-{next(_ids)}"

    @RegisterGradient(name)
    def _grad(op, *out_grads):
        dys = list(out_grads[:n_res])
        if variables:
            got = grad_fn(*dys, variables=variables)
            if not isinstance(got, (list, tuple)) or len(got) != 2:
                raise TypeError("custom_gradient: a grad_fn taking variables must "
                                "return (input grads, variable grads)")
            dxs, dvars = got
            dvars = list(dvars) if isinstance(dvars, (list, tuple)) else [dvars]
        else:
            dxs, dvars = grad_fn(*dys), []
        dxs = list(dxs) if isinstance(dxs, (list, tuple)) else [dxs]
        if len(dxs) != n_x:
            raise ValueError(f"custom_gradient function expected to return {n_x} "
                             f"gradients but returned {len(dxs)} instead.")
        if len(dvars) != len(variables):
            raise ValueError(f"custom_gradient: grad_fn returned {len(dvars)} "
                             f"variable gradients for {len(variables)} variables")
        return [None] * n_res + dxs + dvars

    from nbdist.ops.control_flow_ops import identity_n

    with g.as_default():
        ins = flat + xs + [v.value() for v in variables]
        outs = identity_n(ins)
        outs[0].op._attrs["_gradient_op_type"] = name
    return pack_sequence_as(res, outs[:n_res]) if not isinstance(res, Tensor) \
        else outs[0]


__all__ = ["custom_gradient"]
