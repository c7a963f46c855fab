"""The one tracer of nbdist: how a Python function of tensors becomes a graph
function (a ``FunctionDef``), for control flow and ``nd.function`` alike
(TF's ``func_graph.py``).

Both build a function's body from the ops a Python function adds while it
runs with placeholders for its arguments, describe it as a ``Trace`` (its
arguments, outputs, body ops, captured outside tensors, re-bound variables)
and turn it into a ``FunctionDef`` with ``function_def.to_function_def``; a
FunctionDef comes back as a graph with ``function_def.function_graph``. They
differ only in where the body is built and how an outside tensor is captured:

* ``trace`` (``cond``, ``while_loop``): the body is built in the graph being
  built, as in TF1's control-flow contexts, and then cut out of it; an
  outside tensor becomes an extra argument of the function and an input of
  the calling op, so it may come from any task.
* ``FuncGraph`` (``nd.function``): the body is built in a graph of its own,
  which also runs standalone on a task; while it is traced on a thread,
  ``tracing_graph()`` is that graph, ops built in outer graphs go into it,
  and an outside tensor is captured on use: a variable is re-bound by name
  and device, a constant copied, a dataset op copied
  (``register_copyable_op``), a resource handle re-bound by a registered
  re-binder (``register_rebinder``). A trace is ``FuncGraph.for_function``,
  ``with fg.tracing(): ...``, ``fg.finish(name)``; callers above the
  framework (``nd.function``, ``Dataset.map``) use only these public methods
  (``tests/project/test_private_reaches.py``).

Nested arguments and results are flattened and packed with ``nbdist.framework.nest``.
"""

from __future__ import annotations

import collections
import contextlib
import threading

import numpy as np

from nbdist.framework import op_def_registry
from nbdist.framework import ops as _ops
from nbdist.framework.function_def import Trace, function_graph
from nbdist.framework.ops import Graph, Operation, Tensor, _static_value
from nbdist.framework.tensor_shape import TensorShape
from nbdist.proto import function_pb2

__all__ = [
    "CapturedVariable",
    "FuncGraph",
    "register_copyable_op",
    "register_rebinder",
    "remove_ops",
    "trace",
    "trace_stack",
    "tracing_graph",
    "union_captures",
]

# -- tracing a branch in place ---------------------------------------------------
def trace(graph: Graph, arg_specs, build, what: str) -> Trace:
    """Traces a branch in place: calls ``build(args) -> [Tensor]`` with
    placeholders of ``arg_specs`` ((dtype, shape) pairs) in ``graph`` and cuts
    the ops it added out of ``graph``."""
    from nbdist.framework.constant_op import placeholder

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
    """The graph of one traced function; captures outside tensors on use.

    The tracer's whole life cycle is here, so that callers (``nd.function``,
    ``Dataset.map``) use only these methods:

    >>> import nbdist as nd
    >>> from nbdist.framework.constant_op import placeholder
    >>> outer = nd.constant(2.0, name="two")
    >>> fg = FuncGraph.for_function("double")
    >>> with fg.tracing():
    ...     x = placeholder(nd.float32, [], name="x")
    ...     y = x * outer                    # ``outer`` is captured: a copy
    >>> fg.finish("double")
    >>> sorted(op.type for op in fg.get_operations())
    ['Const', 'Mul', 'Placeholder']
    """

    def __init__(self, name: str, outer_graphs=(), capturing: bool = True):
        super().__init__()
        self.name = name
        self._capture_fn = self.capture if capturing else None
        self._captures: dict = {}
        self._var_ops: dict[str, Operation] = {}
        self._var_reads: dict[str, tuple] = {}
        self.captured_variables: list[CapturedVariable] = []
        self._outer = list(outer_graphs)
        self._outer_ids = {id(g) for g in self._outer}

    @classmethod
    def for_function(cls, name: str) -> FuncGraph:
        """A function graph to trace in, built from this thread's default graph:
        it takes ops built in this thread's graphs and in the functions being
        traced, keeps the default graph's seed, and, as TF's ``FuncGraph``,
        reads the default graph's collections (variables, global step ...)
        and variable stores and writes to copies of them."""
        outer_default = _ops.get_default_graph()
        fg = cls(name, _ops.thread_graphs() + trace_stack())
        fg.seed = outer_default.seed
        fg._collections = {k: list(v) for k, v in outer_default._collections.items()}
        if "_var_store" in outer_default.__dict__:
            fg._var_store = dict(outer_default._var_store)
        return fg

    @contextlib.contextmanager
    def tracing(self):
        """Traces into this graph on this thread: it is the default graph and
        ``tracing_graph()``; on exit it stops capturing and lets go of the
        outer graphs."""
        stack = trace_stack()
        stack.append(self)
        try:
            with self.as_default():
                yield self
        finally:
            stack.pop()
            self._capture_fn = None
            # Do not keep outer graphs alive.
            self._outer, self._outer_ids, self._captures = [], set(), {}

    def finish(self, function_name: str):
        """Ends a trace: checks the function created no variable, places the
        ops that read a variable's ref with the variable, and finalizes."""
        rebound = {id(op) for op in self._var_ops.values()}
        for op in self._ops_list:
            if op.type == "VariableV2" and id(op) not in rebound:
                raise ValueError(
                    f"nd.function cannot create variables ('{op.name}' in function "
                    f"'{function_name}'): create them outside the function and use "
                    "them from it")
        self._colocate_variable_reads()
        self.finalize()

    def _colocate_variable_reads(self):
        """Ops that read a variable's ref directly (``v.read_value()`` is an
        ``Identity`` of it) run on the variable's task, so that they read it in
        program order with the updates there (as TF's placer does for ref edges)."""
        for op in self._ops_list:
            if op.device or "_class" in op._attrs:
                continue
            od = op_def_registry.get_op_def(op.type)
            refs = od.ref_inputs if od is not None else ()
            for pos, t in enumerate(op._inputs):
                if (pos not in refs and t.dtype.is_ref_dtype
                        and t.op.type == "VariableV2"):
                    op._attrs["_class"] = [b"loc:@" + t.op.name.encode()]
                    break

    @classmethod
    def from_function_def(cls, fdef: function_pb2.FunctionDef):
        """``(graph, inputs, outputs)``: the function ``fdef`` rebuilt as a
        finalized function graph (argument shapes unknown, as a FunctionDef has
        none), with the functions its nodes call in its library and its
        ``VariableV2`` nodes as its captured variables."""
        fg = cls(fdef.name, capturing=False)
        _, inputs, outputs = function_graph(
            fdef, [TensorShape(None)] * len(fdef.input_arg), graph=fg)
        for n in fdef.node_def:
            blob = n.attr["_fdef"].s if "_fdef" in n.attr else b""
            if blob:
                fg.add_function(function_pb2.FunctionDef.FromString(blob))
            if n.op == "VariableV2":
                op = fg.get_operation_by_name(n.name)
                fg._var_ops[n.name] = op
                a = op._attrs
                fg.captured_variables.append(CapturedVariable(
                    n.name, a["dtype"], a["shape"], op.device, a["container"],
                    a["shared_name"]))
        fg.finalize()
        return fg, inputs, outputs

    # -- redirect rule ------------------------------------------------------------
    def _takes_ops_of(self, graph, inputs) -> bool:
        stack = trace_stack()
        if id(graph) in self._outer_ids or any(graph is g for g in stack):
            return True
        return any(isinstance(t, Tensor) and any(t.op._graph is g for g in stack)
                   for t in inputs)

    def add_outer_graph(self, graph):
        """Lets the trace take ops built in ``graph`` (e.g. a variable's graph
        passed as an argument), as it takes those of the default graphs."""
        if id(graph) not in self._outer_ids:
            self._outer_ids.add(id(graph))
            self._outer.append(graph)

    # -- capturing ------------------------------------------------------------------
    def rebind_op(self, op_type, inputs, attrs, name, device, cls=None) -> Operation:
        """Builds an op named exactly ``name`` (else uniquely), on ``device``
        with colocation groups ``cls``, outside any control-dependency scope:
        how a re-binder (``register_rebinder``) re-creates an outside resource
        op in the function graph."""
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

    def capture(self, t: Tensor) -> Tensor:
        """``t`` of an outer graph as a tensor of this graph: a variable re-bound
        by name and device (its read as a fresh snapshot), a constant copied, a
        copyable op copied, a resource re-bound; else a ValueError naming it."""
        self.add_outer_graph(t.op._graph)
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
            inputs = [i if i.graph is self else self.capture(i) for i in op._inputs]
            attrs = dict(op._attrs)
            attrs.pop("_class", None)
            blob = attrs.get("_fdef")
            if blob:
                self.add_function(function_pb2.FunctionDef.FromString(blob))
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
            mine = self.rebind_op(
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
        read = self.rebind_op("Identity", [var_op.outputs[0]],
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

