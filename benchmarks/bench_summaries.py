"""Per-step cost of TensorBoard summaries, nbdist vs TensorFlow. Run on demand:

    python benchmarks/bench_summaries.py [--steps=300] [--repeats=3]
        [--tf_python=/work/tfvenv/bin/python]

The program (``program`` below, written once; only the module bound to ``tf``
changes): a 1000-element variable ``w`` updated every step by
``assign_add(w, 0.01 * (noise - w))`` (the "train op"), and a
``merge_all()`` of 4 scalars (mean, max, min, norm of ``w``) and 2 histograms
(``w`` and ``noise``, 1000 elements each). A "plain" step runs the train op; a
"summary" step fetches ``[train_op, merged]`` and calls
``FileWriter.add_summary(summary, step)``. The figure is the extra time of a
summary step over a plain step, in ms: blocks of ``--steps`` plain and summary
steps alternate inside one process, and the fastest summary block minus the
fastest plain block, per step, is shown (the fastest block is the one least
disturbed by other processes: on a shared machine a median mostly measures
the neighbours), with the plain step's own time. The same difference in
CPU time of the worker process (all its threads; ``time.process_time``) is
shown too: it holds on a busy machine, where wall time is mostly waiting
for a core. "unqueued" is the wall time less the time the stepping thread
waited in the run queue for a core (``/proc/thread-self/schedstat``): the
step as it runs when not preempted (for TF, whose pools run ops on other
threads too, only the stepping thread's wait is taken off).

Configs: one process (``Session("")``) and 1 ps + 1 worker (``w`` on the ps
by ``replica_device_setter``, the summaries on the worker). Each framework runs
in its own OS processes (nbdist with this interpreter, TensorFlow with
``--tf_python``, default the first of ``$TF_PYTHON``, ``/work/tfvenv/bin/python``
and this interpreter that imports ``tensorflow``); frameworks alternate,
``--repeats`` rounds per config, and the median is shown.
``--nbdist_before=/path/to/other/checkout`` adds a column for another nbdist
tree (run with its directory first on ``PYTHONPATH``), interleaved with the
others: before/after figures from the same minutes of a busy machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from _children import free_port, stop_by_pid

ROOT = Path(__file__).resolve().parent.parent
SIZE = 1000
START_TIMEOUT_S = 120.0
CONFIGS = {"1proc": 0, "1ps1w": 1}
LABELS = {"1proc": 'one process, Session("")', "1ps1w": "1 ps + 1 worker"}


# -- the program (run in each child process) -------------------------------------------
def program(framework: str, cluster: dict | None, job: str, steps: int, blocks: int):
    if framework == "tf":
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
    else:
        import nbdist as tf

    if cluster:
        spec = tf.train.ClusterSpec(cluster)
        server = tf.train.Server(spec, job_name=job, task_index=0)
        if job == "ps":
            print("ready", flush=True)
            server.join()
            return
        target = server.target
        setter = tf.train.replica_device_setter(
            cluster=spec, worker_device="/job:worker/task:0"
        )
    else:
        target, setter = "", None

    with tf.device(setter):
        w = tf.Variable(tf.zeros([SIZE]), name="w")
        noise = tf.random_normal([SIZE], seed=1)
        train_op = tf.assign_add(w, 0.01 * (noise - w))
        tf.summary.scalar("w_mean", tf.reduce_mean(w))
        tf.summary.scalar("w_max", tf.reduce_max(w))
        tf.summary.scalar("w_min", tf.reduce_min(w))
        tf.summary.scalar("w_norm", tf.sqrt(tf.reduce_sum(w * w)))
        tf.summary.histogram("w", w)
        tf.summary.histogram("noise", noise)
        merged = tf.summary.merge_all()
        init = tf.global_variables_initializer()

    logdir = tempfile.mkdtemp(prefix=f"bench_summaries_{framework}_")
    sess = tf.Session(target)
    sess.run(init)
    writer = tf.summary.FileWriter(logdir)
    step = 0

    def plain_step():
        sess.run(train_op)

    def summary_step():
        _, summary = sess.run([train_op, merged])
        writer.add_summary(summary, step)

    def block(run_step):
        """(wall, CPU, wall less the stepping thread's wait for a core) seconds."""
        nonlocal step
        q0 = runqueue_wait()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            run_step()
            step += 1
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        return wall, cpu, wall - (runqueue_wait() - q0)

    def plain_block():
        return block(plain_step)

    def summary_block():
        return block(summary_step)

    plain_block()  # warm up both paths
    summary_block()
    summary, plain = [], []
    for i in range(blocks):
        # Alternate which block goes first, so drift in load counts for neither.
        if i % 2:
            plain.append(plain_block())
            summary.append(summary_block())
        else:
            summary.append(summary_block())
            plain.append(plain_block())
    writer.close()
    sess.close()
    def fastest(blocks, i):
        return min(b[i] for b in blocks) / steps * 1e3

    result = {
        "extra_ms": fastest(summary, 0) - fastest(plain, 0),
        "plain_ms": fastest(plain, 0),
        "extra_cpu_ms": fastest(summary, 1) - fastest(plain, 1),
        "extra_oncpu_ms": fastest(summary, 2) - fastest(plain, 2),
    }
    print("result " + json.dumps(result), flush=True)


def runqueue_wait() -> float:
    """Seconds this thread has waited for a core (Linux schedstat; else 0)."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except OSError:
        return 0.0


# -- the parent ------------------------------------------------------------------------
class Task:
    """One child process running ``program``; stopped by PID (SIGTERM, SIGKILL)."""

    def __init__(self, python, framework, cluster, job, steps, blocks, path=None):
        env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
        if path:
            env["PYTHONPATH"] = path
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = "1"
        self.name = f"{framework}-{job}"
        self.err = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed in stop()
        args = [framework, json.dumps(cluster), job, str(steps), str(blocks)]
        self.proc = subprocess.Popen(
            [python, __file__, "--child", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        with contextlib.suppress(ValueError, OSError):
            for line in self.proc.stdout:
                self.lines.put(line)
        self.lines.put("")

    def expect(self, word: str, deadline: float) -> str:
        """The rest of the child's next line starting with ``word``."""
        with contextlib.suppress(queue.Empty):
            while (left := deadline - time.monotonic()) > 0:
                line = self.lines.get(timeout=left)
                if not line:
                    break
                if line.split(" ", 1)[0].strip() == word:
                    return line[len(word):].strip()
        stop_by_pid(self.proc)
        self.err.seek(0)
        tail = self.err.read()[-2000:]
        self.stop()
        raise RuntimeError(f"{self.name} did not report {word!r}; stderr:\n{tail}")

    def stop(self):
        stop_by_pid(self.proc)
        for f in (self.proc.stdout, self.err):
            with contextlib.suppress(Exception):
                f.close()


def run_once(python, framework, config, steps, blocks, path=None) -> dict:
    cluster = None
    if CONFIGS[config]:
        cluster = {
            "ps": [f"127.0.0.1:{free_port()}"],
            "worker": [f"127.0.0.1:{free_port()}"],
        }
    tasks: list[Task] = []
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        if cluster:
            tasks.append(Task(python, framework, cluster, "ps", steps, blocks, path))
            tasks[-1].expect("ready", deadline)
        tasks.append(Task(python, framework, cluster, "worker", steps, blocks, path))
        return json.loads(tasks[-1].expect("result", deadline + 600))
    finally:
        for t in reversed(tasks):
            t.stop()


def find_tf_python(flag: str | None) -> str | None:
    """The first interpreter of ``flag``, ``$TF_PYTHON``, /work/tfvenv and this
    one that imports TensorFlow (checked in a child)."""
    candidates = [flag] if flag else [
        os.environ.get("TF_PYTHON"), "/work/tfvenv/bin/python", sys.executable
    ]
    for python in candidates:
        if not python or not os.path.exists(python):
            continue
        r = subprocess.run(
            [python, "-c", "import tensorflow.compat.v1"],
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
            capture_output=True,
            check=False,
        )
        if r.returncode == 0:
            return python
    return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300, help="steps per timed block")
    p.add_argument("--blocks", type=int, default=9, help="block pairs per run")
    p.add_argument("--repeats", type=int, default=3, help="runs per framework/config")
    p.add_argument("--frameworks", default="nbdist,tf", help="subset of nbdist,tf")
    p.add_argument("--configs", default=",".join(CONFIGS), help="subset of 1proc,1ps1w")
    p.add_argument("--tf_python", default=None, help="interpreter with tensorflow")
    p.add_argument("--nbdist_before", default=None,
                   help="another nbdist tree to compare with (its own column)")
    args = p.parse_args(argv)
    frameworks = [f for f in args.frameworks.split(",") if f]
    paths = {}
    if args.nbdist_before:
        frameworks.insert(0, "before")
        paths["before"] = os.path.abspath(args.nbdist_before)
    configs = [c for c in args.configs.split(",") if c]
    pythons = {"nbdist": sys.executable, "before": sys.executable}
    note = ""
    if "tf" in frameworks:
        tf_python = find_tf_python(args.tf_python)
        if tf_python is None:
            frameworks.remove("tf")
            note = "(tensorflow is not importable: no TF column; see --tf_python)"
        else:
            pythons["tf"] = tf_python
    load0 = os.getloadavg()[0]
    runs: dict = {}
    for config in configs:
        for _ in range(args.repeats):
            for fw in frameworks:
                r = run_once(pythons[fw], "nbdist" if fw == "before" else fw, config,
                             args.steps, args.blocks, paths.get(fw))
                runs.setdefault((fw, config), []).append(r)
                print(f"  {config} {fw}: {r}", file=sys.stderr, flush=True)

    def med(fw, config, key):
        rs = runs.get((fw, config))
        return statistics.median(r[key] for r in rs) if rs else None

    def ms(v):
        return "-" if v is None else f"{v:.3f}"

    rows = []
    for config in configs:
        tf_x, nb_x = med("tf", config, "extra_ms"), med("nbdist", config, "extra_ms")
        row = [
            LABELS[config],
            ms(med("tf", config, "plain_ms")),
            ms(tf_x),
            ms(med("nbdist", config, "plain_ms")),
            ms(nb_x),
            "-" if tf_x is None or nb_x is None else f"{nb_x / tf_x:.2f}x",
        ]
        tf_c, nb_c = (med("tf", config, "extra_cpu_ms"),
                      med("nbdist", config, "extra_cpu_ms"))
        row += [ms(tf_c), ms(nb_c),
                "-" if tf_c is None or nb_c is None else f"{nb_c / tf_c:.2f}x"]
        row += [ms(med("tf", config, "extra_oncpu_ms")),
                ms(med("nbdist", config, "extra_oncpu_ms"))]
        if "before" in paths:
            row += [ms(med("before", config, "extra_ms")),
                    ms(med("before", config, "extra_cpu_ms")),
                    ms(med("before", config, "extra_oncpu_ms"))]
        rows.append(tuple(row))
    head = ("config", "TF step ms", "TF summary +ms", "nbdist step ms",
            "nbdist summary +ms", "nbdist / TF extra", "TF +CPU ms",
            "nbdist +CPU ms", "nbdist / TF CPU", "TF +ms unqueued",
            "nbdist +ms unqueued")
    if "before" in paths:
        head += ("before: summary +ms", "before: +CPU ms", "before: +ms unqueued")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print(" | ".join(c.ljust(w) for c, w in zip(head, widths)))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths)))
    if note:
        print(note)
    print(
        f"(4 scalars + 2 histograms of {SIZE} values, merge_all, add_summary every "
        f"step; median of {args.repeats} alternating runs, each the fastest of "
        f"{args.blocks} blocks of {args.steps} steps; load average {load0:.1f} "
        "at the start, "
        f"{os.getloadavg()[0]:.1f} at the end, {os.cpu_count()} CPUs)"
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        fw, cluster_json, job, steps, blocks = sys.argv[2:7]
        program(fw, json.loads(cluster_json), job, int(steps), int(blocks))
    else:
        sys.exit(main())
