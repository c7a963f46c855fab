"""Kernels for ``ConditionalAccumulator`` (a resource of the device's manager).

As TF's ``ConditionalAccumulatorBase``: a push whose local step is older than
the accumulator's global step is dropped; a take waits (through
``step.wait``, so it honours cancellation and timeouts) until enough
gradients arrived. Pending takes are served, in order, by the push that
completes them, under the accumulator's lock, so no later push can join a
finished average.
"""

from __future__ import annotations

import collections
import logging
import threading
import time

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.ops import accumulator_ops  # noqa: F401  (registers the op definitions)

_log = logging.getLogger("nbdist")


class _Taker:
    __slots__ = ("done", "group", "n", "result")

    def __init__(self, n, group=None):
        self.n = n
        self.result = None
        self.done = False
        self.group = group  # a Condition to notify when served (several takes)


class AccumulatorResource:
    def __init__(self, name, dtype, shape, reduction_type):
        self.name = name
        self.dtype = dtype
        self.shape = shape  # static TensorShape (may be partial)
        self.reduction_type = reduction_type
        self.accum: np.ndarray | None = None
        self.counter = 0
        self.global_step = 0
        self.closed = False
        self.dropped = 0  # stale gradients dropped (for the views; TF has no count)
        self.takers: collections.deque = collections.deque()
        self.cond = threading.Condition()

    def close_for_cleanup(self):
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    # -- under self.cond ---------------------------------------------------------
    def _take_locked(self) -> np.ndarray:
        accum = self.accum
        if self.reduction_type == "MEAN":
            out = accum / np.asarray(self.counter, dtype=accum.dtype)
        else:
            out = np.array(accum, copy=True)
        self.accum = None
        self.counter = 0
        self.global_step += 1
        return out.astype(accum.dtype, copy=False)

    def _flush_locked(self):
        served = False
        while self.takers and self.counter >= self.takers[0].n:
            t = self.takers.popleft()
            t.result = self._take_locked()
            t.done = True
            served = True
            if t.group is not None:
                with t.group:
                    t.group.notify_all()
        if served:
            self.cond.notify_all()

    def register(self, node, taker):
        with self.cond:
            if self.closed:
                raise errors.CancelledError(
                    None, node, f"ConditionalAccumulator '{self.name}' was closed.")
            self.takers.append(taker)
            self._flush_locked()

    def unregister(self, taker):
        with self.cond:
            if not taker.done:
                try:
                    self.takers.remove(taker)
                except ValueError:
                    pass

    # -- kernels' entry points -----------------------------------------------------
    def apply(self, node, local_step, grad):
        want = np.dtype(self.dtype.as_numpy_dtype)
        grad = np.asarray(grad)
        if grad.dtype != want:
            raise errors.InvalidArgumentError(
                None, node, f"Gradient for accumulator '{self.name}' must be "
                f"{self.dtype.name}, got {grad.dtype}")
        if self.shape.rank is not None and not self.shape.is_compatible_with(
                grad.shape):
            raise errors.InvalidArgumentError(
                None, node, f"Shape mismatch: expected {self.shape}, got "
                f"{list(grad.shape)} for accumulator '{self.name}'")
        local_step = int(local_step)
        with self.cond:
            if self.closed:
                raise errors.CancelledError(
                    None, node, f"ConditionalAccumulator '{self.name}' was closed.")
            if local_step < self.global_step:
                self.dropped += 1
                _log.debug("Accumulator %s dropped a stale gradient (local step %d "
                           "< global step %d)", self.name, local_step,
                           self.global_step)
                return False
            if self.accum is None:
                self.accum = np.array(grad, copy=True)
            else:
                if self.accum.shape != grad.shape:
                    raise errors.InvalidArgumentError(
                        None, node, f"Shape mismatch: accumulator '{self.name}' "
                        f"holds gradients of shape {list(self.accum.shape)}, got "
                        f"{list(grad.shape)}")
                self.accum = self.accum + grad
            self.counter += 1
            self._flush_locked()
            return True

    def take(self, step, node, n):
        n = int(n)
        if n < 1:
            raise errors.InvalidArgumentError(
                None, node, f"Argument num_required must be positive, but was {n}")
        t = _Taker(n)
        with self.cond:
            if self.closed:
                raise errors.CancelledError(
                    None, node, f"ConditionalAccumulator '{self.name}' was closed.")
            self.takers.append(t)
            self._flush_locked()
            try:
                step.wait(lambda: t.done or self.closed,
                          f"{n} gradient(s) in accumulator '{self.name}' (has "
                          f"{self.counter})", self.cond.wait)
            except BaseException:
                if not t.done:
                    try:
                        self.takers.remove(t)
                    except ValueError:
                        pass
                raise
            if not t.done:
                self.takers.remove(t)
                raise errors.CancelledError(
                    None, node, f"ConditionalAccumulator '{self.name}' was closed "
                    "while a take was waiting.")
            return t.result

    def set_global_step(self, new_step):
        new_step = int(new_step)
        with self.cond:
            if new_step < self.global_step:
                _log.warning("Attempt to set the global step of accumulator %s to a "
                             "smaller value: %d -> %d", self.name, self.global_step,
                             new_step)
            self.global_step = new_step


class SparseAccumulatorResource(AccumulatorResource):
    """TF's ``SparseConditionalAccumulator``: rows summed by index, each
    counted once per gradient holding it (for the per-row ``MEAN``)."""

    def __init__(self, name, dtype, shape, reduction_type):
        super().__init__(name, dtype, shape, reduction_type)
        self.indices: np.ndarray | None = None
        self.counts: np.ndarray | None = None
        self.dense_shape: np.ndarray | None = None

    def _take_locked(self):
        values, counts = self.accum, self.counts
        if self.reduction_type == "MEAN":
            scale = counts.astype(values.dtype).reshape((-1,) + (1,) * (
                values.ndim - 1))
            values = (values / scale).astype(values.dtype, copy=False)
        shape = self.dense_shape
        if shape is None:
            first = self.shape[0] if self.shape.rank else None
            shape = np.array([-1 if first is None else first]
                             + list(values.shape[1:]), np.int64)
        out = (self.indices, values, shape)
        self.accum = self.indices = self.counts = None
        self.counter = 0
        self.global_step += 1
        return out

    def apply_sparse(self, node, local_step, indices, values, shape, known):
        want = np.dtype(self.dtype.as_numpy_dtype)
        values = np.asarray(values)
        indices = np.asarray(indices, np.int64)
        if values.dtype != want:
            raise errors.InvalidArgumentError(
                None, node, f"Gradient for accumulator '{self.name}' must be "
                f"{self.dtype.name}, got {values.dtype}")
        if indices.ndim != 1 or values.ndim < 1 or values.shape[0] != indices.size:
            raise errors.InvalidArgumentError(
                None, node, f"Expected {indices.size} rows of values for indices of "
                f"shape {list(indices.shape)}, got values of shape "
                f"{list(values.shape)}")
        if self.shape.rank is not None and not self.shape[1:].is_compatible_with(
                values.shape[1:]):
            raise errors.InvalidArgumentError(
                None, node, f"Shape mismatch: expected rows of shape "
                f"{self.shape[1:]}, got {list(values.shape[1:])} for accumulator "
                f"'{self.name}'")
        # One row per distinct index of this gradient.
        uniq, inverse = np.unique(indices, return_inverse=True)
        rows = np.zeros((uniq.size,) + values.shape[1:], values.dtype)
        np.add.at(rows, inverse.reshape(-1), values)
        local_step = int(local_step)
        with self.cond:
            if self.closed:
                raise errors.CancelledError(
                    None, node, f"ConditionalAccumulator '{self.name}' was closed.")
            if local_step < self.global_step:
                self.dropped += 1
                _log.debug("Accumulator %s dropped a stale gradient", self.name)
                return False
            if known:
                self.dense_shape = np.asarray(shape, np.int64)
            if self.accum is None:
                self.indices, self.accum = uniq, rows
                self.counts = np.ones(uniq.size, np.int64)
            else:
                if self.accum.shape[1:] != rows.shape[1:]:
                    raise errors.InvalidArgumentError(
                        None, node, f"Shape mismatch: accumulator '{self.name}' "
                        f"holds rows of shape {list(self.accum.shape[1:])}, got "
                        f"{list(rows.shape[1:])}")
                both = np.concatenate([self.indices, uniq])
                merged, where = np.unique(both, return_inverse=True)
                where = where.reshape(-1)
                acc = np.zeros((merged.size,) + rows.shape[1:], rows.dtype)
                np.add.at(acc, where, np.concatenate([self.accum, rows]))
                counts = np.zeros(merged.size, np.int64)
                np.add.at(counts, where, np.concatenate(
                    [self.counts, np.ones(uniq.size, np.int64)]))
                self.indices, self.accum, self.counts = merged, acc, counts
            self.counter += 1
            self._flush_locked()


def _accumulator_factory(resource_class):
    def kernel(node):
        a = node.attrs
        name = a["shared_name"] or node.name
        rm = node.resources

        def factory():
            return resource_class(name, a["dtype"], a["shape"], a["reduction_type"])

        def compute(step):
            acc = rm.lookup_or_create(a["container"], "accumulator", name, factory)
            if not isinstance(acc, resource_class):
                raise errors.InvalidArgumentError(
                    None, node.name, f"Shared accumulator '{name}' is not a "
                    f"{node.op}")
            if acc.dtype is not a["dtype"]:
                raise errors.InvalidArgumentError(
                    None, node.name, f"Shared accumulator '{name}' has dtype "
                    f"{acc.dtype.name}, but this node asks for {a['dtype'].name}")
            return acc

        return compute

    return kernel


register_kernel("SparseConditionalAccumulator")(
    _accumulator_factory(SparseAccumulatorResource))


@register_kernel("SparseAccumulatorApplyGradient")
def sparse_apply_gradient_kernel(node):
    known = node.attrs.get("has_known_shape", False)

    def compute(step, acc, local_step, indices, values, shape):
        global_step = acc.global_step
        accepted = acc.apply_sparse(node.name, local_step, indices, values, shape,
                                    known)
        _publish_push(node, step, acc, local_step, global_step,
                      accepted is False)

    return compute


@register_kernel("SparseAccumulatorTakeGradient")
def sparse_take_gradient_kernel(node):
    return lambda step, acc, n: acc.take(step, node.name, n)


@register_kernel("ConditionalAccumulator")
def accumulator_kernel(node):
    a = node.attrs
    name = a["shared_name"] or node.name
    rm = node.resources

    def factory():
        return AccumulatorResource(name, a["dtype"], a["shape"], a["reduction_type"])

    def compute(step):
        acc = rm.lookup_or_create(a["container"], "accumulator", name, factory)
        if acc.dtype is not a["dtype"]:
            raise errors.InvalidArgumentError(
                None, node.name, f"Shared accumulator '{name}' has dtype "
                f"{acc.dtype.name}, but this node asks for {a['dtype'].name}")
        return acc

    return compute


@register_kernel("AccumulatorApplyGradient")
def apply_gradient_kernel(node):
    def compute(step, acc, local_step, grad):
        global_step = acc.global_step
        accepted = acc.apply(node.name, local_step, grad)
        _publish_push(node, step, acc, local_step, global_step, not accepted)

    return compute


def _publish_push(node, step, acc, local_step, global_step, dropped):
    """A ``gradient_pushed`` event (what ``BarrierView`` shows as a worker's
    arrival at a round, or its stale gradient dropped), when the task
    publishes events."""
    publish = getattr(node.env, "publish", None)
    if publish is None:
        return
    session_of = getattr(node.env, "session_of", None)
    publish("gradient_pushed", {
        "task": getattr(node.env, "task_name", ""),
        "step_id": int(step.step_id),
        "accumulator": acc.name,
        "local_step": int(local_step),
        "global_step": int(global_step),
        "dropped": bool(dropped),
        "time": time.time(),
        "session": session_of(step.step_id) if session_of else "",
    })


def _publish_take(node, step, accs, n):
    """A ``take_started`` event: the chief's take of a round is waiting for
    ``num_required`` gradients (``replicas_to_aggregate``: what ``BarrierView``
    shows as the arrivals a round needs)."""
    publish = getattr(node.env, "publish", None)
    if publish is None:
        return
    publish("take_started", {
        "task": getattr(node.env, "task_name", ""),
        "step_id": int(step.step_id),
        "accumulators": [a.name for a in accs],
        "num_required": int(n),
        "time": time.time(),
    })


@register_kernel("AccumulatorTakeGradient")
def take_gradient_kernel(node):
    def compute(step, acc, n):
        _publish_take(node, step, [acc], n)
        return acc.take(step, node.name, n)

    return compute


@register_kernel("AccumulatorTakeGradients")
def take_gradients_kernel(node):
    """Takes from several accumulators, all waiting from the start, as
    concurrent ``AccumulatorTakeGradient`` ops do in TF."""
    count = node.attrs["N"]

    def compute(step, *args):
        accs, n = args[:count], int(args[count])
        if n < 1:
            raise errors.InvalidArgumentError(
                None, node.name, f"Argument num_required must be positive, but was "
                f"{n}")
        group = threading.Condition()
        _publish_take(node, step, accs, n)
        takers = [_Taker(n, group) for _ in accs]
        try:
            for acc, t in zip(accs, takers):
                acc.register(node.name, t)
            names = ", ".join(a.name for a in accs)
            with group:
                step.wait(lambda: all(t.done for t in takers) or
                          any(a.closed for a in accs),
                          f"{n} gradient(s) in each of the accumulators {names}",
                          group.wait)
        except BaseException:
            for acc, t in zip(accs, takers):
                acc.unregister(t)
            raise
        if not all(t.done for t in takers):
            for acc, t in zip(accs, takers):
                acc.unregister(t)
            raise errors.CancelledError(
                None, node.name, "An accumulator was closed while a take was waiting.")
        results = []
        for t in takers:  # a sparse accumulator gives 3 outputs
            results.extend(t.result if isinstance(t.result, tuple) else [t.result])
        return results[0] if len(results) == 1 else tuple(results)

    return compute


@register_kernel("AccumulatorNumAccumulated")
def num_accumulated_kernel(node):
    return lambda step, acc: np.int32(acc.counter)


@register_kernel("AccumulatorSetGlobalStep")
def set_global_step_kernel(node):
    return lambda step, acc, new_step: acc.set_global_step(new_step)
