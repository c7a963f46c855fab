"""``nd.graph_util``: TF1's ``tf.graph_util`` — freezing a graph
(``convert_variables_to_constants``), trimming it (``extract_sub_graph``,
``remove_training_nodes``) and small helpers.

>>> import nbdist as nd
>>> g = nd.Graph()
>>> with g.as_default():
...     v = nd.Variable([1.0, 2.0], name="v")
...     y = nd.multiply(v, 3.0, name="y")
...     with nd.Session() as s:
...         s.run(v.initializer)
...         frozen = nd.graph_util.convert_variables_to_constants(
...             s, g.as_graph_def(), ["y"])
>>> sorted(n.op for n in frozen.node)
['Const', 'Const', 'Identity', 'Mul']
"""

from __future__ import annotations

import copy

from nbdist.framework import dtypes
from nbdist.framework.importer import import_graph_def
from nbdist.framework.tensor_util import make_tensor_proto
from nbdist.proto import graph_pb2

_VARIABLE_OPS = ("Variable", "VariableV2", "AutoReloadVariable", "VarHandleOp",
                 "_VarHandlesOp")


def _node_name(name: str) -> str:
    name = name[1:] if name.startswith("^") else name
    return name.split(":")[0]


def extract_sub_graph(graph_def, dest_nodes):
    """The part of ``graph_def`` that ``dest_nodes`` (node names) need: the
    nodes reachable backwards through data and control inputs, in their
    original order."""
    if not isinstance(graph_def, graph_pb2.GraphDef):
        raise TypeError("graph_def must be a graph_pb2.GraphDef proto.")
    if isinstance(dest_nodes, str):
        raise TypeError("dest_nodes must be a list.")
    by_name = {n.name: n for n in graph_def.node}
    for d in dest_nodes:
        if d not in by_name:
            raise AssertionError(f"{d} is not in graph")
    keep, stack = set(), list(dest_nodes)
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        stack.extend(_node_name(i) for i in by_name[name].input)
    out = graph_pb2.GraphDef()
    out.node.extend(copy.deepcopy(n) for n in graph_def.node if n.name in keep)
    out.library.CopyFrom(graph_def.library)
    out.versions.CopyFrom(graph_def.versions)
    return out


def convert_variables_to_constants(sess, input_graph_def, output_node_names,
                                   variable_names_whitelist=None,
                                   variable_names_blacklist=None):
    """A copy of ``input_graph_def`` cut down to ``output_node_names``, with
    every variable replaced by a ``Const`` holding its value in ``sess`` (and
    ``ReadVariableOp`` by ``Identity``): a frozen graph to serve or ship."""
    inference = extract_sub_graph(input_graph_def, output_node_names)
    names = [n.name for n in inference.node if n.op in _VARIABLE_OPS
             and (variable_names_whitelist is None
                  or n.name in variable_names_whitelist)
             and not (variable_names_blacklist
                      and n.name in variable_names_blacklist)]
    values = dict(zip(names, sess.run([f"{n}:0" for n in names]))) if names else {}
    out = graph_pb2.GraphDef()
    for node in inference.node:
        new = out.node.add()
        if node.name in values:
            dtype = node.attr["dtype"]
            new.op, new.name = "Const", node.name
            new.attr["dtype"].CopyFrom(dtype)
            new.attr["value"].tensor.CopyFrom(make_tensor_proto(
                values[node.name], dtype=dtypes.as_dtype(dtype.type)))
            if "_class" in node.attr:
                new.attr["_class"].CopyFrom(node.attr["_class"])
        elif node.op == "ReadVariableOp" and _node_name(node.input[0]) in values:
            new.op, new.name = "Identity", node.name
            new.input.extend(node.input)
            new.attr["T"].CopyFrom(node.attr["dtype"])
        else:
            new.CopyFrom(node)
    out.library.CopyFrom(inference.library)
    out.versions.CopyFrom(inference.versions)
    return out


def must_run_on_cpu(node, pin_variables_on_cpu=False):
    """Whether ``node`` (an ``Operation`` or ``NodeDef``) has to stay on the
    CPU: int32 and string constants, int32 ``DynamicStitch`` and ``Cast`` from
    int32 (TF keeps int32 in host memory), and variables when
    ``pin_variables_on_cpu``."""
    node_def = getattr(node, "node_def", node)
    op = node_def.op
    if pin_variables_on_cpu and op in _VARIABLE_OPS:
        return True
    int32, string = dtypes.int32.as_datatype_enum, dtypes.string.as_datatype_enum
    if op == "Const":
        return node_def.attr["dtype"].type in (int32, string)
    if op in ("DynamicStitch", "ParallelDynamicStitch"):
        return node_def.attr["T"].type == int32
    if op == "Cast":
        return node_def.attr["SrcT"].type == int32
    return False


def remove_training_nodes(input_graph, protected_nodes=None):
    """``input_graph`` without what only training needs: ``CheckNumerics``
    nodes and ``Identity`` nodes are spliced out (their consumers read the
    node's input), except the ``protected_nodes`` and identities that carry
    control inputs."""
    protected = set(protected_nodes or ())
    by_name = {n.name: n for n in input_graph.node}

    def removable(node):
        if node.name in protected:
            return False
        if node.op == "CheckNumerics":
            return True
        return node.op == "Identity" and not any(i.startswith("^")
                                                 for i in node.input)

    def resolve(inp):
        prefix = "^" if inp.startswith("^") else ""
        name = _node_name(inp)
        seen = 0
        while name in by_name and removable(by_name[name]) and seen < len(by_name):
            inp = by_name[name].input[0]
            name, seen = _node_name(inp), seen + 1
        return prefix + (name if prefix else inp)

    out = graph_pb2.GraphDef()
    for node in input_graph.node:
        if removable(node):
            continue
        new = out.node.add()
        new.CopyFrom(node)
        del new.input[:]
        new.input.extend(resolve(i) for i in node.input)
    out.library.CopyFrom(input_graph.library)
    out.versions.CopyFrom(input_graph.versions)
    return out


def tensor_shape_from_node_def_name(graph, input_name):
    """The static shape of tensor ``input_name`` (``name`` means ``name:0``)
    in ``graph``."""
    if ":" not in input_name:
        input_name += ":0"
    return graph.get_tensor_by_name(input_name).get_shape()


__all__ = ["convert_variables_to_constants", "extract_sub_graph", "import_graph_def",
           "must_run_on_cpu", "remove_training_nodes",
           "tensor_shape_from_node_def_name"]
