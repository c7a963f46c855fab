"""``nd.queue``: TF's ``tf.queue`` — the queue classes (``FIFOQueue``,
``PaddingFIFOQueue``, ``RandomShuffleQueue``, ``PriorityQueue``, ``QueueBase``).

>>> import nbdist as nd
>>> q = nd.queue.FIFOQueue(2, [nd.int32], shapes=[[]])
>>> with nd.Session() as s:
...     s.run(q.enqueue([7]))
...     int(s.run(q.dequeue()))
7
"""

from __future__ import annotations

from nbdist.ops.data_flow_ops import (
    FIFOQueue,
    PaddingFIFOQueue,
    PriorityQueue,
    QueueBase,
    RandomShuffleQueue,
)

__all__ = ["FIFOQueue", "PaddingFIFOQueue", "PriorityQueue", "QueueBase",
           "RandomShuffleQueue"]
