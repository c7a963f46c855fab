"""``nd.data``: datasets as graph ops, iterators as resources of a task.

    >>> import nbdist as nd
    >>> ds = nd.data.Dataset.range(5).map(lambda x: x * 2).batch(2)
    >>> it = ds.make_one_shot_iterator()
    >>> nxt = it.get_next()
    >>> with nd.Session() as s:
    ...     [s.run(nxt).tolist() for _ in range(3)]
    [[0, 2], [4, 6], [8]]

A ``Dataset`` is the output of a dataset op (``TensorSliceDataset``,
``RangeDataset``, ``MapDataset`` ...), a ``resource`` tensor whose kernel
builds a Python description of the elements; nothing is computed until an
iterator asks. Dataset ops pass their input dataset as a resource edge, so
the placer puts a whole dataset chain on the task of the iterator that reads
it: a dataset defined in a client graph is instantiated on whatever task its
iterator op is placed on (use one dataset per iterator).

Iterators live in the resource manager of their task, keyed by container
and shared name (or node name), like variables; a function graph that names
the same iterator reads the one on the task it runs on. ``IteratorGetNext``
raises ``OutOfRangeError`` ("End of sequence") at the end.

Elements are tuples/dicts (or single tensors) of NumPy values. As in
``tf.data``, a Python list given to ``from_tensor_slices`` is one tensor,
not a structure. ``map`` traces its function (``nd.function`` rules:
constants and variables may be captured) into a ``FunctionDef`` that the
kernel runs per element. ``prefetch`` is a pass-through: elements are made
on demand, in the step that asks for them, on the iterator's task.
"""

from __future__ import annotations

import numpy as np

from nbdist.distribute.data.dataset_transforms import DatasetTransformations
from nbdist.distribute.tracing import function as _function
from nbdist.distribute.tracing.tensor_spec import TensorSpec
from nbdist.framework import dtypes
from nbdist.framework import ops as _ops
from nbdist.framework.func_graph import (
    register_copyable_op,
    register_rebinder,
    tracing_graph,
)
from nbdist.framework.nest import flatten, map_structure, pack_sequence_as
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import Tensor, convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape, as_shape

__all__ = [
    "AUTOTUNE",
    "Dataset",
    "DatasetSpec",
    "Iterator",
    "make_initializable_iterator",
    "make_one_shot_iterator",
]

AUTOTUNE = -1

# -- op definitions ---------------------------------------------------------------
_SPEC_ATTRS = {"output_types": ("list(type)", REQUIRED),
               "output_shapes": ("list(shape)", REQUIRED)}


def _dataset_infer(*scalar_inputs):
    """A dataset op: input 0 (if any) is a dataset, the others int64/bool scalars."""

    def infer(c):
        n = len(c.input_dtypes)
        start = 0
        if scalar_inputs and scalar_inputs[0] == "dataset":
            if not n or c.dtype(0) is not dtypes.resource:
                raise TypeError(f"{c.op_type} needs a dataset as input 0")
            start = 1
        for i in range(start, n):
            want = scalar_inputs[i] if i < len(scalar_inputs) else None
            if want is not None and want != "dataset" and c.dtype(i) is not want:
                raise TypeError(f"input {i} of {c.op_type} must be {want.name}, got "
                                f"{c.dtype(i).name}")
            if c.shape(i).rank not in (None, 0):
                raise ValueError(f"input {i} of {c.op_type} must be a scalar, got "
                                 f"shape {c.shape(i)}")
        if len(c.attr("output_types")) != len(c.attr("output_shapes")):
            raise ValueError("output_types and output_shapes differ in length")
        return [(dtypes.resource, TensorShape([]))]

    return infer


def _components_infer(c):
    if len(c.input_dtypes) != len(c.attr("output_types")):
        raise ValueError(f"{len(c.input_dtypes)} components but "
                         f"{len(c.attr('output_types'))} output_types")
    for i, t in enumerate(c.attr("output_types")):
        if c.dtype(i) is not t:
            raise TypeError(f"component {i} is {c.dtype(i).name}, output_types says "
                            f"{t.name}")
    return [(dtypes.resource, TensorShape([]))]


i64, b = dtypes.int64, dtypes.bool
register_op("TensorSliceDataset", _components_infer, attrs=_SPEC_ATTRS, min_inputs=1)
register_op("TensorDataset", _components_infer, attrs=_SPEC_ATTRS, min_inputs=1)
register_op("RangeDataset", _dataset_infer(i64, i64, i64), attrs=_SPEC_ATTRS,
            num_inputs=3)
register_op("MapDataset", _dataset_infer("dataset"),
            attrs=dict(_SPEC_ATTRS, f=("func", REQUIRED)), num_inputs=1,
            ref_inputs=(0,))
register_op("BatchDatasetV2", _dataset_infer("dataset", i64, b), attrs=_SPEC_ATTRS,
            num_inputs=3, ref_inputs=(0,))
register_op("RepeatDataset", _dataset_infer("dataset", i64), attrs=_SPEC_ATTRS,
            num_inputs=2, ref_inputs=(0,))
register_op("ShuffleDataset", _dataset_infer("dataset", i64, i64, i64),
            attrs=dict(_SPEC_ATTRS, reshuffle_each_iteration=("bool", True)),
            num_inputs=4, ref_inputs=(0,))
register_op("TakeDataset", _dataset_infer("dataset", i64), attrs=_SPEC_ATTRS,
            num_inputs=2, ref_inputs=(0,))
register_op("PrefetchDataset", _dataset_infer("dataset", i64), attrs=_SPEC_ATTRS,
            num_inputs=2, ref_inputs=(0,))
DATASET_OPS = ("TensorSliceDataset", "TensorDataset", "RangeDataset", "MapDataset",
               "BatchDatasetV2", "RepeatDataset", "ShuffleDataset", "TakeDataset",
               "PrefetchDataset")

_ITER_ATTRS = dict(_SPEC_ATTRS, shared_name=("string", ""), container=("string", ""))


def _handle_out(c):
    return [(dtypes.resource, TensorShape([]))]


def _from_dataset(c):
    if c.dtype(0) is not dtypes.resource:
        raise TypeError(f"{c.op_type} needs a dataset as input 0")
    return _handle_out(c)


# IteratorV2: the iterator resource (by container and shared_name or node name).
register_op("IteratorV2", _handle_out, attrs=_ITER_ATTRS, num_inputs=0,
            stateful=True)
# OneShotIterator(dataset): the iterator resource, initialized from its input on
# first use. (TF's op takes a dataset_factory function; this one an input.)
register_op("OneShotIterator", _from_dataset, attrs=_ITER_ATTRS, num_inputs=1,
            ref_inputs=(0,), stateful=True)
# AnonymousIterator(dataset): a fresh iterator per step (iter() in a function).
register_op("AnonymousIterator", _from_dataset, attrs=_SPEC_ATTRS, num_inputs=1,
            ref_inputs=(0,), stateful=True)


def _make_iterator_infer(c):
    if c.dtype(0) is not dtypes.resource or c.dtype(1) is not dtypes.resource:
        raise TypeError("MakeIterator needs a dataset and an iterator")
    return []


register_op("MakeIterator", _make_iterator_infer, num_inputs=2, ref_inputs=(0, 1),
            stateful=True)


def _get_next_infer(c):
    if c.dtype(0) is not dtypes.resource:
        raise TypeError("IteratorGetNext needs an iterator")
    return list(zip(c.attr("output_types"), c.attr("output_shapes")))


register_op("IteratorGetNext", _get_next_infer, attrs=_SPEC_ATTRS, num_inputs=1,
            ref_inputs=(0,), stateful=True)

for _t in DATASET_OPS:
    register_copyable_op(_t)


def _rebind_iterator(fg, op):
    """A captured iterator handle becomes an ``IteratorV2`` of the same resource
    (same container and shared name, same device) in the function graph."""
    a = op.attrs
    attrs = {"output_types": a["output_types"], "output_shapes": a["output_shapes"],
             "container": a["container"],
             "shared_name": a["shared_name"] or op.name}
    return fg.rebind_op("IteratorV2", [], attrs, op.name, op.device,
                        a.get("_class")).outputs[0]


register_rebinder("IteratorV2", _rebind_iterator)
register_rebinder("OneShotIterator", _rebind_iterator)


# -- Python API ------------------------------------------------------------------------
def _graph():
    return tracing_graph() or _ops.get_default_graph()


def _flat(structure):
    return flatten(structure, lists_are_leaves=True)


def _pack(structure, flat):
    return pack_sequence_as(structure, flat, lists_are_leaves=True)


def _scalar(g, value, dtype, name):
    with g.as_default():
        return convert_to_tensor(value, dtype=dtype, name=name)


class Dataset(DatasetTransformations):
    """A sequence of elements, described by graph ops (see the module docstring;
    more transformations in ``dataset_transforms``)."""

    def __init__(self, variant: Tensor, element_spec):
        self._variant = variant
        self._spec = element_spec

    # -- structure ------------------------------------------------------------------
    @property
    def element_spec(self):
        """The nested ``TensorSpec``s of an element."""
        return self._spec

    @property
    def output_types(self):
        return map_structure(lambda s: s.dtype, self._spec, True)

    @property
    def output_shapes(self):
        return map_structure(lambda s: s.shape, self._spec, True)

    @property
    def output_classes(self):
        return map_structure(lambda s: Tensor, self._spec, True)

    @property
    def _variant_tensor(self) -> Tensor:
        return self._variant

    def _spec_attrs(self, spec=None):
        flat = _flat(self._spec if spec is None else spec)
        return {"output_types": [s.dtype for s in flat],
                "output_shapes": [s.shape for s in flat]}

    def _apply(self, op_type, scalars, spec=None, attrs=None, name=None,
               datasets=()):
        """A dataset op over this dataset (then ``datasets``) and the scalar
        inputs ``scalars`` (name, value, dtype); its elements are ``spec``."""
        g = _graph()
        extra = [_scalar(g, v, d, n) for n, v, d in scalars]
        a = self._spec_attrs(spec)
        a.update(attrs or {})
        inputs = [self._variant] + [d._variant for d in datasets] + extra
        op = g.create_op(op_type, inputs, a, name=name or op_type)
        out = Dataset(op.outputs[0], self._spec if spec is None else spec)
        if getattr(self, "_options", None) is not None:
            out._options = self._options
        return out

    def _trace(self, fn):
        """``fn`` traced over an element (a tuple is unpacked into arguments),
        its FunctionDef added to the graph's library: (FunctionDef,
        ConcreteFunction)."""
        spec = self._spec
        args = tuple(spec) if type(spec) is tuple else (spec,)
        leaves = [_function._Leaf("tensor", s._key(), s) for s in flatten(args)]
        fname = getattr(fn, "__name__", "map_fn")
        if fname == "<lambda>":
            fname = "map_lambda"
        concrete = _function.trace(fn, args, {}, leaves, fname,
                                   tensor_outputs_only=True)
        fd = concrete.to_function_def()
        for inner in concrete.graph.functions + [fd]:
            _graph().add_function(inner)
        return fd, concrete

    def __repr__(self):
        return f"<nd.data.Dataset element_spec={self._spec}>"

    @staticmethod
    def _source(variant, spec):
        return Dataset(variant, spec)

    @property
    def _type_spec(self):
        return DatasetSpec(self._spec)

    # -- sources --------------------------------------------------------------------
    @staticmethod
    def from_tensor_slices(tensors, name=None) -> Dataset:
        """Elements are the slices of ``tensors`` along their first dimension."""
        g = _graph()
        with g.as_default():
            flat = [convert_to_tensor(t, name=f"component_{i}")
                    for i, t in enumerate(_flat(tensors))]
        if not flat:
            raise ValueError("from_tensor_slices needs at least one tensor")
        n = None
        for t in flat:
            if t.shape.rank == 0:
                raise ValueError(f"from_tensor_slices: {t.name} is a scalar; every "
                                 "component needs a first dimension to slice")
            if t.shape.rank is not None and t.shape[0] is not None:
                if n is not None and n != t.shape[0]:
                    raise ValueError(f"from_tensor_slices: components have "
                                     f"different first dimensions ({n} and "
                                     f"{t.shape[0]})")
                n = t.shape[0]
        specs = [TensorSpec(TensorShape(None) if t.shape.rank is None
                            else TensorShape(t.shape.dims[1:]), t.dtype.base_dtype)
                 for t in flat]
        spec = _pack(tensors, specs)
        ds = Dataset(None, spec)
        op = g.create_op("TensorSliceDataset", flat, ds._spec_attrs(),
                         name=name or "TensorSliceDataset")
        ds._variant = op.outputs[0]
        return ds

    @staticmethod
    def from_tensors(tensors, name=None) -> Dataset:
        """One element: ``tensors``."""
        g = _graph()
        with g.as_default():
            flat = [convert_to_tensor(t, name=f"component_{i}")
                    for i, t in enumerate(_flat(tensors))]
        spec = _pack(tensors, [TensorSpec(t.shape, t.dtype.base_dtype) for t in flat])
        ds = Dataset(None, spec)
        op = g.create_op("TensorDataset", flat, ds._spec_attrs(),
                         name=name or "TensorDataset")
        ds._variant = op.outputs[0]
        return ds

    @staticmethod
    def range(*args, output_type=dtypes.int64, name=None) -> Dataset:
        """``range(stop)``, ``range(start, stop[, step])``: int64 scalars."""
        if not 1 <= len(args) <= 3:
            raise TypeError("Dataset.range takes 1 to 3 arguments")
        start, stop, step = ((0, args[0], 1) if len(args) == 1 else
                             (args[0], args[1], args[2] if len(args) == 3 else 1))
        g = _graph()
        ins = [_scalar(g, v, dtypes.int64, n)
               for n, v in (("start", start), ("stop", stop), ("step", step))]
        spec = TensorSpec([], output_type)
        ds = Dataset(None, spec)
        op = g.create_op("RangeDataset", ins, ds._spec_attrs(),
                         name=name or "RangeDataset")
        ds._variant = op.outputs[0]
        return ds

    # -- transformations ------------------------------------------------------------
    def map(self, map_func, num_parallel_calls=None, deterministic=None,
            name=None) -> Dataset:
        """Applies ``map_func`` to each element (a tuple element is unpacked into
        positional arguments). The function is traced once, with ``nd.function``
        rules, and runs per element on the iterator's task. ``num_parallel_calls``
        is accepted and ignored (elements are mapped in order, one at a time)."""
        fd, concrete = self._trace(map_func)
        out = concrete.structured_outputs
        if isinstance(out, list):
            out = tuple(out)
        out_spec = map_structure(lambda t: TensorSpec(t.shape, t.dtype.base_dtype),
                                 out, True)
        ds = self._apply("MapDataset", [], out_spec,
                         {"f": fd.name, "_fdef": fd.SerializeToString()},
                         name=name or "MapDataset")
        ds._map_function = concrete
        return ds

    def batch(self, batch_size, drop_remainder=False, name=None) -> Dataset:
        """Stacks ``batch_size`` consecutive elements; the last batch may be
        smaller unless ``drop_remainder``."""
        static = None
        if isinstance(batch_size, (int, np.integer)):
            if batch_size <= 0:
                raise ValueError(f"batch_size must be positive, got {batch_size}")
            static = int(batch_size) if drop_remainder is True else None
        spec = map_structure(
            lambda s: TensorSpec(TensorShape([static]).concatenate(s.shape)
                                 if s.shape.rank is not None else TensorShape(None),
                                 s.dtype), self._spec, True)
        return self._apply("BatchDatasetV2",
                           [("batch_size", batch_size, dtypes.int64),
                            ("drop_remainder", drop_remainder, dtypes.bool)],
                           spec, name=name or "BatchDatasetV2")

    def repeat(self, count=None, name=None) -> Dataset:
        """Repeats the dataset ``count`` times (forever when None or -1)."""
        return self._apply("RepeatDataset",
                           [("count", -1 if count is None else count, dtypes.int64)],
                           name=name or "RepeatDataset")

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True,
                name=None) -> Dataset:
        """Shuffles with a buffer of ``buffer_size`` elements (TF's algorithm).
        With a seed (op or graph level) the order is deterministic; each pass
        of a repeated dataset reshuffles unless ``reshuffle_each_iteration`` is
        False."""
        s1, s2 = _ops.get_seed(seed)
        s1, s2 = (0, 0) if s1 is None else (s1, s2)
        return self._apply("ShuffleDataset",
                           [("buffer_size", buffer_size, dtypes.int64),
                            ("seed", s1, dtypes.int64), ("seed2", s2, dtypes.int64)],
                           attrs={"reshuffle_each_iteration":
                                  bool(reshuffle_each_iteration)},
                           name=name or "ShuffleDataset")

    def take(self, count, name=None) -> Dataset:
        """The first ``count`` elements (all of them when -1)."""
        return self._apply("TakeDataset", [("count", count, dtypes.int64)],
                           name=name or "TakeDataset")

    def prefetch(self, buffer_size, name=None) -> Dataset:
        """A pass-through: nbdist makes elements on demand (see the module
        docstring); kept so TF input pipelines run unchanged."""
        return self._apply("PrefetchDataset",
                           [("buffer_size", buffer_size, dtypes.int64)],
                           name=name or "PrefetchDataset")

    # -- iterators ------------------------------------------------------------------
    def make_one_shot_iterator(self, shared_name="", name=None) -> Iterator:
        """An iterator that initializes itself on first use."""
        g = _graph()
        attrs = dict(self._spec_attrs(), shared_name=shared_name or "",
                     container="")
        op = g.create_op("OneShotIterator", [self._variant], attrs,
                         name=name or "OneShotIterator")
        return Iterator(op.outputs[0], None, self._spec)

    def make_initializable_iterator(self, shared_name=None, name=None) -> Iterator:
        """An iterator to initialize by running ``iterator.initializer`` (again
        to restart it)."""
        g = _graph()
        attrs = dict(self._spec_attrs(), shared_name=shared_name or "",
                     container="")
        op = g.create_op("IteratorV2", [], attrs, name=name or "Iterator")
        init = g.create_op("MakeIterator", [self._variant, op.outputs[0]], {},
                           name="MakeIterator")
        return Iterator(op.outputs[0], init, self._spec)

    def __iter__(self):
        if tracing_graph() is None:
            raise RuntimeError(
                "iter(dataset) creates an iterator only inside an nd.function (or "
                "through a ClusterCoordinator); in a graph use "
                "dataset.make_one_shot_iterator() or make_initializable_iterator()")
        g = tracing_graph()
        op = g.create_op("AnonymousIterator", [self._variant], self._spec_attrs(),
                         name="AnonymousIterator")
        return Iterator(op.outputs[0], None, self._spec)

    def _nd_function_arg_key(self):
        return ("Dataset", id(self))


class DatasetSpec:
    """The type of a dataset: its ``element_spec`` (and the shape of a batch of
    datasets, ``[]`` for one), as TF's ``tf.data.DatasetSpec``.

    >>> import nbdist as nd
    >>> nd.data.DatasetSpec.from_value(nd.data.Dataset.range(2))
    DatasetSpec(TensorSpec(shape=(), dtype=nd.int64, name=None), TensorShape([]))
    """

    def __init__(self, element_spec, dataset_shape=()):
        self._element_spec = element_spec
        self._dataset_shape = as_shape(dataset_shape)

    element_spec = property(lambda self: self._element_spec)

    @property
    def value_type(self):
        return Dataset

    @staticmethod
    def from_value(value):
        """The spec of the dataset ``value``."""
        return DatasetSpec(value.element_spec)

    def is_compatible_with(self, other) -> bool:
        if not isinstance(other, DatasetSpec):
            if not hasattr(other, "element_spec"):
                return False
            other = DatasetSpec.from_value(other)
        return self == other

    def __eq__(self, other):
        return (isinstance(other, DatasetSpec)
                and self._element_spec == other._element_spec
                and self._dataset_shape == other._dataset_shape)

    def __hash__(self):
        return hash(repr(self))

    def __repr__(self):
        shape = f"TensorShape({self._dataset_shape.as_list()})"
        return f"DatasetSpec({self._element_spec!r}, {shape})"


class Iterator:
    """An iterator resource (``handle``) and its element structure.

    ``get_next()`` adds an ``IteratorGetNext`` op; inside an ``nd.function``,
    ``next(iterator)`` does the same. Passed to an ``nd.function``, an iterator
    is re-bound by its shared name: the function reads the iterator of that
    name on the task it runs on.
    """

    def __init__(self, handle: Tensor, initializer, element_spec):
        self._handle = handle
        self._initializer = initializer
        self._spec = element_spec

    element_spec = property(lambda self: self._spec)
    output_types = Dataset.output_types
    output_shapes = Dataset.output_shapes
    output_classes = Dataset.output_classes
    _spec_attrs = Dataset._spec_attrs

    @staticmethod
    def from_structure(output_types, output_shapes=None, shared_name=None,
                       output_classes=None):
        """A reinitializable iterator of elements of ``output_types`` (and
        ``output_shapes``): ``make_initializer(dataset)`` points it at any
        dataset of that structure.

        >>> import nbdist as nd
        >>> a, b = nd.data.Dataset.range(3), nd.data.Dataset.range(10, 12)
        >>> it = nd.data.Iterator.from_structure(a.output_types, a.output_shapes)
        >>> init_a, init_b, nxt = (it.make_initializer(a), it.make_initializer(b),
        ...                        it.get_next())
        >>> with nd.Session() as s:
        ...     _ = s.run(init_b)
        ...     int(s.run(nxt))
        10
        """
        del output_classes  # every component is a Tensor
        types = map_structure(dtypes.as_dtype, output_types, True)
        shapes = (map_structure(lambda _: TensorShape(None), types, True)
                  if output_shapes is None else pack_sequence_as(
                      types, [TensorShape(s) if not isinstance(s, TensorShape)
                              else s for s in _flat_shapes(types, output_shapes)],
                      lists_are_leaves=True))
        spec = pack_sequence_as(types, [TensorSpec(s, t) for t, s in zip(
            _flat(types), _flat(shapes))], lists_are_leaves=True)
        g = _graph()
        attrs = dict(Dataset(None, spec)._spec_attrs(),
                     shared_name=shared_name or "", container="")
        op = g.create_op("IteratorV2", [], attrs, name="Iterator")
        return Iterator(op.outputs[0], None, spec)

    def make_initializer(self, dataset, name=None):
        """An op that (re)starts this iterator on ``dataset``, whose elements
        must have this iterator's structure and dtypes."""
        mine, theirs = _flat(self.output_types), _flat(dataset.output_types)
        if mine != theirs:
            def names(ts):
                return ", ".join(f"tf.{t.name}" for t in ts)

            raise TypeError(f"Expected output types {names(mine)} but got dataset "
                            f"with output types {names(theirs)}.")
        g = self._handle.graph
        return g.create_op("MakeIterator", [dataset._variant, self._handle], {},
                           name=name or "MakeIterator")

    @property
    def initializer(self):
        if self._initializer is None:
            raise ValueError("The iterator does not have an initializer. This "
                             "means it was likely created using "
                             "`tf.data.Dataset.make_one_shot_iterator()` (or "
                             "`Iterator.from_structure`: use make_initializer). "
                             "For an initializable iterator, use "
                             "`tf.data.Dataset.make_initializable_iterator()` "
                             "instead.")
        return self._initializer

    @property
    def handle(self) -> Tensor:
        return self._handle

    @property
    def shared_name(self) -> str:
        op = self._handle.op
        return op.attrs.get("shared_name", "")

    def get_next(self, name=None):
        g = tracing_graph() or self._handle.graph
        op = g.create_op("IteratorGetNext", [self._handle], self._spec_attrs(),
                         name=name or "IteratorGetNext")
        return _pack(self._spec, op.outputs)

    def __next__(self):
        if tracing_graph() is None:
            raise TypeError("next(iterator) works inside an nd.function; in a graph "
                            "use iterator.get_next() and run it")
        return self.get_next()

    def __iter__(self):
        return self

    def _nd_function_arg_key(self):
        op = self._handle.op
        a = op.attrs
        if op.type == "AnonymousIterator":
            return ("Iterator", id(self))
        return ("Iterator", op.type, a.get("container", ""),
                a.get("shared_name") or op.name, op.device,
                tuple(t.name for t in a["output_types"]),
                tuple(str(s) for s in a["output_shapes"]))

    def __repr__(self):
        return f"<nd.data.Iterator {self._handle.op.name} element_spec={self._spec}>"


def _flat_shapes(types, shapes):
    """``shapes`` flattened like ``types`` (a shape is a leaf, even a list)."""
    if not isinstance(types, (tuple, dict)):
        return [shapes]
    keys = sorted(types) if isinstance(types, dict) else range(len(types))
    out = []
    for k in keys:
        out += _flat_shapes(types[k], shapes[k])
    return out


def make_one_shot_iterator(dataset: Dataset) -> Iterator:
    """``dataset.make_one_shot_iterator()`` (TF's ``tf.data`` function form)."""
    return dataset.make_one_shot_iterator()


def make_initializable_iterator(dataset: Dataset, shared_name=None) -> Iterator:
    """``dataset.make_initializable_iterator(shared_name)``."""
    return dataset.make_initializable_iterator(shared_name)
