"""``nd.distribute.coordinator`` (TF2's ``tf.distribute.coordinator``):
``ClusterCoordinator``, ``RemoteValue``, ``PerWorkerValues``.

The package holds the ``ClusterCoordinator`` and its parts, as TensorFlow keeps
``tensorflow/python/distribute/coordinator/``: ``cluster_coordinator`` (the I/O
side: worker threads, sessions, fences), ``coordinator_state`` (the pure state
machine: queue, failures, fencing), ``task_liveness`` (heartbeat watcher and
prober), ``closure_batching`` (several closures as one step) and ``values``
(``RemoteValue``, ``PerWorkerValues``).
"""

from __future__ import annotations


def __getattr__(name):
    if name == "ClusterCoordinator":
        from nbdist.distribute.coordinator.cluster_coordinator import ClusterCoordinator

        return ClusterCoordinator
    if name in ("RemoteValue", "PerWorkerValues", "PerWorkerValue",
                "RemoteValueStatus"):
        from nbdist.distribute.coordinator import values

        return getattr(values, name)
    raise AttributeError(
        f"module 'nbdist.distribute.coordinator' has no attribute '{name}'")
