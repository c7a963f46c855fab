"""Attaching the notebook to a cluster it did not start (``%cluster connect``).

A cluster is named by a spec string (``ps|h:1,worker|h:2;h:3``, the
``--cluster_spec`` syntax), a dict (or a ``TF_CONFIG``-shaped dict with a
``cluster`` key), ``TF_CONFIG`` or a running SLURM job. ``connect`` checks
that the tasks answer (every task at once, within one bounded timeout) and
returns an ``AttachedCluster``: the spec, each task's session target and the
coordination service's target, which the views follow. The notebook does not
own the tasks' processes: it cannot kill or restart them, and disconnecting
leaves them running.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import threading
import time

from nbdist import errors
from nbdist.cluster import env
from nbdist.cluster.local_cluster import TaskInfo
from nbdist.cluster.resolvers import expand_hostlist
from nbdist.graph.device import DeviceSpec
from nbdist.runtime import transports
from nbdist.runtime.cluster_spec import ClusterSpec
from nbdist.runtime.coordination import leader_task

__all__ = [
    "CONNECT_TIMEOUT_S",
    "NOT_OWNED",
    "AttachedCluster",
    "ConnectError",
    "connect",
    "spec_from_slurm_job",
    "spec_from_tf_config",
    "spec_from_value",
]

CONNECT_TIMEOUT_S = 10.0
NOT_OWNED = (
    "unavailable: this notebook attached to the cluster (%cluster connect) "
    "and does not own its processes"
)
SLURM_PORT_BASE = 8888  # SlurmClusterResolver's default
_TASKS_EVERY_S = 1.0  # ClusterView polls `tasks` every 0.25 s: one RPC a second
_SPEC_FORMS = (
    "a spec string (ps|host:port,worker|host:port;host:port), a dict literal or "
    "the name of one, --tf_config or --slurm JOBID"
)


class ConnectError(ValueError):
    """The cluster cannot be attached; its message is one clear line."""


class AttachedCluster:
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
        self._closed = False  # read by events.cluster_gone: the views stop
        self._lock = threading.Lock()
        self._client = None
        self._tasks: list[TaskInfo] = []
        self._tasks_at: float | None = None

    @property
    def cluster_spec(self) -> ClusterSpec:
        return self._spec

    def target(self, job: str = "worker", index: int = 0) -> str:
        """The session target of a task, e.g. ``grpc://host:2222``."""
        return "grpc://" + self._spec.task_address(job, index)

    @property
    def targets(self) -> dict[str, list[str]]:
        """job -> the targets of its tasks, in index order."""
        return {
            job: [self.target(job, i) for i in self._spec.task_indices(job)]
            for job in self._spec.jobs
        }

    @property
    def leader(self) -> tuple[str, int]:
        """(job, index) of the task hosting the coordination service."""
        name = leader_task(self._spec)
        job = name.split("/job:")[1].split("/")[0]
        return job, int(name.rsplit("task:", 1)[1])

    @property
    def coordination_target(self) -> str:
        return self.target(*self.leader)

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
        from nbdist.cluster.slurm_cluster import SlurmTaskInfo, job_task_states

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
        raise ConnectError(f"%cluster connect needs a cluster: {_SPEC_FORMS}")
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
        raise ConnectError(f"'{text}' is not a cluster: give {_SPEC_FORMS}")
    return _as_spec(value, text), source


def _as_spec(value, text: str) -> ClusterSpec:
    if isinstance(value, ClusterSpec):
        spec = value
    elif isinstance(value, str):
        try:
            spec = ClusterSpec.from_string(value)
        except ValueError as e:
            raise ConnectError(f"'{text}': {_first_line(e)}") from None
    elif isinstance(value, dict):
        cluster = value.get("cluster", value)  # TF_CONFIG's shape is fine too
        try:
            spec = ClusterSpec(cluster)
        except (TypeError, ValueError) as e:
            raise ConnectError(f"'{text}': {_first_line(e)}") from None
    else:
        raise ConnectError(
            f"'{text}' is a {type(value).__name__}, not a cluster: give {_SPEC_FORMS}"
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
            raise ConnectError(_first_line(e)) from None
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
    try:
        out = run(
            ["scontrol", "show", "job", str(job_id)],
            capture_output=True,
            text=True,
            timeout=CONNECT_TIMEOUT_S,
        )
    except FileNotFoundError:
        raise ConnectError(
            "--slurm needs SLURM's scontrol, which is not on this machine's PATH"
        ) from None
    except subprocess.TimeoutExpired:
        raise ConnectError(
            f"scontrol show job {job_id} did not answer within {CONNECT_TIMEOUT_S:g} s"
        ) from None
    if out.returncode != 0:
        raise ConnectError(
            f"SLURM job {job_id}: {_first_line(out.stderr or out.stdout)}"
        )
    return dict(re.findall(r"(\w+)=(\S*)", out.stdout))


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
    addresses = [f"{h}:{SLURM_PORT_BASE + k}" for h in hosts for k in range(per_node)]
    cluster, start = {}, 0
    for job, n in sorted(jobs.items()):
        cluster[job] = addresses[start : start + n]
        start += n
    return ClusterSpec(cluster), where


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
                    f"refuses: {_first_line(e)}"
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


def _first_line(e) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


# -- the magics' arguments --------------------------------------------------------
_QUOTED_TF_CONFIG = re.compile(r"--tf_config(?:=|\s+)(['\"])(.*?)\1(?=\s|$)")


def take_tf_config(line: str) -> tuple[str, str | None]:
    """(``line`` with a quoted ``--tf_config='{json}'`` made a bare
    ``--tf_config``, the JSON): IPython's argument splitting keeps quotes and
    splits inside them."""
    m = _QUOTED_TF_CONFIG.search(line)
    if m is None:
        return line, None
    return line[: m.start()] + "--tf_config" + line[m.end() :], m.group(2)


def connect_from_args(args, namespace: dict) -> tuple[AttachedCluster, list[str]]:
    """``%cluster connect``'s arguments -> ``connect(...)``'s result."""
    given = [x for x in (args.args, args.tf_config, args.slurm) if x]
    if len(given) != 1:
        raise ConnectError(f"%cluster connect needs one cluster: {_SPEC_FORMS}")
    if (args.ps is not None or args.workers is not None) and not args.slurm:
        raise ConnectError("--ps and --workers are for %cluster connect --slurm JOBID")
    if args.slurm is True:
        raise ConnectError("%cluster connect --slurm needs the job id: --slurm JOBID")
    if args.slurm:
        jobs = {j: n for j, n in (("ps", args.ps), ("worker", args.workers)) if n}
        spec, source = spec_from_slurm_job(args.slurm, jobs)
        timeout = CONNECT_TIMEOUT_S if args.timeout is None else args.timeout
        if timeout <= 0:
            raise ConnectError("--timeout must be a positive number of seconds")
        cluster, silent = connect(spec, source, timeout)
        cluster.slurm_job = str(args.slurm)
        return cluster, silent
    elif args.tf_config:
        text = None if args.tf_config is True else args.tf_config
        spec, source = spec_from_tf_config(text)
    else:
        spec, source = spec_from_value(" ".join(args.args), namespace)
    timeout = CONNECT_TIMEOUT_S if args.timeout is None else args.timeout
    if timeout <= 0:
        raise ConnectError("--timeout must be a positive number of seconds")
    return connect(spec, source, timeout)


class SlurmStartError(RuntimeError):
    """A SLURM job that did not start; its message has the job's state and the
    tail of its log (several lines)."""


def start_slurm(args):
    """``%cluster start --slurm ...`` -> (the ``SlurmCluster``, its session
    target)."""
    if args.slurm is not True:
        raise ConnectError(
            f"%cluster start --slurm takes no job id (got '{args.slurm}'): "
            f"%cluster connect --slurm {args.slurm} attaches to a running job"
        )
    if args.chief or args.evaluator:
        raise ConnectError("--chief and --evaluator are not for --slurm")
    try:
        from nbdist.cluster.slurm_cluster import SlurmCluster
    except ImportError as e:
        raise ConnectError(f"SlurmCluster is not available: {_first_line(e)}") from None
    ps = 1 if args.ps is None else args.ps
    workers = 2 if args.workers is None else args.workers
    try:
        cluster = SlurmCluster(
            ps=ps, workers=workers, partition=args.partition, time=args.time
        )
    except (ValueError, TypeError) as e:  # bad arguments: one line
        raise ConnectError(_first_line(e)) from None
    except Exception as e:  # noqa: BLE001 - the job failed: its state and log
        raise SlurmStartError(str(e) or type(e).__name__) from None
    job = "worker" if workers else cluster.cluster_spec.jobs[0]
    return cluster, cluster.target(job, 0)
