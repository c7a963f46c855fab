"""Collective all-reduce throughput. Run on demand:
python benchmarks/bench_collective.py [--quick]

Prints one table: a 64 MiB float32 all-reduce (sum) across 2 and 3 worker
processes on 127.0.0.1, each running its own session on its own server, in
MB/s of the reduced tensor (64 MiB / the slowest worker's time, minus the
same step without the all-reduce), each beside the transport's raw rate
measured in the same run: a plain 64 MiB transfer between two of its tasks (a
tensor made on worker 1 and consumed on worker 0, minus the same step with
both ops on worker 1). ``x raw`` is their ratio; ``bound`` the ring's,
N / (2(N-1)) (each worker sends and receives 2(N-1)/N x size). Each figure is
the best of several rounds, less the best of its local step (on a busy
machine, differences of pairs are noise). ``NBDIST_SAME_HOST=0`` in the
environment measures the gRPC-only path; ``BENCH_SEGMENT_BYTES`` and
``BENCH__PIPELINE`` override the ring's piece size and pieces in flight.
Every process the benchmark starts is stopped by PID.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
SIZE = 64 * MIB

_WORKER = r"""
import json, os, sys, time
import nbdist as nd
from nbdist.graph import collective_ops

cluster, index, n, rounds = json.loads(sys.argv[1])
server = nd.Server(cluster, "worker", index)
elements = int(sys.argv[2]) // 4
with nd.Graph().as_default():
    x = nd.fill([elements], float(index + 1))
    total = collective_ops.all_reduce(x, n, 1, 1)
    check = total[0]
    local = x[0]  # the same step without the all-reduce: subtracted
    from nbdist.runtime import collective
    for name in ("SEGMENT_BYTES", "_PIPELINE"):
        if os.environ.get("BENCH_" + name):
            setattr(collective, name, int(os.environ["BENCH_" + name]))
    with nd.Session(server.target) as sess:
        sess.run(x)
        times, local_times = [], []
        for _ in range(rounds):
            start = time.perf_counter()
            first = sess.run(check)
            middle = time.perf_counter()
            sess.run(local)
            times.append(middle - start)
            local_times.append(time.perf_counter() - middle)
        # Best against best: a busy machine makes differences of pairs noisy.
        times = [t - min(local_times) for t in times]
        expected = n * (n + 1) / 2
        assert abs(first - expected) < 1e-6, (first, expected)
        if index == 0:  # the raw rate: a transfer from worker 1
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
            print("RAW " + json.dumps(raw), flush=True)
        print("TIMES " + json.dumps(times), flush=True)
        sys.stdin.readline()  # the others may still pull from this task
server.stop()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(n: int, rounds: int) -> tuple[float, list[float]]:
    cluster = {"worker": [f"127.0.0.1:{_free_port()}" for _ in range(n)]}
    procs = [subprocess.Popen(
        [sys.executable, "-c", _WORKER, json.dumps([cluster, i, n, rounds]), str(SIZE)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1")) for i in range(n)]
    try:
        slowest, raw = [0.0] * rounds, []
        for p in procs:
            for line in p.stdout:
                if line.startswith("RAW "):
                    raw = json.loads(line[4:])
                if line.startswith("TIMES "):
                    times = json.loads(line[6:])
                    slowest = [max(a, b) for a, b in zip(slowest, times)]
                    break
            else:
                raise RuntimeError(f"worker exited with {p.wait()}")
        for p in procs:
            p.stdin.write("\n")
            p.stdin.flush()
        for p in procs:
            p.wait(60)
        return min(slowest), raw
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(10)
            p.stdin.close()
            p.stdout.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 3])
    rounds = 2 if parser.parse_args().quick else 5
    print(f"{'case':<36}{'MB/s':>10}{'seconds':>10}{'x raw':>8}{'bound':>8}")
    for n in parser.parse_args().workers:
        best, raw = _run(n, rounds)
        raw_rate = SIZE / MIB / max(min(raw), 1e-9)
        rate = SIZE / MIB / best
        bound = n / (2 * (n - 1))  # the ring moves 2(N-1)/N x size per worker
        print(f"{f'raw transfer 64 MiB, {n}-task run':<36}{raw_rate:>10.0f}"
              f"{SIZE / MIB / raw_rate:>10.3f}{1.0:>8.2f}")
        print(f"{f'all-reduce 64 MiB, {n} workers':<36}{rate:>10.0f}{best:>10.3f}"
              f"{rate / raw_rate:>8.2f}{bound:>8.2f}", flush=True)


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"({time.perf_counter() - started:.0f} s)")
