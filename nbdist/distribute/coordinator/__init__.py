"""``nd.distribute.coordinator`` (TF2's ``tf.distribute.coordinator``):
``ClusterCoordinator``, ``RemoteValue``, ``PerWorkerValues``."""

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
