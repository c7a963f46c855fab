"""Synchronous data-parallel training with collective all-reduce (TF1's
``MultiWorkerMirroredStrategy`` under ``run_distribute_coordinator``).

Every worker process runs this script with its own ``TF_CONFIG``; each trains a
mirrored copy of an MLP on its own batches, and the optimizer averages the
gradients across workers with one all-reduce per step, so every copy stays equal.

    python examples/allreduce_trainer.py --local --num_workers=2

``--local`` starts the workers itself (one process each, on free ports of
127.0.0.1) and waits for them; without it the script is one worker of a cluster
described by ``TF_CONFIG``, as a launcher (SLURM, Kubernetes) would start it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys

import numpy as np

import nbdist as nd

INPUTS, HIDDEN, CLASSES, BATCH = 64, 32, 10, 64


def make_batches(seed: int, count: int = 8):
    """A fixed linear teacher labels random inputs: a task the MLP can learn."""
    teacher = np.random.default_rng(0).normal(size=(INPUTS, CLASSES))
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=(BATCH, INPUTS)).astype(np.float32) for _ in range(count)]
    return [(x, np.argmax(x @ teacher, axis=1).astype(np.int32)) for x in xs]


def say(line: str):
    """One write per line, so lines of the worker processes never interleave."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def worker_fn(strategy, steps: int, log_every: int):
    ctx = nd.distribute.get_current_worker_context()
    batches = make_batches(seed=1 + ctx.task_id)
    with nd.Graph().as_default():
        x = nd.placeholder(nd.float32, [None, INPUTS], name="x")
        y = nd.placeholder(nd.int32, [None], name="y")
        with strategy.scope():
            init = nd.glorot_uniform_initializer(seed=ctx.task_id)  # worker 0's wins
            w1 = nd.get_variable("w1", [INPUTS, HIDDEN], initializer=init)
            b1 = nd.get_variable("b1", [HIDDEN], initializer=nd.zeros_initializer())
            w2 = nd.get_variable("w2", [HIDDEN, CLASSES], initializer=init)
            b2 = nd.get_variable("b2", [CLASSES], initializer=nd.zeros_initializer())
            logits = nd.matmul(nd.nn.relu(nd.matmul(x, w1) + b1), w2) + b2
            loss = nd.reduce_mean(nd.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=logits))
            train = nd.train.GradientDescentOptimizer(0.5).minimize(loss)
        with nd.Session(ctx.master_target) as sess:
            sess.run(nd.global_variables_initializer())
            for step in range(steps + 1):
                bx, by = batches[step % len(batches)]
                if step % log_every == 0 or step == steps:
                    value = sess.run(loss, {x: bx, y: by})
                    say(f"worker {ctx.task_id} step {step} loss {value:.4f}")
                if step < steps:
                    sess.run(train, {x: bx, y: by})
            weights = sess.run([w1, b1, w2, b2])
    digest = float(sum(np.abs(w).sum() for w in weights))
    say(f"worker {ctx.task_id} weights {digest:.6f}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_local(num_workers: int, argv: list[str]) -> int:
    """Starts one worker process per task and waits for all of them."""
    cluster = {"worker": [f"127.0.0.1:{free_port()}" for _ in range(num_workers)]}
    procs = []
    for index in range(num_workers):
        tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), PYTHONUNBUFFERED="1")
        procs.append(subprocess.Popen([sys.executable, __file__, *argv], env=env))
    try:
        return max(p.wait() for p in procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local", action="store_true",
                        help="start --num_workers worker processes here")
    parser.add_argument("--num_workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--log_every", type=int, default=10)
    args = parser.parse_args(argv)
    if args.local:
        return run_local(args.num_workers, [f"--steps={args.steps}",
                                            f"--log_every={args.log_every}"])
    nd.distribute.run_distribute_coordinator(
        lambda strategy: worker_fn(strategy, args.steps, args.log_every),
        nd.distribute.experimental.MultiWorkerMirroredStrategy(),
        mode=nd.distribute.CoordinatorMode.INDEPENDENT_WORKER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
