"""Batching for the TF1 queue input pipeline: ``batch``, ``batch_join``,
``shuffle_batch``, ``shuffle_batch_join`` and their ``maybe_*`` forms.

Each builds a queue of single examples (a ``FIFOQueue``; a ``PaddingFIFOQueue``
with ``dynamic_pad``; a ``RandomShuffleQueue`` for the shuffling forms), a
``QueueRunner`` of enqueue ops that fill it, TF's queue-fill scalar summary
(``fraction_of_<capacity>_full``, or ``fraction_over_<min>_of_<room>_full``),
and a dequeue of ``batch_size``
examples (``dequeue_up_to`` with ``allow_smaller_final_batch``). The ``*_join``
forms enqueue several lists of tensors, one enqueue op (thread) each. The
``maybe_*`` forms enqueue only the examples whose ``keep_input`` is true: a
scalar for one example (or a whole ``enqueue_many`` batch), a vector for one
flag per example of an ``enqueue_many`` batch.
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.ops import Tensor, _static_value, convert_to_tensor, name_scope
from nbdist.framework.sparse_tensor import SparseTensor, SparseTensorValue
from nbdist.framework.tensor_shape import TensorShape, as_shape
from nbdist.ops.array_ops import boolean_mask
from nbdist.ops.array_ops_join import stack
from nbdist.ops.array_ops_shape import expand_dims, reshape
from nbdist.ops.array_ops_shape import shape as _shape
from nbdist.ops.array_ops_transform import tile
from nbdist.ops.control_flow_ops import no_op
from nbdist.ops.data_flow_ops import FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue
from nbdist.ops.math_ops_elementwise import cast, maximum, multiply, subtract
from nbdist.ops.sparse_ops_serialize import (
    deserialize_many_sparse,
    serialize_many_sparse,
    serialize_sparse,
)
from nbdist.ops.summary_ops import scalar as scalar_summary
from nbdist.train.queue_runner import QueueRunner, add_queue_runner

__all__ = ["batch", "batch_join", "maybe_batch", "maybe_batch_join",
           "maybe_shuffle_batch", "maybe_shuffle_batch_join", "shuffle_batch",
           "shuffle_batch_join"]


# -- inputs as lists, outputs in the inputs' form ------------------------------------
def _as_tensor_list(tensors) -> list:
    """A dict's values in the order of its keys (as strings), a list or tuple as
    a list, anything else as a one-element list."""
    if isinstance(tensors, dict):
        return [tensors[k] for k in sorted(tensors, key=str)]
    if isinstance(tensors, (list, tuple)):
        return list(tensors)
    return [tensors]


def _as_tensor_list_list(tensors_list) -> list:
    if not tensors_list:
        raise ValueError("Expected at least one set of tensors")
    if isinstance(tensors_list[0], dict):
        keys = set(tensors_list[0])
        for d in tensors_list[1:]:
            if not isinstance(d, dict) or set(d) != keys:
                raise ValueError("All dictionaries in tensors_list must have the "
                                 "same keys")
    return [_as_tensor_list(t) for t in tensors_list]


def _as_original_type(tensors, dequeued):
    """``dequeued`` (the batched tensors) in the form ``tensors`` was given."""
    if isinstance(tensors, dict):
        if len(tensors) == 1:
            # A one-component dequeue returns the tensor, not a list of one.
            dequeued = [dequeued]
        return {k: dequeued[i] for i, k in enumerate(sorted(tensors, key=str))}
    return dequeued


def _convert(t):
    """A tensor, or a ``SparseTensor`` (kept sparse: it is stored on enqueue)."""
    if isinstance(t, SparseTensorValue):
        return SparseTensor.from_value(t)
    return t if isinstance(t, SparseTensor) else convert_to_tensor(t)


def _validate(tensor_list, what) -> list:
    if not tensor_list:
        raise ValueError(f"Expected at least one tensor in {what}().")
    return [_convert(t) for t in tensor_list]


def _validate_join(tensor_list_list, what) -> list:
    out = [[_convert(t) for t in tl] for tl in tensor_list_list]
    if not out or not out[0]:
        raise ValueError(f"Expected at least one input in {what}().")
    if any(len(tl) != len(out[0]) for tl in out):
        raise ValueError(f"Every list of tensors given to {what}() must have the "
                         f"same length, got {[len(tl) for tl in out]}")
    return out


def _validate_keep_input(keep_input, enqueue_many) -> Tensor:
    keep_input = convert_to_tensor(keep_input, dtype=dtypes.bool)
    rank = keep_input.shape.rank
    if rank is None:
        raise ValueError("`keep_input` dimensions must be known at graph "
                         "construction.")
    if not enqueue_many and rank == 1:
        raise ValueError("`keep_input` cannot be a vector when `enqueue_many=False`.")
    if rank > 1:
        raise ValueError("`keep_input` must be 0 or 1 dimensions.")
    return keep_input


def _dtypes(tensor_list_list) -> list:
    types = [t.dtype.base_dtype for t in tensor_list_list[0]]
    for tl in tensor_list_list[1:]:
        other = [t.dtype.base_dtype for t in tl]
        if other != types:
            raise TypeError(f"Expected types to be consistent: {types} vs. {other}.")
    return types


def _shapes(tensor_list_list, shapes, enqueue_many) -> list:
    """The queue's element shapes: ``shapes``, or those of the first list (a
    batch's rows with ``enqueue_many``), checked against the other lists."""
    if shapes is not None:
        return [as_shape(s) for s in shapes]
    for tl in tensor_list_list:
        for t in tl:
            if t.shape.rank is None:
                raise ValueError(f"Cannot infer Tensor's rank: {t}")
    out = []
    for i in range(len(tensor_list_list[0])):
        candidates = []
        for tl in tensor_list_list:
            s = tl[i].shape
            if enqueue_many:
                if s.rank == 0:
                    raise ValueError(f"enqueue_many needs tensors of rank >= 1, "
                                     f"got the scalar {tl[i]}")
                s = TensorShape(s.as_list()[1:])
            candidates.append(s)
        for s in candidates[1:]:
            if not candidates[0].is_compatible_with(s):
                raise ValueError(f"Shapes {candidates[0]} and {s} of component {i} "
                                 f"are incompatible")
        out.append(candidates[0])
    return out


# -- SparseTensors: serialized per example on enqueue, one batch on dequeue ---------
def _sparse_info(t, enqueue_many):
    """``(dtype, rank of one example)`` of a ``SparseTensor``, None for a tensor."""
    if not isinstance(t, SparseTensor):
        return None
    rank = t.dense_shape.shape.with_rank(1)[0]
    rank = None if rank is None else int(rank)
    if rank is not None and enqueue_many:
        rank -= 1
    return t.dtype.base_dtype, rank


def _store_sparse(tensor_list_list, enqueue_many):
    """Each ``SparseTensor`` as the 3 strings of its example (``[N, 3]`` with
    ``enqueue_many``), so it can go through a queue; and per component, what
    ``_restore_sparse`` needs (None for a dense one)."""
    infos = [_sparse_info(t, enqueue_many) for t in tensor_list_list[0]]
    for tl in tensor_list_list[1:]:
        other = [_sparse_info(t, enqueue_many) for t in tl]
        if any((a is None) != (b is None) or (a is not None and (
                a[0] != b[0] or None not in (a[1], b[1]) and a[1] != b[1]))
               for a, b in zip(infos, other)):
            raise ValueError(f"Inconsistent SparseTensors list: "
                             f"{tensor_list_list[0]} vs. {tl}")
    store = serialize_many_sparse if enqueue_many else serialize_sparse
    stored = [[store(t) if info is not None else t for t, info in zip(tl, infos)]
              for tl in tensor_list_list]
    return stored, infos


def _restore_sparse(dequeued, infos):
    """The dequeued batch with each stored component a batched ``SparseTensor``
    (dense shape: the batch size, then the largest of its examples' shapes)."""
    if all(info is None for info in infos):
        return dequeued
    single = not isinstance(dequeued, (list, tuple))
    parts = [dequeued] if single else list(dequeued)
    parts = [t if info is None else deserialize_many_sparse(
        t, info[0], rank=None if info[1] is None else info[1] + 1)
        for t, info in zip(parts, infos)]
    return parts[0] if single else parts


# -- enqueueing ---------------------------------------------------------------------
def _kept(tensor_list, keep_input, enqueue_many):
    """The enqueue-many batch of the examples of ``tensor_list`` to keep."""
    if not enqueue_many:
        tensor_list = [expand_dims(t, 0) for t in tensor_list]
    if keep_input.shape.rank == 0:
        rows = _shape(tensor_list[0])[0]
        keep_input = tile(reshape(keep_input, [1]), stack([rows]))
    return [boolean_mask(t, keep_input) for t in tensor_list]


def _enqueue_op(queue, tensor_list, enqueue_many, keep_input):
    keep = _static_value(keep_input) if keep_input.shape.rank == 0 else None
    if keep is not None:
        # Known when the graph is built: enqueue always, or never (as TF's
        # smart_cond, which leaves a no-op).
        if not bool(keep):
            return no_op()
        return (queue.enqueue_many if enqueue_many else queue.enqueue)(tensor_list)
    return queue.enqueue_many(_kept(tensor_list, keep_input, enqueue_many))


def _fill_summary(queue, capacity, min_after_dequeue=None):
    """TF's queue-fill summary: the fraction of ``capacity`` in use (for a
    shuffling queue, of the room above ``min_after_dequeue``)."""
    size = queue.size()
    if min_after_dequeue is None:
        scalar_summary(f"fraction_of_{capacity}_full",
                       multiply(cast(size, dtypes.float32), 1.0 / capacity))
        return
    room = capacity - min_after_dequeue
    above = cast(maximum(0, subtract(size, min_after_dequeue)), dtypes.float32)
    scalar_summary(f"fraction_over_{min_after_dequeue}_of_{room}_full",
                   multiply(above, 1.0 / room))


def _batch(queue_factory, tensors_list, batch_size, threads, enqueue_many, shapes,
           allow_smaller_final_batch, keep_input, name, what, join):
    """The common body: a queue from ``queue_factory(types, shapes)``, its runner,
    its fill summary and the batched dequeue, in the form the inputs were given."""
    tensors_list = tensors_list if join else [tensors_list]
    tensor_list_list = _as_tensor_list_list(tensors_list)
    flat = [t for tl in tensor_list_list for t in tl]
    with name_scope(name, what, flat + [keep_input]) as scope:
        if join:
            tensor_list_list = _validate_join(tensor_list_list, what)
        else:
            tensor_list_list = [_validate(tensor_list_list[0], what)]
        keep_input = _validate_keep_input(keep_input, enqueue_many)
        tensor_list_list, infos = _store_sparse(tensor_list_list, enqueue_many)
        types = _dtypes(tensor_list_list)
        if shapes is not None:  # a stored SparseTensor is 3 strings per example
            shapes = [TensorShape([3]) if info is not None else s
                      for s, info in zip(shapes, infos)]
        queue = queue_factory(types, _shapes(tensor_list_list, shapes, enqueue_many))
        if join:
            enqueue_ops = [_enqueue_op(queue, tl, enqueue_many, keep_input)
                           for tl in tensor_list_list]
        else:
            enqueue_ops = [_enqueue_op(queue, tensor_list_list[0], enqueue_many,
                                       keep_input)] * threads
        add_queue_runner(QueueRunner(queue, enqueue_ops))
        _fill_summary(queue, *queue_factory.fill)
        if allow_smaller_final_batch:
            dequeued = queue.dequeue_up_to(batch_size, name=scope)
        else:
            dequeued = queue.dequeue_many(batch_size, name=scope)
        return _as_original_type(tensors_list[0], _restore_sparse(dequeued, infos))


def _fifo(capacity, dynamic_pad, shared_name):
    queue_cls = PaddingFIFOQueue if dynamic_pad else FIFOQueue

    def make(types, shapes):
        return queue_cls(capacity=capacity, dtypes=types, shapes=shapes,
                         shared_name=shared_name)

    make.fill = (capacity,)
    return make


def _shuffling(capacity, min_after_dequeue, seed, shared_name):
    if capacity <= min_after_dequeue:
        raise ValueError(f"capacity {capacity} must be bigger than min_after_dequeue "
                         f"{min_after_dequeue}.")

    def make(types, shapes):
        return RandomShuffleQueue(capacity=capacity,
                                  min_after_dequeue=min_after_dequeue, seed=seed,
                                  dtypes=types, shapes=shapes,
                                  shared_name=shared_name)

    make.fill = (capacity, min_after_dequeue)
    return make


# -- the public forms ---------------------------------------------------------------
def batch(tensors, batch_size, num_threads=1, capacity=32, enqueue_many=False,
          shapes=None, dynamic_pad=False, allow_smaller_final_batch=False,
          shared_name=None, name=None):
    """Batches of ``batch_size`` examples of ``tensors`` (a tensor, list or dict,
    returned in the same form), through a ``FIFOQueue`` of ``capacity`` filled by
    ``num_threads`` threads.

    ``enqueue_many``: ``tensors`` are batches of examples (first dimension).
    ``dynamic_pad``: examples may differ in their unknown dimensions; each batch
    is padded (zeros, empty strings) to its largest example.
    ``allow_smaller_final_batch``: the last batch may be smaller once the input
    ends (the batch dimension is then unknown in the graph).

    >>> import nbdist as nd
    >>> x = nd.train.range_input_producer(4, num_epochs=1, shuffle=False).dequeue()
    >>> b = nd.train.batch([x], 3, allow_smaller_final_batch=True)
    >>> with nd.Session() as sess:
    ...     sess.run(nd.local_variables_initializer())
    ...     coord = nd.train.Coordinator()
    ...     threads = nd.train.start_queue_runners(sess, coord)
    ...     print((sess.run(b).tolist(), sess.run(b).tolist()))
    ...     coord.request_stop(); coord.join(threads)
    ([0, 1, 2], [3])
    """
    return _batch(_fifo(capacity, dynamic_pad, shared_name), tensors, batch_size,
                  num_threads, enqueue_many, shapes, allow_smaller_final_batch,
                  True, name, "batch", join=False)


def maybe_batch(tensors, keep_input, batch_size, num_threads=1, capacity=32,
                enqueue_many=False, shapes=None, dynamic_pad=False,
                allow_smaller_final_batch=False, shared_name=None, name=None):
    """``batch`` of the examples whose ``keep_input`` is true (a bool scalar, or
    with ``enqueue_many`` a vector with one flag per example).

    >>> import nbdist as nd
    >>> x = nd.train.range_input_producer(6, num_epochs=1, shuffle=False).dequeue()
    >>> b = nd.train.maybe_batch([x], nd.equal(x % 2, 0), 3)
    >>> with nd.Session() as sess:
    ...     sess.run(nd.local_variables_initializer())
    ...     coord = nd.train.Coordinator()
    ...     threads = nd.train.start_queue_runners(sess, coord)
    ...     print(sess.run(b).tolist())
    ...     coord.request_stop(); coord.join(threads)
    [0, 2, 4]
    """
    return _batch(_fifo(capacity, dynamic_pad, shared_name), tensors, batch_size,
                  num_threads, enqueue_many, shapes, allow_smaller_final_batch,
                  keep_input, name, "batch", join=False)


def batch_join(tensors_list, batch_size, capacity=32, enqueue_many=False,
               shapes=None, dynamic_pad=False, allow_smaller_final_batch=False,
               shared_name=None, name=None):
    """``batch`` of several inputs of the same structure: ``tensors_list`` holds
    one list (or dict) of tensors per enqueue thread; a batch mixes their
    examples, each input's in its order.

    >>> import nbdist as nd
    >>> a = nd.train.limit_epochs(nd.constant(1), 2)
    >>> b = nd.train.limit_epochs(nd.constant(2), 2)
    >>> batched = nd.train.batch_join([[a], [b]], 4)
    >>> with nd.Session() as sess:
    ...     sess.run(nd.local_variables_initializer())
    ...     coord = nd.train.Coordinator()
    ...     threads = nd.train.start_queue_runners(sess, coord)
    ...     print(sorted(sess.run(batched).tolist()))
    ...     coord.request_stop(); coord.join(threads)
    [1, 1, 2, 2]
    """
    return _batch(_fifo(capacity, dynamic_pad, shared_name), tensors_list,
                  batch_size, None, enqueue_many, shapes,
                  allow_smaller_final_batch, True, name, "batch_join", join=True)


def maybe_batch_join(tensors_list, keep_input, batch_size, capacity=32,
                     enqueue_many=False, shapes=None, dynamic_pad=False,
                     allow_smaller_final_batch=False, shared_name=None, name=None):
    """``batch_join`` of the examples whose ``keep_input`` is true (as in
    ``maybe_batch``)."""
    return _batch(_fifo(capacity, dynamic_pad, shared_name), tensors_list,
                  batch_size, None, enqueue_many, shapes,
                  allow_smaller_final_batch, keep_input, name, "batch_join",
                  join=True)


def shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, num_threads=1,
                  seed=None, enqueue_many=False, shapes=None,
                  allow_smaller_final_batch=False, shared_name=None, name=None):
    """As ``batch``, through a ``RandomShuffleQueue`` that keeps at least
    ``min_after_dequeue`` examples to draw from (seeded like TF's random ops).

    >>> import nbdist as nd
    >>> x = nd.train.range_input_producer(10, num_epochs=1, shuffle=False).dequeue()
    >>> b = nd.train.shuffle_batch([x], 10, capacity=20, min_after_dequeue=5,
    ...                            seed=1, allow_smaller_final_batch=True)
    >>> with nd.Session() as sess:
    ...     sess.run(nd.local_variables_initializer())
    ...     coord = nd.train.Coordinator()
    ...     threads = nd.train.start_queue_runners(sess, coord)
    ...     print(sorted(sess.run(b).tolist()))
    ...     coord.request_stop(); coord.join(threads)
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """
    return _batch(_shuffling(capacity, min_after_dequeue, seed, shared_name),
                  tensors, batch_size, num_threads, enqueue_many, shapes,
                  allow_smaller_final_batch, True, name, "shuffle_batch",
                  join=False)


def maybe_shuffle_batch(tensors, batch_size, capacity, min_after_dequeue,
                        keep_input, num_threads=1, seed=None, enqueue_many=False,
                        shapes=None, allow_smaller_final_batch=False,
                        shared_name=None, name=None):
    """``shuffle_batch`` of the examples whose ``keep_input`` is true (as in
    ``maybe_batch``)."""
    return _batch(_shuffling(capacity, min_after_dequeue, seed, shared_name),
                  tensors, batch_size, num_threads, enqueue_many, shapes,
                  allow_smaller_final_batch, keep_input, name, "shuffle_batch",
                  join=False)


def shuffle_batch_join(tensors_list, batch_size, capacity, min_after_dequeue,
                       seed=None, enqueue_many=False, shapes=None,
                       allow_smaller_final_batch=False, shared_name=None,
                       name=None):
    """``shuffle_batch`` of several inputs of the same structure, one enqueue
    thread each (as ``batch_join``)."""
    return _batch(_shuffling(capacity, min_after_dequeue, seed, shared_name),
                  tensors_list, batch_size, None, enqueue_many, shapes,
                  allow_smaller_final_batch, True, name, "shuffle_batch_join",
                  join=True)


def maybe_shuffle_batch_join(tensors_list, batch_size, capacity,
                             min_after_dequeue, keep_input, seed=None,
                             enqueue_many=False, shapes=None,
                             allow_smaller_final_batch=False, shared_name=None,
                             name=None):
    """``shuffle_batch_join`` of the examples whose ``keep_input`` is true (as in
    ``maybe_batch``)."""
    return _batch(_shuffling(capacity, min_after_dequeue, seed, shared_name),
                  tensors_list, batch_size, None, enqueue_many, shapes,
                  allow_smaller_final_batch, keep_input, name,
                  "shuffle_batch_join", join=True)
