"""The TF1 queue input pipeline (``tf.compat.v1.train.*_input_producer``,
``limit_epochs``, ``match_filenames_once``; the batching forms are in
``input_batch`` and re-exported here): queues filled by ``QueueRunner`` threads.

A producer enqueues its (optionally shuffled) input once per epoch into a
``FIFOQueue``; ``num_epochs`` counts epochs in a local variable (run
``local_variables_initializer``) and closes the queue after the last one, so
the consumer sees ``OutOfRangeError`` when the data ends. Everything runs where
the queues are placed, like any other op.
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.constant_op import identity
from nbdist.ops.array_ops_creation import range as _range
from nbdist.ops.array_ops_shape import shape as _shape
from nbdist.ops.array_ops_shape import size as _size
from nbdist.ops.array_ops_slicing import gather
from nbdist.ops.check_ops import Assert
from nbdist.ops.data_flow_ops import FIFOQueue, matching_files
from nbdist.ops.math_ops_elementwise import cast, greater, multiply
from nbdist.framework.ops import (
    GraphKeys,
    Tensor,
    control_dependencies,
    convert_to_tensor,
    name_scope,
)
from nbdist.ops.random_ops import random_shuffle
from nbdist.framework.tensor_shape import TensorShape, as_shape
from nbdist.ops.state_ops import count_up_to
from nbdist.ops.summary_ops import scalar as scalar_summary
from nbdist.ops.variables import Variable
from nbdist.train.input_batch import (  # noqa: F401 - TF's train.input names
    _as_original_type,
    _as_tensor_list,
    batch,
    batch_join,
    maybe_batch,
    maybe_batch_join,
    maybe_shuffle_batch,
    maybe_shuffle_batch_join,
    shuffle_batch,
    shuffle_batch_join,
)
from nbdist.train.queue_runner import QueueRunner, add_queue_runner

__all__ = ["batch", "batch_join", "input_producer", "limit_epochs",
           "match_filenames_once", "maybe_batch", "maybe_batch_join",
           "maybe_shuffle_batch", "maybe_shuffle_batch_join", "range_input_producer",
           "shuffle_batch", "shuffle_batch_join", "slice_input_producer",
           "string_input_producer"]


def match_filenames_once(pattern, name=None):
    """A local variable holding the names of the files matching the glob
    ``pattern`` (or patterns), sorted; the glob runs once, when
    ``local_variables_initializer`` runs.

    >>> import nbdist as nd, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for n in ("a.txt", "b.txt", "c.csv"):
    ...     open(os.path.join(d, n), "w").close()
    >>> files = nd.train.match_filenames_once(os.path.join(d, "*.txt"))
    >>> with nd.Session() as sess:
    ...     sess.run(nd.local_variables_initializer())
    ...     [os.path.basename(f) for f in sess.run(files)]
    [b'a.txt', b'b.txt']
    """
    with name_scope(name, "matching_filenames", [pattern]) as scope:
        return Variable(matching_files(pattern), name=scope, trainable=False,
                        validate_shape=False,
                        collections=[GraphKeys.LOCAL_VARIABLES])


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
    ...     coord = nd.train.Coordinator()
    ...     threads = nd.train.start_queue_runners(sess, coord)
    ...     print([int(sess.run(q.dequeue())) for _ in range(3)])
    ...     coord.request_stop(); coord.join(threads)
    [1, 2, 3]
    """
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
        if summary_name is not None:
            scalar_summary(summary_name,
                           multiply(cast(q.size(), dtypes.float32), 1.0 / capacity))
        return q


def string_input_producer(string_tensor, num_epochs=None, shuffle=True, seed=None,
                          capacity=32, shared_name=None, name=None, cancel_op=None):
    """``input_producer`` of strings (file names, typically).

    >>> import nbdist as nd
    >>> q = nd.train.string_input_producer(["a", "b"], shuffle=False)
    >>> with nd.Session() as sess:
    ...     coord = nd.train.Coordinator()
    ...     threads = nd.train.start_queue_runners(sess, coord)
    ...     print([sess.run(q.dequeue()) for _ in range(3)])
    ...     coord.request_stop(); coord.join(threads)
    [b'a', b'b', b'a']
    """
    not_null = "string_input_producer requires a non-null input tensor"
    if not isinstance(string_tensor, Tensor) and not len(string_tensor):
        raise ValueError(not_null)
    with name_scope(name, "input_producer", [string_tensor]) as scope:
        string_tensor = convert_to_tensor(string_tensor, dtype=dtypes.string)
        # An empty input fails in the queue runner (reported to its coordinator,
        # which closes the queue), so a consumer gets OutOfRangeError rather
        # than waiting forever.
        with control_dependencies([Assert(greater(_size(string_tensor), 0),
                                             [not_null])]):
            string_tensor = identity(string_tensor)
        return input_producer(string_tensor, [], num_epochs, shuffle, seed, capacity,
                              shared_name, f"fraction_of_{capacity}_full",
                              name=scope, cancel_op=cancel_op)


def range_input_producer(limit, num_epochs=None, shuffle=True, seed=None,
                         capacity=32, shared_name=None, name=None):
    """``input_producer`` of the integers ``0 .. limit - 1``.

    >>> import nbdist as nd
    >>> q = nd.train.range_input_producer(3, shuffle=False)
    >>> with nd.Session() as sess:
    ...     coord = nd.train.Coordinator()
    ...     threads = nd.train.start_queue_runners(sess, coord)
    ...     print([int(sess.run(q.dequeue())) for _ in range(4)])
    ...     coord.request_stop(); coord.join(threads)
    [0, 1, 2, 0]
    """
    with name_scope(name, "input_producer", [limit]) as scope:
        return input_producer(_range(limit), [], num_epochs, shuffle, seed,
                              capacity, shared_name, f"fraction_of_{capacity}_full",
                              name=scope)


def slice_input_producer(tensor_list, num_epochs=None, shuffle=True, seed=None,
                         capacity=32, shared_name=None, name=None):
    """One row of every tensor of ``tensor_list`` at a time (the same row of
    each), via a ``range_input_producer`` of row indices.

    >>> import nbdist as nd
    >>> x, y = nd.train.slice_input_producer(
    ...     [nd.constant([1, 2]), nd.constant(["a", "b"])], shuffle=False)
    >>> with nd.Session() as sess:
    ...     coord = nd.train.Coordinator()
    ...     threads = nd.train.start_queue_runners(sess, coord)
    ...     print([int(v) for v in sess.run([x, x])])  # one dequeue per run
    ...     coord.request_stop(); coord.join(threads)
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
