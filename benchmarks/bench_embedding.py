"""Embedding training on parameter servers, with and without sparse updates.
Run on demand:

    python benchmarks/bench_embedding.py [--steps=30] [--batch=64] [--repeats=3]

A 100,000 x 64 float32 table, ``fixed_size_partitioner(2)`` over 2 ps tasks,
trained by 2 between-graph workers of an ``nd.LocalCluster(ps=2, workers=2)``
(``replica_device_setter``, ``GradientDescentOptimizer``, batches of
``--batch`` random ids, mean squared distance to random targets).

"sparse": the table's gradient is the ``IndexedSlices`` of ``gather`` and the
update is a ``ScatterSub`` on each ps: only the batch's rows travel.
"dense": the same program with each gradient converted to a dense tensor
before ``apply_gradients`` (what nbdist did before ``IndexedSlices``): each
step sends a whole shard-sized gradient to each ps.

Bytes per step: the outputs of the step's ``_Recv`` nodes (tensors that
crossed between tasks) in ``RunMetadata.step_stats`` under ``FULL_TRACE``,
averaged over 4 traced steps. Steps/s: both workers step concurrently (one
thread each) for ``--steps`` steps each after 3 warm-up steps; global steps
over wall time, the median of ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import nbdist as nd

ROWS, DIM = 100_000, 64


def build(spec, task, sparse):
    from nbdist.train.device_setter import replica_device_setter

    ids = nd.placeholder(nd.int64, [None], name="ids")
    targets = nd.placeholder(nd.float32, [None, DIM], name="targets")
    with nd.device(replica_device_setter(cluster=spec,
                                         worker_device=f"/job:worker/task:{task}")):
        with nd.variable_scope("emb", partitioner=nd.fixed_size_partitioner(2)):
            table = nd.get_variable(
                "table", [ROWS, DIM],
                initializer=nd.random_uniform_initializer(-1.0, 1.0, seed=7))
        emb = nd.nn.embedding_lookup(table, ids, partition_strategy="div")
        loss = 0.5 * nd.reduce_mean(nd.reduce_sum(nd.square(emb - targets), 1))
        opt = nd.train.GradientDescentOptimizer(0.5)
        gv = opt.compute_gradients(loss)
        if not sparse:
            gv = [(nd.convert_to_tensor(g), v) for g, v in gv]
        train = opt.apply_gradients(gv)
    return ids, targets, train


def cross_task_bytes(meta) -> int:
    return sum(o.tensor_description.allocated_bytes
               for dev in meta.step_stats.dev_stats for ns in dev.node_stats
               if ns.op_type == "_Recv" for o in ns.output)


def run(sparse: bool, steps: int, batch: int):
    cluster = nd.LocalCluster(ps=2, workers=2, progress=False, start_timeout=120)
    try:
        spec = cluster.cluster_spec
        workers = []
        for i in range(2):
            g = nd.Graph()
            with g.as_default():
                built = build(spec, i, sparse)
                init = nd.global_variables_initializer()
            sess = nd.Session(cluster.target("worker", i), graph=g)
            workers.append((built, sess))
            if i == 0:
                sess.run(init)
        rng = np.random.default_rng(0)
        feeds = [(rng.integers(0, ROWS, batch),
                  rng.standard_normal((batch, DIM)).astype(np.float32))
                 for _ in range(8)]
        opts = nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE)
        traced = []
        for k in range(4):
            (ids, targets, train), sess = workers[k % 2]
            meta = nd.RunMetadata()
            a, b = feeds[k]
            sess.run(train, {ids: a, targets: b}, options=opts, run_metadata=meta)
            traced.append(cross_task_bytes(meta))

        def loop(i, n, out):
            (ids, targets, train), sess = workers[i]
            for k in range(n):
                a, b = feeds[(k + i) % len(feeds)]
                sess.run(train, {ids: a, targets: b})
            out.append(n)

        done: list = []
        for i in range(2):
            loop(i, 3, done)  # warm-up
        done.clear()
        threads = [threading.Thread(target=loop, args=(i, steps, done))
                   for i in range(2)]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        elapsed = time.monotonic() - start
        for _, sess in workers:
            sess.close()
        return float(np.mean(traced)), sum(done) / elapsed
    finally:
        cluster.shutdown()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    results = {}
    for mode in ("sparse", "dense"):
        runs = [run(mode == "sparse", args.steps, args.batch)
                for _ in range(args.repeats)]
        results[mode] = (runs[0][0], statistics.median(r[1] for r in runs))
    print(f"embedding {ROWS} x {DIM} float32, 2 ps (fixed_size_partitioner(2)), "
          f"2 workers, batch {args.batch}, GradientDescent")
    print(f"{'updates':<8} {'bytes/step':>14} {'steps/s':>9}")
    for mode, (nbytes, rate) in results.items():
        print(f"{mode:<8} {nbytes:>14,.0f} {rate:>9.1f}")
    s, d = results["sparse"], results["dense"]
    print(f"sparse vs dense: {d[0] / s[0]:,.0f}x fewer bytes, "
          f"{s[1] / d[1]:.1f}x the steps/s")


if __name__ == "__main__":
    main()
