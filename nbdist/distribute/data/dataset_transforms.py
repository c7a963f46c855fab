"""``nd.data.Dataset``'s TF1 transformations beyond ``map``/``batch``/``repeat``:
``zip``, ``concatenate``, ``flat_map``, ``interleave``, ``filter``,
``padded_batch``, ``cache``, ``unbatch``, ``shard``, ``skip``, ``enumerate``,
``apply`` and ``with_options``, as graph ops (kernels in
``executor/kernels/dataset_transform_kernels.py``).

>>> import nbdist as nd
>>> ds = nd.data.Dataset.range(6).filter(lambda x: x % 2 > 0).flat_map(
...     lambda x: nd.data.Dataset.from_tensors(x).repeat(2))
>>> nxt = ds.make_one_shot_iterator().get_next()
>>> with nd.Session() as s:
...     [int(s.run(nxt)) for _ in range(6)]
[1, 1, 3, 3, 5, 5]

``DatasetTransformations`` is a base of ``Dataset``: its methods build ops
with ``Dataset._apply`` and trace functions with ``Dataset._trace``.
"""

from __future__ import annotations

import copy
import json
import os

import numpy as np

from nbdist.distribute.data.dataset_options import Options
from nbdist.distribute.tracing.tensor_spec import TensorSpec
from nbdist.framework import dtypes
from nbdist.framework.func_graph import register_copyable_op
from nbdist.framework.nest import flatten, map_structure, pack_sequence_as
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.tensor_shape import TensorShape, as_shape

_SPEC_ATTRS = {"output_types": ("list(type)", REQUIRED),
               "output_shapes": ("list(shape)", REQUIRED)}


def _datasets_infer(n_datasets, n_scalars):
    def infer(c):
        for i in range(n_datasets):
            if c.dtype(i) is not dtypes.resource:
                raise TypeError(f"{c.op_type} needs a dataset as input {i}")
        for i in range(n_datasets, n_datasets + n_scalars):
            if c.shape(i).rank not in (None, 0):
                raise ValueError(f"input {i} of {c.op_type} must be a scalar, got "
                                 f"shape {c.shape(i)}")
        return [(dtypes.resource, TensorShape([]))]

    return infer


def _zip_infer(c):
    return _datasets_infer(len(c.input_dtypes), 0)(c)


_FN = ("func", REQUIRED)
for _t, _n_ds, _n_sc, _extra in (
        ("ConcatenateDataset", 2, 0, {}),
        ("FlatMapDataset", 1, 0, {"f": _FN}),
        ("InterleaveDataset", 1, 2, {"f": _FN}),
        ("FilterDataset", 1, 0, {"predicate": _FN}),
        ("CacheDataset", 1, 1, {}),
        ("UnbatchDataset", 1, 0, {}),
        ("ShardDataset", 1, 2, {}),
        ("SkipDataset", 1, 1, {}),
        ("OptionsDataset", 1, 0, {"serialized_options": ("string", "")}),
        ("PaddedBatchDatasetV2", 1, 2, {"padded_shapes": ("list(shape)", REQUIRED)})):
    # PaddedBatchDatasetV2's inputs: dataset, batch_size, drop_remainder, then
    # one padding value per component (its padded shapes are an attr here).
    register_op(_t, _datasets_infer(_n_ds, _n_sc), attrs=dict(_SPEC_ATTRS, **_extra),
                min_inputs=_n_ds + _n_sc, ref_inputs=tuple(range(_n_ds)))
register_op("ZipDataset", _zip_infer, attrs=_SPEC_ATTRS, min_inputs=1)
# GeneratorDataset(args...): the elements a Python generator (a py_func token)
# yields; runs only in the process that built the graph, as py_func.
register_op("GeneratorDataset", lambda c: [(dtypes.resource, TensorShape([]))],
            attrs=dict(_SPEC_ATTRS, token=("string", REQUIRED)), min_inputs=0,
            stateful=True)


def _fixed_length_infer(c):
    if c.dtype(0) is not dtypes.string or c.shape(0).rank not in (None, 0, 1):
        raise ValueError(f"{c.op_type}: filenames must be a string scalar or vector, "
                         f"got {c.dtype(0).name} {c.shape(0)}")
    if any(c.dtype(i) is not dtypes.int64 for i in range(1, 5)) or (
            c.dtype(5) is not dtypes.string):
        raise TypeError(f"{c.op_type}: header_bytes, record_bytes, footer_bytes and "
                        "buffer_size are int64, compression_type a string")
    return [(dtypes.resource, TensorShape([]))]


# The source of nd.data.FixedLengthRecordDataset (file_datasets), registered
# here so that a task loading the dataset ops knows it: (filenames,
# header_bytes, record_bytes, footer_bytes, buffer_size, compression_type).
register_op("FixedLengthRecordDatasetV2", _fixed_length_infer, num_inputs=6)
TRANSFORM_OPS = ("FixedLengthRecordDatasetV2", "ConcatenateDataset", "FlatMapDataset", "InterleaveDataset",
                 "FilterDataset", "CacheDataset", "UnbatchDataset", "ShardDataset",
                 "SkipDataset", "OptionsDataset", "PaddedBatchDatasetV2",
                 "ZipDataset")
for _t in TRANSFORM_OPS:
    register_copyable_op(_t)


def _most_specific(a: TensorShape, b: TensorShape) -> TensorShape:
    """The shape both ``a`` and ``b`` have (unknown where they differ)."""
    if a.rank is None or b.rank is None or a.rank != b.rank:
        return TensorShape(None)
    return TensorShape([x if x == y else None
                        for x, y in zip(a.as_list(), b.as_list())])


def _padded_shape_fits(padded: TensorShape, shape: TensorShape) -> bool:
    """Whether components of ``shape`` can be padded to ``padded``."""
    if padded.rank is None:
        return False
    if shape.rank is None:
        return True
    return shape.rank == padded.rank and all(
        p is None or d is None or p >= d
        for p, d in zip(padded.as_list(), shape.as_list()))


class DatasetTransformations:
    """The transformations of the module docstring (a base of ``Dataset``)."""

    @staticmethod
    def zip(datasets, name=None):
        """Elements are the structure ``datasets`` (a tuple or dict of
        datasets) of their elements, until the shortest ends."""
        flat = flatten(datasets)
        if not flat or not all(isinstance(d, DatasetTransformations) for d in flat):
            raise TypeError("Dataset.zip needs a (nested) tuple or dict of "
                            f"datasets, got {datasets!r}")
        spec = pack_sequence_as(datasets, [d.element_spec for d in flat])
        return flat[0]._apply("ZipDataset", [], spec, datasets=flat[1:],
                              name=name or "ZipDataset")

    @classmethod
    def from_generator(cls, generator, output_types, output_shapes=None, args=None,
                       output_signature=None, name=None):
        """The elements ``generator(*args)`` yields (called anew for each
        pass), converted to ``output_types`` and checked against
        ``output_shapes`` (unknown when not given). As ``py_func``, the
        generator stays in this process: the pipeline runs only on a
        ``Session("")`` or an in-process server.

        >>> import nbdist as nd
        >>> ds = nd.data.Dataset.from_generator(lambda: iter([[1], [2, 3]]),
        ...                                     nd.int64, [None])
        >>> nxt = ds.make_one_shot_iterator().get_next()
        >>> with nd.Session() as s:
        ...     [s.run(nxt).tolist() for _ in range(2)]
        [[1], [2, 3]]
        """
        from nbdist.framework.ops import convert_to_tensor, get_default_graph
        from nbdist.ops.script_ops import register_function

        if output_signature is not None:
            spec = output_signature
        else:
            types = map_structure(dtypes.as_dtype, output_types, True)
            flat_types = flatten(types, lists_are_leaves=True)
            if output_shapes is None:
                shapes = [TensorShape(None)] * len(flat_types)
            elif len(flat_types) == 1:
                shapes = [as_shape(output_shapes)]
            else:
                shapes = [as_shape(x) for x in (output_shapes.values() if isinstance(
                    output_shapes, dict) else output_shapes)]
            spec = pack_sequence_as(types, [TensorSpec(x, t) for t, x in zip(
                flat_types, shapes)], lists_are_leaves=True)
        g = get_default_graph()
        with g.as_default():
            inputs = [convert_to_tensor(a, name=f"arg{i}")
                      for i, a in enumerate(args or ())]
        token = register_function(g, generator)
        flat = flatten(spec, lists_are_leaves=True)
        op = g.create_op("GeneratorDataset", inputs, {
            "output_types": [x.dtype for x in flat],
            "output_shapes": [x.shape for x in flat], "token": token},
            name=name or "GeneratorDataset")
        return cls._source(op.outputs[0], spec)

    def concatenate(self, dataset, name=None):
        """This dataset's elements, then ``dataset``'s (same structure and
        dtypes; shapes become what both have)."""
        mine, theirs = flatten(self.element_spec), flatten(dataset.element_spec)
        try:
            pack_sequence_as(self.element_spec, theirs)
        except (TypeError, ValueError):
            raise TypeError(f"Incompatible dataset elements: {self.element_spec} "
                            f"vs. {dataset.element_spec}") from None
        if len(mine) != len(theirs) or any(
                a.dtype != b.dtype for a, b in zip(mine, theirs)):
            raise TypeError(f"Incompatible dataset elements: {self.element_spec} "
                            f"vs. {dataset.element_spec}")
        spec = pack_sequence_as(self.element_spec, [
            TensorSpec(_most_specific(a.shape, b.shape), a.dtype)
            for a, b in zip(mine, theirs)])
        return self._apply("ConcatenateDataset", [], spec, datasets=[dataset],
                           name=name or "ConcatenateDataset")

    def _dataset_fn(self, fn, what):
        """``fn`` (element -> Dataset) traced; and the datasets' element spec."""
        made = []

        def body(*args):
            ds = fn(*args)
            if not isinstance(ds, DatasetTransformations):
                raise TypeError(f"`{what}`'s function must return a Dataset, got "
                                f"{type(ds).__name__}")
            made.append(ds)
            return ds._variant_tensor

        body.__name__ = getattr(fn, "__name__", what).replace("<lambda>", what)
        traced = self._trace(body)
        return traced, made[0].element_spec

    def flat_map(self, map_func, name=None):
        """The elements of the datasets ``map_func`` makes of each element, one
        dataset after another."""
        (fd, _), spec = self._dataset_fn(map_func, "flat_map")
        return self._apply("FlatMapDataset", [], spec,
                           {"f": fd.name, "_fdef": fd.SerializeToString()},
                           name=name or "FlatMapDataset")

    def interleave(self, map_func, cycle_length=None, block_length=None,
                   num_parallel_calls=None, deterministic=None, name=None):
        """Like ``flat_map``, but ``cycle_length`` of the made datasets are read
        in turn, ``block_length`` elements at a time (TF's order; ``None`` or
        ``AUTOTUNE`` cycle length: the number of CPUs). ``num_parallel_calls``
        is accepted and ignored (one element at a time)."""
        if cycle_length is None or (isinstance(cycle_length, int)
                                    and cycle_length == -1):
            cycle_length = os.cpu_count() or 1
        block_length = 1 if block_length is None else block_length
        (fd, _), spec = self._dataset_fn(map_func, "interleave")
        return self._apply("InterleaveDataset",
                           [("cycle_length", cycle_length, dtypes.int64),
                            ("block_length", block_length, dtypes.int64)], spec,
                           {"f": fd.name, "_fdef": fd.SerializeToString()},
                           name=name or "InterleaveDataset")

    def filter(self, predicate, name=None):
        """The elements for which ``predicate`` gives a scalar ``True``."""
        fd, concrete = self._trace(predicate)
        out = concrete.structured_outputs
        out = out[0] if isinstance(out, (list, tuple)) and len(out) == 1 else out
        if getattr(out, "dtype", None) != dtypes.bool or out.shape.rank not in (
                None, 0):
            raise ValueError(f"`predicate` return type must be convertible to a "
                             f"scalar boolean tensor. Was {out!r}.")
        return self._apply("FilterDataset", [], None,
                           {"predicate": fd.name, "_predicate_fdef":
                            fd.SerializeToString()}, name=name or "FilterDataset")

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None,
                     drop_remainder=False, name=None):
        """Batches of ``batch_size`` elements, each component padded to
        ``padded_shapes`` (a ``None`` dimension, or no shape at all: to the
        batch's longest) with ``padding_values`` (0 or ``b""``)."""
        flat = flatten(self.element_spec)
        if padded_shapes is None:
            shapes = [s.shape for s in flat]
            if any(s.rank is None for s in shapes):
                raise ValueError("You must provide `padded_shapes` argument "
                                 "because component has unknown rank.")
        else:
            shapes = flatten(padded_shapes, lists_are_leaves=True) if not isinstance(
                padded_shapes, TensorShape) else [padded_shapes]
            shapes = [as_shape(s) for s in shapes]
            if len(shapes) != len(flat):
                raise ValueError(f"padded_shapes {padded_shapes} do not match the "
                                 f"element structure {self.element_spec}")
        for s, p in zip(flat, shapes):
            if not _padded_shape_fits(p, s.shape):
                raise ValueError(f"The padded shape {p} is not compatible with the "
                                 f"shape {s.shape} of the corresponding input "
                                 "component.")
        values = (flatten(padding_values) if padding_values is not None
                  else [b"" if s.dtype == dtypes.string else 0 for s in flat])
        static = int(batch_size) if (isinstance(batch_size, (int, np.integer))
                                     and drop_remainder is True) else None
        spec = pack_sequence_as(self.element_spec, [
            TensorSpec(TensorShape([static]).concatenate(p), s.dtype)
            for s, p in zip(flat, shapes)])
        return self._apply(
            "PaddedBatchDatasetV2",
            [("batch_size", batch_size, dtypes.int64),
             ("drop_remainder", drop_remainder, dtypes.bool)]
            + [(f"padding_value_{i}", v, s.dtype)
               for i, (v, s) in enumerate(zip(values, flat))],
            spec, {"padded_shapes": shapes}, name=name or "PaddedBatchDatasetV2")

    def cache(self, filename="", name=None):
        """Keeps the elements of the first full pass and replays them on later
        passes (of a ``repeat``): in memory, or with ``filename`` in files
        ``filename.nbcache-*`` that later runs (and programs) read instead."""
        return self._apply("CacheDataset", [("filename", filename, dtypes.string)],
                           name=name or "CacheDataset")

    def unbatch(self, name=None):
        """The slices of each element along its first dimension."""
        flat = flatten(self.element_spec)
        if any(s.shape.rank == 0 for s in flat):
            raise ValueError("Cannot unbatch an input with scalar components.")
        spec = map_structure(lambda s: TensorSpec(
            TensorShape(None) if s.shape.rank is None
            else TensorShape(s.shape.as_list()[1:]), s.dtype), self.element_spec)
        return self._apply("UnbatchDataset", [], spec, name=name or "UnbatchDataset")

    def shard(self, num_shards, index, name=None):
        """Every ``num_shards``-th element, starting at element ``index``."""
        if isinstance(num_shards, int) and isinstance(index, int) and not (
                0 <= index < num_shards):
            raise ValueError(f"Index must be between 0 and {num_shards - 1} "
                             f"(currently index = {index}).")
        return self._apply("ShardDataset",
                           [("num_shards", num_shards, dtypes.int64),
                            ("index", index, dtypes.int64)], name=name or "ShardDataset")

    def skip(self, count, name=None):
        """All but the first ``count`` elements (none when ``count`` is -1)."""
        return self._apply("SkipDataset", [("count", count, dtypes.int64)],
                           name=name or "SkipDataset")

    def enumerate(self, start=0, name=None):
        """``(index, element)`` pairs, the index an int64 from ``start``."""
        counter = type(self).range(start, np.iinfo(np.int64).max)
        return DatasetTransformations.zip((counter, self), name=name)

    def apply(self, transformation_func):
        """``transformation_func(self)``, which must return a Dataset."""
        out = transformation_func(self)
        if not isinstance(out, DatasetTransformations):
            raise TypeError("`transformation_func` must return a Dataset. Got "
                            f"{out!r}.")
        return out

    def with_options(self, options, name=None):
        """The same elements, with ``options`` merged into this dataset's."""
        if not isinstance(options, Options):
            raise TypeError(f"with_options needs an nd.data.Options, got "
                            f"{type(options).__name__}")
        merged = self.options().merge(options)
        # What the kernels read back (dataset_kernels.options_fusion).
        opt = merged.experimental_optimization
        said = {"map_and_batch_fusion": opt.map_and_batch_fusion,
                "apply_default_optimizations": opt.apply_default_optimizations}
        ds = self._apply("OptionsDataset", [], name=name or "OptionsDataset",
                         attrs={"serialized_options": json.dumps(said)})
        ds._options = merged
        return ds

    def options(self):
        """The ``nd.data.Options`` set on this dataset (by ``with_options``)."""
        found = getattr(self, "_options", None)
        return copy.deepcopy(found) if found is not None else Options()
