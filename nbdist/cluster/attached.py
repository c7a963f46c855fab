"""``AttachedCluster``: a running cluster this process did not start (what
``%cluster connect`` attaches to), satisfying the ``Cluster`` protocol.

A cluster is named by a spec string (``ps|h:1,worker|h:2;h:3``, the
``--cluster_spec`` syntax), a dict (or a ``TF_CONFIG``-shaped dict with a
``cluster`` key), ``TF_CONFIG`` or a running SLURM job (read with
``SlurmCluster``'s ``scontrol`` parser, laid out as ``SlurmClusterResolver``
does). ``connect`` checks that the tasks answer (every task at once, within
one bounded timeout) and returns an ``AttachedCluster``: the spec, each task's
session target and the coordination service's target, which the views
follow. This process does not own the tasks' processes: it cannot kill or
restart them, and disconnecting leaves them running.
"""

from __future__ import annotations

import ast
import json
import subprocess
import threading
import time

from nbdist import errors
from nbdist.runtime import env
from nbdist.cluster.base import ClusterBase, TaskInfo
from nbdist.cluster.resolvers import expand_hostlist, slurm_layout
from nbdist.cluster.slurm_cluster import (
    SlurmTaskInfo,
    job_task_states,
    scontrol_fields,
    show_job,
)
from nbdist.framework.device import DeviceSpec
from nbdist.runtime import transports
from nbdist.runtime.cluster_spec import ClusterSpec

__all__ = [
    "CONNECT_TIMEOUT_S",
    "NOT_OWNED",
    "SPEC_FORMS",
    "AttachedCluster",
    "ConnectError",
    "connect",
    "first_line",
    "spec_from_slurm_job",
    "spec_from_tf_config",
    "spec_from_value",
]

CONNECT_TIMEOUT_S = 10.0
NOT_OWNED = (
    "unavailable: this notebook attached to the cluster (%cluster connect) "
    "and does not own its processes"
)
_TASKS_EVERY_S = 1.0  # ClusterView polls `tasks` every 0.25 s: one RPC a second
SPEC_FORMS = (
    "a spec string (ps|host:port,worker|host:port;host:port), a dict literal or "
    "the name of one, --tf_config or --slurm JOBID"
)


class ConnectError(ValueError):
    """The cluster cannot be attached; its message is one clear line."""


class AttachedCluster(ClusterBase):
    """A running cluster this process did not start, as ``%cluster connect``
    attaches to it: ``cluster_spec``, ``target(job, index)``,
    ``coordination_target``; no kill, restart or shutdown (``owned`` is
    False), ``disconnect()`` leaves its tasks running.

    >>> from nbdist.runtime.cluster_spec import ClusterSpec
    >>> c = AttachedCluster(ClusterSpec({"ps": ["h:1"], "worker": ["h:2"]}),
    ...                     source="a spec string")
    >>> c.target("worker", 0), c.coordination_target
    ('grpc://h:2', 'grpc://h:2')
    >>> c
    <AttachedCluster ps=1, worker=1 from a spec string>
    """

    owned = False
    not_owned_reason = NOT_OWNED

    def __init__(
        self,
        spec: ClusterSpec,
        source: str = "a cluster spec",
        slurm_job: str | None = None,
    ):
        self._spec = spec
        self.source = source
        self.slurm_job = slurm_job  # its tasks' end is read from SLURM
        self._ended: list[TaskInfo] | None = None
        self._closed = False  # ``closed``: the views stop
        self._lock = threading.Lock()
        self._client = None
        self._tasks: list[TaskInfo] = []
        self._tasks_at: float | None = None

    # cluster_spec, target, targets, leader, coordination_target, closed: ClusterBase

    def default_task(self) -> tuple[str, int]:
        """The task a notebook's sessions use: the chief, else worker 0, else
        the first task (as ``%cluster start``)."""
        for job in ("chief", "worker"):
            if job in self._spec.jobs:
                return job, min(self._spec.task_indices(job))
        job = self._spec.jobs[0]
        return job, min(self._spec.task_indices(job))

    @property
    def tasks(self) -> list[TaskInfo]:
        """Each task as the coordination service's table has it now: address,
        pid, "running" while it heartbeats (else "unknown"); [] once
        disconnected. The table, not the event log: a task that registered
        long ago (its events rolled out of the bounded log) shows too. Of a
        SLURM job that has ended: each task "failed" (its node failed) or
        "exited", with SLURM's reason."""
        with self._lock:
            if self._closed:
                return []
            if self._ended is not None:
                return list(self._ended)
            now = time.monotonic()
            if self._tasks_at is None or now - self._tasks_at >= _TASKS_EVERY_S:
                self._tasks_at = now
                if self.slurm_job and self._slurm_ended():
                    return list(self._ended)
                if self._client is None:
                    self._client = transports.connect_coordination(
                        self.coordination_target
                    )
                self._tasks = [
                    _task_info(r, self._spec)
                    for r in self._client.task_states(timeout_s=1.0)
                ]
                self._tasks = [t for t in self._tasks if t is not None]
            return list(self._tasks)

    def _slurm_ended(self) -> bool:
        ended = job_task_states(self.slurm_job, self._spec)
        if not ended:
            return False
        pids = {f"{t.job}:{t.index}": t.pid for t in self._tasks}
        self._ended = []
        for name, (state, reason) in ended.items():
            job, index = name.rsplit(":", 1)
            address = self._spec.task_address(job, int(index))
            host, port = address.rsplit(":", 1)
            self._ended.append(
                SlurmTaskInfo(
                    job,
                    int(index),
                    address,
                    pids.get(name),
                    state,
                    host,
                    int(port),
                    "",
                    reason=reason,
                )
            )
        return True

    def disconnect(self):
        """Forgets the cluster; its tasks keep running. Idempotent."""
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __repr__(self) -> str:
        jobs = ", ".join(f"{j}={self._spec.num_tasks(j)}" for j in self._spec.jobs)
        return f"<AttachedCluster {jobs} from {self.source}>"


def _task_info(record, spec: ClusterSpec) -> TaskInfo | None:
    d = DeviceSpec.from_string(record.task)
    if d.job not in spec.jobs or (d.task or 0) not in spec.task_indices(d.job):
        return None
    index = d.task or 0
    return TaskInfo(
        d.job,
        index,
        record.address or spec.task_address(d.job, index),
        record.pid or None,
        "running" if record.state == "CONNECTED" else "unknown",
    )


# -- naming the cluster -------------------------------------------------------------
def spec_from_value(text: str, namespace: dict) -> tuple[ClusterSpec, str]:
    """(spec, where it came from) of ``%cluster connect SPEC``: a spec string,
    a dict literal, or the name of a dict, ``ClusterSpec`` or spec string in
    ``namespace``."""
    text = text.strip()
    if not text:
        raise ConnectError(f"%cluster connect needs a cluster: {SPEC_FORMS}")
    if text.isidentifier() and text in namespace:
        value, source = namespace[text], f"'{text}'"
    elif text[0] in "{'\"":
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError) as e:
            raise ConnectError(
                f"'{text}' is not a dict literal ({type(e).__name__}: {e})"
            ) from None
        source = "a dict"
    elif "|" in text:
        value, source = text, "a spec string"
    else:
        raise ConnectError(f"'{text}' is not a cluster: give {SPEC_FORMS}")
    return _as_spec(value, text), source


def _as_spec(value, text: str) -> ClusterSpec:
    if isinstance(value, ClusterSpec):
        spec = value
    elif isinstance(value, str):
        try:
            spec = ClusterSpec.from_string(value)
        except ValueError as e:
            raise ConnectError(f"'{text}': {first_line(e)}") from None
    elif isinstance(value, dict):
        cluster = value.get("cluster", value)  # TF_CONFIG's shape is fine too
        try:
            spec = ClusterSpec(cluster)
        except (TypeError, ValueError) as e:
            raise ConnectError(f"'{text}': {first_line(e)}") from None
    else:
        raise ConnectError(
            f"'{text}' is a {type(value).__name__}, not a cluster: give {SPEC_FORMS}"
        )
    if not spec.jobs:
        raise ConnectError(f"'{text}' has no tasks")
    return spec


def spec_from_tf_config(text: str | None = None) -> tuple[ClusterSpec, str]:
    """The ``cluster`` of ``TF_CONFIG`` (``text``, else the environment's)."""
    if text is None:
        try:
            config = env.tf_config()
        except ValueError as e:
            raise ConnectError(first_line(e)) from None
        where = "TF_CONFIG"
        if not config:
            raise ConnectError("TF_CONFIG is not set in the notebook's environment")
    else:
        try:
            config = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConnectError(f"--tf_config is not valid JSON ({e})") from None
        where = "--tf_config"
    if not isinstance(config, dict) or not config.get("cluster"):
        raise ConnectError(f'{where} has no "cluster": {{"worker": [...], ...}}')
    return _as_spec(config["cluster"], where), where


def _scontrol_fields(job_id: str, run=subprocess.run) -> dict[str, str]:
    out = show_job(job_id, run=run, timeout=CONNECT_TIMEOUT_S)
    if out.returncode == 127:
        raise ConnectError(
            "--slurm needs SLURM's scontrol, which is not on this machine's PATH")
    if out.returncode == 124:
        raise ConnectError(
            f"scontrol show job {job_id} did not answer within {CONNECT_TIMEOUT_S:g} s")
    if out.returncode != 0:
        raise ConnectError(
            f"SLURM job {job_id}: {first_line(out.stderr or out.stdout)}"
        )
    return scontrol_fields(out.stdout)


def spec_from_slurm_job(
    job_id: str, jobs: dict[str, int] | None = None, run=subprocess.run
) -> tuple[ClusterSpec, str]:
    """The cluster of running SLURM job ``job_id``, from ``scontrol show job``:
    the spec SlurmCluster put in the job's comment, else the layout of
    ``SlurmClusterResolver`` (nodes sorted, ports 8888, 8889, ... per node,
    jobs sorted by name) for ``jobs`` ({"ps": 1, "worker": 2}) tasks."""
    fields = _scontrol_fields(job_id, run)
    state = fields.get("JobState", "UNKNOWN")
    where = f"SLURM job {job_id}"
    if state != "RUNNING":
        raise ConnectError(f"{where} is {state}, not RUNNING")
    comment = fields.get("Comment", "")
    if "|" in comment:
        return _as_spec(comment, f"the comment of {where}"), where
    if not jobs:
        raise ConnectError(
            f"{where} does not say its cluster (no spec in its comment): give "
            "its tasks, e.g. %cluster connect --slurm JOBID --ps 1 --workers 2"
        )
    hosts = sorted(expand_hostlist(fields.get("NodeList", "")))
    num_tasks = int(fields.get("NumTasks", "0") or 0)
    if not hosts or num_tasks % len(hosts):
        raise ConnectError(
            f"{where} runs {num_tasks} tasks on nodes {hosts}: not the same number "
            "on each node; give its spec string instead"
        )
    if sum(jobs.values()) != num_tasks:
        raise ConnectError(
            f"{where} runs {num_tasks} tasks, not {sum(jobs.values())} "
            f"({', '.join(f'{n} {j}' for j, n in jobs.items())})"
        )
    per_node = num_tasks // len(hosts)
    return ClusterSpec(slurm_layout(jobs, dict.fromkeys(hosts, per_node))), where


# -- attaching ----------------------------------------------------------------------
_REFUSALS = (  # an answer that is not the task we asked for, or not to us
    errors.InvalidArgumentError,
    errors.UnauthenticatedError,
    errors.PermissionDeniedError,
)


def _probe(spec: ClusterSpec, timeout: float) -> tuple[list[str], list[str]]:
    """(tasks that did not answer ``GetStatus`` within ``timeout``, lines about
    tasks that refused: another task serves there, a missing or wrong token);
    every task asked at once."""
    tasks = [(j, i) for j in spec.jobs for i in spec.task_indices(j)]
    result: dict[str, str | None] = {f"{j}:{i}": "silent" for j, i in tasks}
    refused: list[str] = []
    lock = threading.Lock()

    def ask(job, index):
        name = f"/job:{job}/replica:0/task:{index}"
        client = transports.connect_worker(name, spec.task_address(job, index))
        try:
            client.get_status(timeout_s=timeout)
            why = None
        except _REFUSALS as e:
            why = "refused"
            with lock:
                refused.append(
                    f"{job}:{index} ({spec.task_address(job, index)}) answers but "
                    f"refuses: {first_line(e)}"
                )
        except Exception:  # noqa: BLE001 - any failure is "does not answer"
            why = "silent"
        finally:
            client.close()
        with lock:
            result[f"{job}:{index}"] = why

    threads = [
        threading.Thread(target=ask, args=t, daemon=True, name="nbdist-connect")
        for t in tasks
    ]
    for t in threads:
        t.start()
    end = time.monotonic() + timeout + 1.0
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    with lock:
        return [t for t, why in result.items() if why == "silent"], list(refused)


def connect(
    spec: ClusterSpec, source: str, timeout: float = CONNECT_TIMEOUT_S
) -> tuple[AttachedCluster, list[str]]:
    """Attaches to the cluster ``spec`` once its coordination leader answers;
    returns it and the tasks that did not answer within ``timeout``.

    Raises ``ConnectError`` (one line naming the tasks and addresses tried)
    when nothing answers, or the leader does not."""
    cluster = AttachedCluster(spec, source)
    silent, refused = _probe(spec, timeout)

    def named(tasks):
        return ", ".join(
            f"{t} ({spec.task_address(t.split(':')[0], int(t.split(':')[1]))})"
            for t in tasks
        )

    if refused:
        raise ConnectError(f"{source}: {refused[0]}")
    if len(silent) == len(spec.task_names()):
        raise ConnectError(
            f"nothing answers at {named(silent)} from {source} within "
            f"{timeout:g} s: is the cluster running (and NBDIST_TOKEN set if it "
            "needs one)?"
        )
    leader = "{}:{}".format(*cluster.leader)
    if leader in silent:
        raise ConnectError(
            f"{leader} ({cluster.coordination_target}), which hosts the cluster's "
            f"coordination service, does not answer within {timeout:g} s "
            f"(silent too: {named([t for t in silent if t != leader]) or 'none'})"
        )
    return cluster, silent


def first_line(e) -> str:
    """The first line of an error's message (its class name when empty)."""
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]
