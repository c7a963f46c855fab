"""Side-by-side training (issue 11). Run on demand:

    python benchmarks/bench_training.py [--seconds=5] [--repeats=3]
    /tmp/nb/tfvenv/bin/python benchmarks/bench_training.py   # with TensorFlow

Runs the classic between-graph ``trainer.py`` program on nbdist and, when
``tensorflow`` is importable (``pip install 'nbdist[peers]'``), on TensorFlow
(``tensorflow.compat.v1``, eager off) in the same run, and prints ONE table:
global steps/s of each and nbdist's ratio to TF, for one process
(``Session("")``), 1 ps + 1 worker and 1 ps + 2 workers.

The program is written once (``trainer`` below); only the module bound to
``tf`` changes. An MLP 784-256-10 (relu hidden layer), sparse softmax
cross-entropy, ``GradientDescentOptimizer(0.01)``, batch 128 fed by
``feed_dict`` from 16 pre-generated random batches, variables on the ps by
``replica_device_setter``. One OS process per task, spawned with
``sys.executable`` and stopped by PID: the ps task a ``Server`` that joins;
each worker a ``Server`` and a plain ``Session(server.target)`` (device
filters: the ps and itself). The chief (worker 0) initialises the variables;
the other workers poll ``report_uninitialized_variables`` until it is empty.
BLAS runs one thread per process (``OMP/OPENBLAS/MKL_NUM_THREADS=1``);
TensorFlow's own thread pools keep their defaults, as in a user's program.

Measurement: after every worker of a run has warmed up, a window of
``--seconds`` is timed; each worker counts the steps it finished inside it
(time stamps on the system-wide monotonic clock), summed over workers. The
frameworks alternate (nbdist, TF, nbdist, TF ... ``--repeats`` rounds per
config) and the median of each is shown. ``--cpu`` also prints the CPU
milliseconds each process spent per global step in the window (from
``/proc``): where the time goes.

``--frameworks=nbdist`` / ``--configs=1ps2w`` run subsets.
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

import numpy as np
from _children import free_port
from _cluster_tasks import Task, step_in_window, time_window, wait_for_chief

ROOT = Path(__file__).resolve().parent.parent
BATCH = 128
BATCHES = 16
START_TIMEOUT_S = 120.0
CONFIGS = {"1proc": (0, 0), "1ps1w": (1, 1), "1ps2w": (1, 2)}
LABELS = {
    "1proc": 'one process, Session("")',
    "1ps1w": "1 ps + 1 worker",
    "1ps2w": "1 ps + 2 workers",
}
FRAMEWORKS = ("nbdist", "tf")


# -- the program (run in each child process) --------------------------------------------
def trainer(framework: str, cluster: dict | None, job: str, index: int, warmup: float):
    """The classic between-graph trainer; reports over stdout/stdin to the parent."""
    if framework == "tf":
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
    else:
        import nbdist as tf

    # --tf_threads: TF's thread pools capped as BLAS is (same cores for both).
    threads = int(os.environ.get("BENCH_TF_THREADS", "0")) if framework == "tf" else 0
    pools = ({"intra_op_parallelism_threads": threads,
              "inter_op_parallelism_threads": threads} if threads else {})
    if cluster:
        spec = tf.train.ClusterSpec(cluster)
        server = tf.train.Server(spec, job_name=job, task_index=index,
                                 config=tf.ConfigProto(**pools) if pools else None)
        if job == "ps":
            print("ready", flush=True)
            server.join()
            return
        target = server.target
        setter = tf.train.replica_device_setter(
            cluster=spec, worker_device=f"/job:worker/task:{index}"
        )
        config = tf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"],
                                **pools)
    else:
        target, setter = "", None
        config = tf.ConfigProto(**pools) if pools else None

    rng = np.random.default_rng(index)
    xs = rng.standard_normal((BATCHES, BATCH, 784)).astype(np.float32)
    ys = rng.integers(0, 10, (BATCHES, BATCH)).astype(np.int64)
    with tf.device(setter):
        x = tf.placeholder(tf.float32, [None, 784])
        y = tf.placeholder(tf.int64, [None])
        w1 = tf.Variable(tf.truncated_normal([784, 256], stddev=0.05), name="w1")
        b1 = tf.Variable(tf.zeros([256]), name="b1")
        w2 = tf.Variable(tf.truncated_normal([256, 10], stddev=0.05), name="w2")
        b2 = tf.Variable(tf.zeros([10]), name="b2")
        hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
        logits = tf.matmul(hidden, w2) + b2
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = tf.global_variables_initializer()
        uninitialized = tf.report_uninitialized_variables()

    sess = tf.Session(target, config=config)
    wait_for_chief(sess, init, uninitialized, index, START_TIMEOUT_S)
    loss0 = sess.run(loss, {x: xs[0], y: ys[0]})
    steps = step_in_window(
        lambda step: sess.run(train_op, {x: xs[step % BATCHES], y: ys[step % BATCHES]}),
        warmup,
    )
    loss1 = sess.run(loss, {x: xs[0], y: ys[0]})
    print(f"steps {steps} loss {loss0} {loss1}", flush=True)
    sess.close()


# -- the parent ----------------------------------------------------------------------------
def trainer_task(framework, cluster, job, index, warmup) -> Task:
    """One child process running ``trainer`` (BLAS one thread)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    args = [framework, json.dumps(cluster), job, str(index), str(warmup)]
    return Task(f"{job}{index}", [sys.executable, __file__, "--child", *args], env,
                cwd=ROOT)


def run_once(framework: str, config: str, seconds: float, warmup: float):
    """(global steps/s, {task: CPU ms per global step}) of one run."""
    n_ps, n_workers = CONFIGS[config]
    cluster = None
    if n_ps:
        cluster = {
            "ps": [f"127.0.0.1:{free_port()}" for _ in range(n_ps)],
            "worker": [f"127.0.0.1:{free_port()}" for _ in range(n_workers)],
        }
    tasks: list[Task] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        for i in range(n_ps):
            tasks.append(trainer_task(framework, cluster, "ps", i, warmup))
            tasks[-1].expect("ready", deadline)
        workers = [
            trainer_task(framework, cluster, "worker", i, warmup)
            for i in range(max(n_workers, 1))
        ]
        tasks += workers
        reports, cpu_s = time_window(
            workers, {t.name: t.pid for t in tasks}, seconds, deadline
        )
        steps = 0
        for w, (n, _, loss0, loss1) in zip(workers, reports):
            if not (np.isfinite(float(loss1)) and float(loss1) < float(loss0)):
                raise RuntimeError(f"{w.name}: loss went {loss0} -> {loss1}")
            steps += int(n)
        if not steps:
            raise RuntimeError(f"{framework} {config}: no step inside the window")
        cpu = {k: v / steps * 1e3 for k, v in cpu_s.items()}
        return steps / seconds, cpu
    finally:
        for t in reversed(tasks):
            t.stop()


def tf_importable() -> bool:
    """Whether TensorFlow imports, checked in a child (importing it here would
    load it into the parent for nothing)."""
    r = subprocess.run(
        [sys.executable, "-c", "import tensorflow.compat.v1"],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        capture_output=True,
        check=False,
    )
    return r.returncode == 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="timed window per run")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds before it")
    p.add_argument("--repeats", type=int, default=3, help="runs per framework/config")
    p.add_argument("--frameworks", default="nbdist,tf", help="subset of nbdist,tf")
    p.add_argument("--tf_threads", type=int, default=0,
                   help="cap TF's intra/inter-op pools at N threads per process, as "
                   "BLAS is capped at 1 (default: TF's own defaults, as a user runs it)")
    p.add_argument(
        "--configs", default=",".join(CONFIGS), help="subset of 1proc,1ps1w,1ps2w"
    )
    p.add_argument(
        "--cpu", action="store_true", help="print CPU ms per step per process"
    )
    args = p.parse_args(argv)
    if args.tf_threads:
        os.environ["BENCH_TF_THREADS"] = str(args.tf_threads)  # for the children
    frameworks = [f for f in args.frameworks.split(",") if f]
    configs = [c for c in args.configs.split(",") if c]
    bad = [f for f in frameworks if f not in FRAMEWORKS] + [
        c for c in configs if c not in CONFIGS
    ]
    if bad:
        p.error(
            f"unknown framework/config {bad}: expected {FRAMEWORKS} / {list(CONFIGS)}"
        )
    note = ""
    if "tf" in frameworks and not tf_importable():
        frameworks.remove("tf")
        note = (
            "(tensorflow is not importable: no TF columns; pip install 'nbdist[peers]')"
        )
        if not frameworks:
            p.error("tensorflow is not importable and no other framework was chosen")

    from tqdm.auto import tqdm

    load0 = os.getloadavg()[0]
    rates: dict = {}
    cpus: dict = {}
    with tqdm(
        total=len(configs) * args.repeats * len(frameworks), file=sys.stderr
    ) as bar:
        for config in configs:
            for _ in range(args.repeats):
                for fw in frameworks:
                    bar.set_description(f"{config} {fw}")
                    rate, cpu = run_once(fw, config, args.seconds, args.warmup)
                    rates.setdefault((fw, config), []).append(rate)
                    cpus.setdefault((fw, config), []).append(cpu)
                    bar.update()

    def rate(fw, config):
        runs = rates.get((fw, config))
        return statistics.median(runs) if runs else None

    rows = []
    for config in configs:
        tf_r, nb_r = rate("tf", config), rate("nbdist", config)
        rows.append(
            (
                LABELS[config],
                "-" if tf_r is None else f"{tf_r:.0f}",
                "-" if nb_r is None else f"{nb_r:.0f}",
                "-" if tf_r is None or nb_r is None else f"{nb_r / tf_r:.2f}x",
            )
        )
    head = ("config", "TF steps/s", "nbdist steps/s", "nbdist / TF")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print(" | ".join(c.ljust(w) for c, w in zip(head, widths)))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths)))
    if note:
        print(note)
    if args.cpu:
        print("CPU ms per global step, per process (median of runs):")
        for (fw, config), runs in cpus.items():
            per = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(
                f"  {fw:6} {LABELS[config]:<26} "
                + ", ".join(f"{k} {v:.2f}" for k, v in per.items())
            )
    print(
        f"(median of {args.repeats} alternating runs, {args.seconds:g} s windows; "
        f"load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, "
        f"{os.cpu_count()} CPUs: figures from a busy machine are noisy)"
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        fw, cluster_json, job, index, warmup = sys.argv[2:7]
        trainer(fw, json.loads(cluster_json), job, int(index), float(warmup))
    else:
        sys.exit(main())
