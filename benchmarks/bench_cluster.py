"""Multi-process training costs (issue 4). Run on demand:

    python benchmarks/bench_cluster.py [--seconds=3] [--repeats=5]

Prints one table:

* ``LocalCluster`` start-up: from calling ``LocalCluster(ps=1, workers=2)``
  (``nbdist`` already imported, as in a notebook) until the first step of a
  graph spanning the ps and both workers returns: best and median of
  ``--repeats`` starts, and the part until every task answered (what
  ``%cluster start`` waits for before its view shows all tasks running).
  Measured twice: as ``LocalCluster`` starts tasks (with bytecode: when
  ``PYTHONDONTWRITEBYTECODE`` is set and nbdist has no ``__pycache__``, its
  tasks keep bytecode in a cache under ``~/.cache/nbdist``), and with every
  task compiling nbdist's sources, as before that cache.
* The MLP of ``bench_local.py`` (784-256-10, batch 128, plain SGD, a global
  step) trained between-graph on a ``LocalCluster``: variables on the ps
  (``replica_device_setter``), one client per worker task (a thread of this
  process; each worker's batch is a constant on that worker, so a client's
  RunStep is small and the traffic is the ps <-> worker traffic of a real
  job: 0.8 MB of parameters pulled and 0.8 MB of gradients pushed per step).
  Asynchronous with 1 and with 2 workers; synchronous
  (``SyncReplicasOptimizer``, 2 of 2 replicas, TF's default token seeding)
  with 2 workers, in global steps/s; and the same step in one process
  (``Session("")``) as the baseline. For the async runs, the CPU time each
  process spends per step (from ``/proc``) says where the time goes.

BLAS runs one thread per process (the benchmark sets ``OPENBLAS_NUM_THREADS``
and friends to 1 unless they are set; ``LocalCluster`` does the same for its
tasks): the tasks are the parallelism, and on a 2-core machine a BLAS thread
pool per process makes every matmul several times slower.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import statistics
import threading
import time

import numpy as np

import nbdist as nd
from nbdist.cluster.local_cluster import LocalCluster

BATCH = 128


def _cpu_seconds(pid) -> float:
    """user + system CPU seconds of a process (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _self_cpu() -> float:
    t = os.times()
    return t.user + t.system


def build_mlp(task_index=None, cluster=None, sync_replicas=None):
    """The MLP in the default graph; returns (train_op, global_step, hook).

    With ``cluster``: variables on the ps, the rest on worker ``task_index``.
    With ``sync_replicas=(replicas, is_chief)``: a SyncReplicasOptimizer and
    its hook.
    """
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((784, 256)) * 0.05).astype(np.float32)
    w2 = (rng.standard_normal((256, 10)) * 0.05).astype(np.float32)
    data = np.random.default_rng(task_index or 0)
    xs = data.standard_normal((BATCH, 784)).astype(np.float32)
    ys = np.eye(10, dtype=np.float32)[data.integers(0, 10, BATCH)]
    setter = None
    if cluster is not None:
        setter = nd.train.replica_device_setter(
            cluster=cluster, worker_device=f"/job:worker/task:{task_index}")
    hook = None
    with nd.device(setter):
        x, y = nd.constant(xs), nd.constant(ys)
        gs = nd.train.get_or_create_global_step()
        W1 = nd.Variable(w1, name="W1")
        b1 = nd.Variable(np.zeros(256, np.float32), name="b1")
        W2 = nd.Variable(w2, name="W2")
        b2 = nd.Variable(np.zeros(10, np.float32), name="b2")
        h = nd.nn.relu(nd.matmul(x, W1) + b1)
        logits = nd.matmul(h, W2) + b2
        loss = nd.reduce_mean(nd.nn.softmax_cross_entropy_with_logits(
            labels=y, logits=logits))
        opt = nd.train.GradientDescentOptimizer(0.1)
        if sync_replicas is not None:
            replicas, is_chief = sync_replicas
            opt = nd.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=replicas,
                                                 total_num_replicas=replicas)
        train = opt.minimize(loss, global_step=gs)
        if sync_replicas is not None:
            hook = opt.make_session_run_hook(is_chief)
    return train, gs, hook


# -- start-up ------------------------------------------------------------------------
def bench_startup(repeats):
    """[(seconds to the first step, seconds until all tasks answered, CPU
    seconds the tasks used, CPU seconds this process used)]."""
    runs = []
    for _ in range(repeats):
        g = nd.Graph()
        with g.as_default():
            with nd.device("/job:ps/task:0"):
                v = nd.Variable(1.0, name="v")
            with nd.device("/job:worker/task:1"):
                y = v + 1.0
            with nd.device("/job:worker/task:0"):
                z = y * 2.0
            init = v.initializer
        me0 = _self_cpu()
        t0 = time.perf_counter()
        cluster = LocalCluster(ps=1, workers=2, progress=False)
        try:
            t1 = time.perf_counter()
            with nd.Session(cluster.target("worker", 0), graph=g) as s:
                s.run(init)
                assert s.run(z) == 4.0
            t2 = time.perf_counter()
            me1 = _self_cpu()
            tasks_cpu = sum(_cpu_seconds(t.pid) for t in cluster.tasks)
        finally:
            cluster.shutdown()
        runs.append((t2 - t0, t1 - t0, tasks_cpu, me1 - me0))
    return runs


def bench_startup_compiling(repeats):
    """As ``bench_startup``, the tasks without a bytecode cache: what every start
    cost before ``LocalCluster`` kept one when ``PYTHONDONTWRITEBYTECODE`` is
    set (each task compiled nbdist's sources)."""
    from nbdist.cluster import local_cluster

    keep = local_cluster._use_bytecode_cache
    saved = os.environ.get("PYTHONDONTWRITEBYTECODE")
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    local_cluster._use_bytecode_cache = lambda env: None
    try:
        return bench_startup(repeats)
    finally:
        local_cluster._use_bytecode_cache = keep
        if saved is None:
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


# -- training -----------------------------------------------------------------------
def bench_single(seconds):
    g = nd.Graph()
    with g.as_default():
        train, _, _ = build_mlp()
        s = nd.Session()
        s.run(nd.global_variables_initializer())
    for _ in range(5):
        s.run(train)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        s.run(train)
        n += 1
    rate = n / (time.perf_counter() - t0)
    s.close()
    return rate


def bench_async(workers, seconds):
    """Steps/s of ``workers`` clients together, and the CPU ms per step of
    each process."""
    with LocalCluster(ps=1, workers=workers, progress=False) as cluster:
        graphs = []
        for i in range(workers):
            g = nd.Graph()
            with g.as_default():
                train, _, _ = build_mlp(i, cluster.cluster_spec)
                init = nd.global_variables_initializer()
            graphs.append((g, train, init))
        with nd.Session(cluster.target("worker", 0), graph=graphs[0][0]) as s:
            s.run(graphs[0][2])
        sessions = [nd.Session(cluster.target("worker", i), graph=graphs[i][0])
                    for i in range(workers)]
        try:
            for s, (_, train, _) in zip(sessions, graphs):
                for _ in range(5):
                    s.run(train)
            counts = [0] * workers
            stop = threading.Event()

            def loop(i):
                s, train = sessions[i], graphs[i][1]
                n = 0
                while not stop.is_set():
                    s.run(train)
                    n += 1
                counts[i] = n

            pids = {f"{t.job}{t.index}": t.pid for t in cluster.tasks}
            cpu0 = {k: _cpu_seconds(p) for k, p in pids.items()}
            me0 = _self_cpu()
            threads = [threading.Thread(target=loop, args=(i,)) for i in range(workers)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            time.sleep(seconds)
            stop.set()
            for t in threads:
                t.join(60)
            elapsed = time.perf_counter() - t0
            steps = sum(counts)
            cpu = {k: (_cpu_seconds(p) - cpu0[k]) / steps * 1e3 for k, p in pids.items()}
            cpu["client"] = (_self_cpu() - me0) / steps * 1e3
            return steps / elapsed, cpu
        finally:
            for s in sessions:
                s.close()


def bench_sync(seconds):
    """Global steps/s of SyncReplicasOptimizer with 2 workers of 2 (TF's usage:
    initial tokens, workers not in lockstep), read from the ps by a third
    session while both workers train."""
    stop, warm = threading.Event(), threading.Barrier(3, timeout=120)

    with LocalCluster(ps=1, workers=2, progress=False) as cluster:
        def worker(i):
            g = nd.Graph()
            with g.as_default():
                train, _, hook = build_mlp(i, cluster.cluster_spec,
                                           sync_replicas=(2, i == 0))
                config = nd.ConfigProto(
                    device_filters=["/job:ps", f"/job:worker/task:{i}"])
                try:
                    with nd.train.MonitoredTrainingSession(
                            master=cluster.target("worker", i), is_chief=i == 0,
                            hooks=[hook], config=config, log_step_count_steps=None,
                            max_wait_secs=120, max_recovery_attempts=0) as sess:
                        sess.run(train)
                        warm.wait()
                        while not stop.is_set():
                            sess.run(train)
                except (nd.errors.OpError, threading.BrokenBarrierError) as e:
                    # The last step of a worker may wait for the other one's
                    # gradient after it stopped: the cluster's shutdown ends it.
                    if not stop.is_set():
                        print(f"sync worker {i}: {type(e).__name__}: {e}",
                              flush=True)
                        warm.abort()

        threads = [threading.Thread(target=worker, args=(i,), daemon=True)
                   for i in range(2)]
        for t in threads:
            t.start()
        g = nd.Graph()
        with g.as_default(), nd.device("/job:ps/task:0"):
            gs = nd.train.get_or_create_global_step()
        with nd.Session(cluster.target("ps", 0), graph=g) as s:
            warm.wait()
            time.sleep(0.5)
            step0, t0 = s.run(gs), time.perf_counter()
            time.sleep(seconds)
            step1, t1 = s.run(gs), time.perf_counter()
        stop.set()
        for t in threads:
            t.join(2)
    for t in threads:
        t.join(30)
    return (step1 - step0) / (t1 - t0)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--repeats", type=int, default=5)
    flags = p.parse_args(argv)
    start = bench_startup(flags.repeats)
    start_src = bench_startup_compiling(flags.repeats)
    single = bench_single(flags.seconds)
    async1, cpu1 = bench_async(1, flags.seconds)
    async2, cpu2 = bench_async(2, flags.seconds)
    sync2 = bench_sync(flags.seconds)

    def s(runs, i, f):
        return f"{f([r[i] for r in runs]):8.2f} s"

    def cpu_str(cpu):
        return ", ".join(f"{k} {v:.1f}" for k, v in cpu.items())

    rows = [
        ("LocalCluster(ps=1, workers=2) to first step, best", s(start, 0, min),
         "<= 1.2 s (TF 7.3 s, dask 1.4 s)"),
        ("  median", s(start, 0, statistics.median), ""),
        ("  until all tasks answer (median)", s(start, 1, statistics.median),
         "<= 1 s (%cluster start's live view)"),
        ("  CPU used by the 3 tasks + the client (median)",
         (f"{statistics.median(r[2] for r in start):5.2f}+"
          f"{statistics.median(r[3] for r in start):.2f} s"),
         "/ 2 cores: the floor on an idle machine"),
        ("  same, tasks compiling nbdist (no .pyc), best", s(start_src, 0, min), ""),
        ("    median", s(start_src, 0, statistics.median), ""),
        ("    until all tasks answer (median)", s(start_src, 1, statistics.median), ""),
        ("    CPU used by the 3 tasks + the client (median)",
         (f"{statistics.median(r[2] for r in start_src):5.2f}+"
          f"{statistics.median(r[3] for r in start_src):.2f} s"), ""),
        ("MLP single process (Session(''))", f"{single:8.1f} /s", "baseline"),
        ("MLP async, 1 ps + 1 worker", f"{async1:8.1f} /s", ""),
        ("  CPU ms per step", "", cpu_str(cpu1)),
        ("MLP async, 1 ps + 2 workers", f"{async2:8.1f} /s", ">= 200 /s (TF 136)"),
        ("  CPU ms per step", "", cpu_str(cpu2)),
        ("MLP sync (SyncReplicas 2 of 2), 1 ps + 2 workers", f"{sync2:8.1f} /s",
         "global steps/s"),
    ]
    w = max(len(r[0]) for r in rows)
    print(f"{'case':<{w}} | {'measured':>12} | target / notes")
    print("-" * (w + 50))
    for name, val, target in rows:
        print(f"{name:<{w}} | {val:>12} | {target}")
    print(f"({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end)")


if __name__ == "__main__":
    main()
