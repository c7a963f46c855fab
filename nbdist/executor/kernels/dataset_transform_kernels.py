"""Kernels of ``nbdist.distribute.data.dataset_transforms``: each dataset op
outputs a ``DatasetValue`` whose ``iterate(ctx)`` reads its inputs' iterators
(see ``dataset_kernels``). Error messages are TF's."""

from __future__ import annotations

import itertools
import os

import numpy as np

from nbdist import errors
from nbdist.executor import tf_record
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.dataset_kernels import (
    DatasetValue,
    groups,
    options_fusion,
)
from nbdist.executor.kernels.function_kernels import CompiledFunction, function_def_for
from nbdist.framework.nest import flatten
from nbdist.framework.tensor_util import make_ndarray, make_tensor_proto
from nbdist.ops.script_ops import lookup_function
from nbdist.proto import tensor_pb2


def _compiled(node, attr):
    fdef, library = function_def_for(node, attr)
    return CompiledFunction(fdef, node, library)


class _Generator(DatasetValue):
    """The elements of a Python generator, checked against the dataset's types
    and shapes (TF's messages)."""

    def __init__(self, func, args, types, shapes, node):
        self.func, self.args, self.node = func, args, node
        self.types, self.shapes = types, shapes

    def _component(self, value, dtype, shape):
        np_type = object if dtype.name == "string" else dtype.as_numpy_dtype
        try:
            arr = np.asarray(value, dtype=np_type)
        except (TypeError, ValueError) as e:
            raise errors.InvalidArgumentError(
                None, self.node, f"TypeError: `generator` yielded an element that "
                f"could not be converted to the expected type. The expected type "
                f"was {dtype.name}, but the yielded element was {value!r}.") from e
        if not shape.is_compatible_with(arr.shape):
            raise errors.InvalidArgumentError(
                None, self.node, f"`generator` yielded an element of shape "
                f"{arr.shape} where an element of shape {shape} was expected.")
        return arr

    def iterate(self, ctx):
        n = len(self.types)
        for elem in self.func(*self.args):
            parts = flatten(elem, lists_are_leaves=True) if n > 1 else [elem]
            if len(parts) != n:
                raise errors.InvalidArgumentError(
                    None, self.node, f"`generator` yielded an element of {len(parts)} "
                    f"components where {n} were expected.")
            yield tuple(self._component(v, t, s)
                        for v, t, s in zip(parts, self.types, self.shapes))


class _Zip(DatasetValue):
    def __init__(self, inputs):
        self.inputs = inputs

    def iterate(self, ctx):
        for parts in zip(*(d.iterate(ctx) for d in self.inputs)):
            yield tuple(c for p in parts for c in p)


class _Concatenate(DatasetValue):
    def __init__(self, first, second):
        self.parts = (first, second)

    def iterate(self, ctx):
        for d in self.parts:
            yield from d.iterate(ctx)


class _FlatMap(DatasetValue):
    def __init__(self, inp, fn):
        self.inp, self.fn = inp, fn

    def iterate(self, ctx):
        for elem in self.inp.iterate(ctx):
            (made,) = self.fn.run(ctx.step, elem)
            yield from made.iterate(ctx)


class _Interleave(DatasetValue):
    """TF's order: a cycle of ``cycle`` open datasets read ``block`` elements
    at a time; an exhausted one is closed and the cycle moves on; an empty
    slot takes the next input element's dataset."""

    def __init__(self, inp, fn, cycle, block, node):
        if cycle <= 0 or block <= 0:
            raise errors.InvalidArgumentError(
                None, node, f"cycle_length ({cycle}) and block_length ({block}) "
                "must be positive")
        self.inp, self.fn, self.cycle, self.block = inp, fn, cycle, block

    def iterate(self, ctx):
        inputs = self.inp.iterate(ctx)
        slots = [None] * self.cycle
        end_of_input, n_open, ci, bi = False, 0, 0, 0
        while not end_of_input or n_open:
            if slots[ci] is not None:
                try:
                    value = next(slots[ci])
                except StopIteration:
                    slots[ci], n_open, ci, bi = None, n_open - 1, (ci + 1) % len(
                        slots), 0
                    continue
                bi += 1
                if bi == self.block:
                    ci, bi = (ci + 1) % len(slots), 0
                yield value
            elif not end_of_input:
                elem = next(inputs, None)
                if elem is None:
                    end_of_input = True
                else:
                    (made,) = self.fn.run(ctx.step, elem)
                    slots[ci], n_open = iter(made.iterate(ctx)), n_open + 1
            else:
                ci, bi = (ci + 1) % len(slots), 0


class _Filter(DatasetValue):
    def __init__(self, inp, fn):
        self.inp, self.fn = inp, fn

    def iterate(self, ctx):
        for elem in self.inp.iterate(ctx):
            (keep,) = self.fn.run(ctx.step, elem)
            if bool(np.asarray(keep)):
                yield elem


class _PaddedBatch(DatasetValue):
    def __init__(self, inp, n, drop, shapes, values, node):
        if n <= 0:
            raise errors.InvalidArgumentError(None, node,
                                              f"batch_size must be > 0, got {n}")
        self.inp, self.n, self.drop = inp, n, drop
        self.shapes, self.values, self.node = shapes, values, node

    def _pad(self, k, parts):
        want = self.shapes[k]
        for p in parts:
            if p.ndim != len(want):
                raise errors.InvalidArgumentError(
                    None, self.node, f"Component {k} has rank {p.ndim}; its padded "
                    f"shape is {want}")
        top = np.max([p.shape for p in parts], axis=0).tolist() if want else []
        shape = [top[i] if d is None else d for i, d in enumerate(want)]
        if any(p.shape[i] > shape[i] for p in parts for i in range(len(shape))):
            raise errors.InvalidArgumentError(
                None, self.node, "Attempted to pad to a smaller size than the input "
                "element.")
        value = self.values[k]
        out = np.empty([len(parts)] + shape, dtype=np.asarray(value).dtype
                       if not isinstance(value, bytes) else object)
        out[...] = value
        for b, p in enumerate(parts):
            out[(b,) + tuple(slice(0, d) for d in p.shape)] = p
        return out

    def iterate(self, ctx):
        for elems in groups(self.inp.iterate(ctx), self.n, self.drop):
            yield tuple(self._pad(k, [np.asarray(e[k]) for e in elems])
                        for k in range(len(elems[0])))


class _Cache(DatasetValue):
    """The first full pass's elements, kept in memory or in files (TFRecords of
    ``serialize_tensor``-style TensorProtos, one record per component)."""

    def __init__(self, inp, filename, n_components):
        self.inp, self.filename, self.n = inp, filename, n_components
        self.memory = None

    def _path(self):
        return f"{self.filename}.nbcache-{self.n}"

    def iterate(self, ctx):
        if self.memory is not None:
            yield from self.memory
            return
        if self.filename and os.path.exists(self._path()):
            comps = []
            for rec in tf_record.read_records(self._path()):
                comps.append(make_ndarray(tensor_pb2.TensorProto.FromString(rec)))
                if len(comps) == self.n:
                    yield tuple(comps)
                    comps = []
            return
        seen = []
        for elem in self.inp.iterate(ctx):
            seen.append(elem)
            yield elem
        if self.filename:
            tmp = self._path() + ".tmp"
            with tf_record.TFRecordWriter(tmp) as w:
                for elem in seen:
                    for c in elem:
                        w.write(make_tensor_proto(np.asarray(c)).SerializeToString())
            os.replace(tmp, self._path())
        else:
            self.memory = seen


class _Unbatch(DatasetValue):
    def __init__(self, inp, node):
        self.inp, self.node = inp, node

    def iterate(self, ctx):
        for elem in self.inp.iterate(ctx):
            comps = [np.asarray(c) for c in elem]
            n = comps[0].shape[0]
            if any(c.shape[0] != n for c in comps):
                raise errors.InvalidArgumentError(
                    None, self.node, "Input element must have the same batch size "
                    "in each component.")
            for i in range(n):
                yield tuple(c[i] for c in comps)


class _Slice(DatasetValue):
    """Elements ``start, start + step, ...`` of the input (shard, skip)."""

    passes_reads = True

    def __init__(self, inp, start, step):
        self.inp, self.start, self.step = inp, start, step

    def iterate(self, ctx):
        it = self.inp.iterate(ctx)
        if self.start < 0:  # skip(-1): everything
            for _ in it:
                pass
            return
        yield from itertools.islice(it, self.start, None, self.step)


def _shard(ds, num_shards, index, node):
    n, i = int(num_shards), int(index)
    if n <= 0:
        raise errors.InvalidArgumentError(
            None, node, f"Number of shards must be greater than zero (currently "
            f"num_shards = {n}).")
    if not 0 <= i < n:
        raise errors.InvalidArgumentError(
            None, node, f"Index must be between 0 and {n - 1} (currently index = "
            f"{i}).")
    return _Slice(ds, i, n)


@register_kernel("GeneratorDataset")
def generator_dataset_kernel(node):
    a = node.attrs

    def compute(step, *args):
        func = lookup_function(a["token"])
        if func is None:
            raise errors.FailedPreconditionError(
                None, node.name, f"GeneratorDataset '{node.name}': the Python "
                "generator is not in this process (from_generator pipelines run "
                "only in the process that built the graph)")
        return _Generator(func, args, a["output_types"], a["output_shapes"],
                          node.name)

    return compute


@register_kernel("ZipDataset")
def zip_dataset_kernel(node):
    return lambda step, *datasets: _Zip(datasets)


@register_kernel("ConcatenateDataset")
def concatenate_dataset_kernel(node):
    return lambda step, a, b: _Concatenate(a, b)


@register_kernel("FlatMapDataset")
def flat_map_dataset_kernel(node):
    fn = _compiled(node, "f")
    return lambda step, ds: _FlatMap(ds, fn)


@register_kernel("InterleaveDataset")
def interleave_dataset_kernel(node):
    fn = _compiled(node, "f")
    return lambda step, ds, cycle, block: _Interleave(ds, fn, int(cycle), int(block),
                                                      node.name)


@register_kernel("FilterDataset")
def filter_dataset_kernel(node):
    fn = _compiled(node, "predicate")
    return lambda step, ds: _Filter(ds, fn)


@register_kernel("PaddedBatchDatasetV2")
def padded_batch_dataset_kernel(node):
    shapes = [s.as_list() for s in node.attrs["padded_shapes"]]
    return lambda step, ds, n, drop, *values: _PaddedBatch(
        ds, int(n), bool(drop), shapes, values, node.name)


@register_kernel("CacheDataset")
def cache_dataset_kernel(node):
    n = len(node.attrs["output_types"])

    def compute(step, ds, filename):
        name = filename.item() if isinstance(filename, np.ndarray) else filename
        name = name.decode() if isinstance(name, bytes) else str(name)
        return _Cache(ds, name, n)

    return compute


@register_kernel("UnbatchDataset")
def unbatch_dataset_kernel(node):
    return lambda step, ds: _Unbatch(ds, node.name)


@register_kernel("ShardDataset")
def shard_dataset_kernel(node):
    return lambda step, ds, n, i: _shard(ds, n, i, node.name)


@register_kernel("SkipDataset")
def skip_dataset_kernel(node):
    return lambda step, ds, count: _Slice(ds, int(count), 1)


class _Options(DatasetValue):
    """``with_options``: the same elements; ``fusion`` is what the options say
    of ``map_and_batch_fusion``."""

    commutes_with_map = True
    passes_reads = True

    def __init__(self, inp, fusion):
        self.inp, self.fusion = inp, fusion

    def iterate(self, ctx):
        return self.inp.iterate(ctx)


@register_kernel("OptionsDataset")
def options_dataset_kernel(node):
    fusion = options_fusion(node.attrs.get("serialized_options"))
    return lambda step, ds: _Options(ds, fusion)
