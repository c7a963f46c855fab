"""The classic MNIST conv net, one training step, nbdist vs TensorFlow. Run on demand:

    python benchmarks/bench_conv.py [--steps=30] [--repeats=3] [--batch=64]
    python benchmarks/bench_conv.py --tf_python=/path/to/tfvenv/bin/python

The program (``conv_net`` below) is written once with ``tf`` bound to
``nbdist`` or to ``tensorflow.compat.v1`` (eager off): 28x28x1 images ->
conv 5x5x32 (SAME) + relu -> max pool 2x2 -> conv 5x5x64 + relu -> max pool
2x2 -> dense 1024 + relu -> dense 10, sparse softmax cross-entropy,
``GradientDescentOptimizer(0.01)``; batches fed by ``feed_dict`` from 8
pre-generated random batches. A step is forward + backward + SGD update.

Beside them, a floor: the step's GEMM work as plain NumPy (each convolution and
convolution gradient as im2col + one matmul, the dense layers' matmuls), with
no pools, activations, graph, session or feeding. nbdist's own kernels use one
GEMM per filter tap when there are 16+ channels, which can beat it.

Each framework runs in its own child process (``--tf_python`` picks the
interpreter for TensorFlow's, default this one; TensorFlow is skipped when it
does not import there). Every child runs one thread of compute
(``OMP/OPENBLAS/MKL_NUM_THREADS=1``; TensorFlow with intra- and inter-op
pools of 1) unless ``--threads`` says otherwise, so the numbers compare
kernels rather than how many idle cores the machine has. Children alternate
(nbdist, TF, NumPy, nbdist ...) ``--repeats`` times; the table shows the
median wall milliseconds per step and the CPU milliseconds the child process
spent per step (all its threads), which a busy machine disturbs less.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def conv_net(tf, batch: int):
    """(train_op, loss, images, labels) of the MNIST conv net, built with ``tf``."""
    images = tf.placeholder(tf.float32, [None, 28, 28, 1], name="images")
    labels = tf.placeholder(tf.int64, [None], name="labels")

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
    logits = tf.matmul(fc, weight([1024, 10])) + bias(10)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    return train_op, loss, images, labels


def batches(np, batch: int):
    rng = np.random.default_rng(0)
    return [(rng.random((batch, 28, 28, 1), np.float32),
             rng.integers(0, 10, batch).astype(np.int64)) for _ in range(8)]


def time_framework(framework: str, batch: int, steps: int, threads: int):
    """(wall, CPU) seconds per training step of ``framework`` (in this process)."""
    import time

    import numpy as np

    if framework == "tensorflow":
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
        config = tf.ConfigProto(intra_op_parallelism_threads=threads,
                                inter_op_parallelism_threads=threads)
    else:
        import nbdist as tf

        config = None
    data = batches(np, batch)
    with tf.Graph().as_default():
        train_op, loss, images, labels = conv_net(tf, batch)
        init = tf.global_variables_initializer()
        with tf.Session(config=config) as sess:
            sess.run(init)
            for i in range(3):
                x, y = data[i % len(data)]
                sess.run(train_op, {images: x, labels: y})
            start, cpu = time.perf_counter(), time.process_time()
            for i in range(steps):
                x, y = data[i % len(data)]
                sess.run(train_op, {images: x, labels: y})
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


def child_main(framework: str, batch: int, steps: int, threads: int) -> None:
    if framework == "numpy":
        wall, cpu = time_numpy_floor(batch, steps)
    else:
        wall, cpu = time_framework(framework, batch, steps, threads)
    print(json.dumps({"ms": wall * 1000, "cpu_ms": cpu * 1000}), flush=True)


def run_child(python: str, framework: str, args) -> dict | None:
    n = str(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n,
               MKL_NUM_THREADS=n, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join(
                   [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    cmd = [python, str(Path(__file__).resolve()), "--child", framework,
           f"--batch={args.batch}", f"--steps={args.steps}",
           f"--threads={args.threads}"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False,
                       timeout=1800)
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    sys.stderr.write(f"{framework} failed:\n{r.stderr[-2000:]}\n")
    return None


def tf_importable(python: str) -> bool:
    r = subprocess.run([python, "-c", "import tensorflow.compat.v1"],
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                       capture_output=True, check=False)
    return r.returncode == 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30, help="timed steps per run")
    p.add_argument("--repeats", type=int, default=3, help="runs per framework")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=1, help="compute threads per child")
    p.add_argument("--tf_python", default=sys.executable,
                   help="the Python interpreter that imports tensorflow")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child_main(args.child, args.batch, args.steps, args.threads)
        return 0
    frameworks = [("nbdist", sys.executable), ("numpy", sys.executable)]
    if tf_importable(args.tf_python):
        frameworks.insert(1, ("tensorflow", args.tf_python))
    else:
        print("(tensorflow does not import with --tf_python: no TF column)")
    times: dict[str, list[dict]] = {f: [] for f, _ in frameworks}
    for _ in range(args.repeats):
        for fw, python in frameworks:
            result = run_child(python, fw, args)
            if result is not None:
                times[fw].append(result)
    med = {fw: {k: statistics.median(r[k] for r in v) for k in ("ms", "cpu_ms")}
           for fw, v in times.items() if v}
    print(f"MNIST conv net training step, batch {args.batch}, {args.threads} "
          f"thread(s), median of {args.repeats} x {args.steps} steps")
    print(f"{'':28}{'ms/step':>9}{'vs TF':>7}{'CPU ms/step':>13}{'vs TF':>7}")
    names = {"nbdist": "nbdist (Session)", "tensorflow": "TensorFlow (tf.compat.v1)",
             "numpy": "NumPy im2col+GEMM only"}
    tf = med.get("tensorflow")
    for fw, _ in frameworks:
        if fw not in med:
            continue
        m = med[fw]
        wall = f"{m['ms'] / tf['ms']:.2f}x" if tf else "-"
        cpu = f"{m['cpu_ms'] / tf['cpu_ms']:.2f}x" if tf else "-"
        print(f"{names[fw]:28}{m['ms']:>9.1f}{wall:>7}{m['cpu_ms']:>13.1f}{cpu:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
