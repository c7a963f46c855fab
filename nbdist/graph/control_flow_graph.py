"""Branches and loop bodies as graph functions, and the ops that call them:
``If``, ``While`` and ``_WhileGrad``.

A branch is traced in the graph being built (so every wrapper picks the
right graph, as in TF1's control-flow contexts): its arguments are
placeholders, the ops it adds are then cut out of the graph and become the
body of a ``FunctionDef``. An outside tensor a branch uses is captured: it
becomes an argument of the function and an input of the calling op, so the
master moves it across tasks like any other edge (a variable on a parameter
server is read once, before the loop). An outside variable whose reference
the branch needs (``assign_add``, a read under a control dependency) is
re-bound in the body by name, device, container and shared name, so the body
reads and updates the very variable each iteration; that variable must live
on the task that runs the loop. A plain ``read_value()`` of an outside
variable is left outside, so it may live on any task. A variable the branch
creates stays in the outer graph with its initializer (TF1 builds variables
outside control flow too) and the branch uses it like an outside variable.

The functions travel as serialized ``FunctionDef``s in private attrs
(``_cond_fdef``, ``_body_fdef``...), which survive the master's partitioning.
"""

from __future__ import annotations

import collections
import itertools

from nbdist.graph import dtypes
from nbdist.graph.graph_def import import_graph_def
from nbdist.graph.node_def import operation_to_node_def
from nbdist.graph.op_def import REQUIRED, register_op
from nbdist.graph.ops import Graph, Operation
from nbdist.graph.shapes import TensorShape
from nbdist.proto import function_pb2, graph_pb2

_fn_ids = itertools.count(1)


# -- nested structures (lists, tuples, namedtuples, dicts by sorted key) -------------
def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def is_nested(x) -> bool:
    return isinstance(x, (list, tuple, dict))


def flatten(structure) -> list:
    if isinstance(structure, dict):
        return [v for k in sorted(structure) for v in flatten(structure[k])]
    if isinstance(structure, (list, tuple)):
        return [v for item in structure for v in flatten(item)]
    return [structure]


def pack_sequence_as(structure, flat):
    """``flat`` (a list) in the shape of ``structure``."""
    it = iter(flat)

    def build(s):
        if isinstance(s, dict):
            built = {k: build(s[k]) for k in sorted(s)}
            return type(s)((k, built[k]) for k in s)
        if _is_namedtuple(s):
            return type(s)(*[build(x) for x in s])
        if isinstance(s, (list, tuple)):
            return type(s)(build(x) for x in s)
        return next(it)

    return build(structure)


def assert_same_structure(a, b, what: str):
    def sig(s):
        if isinstance(s, dict):
            return ("dict", tuple((k, sig(s[k])) for k in sorted(s)))
        if isinstance(s, (list, tuple)):
            return ("seq", tuple(sig(x) for x in s))
        return "."

    if sig(a) != sig(b):
        raise ValueError(f"{what}: the two structures don't have the same nested "
                         f"structure: {a!r} and {b!r}")


def common_shape(a: TensorShape, b: TensorShape) -> TensorShape:
    """The most specific shape compatible with both."""
    if a.rank is None or b.rank is None or a.rank != b.rank:
        return TensorShape(None)
    return TensorShape([x if x == y else None for x, y in zip(a.as_list(),
                                                           b.as_list())])


# -- tracing a branch ------------------------------------------------------------
class Trace:
    """One traced branch: argument placeholders, output tensors, the ops of its
    body, the outside tensors it reads (``captures``), the outside variables it
    re-binds by name and the outside ops it waits for."""

    def __init__(self, args, outputs, body_ops, captures, rebinds, control):
        self.args = args
        self.outputs = outputs
        self.body_ops = body_ops
        self.captures = captures
        self.rebinds = rebinds
        self.control = control


def trace(graph: Graph, arg_specs, build, what: str) -> Trace:
    """Calls ``build(args) -> [Tensor]`` with placeholders of ``arg_specs``
    ((dtype, shape) pairs) and cuts the ops it added out of ``graph``."""
    from nbdist.graph.array_ops import placeholder

    start = len(graph._ops_list)
    with graph.control_dependencies(None):
        args = [placeholder(dt, sh, name="arg") for dt, sh in arg_specs]
        outputs = build(args)
    new = graph._ops_list[start:]
    lifted = _variables_to_lift(new, args, what)
    new = [op for op in new if id(op) not in lifted]
    new_ids = {id(op) for op in new}
    ref_users = collections.defaultdict(list)
    for op in new:
        for t in op._inputs:
            if id(t.op) not in new_ids and t.dtype.is_ref_dtype:
                ref_users[t].append(op)
    hoisted = set()
    for users in ref_users.values():
        # Plain reads stay outside: the variable may then live on any task.
        if all(u.type == "Identity" and not u._control_inputs for u in users):
            hoisted.update(id(u) for u in users)
    body_ops = [op for op in new if id(op) not in hoisted]
    body_ids = {id(op) for op in body_ops}
    captures, seen, rebinds, control = [], set(), {}, []

    def capture(t):
        if t.dtype.is_ref_dtype:
            if t.op.type != "VariableV2":
                raise ValueError(f"{what} uses the reference {t.name} of op "
                                 f"'{t.op.name}' ({t.op.type}) from outside; only "
                                 "variables can be used by reference")
            rebinds[t.op.name] = t.op
        elif id(t) not in seen:
            seen.add(id(t))
            captures.append(t)

    for op in body_ops:
        for t in op._inputs:
            if id(t.op) not in body_ids:
                capture(t)
        for c in op._control_inputs:
            if id(c) not in body_ids and c not in control:
                control.append(c)
    for t in outputs:
        if id(t.op) not in body_ids:
            if t.dtype.is_ref_dtype:
                raise ValueError(f"{what} returns the reference {t.name}; return "
                                 "its value instead")
            capture(t)
    remove_ops(graph, body_ops)
    return Trace(args, outputs, body_ops, captures, rebinds, control)


def _variables_to_lift(new_ops, args, what: str) -> set:
    """The ids of the variables a branch creates, with their initializers and
    initial values: as TF1 builds them outside control flow, they stay in the
    outer graph (``global_variables_initializer`` sets them) and the branch
    uses them as it uses any outside variable."""
    variables = [op for op in new_ops if op.type == "VariableV2"]
    if not variables:
        return set()
    new_ids = {id(op) for op in new_ops}
    arg_ids = {id(a.op) for a in args}
    lifted = {id(op) for op in variables}
    stack = []
    for var in variables:
        init = next((op for op in new_ops if op.type == "Assign"
                     and op.name == var.name + "/Assign"
                     and op._inputs[0].op is var), None)
        if init is not None:
            stack.append(init)
    while stack:
        op = stack.pop()
        if id(op) in lifted:
            continue
        if id(op) in arg_ids:
            raise ValueError(f"{what} creates a variable whose initial value "
                             "depends on a loop variable; use a value computed "
                             "outside or an initializer (a lambda)")
        lifted.add(id(op))
        stack.extend(t.op for t in op._inputs if id(t.op) in new_ids)
        stack.extend(c for c in op._control_inputs if id(c) in new_ids)
    return lifted


def remove_ops(graph: Graph, ops):
    ids = {id(op) for op in ops}
    graph._ops_list[:] = [op for op in graph._ops_list if id(op) not in ids]
    for op in ops:
        graph._ops_by_name.pop(op.name, None)

    def gone(item):
        op = item if isinstance(item, Operation) else getattr(item, "op", None)
        return isinstance(op, Operation) and id(op) in ids

    for items in graph._collections.values():
        items[:] = [i for i in items if not gone(i)]


def union_captures(graph: Graph, traces):
    """The outside tensors of all ``traces`` and a fresh argument name for each."""
    caps, seen = [], set()
    for tr in traces:
        for t in tr.captures:
            if id(t) not in seen:
                seen.add(id(t))
                caps.append(t)
    names = [graph.unique_name("capture") for _ in caps]
    return caps, names


def function_name(base: str) -> str:
    return f"{base.replace('/', '_')}_{next(_fn_ids)}"


def to_function_def(tr: Trace, name: str, captures=(), cap_names=(),
                    extra_args=()) -> function_pb2.FunctionDef:
    """``tr`` as a FunctionDef whose arguments are its own, then ``captures``
    (named ``cap_names``), then ``extra_args`` (placeholders in the body)."""
    fd = function_pb2.FunctionDef(name=name)
    rename = {}
    for t, n in zip(captures, cap_names):
        rename[t._as_node_def_input()] = n
    arg_ops = {id(a.op) for a in list(tr.args) + list(extra_args)}
    for a in tr.args:
        fd.input_arg.append(a.op.name)
        fd.input_type.append(a.dtype.base_dtype.as_datatype_enum)
    for t, n in zip(captures, cap_names):
        fd.input_arg.append(n)
        fd.input_type.append(t.dtype.base_dtype.as_datatype_enum)
    for a in extra_args:
        fd.input_arg.append(a.op.name)
        fd.input_type.append(a.dtype.base_dtype.as_datatype_enum)
    for var_op in tr.rebinds.values():
        fd.node_def.add().CopyFrom(operation_to_node_def(var_op))
    body_ids = {id(op) for op in tr.body_ops}
    for op in tr.body_ops:
        if id(op) in arg_ops:
            continue
        nd = operation_to_node_def(op)
        inputs = [rename.get(s, s) for s in nd.input if not s.startswith("^")]
        inputs += ["^" + c.name for c in op._control_inputs if id(c) in body_ids]
        del nd.input[:]
        nd.input.extend(inputs)
        fd.node_def.add().CopyFrom(nd)
    for t in tr.outputs:
        s = t._as_node_def_input()
        fd.output.append(rename.get(s, s))
        fd.output_type.append(t.dtype.base_dtype.as_datatype_enum)
    return fd


def function_graph(fdef, arg_shapes):
    """A fresh Graph holding ``fdef``'s body: (graph, arg tensors, outputs)."""
    g = Graph()
    gd = graph_pb2.GraphDef()
    for arg, t, shape in zip(fdef.input_arg, fdef.input_type, arg_shapes):
        n = gd.node.add(name=arg, op="Placeholder")
        n.attr["dtype"].type = t
        if shape.rank is None:
            n.attr["shape"].shape.unknown_rank = True
        else:
            for d in shape.as_list():
                n.attr["shape"].shape.dim.add(size=-1 if d is None else d)
    gd.node.extend(fdef.node_def)
    with g.as_default():
        import_graph_def(gd, name="")
    args = [g.get_operation_by_name(a).outputs[0] for a in fdef.input_arg]
    outs = []
    for s in fdef.output:
        op_name, _, idx = s.partition(":")
        outs.append(g.get_operation_by_name(op_name).outputs[int(idx or 0)])
    return g, args, outs


def needed_trace(graph: Graph, args, outputs) -> Trace:
    """A Trace of a standalone graph: the ops ``outputs`` need, no captures."""
    needed, stack = set(), [t.op for t in outputs]
    while stack:
        op = stack.pop()
        if id(op) not in needed:
            needed.add(id(op))
            stack.extend(i.op for i in op._inputs)
            stack.extend(op._control_inputs)
    body = [op for op in graph._ops_list if id(op) in needed]
    return Trace(args, outputs, body, [], {}, [])


# -- the ops ---------------------------------------------------------------------
def _outputs_from_attrs(types_attr):
    def infer(c):
        types = c.attr(types_attr)
        shapes = list(c.attr("output_shapes") or [])
        if shapes and len(shapes) != len(types):
            raise ValueError("output_shapes and the output types differ in length")
        return [(t, shapes[i] if shapes else TensorShape(None))
                for i, t in enumerate(types)]

    return infer


def _if_infer(c):
    if c.dtype(0) is not dtypes.bool:
        raise TypeError(f"pred must be a bool tensor, got {c.dtype(0).name}")
    if c.shape(0).rank not in (None, 0):
        raise ValueError(f"pred must be a scalar, got shape {c.shape(0)}")
    return _outputs_from_attrs("Tout")(c)


register_op("If", _if_infer,
            attrs={"then_branch": ("func", REQUIRED), "else_branch": ("func", REQUIRED),
                   "Tout": ("list(type)", []), "output_shapes": ("list(shape)", [])},
            min_inputs=1, stateful=True)
register_op("While", _outputs_from_attrs("T"),
            attrs={"cond": ("func", REQUIRED), "body": ("func", REQUIRED),
                   "T": ("list(type)", []), "output_shapes": ("list(shape)", []),
                   "parallel_iterations": ("int", 10), "back_prop": ("bool", True)},
            min_inputs=1, stateful=True)
# Gradient of a While: its inputs (loop vars, captures) and the gradients of its
# float outputs in; the gradients of its float loop vars and captures out.
register_op("_WhileGrad", _outputs_from_attrs("Tout"),
            attrs={"cond": ("func", REQUIRED), "body": ("func", REQUIRED),
                   "grad_body": ("func", REQUIRED), "num_loop_vars": ("int", REQUIRED),
                   "float_x": ("list(int)", []), "float_c": ("list(int)", []),
                   "Tout": ("list(type)", []), "output_shapes": ("list(shape)", [])},
            min_inputs=1, stateful=True)

__all__ = [
    "Trace",
    "assert_same_structure",
    "common_shape",
    "flatten",
    "function_graph",
    "function_name",
    "is_nested",
    "needed_trace",
    "pack_sequence_as",
    "to_function_def",
    "trace",
    "union_captures",
]
