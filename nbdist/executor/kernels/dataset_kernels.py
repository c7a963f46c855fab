"""Kernels for ``nd.data``: datasets are Python descriptions over NumPy values,
iterators resources of the task's ``ResourceMgr``.

A dataset kernel returns a ``DatasetValue``; ``iterate(ctx)`` makes a fresh
Python iterator of element tuples. ``ctx.step`` is the step of the
``IteratorGetNext`` being served, so a ``MapDataset`` runs its function
within that step (its cancellation, deadline and trace).

``batch`` after ``map`` (with ``repeat``, ``take``, ``prefetch`` or options
between them) runs the map function once per batch on the stacked input
elements when ``dataset_vectorize`` can rewrite it (tf.data's
``map_and_batch_fusion``, on unless the dataset's options turn it off), and
falls back to one call per element for a batch whose fused run fails, so
values and errors are the unfused pipeline's. A ``map`` not fused into a
batch (e.g. ``map(parse).shuffle(n).batch(m)``) runs its rewritten function
on chunks of records read ahead from a tensor or file source (through
``repeat``, ``take``, ``skip``, ``shard``, ``prefetch``) and hands the rows
out one by one (``map_chunks``); the same option turns it off::

    opts = nd.data.Options()
    opts.experimental_optimization.map_and_batch_fusion = False
    ds = ds.with_options(opts)  # one map call per element, nothing read ahead
"""

from __future__ import annotations

import copy
import itertools
import json
import threading

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.dataset_vectorize import (
    argument_outputs,
    vectorized_function_def,
)
from nbdist.executor.kernels.function_kernels import CompiledFunction, function_def_for


class _Ctx:
    __slots__ = ("fuse", "step")

    def __init__(self):
        self.step = None
        self.fuse = True  # map_and_batch_fusion (the dataset's options)


class DatasetValue:
    """What a dataset op outputs; ``iterate(ctx)`` yields tuples of arrays.

    ``commutes_with_map``: a subclass with one input ``inp`` whose elements
    are (some of) its input's, in order, whatever they are, so that a pure
    ``map`` above it may run below it (``copy.copy`` and a new ``inp``).
    ``fusion``: True/False where the dataset's options set
    ``map_and_batch_fusion``.
    ``pure_reads``: reading the elements has no effect a user can see (a
    tensor or file source), so a ``map`` above may read ahead of its
    ``get_next``; ``passes_reads``: a one-input ``inp`` wrapper whose reads are
    its input's (repeat, take, skip)."""

    commutes_with_map = False
    fusion = None
    pure_reads = False
    passes_reads = False

    def iterate(self, ctx):
        raise NotImplementedError


def _fresh(v):
    # A slice of a constant is a view of it: hand out a copy (0-d are scalars).
    return v.copy() if isinstance(v, np.ndarray) else v


class _Slices(DatasetValue):
    pure_reads = True

    def __init__(self, comps, node):
        comps = [np.asarray(c) for c in comps]
        n = comps[0].shape[0] if comps[0].ndim else None
        for c in comps:
            if c.ndim == 0 or c.shape[0] != n:
                raise errors.InvalidArgumentError(
                    None, node, "from_tensor_slices: all components must have the "
                    f"same first dimension, got shapes {[list(x.shape) for x in comps]}")
        self.comps, self.n = comps, n

    def iterate(self, ctx):
        comps = self.comps
        for i in range(self.n):
            yield tuple(_fresh(c[i]) for c in comps)


class _Tensors(DatasetValue):
    pure_reads = True

    def __init__(self, comps):
        self.comps = tuple(comps)

    def iterate(self, ctx):
        yield tuple(_fresh(np.asarray(c)) if isinstance(c, np.ndarray) else c
                    for c in self.comps)


class _Range(DatasetValue):
    pure_reads = True

    def __init__(self, start, stop, step, dtype, node):
        if step == 0:
            raise errors.InvalidArgumentError(None, node, "range step must not be 0")
        self.args, self.dtype = (int(start), int(stop), int(step)), dtype

    def iterate(self, ctx):
        t = self.dtype
        for v in range(*self.args):
            yield (t(v),)


class _Map(DatasetValue):
    """``map(f)``. Where ``f`` vectorises (``fused``), fusion is on and the
    input's reads have no effect a user can see (``reads_ahead_safely``), ``f``
    runs once on a chunk of input elements and the chunk's results are handed
    out one by one (``map_chunks``)."""

    def __init__(self, inp, fn, fused=None):
        self.inp, self.fn, self.fused = inp, fn, fused

    def iterate(self, ctx):
        if ctx.fuse and self.fused is not None and reads_ahead_safely(self.inp):
            return map_chunks(self.inp.iterate(ctx), self.fn, self.fused, ctx)
        return self._each(ctx)

    def _each(self, ctx):
        fn = self.fn
        for elem in self.inp.iterate(ctx):
            yield fn.run(ctx.step, elem)


def groups(it, n, drop_remainder):
    """Lists of ``n`` consecutive elements of ``it`` (a shorter last one unless
    ``drop_remainder``)."""
    while True:
        elems = list(itertools.islice(it, n))
        if not elems or (drop_remainder and len(elems) < n):
            return
        yield elems


class _FusedMap:
    """A map function rewritten to run on a batch (``dataset_vectorize``),
    compiled per batch size (a dataset has one, and a last smaller one)."""

    _CACHED = 8

    def __init__(self, fdef, node, library):
        self.fdef, self.node, self.library = fdef, node, library
        self.compiled = {}
        self.passed = argument_outputs(fdef)

    def fusable(self) -> bool:
        return vectorized_function_def(self.fdef, 1, 0) is not None

    def run(self, step, column, n):
        """The function's outputs for the ``n`` stacked scalars ``column`` as
        ``batch`` stacks them, or None (not fusable for them, or an error: the
        caller runs per element)."""
        out = self.run_rows(step, column, n)
        return None if out is None else [_as_stacked(o) for o in out]

    def run_rows(self, step, column, n):
        """The function's outputs for the ``n`` stacked scalars ``column``, row
        ``i`` being element ``i``'s, or None (as ``run``)."""
        fn = self.compiled.get(n)
        if fn is None:
            fn = CompiledFunction(vectorized_function_def(self.fdef, n, 0), self.node,
                                  self.library)
            if len(self.compiled) < self._CACHED:
                self.compiled[n] = fn
        try:
            out = fn.run(step, (column,))
        except errors.OpError:
            return None  # the elements one by one say which and how
        if any(type(o) is not np.ndarray or o.shape[:1] != (n,) for o in out):
            return None
        return out


def _as_stacked(column):
    """A fused output of scalar strings as the unfused batch stacks them: each
    element's ``bytes`` through ``np.asarray`` (a fixed-width bytes array)."""
    if column.dtype != object or column.ndim != 1:
        return column
    return np.stack([np.asarray(v) for v in column])


def reads_ahead_safely(ds) -> bool:
    """Whether reading ``ds``'s elements before they are asked for is unseen by
    the user (``DatasetValue.pure_reads``): a generator, a ``py_func`` or a
    stateful map upstream is read only when asked."""
    while ds.passes_reads:
        ds = ds.inp
    return ds.pure_reads


CHUNK_FIRST, CHUNK_MOST = 8, 64  # a map's chunks double from the first


def map_chunks(it, fn, fused, ctx):
    """``map(fn)`` over the elements of ``it`` by chunks: ``fused`` (``fn``
    vectorised) runs once on a chunk of scalar records and its rows are handed
    out one by one. A chunk whose fused run fails, or whose elements are not
    scalar strings, runs through ``fn`` element by element as it is handed
    out, so an element's error comes at its own ``get_next``; an error reading
    ``it`` comes after the elements read before it, as unchunked."""
    size = CHUNK_FIRST
    while True:
        chunk, failure = _read_ahead(it, size)
        column = _scalars(chunk) if chunk and len(chunk[0]) == 1 else None
        out = None if column is None else fused.run_rows(ctx.step, column,
                                                         len(chunk))
        if out is None:
            for elem in chunk:
                yield fn.run(ctx.step, elem)
        else:
            passed = fused.passed
            for i, elem in enumerate(chunk):
                # A copy: a view would keep the whole chunk alive in a buffer.
                yield tuple(elem[0] if k in passed else o[i, ...].copy()
                            for k, o in enumerate(out))
        if failure is not None:
            raise failure
        if len(chunk) < size:
            return
        size = min(2 * size, CHUNK_MOST)


def _read_ahead(it, n):
    """(up to ``n`` next elements of ``it``, the error that stopped it early
    or None)."""
    chunk = []
    try:
        for _ in range(n):
            chunk.append(next(it))
    except StopIteration:
        pass
    except Exception as e:  # noqa: BLE001 - raised after the elements before it
        return chunk, e
    return chunk, None


def _map_below(ds):
    """(the pure ``_Map`` under ``ds``'s commuting wrappers, the same wrappers
    over the map's input) or None."""
    chain = []
    while ds.commutes_with_map:
        chain.append(ds)
        ds = ds.inp
    if type(ds) is not _Map or ds.fused is None:
        return None
    src = ds.inp
    for w in reversed(chain):
        w = copy.copy(w)
        w.inp, src = src, w
    return ds, src


def _scalars(elems):
    """The one component of ``elems``, stacked, when each is a scalar; None
    otherwise."""
    column = np.empty(len(elems), dtype=object)
    for i, e in enumerate(elems):
        v = e[0]
        if type(v) is np.ndarray and v.shape == () and v.dtype.kind in "OS":
            v = v[()]
        if not isinstance(v, bytes):  # np.bytes_ too (a slice of an "S" array)
            return None
        column[i] = v
    return column


class _Batch(DatasetValue):
    def __init__(self, inp, n, drop, node):
        if n <= 0:
            raise errors.InvalidArgumentError(None, node,
                                              f"batch_size must be > 0, got {n}")
        self.inp, self.n, self.drop, self.node = inp, n, drop, node

    def iterate(self, ctx):
        found = _map_below(self.inp) if ctx.fuse else None
        return self._unfused(ctx) if found is None else self._fused(ctx, *found)

    def _unfused(self, ctx):
        for elems in groups(self.inp.iterate(ctx), self.n, self.drop):
            yield self._stack(elems)

    def _fused(self, ctx, mapped, src):
        fn, fused = mapped.fn, mapped.fused
        for records in groups(src.iterate(ctx), self.n, self.drop):
            column = _scalars(records) if len(records[0]) == 1 else None
            out = None if column is None else fused.run(ctx.step, column, len(records))
            if out is None:
                out = self._stack([fn.run(ctx.step, r) for r in records])
            else:
                for k in fused.passed:  # the elements as they came
                    out[k] = self._stack([(r[0],) for r in records])[0]
            yield tuple(out)

    def _stack(self, elems):
        out = []
        for k in range(len(elems[0])):
            parts = [np.asarray(e[k]) for e in elems]
            for j, p in enumerate(parts[1:], 1):
                if p.shape != parts[0].shape:
                    raise errors.InvalidArgumentError(
                        None, self.node, f"Cannot batch tensors with different "
                        f"shapes in component {k}. First element had shape "
                        f"{list(parts[0].shape)} and element {j} had shape "
                        f"{list(p.shape)}.")
            out.append(np.stack(parts))
        return tuple(out)


class _Repeat(DatasetValue):
    commutes_with_map = True
    passes_reads = True

    def __init__(self, inp, count):
        self.inp, self.count = inp, count

    def iterate(self, ctx):
        k = 0
        while self.count < 0 or k < self.count:
            empty = True
            for elem in self.inp.iterate(ctx):
                empty = False
                yield elem
            if empty:
                return
            k += 1


class _Shuffle(DatasetValue):
    def __init__(self, inp, buffer_size, seed, seed2, reshuffle, node):
        if buffer_size <= 0:
            raise errors.InvalidArgumentError(
                None, node, f"buffer_size must be > 0, got {buffer_size}")
        self.inp, self.size = inp, int(buffer_size)
        self.seeds = (int(seed), int(seed2))
        self.reshuffle = reshuffle
        self.epochs = itertools.count()

    def _rng(self):
        epoch = next(self.epochs) if self.reshuffle else 0
        if self.seeds == (0, 0):
            return np.random.default_rng()
        return np.random.default_rng([s & 0xFFFFFFFFFFFFFFFF for s in self.seeds]
                                     + [epoch])

    def iterate(self, ctx):
        rng = self._rng()
        it = self.inp.iterate(ctx)
        buf = list(itertools.islice(it, self.size))
        while buf:
            i = int(rng.integers(len(buf)))
            out = buf[i]
            try:
                buf[i] = next(it)
            except StopIteration:
                buf[i] = buf[-1]
                buf.pop()
            yield out


class _Take(DatasetValue):
    commutes_with_map = True
    passes_reads = True

    def __init__(self, inp, count):
        self.inp, self.count = inp, count

    def iterate(self, ctx):
        it = self.inp.iterate(ctx)
        return it if self.count < 0 else itertools.islice(it, self.count)


class _Prefetch(DatasetValue):
    commutes_with_map = True
    passes_reads = True

    def __init__(self, inp):
        self.inp = inp

    def iterate(self, ctx):
        return self.inp.iterate(ctx)


# -- dataset kernels ---------------------------------------------------------------------
@register_kernel("TensorSliceDataset")
def tensor_slice_dataset_kernel(node):
    return lambda step, *comps: _Slices(comps, node.name)


@register_kernel("TensorDataset")
def tensor_dataset_kernel(node):
    return lambda step, *comps: _Tensors(comps)


@register_kernel("RangeDataset")
def range_dataset_kernel(node):
    t = node.attrs["output_types"][0].as_numpy_dtype
    return lambda step, start, stop, stp: _Range(start, stop, stp, t, node.name)


@register_kernel("MapDataset")
def map_dataset_kernel(node):
    fdef, library = function_def_for(node)
    fn = CompiledFunction(fdef, node, library)
    fused = _FusedMap(fdef, node, library)
    fused = fused if fused.fusable() else None
    return lambda step, ds: _Map(ds, fn, fused)


@register_kernel("BatchDatasetV2")
def batch_dataset_kernel(node):
    return lambda step, ds, n, drop: _Batch(ds, int(n), bool(drop), node.name)


@register_kernel("RepeatDataset")
def repeat_dataset_kernel(node):
    return lambda step, ds, count: _Repeat(ds, int(count))


@register_kernel("ShuffleDataset")
def shuffle_dataset_kernel(node):
    reshuffle = node.attrs["reshuffle_each_iteration"]
    return lambda step, ds, size, s1, s2: _Shuffle(ds, size, s1, s2, reshuffle,
                                                   node.name)


@register_kernel("TakeDataset")
def take_dataset_kernel(node):
    return lambda step, ds, count: _Take(ds, int(count))


@register_kernel("PrefetchDataset")
def prefetch_dataset_kernel(node):
    return lambda step, ds, size: _Prefetch(ds)


# -- iterators ---------------------------------------------------------------------------
class IteratorResource:
    """An iterator over a dataset, living in a task's resource manager."""

    def __init__(self, name: str, dtypes, shapes):
        self.name = name
        self.dtypes = list(dtypes)
        self.shapes = list(shapes)
        self.lock = threading.Lock()
        self._ctx = _Ctx()
        self._it = None
        self.elements_produced = 0

    @property
    def initialized(self) -> bool:
        return self._it is not None

    def init(self, dataset: DatasetValue, only_if_new: bool = False):
        with self.lock:
            if only_if_new and self._it is not None:
                return
            self._ctx.fuse = fusion_enabled(dataset)
            self._it = iter(dataset.iterate(self._ctx))
            self.elements_produced = 0

    def get_next(self, step, node_name: str):
        with self.lock:
            if self._it is None:
                raise errors.FailedPreconditionError(
                    None, node_name, "GetNext() failed because the iterator "
                    f"'{self.name}' has not been initialized. Ensure that you have "
                    "run the initializer operation for this iterator before getting "
                    "the next element.")
            self._ctx.step = step
            try:
                elem = next(self._it)
            except StopIteration:
                raise errors.OutOfRangeError(None, node_name,
                                             "End of sequence") from None
            finally:
                self._ctx.step = None
            self.elements_produced += 1
        if len(elem) != len(self.dtypes):
            raise errors.InvalidArgumentError(
                None, node_name, f"iterator '{self.name}' expects "
                f"{len(self.dtypes)} components, the dataset gave {len(elem)}")
        return elem

    def close_for_cleanup(self):
        with self.lock:
            self._it = None


def fusion_enabled(dataset) -> bool:
    """Whether ``dataset``'s options (the outermost ``with_options`` that says)
    allow ``map_and_batch_fusion`` (TF's default: yes)."""
    todo, seen = [dataset], set()
    while todo:
        ds = todo.pop(0)
        if id(ds) in seen:
            continue
        seen.add(id(ds))
        if ds.fusion is not None:
            return ds.fusion
        for v in vars(ds).values():
            if isinstance(v, DatasetValue):
                todo.append(v)
            elif isinstance(v, (list, tuple)) and v and isinstance(v[0], DatasetValue):
                todo.extend(d for d in v if isinstance(d, DatasetValue))  # zip ...
    return True


def options_fusion(serialized) -> bool | None:
    """``map_and_batch_fusion`` from ``OptionsDataset``'s ``serialized_options``
    (the JSON ``with_options`` writes; None when it does not say, or for
    another encoding, such as TF's proto from an imported graph)."""
    try:
        opts = json.loads(serialized or "{}")
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(opts, dict):
        return None
    fusion = opts.get("map_and_batch_fusion")
    if fusion is None and opts.get("apply_default_optimizations") is False:
        return False  # a default optimisation, off with the defaults
    return None if fusion is None else bool(fusion)


def _iterator_factory(node):
    a = node.attrs
    name = a.get("shared_name") or node.name
    return name, lambda: IteratorResource(name, a["output_types"], a["output_shapes"])


@register_kernel("IteratorV2")
def iterator_kernel(node):
    name, factory = _iterator_factory(node)
    container, rm = node.attrs["container"], node.resources
    return lambda step: rm.lookup_or_create(container, "iterator", name, factory)


@register_kernel("OneShotIterator")
def one_shot_iterator_kernel(node):
    name, factory = _iterator_factory(node)
    container, rm = node.attrs["container"], node.resources

    def compute(step, ds):
        it = rm.lookup_or_create(container, "iterator", name, factory)
        if not it.initialized:
            it.init(ds, only_if_new=True)
        return it

    return compute


@register_kernel("AnonymousIterator")
def anonymous_iterator_kernel(node):
    a = node.attrs

    def compute(step, ds):
        it = IteratorResource(node.name, a["output_types"], a["output_shapes"])
        it.init(ds)
        return it

    return compute


@register_kernel("MakeIterator")
def make_iterator_kernel(node):
    def compute(step, ds, it):
        it.init(ds)

    return compute


@register_kernel("IteratorGetNext")
def iterator_get_next_kernel(node):
    n = len(node.attrs["output_types"])

    def compute(step, it):
        elem = it.get_next(step, node.name)
        return elem[0] if n == 1 else tuple(elem)

    return compute
