"""``queue_barrier``: a barrier across workers built from shared queues.

Between-graph replicas share nothing but the resources of the cluster's
tasks, so a barrier has to be made of those: one token queue per worker
(``FIFOQueue(shared_name=...)`` on a device every worker can reach, a ps
task typically), as tensorpack's ``_add_sync_queues_and_barrier`` and TF's
benchmarks do. Worker ``i``'s barrier op puts a token in every other worker's
queue, then takes ``num_workers - 1`` tokens from its own: it returns once
every other worker has reached the same barrier.

It can be run again and again (one round per run; tokens of a worker that is
already a round ahead wait in the queues until they are needed). Every
worker must build it with the same ``num_workers``, ``name`` and ``device``
and run it the same number of times.

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     arrive = [nd.train.queue_barrier(2, i, name="demo") for i in range(2)]
...     with nd.Session() as s:
...         import threading
...         t = threading.Thread(target=s.run, args=(arrive[1],))
...         t.start()
...         s.run(arrive[0])   # returns once worker 1 arrived too
...         t.join()
"""

from __future__ import annotations

from nbdist.framework import ops
from nbdist.ops.control_flow_ops import group, no_op
from nbdist.ops.data_flow_ops import FIFOQueue
from nbdist.framework.dtypes import int32


def queue_barrier(num_workers, worker_index, name="queue_barrier", device=None,
                  dependencies=None):
    """An op that waits until all ``num_workers`` workers have run their own.

    Args:
      num_workers: how many workers take part.
      worker_index: this worker's index, in ``[0, num_workers)``.
      name: names the queues (their ``shared_name`` is ``<name>_<index>``) and
        the ops. Use a different name for each barrier of a step.
      device: where the queues live; every worker must use the same one, for
        example ``"/job:ps/task:0"``. ``None``: the current device scope (one
        server, or a scope that is not a ``replica_device_setter``).
      dependencies: ops or tensors the arrival must wait for (the tokens are
        enqueued after them).

    Returns:
      An ``Operation``: run it, or use it in ``control_dependencies``.

    Raises:
      ValueError: if ``worker_index`` is out of range.
    """
    num_workers = int(num_workers)
    worker_index = int(worker_index)
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    if not 0 <= worker_index < num_workers:
        raise ValueError(f"worker_index must be in [0, {num_workers}), "
                         f"got {worker_index}")
    g = ops.get_default_graph()
    deps = list(dependencies or [])
    with g.name_scope(name + "_" + str(worker_index)):
        if num_workers == 1:
            with g.control_dependencies(deps):
                return no_op(name="barrier")
        with g.device(device):
            queues = [FIFOQueue(-1, [int32], shapes=[[]], shared_name=f"{name}_{i}",
                                name=f"queue_{i}")
                      for i in range(num_workers)]
        with g.control_dependencies(deps):
            tokens = [q.enqueue([worker_index], name=f"token_to_{i}")
                      for i, q in enumerate(queues) if i != worker_index]
        with g.control_dependencies(tokens):
            wait = queues[worker_index].dequeue_many(num_workers - 1,
                                                     name="wait_for_others")
        return group(wait, name="barrier")


__all__ = ["queue_barrier"]
