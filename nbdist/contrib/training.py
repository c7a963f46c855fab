"""``nd.contrib.training``: TF1's ``tf.contrib.training`` names that nbdist
has, as the same objects as in ``nd.train`` (the load balancing of
``replica_device_setter``). The rest of ``tf.contrib.training`` (``HParams``,
bucketing and resampling input pipelines, ``SequenceQueueingStateSaver``,
evaluation loops) is not in nbdist.

>>> import nbdist as nd
>>> strategy = nd.contrib.training.GreedyLoadBalancingStrategy(
...     2, nd.contrib.training.byte_size_load_fn)
>>> setter = nd.train.replica_device_setter(ps_tasks=2, ps_strategy=strategy)
"""

from __future__ import annotations

from nbdist.train.device_setter import GreedyLoadBalancingStrategy, byte_size_load_fn

__all__ = ["GreedyLoadBalancingStrategy", "byte_size_load_fn"]
