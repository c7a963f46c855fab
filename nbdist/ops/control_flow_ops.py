"""``no_op``, ``group``, ``tuple``, ``with_dependencies`` and ``identity_n``.
(``cond`` and ``while_loop`` live in ``control_flow_v2``.)"""

from __future__ import annotations

from nbdist.framework import nest
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import Operation, Tensor, _graph_of, get_default_graph

register_op("NoOp", lambda c: [], num_inputs=0)
register_op("IdentityN", lambda c: [(c.dtype(i), c.shape(i))
                                    for i in range(len(c.input_dtypes))],
            attrs={"T": ("list(type)", [])}, min_inputs=1)


def no_op(name=None):
    """An op that does nothing; useful as a control-dependency anchor."""
    return get_default_graph().create_op("NoOp", [], name=name or "NoOp")


def _as_op(x):
    if hasattr(x, "_as_graph_element") and not isinstance(x, (Tensor, Operation)):
        x = x._as_graph_element()
    if isinstance(x, Tensor):
        return x.op
    if isinstance(x, Operation):
        return x
    raise TypeError(f"Expected an Operation or Tensor, got {x!r}")


def _group_on(g, device: str, deps, name=None):
    with g.control_dependencies(deps):
        if not device:
            return no_op(name=name)
        with g.device(device):
            return no_op(name=name)


def group(*inputs, name=None):
    """An op that runs after all of ``inputs``.

    As TF: when the inputs share one device the NoOp is placed there; otherwise
    each device gets a NoOp waiting for its inputs, and the returned NoOp waits
    for those (so one control edge crosses per device).

    >>> import nbdist as nd
    >>> v = nd.Variable(0.0)
    >>> both = nd.group(v.assign_add(1.0), v.assign_add(2.0))
    >>> with nd.Session() as s:
    ...     s.run(v.initializer); s.run(both); float(s.run(v))
    3.0
    """
    ops = [_as_op(x) for x in nest.flatten(inputs) if x is not None]
    g = _graph_of(ops)
    with g.as_default(), g.name_scope(name or "group_deps") as scope:
        by_device: dict[str, list] = {}
        for op in ops:
            by_device.setdefault(op.device or "", []).append(op)
        if len(by_device) <= 1:
            device, deps = next(iter(by_device.items()), ("", []))
            return _group_on(g, device, deps, name=scope)
        per_device = [_group_on(g, d, by_device[d]) for d in sorted(by_device)]
        with g.control_dependencies(per_device):
            return no_op(name=scope)


def tuple(tensors, name=None, control_inputs=None):  # noqa: A001 - TF's name
    """Tensors with the same values that are available only after all are computed."""
    from nbdist.framework.constant_op import identity

    ts = [t for t in tensors if t is not None]
    deps = [_as_op(t) for t in ts] + [_as_op(c) for c in control_inputs or ()]
    g = _graph_of(ts)
    gate = group(*deps, name=(name or "tuple") + "_gate" if name else None)
    out = []
    with g.control_dependencies([gate]):
        for t in tensors:
            out.append(None if t is None else identity(t))
    return out


def with_dependencies(dependencies, output_tensor, name=None):
    """``output_tensor``'s value, produced only after ``dependencies`` ran."""
    from nbdist.framework.constant_op import identity

    g = _graph_of([output_tensor] + list(dependencies))
    with g.as_default(), g.name_scope(name or "control_dependency") as scope:
        with g.colocate_with(output_tensor):
            with g.control_dependencies(dependencies):
                return identity(output_tensor, name=scope)


def identity_n(input, name=None):  # noqa: A002 - TF's name
    """Each tensor of the list ``input`` unchanged, by one ``IdentityN`` op."""
    from nbdist.framework.ops import convert_to_tensor

    ts = [convert_to_tensor(t) for t in input]
    if not ts:
        raise ValueError("identity_n: needs at least one tensor")
    g = _graph_of(ts)
    op = g.create_op("IdentityN", ts, {"T": [t.dtype.base_dtype for t in ts]},
                     name=name or "IdentityN")
    return list(op.outputs)
