"""``Variable``, ``get_variable``, ``variable_scope`` and the initializer ops."""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from nbdist.graph import dtypes, state_ops
from nbdist.graph.array_ops import identity
from nbdist.graph.control_flow_ops import group, no_op
from nbdist.graph.default_session import get_default_session
from nbdist.graph.op_def import REQUIRED, register_op
from nbdist.graph.ops import (GraphKeys, Operation, Tensor, convert_to_tensor,
                              get_default_graph,
                              register_tensor_conversion_function)
from nbdist.graph.shapes import TensorShape, as_shape


class Variable:
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
        with g.name_scope(name or "Variable") as scope:
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
                self._snapshot = identity(self._variable, name="read")
        self._trainable = trainable
        self._constraint = constraint
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

    def to_proto(self) -> dict:
        """The names that rebuild this variable in an imported graph."""
        return {"variable_name": self._variable.name,
                "initializer_name": self._initializer_op.name,
                "snapshot_name": self._snapshot.name,
                "initial_value_name": self._initial_value.name
                if self._initial_value is not None else "",
                "trainable": self._trainable}

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

    def scatter_add(self, sparse_delta_indices, updates, name=None):
        return state_ops.scatter_add(self._variable, sparse_delta_indices, updates,
                                     name=name)

    def initialized_value(self):
        from nbdist.graph.array_ops import identity as _id

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


# -- uninitialised reporting ----------------------------------------------------------
register_op("UninitializedNames",
            lambda c: [(dtypes.string, TensorShape([None]))],
            attrs={"names": ("list(string)", REQUIRED)})


def _all(var_list):
    return list(var_list)


def report_uninitialized_variables(var_list=None,
                                   name="report_uninitialized_variables"):
    """A 1-D string tensor: the names of the variables not yet initialised."""
    if var_list is None:
        var_list = global_variables() + local_variables()
    g = get_default_graph()
    with g.name_scope(name) as scope:
        flags = []
        for v in var_list:
            with g.colocate_with(v.op):
                flags.append(state_ops.is_variable_initialized(v._variable))
        op = g.create_op("UninitializedNames", flags,
                         {"names": [v.op.name for v in var_list]}, name=scope)
    return op.outputs[0]


def is_variable_initialized(variable):
    return state_ops.is_variable_initialized(variable)


# -- collections -----------------------------------------------------------------------
def global_variables(scope=None):
    return get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


all_variables = global_variables


def trainable_variables(scope=None):
    return get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def local_variables(scope=None):
    return get_default_graph().get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope=None):
    return get_default_graph().get_collection(GraphKeys.MODEL_VARIABLES, scope)


def variables_initializer(var_list, name="init"):
    """An op that runs the initializers of ``var_list``."""
    if var_list:
        return group(*[v.initializer for v in var_list], name=name)
    return no_op(name=name)


def global_variables_initializer():
    return variables_initializer(global_variables())


initialize_all_variables = global_variables_initializer


def local_variables_initializer():
    return variables_initializer(local_variables(), name="init")


# -- initializers ---------------------------------------------------------------------
class Initializer:
    """``init(shape, dtype)`` returns a tensor of that shape and dtype."""

    def __call__(self, shape, dtype=None, partition_info=None):
        raise NotImplementedError


class zeros_initializer(Initializer):  # noqa: N801 - TF's names
    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.graph.array_ops import constant

        dtype = dtypes.as_dtype(dtype or self.dtype)
        return constant(np.zeros(as_shape(shape).as_list(), dtype.as_numpy_dtype),
                        dtype=dtype)


class ones_initializer(Initializer):  # noqa: N801
    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.graph.array_ops import constant

        dtype = dtypes.as_dtype(dtype or self.dtype)
        return constant(np.ones(as_shape(shape).as_list(), dtype.as_numpy_dtype),
                        dtype=dtype)


class constant_initializer(Initializer):  # noqa: N801
    def __init__(self, value=0, dtype=dtypes.float32, verify_shape=False):
        self.value = value
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.graph.array_ops import constant

        dtype = dtypes.as_dtype(dtype or self.dtype)
        return constant(self.value, dtype=dtype, shape=shape)


class random_normal_initializer(Initializer):  # noqa: N801
    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=dtypes.float32):
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.graph.random_ops import random_normal

        return random_normal(shape, self.mean, self.stddev,
                             dtype or self.dtype, seed=self.seed)


class random_uniform_initializer(Initializer):  # noqa: N801
    def __init__(self, minval=0.0, maxval=None, seed=None, dtype=dtypes.float32):
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.graph.random_ops import random_uniform

        maxval = 1.0 if self.maxval is None else self.maxval
        return random_uniform(shape, self.minval, maxval, dtype or self.dtype,
                              seed=self.seed)


class glorot_uniform_initializer(Initializer):  # noqa: N801
    def __init__(self, seed=None, dtype=dtypes.float32):
        self.seed = seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.graph.random_ops import random_uniform

        dims = as_shape(shape).as_list()
        if len(dims) == 0:
            fan_in = fan_out = 1
        elif len(dims) == 1:
            fan_in = fan_out = dims[0]
        else:
            receptive = int(np.prod(dims[:-2])) if len(dims) > 2 else 1
            fan_in, fan_out = dims[-2] * receptive, dims[-1] * receptive
        limit = float(np.sqrt(6.0 / max(1.0, (fan_in + fan_out))))
        return random_uniform(shape, -limit, limit, dtype or self.dtype,
                              seed=self.seed)


# -- variable scopes and get_variable -----------------------------------------------------
AUTO_REUSE = "AUTO_REUSE"


class VariableScope:
    def __init__(self, name="", reuse=None, initializer=None, dtype=dtypes.float32):
        self.name = name
        self.reuse = reuse
        self.initializer = initializer
        self.dtype = dtype
        self.original_name_scope = name + "/" if name else ""

    def reuse_variables(self):
        self.reuse = True


_var_scope_tl = threading.local()


def _scope_stack(graph):
    key = id(graph)
    stacks = getattr(_var_scope_tl, "stacks", None)
    if stacks is None:
        stacks = _var_scope_tl.stacks = {}
    return stacks.setdefault(key, [VariableScope()])


def get_variable_scope() -> VariableScope:
    return _scope_stack(get_default_graph())[-1]


@contextlib.contextmanager
def variable_scope(name_or_scope, default_name=None, values=None, initializer=None,
                   reuse=None, dtype=None, **unused):
    """A scope for ``get_variable`` names (and an op name scope of the same name)."""
    g = get_default_graph()
    stack = _scope_stack(g)
    outer = stack[-1]
    if isinstance(name_or_scope, VariableScope):
        full = name_or_scope.name
        base_reuse = name_or_scope.reuse
    else:
        short = name_or_scope if name_or_scope is not None else default_name
        if short is None:
            raise ValueError("variable_scope needs name_or_scope or default_name")
        if name_or_scope is None:
            # default_name scopes are made unique, as TF does.
            used = getattr(g, "_var_scope_counts", None)
            if used is None:
                used = g._var_scope_counts = {}
            cand = (outer.name + "/" if outer.name else "") + short
            n = used.get(cand, 0)
            used[cand] = n + 1
            short = short if n == 0 else f"{short}_{n}"
        full = (outer.name + "/" if outer.name else "") + short
        base_reuse = None
    new_reuse = True if (reuse is True or outer.reuse is True) else (
        reuse if reuse is not None else (base_reuse if base_reuse is not None
                                         else outer.reuse))
    scope = VariableScope(full, new_reuse,
                          initializer or outer.initializer,
                          dtypes.as_dtype(dtype) if dtype else outer.dtype)
    stack.append(scope)
    try:
        with g.name_scope(full + "/" if isinstance(name_or_scope, VariableScope)
                          else short):
            yield scope
    finally:
        stack.pop()


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                 trainable=None, collections=None, caching_device=None,
                 partitioner=None, validate_shape=True, use_resource=None,
                 custom_getter=None, constraint=None, **unused) -> Variable:
    """Gets an existing variable (under ``reuse``) or creates a new one."""
    g = get_default_graph()
    scope = get_variable_scope()
    full = (scope.name + "/" if scope.name else "") + name
    store = g.__dict__.setdefault("_var_store", {})
    if full in store:
        if scope.reuse is None or scope.reuse is False:
            raise ValueError(f"Variable {full} already exists, disallowed. Did you "
                             "mean to set reuse=True or reuse=nd.AUTO_REUSE in "
                             "VarScope?")
        v = store[full]
        if shape is not None and not as_shape(shape).is_compatible_with(v.shape):
            raise ValueError(f"Trying to share variable {full}, but specified shape "
                             f"{as_shape(shape)} and found shape {v.shape}.")
        return v
    if scope.reuse is True:
        raise ValueError(f"Variable {full} does not exist, or was not created with "
                         "nd.get_variable(). Did you mean to set reuse=nd.AUTO_REUSE "
                         "in VarScope?")
    dtype = dtypes.as_dtype(dtype or scope.dtype)
    initializer = initializer if initializer is not None else scope.initializer
    if initializer is None:
        initializer = (glorot_uniform_initializer() if dtype.is_floating
                       else zeros_initializer())
    if isinstance(initializer, (Tensor, np.ndarray, list, int, float)) and not (
            callable(initializer)):
        init_value = initializer
        if shape is not None and validate_shape:
            pass
    else:
        if shape is None:
            raise ValueError(f"The shape of variable {full} must be specified")
        shp = as_shape(shape)

        def init_value():
            return initializer(shp, dtype=dtype)
    with g.name_scope(None):
        v = Variable(init_value, trainable=True if trainable is None else trainable,
                     collections=collections, validate_shape=validate_shape,
                     name=full, dtype=dtype, constraint=constraint)
    store[full] = v
    return v


_install_variable_operators()

# Keep Operation importable for type checks in callers.
__all__ = ["Variable", "Operation"]
