"""``SlurmCluster``: a cluster of nbdist servers as one SLURM batch job.

As dask-jobqueue's ``SLURMCluster``: the constructor writes a batch script
(``#SBATCH`` lines from its arguments), submits it with ``sbatch`` and returns
when every task answers; with ``LocalCluster``'s interface (``cluster_spec``,
``target``, ``tasks``, ``shutdown``, a context manager). The job runs one
``srun`` step of ``ps + workers`` tasks; each task picks a free port, writes
its address to the job's directory (``log_dir``, which must be on a file
system every node shares) and, once every task has written, runs
``python -m nbdist.server`` for its task with the whole cluster spec. The
spec is also put in the job's comment, so ``%cluster connect --slurm JOBID``
finds it. The job is cancelled on ``shutdown()`` and when the interpreter
exits.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import weakref
from dataclasses import dataclass
from time import monotonic, sleep

from nbdist import errors
from nbdist.cluster.base import ClusterBase, TaskInfo
from nbdist.cluster.local_cluster import _progress_bar
from nbdist.runtime import transports
from nbdist.runtime.cluster_spec import ClusterSpec
from nbdist.runtime.faults import owner_credential

__all__ = ["SlurmCluster", "SlurmTaskInfo", "job_task_states", "scontrol_fields",
           "show_job"]

_CMD_TIMEOUT_S = 30.0  # one sbatch/scontrol/scancel call, at most
_POLL_S = 0.1  # the job's directory and the tasks' ports
_STATE_EVERY_S = 1.0  # scontrol, while starting and for `tasks`
_LOG_TAIL = 2000  # characters of a failed job's logs in its error
_ALIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "RESIZING",
          "REQUEUED", "SUSPENDED", "SIGNALING", "STAGE_OUT"}
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_TASK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "_slurm_task.py")


@dataclass
class SlurmTaskInfo(TaskInfo):
    """One task of a ``SlurmCluster``: as ``LocalCluster``'s ``TaskInfo``
    (``job``, ``index``, ``address``, ``pid`` on its node, ``state``) plus
    ``host`` and ``port`` (of ``address``), ``log`` (its output file),
    ``node`` (its SLURM node's name) and ``reason``: once the job has ended,
    why, as SLURM says it ("node n3 DOWN+NOT_RESPONDING: Not responding" for
    a task whose node failed, its ``state`` then "failed")."""

    host: str
    port: int
    log: str
    node: str = ""
    reason: str = ""


class SlurmCluster(ClusterBase):
    """A cluster of ``ps`` and ``workers`` tasks run by SLURM as one batch job.

    ``partition``, ``time`` ("10:00"), ``cpus_per_task``, ``mem`` ("2G")
    become ``#SBATCH`` lines, as does every line of ``job_extra``
    (``"--account=x"`` or ``"#SBATCH --account=x"``). Tasks listen on
    ``bind`` (default 127.0.0.1, one node only; give ``"0.0.0.0"`` and a
    ``config`` with ``auth_token`` for tasks on several nodes: each task is
    then reached at its node's ``NodeAddr``, and ``log_dir`` must be a
    directory every node shares). When the job ends because a node failed,
    ``tasks`` says so: that node's tasks "failed", with SLURM's reason. The
    constructor returns when every task answers (a progress bar meanwhile),
    or raises with the job's state and the tail of its logs when the job ends
    first, or when ``start_timeout`` seconds pass (the job is cancelled then).

    >>> import nbdist as nd
    >>> with nd.SlurmCluster(ps=1, workers=2, partition="debug",
    ...                      time="10:00") as cluster:  # doctest: +SKIP
    ...     print(cluster.job_id, [t.host for t in cluster.tasks])
    ...     with nd.Session(cluster.target("worker", 0)) as sess:
    ...         sess.run(nd.constant(1.0))
    """

    def __init__(self, ps: int = 1, workers: int = 2, partition: str | None = None,
                 time: str | None = None, cpus_per_task: int | None = None,
                 mem: str | None = None, job_extra=(), progress: bool = True,
                 start_timeout: float = 300.0, log_dir: str | None = None,
                 job_name: str = "nbdist", bind: str | None = None, config=None):
        counts = {"ps": ps, "worker": workers}
        for job, n in counts.items():
            if not isinstance(n, int) or n < 0:
                raise ValueError(f"SlurmCluster: {job} must be an int >= 0, got {n!r}")
        if sum(counts.values()) == 0:
            raise ValueError("SlurmCluster needs at least one task")
        if shutil.which("sbatch") is None:
            raise FileNotFoundError(
                "SlurmCluster needs SLURM's sbatch, which is not on this PATH")
        self._jobs = sorted((j, n) for j, n in counts.items() if n)
        self._config = config
        self._bind = bind or ""
        self._start_timeout = start_timeout
        self._dir = os.path.abspath(log_dir or tempfile.mkdtemp(prefix="nbdist-slurm-"))
        os.makedirs(os.path.join(self._dir, "rendezvous"), exist_ok=True)
        self._lock = threading.RLock()
        self._closed = False
        self._spec: ClusterSpec | None = None
        self._tasks: dict[tuple[str, int], SlurmTaskInfo] = {}
        self._state, self._state_at = "PENDING", None
        self._ended_at = None  # _state_at when the tasks' end was last read
        self.job_id: str | None = None
        started = monotonic()
        self.script = self._script(job_name, partition, time, cpus_per_task, mem,
                                   job_extra)
        self.job_id = self._submit()
        # scancel when this object goes, or at the latest when Python exits.
        self._finalizer = weakref.finalize(self, _scancel, self.job_id)
        try:
            self._wait_ready(progress)
        except BaseException:
            self.shutdown()
            raise
        # Every task answers, so the job runs: the state read while starting
        # (PENDING or CONFIGURING, cached for a second) is stale.
        self._state_at = None
        self.startup_seconds = monotonic() - started

    # -- public API (cluster_spec, target, targets, leader, coordination_target,
    # closed: ClusterBase)
    @property
    def tasks(self) -> list[SlurmTaskInfo]:
        """The tasks, their state following the job's: "running" while it
        runs, "stopped" after ``shutdown``; once it has ended, "failed" for
        the tasks of a node SLURM reports failed, else "exited", each with
        SLURM's ``reason``."""
        with self._lock:
            state = "stopped" if self._closed else self.state()
            if state in ("stopped", "RUNNING"):
                for t in self._tasks.values():
                    t.state, t.reason = state.lower(), ""
            elif self._spec is not None and self._ended_at != self._state_at:
                self._ended_at = self._state_at
                ended = job_task_states(self.job_id, self._spec, {
                    f"{t.job}:{t.index}": t.node for t in self._tasks.values()})
                for t in self._tasks.values():
                    t.state, t.reason = ended.get(f"{t.job}:{t.index}",
                                                  ("exited", f"job {state}"))
            return [dataclasses.replace(t) for t in self._tasks.values()]

    @property
    def log_dir(self) -> str:
        """The job's directory: its script, ``job.log`` and ``task-<n>.log``."""
        return self._dir

    def log(self, job: str | None = None, index: int = 0) -> str:
        """What a task printed so far; with no ``job``, the batch script's output."""
        path = (os.path.join(self._dir, "job.log") if job is None
                else self._task(job, index).log)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def state(self) -> str:
        """The job's SLURM state ("PENDING", "RUNNING", "CANCELLED", ...)."""
        with self._lock:
            now = monotonic()
            if self._state_at is None or now - self._state_at >= _STATE_EVERY_S:
                self._state = self._job_fields().get("JobState", "UNKNOWN")
                self._state_at = now
            return self._state

    def restart(self, job: str, index: int):
        """Not possible: SLURM starts and ends the tasks of a job step together."""
        self._task(job, index)
        raise NotImplementedError(
            f"SlurmCluster cannot restart {job}:{index}: its tasks are one step of "
            f"SLURM job {self.job_id}, which SLURM starts and ends as a whole; "
            "shut the cluster down and start a new one")

    def shutdown(self, timeout: float = 30.0):
        """Cancels the job (``scancel``) and waits, at most ``timeout`` s, until
        ``squeue`` no longer lists it. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self.job_id is None:
            return
        self._finalizer()
        self._state_at = None
        deadline = monotonic() + timeout
        while monotonic() < deadline and self._queued():
            sleep(_POLL_S)  # SLURM tells nothing when a job leaves: poll squeue

    close = shutdown

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    def __repr__(self) -> str:
        jobs = ", ".join(f"{j}={n}" for j, n in self._jobs)
        return f"<SlurmCluster job {self.job_id} {jobs}>"

    # -- the job ----------------------------------------------------------------------
    def _task(self, job: str, index: int) -> SlurmTaskInfo:
        t = self._tasks.get((job, index))
        if t is None:
            have = ", ".join(f"{j}:{i}" for j, i in self._tasks)
            raise ValueError(f"SlurmCluster has no task {job}:{index} (tasks: {have})")
        return t

    def _address(self, job: str, index: int) -> str:
        return self._task(job, index).address

    def _script(self, job_name, partition, time, cpus_per_task, mem, job_extra):
        n = sum(k for _, k in self._jobs)
        lines = ["#!/bin/sh", f"#SBATCH --job-name={job_name}", f"#SBATCH --ntasks={n}",
                 f"#SBATCH --output={os.path.join(self._dir, 'job.log')}",
                 # Not run again after a node failure: the tasks' addresses
                 # in log_dir would be stale, and the notebook waits no more.
                 "#SBATCH --no-requeue"]
        for flag, value in (("partition", partition), ("time", time),
                            ("cpus-per-task", cpus_per_task), ("mem", mem)):
            if value is not None:
                lines.append(f"#SBATCH --{flag}={value}")
        if isinstance(job_extra, str):
            job_extra = [job_extra]
        for extra in job_extra:
            extra = extra.strip()
            lines.append(extra if extra.startswith("#SBATCH") else f"#SBATCH {extra}")
        counts = ",".join(f"{j}={k}" for j, k in self._jobs)
        task = [sys.executable, _TASK_SCRIPT, os.path.join(self._dir, "rendezvous"),
                counts, self._bind, f"{self._start_timeout:g}"]
        lines.append("srun --kill-on-bad-exit=1 --output="
                     + shlex.quote(os.path.join(self._dir, "task-%t.log")) + " "
                     + " ".join(shlex.quote(a) for a in task))
        path = os.path.join(self._dir, "job.sh")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def _submit(self) -> str:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # One BLAS thread per task, as LocalCluster's: the tasks are the parallelism.
        for var in _THREAD_VARS:
            env.setdefault(var, "1")
        if self._config is not None and self._config.auth_token:
            env["NBDIST_TOKEN"] = self._config.auth_token
        env["NBDIST_FAULT_OWNER"] = owner_credential()  # only we may inject faults
        r = _slurm(["sbatch", "--parsable", self.script], env=env)
        if r.returncode:
            raise errors.UnavailableError(
                None, None, f"SlurmCluster: sbatch refused the job ({r.returncode}): "
                f"{(r.stderr or r.stdout).strip()}\nscript {self.script}")
        return r.stdout.strip().split(";")[0]

    def _job_fields(self) -> dict[str, str]:
        return _job_fields(self.job_id)

    def _queued(self) -> bool:
        r = _slurm(["squeue", "-h", "-j", self.job_id, "-o", "%i"])
        return r.returncode == 0 and bool(r.stdout.strip())

    def _failure(self, fields: dict[str, str]) -> str:
        state = fields.get("JobState", "UNKNOWN")
        why = ", ".join(f"{k}={fields[k]}" for k in ("Reason", "ExitCode")
                        if fields.get(k) not in (None, "", "None"))
        logs = [("job.log", os.path.join(self._dir, "job.log"))]
        logs += [(f"task-{r}.log", os.path.join(self._dir, f"task-{r}.log"))
                 for r in range(sum(n for _, n in self._jobs))]
        tails = []
        for name, path in logs:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read().strip()
            except FileNotFoundError:
                continue
            if text:
                tails.append(f"-- {name}:\n{text[-_LOG_TAIL:]}")
        return (f"SlurmCluster: SLURM job {self.job_id} is {state}"
                + (f" ({why})" if why else "") + " before every task answered; "
                + ("the tail of its logs:\n" + "\n".join(tails) if tails
                   else f"it wrote no log in {self._dir}"))

    def _published(self) -> bool:
        """Reads the tasks' addresses once all are in the job's directory."""
        rdv = os.path.join(self._dir, "rendezvous")
        lines = []
        for rank in range(sum(n for _, n in self._jobs)):
            try:
                with open(os.path.join(rdv, str(rank))) as f:
                    lines.append(f.read().split())
            except FileNotFoundError:
                return False
        spec, rank = {}, 0
        for job, n in self._jobs:
            spec[job] = []
            for i in range(n):
                address, pid, *node = lines[rank]
                host, port = address.rsplit(":", 1)
                spec[job].append(address)
                self._tasks[(job, i)] = SlurmTaskInfo(
                    job, i, address, int(pid), "starting", host, int(port),
                    os.path.join(self._dir, f"task-{rank}.log"), "".join(node))
                rank += 1
        self._spec = ClusterSpec(spec)
        r = _slurm(["scontrol", "update", f"JobId={self.job_id}",
                    f"Comment={self._spec_string()}"])
        if r.returncode:
            raise errors.UnavailableError(
                None, None, f"SlurmCluster: cannot put the spec in the comment of "
                f"job {self.job_id}: {(r.stderr or r.stdout).strip()}")
        return True

    def _spec_string(self) -> str:
        return ",".join(f"{job}|" + ";".join(self._spec.job_tasks(job))
                        for job in self._spec.jobs)

    def _wait_ready(self, progress: bool):
        token = self._config.auth_token if self._config is not None else None
        deadline = monotonic() + self._start_timeout
        bar = _progress_bar(sum(n for _, n in self._jobs)) if progress else None
        pending, clients = None, {}
        try:
            while pending is None or pending:
                state = self.state()
                if bar is not None:
                    bar.set_description(f"SlurmCluster job {self.job_id} {state}")
                if state not in _ALIVE:
                    raise errors.UnavailableError(
                        None, None, self._failure(self._job_fields()))
                if pending is None and self._published():
                    pending = list(self._tasks)
                for key in [k for k in pending or ()
                            if _answers(self._tasks[k], clients, token)]:
                    self._tasks[key].state = "running"
                    pending.remove(key)
                    if bar is not None:
                        bar.update(1)
                if pending is None or pending:
                    if monotonic() > deadline:
                        raise self._timeout(pending)
                    sleep(_POLL_S)  # tasks say nothing when they listen: poll
        finally:
            if bar is not None:
                bar.close()
            for c in clients.values():
                c.close()

    def _timeout(self, pending) -> errors.DeadlineExceededError:
        fields = self._job_fields()
        waiting = ("no task published its address" if pending is None else
                   "task(s) " + ", ".join(self._tasks[k].name for k in pending)
                   + " did not answer")
        return errors.DeadlineExceededError(
            None, None, f"SlurmCluster: job {self.job_id} "
            f"({fields.get('JobState', 'UNKNOWN')}, Reason={fields.get('Reason', '?')})"
            f": {waiting} within {self._start_timeout:g} s")


def scontrol_fields(text: str) -> dict[str, str]:
    """The ``Key=Value`` fields of an ``scontrol show`` answer."""
    return dict(re.findall(r"(\w+)=(\S*)", text))


def show_job(job_id: str, run=subprocess.run,
             timeout: float | None = None) -> subprocess.CompletedProcess:
    """``scontrol show job -o JOB`` (returncode 127: no scontrol, 124: no
    answer within ``timeout``); ``run`` is ``subprocess.run``'s stand-in."""
    return _slurm(["scontrol", "show", "job", "-o", str(job_id)], run=run,
                  timeout=timeout)


def _job_fields(job_id: str) -> dict[str, str]:
    r = show_job(job_id)
    if r.returncode:
        return {"JobState": "UNKNOWN", "Reason": (r.stderr or r.stdout).strip()}
    return scontrol_fields(r.stdout)


# Node state flags (scontrol's State=DOWN+NOT_RESPONDING) of a node that failed.
_NODE_FAILED = {"DOWN", "FAIL", "FAILING", "NOT_RESPONDING", "POWERED_DOWN",
                "POWERING_DOWN"}


def _node_fields(nodelist: str) -> dict[str, dict[str, str]]:
    """node name -> its ``scontrol show node`` fields (``Reason`` whole: it
    has spaces), for the nodes of a SLURM host list ("n[1-3]")."""
    if not nodelist or nodelist == "(null)":
        return {}
    r = _slurm(["scontrol", "show", "node", nodelist])
    nodes = {}
    for block in re.split(r"\n\s*\n", r.stdout if r.returncode == 0 else ""):
        fields = scontrol_fields(block)
        if "NodeName" in fields:
            reason = re.search(r"^\s*Reason=(.*)$", block, re.MULTILINE)
            fields["Reason"] = reason.group(1).strip() if reason else ""
            nodes[fields["NodeName"]] = fields
    return nodes


def job_task_states(job_id: str, spec: ClusterSpec,
                    nodes: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """How SLURM says the tasks of ended job ``job_id`` ended: "job:index" ->
    ("failed", "node n3 DOWN+NOT_RESPONDING: Not responding") for a task on a
    node SLURM reports failed, else ("exited", "job NODE_FAIL (NodeDown)");
    {} while the job is alive. A task's node is ``nodes[task]``, else the
    job's node whose name, ``NodeAddr`` or ``NodeHostName`` is the task's host.
    """
    fields = _job_fields(job_id)
    state = fields.get("JobState", "UNKNOWN")
    if state in _ALIVE:
        return {}
    why = fields.get("Reason", "")
    ended = f"job {state}" + (f" ({why})" if why not in ("", "None") else "")
    node_fields = _node_fields(fields.get("NodeList", ""))
    by_host = {}
    for name, f in node_fields.items():
        for host in (f.get("NodeHostName"), f.get("NodeAddr"), name):
            if host:
                by_host[host] = name
    out = {}
    for job in spec.jobs:
        for i in spec.task_indices(job):
            task = f"{job}:{i}"
            host = spec.task_address(job, i).rsplit(":", 1)[0]
            node = (nodes or {}).get(task) or by_host.get(host, "")
            f = node_fields.get(node, {})
            flags = set(f.get("State", "").rstrip("*").split("+"))
            if flags & _NODE_FAILED:
                reason = f"node {node} {f['State']}"
                out[task] = ("failed", reason + (f": {f['Reason']}" if f["Reason"]
                                                 else ""))
            else:
                out[task] = ("exited", ended)
    return out


def _answers(task: SlurmTaskInfo, clients: dict, token: str | None) -> bool:
    """Whether ``task`` answers ``GetStatus``; its port is tried with a plain
    connect first (cheap, and free of gRPC's reconnect backoff)."""
    if task.name not in clients:
        if not _accepts_connections(task.host, task.port):
            return False
        clients[task.name] = transports.connect_worker(task.name, task.address,
                                                       token=token or None)
    try:
        clients[task.name].get_status(timeout_s=1.0)
    except errors.InvalidArgumentError:
        raise  # another server is at this address
    except errors.OpError:
        return False
    return True


def _accepts_connections(host: str, port: int) -> bool:
    """Whether something listens at ``host:port`` (the task's node: not
    necessarily this machine)."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _slurm(args: list[str], env=None, run=subprocess.run,
           timeout: float | None = None) -> subprocess.CompletedProcess:
    timeout = _CMD_TIMEOUT_S if timeout is None else timeout
    try:
        return run(args, capture_output=True, text=True, env=env, timeout=timeout,
                   check=False)
    except FileNotFoundError:
        return subprocess.CompletedProcess(args, 127, "", f"{args[0]}: not found")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(
            args, 124, "", f"{args[0]} did not answer within {timeout:g} s")


def _scancel(job_id: str):
    _slurm(["scancel", job_id])
