"""``FuncGraph``: the graph a traced ``nd.function`` builds, and the per-thread
tracing state that sends ops built in outer graphs into it (TF's
``func_graph.py``).

While a function is traced on a thread, ``tracing_graph()`` is its graph; an
outside tensor it uses is captured: a variable is re-bound by name and device,
a constant copied, a dataset op copied (``register_copyable_op``), a resource
handle re-bound by a registered re-binder (``register_rebinder``).
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from nbdist.graph import ops as _ops
from nbdist.graph.ops import Graph, Operation, Tensor, _static_value
from nbdist.proto import function_pb2

__all__ = ["CapturedVariable", "FuncGraph", "register_copyable_op",
           "register_rebinder", "trace_stack", "tracing_graph"]


# -- tracing state (per thread) ---------------------------------------------------------
_tls = threading.local()


def trace_stack() -> list:
    """The function graphs being traced on this thread, innermost last."""
    s = getattr(_tls, "stack", None)
    if s is None:
        s = _tls.stack = []
    return s


def tracing_graph() -> FuncGraph | None:
    """The function graph being traced on this thread, if any."""
    s = getattr(_tls, "stack", None)
    return s[-1] if s else None


def _redirect_to_function_graph(graph, op_type, inputs, attrs, name,
                                control_inputs, output_specs):
    """While a function is traced on this thread, ops that a wrapper builds in an
    outer graph (``ref.graph.create_op(...)``, ``op_scope`` picking the graph of
    a captured variable) are built in the function graph instead, where the
    capture hook re-binds their outside inputs. This is TF's ``building_function``
    rule for picking the graph of an op; other threads are not affected."""
    stack = getattr(_tls, "stack", None)
    if not stack:
        return None
    fg = stack[-1]
    inputs = list(inputs)
    if graph is fg or not fg._takes_ops_of(graph, inputs):
        return None
    if name and name.endswith("/"):
        name = name.rstrip("/") or None
    ctrl = []
    for c in control_inputs or ():
        c = c.op if isinstance(c, Tensor) else c
        if c.graph is not fg:
            raise ValueError(f"nd.function: op {c.name} of an outer graph cannot be "
                             "a control input of an op in a function")
        ctrl.append(c)
    return fg._create_op(op_type, inputs, attrs, name, ctrl, output_specs)


_ops._create_op_interceptor = _redirect_to_function_graph

# Op types whose outputs a function graph may copy when captured (datasets),
# and re-binders for resource handles captured by name (iterators). The data
# module registers its ops here.
_COPYABLE_OPS: set[str] = set()
_REBINDERS: dict = {}


def register_copyable_op(op_type: str):
    _COPYABLE_OPS.add(op_type)


def register_rebinder(op_type: str, fn):
    """``fn(func_graph, outer_op) -> Tensor`` re-binds a captured resource handle."""
    _REBINDERS[op_type] = fn


CapturedVariable = collections.namedtuple(
    "CapturedVariable", ["name", "dtype", "shape", "device", "container",
                         "shared_name"])


class FuncGraph(Graph):
    """The graph of one traced function; captures outside tensors on use."""

    def __init__(self, name: str, outer_graphs=()):
        super().__init__()
        self.name = name
        self._capture_fn = self._capture
        self._captures: dict = {}
        self._var_ops: dict[str, Operation] = {}
        self._var_reads: dict[str, tuple] = {}
        self.captured_variables: list[CapturedVariable] = []
        self._functions: dict = {}
        self._outer = list(outer_graphs)
        self._outer_ids = {id(g) for g in self._outer}

    # -- redirect rule ------------------------------------------------------------
    def _takes_ops_of(self, graph, inputs) -> bool:
        stack = trace_stack()
        if id(graph) in self._outer_ids or any(graph is g for g in stack):
            return True
        return any(isinstance(t, Tensor) and any(t.op._graph is g for g in stack)
                   for t in inputs)

    def _note_outer(self, graph):
        if id(graph) not in self._outer_ids:
            self._outer_ids.add(id(graph))
            self._outer.append(graph)

    # -- capturing ------------------------------------------------------------------
    def _exact_op(self, op_type, inputs, attrs, name, device, cls=None):
        """Builds an op named exactly ``name`` (else uniquely), on ``device``,
        outside any control-dependency scope."""
        exact = name not in self._ops_by_name
        with self.control_dependencies(None):
            op = self.create_op(op_type, inputs, attrs,
                                name=(name + "/") if exact else name)
        if exact:
            self._names_in_use[name.lower()] = max(
                self._names_in_use.get(name.lower(), 0), 1)
        op._attrs.pop("_class", None)
        if cls:
            op._attrs["_class"] = list(cls)
        op._device = device
        return op

    def _capture(self, t: Tensor) -> Tensor:
        self._note_outer(t.op._graph)
        op = t.op
        if op.type == "VariableV2":
            return self._bind_variable(op)
        if (op.type == "Identity" and op._inputs
                and op._inputs[0].op.type == "VariableV2"
                and op._inputs[0].dtype.is_ref_dtype):
            return self._read_variable(op._inputs[0].op)
        got = self._captures.get(t)
        if got is not None:
            return got
        if op.type in _REBINDERS:
            got = _REBINDERS[op.type](self, op)
        elif op.type in _COPYABLE_OPS:
            inputs = [i if i.graph is self else self._capture(i) for i in op._inputs]
            attrs = dict(op._attrs)
            attrs.pop("_class", None)
            blob = attrs.get("_fdef")
            if blob:
                fd = function_pb2.FunctionDef.FromString(blob)
                self._functions[fd.name] = fd
            with self.control_dependencies(None):
                got = self.create_op(op.type, inputs, attrs,
                                     name=op.name).outputs[t.value_index]
        else:
            value = _static_value(t)
            if value is None:
                raise ValueError(
                    f"nd.function can only capture constants and variables; pass "
                    f"{t.name} as an argument (it is an output of op '{op.name}' "
                    f"of type {op.type} in an outer graph)")
            with self.control_dependencies(None):
                got = self.create_op(
                    "Const", [], {"value": np.asarray(value),
                                  "dtype": t.dtype.base_dtype},
                    name=op.name).outputs[0]
        self._captures[t] = got
        return got

    def _bind_variable(self, var_op: Operation) -> Tensor:
        name = var_op.name
        mine = self._var_ops.get(name)
        if mine is None:
            a = var_op._attrs
            mine = self._exact_op(
                "VariableV2", [], {"shape": a["shape"], "dtype": a["dtype"],
                                   "container": a["container"],
                                   "shared_name": a["shared_name"]},
                name, var_op.device, a.get("_class"))
            if mine.name != name:
                raise ValueError(
                    f"nd.function: cannot re-bind variable '{name}': the function "
                    "already has an op of that name")
            self._var_ops[name] = mine
            self.captured_variables.append(CapturedVariable(
                name, a["dtype"], a["shape"], var_op.device, a["container"],
                a["shared_name"]))
            self._new_read(name)
        return mine.outputs[0]

    def _new_read(self, name) -> Tensor:
        var_op = self._var_ops[name]
        k = len([1 for n in self._ops_by_name
                 if n == f"{name}/read" or n.startswith(f"{name}/read_")])
        read_name = f"{name}/read" if k == 0 else f"{name}/read_{k}"
        read = self._exact_op("Identity", [var_op.outputs[0]],
                              {"T": var_op.outputs[0].dtype.base_dtype}, read_name,
                              var_op.device, [b"loc:@" + name.encode()])
        out = read.outputs[0]
        out._dtype = out.dtype.base_dtype
        self._var_reads[name] = (out, len(self._ops_list))
        return out

    def _read_variable(self, var_op: Operation) -> Tensor:
        """The variable's snapshot: the last read, unless an op has used the
        variable's ref since (then a fresh read, so the value is current)."""
        ref = self._bind_variable(var_op)
        read, mark = self._var_reads[var_op.name]
        for op in self._ops_list[mark:]:
            if op.type != "Identity" and any(i is ref for i in op._inputs):
                return self._new_read(var_op.name)
        return read

