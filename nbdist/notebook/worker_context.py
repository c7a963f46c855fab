"""The worker context of a ``%%cluster`` task thread: the one
``run_distribute_coordinator`` gives its ``worker_fn`` (so
``nd.distribute.get_current_worker_context()`` works in the cell), with
``wait_for_other_workers`` a coordination-service barrier among the cell's
tasks (``BarrierView`` shows it).
"""

from __future__ import annotations

import threading

from nbdist.distribute.worker_context import between_graph_context
from nbdist.runtime import transports
from nbdist.runtime.coordination import target_of

__all__ = ["CellBarrier", "make_barrier", "make_context"]

BARRIER_TIMEOUT_S = 600.0


class CellBarrier:
    """``wait_for_other_workers`` for one ``%%cluster`` run: a barrier of the
    coordination service whose participants are the cell's tasks. ``abort()``
    (a task failed) wakes the others with ``CancelledError``."""

    def __init__(self, cluster_spec, participants, barrier_id: str):
        self._aborted = threading.Event()
        self.client = transports.connect_coordination(target_of(cluster_spec))
        self.participants = list(participants)
        self.barrier_id = barrier_id

    def wait(self, task: str, timeout_s: float | None = None) -> int:
        return self.client.barrier(
            self.barrier_id, BARRIER_TIMEOUT_S if timeout_s is None else timeout_s,
            self.participants, source_task=task, should_cancel=self._aborted.is_set)

    def abort(self):
        self._aborted.set()

    def close(self):
        self._aborted.set()
        self.client.close()


def make_barrier(participants, cluster_spec, base_id: str) -> CellBarrier:
    return CellBarrier(cluster_spec, participants, f"{base_id}/wait_for_other_workers")


def make_context(cluster_spec, task_type: str, task_id: int, barrier):
    """The ``run_distribute_coordinator`` worker context of one task (between-graph,
    no strategy: chief 0, else worker 0, is the chief)."""
    return between_graph_context(cluster_spec, task_type, task_id,
                                 worker_barrier=barrier)
