"""Cluster resolvers (``nd.distribute.cluster_resolver``), as in TensorFlow.

A resolver answers "which cluster am I in, and which task am I?" from some
source: a literal ``ClusterSpec`` (``SimpleClusterResolver``), the ``TF_CONFIG``
environment variable (``TFConfigClusterResolver``), or a Slurm job step
(``SlurmClusterResolver``). Environment variables are read through
``nbdist.runtime.env`` only, at call time.
"""

from __future__ import annotations

import abc
import itertools
import re
from collections.abc import Iterator, Mapping
from typing import Any

from nbdist.runtime import env
from nbdist.runtime.cluster_spec import ClusterSpec

__all__ = [
    "SLURM_PORT_BASE",
    "ClusterResolver",
    "SimpleClusterResolver",
    "SlurmClusterResolver",
    "TFConfigClusterResolver",
    "expand_hostlist",
    "expand_tasks_per_node",
    "format_master_url",
    "slurm_layout",
]

_EVALUATOR = "evaluator"


def format_master_url(master: str, rpc_layer: str | None = None) -> str:
    """``rpc_layer://master`` when an RPC layer is given, else ``master``."""
    return f"{rpc_layer}://{master}" if rpc_layer else master


class ClusterResolver(abc.ABC):
    """Base class of cluster resolvers.

    Subclasses implement ``cluster_spec()`` and ``master()``; ``task_type``,
    ``task_id`` and ``rpc_layer`` default to the ``_task_type``, ``_task_id``
    and ``_rpc_layer`` attributes, ``None`` when unset.

    Example:
        >>> class OneTask(ClusterResolver):
        ...     def cluster_spec(self):
        ...         return ClusterSpec({"worker": ["localhost:2222"]})
        ...     def master(self, task_type=None, task_id=None, rpc_layer=None):
        ...         return ""
        >>> OneTask().cluster_spec().num_tasks("worker")
        1
    """

    @abc.abstractmethod
    def cluster_spec(self) -> ClusterSpec:
        """The cluster as it is now (implementations re-read their source)."""

    @abc.abstractmethod
    def master(
        self,
        task_type: str | None = None,
        task_id: int | None = None,
        rpc_layer: str | None = None,
    ) -> str:
        """The session target of the master, e.g. ``grpc://host:port``."""

    def num_accelerators(
        self,
        task_type: str | None = None,
        task_id: int | None = None,
        config_proto: Any = None,
    ) -> dict[str, int]:
        """Accelerator type to count per task; nbdist has none: ``{}``."""
        del task_type, task_id, config_proto
        return {}

    @property
    def environment(self) -> str | None:
        """``"google"`` inside Google, ``""`` elsewhere (TF's meaning)."""
        return ""

    @property
    def task_type(self) -> str | None:
        return getattr(self, "_task_type", None)

    @task_type.setter
    def task_type(self, task_type: str | None) -> None:
        self._task_type = task_type

    @property
    def task_id(self) -> int | None:
        return getattr(self, "_task_id", None)

    @task_id.setter
    def task_id(self, task_id: int | None) -> None:
        self._task_id = task_id

    @property
    def rpc_layer(self) -> str | None:
        return getattr(self, "_rpc_layer", None)

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer: str | None) -> None:
        self._rpc_layer = rpc_layer


class SimpleClusterResolver(ClusterResolver):
    """A resolver that returns what it was given.

    Example:
        >>> cluster = ClusterSpec({"worker": ["w0:2222", "w1:2222"]})
        >>> r = SimpleClusterResolver(cluster, task_type="worker", task_id=1,
        ...                           rpc_layer="grpc")
        >>> r.master("worker", 1)
        'grpc://w1:2222'
    """

    def __init__(
        self,
        cluster_spec: ClusterSpec,
        master: str = "",
        task_type: str | None = None,
        task_id: int | None = None,
        environment: str = "",
        num_accelerators: dict[str, int] | None = None,
        rpc_layer: str | None = None,
    ) -> None:
        if not isinstance(cluster_spec, ClusterSpec):
            raise TypeError(
                "cluster_spec must be a `ClusterSpec`, got "
                f"{type(cluster_spec).__name__}"
            )
        if not isinstance(master, str):
            raise TypeError(f"master must be a string, got {type(master).__name__}")
        self._cluster_spec = cluster_spec
        self._master = master
        self._task_type = task_type
        self._task_id = task_id
        self._environment = environment
        self._num_accelerators = num_accelerators
        self._rpc_layer = rpc_layer

    def cluster_spec(self) -> ClusterSpec:
        return self._cluster_spec

    def master(
        self,
        task_type: str | None = None,
        task_id: int | None = None,
        rpc_layer: str | None = None,
    ) -> str:
        """The given task's address when both are given, else ``master``."""
        if task_type is not None and task_id is not None:
            address = self._cluster_spec.task_address(task_type, task_id)
        else:
            address = self._master
        return format_master_url(address, rpc_layer or self._rpc_layer)

    @property
    def environment(self) -> str:
        return self._environment

    def num_accelerators(
        self,
        task_type: str | None = None,
        task_id: int | None = None,
        config_proto: Any = None,
    ) -> dict[str, int]:
        del task_type, task_id, config_proto
        return {} if self._num_accelerators is None else self._num_accelerators


class TFConfigClusterResolver(ClusterResolver):
    """Reads the cluster and this task from the ``TF_CONFIG`` variable.

    ``TF_CONFIG`` is JSON: ``cluster`` (job to addresses), ``task`` (``type``,
    ``index``), optionally ``rpc_layer``, ``session_master`` and
    ``environment``. It is re-read on every access, as TensorFlow does;
    arguments and setters override it.

    Example:
        >>> import json, os
        >>> os.environ["TF_CONFIG"] = json.dumps({
        ...     "cluster": {"ps": ["ps0:2222"], "worker": ["w0:2222", "w1:2222"]},
        ...     "task": {"type": "worker", "index": 1}, "rpc_layer": "grpc"})
        >>> r = TFConfigClusterResolver()
        >>> r.task_type, r.task_id, r.master()
        ('worker', 1, 'grpc://w1:2222')
        >>> del os.environ["TF_CONFIG"]
    """

    def __init__(
        self,
        task_type: str | None = None,
        task_id: int | None = None,
        rpc_layer: str | None = None,
        environment: str | None = None,
    ) -> None:
        self._task_type = task_type
        self._task_id = task_id
        self._rpc_layer = rpc_layer
        self._environment = environment

    @property
    def task_type(self) -> str | None:
        if self._task_type is not None:
            return str(self._task_type)
        task = env.tf_config().get("task", {})
        return str(task["type"]) if "type" in task else None

    @task_type.setter
    def task_type(self, task_type: str | None) -> None:
        self._task_type = task_type

    @property
    def task_id(self) -> int | None:
        if self._task_id is not None:
            return int(self._task_id)
        task = env.tf_config().get("task", {})
        return int(task["index"]) if "index" in task else None

    @task_id.setter
    def task_id(self, task_id: int | None) -> None:
        self._task_id = task_id

    @property
    def rpc_layer(self) -> str | None:
        if self._rpc_layer is not None:
            return self._rpc_layer
        return env.tf_config().get("rpc_layer")

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer: str | None) -> None:
        self._rpc_layer = rpc_layer

    @property
    def environment(self) -> str | None:
        """The ``environment`` argument, else ``TF_CONFIG``'s, else ``None``."""
        if self._environment is not None:
            return self._environment
        return env.tf_config().get("environment")

    def cluster_spec(self) -> ClusterSpec:
        """The ``cluster`` of ``TF_CONFIG`` (empty when it has none)."""
        return ClusterSpec(env.tf_config().get("cluster", {}))

    def master(
        self,
        task_type: str | None = None,
        task_id: int | None = None,
        rpc_layer: str | None = None,
    ) -> str:
        """The session target of this (or the given) task.

        ``session_master`` in ``TF_CONFIG`` wins; a cluster of at most one
        task gives ``""`` (an in-process session), and so does an evaluator
        that is not part of the cluster (it evaluates locally, as TF's
        ``RunConfig`` has it). Otherwise ``rpc_layer://address``.

        Raises:
          ValueError: if no task is known or it is not in the cluster.
        """
        config = env.tf_config()
        session_master = config.get("session_master")
        if session_master is not None:
            return session_master

        cluster_spec = self.cluster_spec()
        jobs = cluster_spec.jobs
        if not jobs or (len(jobs) == 1 and len(cluster_spec.job_tasks(jobs[0])) == 1):
            return ""

        task_type = task_type if task_type is not None else self.task_type
        task_id = task_id if task_id is not None else self.task_id
        rpc_layer = rpc_layer if rpc_layer is not None else self.rpc_layer
        if task_type is None:
            raise ValueError(
                "Cannot choose a master: TF_CONFIG has no task.type and none was "
                f"given (the cluster has jobs {jobs})"
            )
        if task_type == _EVALUATOR and _EVALUATOR not in jobs:
            return ""
        return format_master_url(
            cluster_spec.task_address(task_type, task_id), rpc_layer
        )


# -- Slurm --------------------------------------------------------------------


def _split_hostlist(hostlist: str) -> Iterator[str]:
    """Splits at commas outside brackets: 'a[1,2],b' -> 'a[1,2]', 'b'."""
    depth = 0
    current = ""
    for c in hostlist:
        if c == "[":
            if depth:
                raise ValueError("nested '['")
            depth = 1
        elif c == "]":
            if not depth:
                raise ValueError("unmatched ']'")
            depth = 0
        elif c == "," and not depth:
            if not current:
                raise ValueError("empty host name")
            yield current
            current = ""
            continue
        current += c
    if depth:
        raise ValueError("unmatched '['")
    if current:
        yield current


def _expand_range(range_exp: str) -> list[str]:
    """'01-03,7' -> ['01', '02', '03', '7'] (zero padding kept)."""
    values = []
    for part in range_exp.split(","):
        bounds = part.split("-")
        if len(bounds) == 1:
            bounds = bounds * 2
        if len(bounds) != 2 or not all(b.isdigit() for b in bounds):
            raise ValueError(f"bad range {part!r}")
        lo, hi = int(bounds[0]), int(bounds[1])
        if hi < lo:
            raise ValueError(f"descending range {part!r}")
        width = len(bounds[0])
        values.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return values


_HOST_PART = re.compile(r"\[([^\[\]]*)\]")


def expand_hostlist(hostlist: str) -> list[str]:
    """Expands a Slurm host list, keeping order and duplicates.

    Supports what TF's ``expand_hostlist`` does (``n[1-3,7]``, zero padding)
    and, as Slurm does, text after a bracket and several bracket groups
    (``rack[1-2]-n[01-02]`` is their product, leftmost slowest).

    Example:
        >>> expand_hostlist("n[1-2],m5,o[3-4,6]")
        ['n1', 'n2', 'm5', 'o3', 'o4', 'o6']

    Raises:
      ValueError: if the list is malformed.
    """
    hosts: list[str] = []
    try:
        for part in _split_hostlist(hostlist):
            pieces = _HOST_PART.split(part)
            # pieces alternates literal text and range expressions.
            choices = [
                [p] if k % 2 == 0 else _expand_range(p) for k, p in enumerate(pieces)
            ]
            hosts.extend("".join(c) for c in itertools.product(*choices))
    except ValueError as e:
        raise ValueError(f'Invalid hostlist format "{hostlist}": {e}') from None
    return hosts


def expand_tasks_per_node(tasks_per_node: str) -> list[int]:
    """Expands Slurm's tasks-per-node list: ``'3(x2),2,1'`` -> ``[3, 3, 2, 1]``.

    Raises:
      ValueError: if the list is malformed.
    """
    result = []
    for part in tasks_per_node.split(","):
        m = re.fullmatch(r"(\d+)(\(x(\d+)\))?", part.strip())
        if m is None:
            raise ValueError(
                f'Invalid tasks-per-node list format "{tasks_per_node}": bad part '
                f"{part!r} (expected N or N(xR))"
            )
        result.extend([int(m.group(1))] * int(m.group(3) or 1))
    return result


SLURM_PORT_BASE = 8888  # TF's SlurmClusterResolver's first port on each node


def slurm_layout(jobs: Mapping[str, int], tasks_per_host: Mapping[str, int],
                 port_base: int = SLURM_PORT_BASE) -> dict[str, list[str]]:
    """TF's layout of a Slurm job's tasks: nodes sorted by name, the tasks of
    a node on ports ``port_base``, ``port_base + 1``, ...; jobs sorted by name
    take consecutive tasks.

    >>> slurm_layout({"worker": 2, "ps": 1}, {"n2": 1, "n1": 2})
    {'ps': ['n1:8888'], 'worker': ['n1:8889', 'n2:8888']}
    """
    addresses = [f"{host}:{port_base + k}"
                 for host, n in sorted(tasks_per_host.items()) for k in range(n)]
    cluster, start = {}, 0
    for job, n in sorted(jobs.items()):
        cluster[job] = addresses[start : start + n]
        start += n
    return cluster


class SlurmClusterResolver(ClusterResolver):
    """The cluster of a Slurm job step, one task per Slurm task.

    Tasks are laid out as TensorFlow does: nodes sorted by name, the tasks of
    a node on ports ``port_base``, ``port_base + 1``, ...; jobs sorted by name
    take consecutive tasks; this process is task number ``SLURM_PROCID``.

    Reads ``SLURM_PROCID``, ``SLURM_STEP_NUM_TASKS`` (or ``SLURM_NTASKS``),
    ``SLURM_STEP_NODELIST`` (or ``SLURM_JOB_NODELIST``) and
    ``SLURM_STEP_TASKS_PER_NODE`` (or ``SLURM_TASKS_PER_NODE``).

    Example:
        >>> import os
        >>> os.environ.update(SLURM_PROCID="1", SLURM_STEP_NUM_TASKS="3",
        ...                   SLURM_STEP_NODELIST="n[1-2]",
        ...                   SLURM_STEP_TASKS_PER_NODE="2,1")
        >>> r = SlurmClusterResolver(jobs={"ps": 1, "worker": 2})
        >>> r.cluster_spec().as_dict()
        {'ps': ['n1:8888'], 'worker': ['n1:8889', 'n2:8888']}
        >>> r.task_type, r.task_id, r.master()
        ('worker', 0, 'grpc://n1:8889')
        >>> for k in ("PROCID", "STEP_NUM_TASKS", "STEP_NODELIST",
        ...           "STEP_TASKS_PER_NODE"):
        ...     del os.environ["SLURM_" + k]
    """

    def __init__(
        self,
        jobs: Mapping[str, int] | None = None,
        port_base: int = SLURM_PORT_BASE,
        gpus_per_node: int | None = None,
        gpus_per_task: int | None = None,
        tasks_per_node: int | Mapping[str, int] | None = None,
        auto_set_gpu: bool = True,
        rpc_layer: str | None = "grpc",
    ) -> None:
        self._rank = int(env.slurm_var("PROCID"))
        if jobs is None:
            jobs = {"worker": int(env.slurm_var("STEP_NUM_TASKS", "NTASKS"))}
        self._jobs = dict(jobs)
        self._port_base = int(port_base)

        if tasks_per_node is None:
            hosts = _resolve_hostlist()
            counts = expand_tasks_per_node(
                env.slurm_var("STEP_TASKS_PER_NODE", "TASKS_PER_NODE")
            )
            if len(counts) != len(hosts):
                raise RuntimeError(
                    f"Slurm lists {len(hosts)} nodes {hosts} but tasks per node "
                    f"for {len(counts)}: {counts}"
                )
            self._task_configuration = dict(zip(hosts, counts))
        elif isinstance(tasks_per_node, Mapping):
            self._task_configuration = {h: int(n) for h, n in tasks_per_node.items()}
        else:
            self._task_configuration = {
                host: int(tasks_per_node) for host in _resolve_hostlist()
            }
        if not self._task_configuration:
            raise RuntimeError("Slurm assigned no nodes to this job step")

        max_tasks_per_node = max(self._task_configuration.values())
        num_tasks = sum(self._task_configuration.values())
        if gpus_per_node is None:
            visible = env.cuda_visible_devices() or ""
            gpus_per_node = len([d for d in visible.split(",") if d.strip()])
        if gpus_per_task is None:
            gpus_per_task = gpus_per_node // max(max_tasks_per_node, 1)
        self._gpus_per_node = int(gpus_per_node)
        self._gpus_per_task = int(gpus_per_task)
        self._auto_set_gpu = auto_set_gpu
        self._rpc_layer = rpc_layer

        if max_tasks_per_node * self._gpus_per_task > self._gpus_per_node:
            raise RuntimeError(
                f"Requested more GPUs per node than available: {max_tasks_per_node} "
                f"tasks x {self._gpus_per_task} GPUs > {self._gpus_per_node} GPUs"
            )
        if sum(self._jobs.values()) != num_tasks:
            raise RuntimeError(
                f"Requested {sum(self._jobs.values())} tasks but only {num_tasks} "
                "were assigned."
            )
        if not 0 <= self._rank < num_tasks:
            raise RuntimeError(
                f"SLURM_PROCID={self._rank} is outside the {num_tasks} tasks of "
                "this job step"
            )
        self._task_type, self._task_id = self._own_task()

    def _allocate(self) -> tuple[dict[str, list[str]], list[str]]:
        """Addresses per job, and the GPU list of each task (by rank)."""
        gpus = []
        for _, num_tasks in sorted(self._task_configuration.items()):
            for k in range(num_tasks):
                first = k * self._gpus_per_task
                ids = range(first, first + self._gpus_per_task)
                gpus.append(",".join(str(i) for i in ids))
        cluster = slurm_layout(self._jobs, self._task_configuration, self._port_base)
        return cluster, gpus

    def _own_task(self) -> tuple[str | None, int | None]:
        start = 0
        for job, n in sorted(self._jobs.items()):
            if start <= self._rank < start + n:
                return job, self._rank - start
            start += n
        return None, None

    def cluster_spec(self) -> ClusterSpec:
        """The cluster; also sets ``CUDA_VISIBLE_DEVICES`` when GPUs are used."""
        cluster, gpus = self._allocate()
        if self._auto_set_gpu and self._gpus_per_task > 0:
            env.set_cuda_visible_devices(gpus[self._rank])
        return ClusterSpec(cluster)

    def get_task_info(self) -> tuple[str | None, int | None]:
        """``(task_type, task_id)`` of this process."""
        return self.task_type, self.task_id

    def master(
        self,
        task_type: str | None = None,
        task_id: int | None = None,
        rpc_layer: str | None = None,
    ) -> str:
        """``rpc_layer://address`` of this (or the given) task."""
        task_type = task_type if task_type is not None else self.task_type
        task_id = task_id if task_id is not None else self.task_id
        if task_type is None or task_id is None:
            return ""
        address = self.cluster_spec().task_address(task_type, task_id)
        return format_master_url(address, rpc_layer or self.rpc_layer)

    def num_accelerators(
        self,
        task_type: str | None = None,
        task_id: int | None = None,
        config_proto: Any = None,
    ) -> dict[str, int]:
        del task_type, task_id, config_proto
        return {"GPU": self._gpus_per_task} if self._gpus_per_task else {}


def _resolve_hostlist() -> list[str]:
    return expand_hostlist(env.slurm_var("STEP_NODELIST", "JOB_NODELIST"))
