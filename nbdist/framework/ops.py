"""Graph and the scopes that shape how ops are built; ``Operation`` and ``Tensor``
(from their own modules) are found here too."""

from __future__ import annotations

import contextlib
import re
import threading

import numpy as np

from nbdist.framework import dtypes, op_def_registry as op_def
from nbdist.framework.default_stack import DefaultStack
from nbdist.framework.device import merge_device
from nbdist.framework.node_def import graph_to_graph_def
from nbdist.framework.tensor_shape import (  # noqa: F401 - re-exported
    TensorShape,
    as_shape,
)
from nbdist.framework.tensor import GraphKeys, Tensor  # noqa: F401 - re-exported
from nbdist.framework.operation import Operation, _device_string

_VALID_OP_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")
DEFAULT_GRAPH_SEED = 87654321


# Set by nd.function while it traces: may build an op in the function graph
# instead (TF's ``building_function`` rule). Returns None to decline.
_create_op_interceptor = None


class Graph:
    """A dataflow graph. ``with nd.Graph().as_default(): ...`` makes it the default.

    >>> import nbdist as nd
    >>> g = nd.Graph()
    >>> with g.as_default():
    ...     c = nd.constant(1.0, name="c")
    >>> g.get_tensor_by_name("c:0") is c
    True
    """

    def __init__(self):
        self._lock = threading.RLock()
        self._ops_list: list[Operation] = []
        self._ops_by_name: dict[str, Operation] = {}
        self._names_in_use: dict[str, int] = {}
        self._collections: dict[str, list] = {}
        self._finalized = False
        self._seed = None
        self._unfeedable: set[int] = set()
        self._unfetchable: set[int] = set()
        self._thread_local = threading.local()
        self._gradient_override_map: dict = {}
        # nd.function sets this while tracing: a callable capturing outer tensors
        self._capture_fn = None
        self._functions: dict = {}  # the function library (GraphDef.library)

    # -- per-thread scope stacks (as TF: scopes are thread-local) --------------
    def _tl(self, name, default):
        tl = self._thread_local
        if not hasattr(tl, name):
            setattr(tl, name, default())
        return getattr(tl, name)

    @property
    def _name_stack(self) -> str:
        return self._tl("name_stack", str)

    @_name_stack.setter
    def _name_stack(self, value):
        self._thread_local.name_stack = value

    @property
    def _device_function_stack(self) -> list:
        return self._tl("device_stack", list)

    @property
    def _control_dependencies_stack(self) -> list:
        return self._tl("control_stack", list)

    @property
    def _colocation_stack(self) -> list:
        return self._tl("colocation_stack", list)

    @property
    def _variable_scope_stack(self) -> list:
        return self._tl("var_scope_stack", list)

    @contextlib.contextmanager
    def container(self, container_name: str):
        """Stateful ops built inside keep their resources in ``container_name``
        (``Session.reset(target, [container_name])`` clears exactly those)."""
        old = self._tl("container", str)
        self._thread_local.container = container_name
        try:
            yield container_name
        finally:
            self._thread_local.container = old

    # -- graph-level properties -------------------------------------------------
    @property
    def seed(self):
        return self._seed

    @seed.setter
    def seed(self, seed):
        self._seed = seed

    @property
    def finalized(self) -> bool:
        return self._finalized

    def finalize(self):
        """Makes the graph read-only: adding an op afterwards raises RuntimeError."""
        self._finalized = True

    def _unsafe_unfinalize(self):
        self._finalized = False

    @property
    def version(self) -> int:
        return len(self._ops_list)

    def as_default(self):
        """Returns a context manager that makes this graph the default graph."""
        return _default_graph_stack.get_controller(self)

    def as_graph_def(self, from_version=None, add_shapes=False):
        return graph_to_graph_def(self, from_version=from_version,
                                  add_shapes=add_shapes)

    # -- function library --------------------------------------------------------
    def add_function(self, fdef):
        """Adds the ``FunctionDef`` ``fdef`` (keyed by its name) to the graph's
        function library, which ``as_graph_def()`` writes to ``library``.

        >>> from nbdist.proto import function_pb2
        >>> g = Graph()
        >>> g.add_function(function_pb2.FunctionDef(name="f"))
        >>> [f.name for f in g.functions]
        ['f']
        """
        self._functions[fdef.name] = fdef

    @property
    def functions(self) -> list:
        """The graph's function library: its ``FunctionDef``s, oldest first."""
        return list(self._functions.values())

    def get_operations(self) -> list[Operation]:
        return list(self._ops_list)

    def get_operation_by_name(self, name: str) -> Operation:
        if not isinstance(name, str):
            raise TypeError(f"Operation names are strings (or similar), not {name!r}.")
        op = self._ops_by_name.get(name)
        if op is None:
            raise KeyError(f"The name '{name}' refers to an Operation not in the "
                           "graph.")
        return op

    def get_tensor_by_name(self, name: str) -> Tensor:
        if not isinstance(name, str):
            raise TypeError(f"Tensor names are strings (or similar), not {name!r}.")
        t = self.as_graph_element(name, allow_tensor=True, allow_operation=False)
        return t

    def as_graph_element(self, obj, allow_tensor=True, allow_operation=True):
        """The Tensor or Operation ``obj`` names or is, checked to be in this graph."""
        if hasattr(obj, "_as_graph_element") and not isinstance(obj, (Tensor,
                                                                          Operation)):
            obj = obj._as_graph_element()
        if isinstance(obj, bytes):  # as TF: names may be bytes
            obj = obj.decode("utf-8")
        if isinstance(obj, str):
            name = obj
            if ":" in name:
                if not allow_tensor:
                    raise ValueError(f"Name '{name}' appears to refer to a Tensor, "
                                     "not an Operation.")
                op_name, _, idx = name.rpartition(":")
                try:
                    idx = int(idx)
                except ValueError:
                    raise ValueError(f"The name '{name}' looks like a Tensor name, "
                                     "but is not a valid one.") from None
                op = self._ops_by_name.get(op_name)
                if op is None:
                    raise KeyError(f"The name '{name}' refers to a Tensor which does "
                                   f"not exist. The operation, '{op_name}', does "
                                   "not exist in the graph.")
                if idx >= len(op._outputs) or idx < 0:
                    raise KeyError(f"The name '{name}' refers to a Tensor which does "
                                   f"not exist. The operation, '{op_name}', exists "
                                   f"but only has {len(op._outputs)} outputs.")
                return op._outputs[idx]
            if not allow_operation:
                raise ValueError(f"The name '{name}' refers to an Operation, not a "
                                 f"Tensor. Tensor names must be of the form "
                                 f"\"<op_name>:<output_index>\".")
            op = self._ops_by_name.get(name)
            if op is None:
                raise KeyError(f"The name '{name}' refers to an Operation not in the "
                               "graph.")
            return op
        if isinstance(obj, Tensor) and allow_tensor:
            if obj.graph is not self:
                raise ValueError(f"Tensor {obj.name} is not an element of this graph.")
            return obj
        if isinstance(obj, Operation) and allow_operation:
            if obj.graph is not self:
                raise ValueError(f"Operation {obj.name} is not an element of this "
                                 "graph.")
            return obj
        kinds = " or ".join(k for k, a in (("Tensor", allow_tensor),
                                           ("Operation", allow_operation)) if a)
        raise TypeError(f"Can not convert a {type(obj).__name__} into a {kinds}.")

    # -- names -------------------------------------------------------------------
    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        if self._name_stack:
            name = self._name_stack + "/" + name
        key = name.lower()
        i = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = i + 1
        if i > 0:
            base = key
            while f"{base}_{i}" in self._names_in_use:
                i += 1
            if mark_as_used:
                self._names_in_use[f"{base}_{i}"] = 1
            name = f"{name}_{i}"
        return name

    def get_name_scope(self) -> str:
        return self._name_stack

    @contextlib.contextmanager
    def name_scope(self, name):
        """Pushes a name scope; a name ending in '/' is used as is (re-entry)."""
        old = self._name_stack
        if name is None or name == "":
            new = ""
        elif name.endswith("/"):
            new = name[:-1]
        else:
            if not _VALID_OP_NAME.match(name.split("/")[-1] or "x"):
                raise ValueError(f"'{name}' is not a valid scope name")
            new = self.unique_name(name)
        self._name_stack = new
        try:
            yield (new + "/") if new else ""
        finally:
            self._name_stack = old

    # -- device, colocation, control dependencies --------------------------------
    @contextlib.contextmanager
    def device(self, device_name_or_function):
        """Ops built inside get this device; specs merge with the outer scope."""
        stack = self._device_function_stack
        if device_name_or_function is None:
            fn = None
        elif callable(device_name_or_function):
            fn = device_name_or_function
        else:
            fn = merge_device(_device_string(device_name_or_function))
        stack.append(fn)
        try:
            yield
        finally:
            stack.pop()

    def _apply_device_functions(self, op: Operation):
        # LIFO, as TF: inner scopes set fields first, outer ones fill the rest;
        # a None scope hides everything outside it.
        for fn in reversed(self._device_function_stack):
            if fn is None:
                break
            op._set_device(fn(op))

    @contextlib.contextmanager
    def colocate_with(self, op, ignore_existing=False):
        """Ops built inside are placed with ``op`` (and device scopes are ignored)."""
        if op is None:
            yield
            return
        if isinstance(op, Tensor):
            op = op.op
        elif hasattr(op, "_as_graph_element") and not isinstance(op, Operation):
            op = op._as_graph_element().op
        if not isinstance(op, Operation):
            raise TypeError(f"colocate_with needs an Operation or Tensor, got {op!r}")
        saved_devices = list(self._device_function_stack)
        self._device_function_stack.clear()
        stack = self._colocation_stack
        saved_coloc = list(stack)
        if ignore_existing:
            stack.clear()
        stack.append(op)
        try:
            yield
        finally:
            stack[:] = saved_coloc
            self._device_function_stack[:] = saved_devices

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs):
        """Ops built inside run only after ``control_inputs``; None clears them."""
        stack = self._control_dependencies_stack
        if control_inputs is None:
            saved = list(stack)
            stack.clear()
            try:
                yield
            finally:
                stack[:] = saved
            return
        ops = []
        for c in control_inputs:
            if hasattr(c, "_as_graph_element") and not isinstance(c, (Tensor,
                                                                         Operation)):
                c = c._as_graph_element()
            if isinstance(c, Tensor):
                c = c.op
            if not isinstance(c, Operation):
                raise TypeError(f"Control input must be an Operation or Tensor: {c!r}")
            if c.graph is not self:
                raise ValueError(f"Control input {c.name} is from another graph")
            ops.append(c)
        stack.append(ops)
        try:
            yield
        finally:
            stack.pop()

    # -- collections ------------------------------------------------------------
    def add_to_collection(self, name, value):
        self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names, value):
        names = (names,) if isinstance(names, str) else set(names)
        for n in names:
            self.add_to_collection(n, value)

    def get_collection_ref(self, name) -> list:
        return self._collections.setdefault(name, [])

    def get_collection(self, name, scope=None) -> list:
        items = list(self._collections.get(name, []))
        if scope is None:
            return items
        pat = re.compile(scope)
        return [i for i in items if hasattr(i, "name") and pat.match(i.name)]

    def get_all_collection_keys(self) -> list[str]:
        return [k for k, v in self._collections.items() if v]

    def clear_collection(self, name):
        self._collections.pop(name, None)

    # -- feeding -----------------------------------------------------------------
    def prevent_feeding(self, tensor: Tensor):
        self._unfeedable.add(id(tensor))

    def is_feedable(self, tensor: Tensor) -> bool:
        if tensor.dtype.is_ref_dtype or tensor.dtype.base_dtype is dtypes.resource:
            return False
        return id(tensor) not in self._unfeedable

    def prevent_fetching(self, op: Operation):
        self._unfetchable.add(id(op))

    def is_fetchable(self, tensor_or_op) -> bool:
        op = tensor_or_op.op if isinstance(tensor_or_op, Tensor) else tensor_or_op
        return id(op) not in self._unfetchable

    # -- building ----------------------------------------------------------------
    def create_op(self, op_type: str, inputs, attrs=None, name=None,
                  control_inputs=None, output_specs=None) -> Operation:
        """Builds an op of ``op_type``; checks attrs and infers output shapes.

        Shape or dtype mismatches raise ValueError/TypeError naming the op.
        """
        if isinstance(name, bytes):  # as TF: a name may be bytes; it is kept as str
            name = name.decode("utf-8")
        if _create_op_interceptor is not None:
            op = _create_op_interceptor(self, op_type, inputs, attrs, name,
                                        control_inputs, output_specs)
            if op is not None:
                return op
        return self._create_op(op_type, inputs, attrs, name, control_inputs,
                               output_specs)

    def _create_op(self, op_type: str, inputs, attrs=None, name=None,
                   control_inputs=None, output_specs=None) -> Operation:
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")
        odef = op_def.get_op_def(op_type)
        if odef is None:
            raise ValueError(f"Op type not registered '{op_type}'")
        inputs = list(inputs)
        for t in inputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"{op_type}: input {t!r} is not a Tensor")
            if t.graph is not self:
                if self._capture_fn is not None:
                    continue
                raise ValueError(f"Tensor {t.name} must be from the same graph as "
                                 f"the op being built ({op_type}).")
        if self._capture_fn is not None:
            inputs = [t if t.graph is self else self._capture_fn(t) for t in inputs]
        with self._lock:
            if name and name.endswith("/"):
                # A scope name used as an op name (TF's name_from_scope_name).
                name = name[:-1]
                if name in self._ops_by_name:
                    raise ValueError(f"Duplicate node name in graph: '{name}'")
            else:
                name = self.unique_name(name or op_type)
            if not _VALID_OP_NAME.match(name.split("/")[-1] or "x"):
                raise ValueError(f"'{name}' is not a valid node name")
            where = f"Op '{name}' (type {op_type})"
            attrs = op_def.fill_and_check_attrs(odef, attrs or {}, where)
            if attrs.get("container") == "" and self._tl("container", str):
                attrs["container"] = self._thread_local.container
            _check_arity(odef, len(inputs), where)
            if output_specs is None:
                output_specs = infer_outputs(odef, name, inputs, attrs)
            ctrl = []
            for group in self._control_dependencies_stack:
                for c in group:
                    if c not in ctrl and not any(t.op is c for t in inputs):
                        ctrl.append(c)
            for c in control_inputs or ():
                c = c.op if isinstance(c, Tensor) else c
                if c not in ctrl:
                    ctrl.append(c)
            op = Operation(self, op_type, name, inputs, attrs, output_specs, ctrl, "")
            if self._colocation_stack:
                target = self._colocation_stack[-1]
                groups = set(target.colocation_groups())
                for other in self._colocation_stack[:-1]:
                    groups |= set(other.colocation_groups())
                op._attrs["_class"] = sorted(groups)
                op._device = target.device
            else:
                self._apply_device_functions(op)
            self._ops_by_name[name] = op
            self._ops_list.append(op)
        return op

    def _add_op_from_import(self, op: Operation):
        self._ops_by_name[op.name] = op
        self._ops_list.append(op)
        self._names_in_use.setdefault(op.name.lower(), 1)

    def _last_id(self) -> int:
        return len(self._ops_list)


def _check_arity(odef, n, where):
    if odef.num_inputs is not None and n != odef.num_inputs:
        raise ValueError(f"{where}: expected {odef.num_inputs} inputs, got {n}")
    if n < odef.min_inputs:
        raise ValueError(f"{where}: expected at least {odef.min_inputs} inputs, got {n}")


def _static_value(t: Tensor):
    """A constant's value, or a fully known shape's value, without running anything."""
    op = t.op
    if op.type == "Const":
        return op._attrs["value"]
    if op.type == "Shape" and op._inputs[0].shape.is_fully_defined():
        return np.array(op._inputs[0].shape.as_list(), dtype=op._attrs["out_type"]
                        .as_numpy_dtype)
    if op.type == "Identity":
        return _static_value(op._inputs[0])
    return None


def infer_outputs(odef, name, inputs, attrs):
    ctx = op_def.InferContext(
        odef.type, name, [t.dtype for t in inputs], [t.shape for t in inputs],
        attrs, lambda i: _static_value(inputs[i]))
    try:
        return odef.infer(ctx)
    except (ValueError, TypeError) as e:
        shapes = ", ".join(str(t.shape) for t in inputs)
        raise type(e)(f"{e} for '{name}' (op: '{odef.type}') with input shapes: "
                      f"{shapes}.") from None


# -- the default graph, per thread as in TF -----------------------------------------
class _DefaultGraphStack(DefaultStack):
    """TF's ``_DefaultGraphStack``: a thread's ``as_default`` graphs over that
    thread's global default graph. Like the stack, the global default graph is
    per thread (TF keeps it in the same ``threading.local``): a new thread
    gets a graph of its own, not the graph another thread builds in, so
    threads that build models (``run_distribute_coordinator``'s workers) do
    not collide."""

    def __init__(self):
        super().__init__()
        self._global_default_graph: Graph | None = None

    def get_default(self) -> Graph:
        if self.stack:
            return self.stack[-1]
        return self._GetGlobalDefaultGraph()

    def _GetGlobalDefaultGraph(self) -> Graph:  # noqa: N802 - TF's name
        if self._global_default_graph is None:
            self._global_default_graph = Graph()
        return self._global_default_graph

    def reset(self):
        super().reset()
        self._global_default_graph = None


_default_graph_stack = _DefaultGraphStack()


def __getattr__(name):
    # ``ops._global_default_graph``: this thread's global default graph, or None.
    if name == "_global_default_graph":
        return _default_graph_stack._global_default_graph
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def thread_graphs() -> list[Graph]:
    """This thread's ``as_default`` graphs (outermost first), then its global
    default graph if it has been made: the graphs code on this thread may be
    building in (``nd.function`` traces take ops of them)."""
    graphs = list(_default_graph_stack.stack)
    if _default_graph_stack._global_default_graph is not None:
        graphs.append(_default_graph_stack._global_default_graph)
    return graphs


def get_default_graph() -> Graph:
    """The innermost ``as_default`` graph of this thread, else this thread's
    global default graph (each thread has its own, as in TF)."""
    if _default_graph_stack.stack:
        return _default_graph_stack.stack[-1]
    return _default_graph_stack._GetGlobalDefaultGraph()


def reset_default_graph():
    """Clears this thread's global default graph (not allowed inside
    ``as_default``)."""
    if not _default_graph_stack.is_cleared():
        raise AssertionError("Do not use reset_default_graph() to clear nested "
                             "graphs (inside a graph's as_default() block). If you "
                             "need a cleared graph, exit the nesting and create a "
                             "new graph.")
    _default_graph_stack.reset()


def _graph_of(values) -> Graph:
    for v in values:
        if isinstance(v, Tensor):
            return v.graph
        if isinstance(v, Operation):
            return v.graph
        g = getattr(v, "graph", None)
        if isinstance(g, Graph):
            return g
    return get_default_graph()


# -- conversion to tensors -----------------------------------------------------------
_conversion_functions: list = []
# How any other value becomes a tensor: array_ops installs its ``constant`` here
# when imported (as TF's constant_op registers itself), so ops imports nothing
# above it.
_constant = None


def register_tensor_conversion_function(base_type, conversion_func):
    _conversion_functions.append((base_type, conversion_func))


def register_constant_function(constant_fn):
    """Sets ``constant(value, dtype=, name=)``: how ``convert_to_tensor`` makes
    a tensor of a value no conversion function claims."""
    global _constant
    _constant = constant_fn


def convert_to_tensor(value, dtype=None, name=None, preferred_dtype=None,
                      as_ref=False) -> Tensor:
    """Converts a Tensor, Variable, number, list or array to a Tensor."""
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype)
    if isinstance(value, Tensor):
        if dtype is not None and not dtype.is_compatible_with(value.dtype):
            raise ValueError(f"Tensor conversion requested dtype {dtype.name} for "
                             f"Tensor with dtype {value.dtype.name}: {value!r}")
        return value
    for base, fn in _conversion_functions:
        if isinstance(value, base):
            return fn(value, dtype=dtype, name=name, as_ref=as_ref)
    if _constant is None:
        op_def.get_op_def("Const")  # loads the op library, array_ops among it
    if dtype is None and preferred_dtype is not None:
        try:
            return _constant(value, dtype=preferred_dtype, name=name)
        except (TypeError, ValueError):
            pass
    return _constant(value, dtype=dtype, name=name)


def get_seed(op_seed):
    """TF's seed rule: (graph seed, op seed) from the graph's and the op's seed."""
    graph_seed = get_default_graph().seed
    if graph_seed is not None:
        if op_seed is None:
            op_seed = get_default_graph()._last_id()
        return graph_seed, op_seed
    if op_seed is not None:
        return DEFAULT_GRAPH_SEED, op_seed
    return None, None


def set_random_seed(seed):
    get_default_graph().seed = seed


# -- module-level scope helpers (nd.name_scope ...) ---------------------------------
def name_scope(name, default_name=None, values=None):
    g = _graph_of(values or [])
    n = name if name is not None else default_name
    return g.name_scope(n)


def device(device_name_or_function):
    return get_default_graph().device(device_name_or_function)


def container(container_name):
    """``nd.container``: resources of ops built inside live in this container.

    >>> import nbdist as nd
    >>> with nd.container("experiment"):
    ...     v = nd.Variable(1.0, name="v")
    >>> v.op.get_attr("container")
    'experiment'
    """
    return get_default_graph().container(container_name)


def colocate_with(op, ignore_existing=False):
    return get_default_graph().colocate_with(op, ignore_existing)


def control_dependencies(control_inputs):
    return get_default_graph().control_dependencies(control_inputs)


def add_to_collection(name, value):
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value):
    get_default_graph().add_to_collections(names, value)


def get_collection(key, scope=None):
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key):
    return get_default_graph().get_collection_ref(key)
