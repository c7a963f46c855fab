"""``ClusterSpec``: the jobs and task addresses of a cluster (``tf.train.ClusterSpec``).

Behaves as TensorFlow's: built from a dict, a ``ClusterDef`` proto or another
``ClusterSpec``; jobs may be dense lists or sparse ``{index: address}`` maps.
``ClusterSpec.from_string`` reads the ``--cluster_spec`` flag syntax of TF's
original ``grpc_tensorflow_server.py``. The ``ClusterDef`` proto is imported
lazily, so this module needs no generated code until it is asked for one.
"""

from __future__ import annotations

from typing import Any

from nbdist import errors

__all__ = ["ClusterSpec", "InvalidAddressError", "split_address", "task_device"]


class InvalidAddressError(errors.InvalidArgumentError, ValueError):
    """A task address that is not ``host:port`` (TF: InvalidArgumentError; also a
    ValueError, which it has been here)."""


def split_address(address: str, task: str | None = None) -> tuple[str, int]:
    """``(host, port)`` of a ``host:port`` task address (IPv6 hosts in brackets).

    Example:
        >>> split_address("[::1]:2222")
        ('::1', 2222)
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        of = f" of task {task}" if task else ""
        raise InvalidAddressError(
            None, None, f"Could not interpret {address!r}{of} as a host:port pair "
            "(the port is missing or not a number in 0..65535)")
    return host.strip("[]"), int(port)


def task_device(job: str, index: int) -> str:
    """The canonical device name of a task: ``/job:J/replica:0/task:T``.

    Example:
        >>> task_device("worker", 1)
        '/job:worker/replica:0/task:1'
    """
    return f"/job:{job}/replica:0/task:{int(index)}"


def _cluster_pb2():
    from nbdist.proto import cluster_pb2

    return cluster_pb2


def _as_text(value: Any, what: str) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise TypeError(f"{what} {value!r} is not valid UTF-8") from None
    if isinstance(value, str):
        return value
    raise TypeError(f"{what} {value!r} must be bytes or unicode")


def _task_index(index: Any, job_name: str) -> int:
    try:
        i = int(index)
    except (TypeError, ValueError):
        raise TypeError(
            f"Task index {index!r} in job {job_name!r} must be an integer"
        ) from None
    if i < 0:
        raise ValueError(
            f"Task index {i} in job {job_name!r} must be a non-negative integer"
        )
    return i


class ClusterSpec:
    """A cluster as a set of tasks, organized into jobs.

    Example:
        >>> cluster = ClusterSpec({"ps": ["ps0:2222"],
        ...                        "worker": ["w0:2222", "w1:2222"]})
        >>> cluster.task_address("worker", 1)
        'w1:2222'
        >>> ClusterSpec.from_string("ps|ps0:2222,worker|w0:2222;w1:2222") == cluster
        True
        >>> ClusterSpec({"worker": {1: "w1:2222"}}).as_dict()
        {'worker': {1: 'w1:2222'}}
    """

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, as in TF

    def __init__(self, cluster: Any) -> None:
        self._cluster_def = None
        if isinstance(cluster, dict):
            self._cluster_spec: dict[str, dict[int, str]] = {}
            for job_name, tasks in cluster.items():
                job_name = _as_text(job_name, "Job name")
                if isinstance(tasks, (list, tuple)):
                    items = enumerate(tasks)
                elif isinstance(tasks, dict):
                    items = ((_task_index(i, job_name), t) for i, t in tasks.items())
                else:
                    raise TypeError(
                        f"The tasks for job {job_name!r} must be a list or a "
                        "dictionary from integers to strings."
                    )
                self._cluster_spec[job_name] = {
                    i: _as_text(t, f"Task address (job {job_name!r}, task {i})")
                    for i, t in items
                }
        elif isinstance(cluster, ClusterSpec):
            # TF goes through the other's ClusterDef, hence sorted job order.
            self._cluster_spec = {
                job: dict(sorted(tasks.items()))
                for job, tasks in sorted(cluster._cluster_spec.items())
            }
        elif _is_cluster_def(cluster):
            self._cluster_def = _cluster_pb2().ClusterDef()
            self._cluster_def.CopyFrom(cluster)
            self._cluster_spec = {}
            for job_def in cluster.job:
                self._cluster_spec[job_def.name] = dict(job_def.tasks.items())
        else:
            raise TypeError(
                "`cluster` must be a dictionary mapping one or more job names to "
                "lists of network addresses, or a `ClusterDef` protocol buffer; "
                f"got {type(cluster).__name__}"
            )

    @classmethod
    def from_string(cls, cluster_spec: str) -> ClusterSpec:
        """Parses the ``--cluster_spec`` syntax of TF's ``grpc_tensorflow_server``.

        ``SPEC`` is ``JOB(,JOB)*``; ``JOB`` is ``NAME|HOST:PORT(;HOST:PORT)*``.
        Jobs keep the order in which they are written.

        Example:
            >>> ClusterSpec.from_string("ps|h:1;h:2,worker|h:3").as_dict()
            {'ps': ['h:1', 'h:2'], 'worker': ['h:3']}

        Raises:
          ValueError: if the string is empty or malformed.
        """
        if not isinstance(cluster_spec, str):
            raise TypeError(
                f"cluster_spec must be a string, got {type(cluster_spec).__name__}"
            )
        cluster_spec = cluster_spec.strip()
        if not cluster_spec:
            raise ValueError("Empty cluster_spec string")
        expected = "expected NAME|HOST:PORT(;HOST:PORT)* per job, jobs joined by ','"
        jobs: dict[str, list[str]] = {}
        for job_string in cluster_spec.split(","):
            if job_string.count("|") != 1:
                raise ValueError(
                    "Not exactly one instance of '|' in cluster_spec: job string "
                    f"{job_string!r} in {cluster_spec!r} ({expected})"
                )
            job_name, tasks = job_string.split("|")
            if not job_name:
                raise ValueError(
                    f"Empty job_name in cluster_spec: job string {job_string!r} "
                    f"in {cluster_spec!r} ({expected})"
                )
            if job_name in jobs:
                raise ValueError(
                    f"Job {job_name!r} appears more than once in cluster_spec "
                    f"{cluster_spec!r}"
                )
            addresses = tasks.split(";")
            for i, address in enumerate(addresses):
                if not address:
                    raise ValueError(
                        f"Empty task string at position {i} in job {job_name!r} "
                        f"of cluster_spec {cluster_spec!r} ({expected})"
                    )
            jobs[job_name] = addresses
        return cls(jobs)

    # -- queries --------------------------------------------------------------

    def _job(self, job_name: str) -> dict[int, str]:
        try:
            return self._cluster_spec[job_name]
        except (KeyError, TypeError):
            raise ValueError(f"No such job in cluster: {job_name!r}") from None

    @property
    def jobs(self) -> list[str]:
        """The job names, in construction order."""
        return list(self._cluster_spec)

    def num_tasks(self, job_name: str) -> int:
        """How many tasks ``job_name`` defines (``ValueError`` if no such job)."""
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        """The sorted task indices of ``job_name``."""
        return sorted(self._job(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        """The address of one task.

        Raises:
          ValueError: if there is no such job, or no such task in it.
        """
        job = self._job(job_name)
        try:
            return job[task_index]
        except (KeyError, TypeError):
            raise ValueError(
                f"No task with index {task_index!r} in job {job_name!r} "
                f"(its task indices are {sorted(job)})"
            ) from None

    def job_tasks(self, job_name: str) -> list[str | None]:
        """The addresses of ``job_name`` indexed by task, ``None`` for gaps.

        As in TF, the list of a sparse job is longer than its number of tasks;
        prefer ``num_tasks``/``task_indices`` for sparse jobs.
        """
        job = self._job(job_name)
        if not job:
            return []
        ret: list[str | None] = [None] * (max(job) + 1)
        for i, address in job.items():
            ret[i] = address
        return ret

    def task_names(self) -> list[str]:
        """Every task's canonical name, by sorted job then task index.

        Example:
            >>> ClusterSpec({"worker": ["a:1"], "ps": ["b:1"]}).task_names()
            ['/job:ps/replica:0/task:0', '/job:worker/replica:0/task:0']
        """
        return [
            task_device(job, i)
            for job in sorted(self._cluster_spec)
            for i in sorted(self._cluster_spec[job])
        ]

    def as_dict(self) -> dict[str, list[str | None] | dict[int, str]]:
        """Job name to a list of addresses (dense jobs) or ``{index: address}``."""
        ret: dict[str, Any] = {}
        for job in self.jobs:
            indices = self.task_indices(job)
            if not indices:
                ret[job] = {}
            elif max(indices) + 1 == len(indices):
                ret[job] = self.job_tasks(job)
            else:
                ret[job] = {i: self.task_address(job, i) for i in indices}
        return ret

    def as_cluster_def(self):
        """This cluster as a ``ClusterDef`` proto, jobs and tasks sorted."""
        if self._cluster_def is None:
            cluster_def = _cluster_pb2().ClusterDef()
            for job_name, tasks in sorted(self._cluster_spec.items()):
                job_def = cluster_def.job.add()
                job_def.name = job_name
                for i, address in sorted(tasks.items()):
                    job_def.tasks[i] = address
            self._cluster_def = cluster_def
        return self._cluster_def

    # -- dunder ---------------------------------------------------------------

    def __bool__(self) -> bool:
        return bool(self._cluster_spec)

    def __eq__(self, other: object) -> bool:
        # As TF: equal to another ClusterSpec with the same tasks, or to a dict
        # in the internal {job: {index: address}} form.
        if isinstance(other, ClusterSpec):
            return self._cluster_spec == other._cluster_spec
        return self._cluster_spec == other

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __repr__(self) -> str:
        d = self.as_dict()
        items = ", ".join(f"{k!r}: {d[k]!r}" for k in sorted(d))
        return "ClusterSpec({" + items + "})"


def _is_cluster_def(value: Any) -> bool:
    # Avoid importing the generated protos for the common dict case.
    descriptor = getattr(value, "DESCRIPTOR", None)
    if getattr(descriptor, "full_name", None) != "nbdist.ClusterDef":
        return False
    return isinstance(value, _cluster_pb2().ClusterDef)
