"""Kernels for ``FIFOQueue``, ``PaddingFIFOQueue`` and ``RandomShuffleQueue`` (the
queue lives in the device's resource manager), ``MatchingFiles`` and ``Assert``."""

from __future__ import annotations

import collections
import glob
import heapq
import itertools
import math
import threading

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import unshared_resources
from nbdist.executor.kernels.random_kernels import _generator as random_generator


class FIFOQueueResource:
    def __init__(self, name, dtypes, shapes, capacity):
        self.name = name
        self.dtypes = dtypes
        self.shapes = shapes
        self.capacity = capacity
        self.items: collections.deque = collections.deque()
        self.closed = False
        self.cancel_enqueues = False
        # One lock, two conditions: enqueuers wait on ``cond`` for room,
        # dequeuers on ``filled`` for elements. An enqueue wakes the dequeuers
        # once, when the queue reaches what the least demanding one needs
        # (``_wake_at``, re-armed by each dequeuer going back to sleep), not on
        # every element: a training step waiting for a batch is not woken (and
        # made to take the GIL) once per record.
        lock = threading.RLock()
        self.cond = threading.Condition(lock)
        self.filled = threading.Condition(lock)
        self._needs: list[int] = []
        self._wake_at = math.inf
        self._fixed = _fixed_specs(dtypes, shapes)

    def close(self):
        """Closed: every waiter wakes (to fail or take what is left)."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()
            self.filled.notify_all()

    dropped = False  # by its ResourceMgr (a reset container): looked up anew

    def close_for_cleanup(self):
        self.dropped = True
        self.close()

    def _check_component(self, node, i, value, batched):
        want = self.dtypes[i].as_numpy_dtype
        value = np.asarray(value)
        if self.dtypes[i].name != "string" and value.dtype != want:
            raise errors.InvalidArgumentError(
                None, node, f"Component {i} of queue '{self.name}' must be "
                f"{self.dtypes[i].name}, got {value.dtype}")
        shape = self.shapes[i] if i < len(self.shapes) else None
        if shape is not None and shape.rank is not None:
            got = value.shape[1:] if batched else value.shape
            if not shape.is_compatible_with(got):
                lead = [value.shape[0]] if batched else []
                want = lead + ["?" if d is None else d for d in shape.as_list()]
                raise errors.InvalidArgumentError(
                    None, node, f"Shape mismatch in tuple component {i}. Expected "
                    f"{_dims(want)}, got {_dims(value.shape)} (queue "
                    f"'{self.name}')")
        return value

    def check_element(self, node, comps):
        """``comps`` as one element of this queue, checked: components that are
        already arrays of the exact dtype and a fully known shape pass as they are
        (no per-component ``TensorShape`` work per record); anything else takes
        ``_check_component``, which converts or says what is wrong."""
        fixed = self._fixed
        if len(comps) == len(fixed):
            out = []
            for c, (dt, shape) in zip(comps, fixed):
                if type(c) is not np.ndarray:
                    if not isinstance(c, np.generic):
                        break
                    c = np.asarray(c)  # a NumPy scalar (a parsed scalar feature)
                if c.dtype != dt or c.shape != shape:
                    break
                out.append(c)
            else:
                return tuple(out)
        return tuple(self._check_component(node, i, c, False)
                     for i, c in enumerate(comps))

    def check_matches(self, node, kind, dtypes, shapes, capacity):
        """A shared queue must be the same queue to every op naming it."""
        mine = (self.kind, [d.name for d in self.dtypes],
                [str(s) for s in self.shapes], self.capacity)
        theirs = (kind, [d.name for d in dtypes], [str(s) for s in shapes], capacity)
        for what, a, b in zip(("type", "component types", "component shapes",
                               "capacity"), mine, theirs):
            if a != b:
                raise errors.InvalidArgumentError(
                    None, node, f"Shared queue '{self.name}' has {what} {a}, but "
                    f"this op asks for {what} {b}")

    def enqueue(self, step, node, tuples):
        with self.cond:
            for t in tuples:
                if self.closed or 0 <= self.capacity <= len(self.items):
                    step.wait(lambda: self.closed or self.capacity < 0 or
                              len(self.items) < self.capacity,
                              f"room in queue '{self.name}'", self.cond.wait)
                if self.closed:
                    raise errors.CancelledError(
                        None, node, f"FIFOQueue '{self.name}' is closed.")
                self._put(t)
                if len(self.items) >= self._wake_at:
                    self._wake_at = math.inf
                    self.filled.notify_all()

    kind = "FIFOQueue"
    min_after_dequeue = 0

    def dequeue(self, step, node, n, up_to=False):
        """``n`` elements; with ``up_to``, fewer once the queue is closed."""
        keep = self.min_after_dequeue
        need = n + keep
        with self.cond:
            if len(self.items) < need and not self.closed:
                self._needs.append(need)
                try:
                    step.wait(lambda: len(self.items) >= need or self.closed,
                              f"{n} element(s) of queue '{self.name}'",
                              self._sleep_until_filled)
                finally:
                    self._needs.remove(need)
            if len(self.items) < n and not (up_to and self.items):
                raise errors.OutOfRangeError(
                    None, node, f"{self.kind} '{self.name}' is closed and has "
                    f"insufficient elements (requested {n}, current size "
                    f"{len(self.items)})")
            out = self._take_many(min(n, len(self.items)))
            self.cond.notify_all()
            return out

    def _sleep_until_filled(self, timeout):
        self._wake_at = min(self._needs)
        self.filled.wait(timeout)

    def _put(self, t):
        self.items.append(t)

    def _take(self):
        return self.items.popleft()

    def _take_many(self, k):
        return [self._take() for _ in range(k)]

    def batch(self, i, values):
        """Component ``i`` of dequeued elements ``values``, stacked."""
        return np.stack(values)


class PaddingFIFOQueueResource(FIFOQueueResource):
    """A FIFO queue whose elements may differ in their unknown dimensions; a
    batch is padded to its largest element."""

    kind = "PaddingFIFOQueue"

    def batch(self, i, values):
        dtype = self.dtypes[i]
        shapes = np.array([v.shape for v in values], dtype=np.int64).reshape(
            len(values), -1)
        out_shape = [len(values)] + shapes.max(axis=0, initial=0).tolist()
        if dtype.name == "string":
            out = np.full(out_shape, b"", dtype=object)
        else:
            out = np.zeros(out_shape, dtype=dtype.as_numpy_dtype)
        for k, v in enumerate(values):
            out[(k,) + tuple(slice(0, d) for d in v.shape)] = v
        return out


class RandomShuffleQueueResource(FIFOQueueResource):
    """Dequeues a random element while more than ``min_after_dequeue`` remain
    (all of them once closed)."""

    kind = "RandomShuffleQueue"

    def __init__(self, name, dtypes, shapes, capacity, min_after_dequeue, gen):
        super().__init__(name, dtypes, shapes, capacity)
        self.items = []
        self.min_after_dequeue = min_after_dequeue
        self._gen = gen

    def _take_many(self, k):
        """``k`` elements, each drawn uniformly from those left: the k draws
        in one call of the generator (not one per element)."""
        items = self.items
        out = []
        for i in self._gen.integers(0, np.arange(len(items), len(items) - k, -1)
                                    ).tolist():
            items[i], items[-1] = items[-1], items[i]
            out.append(items.pop())
        return out


class PriorityQueueResource(FIFOQueueResource):
    """Dequeues the element of lowest priority (component 0, an int64 scalar);
    equal priorities in the order they were enqueued."""

    kind = "PriorityQueue"

    def __init__(self, name, dtypes, shapes, capacity):
        super().__init__(name, dtypes, shapes, capacity)
        self.items = []
        self._seq = itertools.count()

    def _put(self, t):
        heapq.heappush(self.items, (int(t[0]), next(self._seq), t))

    def _take(self):
        return heapq.heappop(self.items)[2]


def _fixed_specs(dtypes, shapes) -> tuple:
    """Per component, the ``(numpy dtype, shape tuple)`` an enqueued array has
    when it needs no conversion; ``(None, None)`` where that is not known in
    advance (strings, partly known or missing shapes): those are checked fully."""
    out = []
    for i, dt in enumerate(dtypes):
        shape = shapes[i] if i < len(shapes) else None
        if (dt.name == "string" or shape is None or not shape.is_fully_defined()):
            out.append((None, None))
        else:
            out.append((np.dtype(dt.as_numpy_dtype), tuple(shape.as_list())))
    return tuple(out)


def _dims(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _queue_kernel(node, make):
    """The queue resource of ``node``, made by ``make(name, attrs)`` on first use;
    a queue shared by name must match this node's definition."""
    a = node.attrs
    name = a["shared_name"] or node.name
    rm = unshared_resources(node, a["shared_name"])
    checked = [None]  # the queue this node last matched: checked once, not per run

    def compute(step):
        q = checked[0]
        if q is not None and not q.dropped:  # every run after the first
            return q
        fresh = []

        def create():
            fresh.append(make(name, a))
            return fresh[0]

        q = rm.lookup_or_create(a["container"], "queue", name, create)
        if not fresh and q is not checked[0]:
            q.check_matches(node.name, make.kind, a["component_types"], a["shapes"],
                            a["capacity"])
        checked[0] = q
        return q

    return compute


def _factory(cls, make):
    make.kind = cls.kind
    return make


@register_kernel("FIFOQueueV2")
def fifo_queue_kernel(node):
    return _queue_kernel(node, _factory(FIFOQueueResource, lambda name, a: (
        FIFOQueueResource(name, a["component_types"], a["shapes"], a["capacity"]))))


@register_kernel("PaddingFIFOQueueV2")
def padding_fifo_queue_kernel(node):
    return _queue_kernel(node, _factory(PaddingFIFOQueueResource, lambda name, a: (
        PaddingFIFOQueueResource(name, a["component_types"], a["shapes"],
                                 a["capacity"]))))


@register_kernel("RandomShuffleQueueV2")
def random_shuffle_queue_kernel(node):
    return _queue_kernel(node, _factory(RandomShuffleQueueResource, lambda name, a: (
        RandomShuffleQueueResource(name, a["component_types"], a["shapes"],
                                   a["capacity"], a["min_after_dequeue"],
                                   random_generator(node)))))


@register_kernel("PriorityQueueV2")
def priority_queue_kernel(node):
    return _queue_kernel(node, _factory(PriorityQueueResource, lambda name, a: (
        PriorityQueueResource(name, a["component_types"], a["shapes"],
                              a["capacity"]))))


@register_kernel("QueueEnqueueV2")
def enqueue_kernel(node):
    def compute(step, q, *comps):
        q.enqueue(step, node.name, [q.check_element(node.name, comps)])

    return compute


@register_kernel("QueueEnqueueManyV2")
def enqueue_many_kernel(node):
    def compute(step, q, *comps):
        comps = [q._check_component(node.name, i, c, True)
                 for i, c in enumerate(comps)]
        n = comps[0].shape[0] if comps[0].ndim else 0
        if any(c.ndim == 0 or c.shape[0] != n for c in comps):
            raise errors.InvalidArgumentError(
                None, node.name, "enqueue_many components must share their first "
                "dimension")
        q.enqueue(step, node.name, [tuple(c[i] for c in comps) for i in range(n)])

    return compute


@register_kernel("QueueDequeueV2")
def dequeue_kernel(node):
    n_out = len(node.attrs["component_types"])

    def compute(step, q):
        (t,) = q.dequeue(step, node.name, 1)
        return t[0] if n_out == 1 else tuple(t)

    return compute


@register_kernel("QueueDequeueManyV2")
def dequeue_many_kernel(node):
    return _dequeue_n(node, up_to=False)


@register_kernel("QueueDequeueUpToV2")
def dequeue_up_to_kernel(node):
    return _dequeue_n(node, up_to=True)


def _dequeue_n(node, up_to):
    n_out = len(node.attrs["component_types"])

    def compute(step, q, n):
        n = int(n)
        if not q.shapes:
            raise errors.InvalidArgumentError(
                None, node.name, f"{q.kind} '{q.name}''s DequeueMany and DequeueUpTo "
                f"require the components to have specified shapes.")
        if n < 0:
            raise errors.InvalidArgumentError(None, node.name,
                                              f"dequeue_many n must be >= 0, got {n}")
        items = q.dequeue(step, node.name, n, up_to)
        outs = []
        for i in range(n_out):
            if items:
                outs.append(q.batch(i, [np.asarray(t[i]) for t in items]))
            else:
                shape = q.shapes[i].as_list() if i < len(q.shapes) and (
                    q.shapes[i].rank is not None) else []
                outs.append(np.zeros([0] + [d or 0 for d in shape],
                                     q.dtypes[i].as_numpy_dtype))
        return outs[0] if n_out == 1 else tuple(outs)

    return compute


@register_kernel("QueueSizeV2")
def size_kernel(node):
    return lambda step, q: np.int32(len(q.items))


@register_kernel("QueueCloseV2")
def close_kernel(node):
    def compute(step, q):
        q.close()

    return compute


@register_kernel("MatchingFiles")
def matching_files_kernel(node):
    def compute(step, pattern):
        names = set()
        for p in np.asarray(pattern, dtype=object).reshape(-1):
            p = p.decode() if isinstance(p, bytes) else str(p)
            names.update(glob.glob(p, include_hidden=True))
        return np.array(sorted(n.encode() for n in names), dtype=object)

    return compute
