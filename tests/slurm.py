"""A real single-node SLURM for tests (issue 14): ``munged``, ``slurmctld``
and ``slurmd`` (Debian's ``munge`` and ``slurm-wlm``) on 127.0.0.1.

``Slurm()`` makes a temp dir with a munge key of its own, a ``munged`` on a
socket there, and a ``slurm.conf`` naming this host as the one node
(``NodeAddr=127.0.0.1``, 4 CPUs whatever the machine has, partition
``debug``), the daemons' state, spool, pid and log files there and their ports
free 127.0.0.1 ports; it starts the three daemons in the foreground (spawned,
each in a session of its own) and returns when ``sinfo`` shows the node idle.
Clients find the cluster through ``SLURM_CONF`` (``slurm.env``, or set in
``os.environ`` by ``session_slurm()`` for a session-scoped fixture).

    with Slurm() as slurm:
        slurm.run(["sbatch", "--wrap=hostname"], env=slurm.env)

Everything is undone at exit, also when starting fails: the daemons are
stopped by PID (SIGTERM, then SIGKILL) and the temp dir removed.
``unavailable()`` is why this cannot run here (not Linux, not root, the
packages missing), or None; CI installs the packages (``.ci/run``).

``SlurmNodes(hosts)`` is the same on several nodes: one ``slurmd`` per
network-namespace host of ``tests/netns.py``, the node's ``NodeAddr`` its
host's address, ``slurmctld`` and ``munged`` in the root namespace.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "sinfo", "scontrol", "scancel")
START_TIMEOUT_S = 60.0  # the node idle after the daemons start, at most
_CMD_TIMEOUT_S = 20.0  # one client command, at most
_STOP_WAIT_S = 10.0


def _which(name: str) -> str | None:
    # The daemons live in /usr/sbin, which a non-login PATH may lack.
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def unavailable() -> str | None:
    """Why a SLURM cannot be started here, or None."""
    if not sys.platform.startswith("linux"):
        return "SLURM's daemons need Linux"
    if os.geteuid() != 0:
        return "slurmd launches jobs as their user: starting it needs root"
    missing = [n for n in (*DAEMONS, "mungekey", *CLIENTS) if _which(n) is None]
    if missing:
        return (f"SLURM is not installed ({', '.join(missing)} missing; "
                "apt-get install slurm-wlm munge)")
    return None


def _free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Slurm:
    """A running single-node SLURM: ``conf`` (the slurm.conf path), ``env``
    (os.environ with ``SLURM_CONF``), ``node`` (the node's name), ``dir``."""

    def __init__(self, cpus: int = 4):
        self.cpus = cpus
        self.node = socket.gethostname().split(".")[0]
        self._procs: list[tuple[str, subprocess.Popen]] = []
        self._stack = contextlib.ExitStack()
        try:
            self.dir = tempfile.mkdtemp(prefix="nbdist-slurm-")
            self._stack.callback(shutil.rmtree, self.dir, ignore_errors=True)
            self._stack.callback(self._stop_all)
            self.conf = os.path.join(self.dir, "slurm.conf")
            self.env = dict(os.environ, SLURM_CONF=self.conf)
            self._start()
        except BaseException:
            self._stack.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Stops the daemons (by PID) and removes the temp dir. Idempotent."""
        self._stack.close()

    def path(self, *parts: str) -> str:
        return os.path.join(self.dir, *parts)

    def run(self, args, timeout: float = _CMD_TIMEOUT_S, check: bool = True) -> str:
        """Runs a SLURM client command against this cluster; its stdout."""
        r = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                           env=self.env, timeout=timeout, check=False)
        if check and r.returncode:
            raise RuntimeError(f"{' '.join(map(str, args))} failed ({r.returncode}): "
                               f"{r.stderr.strip() or r.stdout.strip()}")
        return r.stdout

    def log(self, daemon: str) -> str:
        """What ``daemon`` ("munged", "slurmctld", "slurmd") logged so far."""
        try:
            with open(self.path(f"{daemon}.log"), errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    # -- starting ---------------------------------------------------------------------
    def _start(self):
        socket_path = self._start_munged()
        ctld_port, d_port = _free_ports(2)
        with open(self.conf, "w") as f:
            f.write(self._conf(socket_path, ctld_port, d_port))
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-f", self.conf])
        self._spawn("slurmd", [_which("slurmd"), "-D", "-f", self.conf,
                               "-N", self.node])
        self._wait(self._idle, f"node {self.node} idle in sinfo")

    def _start_munged(self) -> str:
        """Starts munged on a socket in the temp dir; its path."""
        for sub in ("state", "spool", "munge"):
            os.mkdir(self.path(sub), 0o700)
        key = self.path("munge", "munge.key")
        subprocess.run([_which("mungekey"), "--create", f"--keyfile={key}"],
                       check=True, capture_output=True, timeout=_CMD_TIMEOUT_S)
        socket_path = self.path("munge", "munge.socket")
        self._spawn("munged", [
            _which("munged"), "--foreground", "--force", f"--socket={socket_path}",
            f"--key-file={key}", f"--pid-file={self.path('munge', 'munged.pid')}",
            f"--seed-file={self.path('munge', 'munged.seed')}",
            f"--log-file={self.path('munged.log')}"])
        self._wait(lambda: os.path.exists(socket_path), "munged's socket")
        return socket_path

    def _conf(self, munge_socket: str, ctld_port: int, d_port: int) -> str:
        p = self.path
        return "\n".join([
            "ClusterName=nbdist-test",
            f"SlurmctldHost=localhost({self._ctld_address})",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={d_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={munge_socket}",
            f"StateSaveLocation={p('state')}",
            f"SlurmdSpoolDir={p('spool' + self._per_node)}",
            f"SlurmctldPidFile={p('slurmctld.pid')}",
            f"SlurmdPidFile={p('slurmd' + self._per_node + '.pid')}",
            f"SlurmctldLogFile={p('slurmctld.log')}",
            f"SlurmdLogFile={p('slurmd' + self._per_node + '.log')}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "MpiDefault=none",
            "ReturnToService=2",
            # The node advertises what slurm.conf says, not what it has: 4
            # CPUs for 1 ps + 2 workers (+ one) on a 2-core machine.
            "SlurmdParameters=config_overrides",
            # Finished jobs stay visible to scontrol for this long (no
            # accounting database here, so no sacct).
            "MinJobAge=600",
            "KillWait=5",
            "InactiveLimit=0",
            "SchedulerParameters=sched_interval=1",
            *self._node_lines(),
            "",
        ])

    # What differs on several nodes (``SlurmNodes``): the controller's address,
    # per-node daemon files (%n: the node's name), the node lines.
    _ctld_address = "127.0.0.1"
    _per_node = ""

    def _node_lines(self) -> list[str]:
        return [(f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} "
                 "RealMemory=2000 State=UNKNOWN"),
                (f"PartitionName=debug Nodes={self.node} Default=YES "
                 "MaxTime=INFINITE State=UP")]

    def _spawn(self, name: str, args: list[str]):
        with open(self.path(f"{name}.out"), "ab") as log:
            p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, env=self.env,
                                 start_new_session=True)
        self._procs.append((name, p))

    def _dead(self) -> str | None:
        for name, p in self._procs:
            if p.poll() is not None:
                with open(self.path(f"{name}.out"), errors="replace") as f:
                    out = f.read()
                return (f"{name} exited ({p.returncode}) while starting:\n{out[-2000:]}"
                        f"\n{self.log(name)[-2000:]}")
        return None

    def _wait(self, ready, what: str):
        deadline = time.monotonic() + START_TIMEOUT_S
        delay = 0.02
        while not ready():
            if why := self._dead():
                raise RuntimeError(why)
            if time.monotonic() > deadline:
                logs = "\n".join(f"-- {n}.log:\n{self.log(n)[-1500:]}"
                                 for n, _ in self._procs)
                raise RuntimeError(f"SLURM: no {what} within {START_TIMEOUT_S:.0f} s"
                                   f"\n{logs}")
            time.sleep(delay)  # a daemon says nothing when it is ready: poll
            delay = min(0.25, delay * 2)

    def _idle(self) -> bool:
        r = subprocess.run(["sinfo", "-h", "-N", "-n", self.node, "-o", "%t"],
                           capture_output=True, text=True, env=self.env,
                           timeout=_CMD_TIMEOUT_S, check=False)
        return r.returncode == 0 and r.stdout.strip() == "idle"

    def _stop_all(self):
        # Jobs first, so that their steps end while slurmd can still end them.
        ctld = dict(self._procs).get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            self.run(["scancel", "--partition=debug"], check=False)
            deadline = time.monotonic() + _STOP_WAIT_S
            while time.monotonic() < deadline and self.run(
                    ["squeue", "-h", "-o", "%i"], check=False).strip():
                time.sleep(0.1)  # SLURM says nothing when a job leaves: poll
        # slurmd first (it ends the job steps), munged last (the others use it).
        for _, p in reversed(self._procs):
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGTERM)
            try:
                p.wait(_STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
                p.wait(_STOP_WAIT_S)


class SlurmNodes(Slurm):
    """A running SLURM of one node per namespace host (``tests/netns.py``):
    ``slurmctld`` and ``munged`` in the root namespace (the controller at the
    hosts' bridge address), one ``slurmd -N n<i>`` in each host (``ip netns
    exec``), the node's ``NodeAddr`` its host's address, ``cpus`` CPUs each;
    partition ``debug`` of them all. ``nodes`` are the node names, in host
    order; ``host(node)`` a node's host. Returns when ``sinfo`` shows every
    node idle.

        with netns.Hosts(3) as hosts, SlurmNodes(hosts) as slurm:
            slurm.run(["srun", "-N3", "hostname"])

    Closing cancels the jobs, stops the daemons by PID, then kills by PID
    whatever still runs in the hosts (a job step whose ``slurmd`` was
    killed keeps running: nothing else would end it).
    """

    _per_node = "-%n"

    def __init__(self, hosts, cpus: int = 2, slurmd_timeout_s: int = 6):
        self.hosts = list(hosts)
        self.nodes = [f"n{h.index + 1}" for h in self.hosts]
        self._ctld_address = f"{self.hosts[0].address.rsplit('.', 1)[0]}.1"
        self._slurmd_timeout_s = slurmd_timeout_s
        super().__init__(cpus)

    def host(self, node: str):
        return self.hosts[self.nodes.index(node)]

    def _start(self):
        socket_path = self._start_munged()
        for node in self.nodes:
            os.mkdir(self.path(f"spool-{node}"), 0o700)
        ctld_port, d_port = _free_ports(2)
        with open(self.conf, "w") as f:
            f.write(self._conf(socket_path, ctld_port, d_port))
        self._spawn("slurmctld", [_which("slurmctld"), "-D", "-f", self.conf])
        for node, host in zip(self.nodes, self.hosts):
            # nsenter, not ip netns exec: that remounts /sys, and slurmd needs
            # the cgroup file system under it. Both exec: the PID is slurmd's.
            self._spawn(f"slurmd-{node}", [
                _which("nsenter"), f"--net=/run/netns/{host.name}",
                _which("slurmd"), "-D", "-f", self.conf, "-N", node])
        self._wait(self._idle, f"nodes {', '.join(self.nodes)} idle in sinfo")

    def _node_lines(self) -> list[str]:
        nodes = ",".join(self.nodes)
        return [
            # A killed slurmd: its node DOWN ("Not responding") within about
            # this. JobRequeue is SLURM's default (1): a batch job is
            # requeued after a node failure unless it says --no-requeue.
            f"SlurmdTimeout={self._slurmd_timeout_s}",
            *(f"NodeName={node} NodeAddr={host.address} CPUs={self.cpus} "
              "RealMemory=2000 State=UNKNOWN"
              for node, host in zip(self.nodes, self.hosts)),
            (f"PartitionName=debug Nodes={nodes} Default=YES MaxTime=INFINITE "
             "State=UP")]

    def _idle(self) -> bool:
        r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True,
                           text=True, env=self.env, timeout=_CMD_TIMEOUT_S,
                           check=False)
        states = dict(line.split() for line in r.stdout.splitlines() if line.strip())
        return r.returncode == 0 and all(states.get(n) == "idle" for n in self.nodes)

    def slurmd(self, node: str) -> subprocess.Popen:
        """The ``slurmd`` process of ``node``."""
        return dict(self._procs)[f"slurmd-{node}"]

    def pids(self, node: str) -> list[int]:
        """The PIDs of every process in ``node``'s host (``ip netns pids``)."""
        r = subprocess.run(["ip", "netns", "pids", self.host(node).name],
                           capture_output=True, text=True, timeout=_CMD_TIMEOUT_S,
                           check=False)
        return [int(p) for p in r.stdout.split()]

    def _stop_all(self):
        super()._stop_all()
        self.kill_leftovers()

    def kill_leftovers(self):
        """SIGKILLs, by PID, every process still in the hosts."""
        for node in self.nodes:
            for pid in self.pids(node):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def session_slurm():
    """A running single-node SLURM, ``SLURM_CONF`` set in ``os.environ``
    meanwhile (so SLURM's clients, and ``SlurmCluster``, use it); skips the
    test when SLURM cannot run here. For a session-scoped fixture::

        @pytest.fixture(scope="session")
        def slurm():
            with session_slurm() as s:
                yield s
    """
    if why := unavailable():
        pytest.skip(f"no SLURM tests: {why}")
    with Slurm() as s:
        old = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = s.conf
        try:
            yield s
        finally:
            if old is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = old
