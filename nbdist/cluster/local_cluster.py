"""``LocalCluster``: a cluster of real processes on this machine.

Each task is ``python -m nbdist.cluster._task`` (spawned, never forked),
listening on 127.0.0.1. The constructor returns when every task answers a
``GetStatus`` RPC; children watch their parent and exit when it dies, so a
killed kernel leaves no orphan.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref

from nbdist import errors
from nbdist.cluster.base import ClusterBase, TaskInfo
from nbdist.runtime import transports
from nbdist.runtime.cluster_spec import ClusterSpec
from nbdist.runtime.faults import owner_credential

_live_clusters: weakref.WeakSet = weakref.WeakSet()

# How often a starting task is polled.
_POLL_SECS = 0.01

# Set to 1 in a task's environment unless the caller set them.
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class LocalCluster(ClusterBase):
    """A multi-process cluster on 127.0.0.1.

    >>> import nbdist as nd
    >>> with nd.LocalCluster(ps=1, workers=2, progress=False) as cluster:
    ...     with nd.Session(cluster.target("worker", 0)) as sess:
    ...         sess.run(nd.constant(1.0))
    np.float32(1.0)

    ``gpus_per_task=N`` gives every task N virtual GPU devices
    (``/device:GPU:0..N-1``, run on the CPU) for tower programs written for
    ``/gpu:i`` (as does ``config.device_count["GPU"]``).
    """

    def __init__(self, ps: int = 1, workers: int = 2, chief: int = 0,
                 evaluator: int = 0, config=None, start_timeout: float = 30.0,
                 progress: bool = True, log_dir: str | None = None,
                 coordination_config=None, gpus_per_task: int = 0):
        counts = {"chief": chief, "worker": workers, "ps": ps, "evaluator": evaluator}
        for job, n in counts.items():
            if not isinstance(n, int) or n < 0:
                raise ValueError(f"LocalCluster: {job} must be an int >= 0, got {n!r}")
        if sum(counts.values()) == 0:
            raise ValueError("LocalCluster needs at least one task")
        if not isinstance(gpus_per_task, int) or gpus_per_task < 0:
            raise ValueError(f"LocalCluster: gpus_per_task must be an int >= 0, "
                             f"got {gpus_per_task!r}")
        self._gpus_per_task = gpus_per_task
        self._config = config
        # Heartbeat interval/timeout and event bound of the cluster's
        # coordination service (a dict or CoordinationConfig; see Server).
        from nbdist.runtime.coordination import resolve_config

        self._coordination_config = resolve_config(coordination_config)
        self._start_timeout = start_timeout
        self._progress = progress
        self._log_dir = log_dir or tempfile.mkdtemp(prefix="nbdist-cluster-")
        self._lock = threading.RLock()
        jobs = [(j, n) for j, n in counts.items() if n]
        ports = _free_ports(sum(n for _, n in jobs))
        spec, it = {}, iter(ports)
        for job, n in jobs:
            spec[job] = [f"localhost:{next(it)}" for _ in range(n)]
        self._spec = ClusterSpec(spec)
        self._tasks: dict[tuple[str, int], TaskInfo] = {}
        self._procs: dict[tuple[str, int], subprocess.Popen] = {}
        self._closed = False
        _live_clusters.add(self)
        started = time.monotonic()
        try:
            for job, n in jobs:
                for i in range(n):
                    self._spawn(job, i)
            self._wait_ready(list(self._tasks))
        except BaseException:
            self.shutdown()
            raise
        self.startup_seconds = time.monotonic() - started

    # -- public API (cluster_spec, target, targets, leader, coordination_target,
    # closed: ClusterBase) --------------------------------------------------------------
    restarts_tasks = True

    @property
    def coordination_config(self):
        return self._coordination_config

    @property
    def tasks(self) -> list[TaskInfo]:
        with self._lock:
            self._refresh_states()
            return [TaskInfo(t.job, t.index, t.address, t.pid, t.state,
                             ended_at=t.ended_at, started_at=t.started_at)
                    for t in self._tasks.values()]

    @property
    def log_dir(self) -> str:
        return self._log_dir

    def log(self, job: str, index: int) -> str:
        """What a task printed (stdout and stderr) so far."""
        path = self._log_path(job, index)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def kill(self, job: str, index: int):
        """SIGKILLs a task (as a crash would)."""
        with self._lock:
            t = self._task(job, index)
            p = self._procs.get((job, index))
            if p is not None and p.poll() is None:
                p.kill()
                t.ended_at = time.time()
                p.wait(timeout=10)
            t.state = "killed"

    def restart(self, job: str, index: int):
        """Starts a task again at the same address (killing it first if running);
        returns when it answers."""
        with self._lock:
            t = self._task(job, index)
            p = self._procs.get((job, index))
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=10)
            self._spawn(job, index)
            del t
        self._wait_ready([(job, index)])

    def shutdown(self, timeout: float = 5.0):
        """Stops every task (SIGTERM, then SIGKILL after ``timeout``). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            procs = list(self._procs.items())
        for _, p in procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        end = time.monotonic() + timeout
        for key, p in procs:
            try:
                p.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        # All at once, so a view polling meanwhile never sees some "stopped" and
        # the others still "running" (or "exited": _refresh_states leaves a
        # closing cluster alone).
        for key, _ in procs:
            self._tasks[key].state = "stopped"

    close = shutdown

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    def __del__(self):
        try:
            self.shutdown(timeout=1.0)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __repr__(self) -> str:
        jobs = ", ".join(f"{j}={self._spec.num_tasks(j)}" for j in self._spec.jobs)
        return f"<LocalCluster {jobs}>"

    # -- processes ----------------------------------------------------------------------
    def _task(self, job: str, index: int) -> TaskInfo:
        t = self._tasks.get((job, index))
        if t is None:
            have = ", ".join(f"{j}:{i}" for j, i in self._tasks)
            raise ValueError(f"LocalCluster has no task {job}:{index} (tasks: {have})")
        return t

    def _address(self, job: str, index: int) -> str:
        return self._task(job, index).address

    def _log_path(self, job, index):
        return os.path.join(self._log_dir, f"{job}-{index}.log")

    def _spawn(self, job: str, index: int):
        address = self._spec.task_address(job, index)
        cmd = [sys.executable, "-m", "nbdist.cluster._task",
               f"--parent_pid={os.getpid()}",
               f"--cluster_spec={self._cluster_string()}", f"--job_name={job}",
               f"--task_index={index}"]
        env = dict(os.environ)
        cfg = self._config
        gpus = self._gpus_per_task
        if cfg is not None:
            n = int(cfg.device_count.get("CPU", 1))
            cmd.append(f"--num_cpus={max(1, n)}")
            gpus = gpus or int(cfg.device_count.get("GPU", 0))
        if gpus:
            cmd.append(f"--num_gpus={gpus}")
        if cfg is not None:
            if cfg.auth_token:
                env["NBDIST_TOKEN"] = cfg.auth_token
        cc = self._coordination_config
        env["NBDIST_HEARTBEAT_INTERVAL_MS"] = str(cc.heartbeat_interval_ms)
        env["NBDIST_HEARTBEAT_TIMEOUT_MS"] = str(cc.heartbeat_timeout_ms)
        env["NBDIST_COORDINATION_MAX_EVENTS"] = str(cc.max_events)
        env["NBDIST_FAULT_OWNER"] = owner_credential()  # only we may inject faults
        env.setdefault("PYTHONUNBUFFERED", "1")
        # One BLAS/OpenMP thread per task, as dask's workers: the tasks are the
        # parallelism, and several processes each spinning a thread per core
        # slow every matmul down several times over.
        for var in _THREAD_VARS:
            env.setdefault(var, "1")
        _use_bytecode_cache(env)
        log = open(self._log_path(job, index), "ab")
        try:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)
        finally:
            log.close()
        self._procs[(job, index)] = p
        self._tasks[(job, index)] = TaskInfo(job, index, address, p.pid, "starting",
                                             started_at=time.time())

    def _cluster_string(self) -> str:
        return ",".join(f"{job}|" + ";".join(self._spec.job_tasks(job))
                        for job in self._spec.jobs)

    def _refresh_states(self):
        if self._closed:  # shutdown() marks every task "stopped" when it is done
            return
        for key, p in self._procs.items():
            t = self._tasks[key]
            if t.state in ("running", "starting") and p.poll() is not None:
                t.state = "exited"

    def _wait_ready(self, keys):
        """Returns when every task of ``keys`` answers ``GetStatus``.

        A task's port is polled with plain TCP connects first (cheap, and
        free of gRPC's reconnect backoff, which would add up to its backoff
        interval to every start); once it accepts connections, one
        ``GetStatus`` confirms that the right task is serving there.
        """
        token = self._config.auth_token if self._config is not None else None
        deadline = time.monotonic() + self._start_timeout
        pending = list(keys)
        listening: set = set()
        clients = {}
        total = len(pending)
        # A bar on a terminal or in a notebook; nothing when stderr is a pipe or
        # file (tqdm's disable=None), so scripts and CI logs stay clean.
        bar = _progress_bar(total) if self._progress else None
        try:
            while pending:
                for key in list(pending):
                    t, p = self._tasks[key], self._procs[key]
                    if p.poll() is not None:
                        raise errors.UnavailableError(
                            None, None, f"LocalCluster: task {t.name} exited with code "
                            f"{p.returncode} while starting:\n"
                            f"{self.log(*key)[-2000:]}")
                    if key not in listening:
                        if not _accepts_connections(t.address):
                            continue
                        listening.add(key)
                    c = clients.get(key)
                    if c is None:
                        c = clients[key] = transports.connect_worker(
                            t.name, t.address, token=token or None)
                    try:
                        c.get_status(timeout_s=1.0)
                    except errors.InvalidArgumentError:
                        raise  # another server is at this address
                    except errors.OpError:
                        continue
                    t.state = "running"
                    pending.remove(key)
                    if bar is not None:
                        bar.update(1)
                if pending:
                    if time.monotonic() > deadline:
                        names = ", ".join(self._tasks[k].name for k in pending)
                        raise errors.DeadlineExceededError(
                            None, None, f"LocalCluster: task(s) {names} did not "
                            f"answer within {self._start_timeout:.0f} s")
                    # A child says nothing when it starts listening: poll its port.
                    time.sleep(_POLL_SECS)
        finally:
            if bar is not None:
                bar.close()
            for c in clients.values():
                c.close()


def _progress_bar(total: int):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="LocalCluster", unit="task", leave=False,
                disable=None)


def _bytecode_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache")
    if not os.access(base, os.W_OK) and not os.access(os.path.dirname(base),
                                                       os.W_OK):
        base = tempfile.gettempdir()
    tag = sys.implementation.cache_tag or "python"
    return os.path.join(base, "nbdist", f"pycache-{tag}")


def _use_bytecode_cache(env: dict):
    """Lets a task keep the bytecode it compiles, in a cache outside the sources,
    when the environment forbids writing it (``PYTHONDONTWRITEBYTECODE``) and
    nbdist has none: otherwise every task of every start compiles nbdist's
    sources again, about 0.2 s of CPU each."""
    if not env.get("PYTHONDONTWRITEBYTECODE") or env.get("PYTHONPYCACHEPREFIX"):
        return
    import importlib.util

    init = os.path.join(os.path.dirname(os.path.dirname(__file__)), "__init__.py")
    if os.path.exists(importlib.util.cache_from_source(init)):
        return
    del env["PYTHONDONTWRITEBYTECODE"]
    env["PYTHONPYCACHEPREFIX"] = _bytecode_cache_dir()


def _accepts_connections(address: str) -> bool:
    """Whether something listens at ``address`` (a task of this machine)."""
    port = int(address.rsplit(":", 1)[1])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@atexit.register
def _shutdown_all():
    for c in list(_live_clusters):
        try:
            c.shutdown(timeout=2.0)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
