"""``slim.prefetch_queue.prefetch_queue``: a FIFO queue kept filled with
``tensors`` by queue-runner threads (``start_queue_runners`` starts them)."""

from __future__ import annotations

import nbdist as nd


def prefetch_queue(tensors, capacity=8, num_threads=1, dynamic_pad=False,
                   shared_name=None, name=None):
    """A ``FIFOQueue`` of ``tensors`` (a list or dict of tensors) with a
    ``QueueRunner`` of ``num_threads`` enqueue ops; ``dequeue()`` gives
    the same structure back."""
    if dynamic_pad:
        raise NotImplementedError("prefetch_queue(dynamic_pad=True)")
    names = None
    if isinstance(tensors, dict):
        names = sorted(tensors)
        tensor_list = [nd.convert_to_tensor(tensors[k]) for k in names]
    else:
        tensor_list = [nd.convert_to_tensor(t) for t in tensors]
    with nd.name_scope(name, "prefetch_queue") as scope:
        queue = nd.FIFOQueue(capacity=capacity,
                             dtypes=[t.dtype.base_dtype for t in tensor_list],
                             shapes=[t.shape for t in tensor_list], names=names,
                             shared_name=shared_name, name=scope.rstrip("/"))
        enqueue = queue.enqueue(tensors if names else tensor_list)
        nd.train.add_queue_runner(nd.train.QueueRunner(queue, [enqueue] * num_threads))
        return queue
