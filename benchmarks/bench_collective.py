"""Collective all-reduce throughput. Run on demand:
python benchmarks/bench_collective.py [--quick]

Prints one table: a 64 MiB float32 all-reduce (sum) across 2 and 3 worker
processes on 127.0.0.1, each running its own session on its own server, in
MB/s of the reduced tensor (64 MiB / the slowest worker's time), beside the
transport's raw rate: a plain 64 MiB transfer between two tasks (a tensor
made on worker 1 and consumed on worker 0, minus the same step with both ops
on worker 1). Each figure is the best of several rounds. Every process the
benchmark starts is stopped by PID.
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
    with nd.Session(server.target) as sess:
        sess.run(x)
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            first = sess.run(check)
            times.append(time.perf_counter() - start)
        expected = n * (n + 1) / 2
        assert abs(first - expected) < 1e-6, (first, expected)
        if index == 0 and n == 2:  # the raw rate: a transfer from worker 1
            with nd.device("/job:worker/task:1"):
                far = nd.fill([elements], 1.0)
                near_sum = nd.reduce_sum(nd.fill([elements], 1.0))
            with nd.device("/job:worker/task:0"):
                far_sum = nd.reduce_sum(far)
            raw = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                sess.run(far_sum)
                t1 = time.perf_counter()
                sess.run(near_sum)
                raw.append((t1 - t0) - (time.perf_counter() - t1))
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
    rounds = 2 if parser.parse_args().quick else 5
    rows = []
    raw_rate = None
    for n in (2, 3):
        best, raw = _run(n, rounds)
        if raw:
            raw_rate = SIZE / MIB / max(min(raw), 1e-9)
        rows.append((f"all-reduce 64 MiB, {n} workers", SIZE / MIB / best, best))
    print(f"{'case':<34}{'MB/s':>10}{'seconds':>10}{'x raw':>8}")
    print(f"{'raw transfer 64 MiB, 2 tasks':<34}{raw_rate:>10.0f}"
          f"{SIZE / MIB / raw_rate:>10.3f}{1.0:>8.2f}")
    for name, rate, seconds in rows:
        print(f"{name:<34}{rate:>10.0f}{seconds:>10.3f}{rate / raw_rate:>8.2f}")


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"({time.perf_counter() - started:.0f} s)")
