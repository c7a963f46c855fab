"""The TF1 queue input pipeline (``tf.compat.v1.train.*_input_producer``,
``batch``, ``shuffle_batch``): queues filled by ``QueueRunner`` threads.

A producer enqueues its (optionally shuffled) input once per epoch into a
``FIFOQueue``; ``num_epochs`` counts epochs in a local variable (run
``local_variables_initializer``) and closes the queue after the last one, so
the consumer sees ``OutOfRangeError`` when the data ends. ``batch`` and
``shuffle_batch`` add a queue of single examples (a ``RandomShuffleQueue`` for
the latter) filled by ``num_threads`` enqueue ops, and dequeue batches from it.
Everything runs where the queues are placed, like any other op.
"""

from __future__ import annotations

from nbdist.graph import dtypes
from nbdist.graph.array_ops import identity
from nbdist.graph.array_ops_creation import range as _range
from nbdist.graph.array_ops_shape import shape as _shape
from nbdist.graph.array_ops_slicing import gather
from nbdist.graph.data_flow_ops import FIFOQueue, RandomShuffleQueue
from nbdist.graph.ops import (
    GraphKeys,
    Tensor,
    control_dependencies,
    convert_to_tensor,
    name_scope,
)
from nbdist.graph.random_ops import random_shuffle
from nbdist.graph.shapes import TensorShape, as_shape
from nbdist.graph.state_ops import count_up_to
from nbdist.graph.variables import Variable
from nbdist.train.queue_runner import QueueRunner, add_queue_runner

__all__ = ["batch", "input_producer", "limit_epochs", "range_input_producer",
           "shuffle_batch", "slice_input_producer", "string_input_producer"]


def limit_epochs(tensor, num_epochs=None, name=None):
    """``tensor``, but only ``num_epochs`` times: the next evaluation raises
    ``OutOfRangeError`` (the count is a local variable named ``epochs``)."""
    if num_epochs is None:
        return tensor
    if num_epochs <= 0:
        raise ValueError(f"num_epochs must be > 0 not {num_epochs}.")
    with name_scope(name, "limit_epochs", [tensor]) as scope:
        epochs = Variable(convert_to_tensor(0, dtype=dtypes.int64), name="epochs",
                          trainable=False, collections=[GraphKeys.LOCAL_VARIABLES])
        counter = count_up_to(epochs, num_epochs)
        with control_dependencies([counter]):
            return identity(tensor, name=scope)


def input_producer(input_tensor, element_shape=None, num_epochs=None, shuffle=True,
                   seed=None, capacity=32, shared_name=None, summary_name=None,
                   name=None, cancel_op=None):
    """A ``FIFOQueue`` of the rows of ``input_tensor``, refilled each epoch by a
    ``QueueRunner`` (in ``GraphKeys.QUEUE_RUNNERS``).

    >>> import nbdist as nd
    >>> q = nd.train.input_producer(nd.constant([1, 2, 3]), num_epochs=1,
    ...                             shuffle=False)
    >>> with nd.Session() as sess:
    ...     sess.run(nd.local_variables_initializer())
    ...     threads = nd.train.start_queue_runners(sess)
    ...     [int(sess.run(q.dequeue())) for _ in range(3)]
    [1, 2, 3]
    """
    del summary_name  # TF adds a queue-fill summary; nbdist has none yet
    with name_scope(name, "input_producer", [input_tensor]):
        input_tensor = convert_to_tensor(input_tensor, name="input_tensor")
        if input_tensor.shape.rank is None:
            element = TensorShape(None)
        else:
            element = TensorShape(input_tensor.shape.as_list()[1:])
        element = element.merge_with(as_shape(element_shape))
        if not element.is_fully_defined():
            raise ValueError("Either `input_tensor` must have a fully defined shape "
                             "or `element_shape` must be specified")
        if shuffle:
            input_tensor = random_shuffle(input_tensor, seed=seed)
        input_tensor = limit_epochs(input_tensor, num_epochs)
        q = FIFOQueue(capacity, [input_tensor.dtype.base_dtype], shapes=[element],
                      shared_name=shared_name, name=name or "fifo_queue")
        enq = q.enqueue_many([input_tensor])
        add_queue_runner(QueueRunner(q, [enq], cancel_op=cancel_op))
        return q


def string_input_producer(string_tensor, num_epochs=None, shuffle=True, seed=None,
                          capacity=32, shared_name=None, name=None, cancel_op=None):
    """``input_producer`` of strings (file names, typically).

    >>> import nbdist as nd
    >>> q = nd.train.string_input_producer(["a", "b"], shuffle=False)
    >>> with nd.Session() as sess:
    ...     threads = nd.train.start_queue_runners(sess)
    ...     [sess.run(q.dequeue()) for _ in range(3)]
    [b'a', b'b', b'a']
    """
    if not isinstance(string_tensor, Tensor) and not len(string_tensor):
        raise ValueError("string_input_producer requires a non-null input tensor")
    with name_scope(name, "input_producer", [string_tensor]) as scope:
        string_tensor = convert_to_tensor(string_tensor, dtype=dtypes.string)
        return input_producer(string_tensor, [], num_epochs, shuffle, seed, capacity,
                              shared_name, name=scope, cancel_op=cancel_op)


def range_input_producer(limit, num_epochs=None, shuffle=True, seed=None,
                         capacity=32, shared_name=None, name=None):
    """``input_producer`` of the integers ``0 .. limit - 1``.

    >>> import nbdist as nd
    >>> q = nd.train.range_input_producer(3, shuffle=False)
    >>> with nd.Session() as sess:
    ...     threads = nd.train.start_queue_runners(sess)
    ...     [int(sess.run(q.dequeue())) for _ in range(4)]
    [0, 1, 2, 0]
    """
    with name_scope(name, "input_producer", [limit]) as scope:
        return input_producer(_range(limit), [], num_epochs, shuffle, seed,
                              capacity, shared_name, name=scope)


def slice_input_producer(tensor_list, num_epochs=None, shuffle=True, seed=None,
                         capacity=32, shared_name=None, name=None):
    """One row of every tensor of ``tensor_list`` at a time (the same row of
    each), via a ``range_input_producer`` of row indices.

    >>> import nbdist as nd
    >>> x, y = nd.train.slice_input_producer(
    ...     [nd.constant([1, 2]), nd.constant(["a", "b"])], shuffle=False)
    >>> with nd.Session() as sess:
    ...     threads = nd.train.start_queue_runners(sess)
    ...     [int(v) for v in sess.run([x, x])]  # one dequeue per run
    [1, 1]
    """
    with name_scope(name, "input_producer", tensor_list):
        tensor_list = [convert_to_tensor(t) for t in tensor_list]
        if not tensor_list:
            raise ValueError("Expected at least one tensor in slice_input_producer().")
        rows = _shape(tensor_list[0])[0]
        queue = range_input_producer(rows, num_epochs=num_epochs, shuffle=shuffle,
                                     seed=seed, capacity=capacity,
                                     shared_name=shared_name)
        index = queue.dequeue()
        return [gather(t, index) for t in tensor_list]


# -- batching -----------------------------------------------------------------------
def _as_tensor_list(tensors) -> list:
    if isinstance(tensors, dict):
        return [tensors[k] for k in sorted(tensors)]
    if isinstance(tensors, (list, tuple)):
        return list(tensors)
    return [tensors]


def _as_original_type(tensors, dequeued):
    if isinstance(tensors, dict):
        if len(tensors) == 1:
            dequeued = [dequeued]
        return {k: dequeued[i] for i, k in enumerate(sorted(tensors))}
    return dequeued


def _shapes(tensor_list, shapes, enqueue_many) -> list:
    if shapes is not None:
        return [as_shape(s) for s in shapes]
    out = []
    for t in tensor_list:
        if t.shape.rank is None:
            raise ValueError(f"Cannot infer Tensor's rank: {t}")
        dims = t.shape.as_list()
        out.append(TensorShape(dims[1:] if enqueue_many else dims))
    return out


def _batch_from_queue(queue_cls, tensors, batch_size, num_threads, enqueue_many,
                      shapes, allow_smaller_final_batch, name, default_name,
                      **queue_args):
    tensor_list = _as_tensor_list(tensors)
    with name_scope(name, default_name, tensor_list) as scope:
        if not tensor_list:
            raise ValueError(f"Expected at least one tensor in {default_name}().")
        tensor_list = [convert_to_tensor(t) for t in tensor_list]
        queue = queue_cls(dtypes=[t.dtype.base_dtype for t in tensor_list],
                          shapes=_shapes(tensor_list, shapes, enqueue_many),
                          **queue_args)
        enqueue = queue.enqueue_many if enqueue_many else queue.enqueue
        add_queue_runner(QueueRunner(queue, [enqueue(tensor_list)] * num_threads))
        if allow_smaller_final_batch:
            dequeued = queue.dequeue_up_to(batch_size, name=scope)
        else:
            dequeued = queue.dequeue_many(batch_size, name=scope)
        return _as_original_type(tensors, dequeued)


def batch(tensors, batch_size, num_threads=1, capacity=32, enqueue_many=False,
          shapes=None, dynamic_pad=False, allow_smaller_final_batch=False,
          shared_name=None, name=None):
    """Batches of ``batch_size`` examples of ``tensors`` (a tensor, list or dict,
    returned in the same form), through a ``FIFOQueue`` of ``capacity`` filled by
    ``num_threads`` threads. With ``allow_smaller_final_batch`` the last batch
    may be smaller once the input ends.

    >>> import nbdist as nd
    >>> x = nd.train.range_input_producer(4, num_epochs=1, shuffle=False).dequeue()
    >>> b = nd.train.batch([x], 3, allow_smaller_final_batch=True)
    >>> with nd.Session() as sess:
    ...     sess.run(nd.local_variables_initializer())
    ...     threads = nd.train.start_queue_runners(sess)
    ...     sess.run(b).tolist(), sess.run(b).tolist()
    ([0, 1, 2], [3])
    """
    if dynamic_pad:
        raise NotImplementedError("batch(dynamic_pad=True) needs a PaddingFIFOQueue, "
                                  "which nbdist does not have")
    return _batch_from_queue(
        FIFOQueue, tensors, batch_size, num_threads, enqueue_many, shapes,
        allow_smaller_final_batch, name, "batch", capacity=capacity,
        shared_name=shared_name)


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
    ...     threads = nd.train.start_queue_runners(sess)
    ...     sorted(sess.run(b).tolist())
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """
    if capacity <= min_after_dequeue:
        raise ValueError(f"capacity {capacity} must be bigger than min_after_dequeue "
                         f"{min_after_dequeue}.")
    return _batch_from_queue(
        RandomShuffleQueue, tensors, batch_size, num_threads, enqueue_many, shapes,
        allow_smaller_final_batch, name, "shuffle_batch", capacity=capacity,
        min_after_dequeue=min_after_dequeue, seed=seed, shared_name=shared_name)
