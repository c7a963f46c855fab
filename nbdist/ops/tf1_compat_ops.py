"""TF1's small top-level helpers: ``tf.print``, ``make_template``,
``histogram_fixed_width``, ``get_local_variable``, the enums and the graph-mode
answers of the v2 switches.

Example::

    t = nd.make_template("layer", lambda x: x * nd.get_variable("w", []))
    y1, y2 = t(a), t(b)          # both use layer/w
"""
from __future__ import annotations

import contextlib
import enum
import functools
import sys
import time

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework import ops as _ops
from nbdist.framework.constant_op import identity, stop_gradient
from nbdist.framework.ops import GraphKeys, convert_to_tensor, get_default_graph
from nbdist.framework.tensor import Tensor
from nbdist.ops import (
    array_ops, clip_ops, control_flow_ops, math_ops, nn_ops, script_ops, variables,
)


# -- enums ---------------------------------------------------------------------------
class AggregationMethod:
    """How ``gradients`` sums the gradients of one tensor (nbdist always adds)."""

    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


class UnconnectedGradients(enum.Enum):
    """``gradients(..., unconnected_gradients=UnconnectedGradients.ZERO)``."""

    NONE = "none"
    ZERO = "zero"


class VariableAggregation(enum.Enum):
    """How a mirrored variable's per-replica updates combine (TF1's values)."""

    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3
    ONLY_FIRST_TOWER = 3  # TF1's older name: an alias of ONLY_FIRST_REPLICA


class VariableSynchronization(enum.Enum):
    """When a distributed variable is synchronised (TF1's values)."""

    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3


# -- the v2 switches: graph-mode TF1 answers ----------------------------------------
_switches = {"control_flow_v2": False, "resource_variables": False}


def control_flow_v2_enabled():
    """False in TF1 graph mode (until ``enable_control_flow_v2()``)."""
    return _switches["control_flow_v2"]


def enable_control_flow_v2():
    """Records the switch; nbdist's ``cond``/``while_loop`` graphs are the same
    either way (the flag only changes what ``control_flow_v2_enabled`` says)."""
    _switches["control_flow_v2"] = True


def resource_variables_enabled():
    """False in TF1 graph mode (until ``enable_resource_variables()``)."""
    return _switches["resource_variables"]


def enable_resource_variables():
    """Records the switch; nbdist's variables read as TF's resource variables'
    snapshots do either way."""
    _switches["resource_variables"] = True


def executing_eagerly_outside_functions():
    """False: nbdist builds graphs (TF1 graph mode)."""
    return False


# -- small functions -----------------------------------------------------------------
def to_complex64(x, name="ToComplex64"):
    """``cast(x, complex64)`` (TF1's deprecated helper)."""
    return math_ops.cast(x, dtypes.complex64, name=name)


def to_complex128(x, name="ToComplex128"):
    """``cast(x, complex128)`` (TF1's deprecated helper)."""
    return math_ops.cast(x, dtypes.complex128, name=name)


def is_tensor(x):
    """True for a graph tensor (``Tensor``, ``SparseTensor``, ``IndexedSlices``,
    a ``Variable``), False for Python and NumPy values."""
    return isinstance(x, Tensor) or hasattr(x, "_as_graph_element") or (
        type(x).__name__ in ("SparseTensor", "IndexedSlices"))


def get_static_value(tensor, partial=False):
    """The NumPy value of ``tensor`` when known while building (a constant), else
    None. ``get_static_value(nd.constant([1, 2]))`` -> ``array([1, 2])``."""
    if not isinstance(tensor, Tensor):
        return np.asarray(tensor)
    value = _ops._static_value(tensor)
    return None if value is None else np.array(value)


def no_regularizer(_):
    """The regularizer that adds nothing (for ``variable_scope(regularizer=...)``)."""
    return None


def moving_average_variables(scope=None):
    """The variables an ``ExponentialMovingAverage.apply`` averaged."""
    return get_default_graph().get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


def get_local_variable(name, shape=None, dtype=None, initializer=None, **kwargs):
    """``get_variable`` in ``LOCAL_VARIABLES``, not trainable (TF1's semantics)."""
    kwargs["collections"] = [GraphKeys.LOCAL_VARIABLES] + list(
        kwargs.get("collections") or [])
    kwargs["trainable"] = False
    return variables.get_variable(name, shape=shape, dtype=dtype,
                                  initializer=initializer, **kwargs)


@contextlib.contextmanager
def init_scope():
    """A scope without the enclosing control dependencies, for building
    initialisers inside ``control_dependencies`` blocks (graph mode)."""
    with _ops.control_dependencies(None):
        yield


@contextlib.contextmanager
def op_scope(values, name, default_name=None):
    """TF1's deprecated ``name_scope`` with ``values`` first."""
    with _ops.name_scope(name, default_name, values) as scope:
        yield scope


@contextlib.contextmanager
def variable_op_scope(values, name_or_scope, default_name=None, **kwargs):
    """TF1's deprecated ``variable_scope`` with ``values`` first."""
    with variables.variable_scope(name_or_scope, default_name=default_name,
                                  values=values, **kwargs) as scope:
        yield scope


def clip_by_average_norm(t, clip_norm, name=None):
    """``t * clip_norm / max(l2norm(t) / size(t), clip_norm)``."""
    with _ops.name_scope(name, "clip_by_average_norm", [t, clip_norm]) as scope:
        t = convert_to_tensor(t, name="t")
        n = math_ops.cast(array_ops.size(t), t.dtype)
        avg = math_ops.sqrt(math_ops.reduce_sum(t * t)) / n
        clip = math_ops.cast(clip_norm, t.dtype)
        return math_ops.multiply(t, clip / math_ops.maximum(avg, clip), name=scope)


def histogram_fixed_width_bins(values, value_range, nbins=100, dtype=dtypes.int32,
                               name=None):
    """The bin of each value: ``floor(nbins * (v - lo) / (hi - lo))`` clipped to
    ``[0, nbins - 1]`` (values below ``lo`` go to bin 0, at or above ``hi`` to
    the last)."""
    with _ops.name_scope(name, "histogram_fixed_width_bins", [values, value_range]):
        values = convert_to_tensor(values, name="values")
        rng = math_ops.cast(convert_to_tensor(value_range), values.dtype)
        lo, hi = rng[0], rng[1]
        scaled = (values - lo) / (hi - lo) * math_ops.cast(nbins, values.dtype)
        idx = math_ops.cast(math_ops.floor(scaled), dtypes.int64)
        idx = clip_ops.clip_by_value(idx, np.int64(0), np.int64(nbins - 1))
        return math_ops.cast(idx, dtype)


def histogram_fixed_width(values, value_range, nbins=100, dtype=dtypes.int32,
                          name=None):
    """Counts of ``values`` in ``nbins`` equal bins over ``value_range``.

    ``histogram_fixed_width([-1., 0., 1.5, 2., 5., 15.], [0., 5.], nbins=5)``
    -> ``[2, 1, 1, 0, 2]``.
    """
    with _ops.name_scope(name, "histogram_fixed_width", [values, value_range]):
        bins = histogram_fixed_width_bins(values, value_range, nbins, dtypes.int32)
        flat = array_ops.reshape(bins, [-1])
        ones = array_ops.ones_like(flat, dtype=dtype)
        return nn_ops.unsorted_segment_sum(ones, flat, nbins)


def timestamp(name=None):
    """An op giving the seconds since the epoch (float64) each time it runs."""
    return script_ops.py_func(lambda: np.float64(time.time()), [], dtypes.float64,
                              stateful=True, name=name or "Timestamp")


def _scalar(v):
    if isinstance(v, bytes):
        return '"%s"' % v.decode("utf-8", "replace")  # TF quotes string elements
    return str(v.item() if hasattr(v, "item") else v)


def _format(a, summarize, depth=0):
    """TF's PrintV2 layout: ``[1 2 3]``, ``summarize`` items at each end with
    ``...`` between, nested rows on new lines."""
    if a.ndim == 0:
        return _scalar(a[()])
    n = a.shape[0]
    cut = 0 <= summarize < n - summarize
    idx = list(range(summarize)) + [None] + list(range(n - summarize, n)) if cut \
        else list(range(n))
    parts = ["..." if i is None else _format(a[i], summarize, depth + 1) for i in idx]
    sep = " " if a.ndim == 1 else "\n" + " " * (depth + 1)
    return "[" + sep.join(parts) + "]"


def print_v2(*inputs, output_stream=sys.stderr, sep=" ", end="\n", summarize=3,
             name=None):
    """``tf.print``: an op that writes its inputs' values when run.

    Tensors print as their values (``summarize`` items at each end of a
    dimension; -1 for all), other values as ``str``; ``output_stream`` is
    ``sys.stderr`` (default) or ``sys.stdout``.
    """
    tensors, slots = [], []
    for x in inputs:
        if is_tensor(x):
            slots.append((True, len(tensors)))
            tensors.append(x)
        else:
            slots.append((False, x))

    def _write(*vals):
        parts = [_format(np.asarray(vals[v]), summarize) if is_t else str(v)
                 for is_t, v in slots]
        output_stream.write(sep.join(parts) + end)
        output_stream.flush()
        return []

    return script_ops.py_func(_write, tensors, [], stateful=True,
                              name=name or "PrintV2")


def py_function(func, inp, Tout, name=None):  # noqa: N803
    """``func(*inp)`` run as an op (``func`` gets NumPy values, as ``py_func``)."""
    return script_ops.py_func(func, inp, Tout, stateful=True, name=name)


def grad_pass_through(f):
    """``f`` forward, identity gradient backward: ``x + stop_gradient(f(x) - x)``."""
    @functools.wraps(f)
    def wrapped(x):
        x = convert_to_tensor(x)
        return x + stop_gradient(f(x) - x)
    return wrapped


def recompute_grad(f):
    """``f`` itself: nbdist keeps activations, so recomputing would give the same
    gradients (TF recomputes to save memory)."""
    return f


def assert_variables_initialized(var_list=None):
    """An op that fails (FailedPreconditionError on run) unless every variable in
    ``var_list`` (default: all global and local ones) is initialised; None when
    there are none."""
    if var_list is None:
        var_list = variables.global_variables() + variables.local_variables()
    if not var_list:
        return None
    # Reading an uninitialised variable fails with TF's FailedPreconditionError
    # ("Attempting to use uninitialized value ..."), which is the check TF makes.
    with _ops.name_scope(None, "assert_variables_initialized", var_list):
        reads = [identity(v) for v in var_list]
        return control_flow_ops.group(*reads)


class Template:
    """``make_template``'s callable: the first call creates variables in its
    scope, later calls reuse them."""

    def __init__(self, name, func, create_scope_now=False, unique_name=None,
                 custom_getter=None):
        self._name = name
        self._func = func
        self._unique_name = unique_name
        self._custom_getter = custom_getter
        self._scope = None
        if create_scope_now:
            with variables.variable_scope(unique_name, default_name=name,
                                          custom_getter=custom_getter) as vs:
                self._scope = vs

    @property
    def variable_scope(self):
        return self._scope

    @property
    def variable_scope_name(self):
        return self._scope.name if self._scope is not None else None

    def __call__(self, *args, **kwargs):
        if self._scope is None:
            with variables.variable_scope(self._unique_name, default_name=self._name,
                                          custom_getter=self._custom_getter) as vs:
                self._scope = vs
                return self._func(*args, **kwargs)
        with variables.variable_scope(self._scope, reuse=True):
            return self._func(*args, **kwargs)


def make_template(name_, func_, create_scope_now_=False, unique_name_=None,
                  custom_getter_=None, **kwargs):
    """``func_`` wrapped so every call shares the variables the first created
    (under the scope ``name_``, made unique as TF does: ``name_``, ``name__1``)."""
    func = functools.partial(func_, **kwargs) if kwargs else func_
    return Template(name_, func, create_scope_now_, unique_name_, custom_getter_)


def is_symbolic_tensor(x):
    """True for a graph tensor: every nbdist tensor is symbolic (graph mode)."""
    return is_tensor(x)


def register_tensor_conversion_function(base_type, conversion_func, priority=100):
    """Lets ``convert_to_tensor`` accept ``base_type`` values through
    ``conversion_func(value, dtype=None, name=None, as_ref=False)``.

    ``priority`` is accepted for TF's signature; functions are tried in the
    order registered.
    """
    del priority
    _ops.register_tensor_conversion_function(base_type, conversion_func)


def vectorized_map(fn, elems, fallback_to_while_loop=True, warn=True):
    """``fn`` over the first dimension of ``elems``, run as TF's while-loop
    fallback (``map_fn``): ``fn``'s result has the dtypes of ``elems``."""
    del fallback_to_while_loop, warn
    from nbdist.ops.map_fn import map_fn  # noqa: PLC0415 - keeps this module light

    return map_fn(fn, elems)


def create_partitioned_variables(shape, slicing, initializer, dtype=dtypes.float32,
                                 trainable=True, collections=None, name=None,
                                 reuse=None):
    """The shards of one variable of ``shape`` cut as ``slicing`` says (one
    entry > 1), named ``<name or PartitionedVariable>/part_<i>`` as TF names them.

    ``create_partitioned_variables([4, 2], [2, 1], nd.ones_initializer())`` ->
    two ``[2, 2]`` variables.
    """
    if len(shape) != len(slicing):
        raise ValueError("The 'shape' and 'slicing' of a partitioned Variable must "
                         f"have the length: shape: {list(shape)}, "
                         f"slicing: {list(slicing)}")
    with variables.variable_scope(name, default_name="PartitionedVariable",
                                  reuse=reuse) as scope:
        partitioned = variables._get_partitioned_variable(
            scope.name, lambda **_: list(slicing), list(shape),
            dtypes.as_dtype(dtype), initializer, None, scope.reuse, trainable,
            collections, None, True, None)
    return list(partitioned)


def add_check_numerics_ops():
    """One ``check_numerics`` for every float output in the default graph,
    grouped: running the result fails (InvalidArgumentError naming the tensor
    ``<op>:<index>``) if any holds Inf or NaN."""
    from nbdist.ops.elementary_math_ops import check_numerics  # noqa: PLC0415

    graph = get_default_graph()
    checks = []
    for op in list(graph.get_operations()):
        for out in op.outputs:
            if out.dtype.base_dtype in (dtypes.float16, dtypes.float32,
                                        dtypes.float64):
                checks.append(check_numerics(out, f"{op.name}:{out.value_index}"))
    return control_flow_ops.group(*checks)
