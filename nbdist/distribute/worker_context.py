"""The worker context of ``run_distribute_coordinator``: what a ``worker_fn``
knows about its task (``get_current_worker_context()``), as TF's
``distribute_coordinator._WorkerContext``.
"""

from __future__ import annotations

import copy

from nbdist.distribute.strategies import distribute_coordinator_context
from nbdist.runtime.cluster_spec import ClusterSpec, task_device

__all__ = ["BetweenGraphStrategy", "TaskType", "WorkerContext",
           "between_graph_context", "get_num_workers", "is_chief"]


class TaskType:
    PS = "ps"
    WORKER = "worker"
    CHIEF = "chief"
    EVALUATOR = "evaluator"
    CLIENT = "client"



def is_chief(cluster_spec, task_type, task_id) -> bool:
    if not cluster_spec or task_type in (TaskType.CHIEF, TaskType.EVALUATOR, None):
        return True
    return (TaskType.CHIEF not in cluster_spec.jobs
            and task_type == TaskType.WORKER and task_id == 0)


def get_num_workers(cluster_spec) -> int:
    """Chief plus workers."""
    if not cluster_spec:
        return 0
    d = cluster_spec.as_dict()
    return len(d.get(TaskType.WORKER, [])) + len(d.get(TaskType.CHIEF, []))


# -- the default strategy ------------------------------------------------------------
class _BetweenGraphExtended:
    """``strategy.extended`` of ``BetweenGraphStrategy``."""

    experimental_between_graph = True

    def __init__(self):
        self._is_chief = True
        self._cluster_spec = None
        self._task_type = None
        self._task_id = None

    @property
    def experimental_should_init(self) -> bool:
        return self._is_chief

    @property
    def should_checkpoint(self) -> bool:
        return self._is_chief

    @property
    def should_save_summary(self) -> bool:
        return self._is_chief


class BetweenGraphStrategy:
    """The strategy ``run_distribute_coordinator`` uses when given none: every
    chief/worker task builds its own graph (between-graph replication); the
    chief (chief 0, else worker 0) initialises, checkpoints and writes
    summaries. ``configure`` leaves the session config unchanged.

    >>> s = BetweenGraphStrategy()
    >>> s.configure(None, ClusterSpec({"worker": ["a:1", "b:1"]}), "worker", 1)
    >>> s.extended.experimental_should_init
    False
    """

    def __init__(self):
        self.extended = _BetweenGraphExtended()

    def configure(self, session_config=None, cluster_spec=None, task_type=None,
                  task_id=None):
        del session_config
        if cluster_spec is not None and not isinstance(cluster_spec, ClusterSpec):
            cluster_spec = ClusterSpec(cluster_spec)
        ext = self.extended
        ext._cluster_spec = cluster_spec
        ext._task_type, ext._task_id = task_type, task_id
        ext._is_chief = is_chief(cluster_spec, task_type, task_id)

    def __repr__(self) -> str:
        return "BetweenGraphStrategy()"


class WorkerContext:
    """What a ``worker_fn`` knows about its task (``get_current_worker_context()``)."""

    def __init__(self, strategy, cluster_spec, task_type, task_id, session_config=None,
                 rpc_layer="grpc", worker_barrier=None, extended=None):
        self._strategy = strategy
        self._extended = extended if extended is not None else getattr(
            strategy, "extended", None)
        self._cluster_spec = cluster_spec
        self._task_type = task_type
        self._task_id = task_id
        self._session_config = session_config
        self._worker_barrier = worker_barrier
        self._rpc_layer = rpc_layer
        self._master_target = self._get_master_target()
        self._num_workers = get_num_workers(cluster_spec)
        self._is_chief_node = self._is_chief()

    def _debug_message(self) -> str:
        if self._cluster_spec:
            return (f"[cluster_spec: {self._cluster_spec!r}, task_type: "
                    f"{self.task_type!r}, task_id: {self.task_id!r}]")
        return "[local]"

    def __enter__(self):
        old = distribute_coordinator_context.get_current_worker_context()
        if old:
            raise ValueError("You cannot run distribute coordinator in a `worker_fn`.\t"
                             + self._debug_message())
        distribute_coordinator_context._worker_context.current = self
        return self

    def __exit__(self, *exc):
        distribute_coordinator_context._worker_context.current = None

    def __repr__(self) -> str:
        return (f"<WorkerContext task_type={self._task_type!r} task_id={self._task_id!r}"
                f" master_target={self._master_target!r} is_chief={self.is_chief}>")

    def _get_master_target(self) -> str:
        # No cluster: local training. The evaluator evaluates on its own, in
        # this process (as TF: its master is local, not its server).
        if not self._cluster_spec or self._task_type == TaskType.EVALUATOR:
            return ""
        if not self._task_type:
            if TaskType.CHIEF in self._cluster_spec.jobs:
                task_type, task_id = TaskType.CHIEF, 0
            else:
                assert TaskType.WORKER in self._cluster_spec.jobs
                task_type, task_id = TaskType.WORKER, 0
        else:
            task_type, task_id = self._task_type, self._task_id
        prefix = self._rpc_layer + "://" if self._rpc_layer else ""
        return prefix + self._cluster_spec.job_tasks(task_type)[task_id or 0]

    def _is_chief(self) -> bool:
        return is_chief(self._cluster_spec, self._task_type, self._task_id)

    @property
    def task_name(self) -> str | None:
        """``/job:<task_type>/replica:0/task:<task_id>``, or None in-graph/local."""
        if not self._task_type:
            return None
        return task_device(self._task_type, self._task_id or 0)

    def wait_for_other_workers(self, timeout: float | None = None):
        """Waits until every chief/worker task reaches this call (a barrier of the
        coordination service). Without a barrier (local, in-graph, evaluator)
        it returns at once. Raises ``DeadlineExceededError`` naming the tasks
        that never arrived after ``timeout`` s (default 1 hour)."""
        if not self._worker_barrier:
            return
        return self._worker_barrier.wait(self.task_name, timeout)

    def session_creator(self, scaffold=None, config=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, max_wait_secs=7200):
        """A ``ChiefSessionCreator`` when this task initialises the model
        (``experimental_should_init``), else a ``WorkerSessionCreator``; both
        target ``master_target`` with the context's session config."""
        from nbdist.train.monitored_session import (
            ChiefSessionCreator,
            WorkerSessionCreator,
        )

        if config:
            session_config = copy.deepcopy(config)
            if self._session_config is not None:
                session_config.MergeFrom(self._session_config)
        else:
            session_config = self._session_config
        if self._extended is None or self._extended.experimental_should_init:
            return ChiefSessionCreator(
                scaffold, master=self.master_target, config=session_config,
                checkpoint_dir=checkpoint_dir,
                checkpoint_filename_with_path=checkpoint_filename_with_path)
        return WorkerSessionCreator(scaffold, master=self.master_target,
                                    config=session_config, max_wait_secs=max_wait_secs)

    @property
    def session_config(self):
        return copy.deepcopy(self._session_config)

    @property
    def has_barrier(self) -> bool:
        return self._worker_barrier is not None

    @property
    def distributed_mode(self) -> bool:
        return bool(self._cluster_spec) and self._task_type != TaskType.EVALUATOR

    @property
    def cluster_spec(self):
        return copy.deepcopy(self._cluster_spec)

    @property
    def task_type(self):
        return self._task_type

    @property
    def task_id(self):
        return self._task_id

    @property
    def master_target(self) -> str:
        return self._master_target

    @property
    def is_chief(self) -> bool:
        return self._is_chief_node

    @property
    def num_workers(self) -> int:
        """Workers in the cluster, the chief included."""
        return self._num_workers

    @property
    def experimental_should_init(self) -> bool:
        return self._flag("experimental_should_init")

    @property
    def should_checkpoint(self) -> bool:
        return self._flag("should_checkpoint")

    @property
    def should_save_summary(self) -> bool:
        return self._flag("should_save_summary")

    def _flag(self, name: str) -> bool:
        if self._extended is None:
            return self._is_chief_node
        return bool(getattr(self._extended, name))


def between_graph_context(cluster_spec, task_type, task_id,
                          worker_barrier=None) -> WorkerContext:
    """The worker context ``run_distribute_coordinator`` gives one task of
    between-graph replication without a strategy: chief 0, else worker 0,
    initialises, checkpoints and writes summaries; ``worker_barrier`` (an
    object with ``wait(task, timeout_s)``) is behind ``wait_for_other_workers``.

    >>> spec = ClusterSpec({"worker": ["a:1", "b:1"]})
    >>> ctx = between_graph_context(spec, "worker", 1)
    >>> ctx.master_target, ctx.is_chief, ctx.experimental_should_init
    ('grpc://b:1', False, False)
    """
    flags = BetweenGraphStrategy()
    flags.configure(None, cluster_spec, task_type, task_id)
    return WorkerContext(None, cluster_spec, task_type, task_id,
                         worker_barrier=worker_barrier, extended=flags.extended)
