"""Collective all-reduce throughput beside a raw transfer. Run on demand:
python benchmarks/bench_collective.py [--quick] [--sizes 1 64] [--workers 2 3]

Prints one table: for each size (MiB) and number of workers, a float32
all-reduce (sum) across that many worker processes on 127.0.0.1, each running
its own session on its own server, in MB/s of the reduced tensor (size / the
slowest worker's time, minus the same step without the all-reduce), beside the
transport's raw rate measured in the same run between the same tasks: a plain
transfer of the same size (a tensor made on worker 1 and consumed on worker 0,
minus the same step with both ops on worker 1). ``ratio`` is their quotient;
``bound`` the ring's, N / (2(N-1)) (each worker sends and receives
2(N-1)/N x size). Each figure is the best of several rounds, less the best of
its local step (on a busy machine, differences of pairs are noise). ``CPU ms``:
the CPU time an all-reduce costs one worker process (all its threads; mean over
workers and rounds), which a busy machine disturbs far less than wall time.

When ``--tf_python`` (default ``/work/tfvenv/bin/python``) imports TensorFlow,
the same measurements run on TensorFlow's own servers: TF1 graph mode,
``CollectiveReduceV2`` (ring) in each worker's session with
``collective_group_leader`` set, and the same raw transfer; ``TF`` columns.
When ``--mpi_python`` (default ``/work/mpivenv/bin/python``) imports ``mpi4py``
and ``mpirun`` is on PATH, the same all-reduce runs as ``MPI.Allreduce`` (sum)
across as many ranks started by Open MPI's ``mpirun`` on this host (its own
choice of transport: shared memory; ``--mpi_btl self,tcp`` for TCP over
loopback); ``MPI`` columns.

``NBDIST_SAME_HOST=0`` in the environment measures nbdist's gRPC-only path;
``BENCH_SEGMENT_BYTES``, ``BENCH_DIRECT_BYTES`` and ``BENCH__PIPELINE``
override the all-reduce's piece size, direct-exchange bound and pieces in
flight, ``BENCH_HINT`` its ``communication_hint`` (ring, scatter); ``BENCH_SKIP_RAW=1`` leaves the raw transfer out (for profiling). The
benchmark measures the nbdist of the checkout it is in. Every process it
starts is stopped by PID.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _children import importable

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20

_NBDIST_WORKER = r"""
import json, os, sys, time
import nbdist as nd
from nbdist.ops import collective_ops
from nbdist.runtime import collective

for name in ("SEGMENT_BYTES", "DIRECT_BYTES", "_PIPELINE"):
    if os.environ.get("BENCH_" + name):
        setattr(collective, name, int(os.environ["BENCH_" + name]))
cluster, index, n, sizes, rounds = json.loads(sys.argv[1])
server = nd.Server(cluster, "worker", index)
for k, size in enumerate(sizes):
    elements = size // 4
    with nd.Graph().as_default():
        x = nd.fill([elements], float(index + 1))
        check = collective_ops.all_reduce(
            x, n, 1, k + 1,
            communication_hint=os.environ.get("BENCH_HINT", "auto"))[0]
        local = x[0]  # the same step without the all-reduce: subtracted
        with nd.Session(server.target) as sess:
            sess.run(local)
            times, local_times, cpu = [], [], 0.0
            for _ in range(rounds):
                start, cpu0 = time.perf_counter(), time.process_time()
                first = sess.run(check)
                middle, cpu1 = time.perf_counter(), time.process_time()
                sess.run(local)
                times.append(middle - start)
                local_times.append(time.perf_counter() - middle)
                cpu += (cpu1 - cpu0) - (time.process_time() - cpu1)
            assert abs(first - n * (n + 1) / 2) < 1e-6, first
            raw = []
            if index == 0 and not os.environ.get("BENCH_SKIP_RAW"):
                with nd.device("/job:worker/task:1"):
                    far = nd.fill([elements], 1.0)
                    near_sum = nd.reduce_sum(nd.fill([elements], 1.0))
                with nd.device("/job:worker/task:0"):
                    far_sum = nd.reduce_sum(far)
                far_times, near_times = [], []
                for _ in range(rounds):
                    t0 = time.perf_counter()
                    sess.run(far_sum)
                    t1 = time.perf_counter()
                    sess.run(near_sum)
                    far_times.append(t1 - t0)
                    near_times.append(time.perf_counter() - t1)
                raw = [t - min(near_times) for t in far_times]
    times = [t - min(local_times) for t in times]
    print("RESULT " + json.dumps([size, times, raw, cpu / rounds]), flush=True)
sys.stdin.readline()  # the others may still be reading from this task
server.stop()
"""

_TF_WORKER = r"""
import json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow.compat.v1 as tf
tf.disable_eager_execution()
cluster, index, n, sizes, rounds = json.loads(sys.argv[1])
config = tf.ConfigProto()
config.experimental.collective_group_leader = "/job:worker/replica:0/task:0"
# Grappler would fold the raw transfer's fill + reduce_sum into a constant.
config.graph_options.rewrite_options.constant_folding = 2  # OFF
server = tf.distribute.Server(tf.train.ClusterSpec(cluster), "worker", index,
                              config=config)
for k, size in enumerate(sizes):
    elements = size // 4
    with tf.Graph().as_default():
        with tf.device(f"/job:worker/task:{index}"):
            x = tf.fill([elements], float(index + 1))
            check = tf.raw_ops.CollectiveReduceV2(
                input=x, group_size=n, group_key=1, instance_key=k + 1,
                ordering_token=[], merge_op="Add", final_op="Id",
                communication_hint="ring")[0]
            local = x[0]
        with tf.Session(server.target, config=config) as sess:
            sess.run(local)
            times, local_times = [], []
            for _ in range(rounds):
                start = time.perf_counter()
                first = sess.run(check)
                middle = time.perf_counter()
                sess.run(local)
                times.append(middle - start)
                local_times.append(time.perf_counter() - middle)
            assert abs(first - n * (n + 1) / 2) < 1e-6, first
            raw = []
            if index == 0 and not os.environ.get("BENCH_SKIP_RAW"):
                with tf.device("/job:worker/task:1"):
                    far = tf.fill([elements], 1.0)
                    near_sum = tf.reduce_sum(tf.fill([elements], 1.0))
                with tf.device("/job:worker/task:0"):
                    far_sum = tf.reduce_sum(far)
                far_times, near_times = [], []
                for _ in range(rounds):
                    t0 = time.perf_counter()
                    sess.run(far_sum)
                    t1 = time.perf_counter()
                    sess.run(near_sum)
                    far_times.append(t1 - t0)
                    near_times.append(time.perf_counter() - t1)
                raw = [t - min(near_times) for t in far_times]
    times = [t - min(local_times) for t in times]
    print("RESULT " + json.dumps([size, times, raw, None]), flush=True)
sys.stdin.readline()
"""


_MPI_WORKER = r"""
import json, sys, time
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
index, n = comm.Get_rank(), comm.Get_size()
sizes, rounds = json.loads(sys.argv[1])
out = {}
for size in sizes:
    x = np.full(size // 4, float(index + 1), np.float32)
    y = np.empty_like(x)
    comm.Allreduce(x, y, op=MPI.SUM)  # warm-up: connections, buffers
    times, cpu = [], 0.0
    for _ in range(rounds):
        comm.Barrier()
        start, cpu0 = time.perf_counter(), time.process_time()
        comm.Allreduce(x, y, op=MPI.SUM)
        times.append(time.perf_counter() - start)
        cpu += time.process_time() - cpu0
    assert abs(y[0] - n * (n + 1) / 2) < 1e-6, y[0]
    every = comm.gather((times, cpu / rounds), root=0)
    if index == 0:  # per round the slowest rank, then the best round
        slowest = np.max([t for t, _ in every], axis=0)
        out[size] = (float(slowest.min()), sum(c for _, c in every) / n)
if index == 0:
    print("RESULT " + json.dumps(out), flush=True)
"""


def _run_mpi(python: str, script: str, n: int, sizes: list[int], rounds: int,
             btl: str) -> dict[int, tuple]:
    """{size: (best Allreduce seconds of the slowest rank, mean CPU seconds per
    rank and all-reduce)} over ``n`` ranks of ``mpirun``."""
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n)]
    if btl:
        cmd += ["--mca", "btl", btl, "--mca", "btl_tcp_if_include", "lo"]
    proc = subprocess.run([*cmd, python, script, json.dumps([sizes, rounds])],
                          capture_output=True, text=True, timeout=1800, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return {int(k): tuple(v) for k, v in json.loads(line[7:]).items()}
    raise RuntimeError(f"mpirun exited with {proc.returncode}: {proc.stderr[-2000:]}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(python: str, script: str, n: int, sizes: list[int], rounds: int,
         env: dict, quiet: bool = False) -> dict[int, tuple]:
    """{size: (best all-reduce seconds (slowest worker), best raw seconds, mean
    CPU seconds per worker and all-reduce or None)}."""
    cluster = {"worker": [f"127.0.0.1:{_free_port()}" for _ in range(n)]}
    procs = [subprocess.Popen(
        [python, script, json.dumps([cluster, i, n, sizes, rounds])],
        cwd=tempfile.gettempdir(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else None, text=True, env=env)
        for i in range(n)]
    try:
        slowest = {s: [0.0] * rounds for s in sizes}
        raw: dict[int, list] = {}
        cpus: dict[int, list] = {s: [] for s in sizes}
        for p in procs:
            got = 0
            for line in p.stdout:
                if line.startswith("RESULT "):
                    size, times, raw_times, cpu = json.loads(line[7:])
                    if cpu is not None:
                        cpus[size].append(cpu)
                    slowest[size] = [max(a, b) for a, b in zip(slowest[size], times)]
                    if raw_times:
                        raw[size] = raw_times
                    got += 1
                    if got == len(sizes):
                        break
            else:
                raise RuntimeError(f"worker exited with {p.wait()}")
        for p in procs:
            p.stdin.write("\n")
            p.stdin.flush()
        for p in procs:
            p.wait(60)
        return {s: (min(slowest[s]), min(raw[s]) if s in raw else None,
                    sum(cpus[s]) / len(cpus[s]) if cpus[s] else None)
                for s in sizes}
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(10)
            p.stdin.close()
            p.stdout.close()


def _rate(size: int, seconds: float | None) -> float | None:
    """MB/s; None when the difference of bests is not positive (noise won)."""
    return None if not seconds or seconds <= 0 else size / MIB / seconds


def _cell(x: float | None, fmt: str, width: int) -> str:
    return f"{'-':>{width}}" if x is None else f"{x:>{width}{fmt}}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1, 64],
                        help="tensor sizes in MiB")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--tf_python", default="/work/tfvenv/bin/python",
                        help="an interpreter that imports tensorflow ('' for none)")
    parser.add_argument("--mpi_python", default="/work/mpivenv/bin/python",
                        help="an interpreter that imports mpi4py ('' for none)")
    parser.add_argument("--mpi_btl", default="",
                        help="Open MPI's byte transfer layers (default: its choice)")
    args = parser.parse_args()
    rounds = 2 if args.quick else args.rounds
    sizes = [int(s * MIB) for s in args.sizes]
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(
                   [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    use_tf = importable(args.tf_python, "tensorflow")
    use_mpi = importable(args.mpi_python, "mpi4py") and bool(shutil.which("mpirun"))
    with tempfile.TemporaryDirectory() as tmp:
        scripts = {}
        for name, text in (("nbdist", _NBDIST_WORKER), ("tf", _TF_WORKER),
                           ("mpi", _MPI_WORKER)):
            scripts[name] = str(Path(tmp) / f"bench_collective_{name}.py")
            Path(scripts[name]).write_text(text)
        head = (f"{'size MiB':>8}{'workers':>8}{'all-reduce MB/s':>16}{'raw MB/s':>10}"
                f"{'ratio':>7}{'bound':>7}{'CPU ms':>9}")
        if use_tf:
            head += (f"{'TF all-reduce':>14}{'TF raw':>8}{'TF ratio':>9}"
                     f"{'nbdist/TF':>10}")
        if use_mpi:
            head += f"{'MPI all-reduce':>15}{'MPI CPU ms':>11}{'nbdist/MPI':>11}"
        print(head)
        for n in args.workers:
            ours = _run(sys.executable, scripts["nbdist"], n, sizes, rounds, env)
            theirs = (_run(args.tf_python, scripts["tf"], n, sizes, rounds,
                           dict(os.environ, PYTHONUNBUFFERED="1",
                                TF_CPP_MIN_LOG_LEVEL="3"), quiet=True)
                      if use_tf else {})
            mpi = (_run_mpi(args.mpi_python, scripts["mpi"], n, sizes, rounds,
                            args.mpi_btl) if use_mpi else {})
            for size in sizes:
                rate, raw = (_rate(size, t) for t in ours[size][:2])
                cpu_ms = ours[size][2] * 1000 if ours[size][2] is not None else None
                line = (f"{size / MIB:>8g}{n:>8}{_cell(rate, '.0f', 16)}"
                        f"{_cell(raw, '.0f', 10)}"
                        f"{_cell(rate / raw if rate and raw else None, '.2f', 7)}"
                        f"{n / (2 * (n - 1)):>7.2f}{_cell(cpu_ms, '.1f', 9)}")
                if use_tf:
                    tf_rate, tf_raw = (_rate(size, t) for t in theirs[size][:2])
                    tf_ratio = tf_rate / tf_raw if tf_rate and tf_raw else None
                    vs_tf = rate / tf_rate if rate and tf_rate else None
                    line += (f"{_cell(tf_rate, '.0f', 14)}{_cell(tf_raw, '.0f', 8)}"
                             f"{_cell(tf_ratio, '.2f', 9)}{_cell(vs_tf, '.2f', 10)}")
                if use_mpi:
                    mpi_rate = _rate(size, mpi[size][0])
                    vs_mpi = rate / mpi_rate if rate and mpi_rate else None
                    line += (f"{_cell(mpi_rate, '.0f', 15)}"
                             f"{_cell(mpi[size][1] * 1000, '.1f', 11)}"
                             f"{_cell(vs_mpi, '.2f', 11)}")
                print(line, flush=True)
    if not use_tf:
        print(f"(no TF columns: {args.tf_python or 'no interpreter'} does not "
              "import tensorflow)")
    if not use_mpi:
        print(f"(no MPI columns: {args.mpi_python or 'no interpreter'} does not "
              "import mpi4py, or mpirun is not on PATH)")


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"({time.perf_counter() - started:.0f} s)")
