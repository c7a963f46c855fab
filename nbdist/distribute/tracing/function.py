"""``nd.function``: Python functions of tensors traced into graph functions.

    >>> import numpy as np
    >>> import nbdist as nd
    >>> @nd.function
    ... def add_one(x):
    ...     return x + 1.0
    >>> float(add_one(np.float32(2.0)))           # no graph being built: runs now
    3.0
    >>> add_one.experimental_get_tracing_count()
    1

Calling a ``Function`` traces the Python function once per input signature
(dtype and shape of every tensor or array argument; Python scalars, strings
and other objects are part of the key and baked into the trace, as in
TensorFlow) into its own ``nd.Graph`` and caches the ``ConcreteFunction``.
What a call does depends on its arguments:

* some argument is a symbolic ``nd.Tensor`` (or a function is being traced):
  a ``_FunctionCall`` op is added to that graph; its body is the function's
  ``FunctionDef``, kept in the graph's function library (``GraphDef.library``)
  and carried by the node itself, and it runs as one op on the call's task;
* only concrete values (NumPy arrays, numbers): the function runs right away
  in a private in-process ``Session("")`` and NumPy values come back;
* ``fn.get_concrete_function(*args).run(target, *args)`` runs the function
  graph on a server through a ``Session(target, graph=concrete.graph)`` kept
  per (target, function): the graph is registered with the tasks once, and a
  repeated call costs one RunStep. This is how a coordinator runs functions
  on workers.

Capturing. A traced function may use, without passing them as arguments,
constants (copied into the function graph), ``nd.Variable``s (re-bound in the
function graph as a ``VariableV2`` op with the same name, dtype, shape,
container, shared_name and device, plus its ``read`` snapshot: since a task
keys its resources by container and shared name or node name, the function
reads and updates the very variable that lives on its parameter server),
iterators (re-bound by shared name) and datasets (their ops are copied).
Any other outside tensor is an error that names it. Functions cannot create
variables. There is no AutoGraph: Python control flow runs once, at trace
time. Ops run in program order on each task; every stateful op of the
function runs on every call, whether or not its result is returned.
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import itertools
import re
import threading
import types
import weakref

import numpy as np

from nbdist import errors
from nbdist.distribute.tracing import function_ops  # noqa: F401  (the call op)
from nbdist.distribute.tracing.session_cache import SessionCache
from nbdist.distribute.tracing.tensor_spec import TensorSpec, as_array
from nbdist.framework import dtypes, op_def_registry
from nbdist.framework import ops as _ops
from nbdist.framework.constant_op import constant, identity, placeholder
from nbdist.framework.func_graph import CapturedVariable, FuncGraph, tracing_graph
from nbdist.framework.function_def import needed_trace, to_function_def
from nbdist.framework.nest import (
    flatten,
    flatten_up_to,
    is_namedtuple,
    map_structure,
    pack_sequence_as,
)
from nbdist.framework.ops import Graph, Operation, Tensor
from nbdist.ops.variables import Variable
from nbdist.proto import function_pb2

__all__ = [
    "ConcreteFunction",
    "Function",
    "TensorSpec",
    "function",
    "run_function",
    "trace",
]


# -- the trace -------------------------------------------------------------------------
_ids = itertools.count(1)
_NAME_RE = re.compile(r"[^A-Za-z0-9_.\-]")


def _op_name(name: str) -> str:
    name = _NAME_RE.sub("_", name or "").lstrip("_.-") or "fn"
    return name


class _Leaf:
    """How one flattened argument enters a trace."""

    __slots__ = ("key", "kind", "spec")

    def __init__(self, kind, key, spec=None):
        self.kind = kind  # "tensor" (fed), "capture" (passed through), "python"
        self.key = key
        self.spec = spec


def _leaf_for(x) -> _Leaf:
    if isinstance(x, Tensor):
        spec = TensorSpec(x.shape, x.dtype.base_dtype)
        return _Leaf("tensor", spec._key(), spec)
    if isinstance(x, TensorSpec):
        return _Leaf("tensor", x._key(), x)
    if isinstance(x, (np.ndarray, np.generic)):
        spec = TensorSpec.from_tensor(x)
        return _Leaf("tensor", spec._key(), spec)
    if isinstance(x, Variable):
        return _Leaf("capture", ("V", x.op.name, x.device))
    key_fn = getattr(x, "_nd_function_arg_key", None)
    if key_fn is not None:
        return _Leaf("capture", key_fn())
    if x is None or isinstance(x, (bool, int, float, str, bytes, complex)):
        return _Leaf("python", ("P", type(x).__name__, x))
    return _Leaf("python", ("O", type(x).__qualname__, id(x)))


def _structure_key(structure, leaf_keys):
    it = iter(leaf_keys)

    def build(s):
        if isinstance(s, collections.abc.Mapping):
            return ("dict", tuple((k, build(s[k])) for k in sorted(s)))
        if is_namedtuple(s):
            return ("nt", type(s), tuple(build(x) for x in s))
        if isinstance(s, (tuple, list)):
            return (type(s).__name__, tuple(build(x) for x in s))
        return next(it)

    return build(structure)


def _arg_names(python_function, args, kwargs) -> list[str]:
    """A name per flattened argument: the parameter's name (``x``, ``x_1`` ...)."""
    try:
        params = [p for p in inspect.signature(python_function).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        base = params[i].name if i < len(params) else f"args_{i}"
        n = len(flatten(a))
        names.extend([base] if n == 1 else [f"{base}_{j}" for j in range(n)])
    for k in sorted(kwargs):
        n = len(flatten(kwargs[k]))
        names.extend([k] if n == 1 else [f"{k}_{j}" for j in range(n)])
    return [_op_name(n) for n in names]


def trace(python_function, args, kwargs, leaves, name=None, *,
          tensor_outputs_only=False) -> ConcreteFunction:
    """Traces ``python_function(*args, **kwargs)`` into a new ``FuncGraph``.

    ``leaves`` (from ``_leaf_for``) says, per flattened argument, whether it
    becomes a placeholder ("tensor") or is passed through as is.
    """
    base = _op_name(name or getattr(python_function, "__name__", "fn"))
    fg = FuncGraph.for_function(f"{base}_{next(_ids)}")
    flat = flatten((args, kwargs))
    names = _arg_names(python_function, args, kwargs)
    with fg.tracing():
        placeholders, new_flat = [], []
        for x, leaf, n in zip(flat, leaves, names):
            if leaf.kind == "tensor":
                ph = placeholder(leaf.spec.dtype, leaf.spec.shape, name=n)
                placeholders.append(ph)
                new_flat.append(ph)
            else:
                if isinstance(x, Variable):
                    fg.add_outer_graph(x.graph)
                new_flat.append(x)
        a, kw = pack_sequence_as((args, kwargs), new_flat)
        result = python_function(*a, **kw)
        structured = _normalize_outputs(fg, result, tensor_outputs_only)
    fg.finish(base)
    return ConcreteFunction(fg, placeholders, structured, leaves, (args, kwargs),
                            base)


def _normalize_outputs(fg: FuncGraph, result, tensor_only: bool):
    def norm(x):
        if isinstance(x, Variable) or (hasattr(x, "_as_graph_element")
                                       and not isinstance(x, (Tensor, Operation))):
            x = x._as_graph_element() if not isinstance(x, Variable) else x.value()
        if isinstance(x, Tensor):
            if x.graph is not fg:
                x = fg.capture(x)
            if x.dtype.is_ref_dtype:
                x = identity(x)
            return x
        if isinstance(x, Operation):
            if tensor_only:
                raise TypeError(f"this function must return tensors, not the op "
                                f"{x.name}")
            if x.graph is not fg:
                raise ValueError(f"nd.function cannot return op {x.name} of an "
                                 "outer graph")
            return x
        if isinstance(x, (np.ndarray, np.generic)) or (
                tensor_only and isinstance(x, (bool, int, float, str, bytes))):
            return constant(x)
        if x is None or isinstance(x, (bool, int, float, str, bytes)):
            return x
        raise TypeError(f"nd.function: cannot return a {type(x).__name__} "
                        f"({x!r:.60}); return tensors, ops or Python values")

    return map_structure(norm, result)


# -- ConcreteFunction -----------------------------------------------------------------
def _stateful(op: Operation) -> bool:
    od = op_def_registry.get_op_def(op.type)
    return bool(od is not None and od.stateful and op.inputs)


class ConcreteFunction:
    """One traced graph function: ``graph``, ``inputs`` (its placeholders),
    ``outputs`` (the flat output tensors), ``structured_outputs``,
    ``captured_variables``; ``to_function_def()`` / ``from_function_def``."""

    def __init__(self, graph: FuncGraph, inputs, structured_outputs, leaves,
                 arg_structure, base_name: str):
        self._graph = graph
        self._inputs = list(inputs)
        self._structured = structured_outputs
        self._leaves = list(leaves)
        self._arg_structure = (tuple(arg_structure[0]), dict(arg_structure[1]))
        self._base_name = base_name
        flat = flatten(structured_outputs)
        self._outputs = [x for x in flat if isinstance(x, Tensor)]
        out_ops = [x for x in flat if isinstance(x, Operation)]
        targets = list(dict.fromkeys(out_ops + [op for op in graph.get_operations()
                                                 if _stateful(op)]))
        self._targets = targets
        self._fetches = list(dict.fromkeys(self._outputs)) + targets
        self._fetch_index = {t: i for i, t in enumerate(self._fetches)
                             if isinstance(t, Tensor)}
        self._fdef = None
        self._sessions = SessionCache(graph)

    name = property(lambda self: self._graph.name)
    graph = property(lambda self: self._graph)
    inputs = property(lambda self: list(self._inputs))
    outputs = property(lambda self: list(self._outputs))
    structured_outputs = property(lambda self: self._structured)

    @property
    def captured_variables(self) -> list[CapturedVariable]:
        return list(self._graph.captured_variables)

    def __repr__(self):
        ins = ", ".join(f"{p.op.name}: {p.dtype.name}{p.shape}" for p in self._inputs)
        return f"<nd.ConcreteFunction {self.name}({ins})>"

    # -- FunctionDef --------------------------------------------------------------
    def to_function_def(self) -> function_pb2.FunctionDef:
        """The function as nbdist's ``FunctionDef``: arguments by name and type,
        output tensor names, and the body (the ops the outputs and the stateful
        ops need, without the argument placeholders) as NodeDefs; the same form
        control flow gives its branches (``function_def.to_function_def``)."""
        if self._fdef is None:
            self._fdef = to_function_def(
                needed_trace(self._graph, self._inputs, self._outputs,
                             self._targets), self.name)
        return self._fdef

    @classmethod
    def from_function_def(cls, fdef: function_pb2.FunctionDef,
                          structured_outputs=None) -> ConcreteFunction:
        """Rebuilds a function from its ``FunctionDef`` (argument shapes are not
        part of a FunctionDef, so they come back unknown). ``structured_outputs``
        may give the nesting of the outputs (any structure with as many leaves)."""
        fg, inputs, outs = FuncGraph.from_function_def(fdef)
        structured = (outs if structured_outputs is None
                      else pack_sequence_as(structured_outputs, outs))
        fg.finalize()
        leaves = [_Leaf("tensor", None, TensorSpec(p.shape, p.dtype)) for p in inputs]
        c = cls(fg, inputs, structured, leaves, (tuple(inputs), {}), fdef.name)
        return c

    # -- running --------------------------------------------------------------------
    def _tensor_args(self, args, kwargs) -> list:
        try:
            flat = flatten_up_to(self._arg_structure, (tuple(args), dict(kwargs)))
        except TypeError as e:
            raise TypeError(f"{self.name}: arguments do not match the traced "
                            f"signature: {e}") from None
        if len(flat) != len(self._leaves):
            raise TypeError(f"{self.name} takes {len(self._leaves)} flattened "
                            f"argument(s), got {len(flat)}")
        out = []
        for x, leaf in zip(flat, self._leaves):
            if leaf.kind == "tensor":
                out.append(x)
            elif leaf.key is not None and _leaf_for(x).key != leaf.key:
                raise TypeError(
                    f"{self.name} was traced for another value of a non-tensor "
                    f"argument ({leaf.key[-1]!r:.40}), got {x!r:.40}: call the "
                    "nd.function to trace one for it")
        return out

    def session(self, target: str = "", config=None):
        """The session this function runs in on ``target`` (created once)."""
        return self._sessions.get(target, config)

    def release(self, target: str | None = None):
        """Closes the cached session for ``target`` (all of them when None)."""
        self._sessions.release(target)

    def run(self, target: str, *args, **kwargs):
        """Runs the function on ``target`` ("" for in-process) with concrete
        argument values; returns the structured outputs as NumPy values.

        The session is kept per target, so the graph is registered once and a
        call is one RunStep. A session whose task restarted or vanished
        (``AbortedError``/``UnavailableError``) is dropped, so the next call
        starts a new one."""
        values = self._tensor_args(args, kwargs)
        for v in values:
            if isinstance(v, (Tensor, Operation)):
                raise TypeError("ConcreteFunction.run takes values, not symbolic "
                                f"tensors ({v.name}); call the function instead")
        sess = self.session(target)
        feeds = dict(zip(self._inputs, values))
        try:
            vals = sess.run(self._fetches, feeds)
        except (errors.AbortedError, errors.UnavailableError):
            self._sessions.forget(target, sess)
            raise
        return self._pack(vals)

    def _pack(self, vals):
        def pick(x):
            if isinstance(x, Tensor):
                return vals[self._fetch_index[x]]
            if isinstance(x, Operation):
                return None
            return x

        return map_structure(pick, self._structured)

    def __call__(self, *args, **kwargs):
        values = self._tensor_args(args, kwargs)
        fg = tracing_graph()
        symbolic = [v for v in values if isinstance(v, Tensor)]
        if fg is not None or symbolic:
            graph = fg if fg is not None else symbolic[0].graph
            return self._call_in_graph(graph, values)
        return self.run("", *args, **kwargs)

    def _call_in_graph(self, graph: Graph, values, name=None):
        """Adds a ``_FunctionCall`` op of this function to ``graph``."""
        fd = self.to_function_def()
        for inner in self._graph.functions:
            graph.add_function(inner)
        graph.add_function(fd)
        with graph.as_default():
            inputs = []
            for v, ph in zip(values, self._inputs):
                t = _ops.convert_to_tensor(v, dtype=ph.dtype.base_dtype)
                if not ph.shape.is_compatible_with(t.shape):
                    raise ValueError(f"{self.name}: argument '{ph.op.name}' must "
                                     f"have shape {ph.shape}, got {t.shape}")
                inputs.append(t)
        attrs = {"f": fd.name, "Tin": [p.dtype.base_dtype for p in self._inputs],
                 "Tout": [t.dtype.base_dtype for t in self._outputs],
                 "output_shapes": [t.shape for t in self._outputs],
                 "_fdef": fd.SerializeToString()}
        devices = {v.device for v in self._graph.captured_variables}
        if len(devices) == 1:
            # Run where the captured variables live (the body runs on one task).
            attrs["_class"] = sorted(b"loc:@" + v.name.encode()
                                     for v in self._graph.captured_variables)
        op = graph.create_op("_FunctionCall", inputs, attrs,
                             name=name or self._base_name)
        if len(devices) == 1 and not op.device:
            op.set_device(devices.pop())
        outs = dict(zip(self._outputs, op.outputs))

        def pick(x):
            if isinstance(x, Tensor):
                return outs[x]
            if isinstance(x, Operation):
                return op
            return x

        return map_structure(pick, self._structured)


def run_function(target: str, concrete: ConcreteFunction, args=(), kwargs=None):
    """``concrete.run(target, *args, **kwargs)``: runs a traced function on a
    task (through a session kept per target and function)."""
    return concrete.run(target, *args, **(kwargs or {}))


# -- Function ----------------------------------------------------------------------------
class Function:
    """A Python function traced per input signature; see the module docstring."""

    def __init__(self, python_function, input_signature=None, autograph=False,
                 name=None):
        if not callable(python_function):
            raise TypeError(f"nd.function needs a callable, got {python_function!r}")
        self._python_function = python_function
        self._signature = (None if input_signature is None
                           else list(input_signature))
        if self._signature is not None:
            for s in flatten(self._signature):
                if not isinstance(s, TensorSpec):
                    raise TypeError(f"input_signature must hold nd.TensorSpec, got "
                                    f"{s!r}")
        self._autograph = autograph
        self._name = name or getattr(python_function, "__name__", "fn")
        self._cache: dict = {}
        self._lock = threading.RLock()
        self._trace_count = 0
        self._bound: dict = {}
        functools.update_wrapper(self, python_function, updated=())

    python_function = property(lambda self: self._python_function)
    input_signature = property(lambda self: self._signature)

    def experimental_get_tracing_count(self) -> int:
        """How many times the Python function has been traced."""
        return self._trace_count

    tracing_count = property(experimental_get_tracing_count)

    def _leaves(self, args, kwargs):
        if self._signature is None:
            flat = flatten((args, kwargs))
            leaves = [_leaf_for(x) for x in flat]
            return args, kwargs, leaves, _structure_key((args, kwargs),
                                                        [lf.key for lf in leaves])
        if kwargs:
            raise TypeError(f"{self._name} has an input_signature: pass its "
                            "arguments positionally")
        if len(args) != len(self._signature):
            raise TypeError(f"{self._name} takes {len(self._signature)} argument(s) "
                            f"(input_signature), got {len(args)}")
        specs = flatten(self._signature)
        try:
            flat = flatten_up_to(tuple(self._signature), tuple(args))
        except TypeError as e:
            raise ValueError(f"{self._name}: arguments do not match the nesting of "
                             f"input_signature: {e}") from None
        for x, s in zip(flat, specs):
            if isinstance(x, (TensorSpec, Tensor)):
                other = x if isinstance(x, TensorSpec) else TensorSpec.from_tensor(x)
            else:
                try:
                    arr = as_array(x)
                except (TypeError, ValueError) as e:
                    raise TypeError(f"{self._name}: {x!r:.40} does not match "
                                    f"{s}: {e}") from None
                if s.dtype is not dtypes.string and arr.dtype.kind not in "SUO":
                    try:
                        arr = arr.astype(s.dtype.as_numpy_dtype, casting="same_kind")
                    except TypeError:
                        pass
                other = TensorSpec(arr.shape, dtypes.as_dtype(arr.dtype))
            if not s.is_compatible_with(other):
                raise ValueError(f"{self._name}: argument {other} is not compatible "
                                 f"with the input_signature's {s}")
        leaves = [_Leaf("tensor", s._key(), s) for s in specs]
        return tuple(self._signature), {}, leaves, ("signature",)

    def get_concrete_function(self, *args, **kwargs) -> ConcreteFunction:
        """The traced function for these arguments (tracing it if needed).
        Arguments may be values, tensors or ``nd.TensorSpec``s; with an
        ``input_signature`` and no arguments, the signature's function."""
        if not args and not kwargs and self._signature is not None:
            args = tuple(self._signature)
        targs, tkwargs, leaves, key = self._leaves(args, kwargs)
        c = self._cache.get(key)
        if c is not None:
            return c
        with self._lock:
            c = self._cache.get(key)
            if c is None:
                if self._signature is None:
                    targs = map_structure(lambda x: TensorSpec.from_tensor(x) if (
                        isinstance(x, (Tensor, np.ndarray, np.generic))) else x,
                        targs)
                    tkwargs = map_structure(lambda x: TensorSpec.from_tensor(x) if (
                        isinstance(x, (Tensor, np.ndarray, np.generic))) else x,
                        tkwargs)
                c = trace(self._python_function, targs, tkwargs, leaves, self._name)
                # Objects keyed by identity stay alive as long as their trace.
                c._python_refs = [x for x, lf in zip(flatten((args, kwargs)), leaves)
                                  if lf.kind != "tensor"]
                self._trace_count += 1
                self._cache[key] = c
            return c

    def __call__(self, *args, **kwargs):
        c = self.get_concrete_function(*args, **kwargs)
        if self._signature is not None:
            return c(*args)
        return c(*args, **kwargs)

    def call_in_graph(self, *args, graph=None, name=None, **kwargs):
        """Adds a call op to ``graph`` (default: the default graph) even when no
        argument is a tensor (e.g. a function of no arguments)."""
        c = self.get_concrete_function(*args, **kwargs)
        values = c._tensor_args(args, kwargs)
        g = graph or tracing_graph() or _ops.get_default_graph()
        return c._call_in_graph(g, values, name=name)

    def __get__(self, instance, owner):
        if instance is None:
            return self
        key = id(instance)
        bound = self._bound.get(key)
        if bound is None or bound[0]() is not instance:
            try:
                ref = weakref.ref(instance)
            except TypeError:
                def ref(_i=instance):
                    return _i
            fn = Function(types.MethodType(self._python_function, instance),
                          self._signature, self._autograph, self._name)
            bound = self._bound[key] = (ref, fn)
        return bound[1]

    def __repr__(self):
        return f"<nd.function {self._name}>"


def function(func=None, input_signature=None, autograph=False, name=None):
    """Makes a ``Function`` of ``func``: ``@nd.function``,
    ``@nd.function(input_signature=[nd.TensorSpec([None], nd.float32)])`` or
    ``nd.function(f)``. ``autograph`` is accepted for compatibility and ignored:
    Python control flow runs at trace time."""
    if func is None:
        return lambda f: Function(f, input_signature, autograph, name)
    return Function(func, input_signature, autograph, name)
