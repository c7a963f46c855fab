"""A traced function's form (``Trace``) and its ``FunctionDef``: the one
emitter (``to_function_def``, TF's ``graph_to_function_def``) and importer
(``function_graph``, TF's ``function_def_to_graph``) that control flow's
branches and ``nd.function``'s functions both go through (the tracers are in
``func_graph``)."""

from __future__ import annotations

import itertools

from nbdist.framework.importer import import_graph_def
from nbdist.framework.node_def import operation_to_node_def
from nbdist.framework.ops import Graph
from nbdist.proto import function_pb2, graph_pb2

__all__ = ["Trace", "function_graph", "function_name", "needed_trace",
           "to_function_def"]

_fn_ids = itertools.count(1)


class Trace:
    """One traced function: argument placeholders, output tensors, the ops of
    its body, the outside tensors it reads (``captures``), the outside variables
    it re-binds by name and the outside ops it waits for."""

    def __init__(self, args, outputs, body_ops, captures, rebinds, control):
        self.args = args
        self.outputs = outputs
        self.body_ops = body_ops
        self.captures = captures
        self.rebinds = rebinds
        self.control = control


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


def function_graph(fdef, arg_shapes, graph: Graph | None = None):
    """``fdef``'s body in ``graph`` (default: a fresh Graph), its arguments as
    placeholders of ``arg_shapes``: (graph, arg tensors, outputs)."""
    g = Graph() if graph is None else graph
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


def needed_trace(graph: Graph, args, outputs, targets=()) -> Trace:
    """A Trace of a standalone graph: the ops ``outputs`` and the ops
    ``targets`` need, in graph order, no captures."""
    needed, stack = set(), [t.op for t in outputs] + list(targets)
    while stack:
        op = stack.pop()
        if id(op) not in needed:
            needed.add(id(op))
            stack.extend(i.op for i in op._inputs)
            stack.extend(op._control_inputs)
    body = [op for op in graph._ops_list if id(op) in needed]
    return Trace(args, outputs, body, [], {}, [])
