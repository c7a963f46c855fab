"""``nd.distribute.experimental``: TF2's home of ``ParameterServerStrategy`` and
``MultiWorkerMirroredStrategy`` (``CollectiveAllReduceStrategy``)."""

from __future__ import annotations


def __getattr__(name):
    if name == "ParameterServerStrategy":
        from nbdist.distribute.strategies.parameter_server_strategy import (
            ParameterServerStrategy,
        )

        return ParameterServerStrategy
    if name in ("MultiWorkerMirroredStrategy", "CollectiveAllReduceStrategy"):
        from nbdist.distribute.strategies import collective_all_reduce_strategy

        return getattr(collective_all_reduce_strategy, name)
    if name == "partitioners":
        from nbdist.distribute.strategies import partitioners

        return partitioners
    if name == "coordinator":
        from nbdist.distribute import coordinator

        return coordinator
    raise AttributeError(
        f"module 'nbdist.distribute.experimental' has no attribute '{name}'")
