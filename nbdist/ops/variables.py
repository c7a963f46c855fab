"""``Variable``, ``get_variable``, ``variable_scope`` and the initializer ops."""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading

import numpy as np

from nbdist.framework import dtypes
from nbdist.ops import state_ops
from nbdist.framework.constant_op import identity
from nbdist.ops.array_ops_slicing import slice as slice_
from nbdist.framework.default_session import get_default_session
from nbdist.ops.init_ops import (  # noqa: F401
    Initializer,
    constant_initializer,
    glorot_uniform_initializer,
    ones_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    zeros_initializer,
)
from nbdist.framework.ops import (
    GraphKeys,
    Operation,
    Tensor,
    convert_to_tensor,
    get_default_graph,
    register_tensor_conversion_function,
)
from nbdist.ops.partitioned_variables import (
    PartitionedVariable,
    PartitionInfo,
    SaveSliceInfo,
    iter_slices,
    slice_dim_and_num_slices,
)
from nbdist.framework.tensor_shape import TensorShape, as_shape
from nbdist.ops.variable_collections import (  # noqa: F401  (nd.* names)
    all_variables,
    global_variables,
    global_variables_initializer,
    initialize_all_variables,
    is_variable_initialized,
    local_variables,
    local_variables_initializer,
    model_variables,
    report_uninitialized_variables,
    trainable_variables,
    variables_initializer,
)

_creator_tl = threading.local()


def _creator_stack(graph) -> list:
    stacks = getattr(_creator_tl, "stacks", None)
    if stacks is None:
        stacks = _creator_tl.stacks = {}
    return stacks.setdefault(id(graph), [])


@contextlib.contextmanager
def variable_creator_scope(variable_creator):
    """``Variable(...)`` calls inside go through ``variable_creator(next_creator,
    **kwargs)`` (innermost scope first), which may change the arguments, call
    ``next_creator(**kwargs)`` or return something else (as TF's).

    >>> import nbdist as nd
    >>> def frozen(next_creator, **kwargs):
    ...     kwargs["trainable"] = False
    ...     return next_creator(**kwargs)
    >>> with nd.Graph().as_default():
    ...     with nd.variable_creator_scope(frozen):
    ...         v = nd.Variable(1.0)
    >>> v.trainable
    False
    """
    stack = _creator_stack(get_default_graph())
    stack.append(variable_creator)
    try:
        yield
    finally:
        stack.pop()


class _VariableMetaclass(type):
    # ``Variable(...)`` goes through the creators of ``variable_creator_scope``.
    def __call__(cls, *args, **kwargs):
        creators = _creator_stack(get_default_graph()) if cls is Variable else ()
        if not creators or kwargs.get("variable_def") is not None:
            return super().__call__(*args, **kwargs)
        bound = _VARIABLE_SIGNATURE.bind(None, *args, **kwargs)
        arguments = dict(bound.arguments)
        arguments.pop("self")
        arguments.update(arguments.pop("unused", {}))

        def base(**kw):
            return type.__call__(cls, **kw)

        creator = base
        for fn in creators:
            creator = functools.partial(fn, creator)
        return creator(**arguments)


class Variable(metaclass=_VariableMetaclass):
    """A TF1 (ref) variable living where its ``VariableV2`` op is placed.

    >>> import nbdist as nd
    >>> v = nd.Variable(1.0, name="v")
    >>> inc = v.assign_add(2.0)
    >>> with nd.Session() as s:
    ...     s.run(v.initializer)
    ...     float(s.run(inc))
    3.0
    """

    def __init__(self, initial_value=None, trainable=True, collections=None,
                 validate_shape=True, caching_device=None, name=None,
                 variable_def=None, dtype=None, expected_shape=None,
                 import_scope=None, constraint=None, shape=None, **unused):
        if variable_def is not None:
            self._init_from_names(variable_def, import_scope)
            return
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        g = get_default_graph()
        if collections is None:
            collections = [GraphKeys.GLOBAL_VARIABLES]
        collections = list(collections)
        if trainable and GraphKeys.TRAINABLE_VARIABLES not in collections:
            collections.append(GraphKeys.TRAINABLE_VARIABLES)
        init_from_fn = callable(initial_value)
        # TF1's init_scope: a variable made inside control_dependencies does not
        # make its initializer (or its reads) wait for those ops.
        with g.control_dependencies(None), g.name_scope(name or "Variable") as scope:
            true_name = scope[:-1]
            if init_from_fn:
                with g.name_scope("Initializer"), g.colocate_with(None):
                    value = initial_value()
                    self._initial_value = convert_to_tensor(
                        value, dtype=dtype, name="initial_value")
            else:
                self._initial_value = convert_to_tensor(
                    initial_value, dtype=dtype, name="initial_value")
            var_shape = (as_shape(shape) if shape is not None
                         else self._initial_value.shape if validate_shape
                         else TensorShape(None))
            if validate_shape and not var_shape.is_fully_defined():
                raise ValueError(f"initial_value must have a shape specified: "
                                 f"{self._initial_value}")
            self._variable = g.create_op(
                "VariableV2", [], {"shape": var_shape,
                                   "dtype": self._initial_value.dtype.base_dtype},
                name=true_name + "/").outputs[0]
            with g.colocate_with(self._variable.op):
                self._initializer_op = state_ops.assign(
                    self._variable, self._initial_value,
                    validate_shape=validate_shape, name="Assign").op
            if caching_device is not None:
                # TF1: other ops read the variable through a copy made there.
                with g.device(caching_device):
                    self._snapshot = identity(self._variable, name="read")
            else:
                with g.colocate_with(self._variable.op):
                    self._snapshot = identity(self._variable, name="read")
        self._trainable = trainable
        self._constraint = constraint
        self._caching_device = caching_device
        self._save_slice_info = None
        g.add_to_collections(collections, self)

    def _init_from_names(self, names: dict, import_scope=None):
        g = get_default_graph()
        pre = (import_scope + "/") if import_scope else ""
        self._variable = g.get_tensor_by_name(pre + names["variable_name"])
        self._initializer_op = g.get_operation_by_name(pre + names["initializer_name"])
        self._snapshot = g.get_tensor_by_name(pre + names["snapshot_name"])
        self._initial_value = (g.get_tensor_by_name(pre + names["initial_value_name"])
                               if names.get("initial_value_name") else None)
        self._trainable = bool(names.get("trainable", True))
        self._constraint = None
        self._caching_device = None
        info = names.get("save_slice_info")
        self._save_slice_info = SaveSliceInfo.from_dict(info) if info else None

    def to_proto(self) -> dict:
        """The names that rebuild this variable in an imported graph."""
        return {"variable_name": self._variable.name,
                "initializer_name": self._initializer_op.name,
                "snapshot_name": self._snapshot.name,
                "initial_value_name": self._initial_value.name
                if self._initial_value is not None else "",
                "trainable": self._trainable,
                **({"save_slice_info": self._save_slice_info.to_dict()}
                   if self._save_slice_info is not None else {})}

    @staticmethod
    def from_proto(names, import_scope=None):
        v = Variable.__new__(Variable)
        v._init_from_names(names, import_scope)
        return v

    # -- properties -------------------------------------------------------------
    name = property(lambda self: self._variable.name)
    op = property(lambda self: self._variable.op)
    graph = property(lambda self: self._variable.graph)
    device = property(lambda self: self._variable.device)
    dtype = property(lambda self: self._variable.dtype)
    initializer = property(lambda self: self._initializer_op)
    initial_value = property(lambda self: self._initial_value)
    trainable = property(lambda self: self._trainable)
    constraint = property(lambda self: self._constraint)

    @property
    def shape(self) -> TensorShape:
        return self._variable.shape

    def _set_save_slice_info(self, save_slice_info):
        self._save_slice_info = save_slice_info

    def _get_save_slice_info(self):
        return self._save_slice_info

    def get_shape(self) -> TensorShape:
        return self._variable.shape

    def value(self) -> Tensor:
        """The snapshot (``<name>/read``) other ops read."""
        return self._snapshot

    def read_value(self) -> Tensor:
        return identity(self._variable, name="read")

    def _ref(self) -> Tensor:
        return self._variable

    def _as_graph_element(self):
        return self._snapshot

    def eval(self, session=None):
        return self._snapshot.eval(session=session)

    def load(self, value, session=None):
        """Writes ``value`` into the variable through its initializer."""
        session = session or get_default_session()
        if session is None:
            raise ValueError("Either session argument should be provided or default "
                             "session should be established")
        session.run(self._initializer_op, {self._initializer_op.inputs[1]: value})

    def assign(self, value, use_locking=False, name=None, read_value=True):
        return state_ops.assign(self._variable, value, use_locking=use_locking,
                                name=name)

    def assign_add(self, delta, use_locking=False, name=None, read_value=True):
        return state_ops.assign_add(self._variable, delta, name=name)

    def assign_sub(self, delta, use_locking=False, name=None, read_value=True):
        return state_ops.assign_sub(self._variable, delta, name=name)

    def count_up_to(self, limit):
        """Increments this integer variable; returns the value before the
        increment, and raises ``OutOfRangeError`` once it has reached ``limit``."""
        return state_ops.count_up_to(self._variable, limit)

    def scatter_add(self, sparse_delta_indices, updates, name=None):
        return state_ops.scatter_add(self._variable, sparse_delta_indices, updates,
                                     name=name)

    def initialized_value(self):
        from nbdist.framework.constant_op import identity as _id

        with get_default_graph().control_dependencies([self._initializer_op]):
            return _id(self._snapshot)

    def set_shape(self, shape):
        self._variable.set_shape(shape)
        self._snapshot.set_shape(shape)

    def __repr__(self) -> str:
        return (f"<nd.Variable '{self.name}' shape={self.shape} "
                f"dtype={self.dtype.name}>")

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self):
        raise TypeError("Using a `nd.Variable` as a Python `bool` is not allowed.")

    def __iter__(self):
        raise TypeError("'Variable' object is not iterable.")

    def __array__(self, dtype=None, copy=None):
        raise TypeError(f"Cannot convert a Variable ({self.name}) to a numpy array: "
                        "run it in a Session.")

    __array_priority__ = 100


_VARIABLE_SIGNATURE = inspect.signature(Variable.__init__)


def _variable_conversion(v, dtype=None, name=None, as_ref=False):
    t = v._ref() if as_ref else v.value()
    if dtype is not None and not dtype.is_compatible_with(t.dtype):
        raise ValueError(f"Incompatible type conversion requested to type "
                         f"'{dtype.name}' for variable of type '{t.dtype.name}'")
    return t


register_tensor_conversion_function(Variable, _variable_conversion)


def _install_variable_operators():
    # Every arithmetic operator of Tensor works on a Variable through its value.
    names = ["__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
             "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__",
             "__mod__", "__pow__", "__rpow__", "__matmul__", "__rmatmul__",
             "__neg__", "__abs__", "__lt__", "__le__", "__gt__", "__ge__",
             "__and__", "__rand__", "__or__", "__ror__", "__invert__",
             "__getitem__", "__xor__"]
    for n in names:
        if hasattr(Tensor, n):
            def method(self, *args, _n=n):
                return getattr(self.value(), _n)(*args)

            setattr(Variable, n, method)


# -- variable scopes and get_variable -----------------------------------------------------
AUTO_REUSE = "AUTO_REUSE"
_REGULARIZATION_LOSSES = "regularization_losses"  # tf.GraphKeys.REGULARIZATION_LOSSES


class VariableScope:
    """What ``get_variable`` takes from the enclosing ``variable_scope``: the
    name prefix, ``reuse``, and the defaults (initializer, regularizer,
    caching_device, partitioner, custom_getter, dtype)."""

    def __init__(self, reuse=None, name="", initializer=None, regularizer=None,
                 caching_device=None, partitioner=None, custom_getter=None,
                 name_scope="", dtype=dtypes.float32, **unused):
        self.name = name
        self.reuse = reuse
        self.initializer = initializer
        self.regularizer = regularizer
        self.caching_device = caching_device
        self.partitioner = partitioner
        self.dtype = dtypes.as_dtype(dtype)
        self.original_name_scope = name_scope or (name + "/" if name else "")
        self.custom_getter = None
        self.set_custom_getter(custom_getter)

    def reuse_variables(self):
        self.reuse = True

    def set_initializer(self, initializer):
        self.initializer = initializer

    def set_dtype(self, dtype):
        self.dtype = dtypes.as_dtype(dtype)

    def set_regularizer(self, regularizer):
        self.regularizer = regularizer

    def set_caching_device(self, caching_device):
        self.caching_device = caching_device

    def set_partitioner(self, partitioner):
        self.partitioner = partitioner

    def set_custom_getter(self, custom_getter):
        if custom_getter is not None and not callable(custom_getter):
            raise ValueError(f"The custom_getter must be callable. Got type "
                             f"{type(custom_getter).__name__}")
        self.custom_getter = custom_getter

    def get_variable(self, var_store, name, shape=None, dtype=None, initializer=None,
                     regularizer=None, reuse=None, trainable=None, collections=None,
                     caching_device=None, partitioner=None, validate_shape=True,
                     use_resource=None, custom_getter=None, constraint=None,
                     **unused):
        """``get_variable`` with this scope's name and defaults (the call's own
        arguments win; a call's ``custom_getter`` replaces the scope's)."""
        del var_store, use_resource
        if regularizer is None:
            regularizer = self.regularizer
        if caching_device is None:
            caching_device = self.caching_device
        if partitioner is None:
            partitioner = self.partitioner
        if custom_getter is None:
            custom_getter = self.custom_getter
        if dtype is not None and initializer is not None and not callable(initializer):
            _check_initializer_dtype(initializer, dtypes.as_dtype(dtype))
        if initializer is None:
            initializer = self.initializer
        if reuse is None or self.reuse is True:
            reuse = self.reuse
        full_name = (self.name + "/" if self.name else "") + name
        with get_default_graph().name_scope(None):
            return _store_get_variable(
                full_name, shape=shape, dtype=dtypes.as_dtype(dtype or self.dtype),
                initializer=initializer, regularizer=regularizer, reuse=reuse,
                trainable=trainable, collections=collections,
                caching_device=caching_device, partitioner=partitioner,
                validate_shape=validate_shape, custom_getter=custom_getter,
                constraint=constraint)


_var_scope_tl = threading.local()


def _scope_stack(graph):
    key = id(graph)
    stacks = getattr(_var_scope_tl, "stacks", None)
    if stacks is None:
        stacks = _var_scope_tl.stacks = {}
    return stacks.setdefault(key, [VariableScope()])


def get_variable_scope() -> VariableScope:
    return _scope_stack(get_default_graph())[-1]


def _maybe_wrap_custom_getter(custom_getter, old_getter):
    # TF1: the inner scope's getter runs first and gets, as its ``getter``, the
    # outer scope's getter bound to the real one.
    if old_getter is None:
        return custom_getter

    def wrapped_custom_getter(getter, *args, **kwargs):
        return custom_getter(functools.partial(old_getter, getter), *args, **kwargs)

    return wrapped_custom_getter


@contextlib.contextmanager
def variable_scope(name_or_scope, default_name=None, values=None, initializer=None,
                   regularizer=None, caching_device=None, partitioner=None,
                   custom_getter=None, reuse=None, dtype=None, use_resource=None,
                   constraint=None, auxiliary_name_scope=True):
    """A scope for ``get_variable``: names, ``reuse`` and defaults, and an op
    name scope of the same name (unless ``auxiliary_name_scope=False``).

    Defaults not given are inherited (from the scope object re-entered, else
    from the enclosing scope); a ``custom_getter`` wraps the inherited one.

    >>> import nbdist as nd
    >>> calls = []
    >>> def getter(getter, name, *args, **kwargs):
    ...     calls.append(name)
    ...     return getter(name, *args, **kwargs)
    >>> with nd.Graph().as_default():
    ...     with nd.variable_scope("layer", custom_getter=getter):
    ...         w = nd.get_variable("w", [2])
    >>> calls, w.op.name
    (['layer/w'], 'layer/w')
    """
    del values, use_resource, constraint
    g = get_default_graph()
    stack = _scope_stack(g)
    outer = stack[-1]
    # TF's count of opened scopes per full name: a default_name scope takes the
    # first free ``name``, ``name_1`` ...; leaving a named scope resets the
    # counts under it (so re-entering it reuses ``scope/dense``), leaving a
    # re-entered scope object restores them.
    used = getattr(g, "_var_scope_counts", None)
    if used is None:
        used = g._var_scope_counts = {}
    if isinstance(name_or_scope, VariableScope):
        base = name_or_scope
        full = name_or_scope.name
        base_reuse = name_or_scope.reuse
        used[full] = used.get(full, 0) + 1
        saved_counts = dict(used)
    else:
        base = outer
        short = name_or_scope if name_or_scope is not None else default_name
        if short is None:
            raise ValueError("variable_scope needs name_or_scope or default_name")
        prefix = outer.name + "/" if outer.name else ""
        if name_or_scope is None and used.get(prefix + short, 0):
            idx = 1
            while used.get(f"{prefix}{short}_{idx}", 0):
                idx += 1
            short = f"{short}_{idx}"
        full = prefix + short
        used[full] = used.get(full, 0) + 1
        saved_counts = None
        base_reuse = None
    new_reuse = True if (reuse is True or outer.reuse is True) else (
        reuse if reuse is not None else (base_reuse if base_reuse is not None
                                         else outer.reuse))
    if custom_getter is not None and not callable(custom_getter):
        raise ValueError(f"The custom_getter must be callable. Got type "
                         f"{type(custom_getter).__name__}")
    getter = (_maybe_wrap_custom_getter(custom_getter, base.custom_getter)
              if custom_getter is not None else base.custom_getter)
    scope = VariableScope(
        new_reuse, full, initializer or base.initializer,
        regularizer or base.regularizer,
        caching_device if caching_device is not None else base.caching_device,
        partitioner if partitioner is not None else base.partitioner, getter,
        dtype=dtypes.as_dtype(dtype) if dtype else base.dtype)
    stack.append(scope)
    try:
        if not auxiliary_name_scope:
            scope.original_name_scope = base.original_name_scope
            yield scope
        else:
            with g.name_scope(full + "/" if isinstance(name_or_scope, VariableScope)
                              else short):
                yield scope
    finally:
        stack.pop()
        if saved_counts is not None:
            used.clear()
            used.update(saved_counts)
        else:
            for key in used:
                if key.startswith(full + "/"):
                    used[key] = 0


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                 trainable=None, collections=None, caching_device=None,
                 partitioner=None, validate_shape=True, use_resource=None,
                 custom_getter=None, constraint=None, **unused):
    """Gets an existing variable (under ``reuse``) or creates a new one.

    With a ``partitioner`` (here or from the scope) and a shape of rank >= 1,
    returns a ``PartitionedVariable`` of shards ``<name>/part_<i>``. A
    ``custom_getter`` (here, or the scope's) is called as
    ``custom_getter(getter, name, *args, **kwargs)`` with the real getter.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     with nd.variable_scope("s"):
    ...         v = nd.get_variable("v", [2, 3])
    ...     with nd.variable_scope("s", reuse=True):
    ...         v is nd.get_variable("v")
    True
    """
    return get_variable_scope().get_variable(
        None, name, shape=shape, dtype=dtype, initializer=initializer,
        regularizer=regularizer, trainable=trainable, collections=collections,
        caching_device=caching_device, partitioner=partitioner,
        validate_shape=validate_shape, custom_getter=custom_getter,
        constraint=constraint)


def _check_initializer_dtype(initializer, dtype):
    value_dtype = getattr(initializer, "dtype", None)
    init_dtype = (dtypes.as_dtype(value_dtype).base_dtype if value_dtype is not None
                  else dtypes.infer_dtype(initializer))
    if init_dtype is not dtype.base_dtype:
        raise ValueError(f"Initializer type '{init_dtype!r}' and explicit dtype "
                         f"'{dtype!r}' don't match.")


def _takes(fn, arg) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    return arg in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _store_get_variable(name, shape=None, dtype=dtypes.float32, initializer=None,
                        regularizer=None, reuse=None, trainable=None,
                        collections=None, caching_device=None, partitioner=None,
                        validate_shape=True, custom_getter=None, constraint=None):
    # TF's _VariableStore.get_variable: the custom getter, else the true getter.
    if custom_getter is not None and not callable(custom_getter):
        raise ValueError(f"Passed a custom_getter which is not callable: "
                         f"{custom_getter}")

    def _true_getter(name, shape=None, dtype=dtypes.float32, initializer=None,
                     regularizer=None, reuse=None, trainable=None, collections=None,
                     caching_device=None, partitioner=None, validate_shape=True,
                     use_resource=None, constraint=None, **unused):
        dtype = dtypes.as_dtype(dtype)
        is_scalar = shape is not None and as_shape(shape).rank == 0
        if partitioner is not None and not is_scalar:
            if not callable(partitioner):
                raise ValueError(f"Partitioner must be callable, but received: "
                                 f"{partitioner}")
            return _get_partitioned_variable(
                name, partitioner, shape, dtype, initializer, regularizer, reuse,
                trainable, collections, caching_device, validate_shape, constraint)
        if f"{name}/part_0" in _vars(get_default_graph()):
            raise ValueError(f"No partitioner was provided, but a partitioned version "
                             f"of the variable was found: {name}/part_0. Perhaps a "
                             "variable of the same name was already created with "
                             "partitioning?")
        return _get_single_variable(
            name, shape, dtype, initializer, regularizer, None, reuse, trainable,
            collections, caching_device, validate_shape, constraint)

    if trainable is None:
        trainable = True  # TF1 resolves it before any getter sees it
    kwargs = {"name": name, "shape": shape, "dtype": dtype, "initializer": initializer,
              "regularizer": regularizer, "reuse": reuse, "trainable": trainable,
              "collections": collections, "caching_device": caching_device,
              "partitioner": partitioner, "validate_shape": validate_shape,
              "use_resource": None}
    if custom_getter is None:
        return _true_getter(constraint=constraint, **kwargs)
    if _takes(custom_getter, "constraint"):
        kwargs["constraint"] = constraint
    return custom_getter(getter=_true_getter, **kwargs)


def _vars(g) -> dict:
    return g.__dict__.setdefault("_var_store", {})


def _get_single_variable(name, shape, dtype, initializer, regularizer, partition_info,
                         reuse, trainable, collections, caching_device,
                         validate_shape, constraint):
    g = get_default_graph()
    store = _vars(g)
    if name in store:
        if reuse is None or reuse is False:
            raise ValueError(f"Variable {name} already exists, disallowed. Did you "
                             "mean to set reuse=True or reuse=nd.AUTO_REUSE in "
                             "VarScope?")
        v = store[name]
        if shape is not None and not as_shape(shape).is_compatible_with(v.shape):
            raise ValueError(f"Trying to share variable {name}, but specified shape "
                             f"{as_shape(shape)} and found shape {v.shape}.")
        return v
    if reuse is True:
        raise ValueError(f"Variable {name} does not exist, or was not created with "
                         "nd.get_variable(). Did you mean to set reuse=nd.AUTO_REUSE "
                         "in VarScope?")
    if initializer is None:
        initializer = (glorot_uniform_initializer() if dtype.is_floating
                       else zeros_initializer())
    if inspect.isclass(initializer):
        initializer = initializer()
    if isinstance(initializer, (Tensor, np.ndarray, list, int, float)) and not (
            callable(initializer)):
        init_value = initializer
    else:
        if shape is None:
            raise ValueError(f"The shape of variable {name} must be specified")
        dims = as_shape(shape).as_list()
        extra = ({"partition_info": partition_info}
                 if _takes(initializer, "partition_info") else {})

        def init_value():
            return initializer(dims, dtype=dtype, **extra)
    with g.name_scope(None):
        # A value initializer gives its own dtype (0 -> int32), as in TF.
        v = Variable(init_value, trainable=True if trainable is None else trainable,
                     collections=collections, validate_shape=validate_shape,
                     caching_device=caching_device, name=name,
                     dtype=None if not callable(init_value) else dtype,
                     constraint=constraint)
    store[name] = v
    if regularizer is not None:
        with g.name_scope(name + "/Regularizer/"), g.colocate_with(v.op):
            loss = regularizer(v)
        if loss is not None:
            g.add_to_collection(_REGULARIZATION_LOSSES, loss)
    return v


def _get_partitioned_variable(name, partitioner, shape, dtype, initializer,
                              regularizer, reuse, trainable, collections,
                              caching_device, validate_shape, constraint):
    g = get_default_graph()
    parts = g.__dict__.setdefault("_partitioned_var_store", {})
    store = _vars(g)
    if name in store:
        raise ValueError(f"A partitioner was provided, but an unpartitioned version of "
                         f"the variable was found: {name}. Perhaps a variable of the "
                         "same name was already created without partitioning?")
    init_tensor = isinstance(initializer, (Tensor, np.ndarray, list)) and not (
        callable(initializer))
    if init_tensor:
        initializer = convert_to_tensor(initializer, dtype=dtype)
        shape = initializer.shape if shape is None else shape
        dtype = initializer.dtype.base_dtype
    if shape is None:
        raise ValueError(f"The shape of partitioned variable {name} must be specified")
    shape = as_shape(shape)
    if shape.rank is not None and shape.rank < 1:
        raise ValueError(f"A partitioned Variable must have rank at least 1, shape: "
                         f"{shape}")
    partitions = partitioner(shape=shape, dtype=dtype)
    if not isinstance(partitions, (list, tuple)) or not all(
            isinstance(p, (int, np.integer)) for p in partitions):
        raise ValueError(f"Partitioner of {name} returned a non-list of ints: "
                         f"{partitions!r}")
    partitions = [int(p) for p in partitions]
    if len(partitions) != shape.rank:
        raise ValueError(f"Partitioner returned a partition list that does not match "
                         f"the Variable's rank: {partitions} vs. {shape}")
    if any(p < 1 for p in partitions):
        raise ValueError(f"Partitioner returned zero partitions for some axes: "
                         f"{partitions}")
    if name in parts:
        if reuse is None or reuse is False:
            raise ValueError(f"Partitioned variable with name {name} already exists. "
                             "Did you mean to set reuse=True or reuse=nd.AUTO_REUSE "
                             "in VarScope?")
        existing = parts[name]
        if not shape.is_compatible_with(existing.get_shape()):
            raise ValueError(f"Trying to reuse partitioned variable {name}, but "
                             f"specified shape {shape} and found shape "
                             f"{existing.get_shape()}.")
        if existing._get_partitions() != partitions:
            raise ValueError(f"Trying to reuse partitioned variable {name}, but "
                             f"specified partitions {partitions} and found partitions "
                             f"{existing._get_partitions()}.")
        return existing
    if reuse is True:
        raise ValueError(f"PartitionedVariable {name} does not exist, or was not "
                         "created with nd.get_variable(). Did you mean to set "
                         "reuse=False or reuse=nd.AUTO_REUSE in VarScope?")
    if not shape.is_fully_defined():
        raise ValueError(f"Shape of a new partitioned variable ({name}) must be fully "
                         f"defined, but instead was {shape}.")
    slice_dim, num_slices = slice_dim_and_num_slices(partitions)
    full_shape = shape.as_list()
    shards = []
    for i, (offset, var_shape) in enumerate(
            iter_slices(full_shape, num_slices, slice_dim)):
        shard_name = f"{name}/part_{i}"
        info = PartitionInfo(full_shape, offset)
        with g.name_scope(shard_name + "/PartitionedInitializer"):
            init, init_shape = initializer, var_shape
            if init_tensor:
                init, init_shape = slice_(initializer, offset, var_shape), None
        with g.name_scope(None):
            v = _get_single_variable(shard_name, init_shape, dtype, init, regularizer,
                                     info, reuse, trainable, collections,
                                     caching_device, validate_shape, constraint)
        v._set_save_slice_info(SaveSliceInfo(name, full_shape, offset, var_shape))
        shards.append(v)
    pv = PartitionedVariable(name, full_shape, dtype, shards, partitions)
    parts[name] = pv
    return pv


_install_variable_operators()

# Keep Operation importable for type checks in callers.
__all__ = ["Variable", "Operation"]

# TF's ``tf.Variable.SaveSliceInfo``: a shard's place in its partitioned variable.
Variable.SaveSliceInfo = SaveSliceInfo
