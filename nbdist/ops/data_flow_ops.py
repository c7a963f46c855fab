"""``FIFOQueue``, ``PaddingFIFOQueue`` and ``RandomShuffleQueue``: queue resources
shared by name across sessions and clients.

Ops that use the queue are colocated with it. A blocked dequeue honours
``operation_timeout_in_ms`` and cancellation; a closed, empty queue raises
``OutOfRangeError``.

Also here, for the input pipeline: ``MatchingFiles`` (the files matching a glob)
and TF's ``Assert`` op (raises ``InvalidArgumentError`` when its condition is
false).
"""

from __future__ import annotations

from nbdist.framework import dtypes as _dtypes
from nbdist.ops.array_ops_join import stack
from nbdist.ops.array_ops_slicing import gather
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.ops.random_ops import _get_seeds
from nbdist.framework.tensor_shape import TensorShape, as_shape


def _handle_only(c):
    if c.input_dtypes[0].base_dtype is not _dtypes.resource:
        raise TypeError(f"{c.op_type} needs a queue handle as its first input")


def _queue_infer(c):
    return [(_dtypes.resource, TensorShape([]))]


register_op("FIFOQueueV2", _queue_infer,
            attrs={"component_types": ("list(type)", REQUIRED),
                   "shapes": ("list(shape)", []), "capacity": ("int", -1),
                   "container": ("string", ""), "shared_name": ("string", "")},
            num_inputs=0, stateful=True)


register_op("PaddingFIFOQueueV2", _queue_infer,
            attrs={"component_types": ("list(type)", REQUIRED),
                   "shapes": ("list(shape)", []), "capacity": ("int", -1),
                   "container": ("string", ""), "shared_name": ("string", "")},
            num_inputs=0, stateful=True)


register_op("RandomShuffleQueueV2", _queue_infer,
            attrs={"component_types": ("list(type)", REQUIRED),
                   "shapes": ("list(shape)", []), "capacity": ("int", -1),
                   "min_after_dequeue": ("int", 0), "seed": ("int", 0),
                   "seed2": ("int", 0),
                   "container": ("string", ""), "shared_name": ("string", "")},
            num_inputs=0, stateful=True)


# PriorityQueueV2: component_types and shapes include the int64 priority first.
register_op("PriorityQueueV2", _queue_infer,
            attrs={"component_types": ("list(type)", REQUIRED),
                   "shapes": ("list(shape)", REQUIRED), "capacity": ("int", -1),
                   "container": ("string", ""), "shared_name": ("string", "")},
            num_inputs=0, stateful=True)


def _enqueue_infer(c):
    _handle_only(c)
    return []


_ENQ_ATTRS = {"Tcomponents": ("list(type)", REQUIRED), "timeout_ms": ("int", -1)}
register_op("QueueEnqueueV2", _enqueue_infer, attrs=_ENQ_ATTRS, min_inputs=2,
            ref_inputs=(0,), stateful=True)
register_op("QueueEnqueueManyV2", _enqueue_infer, attrs=_ENQ_ATTRS, min_inputs=2,
            ref_inputs=(0,), stateful=True)


def _dequeue_infer(c):
    _handle_only(c)
    shapes = c.attrs.get("_shapes") or [None] * len(c.attr("component_types"))
    return [(t, TensorShape(None) if s is None else s)
            for t, s in zip(c.attr("component_types"), shapes)]


def _dequeue_many_infer(c):
    _handle_only(c)
    n = c.constant(1)
    lead = None if n is None else int(n)
    shapes = c.attrs.get("_shapes") or [None] * len(c.attr("component_types"))
    return [(t, TensorShape(None) if s is None or s.rank is None
             else TensorShape([lead] + s.as_list()))
            for t, s in zip(c.attr("component_types"), shapes)]


_DEQ_ATTRS = {"component_types": ("list(type)", REQUIRED), "timeout_ms": ("int", -1)}
register_op("QueueDequeueV2", _dequeue_infer, attrs=_DEQ_ATTRS, num_inputs=1,
            ref_inputs=(0,), stateful=True)
register_op("QueueDequeueManyV2", _dequeue_many_infer, attrs=_DEQ_ATTRS, num_inputs=2,
            ref_inputs=(0,), stateful=True)
register_op("QueueDequeueUpToV2", _dequeue_many_infer, attrs=_DEQ_ATTRS, num_inputs=2,
            ref_inputs=(0,), stateful=True)
register_op("QueueSizeV2", lambda c: (_handle_only(c),
                                      [(_dtypes.int32, TensorShape([]))])[1],
            num_inputs=1, ref_inputs=(0,), stateful=True)
register_op("QueueCloseV2", lambda c: (_handle_only(c), [])[1],
            attrs={"cancel_pending_enqueues": ("bool", False)}, num_inputs=1,
            ref_inputs=(0,), stateful=True)


class QueueBase:
    """What every queue offers: ``enqueue``, ``enqueue_many``, ``dequeue``,
    ``dequeue_many``, ``dequeue_up_to``, ``size``, ``close``. Build one of the
    subclasses (``FIFOQueue``, ``PaddingFIFOQueue``, ``RandomShuffleQueue``)."""

    _OP_TYPE = ""
    _partial_shapes_allowed = False

    def __init__(self, capacity, dtypes, shapes=None, names=None, shared_name=None,
                 name="fifo_queue", _attrs=None):
        if not isinstance(dtypes, (list, tuple)):
            dtypes = [dtypes]
        self._dtypes = [_dtypes.as_dtype(d) for d in dtypes]
        shapes = _as_shape_list(shapes)
        if shapes is not None:
            if len(shapes) != len(self._dtypes):
                raise ValueError("Queue shapes must have the same length as dtypes")
            self._shapes = shapes
            if not self._partial_shapes_allowed and not all(
                    s.is_fully_defined() for s in self._shapes):
                raise ValueError(f"All shapes must be fully defined: "
                                 f"{self._shapes} (a PaddingFIFOQueue takes "
                                 f"unknown dimensions)")
        else:
            self._shapes = [TensorShape(None) for _ in self._dtypes]
        if names is not None:
            if not isinstance(names, (list, tuple)):
                names = [names]
            if len(names) != len(self._dtypes):
                raise ValueError("List of names must have the same length as the "
                                 "list of dtypes")
        self._names = list(names) if names is not None else None
        g = get_default_graph()
        attrs = {"component_types": self._dtypes, "capacity": int(capacity),
                 "shared_name": shared_name or ""}
        if shapes is not None:
            attrs["shapes"] = self._shapes
        attrs.update(_attrs or {})
        self._queue_ref = g.create_op(self._OP_TYPE, [], attrs,
                                      name=name).outputs[0]
        self._name = self._queue_ref.op.name

    @staticmethod
    def from_list(index, queues):
        """The queue ``queues[index]`` (``index`` a scalar tensor, chosen when
        the graph runs); the queues must share dtypes and names.

        >>> import nbdist as nd
        >>> qs = [nd.FIFOQueue(5, nd.float32, shapes=[[]]) for _ in range(2)]
        >>> chosen = nd.FIFOQueue.from_list(nd.constant(1), qs)
        >>> with nd.Session() as s:
        ...     s.run(chosen.enqueue(3.0))
        ...     int(s.run(qs[1].size())), int(s.run(qs[0].size()))
        (1, 0)
        """
        if not queues or not all(isinstance(q, QueueBase) for q in queues):
            raise TypeError("A list of queues expected")
        first = queues[0]
        for i, q in enumerate(queues[1:], 1):
            if q.dtypes != first.dtypes:
                raise TypeError(f"Queue {i} has incompatible dtypes: {q.dtypes} "
                                f"vs. {first.dtypes}")
            if q.names != first.names:
                raise TypeError(f"Queue {i} has incompatible names: {q.names} vs. "
                                f"{first.names}")
        # A component's shape is known only if every queue agrees on it.
        shapes = [s if all(q.shapes[i] == s for q in queues) else TensorShape(None)
                  for i, s in enumerate(first.shapes)]
        with first.queue_ref.graph.name_scope("queue_select"):
            selected = gather(stack([q.queue_ref for q in queues]), index)
        chosen = QueueBase.__new__(QueueBase)
        chosen._dtypes, chosen._shapes = list(first.dtypes), shapes
        chosen._names = first.names
        chosen._queue_ref, chosen._name = selected, selected.op.name
        return chosen

    queue_ref = property(lambda self: self._queue_ref)
    name = property(lambda self: self._name)
    dtypes = property(lambda self: list(self._dtypes))
    shapes = property(lambda self: list(self._shapes))
    names = property(lambda self: self._names)

    def _components(self, vals):
        if self._names is not None:
            if not isinstance(vals, dict):
                raise ValueError("You must enqueue a dictionary in a Queue with names")
            if set(vals) != set(self._names):
                raise ValueError(f"Keys in dictionary to enqueue do not match names "
                                 f"of Queue. Dictionary: {sorted(vals)}, Queue: "
                                 f"{self._names}")
            vals = [vals[n] for n in self._names]
        elif isinstance(vals, dict):
            raise ValueError("Queue must have names to enqueue a dictionary")
        elif not isinstance(vals, (list, tuple)):
            vals = [vals]
        if len(vals) != len(self._dtypes):
            raise ValueError(f"Expected {len(self._dtypes)} components, got "
                             f"{len(vals)}")
        return [convert_to_tensor(v, dtype=d) for v, d in zip(vals, self._dtypes)]

    def _op(self, op_type, inputs, attrs, name):
        g = self._queue_ref.graph
        with g.colocate_with(self._queue_ref.op):
            return g.create_op(op_type, [self._queue_ref] + list(inputs), attrs,
                               name=name)

    def enqueue(self, vals, name=None):
        comps = self._components(vals)
        for t, s in zip(comps, self._shapes):
            if not t.shape.is_compatible_with(s):
                raise ValueError(f"Shape {t.shape} of an enqueued value is not "
                                 f"compatible with the queue's {s}")
        return self._op("QueueEnqueueV2", comps, {"Tcomponents": self._dtypes},
                        name or "QueueEnqueueV2")

    def enqueue_many(self, vals, name=None):
        comps = self._components(vals)
        batch = TensorShape([None])
        for t, s in zip(comps, self._shapes):
            if t.shape.rank == 0:
                raise ValueError(f"enqueue_many needs values with a batch "
                                 f"dimension, got the scalar {t}")
            if t.shape.rank is None:
                continue
            if not batch.is_compatible_with(t.shape.as_list()[:1]):
                raise ValueError(f"enqueue_many values must share their first "
                                 f"(batch) dimension: {batch[0]} vs. {t.shape}")
            batch = batch.merge_with(t.shape.as_list()[:1])
            if not TensorShape(t.shape.as_list()[1:]).is_compatible_with(s):
                raise ValueError(f"Shape {t.shape} of an enqueued batch is not "
                                 f"compatible with the queue's {s}")
        return self._op("QueueEnqueueManyV2", comps, {"Tcomponents": self._dtypes},
                        name or "QueueEnqueueManyV2")

    def _wrap(self, outs):
        if self._names is not None:
            return dict(zip(self._names, outs))
        return outs[0] if len(outs) == 1 else outs

    def dequeue(self, name=None):
        attrs = {"component_types": self._dtypes}
        op = self._op("QueueDequeueV2", [], attrs, name or "QueueDequeueV2")
        for t, s in zip(op.outputs, self._shapes):
            t.set_shape(s)
        return self._wrap(op.outputs)

    def dequeue_many(self, n, name=None):
        return self._dequeue_n("QueueDequeueManyV2", n, name, exact=True)

    def dequeue_up_to(self, n, name=None):
        """Dequeues ``n`` elements, or the fewer left once the queue is closed
        (``OutOfRangeError`` when none are left)."""
        return self._dequeue_n("QueueDequeueUpToV2", n, name, exact=False)

    def _dequeue_n(self, op_type, n, name, exact):
        n = convert_to_tensor(n, dtype=_dtypes.int32)
        op = self._op(op_type, [n], {"component_types": self._dtypes},
                      name or op_type)
        from nbdist.framework.ops import _static_value

        nv = _static_value(n) if exact else None
        for t, s in zip(op.outputs, self._shapes):
            if s.rank is not None:
                t.set_shape([None if nv is None else int(nv)] + s.as_list())
        return self._wrap(op.outputs)

    def size(self, name=None):
        return self._op("QueueSizeV2", [], {}, name or "QueueSizeV2").outputs[0]

    def close(self, cancel_pending_enqueues=False, name=None):
        return self._op("QueueCloseV2", [],
                        {"cancel_pending_enqueues": bool(cancel_pending_enqueues)},
                        name or "QueueCloseV2")


def _as_shape_list(shapes):
    """``shapes`` as TF reads it: None, one shape (a list of ints or None, or a
    ``TensorShape``), or a list of shapes."""
    if shapes is None:
        return None
    if isinstance(shapes, TensorShape):
        return [shapes]
    if not isinstance(shapes, (list, tuple)):
        raise TypeError(f"shapes must be a list of shapes, got {shapes!r}")
    if all(d is None or isinstance(d, int) for d in shapes):
        return [as_shape(shapes)]
    return [as_shape(s) for s in shapes]


class FIFOQueue(QueueBase):
    """A first-in first-out queue of tuples of tensors.

    >>> import nbdist as nd
    >>> q = nd.FIFOQueue(10, [nd.float32], shapes=[[]])
    >>> enq, deq = q.enqueue([1.0]), q.dequeue()
    >>> with nd.Session() as s:
    ...     s.run(enq)
    ...     float(s.run(deq))
    1.0
    """

    _OP_TYPE = "FIFOQueueV2"


class PaddingFIFOQueue(QueueBase):
    """A ``FIFOQueue`` whose ``shapes`` may have unknown (``None``) dimensions:
    ``dequeue_many`` / ``dequeue_up_to`` pad every element of a batch to the
    batch's largest size, with zeros (empty strings for strings).

    >>> import nbdist as nd
    >>> q = nd.PaddingFIFOQueue(10, [nd.int32], shapes=[[None]])
    >>> enq = q.enqueue([nd.placeholder(nd.int32, [None])])
    >>> with nd.Session() as s:
    ...     s.run(enq, {enq.inputs[1]: [1]})
    ...     s.run(enq, {enq.inputs[1]: [2, 3]})
    ...     s.run(q.dequeue_many(2)).tolist()
    [[1, 0], [2, 3]]
    """

    _OP_TYPE = "PaddingFIFOQueueV2"
    _partial_shapes_allowed = True

    def __init__(self, capacity, dtypes, shapes, names=None, shared_name=None,
                 name="padding_fifo_queue"):
        n_dtypes = len(dtypes) if isinstance(dtypes, (list, tuple)) else 1
        shapes = _as_shape_list(shapes)
        if shapes is None:
            raise ValueError("When providing partial shapes, a list of shapes must "
                             "be provided.")
        if len(shapes) != n_dtypes or any(s.rank is None for s in shapes):
            raise ValueError(f"Shapes of known rank must be provided for all "
                             f"components, but received {n_dtypes} dtypes and the "
                             f"shapes {shapes}.")
        super().__init__(capacity, dtypes, shapes, names, shared_name, name)


class RandomShuffleQueue(QueueBase):
    """A queue that dequeues its elements in a random order, keeping at least
    ``min_after_dequeue`` of them until it is closed (seeded as TF's random ops).

    >>> import nbdist as nd
    >>> q = nd.RandomShuffleQueue(10, 0, [nd.int32], shapes=[[]], seed=1)
    >>> enq, deq = q.enqueue_many([[1, 2, 3]]), q.dequeue_many(3)
    >>> with nd.Session() as s:
    ...     s.run(enq)
    ...     sorted(s.run(deq).tolist())
    [1, 2, 3]
    """

    _OP_TYPE = "RandomShuffleQueueV2"

    def __init__(self, capacity, min_after_dequeue, dtypes, shapes=None, names=None,
                 seed=None, shared_name=None, name="random_shuffle_queue"):
        seed1, seed2 = _get_seeds(seed)
        super().__init__(capacity, dtypes, shapes, names, shared_name, name,
                         _attrs={"min_after_dequeue": int(min_after_dequeue),
                                 "seed": seed1, "seed2": seed2})


class PriorityQueue(QueueBase):
    """A queue that dequeues its elements lowest priority first: each element's
    first component is its int64 scalar priority, then ``types`` (whose
    ``shapes`` must be given); equal priorities leave in the order they came.

    >>> import nbdist as nd
    >>> q = nd.io.PriorityQueue(10, [nd.string], shapes=[[]])
    >>> enq = q.enqueue_many([[3, 1, 2], [b"c", b"a", b"b"]])
    >>> with nd.Session() as s:
    ...     s.run(enq)
    ...     [s.run(q.dequeue())[1] for _ in range(3)]
    [b'a', b'b', b'c']
    """

    _OP_TYPE = "PriorityQueueV2"

    def __init__(self, capacity, types, shapes=None, names=None, shared_name=None,
                 name="priority_queue"):
        if shapes is None:
            raise TypeError("Expected list for 'shapes' argument to "
                            "'priority_queue_v2' Op, not None.")
        types = list(types) if isinstance(types, (list, tuple)) else [types]
        shapes = _as_shape_list(shapes) if types else []
        if names is not None:
            names = ["priority"] + (list(names) if isinstance(names, (list, tuple))
                                    else [names])
        super().__init__(capacity, [_dtypes.int64] + types,
                         [TensorShape([])] + shapes, names, shared_name, name)


# -- ops the input pipeline needs ---------------------------------------------------
def _matching_files_infer(c):
    if c.dtype(0) is not _dtypes.string or (c.shape(0).rank or 0) > 1:
        raise ValueError(f"MatchingFiles needs a string scalar or vector pattern, "
                         f"got {c.dtype(0).name} {c.shape(0)}")
    return [(_dtypes.string, TensorShape([None]))]


register_op("MatchingFiles", _matching_files_infer, num_inputs=1)


def matching_files(pattern, name=None):
    """The sorted names of the files matching the glob ``pattern`` (or any of a
    vector of patterns), as a string vector; empty when none match."""
    pattern = convert_to_tensor(pattern, dtype=_dtypes.string)
    return pattern.graph.create_op("MatchingFiles", [pattern], {},
                                   name=name or "MatchingFiles").outputs[0]


__all__ = ["FIFOQueue", "PaddingFIFOQueue", "PriorityQueue", "QueueBase",
           "RandomShuffleQueue", "matching_files"]
