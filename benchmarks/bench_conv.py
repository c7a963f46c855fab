"""The classic MNIST conv net, one training step, nbdist vs TensorFlow, in one
process and on 1 ps + 2 workers. Run on demand:

    python benchmarks/bench_conv.py --tf_python=/path/to/tfvenv/bin/python
    python benchmarks/bench_conv.py --quick ...        # one short round, < 1 min
    python benchmarks/bench_conv.py [--steps=30] [--seconds=5] [--repeats=3]
        [--batch=64] [--threads=1] [--tf_threads=N] [--configs=1proc,1ps2w] [--cpu]

The program (``conv_net`` below) is written once with ``tf`` bound to
``nbdist`` or to ``tensorflow.compat.v1`` (eager off): 28x28x1 images ->
conv 5x5x32 (SAME) + relu -> max pool 2x2 -> conv 5x5x64 + relu -> max pool
2x2 -> dense 1024 + relu -> dropout (``keep_prob`` fed, 0.5) -> dense 10,
sparse softmax cross-entropy, ``GradientDescentOptimizer(0.01)``; batches fed
by ``feed_dict`` from 8 pre-generated random batches. A step is forward +
backward + SGD update.

Rows:

* one process, ``Session("")``: each framework in its own child process
  (``--tf_python`` picks the interpreter for TensorFlow's, default this one;
  TensorFlow is skipped when it does not import there); ``--steps`` timed
  steps after 3 warm-up steps; wall and CPU (all the child's threads)
  milliseconds per step.
* 1 ps + 2 workers, between-graph as TF1 programs train: variables on the ps by
  ``replica_device_setter``, each worker its own graph and its own
  ``Session(grpc://worker)`` (device filters: the ps and itself), the chief
  (worker 0) initialises, the other polls ``report_uninitialized_variables``.
  nbdist's tasks are an ``nd.LocalCluster(ps=1, workers=2)``; TensorFlow's are
  three ``tf.train.Server`` processes (started with ``--tf_python``). For
  both, each worker's client is a process of its own (a notebook's or a
  launcher's, beside the cluster), so the two frameworks run the same five
  processes. Both workers step concurrently; a window of ``--seconds`` is
  timed after both warmed up (bench_training.py's protocol, from
  ``_cluster_tasks.py``); ms/step is per worker (the mean of the two workers'
  window / steps), steps/s is global (both workers' steps / window), and CPU
  ms/step is the CPU time of all five processes per global step (``--cpu``
  breaks it down by process).
* a floor: the step's GEMM work as plain NumPy (each convolution and
  convolution gradient as im2col + one matmul, the dense layers' matmuls),
  with no pools, activations, dropout, graph, session or feeding. nbdist's
  own kernels use one GEMM per filter tap when there are 16+ channels, which
  can beat it.

Threads: every process runs BLAS with ``--threads`` threads
(``OMP/OPENBLAS/MKL_NUM_THREADS``, default 1, as bench_training.py caps BLAS)
and TensorFlow's intra- and inter-op pools are capped at ``--tf_threads``
(default: ``--threads``; 0 leaves TF's own defaults, as bench_training.py's
``--tf_threads`` does), so the numbers compare kernels and runtimes rather
than how many idle cores the machine has. Runs alternate (nbdist, TF, NumPy;
then nbdist's cluster, TF's cluster) ``--repeats`` times and the table shows
medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _children import free_port, importable
from _cluster_tasks import Task, step_in_window, time_window, wait_for_chief

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 180.0
CONFIGS = ("1proc", "1ps2w")
KEEP_PROB = 0.5


def conv_net(tf):
    """(train_op, loss, images, labels, keep_prob) of the MNIST conv net, built
    with ``tf``."""
    images = tf.placeholder(tf.float32, [None, 28, 28, 1], name="images")
    labels = tf.placeholder(tf.int64, [None], name="labels")
    keep_prob = tf.placeholder(tf.float32, [], name="keep_prob")

    def weight(shape):
        return tf.Variable(tf.truncated_normal(shape, stddev=0.1, seed=1))

    def bias(n):
        return tf.Variable(tf.constant(0.1, shape=[n]))

    def conv_pool(x, w, b):
        y = tf.nn.relu(tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME") + b)
        return tf.nn.max_pool(y, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")

    h1 = conv_pool(images, weight([5, 5, 1, 32]), bias(32))
    h2 = conv_pool(h1, weight([5, 5, 32, 64]), bias(64))
    flat = tf.reshape(h2, [-1, 7 * 7 * 64])
    fc = tf.nn.relu(tf.matmul(flat, weight([7 * 7 * 64, 1024])) + bias(1024))
    logits = tf.matmul(tf.nn.dropout(fc, keep_prob), weight([1024, 10])) + bias(10)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    return train_op, loss, images, labels, keep_prob


def batches(np, batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [(rng.random((batch, 28, 28, 1), np.float32),
             rng.integers(0, 10, batch).astype(np.int64)) for _ in range(8)]


def import_framework(framework: str, tf_threads: int):
    """(the module bound to ``tf``, kwargs capping TF's thread pools)."""
    if framework == "tensorflow":
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
        pools = ({"intra_op_parallelism_threads": tf_threads,
                  "inter_op_parallelism_threads": tf_threads} if tf_threads else {})
        return tf, pools
    import nbdist as tf

    return tf, {}


def time_framework(framework: str, batch: int, steps: int, tf_threads: int):
    """(wall, CPU) seconds per training step of ``framework`` (in this process)."""
    import numpy as np

    tf, pools = import_framework(framework, tf_threads)
    config = tf.ConfigProto(**pools) if pools else None
    data = batches(np, batch)
    with tf.Graph().as_default():
        train_op, loss, images, labels, keep_prob = conv_net(tf)
        init = tf.global_variables_initializer()
        with tf.Session(config=config) as sess:
            sess.run(init)

            def step(i):
                x, y = data[i % len(data)]
                sess.run(train_op, {images: x, labels: y, keep_prob: KEEP_PROB})

            for i in range(3):
                step(i)
            start, cpu = time.perf_counter(), time.process_time()
            for i in range(steps):
                step(i)
            return ((time.perf_counter() - start) / steps,
                    (time.process_time() - cpu) / steps)


def time_numpy_floor(batch: int, steps: int):
    """Seconds per step of the network's GEMM work as bare NumPy: each
    convolution (forward, filter gradient, conv2's input gradient) as im2col +
    one matmul, and the dense layers' six matmuls; no pools, activations,
    graph, session or feeding."""
    import time

    import numpy as np
    from numpy.lib.stride_tricks import as_strided

    rng = np.random.default_rng(0)
    x1 = rng.random((batch, 28, 28, 1), np.float32)
    x2 = rng.random((batch, 14, 14, 32), np.float32)
    w1 = rng.standard_normal((25 * 1, 32), np.float32)
    w2 = rng.standard_normal((25 * 32, 64), np.float32)
    d1 = rng.random((batch * 28 * 28, 32), np.float32)
    d2 = rng.random((batch * 14 * 14, 64), np.float32)
    f = rng.random((batch, 3136), np.float32)
    w3 = rng.standard_normal((3136, 1024), np.float32)
    w4 = rng.standard_normal((1024, 10), np.float32)
    h = rng.random((batch, 1024), np.float32)
    d = rng.random((batch, 10), np.float32)

    def cols(x):  # SAME 5x5 windows, stride 1: [N*H*W, 25*C]
        xp = np.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0)))
        n, hp, wp, c = xp.shape
        s = xp.strides
        win = as_strided(xp, (n, hp - 4, wp - 4, 5, 5, c),
                         (s[0], s[1], s[2], s[1], s[2], s[3]))
        return win.reshape(-1, 25 * c)

    def col2im(c, shape):
        n, hh, ww, ch = shape
        c = c.reshape(n, hh, ww, 5, 5, ch)
        xp = np.zeros((n, hh + 4, ww + 4, ch), c.dtype)
        for i in range(5):
            for j in range(5):
                xp[:, i:i + hh, j:j + ww] += c[:, :, :, i, j]
        return xp[:, 2:-2, 2:-2]

    def step():
        c1, c2 = cols(x1), cols(x2)
        np.dot(c1, w1), np.dot(c2, w2)                        # forward
        np.dot(c1.T, d1), np.dot(c2.T, d2)                    # filter gradients
        col2im(np.dot(d2, w2.T), x2.shape)                    # conv2 input gradient
        np.dot(np.dot(f, w3), w4)                             # dense forward
        np.dot(h.T, d), np.dot(d, w4.T)                       # dense backward
        np.dot(f.T, h), np.dot(h, w3.T)

    for _ in range(3):
        step()
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    return ((time.perf_counter() - start) / steps,
            (time.process_time() - cpu) / steps)



def child_main(framework: str, batch: int, steps: int, tf_threads: int) -> None:
    if framework == "numpy":
        wall, cpu = time_numpy_floor(batch, steps)
    else:
        wall, cpu = time_framework(framework, batch, steps, tf_threads)
    print(json.dumps({"ms": wall * 1000, "cpu_ms": cpu * 1000}), flush=True)


def child_env(threads: int) -> dict:
    """Environment of every process the benchmark starts: BLAS capped, this
    checkout first on the path, TF quiet."""
    n = str(threads)
    return dict(os.environ, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n,
                MKL_NUM_THREADS=n, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1",
                PYTHONPATH=os.pathsep.join(
                    [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))


def run_child(python: str, framework: str, args) -> dict | None:
    cmd = [python, str(Path(__file__).resolve()), "--child", framework,
           f"--batch={args.batch}", f"--steps={args.steps}",
           f"--tf_threads={args.tf_threads}"]
    r = subprocess.run(cmd, env=child_env(args.threads), capture_output=True,
                       text=True, check=False, timeout=1800)
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    sys.stderr.write(f"{framework} failed:\n{r.stderr[-2000:]}\n")
    return None


# -- 1 ps + 2 workers ----------------------------------------------------------------
def cluster_child(role: str, framework: str, cluster: dict, job: str, index: int,
                  target: str, warmup: float, batch: int, tf_threads: int) -> None:
    """A TensorFlow server task (``role`` "server"), or worker ``index``'s client
    (``role`` "client": the between-graph program, stepping in the window)."""
    import numpy as np

    tf, pools = import_framework(framework, tf_threads)
    spec = tf.train.ClusterSpec(cluster)
    if role == "server":
        server = tf.train.Server(spec, job_name=job, task_index=index,
                                 config=tf.ConfigProto(**pools) if pools else None)
        print("ready", flush=True)
        server.join()
        return
    data = batches(np, batch, seed=index)
    setter = tf.train.replica_device_setter(
        cluster=spec, worker_device=f"/job:worker/task:{index}")
    with tf.Graph().as_default():
        with tf.device(setter):
            train_op, loss, images, labels, keep_prob = conv_net(tf)
            init = tf.global_variables_initializer()
            uninitialized = tf.report_uninitialized_variables()
        config = tf.ConfigProto(
            device_filters=["/job:ps", f"/job:worker/task:{index}"], **pools)
        # TF's servers start beside this client (importing TF is most of a
        # cluster run): its master must listen before the session is made.
        wait_for_port(target, time.monotonic() + START_TIMEOUT_S)
        sess = tf.Session(target, config=config)
        wait_for_chief(sess, init, uninitialized, index, START_TIMEOUT_S)
        x0, y0 = data[0]
        loss0 = sess.run(loss, {images: x0, labels: y0, keep_prob: 1.0})

        def step(i):
            x, y = data[i % len(data)]
            sess.run(train_op, {images: x, labels: y, keep_prob: KEEP_PROB})

        steps = step_in_window(step, warmup, min_warm_steps=3)
        loss1 = sess.run(loss, {images: x0, labels: y0, keep_prob: 1.0})
        print(f"steps {steps} loss {loss0} {loss1}", flush=True)
        sess.close()


def wait_for_port(target: str, deadline: float) -> None:
    """Return once ``target`` (grpc://host:port) accepts a TCP connection."""
    import socket

    host, port = target.split("://")[-1].rsplit(":", 1)
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def cluster_task(python: str, role: str, framework: str, cluster: dict, job: str,
                 index: int, target: str, args) -> Task:
    spec = json.dumps({"role": role, "framework": framework, "cluster": cluster,
                       "job": job, "index": index, "target": target,
                       "warmup": args.warmup, "batch": args.batch,
                       "tf_threads": args.tf_threads})
    name = f"{job}{index}" if role == "server" else f"client{index}"
    return Task(name, [python, str(Path(__file__).resolve()), "--cluster_child", spec],
                child_env(args.threads), cwd=ROOT)


def run_cluster(framework: str, python: str, args) -> dict:
    """One run on 1 ps + 2 workers: {"ms": per-worker ms/step, "rate": global
    steps/s, "cpu_ms": CPU ms per global step of all processes, "per": by
    process}."""
    tasks: list[Task] = []
    servers: list[Task] = []  # TensorFlow's (nbdist's are the LocalCluster's)
    local = None
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        pids: dict[str, int] = {}
        if framework == "nbdist":
            import nbdist as nd

            # LocalCluster's tasks inherit this process's environment.
            os.environ.update({k: v for k, v in child_env(args.threads).items()
                               if k.endswith("_NUM_THREADS")})
            local = nd.LocalCluster(ps=1, workers=2, progress=False,
                                    start_timeout=START_TIMEOUT_S)
            cluster = local.cluster_spec.as_dict()
            targets = [local.target("worker", i) for i in range(2)]
            pids = {f"{t.job}{t.index}": t.pid for t in local.tasks}
        else:
            cluster = {"ps": [f"127.0.0.1:{free_port()}"],
                       "worker": [f"127.0.0.1:{free_port()}" for _ in range(2)]}
            servers = [cluster_task(python, "server", framework, cluster, job, i, "",
                                    args)
                       for job, n in (("ps", 1), ("worker", 2)) for i in range(n)]
            tasks += servers
            targets = [f"grpc://{a}" for a in cluster["worker"]]
            pids = {t.name: t.pid for t in servers}
        clients = [cluster_task(python, "client", framework, cluster, "worker", i,
                                targets[i], args) for i in range(2)]
        tasks += clients
        for s in servers:  # started with the clients, which wait for them
            s.expect("ready", deadline)
        pids.update({c.name: c.pid for c in clients})
        reports, cpu_s = time_window(clients, pids, args.seconds, deadline)
        counts = []
        for c, (n, _, loss0, loss1) in zip(clients, reports):
            if not (float(loss0) == float(loss0) and float(loss1) == float(loss1)):
                raise RuntimeError(f"{framework} {c.name}: loss {loss0} -> {loss1}")
            counts.append(int(n))
        if not all(counts):
            raise RuntimeError(f"{framework} cluster: a worker had no step in the "
                               f"window ({counts}); try a longer --seconds")
        total = sum(counts)
        per = {k: v / total * 1e3 for k, v in cpu_s.items()}
        return {"ms": statistics.mean(args.seconds / n * 1e3 for n in counts),
                "rate": total / args.seconds, "cpu_ms": sum(per.values()),
                "per": per}
    finally:
        for t in reversed(tasks):
            t.stop()
        if local is not None:
            local.shutdown()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30,
                   help="timed steps per one-process run")
    p.add_argument("--seconds", type=float, default=5.0,
                   help="timed window per cluster run")
    p.add_argument("--warmup", type=float, default=1.0,
                   help="seconds a cluster worker steps before it is warm")
    p.add_argument("--repeats", type=int, default=3, help="runs per framework")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=1,
                   help="BLAS threads per process (and TF's pools, see --tf_threads)")
    p.add_argument("--tf_threads", type=int, default=None,
                   help="cap TF's intra/inter-op pools at N threads per process "
                   "(default: --threads; 0: TF's own defaults)")
    p.add_argument("--configs", default=",".join(CONFIGS),
                   help="subset of 1proc,1ps2w")
    p.add_argument("--quick", action="store_true",
                   help="one short round (--repeats=1 --steps=5 --seconds=2)")
    p.add_argument("--cpu", action="store_true",
                   help="print the cluster's CPU ms per global step by process")
    p.add_argument("--tf_python", default=sys.executable,
                   help="the Python interpreter that imports tensorflow")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.tf_threads is None:
        args.tf_threads = args.threads
    if args.child:
        child_main(args.child, args.batch, args.steps, args.tf_threads)
        return 0
    if args.quick:
        args.repeats, args.steps, args.seconds = 1, 5, 2.0
    configs = [c for c in args.configs.split(",") if c]
    if bad := [c for c in configs if c not in CONFIGS]:
        p.error(f"unknown configs {bad}: expected {list(CONFIGS)}")
    frameworks = [("nbdist", sys.executable), ("numpy", sys.executable)]
    note = ""
    if importable(args.tf_python, "tensorflow"):
        frameworks.insert(1, ("tensorflow", args.tf_python))
    else:
        note = "(tensorflow does not import with --tf_python: no TF column)"
    load0 = os.getloadavg()[0]
    runs: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.repeats):
        for config in configs:
            for fw, python in frameworks:
                if config == "1proc":
                    result = run_child(python, fw, args)
                elif fw == "numpy":
                    continue
                else:
                    result = run_cluster(fw, python, args)
                if result is not None:
                    runs.setdefault((fw, config), []).append(result)
    med = {key: {k: statistics.median(r[k] for r in v) for k in ("ms", "cpu_ms")}
           for key, v in runs.items()}

    tf_pools = "TF's default" if not args.tf_threads else str(args.tf_threads)
    print(f"MNIST conv net training step, batch {args.batch}; BLAS {args.threads} "
          f"thread(s) per process, TF pools {tf_pools}; median of {args.repeats} "
          f"run(s) ({args.steps} steps in one process, {args.seconds:g} s windows "
          "on the cluster)")
    labels = {"1proc": 'one process, Session("")',
              "1ps2w": "1 ps + 2 workers, per worker"}
    head = ("", "TF ms/step", "nbdist ms/step", "nbdist/TF", "TF steps/s",
            "nbdist steps/s", "TF CPU ms/step", "nbdist CPU ms/step")

    def fmt(x, spec):
        return "-" if x is None else format(x, spec)

    rows = []
    for config in configs:
        tf, nb = med.get(("tensorflow", config)), med.get(("nbdist", config))
        if config == "1proc":
            rate = {k: (1e3 / m["ms"] if m else None)
                    for k, m in (("tf", tf), ("nb", nb))}
        else:
            rate = {k: (statistics.median(r["rate"] for r in runs[(fw, config)])
                        if (fw, config) in runs else None)
                    for k, fw in (("tf", "tensorflow"), ("nb", "nbdist"))}
        ratio = f"{nb['ms'] / tf['ms']:.2f}x" if tf and nb else "-"
        rows.append((labels[config], fmt(tf and tf["ms"], ".1f"),
                     fmt(nb and nb["ms"], ".1f"), ratio,
                     fmt(rate["tf"], ".1f"), fmt(rate["nb"], ".1f"),
                     fmt(tf and tf["cpu_ms"], ".1f"), fmt(nb and nb["cpu_ms"], ".1f")))
    if ("numpy", "1proc") in med:
        m = med[("numpy", "1proc")]
        # The floor's figures sit in nbdist's columns (it is what nbdist's
        # kernels could reach), with no TF figure or ratio.
        rows.append(("NumPy im2col+GEMM floor, 1 proc", "-", f"{m['ms']:.1f}", "-",
                     "-", f"{1e3 / m['ms']:.1f}", "-", f"{m['cpu_ms']:.1f}"))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print(" | ".join(c.rjust(w) if i else c.ljust(w)
                     for i, (c, w) in enumerate(zip(head, widths))))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(c.rjust(w) if i else c.ljust(w)
                         for i, (c, w) in enumerate(zip(r, widths))))
    print("(nbdist/TF: ms/step ratio, above 1 = nbdist slower; cluster steps/s are "
          "global, both workers; cluster CPU ms/step: all five processes per "
          "global step)")
    if note:
        print(note)
    if args.cpu:
        print("cluster CPU ms per global step, by process (median of runs):")
        for (fw, config), rs in runs.items():
            if config == "1ps2w":
                per = {k: statistics.median(r["per"][k] for r in rs)
                       for k in rs[0]["per"]}
                print(f"  {fw:10} " + ", ".join(f"{k} {v:.1f}"
                                                 for k, v in per.items()))
    print(f"(load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the "
          f"end, {os.cpu_count()} CPUs: figures from a busy machine are noisy)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--cluster_child":
        c = json.loads(sys.argv[2])
        cluster_child(c["role"], c["framework"], c["cluster"], c["job"], c["index"],
                      c["target"], c["warmup"], c["batch"], c["tf_threads"])
    else:
        sys.exit(main())
