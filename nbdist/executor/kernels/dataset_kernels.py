"""Kernels for ``nd.data``: datasets are Python descriptions over NumPy values,
iterators resources of the task's ``ResourceMgr``.

A dataset kernel returns a ``DatasetValue``; ``iterate(ctx)`` makes a fresh
Python iterator of element tuples. ``ctx.step`` is the step of the
``IteratorGetNext`` being served, so a ``MapDataset`` runs its function
within that step (its cancellation, deadline and trace).
"""

from __future__ import annotations

import itertools
import threading

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.function_kernels import CompiledFunction, function_def_for


class _Ctx:
    __slots__ = ("step",)

    def __init__(self):
        self.step = None


class DatasetValue:
    """What a dataset op outputs; ``iterate(ctx)`` yields tuples of arrays."""

    def iterate(self, ctx):
        raise NotImplementedError


def _fresh(v):
    # A slice of a constant is a view of it: hand out a copy (0-d are scalars).
    return v.copy() if isinstance(v, np.ndarray) else v


class _Slices(DatasetValue):
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
    def __init__(self, comps):
        self.comps = tuple(comps)

    def iterate(self, ctx):
        yield tuple(_fresh(np.asarray(c)) if isinstance(c, np.ndarray) else c
                    for c in self.comps)


class _Range(DatasetValue):
    def __init__(self, start, stop, step, dtype, node):
        if step == 0:
            raise errors.InvalidArgumentError(None, node, "range step must not be 0")
        self.args, self.dtype = (int(start), int(stop), int(step)), dtype

    def iterate(self, ctx):
        t = self.dtype
        for v in range(*self.args):
            yield (t(v),)


class _Map(DatasetValue):
    def __init__(self, inp, fn):
        self.inp, self.fn = inp, fn

    def iterate(self, ctx):
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


class _Batch(DatasetValue):
    def __init__(self, inp, n, drop, node):
        if n <= 0:
            raise errors.InvalidArgumentError(None, node,
                                              f"batch_size must be > 0, got {n}")
        self.inp, self.n, self.drop, self.node = inp, n, drop, node

    def iterate(self, ctx):
        for elems in groups(self.inp.iterate(ctx), self.n, self.drop):
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
            yield tuple(out)


class _Repeat(DatasetValue):
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
    def __init__(self, inp, count):
        self.inp, self.count = inp, count

    def iterate(self, ctx):
        it = self.inp.iterate(ctx)
        return it if self.count < 0 else itertools.islice(it, self.count)


class _Prefetch(DatasetValue):
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
    return lambda step, ds: _Map(ds, fn)


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
