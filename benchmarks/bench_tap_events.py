"""Per-step cost of traffic recording (``TrafficView``'s tap events, on by
default for clusters ``%cluster start`` makes). Run on demand:

    python benchmarks/bench_tap_events.py [--steps=200] [--blocks=5]

Two ``LocalCluster`` s of 1 ps + 1 worker run at once, one whose tasks publish
their taps (``NBDIST_TAP_EVENTS=1``) and one whose tasks do not. The step: the
worker reads a 1000-float variable on the ps, and adds to it there (one
RunGraph to the ps, tensors both ways: what a parameter-server step does).
Blocks of ``--steps`` steps alternate between the two clusters; the fastest
block of each (the one least disturbed by other processes on a shared
machine) gives the per-step time, and the difference is the cost. The CPU
time the tasks' processes spent (``/proc/PID/stat``, all their threads) per
step is shown too: it holds on a busy machine, where wall time is mostly
waiting for a core.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import nbdist as nd  # noqa: E402
from nbdist.runtime.tap_record import ENV_TAP_EVENTS  # noqa: E402


def _cluster(record: bool):
    old = os.environ.get(ENV_TAP_EVENTS)
    os.environ[ENV_TAP_EVENTS] = "1" if record else "0"
    try:
        return nd.LocalCluster(ps=1, workers=1, progress=False)
    finally:
        if old is None:
            os.environ.pop(ENV_TAP_EVENTS, None)
        else:
            os.environ[ENV_TAP_EVENTS] = old


def _step_fn(cluster):
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            w = nd.Variable(np.zeros(1000, np.float32), name="w")
        with nd.device("/job:worker/task:0"):
            delta = 0.01 * (nd.ones([1000]) - w)
        with nd.device("/job:ps/task:0"):
            step = nd.assign_add(w, delta)
    sess = nd.Session(cluster.target("worker", 0), graph=g)
    sess.run(w.initializer)
    return sess, step


def _cpu_s(cluster) -> float:
    """CPU seconds (user + system) the cluster's task processes used so far."""
    total = 0
    for t in cluster.tasks:
        with open(f"/proc/{t.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--blocks", type=int, default=5)
    args = parser.parse_args(argv)
    clusters = {"recording": _cluster(True), "off": _cluster(False)}
    try:
        runs = {name: _step_fn(c) for name, c in clusters.items()}
        best = {name: float("inf") for name in runs}
        cpu = {name: 0.0 for name in runs}
        for _ in range(args.blocks):
            for name, (sess, step) in runs.items():
                cpu0, start = _cpu_s(clusters[name]), time.perf_counter()
                for _ in range(args.steps):
                    sess.run(step)
                best[name] = min(best[name], (time.perf_counter() - start) / args.steps)
                cpu[name] += _cpu_s(clusters[name]) - cpu0
        for sess, _ in runs.values():
            sess.close()
    finally:
        for c in clusters.values():
            c.shutdown()
    n = args.blocks * args.steps
    on, off = best["recording"] * 1e3, best["off"] * 1e3
    con, coff = cpu["recording"] / n * 1e3, cpu["off"] / n * 1e3
    print(f"per step (wall: fastest of {args.blocks} blocks of {args.steps}; "
          "CPU: the tasks' processes, all blocks)")
    print(f"  tap events off  wall {off:.3f} ms  CPU {coff:.3f} ms")
    print(f"  tap events on   wall {on:.3f} ms  CPU {con:.3f} ms   "
          f"(wall {on - off:+.3f} ms, CPU {con - coff:+.3f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
