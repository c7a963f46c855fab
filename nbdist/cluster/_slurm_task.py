"""One task of a ``SlurmCluster`` job (an ``srun`` task): finds its place, its
peers, then becomes ``python -m nbdist.server`` for its task.

Run by path, not with ``-m``, so it starts without importing nbdist::

    python .../_slurm_task.py RENDEZVOUS_DIR ps=1,worker=2 BIND TIMEOUT_S

Task number ``SLURM_PROCID`` takes the place SlurmClusterResolver gives it
(jobs sorted by name take consecutive tasks), picks a free port on ``BIND``,
publishes ``host:port pid node`` as ``RENDEZVOUS_DIR/<procid>`` (host: with
``BIND`` 0.0.0.0, its node's ``NodeAddr``, which every node and the
submitting machine reach it at) and waits (at most
``TIMEOUT_S``) for every task's line; then it execs the server (same PID, so
SLURM's signals reach it) with the whole cluster spec.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

_POLL_S = 0.05
_LOOPBACK = ("", "127.0.0.1", "localhost")


def _place(jobs: list[tuple[str, int]], rank: int) -> tuple[str, int]:
    start = 0
    for job, n in sorted(jobs):
        if rank < start + n:
            return job, rank - start
        start += n
    raise SystemExit(f"SLURM_PROCID={rank} is outside the {start} tasks {jobs}")


def _free_port(bind: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((bind or "127.0.0.1", 0))
        return s.getsockname()[1]


def _node_address(node: str) -> str:
    """The node's ``NodeAddr`` (what slurmctld reaches it at; SLURM makes it
    the node's name unless slurm.conf says otherwise), else its name."""
    try:
        out = subprocess.run(["scontrol", "show", "node", "-o", node],
                             capture_output=True, text=True, timeout=30,
                             check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return node
    m = re.search(r"\bNodeAddr=(\S+)", out)
    return m.group(1) if m else node


def _host(bind: str, node: str) -> str:
    if bind in _LOOPBACK:
        return "localhost"
    if bind == "0.0.0.0":
        return _node_address(node)
    return bind


def main(argv: list[str]) -> int:
    rdv, counts, bind, timeout = argv[0], argv[1], argv[2], float(argv[3])
    jobs = [(j, int(n)) for j, n in (kv.split("=") for kv in counts.split(","))]
    total = sum(n for _, n in jobs)
    rank = int(os.environ["SLURM_PROCID"])
    job, index = _place(jobs, rank)
    mine = os.path.join(rdv, str(rank))
    with open(mine + ".tmp", "w") as f:
        node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
        f.write(f"{_host(bind, node)}:{_free_port(bind)} {os.getpid()} {node}\n")
    os.replace(mine + ".tmp", mine)  # a reader sees the whole line or nothing
    deadline = time.monotonic() + timeout
    while True:
        names = [os.path.join(rdv, str(r)) for r in range(total)]
        if all(os.path.exists(n) for n in names):
            break
        if time.monotonic() > deadline:
            print(f"nbdist SLURM task {rank}: not every task of the job published "
                  f"its address within {timeout:g} s", file=sys.stderr, flush=True)
            return 1
        time.sleep(_POLL_S)  # peers write files, nothing to wait on
    addresses = []
    for n in names:
        with open(n) as f:
            addresses.append(f.read().split()[0])
    spec, start = [], 0
    for j, n in sorted(jobs):
        spec.append(f"{j}|" + ";".join(addresses[start:start + n]))
        start += n
    args = [sys.executable, "-m", "nbdist.server", f"--cluster_spec={','.join(spec)}",
            f"--job_name={job}", f"--task_index={index}"]
    if bind:
        args.append(f"--bind={bind}")
    sys.stdout.flush()
    os.execv(sys.executable, args)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
