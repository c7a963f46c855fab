"""What the rest of nbdist may ask of a cluster: the ``Cluster`` protocol.

``LocalCluster``, ``SlurmCluster`` and ``AttachedCluster`` satisfy it (through
``ClusterBase``), and ``as_cluster`` shows an in-process ``Server`` as the
one-task cluster it is, so the notebook's views read clusters only
through these names:

- ``owned``: this process started the tasks (False: attached, so no stop,
  kill or restart; ``not_owned_reason`` says why in a line);
- ``restarts_tasks``: ``kill(job, index)``/``restart(job, index)`` act on
  single tasks (a ``LocalCluster``'s processes);
- ``closed``: shut down (or disconnected): nothing more will happen;
- ``cluster_spec``, ``target(job, index)``, ``targets``;
- ``leader`` and ``coordination_target``: the task hosting the coordination
  service and its target, both from ``runtime.coordination`` (one rule);
- ``tasks``: each task's ``TaskInfo`` now.

An object with only ``cluster_spec`` and ``tasks`` (a cluster class of the
user's, a test's fake) is read through ``PartialCluster``, which says what the
missing names default to.

>>> from nbdist.runtime.cluster_spec import ClusterSpec
>>> class Spec(ClusterBase):
...     def __init__(self, spec):
...         self._spec, self._closed = spec, False
...     tasks = []
>>> c = Spec(ClusterSpec({"ps": ["h:1"], "worker": ["h:2"]}))
>>> is_cluster(c), c.leader, c.coordination_target
(True, ('worker', 0), 'grpc://h:2')
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field
from typing import Protocol

from nbdist.framework.device import DeviceSpec
from nbdist.runtime.cluster_spec import ClusterSpec
from nbdist.runtime.coordination import leader_of, target_of
from nbdist.runtime.server_lib import Server

__all__ = ["Cluster", "ClusterBase", "PartialCluster", "ServerCluster", "TaskInfo",
           "as_cluster", "is_cluster"]


@dataclass
class TaskInfo:
    """One task of a cluster: ``job``, ``index``, ``address``, ``pid``,
    ``state`` ("running", "killed", "exited" or "stopped")."""

    job: str
    index: int
    address: str
    pid: int | None
    state: str
    # When kill() SIGKILLed it (wall time); keyword-only, so that subclasses
    # (SlurmTaskInfo) may add fields without defaults.
    ended_at: float | None = field(default=None, kw_only=True)
    # When its process was started (wall time): the one time every view gives
    # a restart, however late each polls.
    started_at: float | None = field(default=None, kw_only=True)

    @property
    def name(self) -> str:
        return f"/job:{self.job}/replica:0/task:{self.index}"

    @property
    def target(self) -> str:
        return "grpc://" + self.address


class Cluster(Protocol):
    """A running cluster as the notebook and the strategies see it
    (``is_cluster`` checks an object for it without running its properties)."""

    owned: bool
    not_owned_reason: str
    restarts_tasks: bool

    @property
    def closed(self) -> bool: ...

    @property
    def cluster_spec(self) -> ClusterSpec: ...

    def target(self, job: str = "worker", index: int = 0) -> str: ...

    @property
    def targets(self) -> dict[str, list[str]]: ...

    @property
    def leader(self) -> tuple[str, int]: ...

    @property
    def coordination_target(self) -> str: ...

    @property
    def tasks(self) -> list[TaskInfo]: ...


class ClusterBase:
    """``Cluster``'s names from a subclass's ``_spec`` (its ``ClusterSpec``),
    ``_closed`` and ``tasks``."""

    owned = True
    not_owned_reason = ""
    restarts_tasks = False
    _spec: ClusterSpec
    _closed: bool

    @property
    def closed(self) -> bool:
        """Shut down (or, not owned, disconnected)."""
        return self._closed

    @property
    def cluster_spec(self) -> ClusterSpec:
        return self._spec

    def target(self, job: str = "worker", index: int = 0) -> str:
        """The session target of a task, e.g. ``grpc://localhost:40123``."""
        return "grpc://" + self._address(job, index)

    def _address(self, job: str, index: int) -> str:
        # Clusters that keep a TaskInfo per task refuse a task they lack here.
        return self._spec.task_address(job, index)

    @property
    def targets(self) -> dict[str, list[str]]:
        """job -> the targets of its tasks, in index order."""
        return {job: [self.target(job, i) for i in self._spec.task_indices(job)]
                for job in self._spec.jobs}

    @property
    def leader(self) -> tuple[str, int]:
        """(job, index) of the task hosting the coordination service (the
        chief, else worker 0, else ps 0)."""
        return leader_of(self._spec)

    @property
    def coordination_target(self) -> str:
        """The target of the task hosting the cluster's coordination service."""
        return target_of(self._spec)


class ServerCluster(ClusterBase):
    """An in-process ``Server`` as the cluster of its one task (its peers are
    other processes': their state is the coordination service's to say)."""

    def __init__(self, server: Server):
        self.server = server
        self._spec = server.cluster_spec

    @property
    def closed(self) -> bool:
        return self.server.stopped

    @property
    def coordination_target(self) -> str:
        return target_of(self.server)

    @property
    def tasks(self) -> list[TaskInfo]:
        task = DeviceSpec.from_string(self.server.task_name)
        job, index = task.job, task.task or 0
        state = "stopped" if self.server.stopped else "running"
        return [TaskInfo(job, index, self._spec.task_address(job, index),
                         os.getpid(), state)]


_MEMBERS = ("owned", "not_owned_reason", "restarts_tasks", "closed", "cluster_spec",
            "target", "targets", "leader", "coordination_target", "tasks")
_MISSING = object()


def _has(value, name: str) -> bool:
    # Statically: no property runs (``tasks`` may ask the cluster over the network).
    return inspect.getattr_static(value, name, _MISSING) is not _MISSING


def is_cluster(value) -> bool:
    """Whether ``value`` has every name of ``Cluster`` (no property runs)."""
    return all(_has(value, name) for name in _MEMBERS)


class PartialCluster(ClusterBase):
    """A cluster object of someone else's making that has only
    ``cluster_spec`` and ``tasks`` (and perhaps ``kill``/``restart``,
    ``closed``, ``owned``), read as a ``Cluster``: owned unless it says not,
    open unless it says closed, restarting tasks when it has ``kill`` and
    ``restart``."""

    def __init__(self, value):
        self.value = value
        self._spec = value.cluster_spec
        self.owned = bool(getattr(value, "owned", True))
        self.not_owned_reason = getattr(value, "not_owned_reason", "")
        self.restarts_tasks = _has(value, "kill") and _has(value, "restart")

    @property
    def closed(self) -> bool:
        return bool(getattr(self.value, "closed", False))

    @property
    def tasks(self) -> list[TaskInfo]:
        return self.value.tasks


def as_cluster(value) -> Cluster | None:
    """``value`` as a ``Cluster``: itself, an in-process ``Server``'s
    ``ServerCluster``, a ``PartialCluster`` over an object with
    ``cluster_spec`` and ``tasks``, or None (a ``ClusterSpec``, nothing)."""
    if isinstance(value, ClusterBase) or is_cluster(value):
        return value
    if isinstance(value, Server):
        return ServerCluster(value)
    if _has(value, "cluster_spec") and _has(value, "tasks"):
        return PartialCluster(value)
    return None
