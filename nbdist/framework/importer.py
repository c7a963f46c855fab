"""``GraphDef`` serialisation: ``import_graph_def``, the static checks of a
``GraphDef`` (attrs, inputs, topological order, shapes), and, re-exported from
``node_def``, the writing side (ops -> ``NodeDef`` protos)."""

from __future__ import annotations

from nbdist.framework import op_def_registry
from nbdist.framework.node_def import (  # noqa: F401  (re-exported for importers)
    PRODUCER_VERSION,
    attr_value_to_python,
    graph_to_graph_def,
    operation_to_node_def,
    python_to_attr_value,
)
from nbdist.framework.ops import (
    Operation,
    Tensor,
    _check_arity,
    get_default_graph,
    infer_outputs,
)
from nbdist.proto import graph_pb2


# -- protos -> ops -------------------------------------------------------------------
def node_def_attrs(nd, odef, where: str) -> dict:
    """A NodeDef's attrs as Python values, checked against its OpDef."""
    attrs = {}
    for k, av in nd.attr.items():
        if k == "_output_shapes":
            continue
        kind = odef.attrs[k][0] if k in odef.attrs else None
        if kind is None and not k.startswith("_"):
            raise ValueError(f"{where}: unknown attr '{k}' for op '{nd.op}'")
        attrs[k] = attr_value_to_python(av, kind, f"{where}, attr '{k}'")
    return op_def_registry.fill_and_check_attrs(odef, attrs, where)


def parse_input(name: str):
    """'^x' -> ('x', -1); 'x:2' -> ('x', 2); 'x' -> ('x', 0)."""
    if name.startswith("^"):
        return name[1:], -1
    op_name, sep, idx = name.rpartition(":")
    if sep and idx.isdigit():
        return op_name, int(idx)
    return name, 0


def topological_order(nodes, where="GraphDef") -> list:
    """Nodes sorted so every input precedes its consumer (stable); raises on
    dangling inputs and cycles, naming the node."""
    by_name = {}
    for n in nodes:
        if not n.name:
            raise ValueError(f"{where}: a node has an empty name")
        if n.name in by_name:
            raise ValueError(f"{where}: duplicate node name '{n.name}'")
        by_name[n.name] = n
    indeg = {}
    consumers: dict[str, list] = {}
    for n in nodes:
        deps = set()
        for inp in n.input:
            src, _ = parse_input(inp)
            if src not in by_name:
                raise ValueError(f"Node '{n.name}': input '{inp}' refers to a node "
                                 "that does not exist in the graph")
            deps.add(src)
        indeg[n.name] = len(deps)
        for d in deps:
            consumers.setdefault(d, []).append(n.name)
    order_index = {n.name: i for i, n in enumerate(nodes)}
    import heapq

    ready = [order_index[n.name] for n in nodes if indeg[n.name] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        n = nodes[heapq.heappop(ready)]
        out.append(n)
        for c in consumers.get(n.name, ()):
            indeg[c] -= 1
            if indeg[c] == 0:
                heapq.heappush(ready, order_index[c])
    if len(out) != len(nodes):
        stuck = sorted(k for k, v in indeg.items() if v > 0)[:5]
        raise ValueError(f"{where} has a cycle through node(s) {stuck}")
    return out


def import_graph_def(graph_def, input_map=None, return_elements=None, name=None,
                     op_dict=None, producer_op_list=None):
    """Imports ``graph_def`` into the default graph under the prefix ``name``
    ("import" by default; "" for none). Every node is checked (known op, attrs,
    inputs) and a bad one raises ValueError naming it.
    """
    graph = get_default_graph()
    if not isinstance(graph_def, graph_pb2.GraphDef):
        raise TypeError("graph_def must be a GraphDef proto")
    prefix = "import" if name is None else name
    input_map = dict(input_map or {})
    for k, v in input_map.items():
        if not isinstance(v, Tensor):
            raise TypeError(f"input_map values must be Tensors, got {v!r} for {k}")
    nodes = topological_order(list(graph_def.node))
    with graph.name_scope(prefix) as scope:
        scope = scope or ""
    imported: dict[str, Operation] = {}
    for nd in nodes:
        where = f"Node '{nd.name}' (op '{nd.op}')"
        odef = op_def_registry.get_op_def(nd.op)
        if odef is None:
            raise ValueError(f"{where}: unknown op '{nd.op}' — it is not registered "
                             "in nbdist")
        attrs = node_def_attrs(nd, odef, where)
        if "_class" in attrs:
            attrs["_class"] = [
                (b"loc:@" + (scope + c[5:].decode()).encode()) if c.startswith(b"loc:@")
                else c for c in (x if isinstance(x, bytes) else x.encode()
                                 for x in attrs["_class"])]
        inputs, ctrl = [], []
        for inp in nd.input:
            src, idx = parse_input(inp)
            if idx < 0:
                ctrl.append(imported[src])
                continue
            key = f"{src}:{idx}"
            if key in input_map:
                inputs.append(input_map[key])
                continue
            if src == inp and src in input_map:
                inputs.append(input_map[src])
                continue
            src_op = imported[src]
            if idx >= len(src_op._outputs):
                raise ValueError(f"{where}: input '{inp}' asks for output {idx} but "
                                 f"'{src}' has {len(src_op._outputs)} outputs")
            inputs.append(src_op._outputs[idx])
        _check_arity(odef, len(inputs), where)
        specs = infer_outputs(odef, scope + nd.name, inputs, attrs)
        op = Operation(graph, nd.op, scope + nd.name, inputs, attrs, specs, ctrl,
                       nd.device)
        if op.name in graph._ops_by_name:
            raise ValueError(f"{where}: a node named '{op.name}' already exists")
        graph._add_op_from_import(op)
        imported[nd.name] = op
    if return_elements is None:
        return None
    out = []
    for r in return_elements:
        if ":" in r:
            src, idx = parse_input(r)
            out.append(imported[src]._outputs[idx])
        else:
            out.append(imported[r])
    return out


def infer_specs(nodes, specs: dict | None = None, consts: dict | None = None):
    """Output (dtype, shape) of every node of ``nodes`` (topologically ordered),
    added to ``specs`` (tensor name -> spec). Raises ValueError naming a bad node.
    """
    specs = {} if specs is None else specs
    consts = {} if consts is None else consts
    for nd in nodes:
        where = f"Node '{nd.name}' (op '{nd.op}')"
        odef = op_def_registry.get_op_def(nd.op)
        if odef is None:
            raise ValueError(f"{where}: unknown op '{nd.op}' — it is not registered "
                             "in nbdist")
        attrs = node_def_attrs(nd, odef, where)
        in_dt, in_sh, in_c = [], [], []
        for inp in nd.input:
            src, idx = parse_input(inp)
            if idx < 0:
                continue
            key = f"{src}:{idx}"
            if key not in specs:
                raise ValueError(f"{where}: input '{inp}' does not exist")
            dt, sh = specs[key]
            if dt.is_ref_dtype and len(in_dt) not in odef.ref_inputs:
                dt = dt.base_dtype
            in_dt.append(dt)
            in_sh.append(sh)
            in_c.append(consts.get(key))
        n_in = len(in_dt)
        if (odef.num_inputs is not None and n_in != odef.num_inputs) or (
                n_in < odef.min_inputs):
            raise ValueError(f"{where}: wrong number of inputs ({n_in})")
        ctx = op_def_registry.InferContext(nd.op, nd.name, in_dt, in_sh, attrs,
                                  lambda i, _c=in_c: _c[i])
        try:
            outs = odef.infer(ctx)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{where}: {e}") from None
        for i, (dt, sh) in enumerate(outs):
            specs[f"{nd.name}:{i}"] = (dt, sh)
        if nd.op == "Const":
            consts[f"{nd.name}:0"] = attrs["value"]
    return specs
