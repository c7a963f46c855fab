"""A custom ``model_fn`` trained with ``train_and_evaluate``, started as TF 1.x
Estimator programs are started in the wild: one process per task, each with
``TF_CONFIG`` in its environment naming the cluster and its own task::

    TF_CONFIG='{"cluster": {"chief": ["127.0.0.1:2222"], "ps": ["127.0.0.1:2223"],
                            "worker": ["127.0.0.1:2224", "127.0.0.1:2225"]},
                "task": {"type": "worker", "index": 0}}' \\
        python examples/estimator_tf_config.py --model_dir=/shared/model

and the same with ``"chief"``, ``"ps"``, the other ``"worker"`` and
``"evaluator"`` (index 0) as the task. The ps serves until it is stopped
(SIGTERM, as a cluster manager ends it); the chief, the workers and the
evaluator return once training reaches ``--max_steps``. Without ``TF_CONFIG``
the same program trains and evaluates in one process. ``--launch`` starts all
five tasks on this machine (free ports of 127.0.0.1) and waits for them.

Under SLURM, ``--slurm`` makes each task's ``TF_CONFIG`` from the allocation
(``SlurmClusterResolver``: tasks in job-name order chief, evaluator, ps,
worker, worker; ports from ``--port_base``)::

    srun --ntasks=5 python examples/estimator_tf_config.py --slurm \
        --model_dir=/shared/model

with ``NBDIST_TOKEN`` exported when the tasks span several nodes. Each task
prints the ``TF_CONFIG`` it made (``TF_CONFIG {...}``). The ps task stays
until the job step is cancelled (``scancel``), as TF's does.

The model is a small DNN (one hidden layer of 16 ReLUs) classifying synthetic
points of two interleaved classes in 8 dimensions; the evaluator prints its
final metrics as one JSON line: ``final eval {"accuracy": ..., ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile

import numpy as np

import nbdist as nd

FEATURES = 8
TRAIN_EXAMPLES = 2000
EVAL_EXAMPLES = 1000
BATCH = 32


def synthetic_data(n, seed):
    """Two classes: the label is whether a fixed nonlinear score is positive."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, FEATURES)).astype(np.float32)
    score = x[:, 0] * x[:, 1] + 0.8 * x[:, 2] - 0.5 * x[:, 3] ** 2 + 0.4
    return x, (score > 0).astype(np.int32)


def train_input_fn(config):
    x, y = synthetic_data(TRAIN_EXAMPLES, seed=0)
    # Each training task reads the data in its own order.
    seed = config.global_id_in_cluster or 0
    return (nd.data.Dataset.from_tensor_slices(({"x": x}, y))
            .shuffle(TRAIN_EXAMPLES, seed=seed).repeat().batch(BATCH))


def eval_input_fn():
    x, y = synthetic_data(EVAL_EXAMPLES, seed=1)
    return nd.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(250)


def model_fn(features, labels, mode, params):
    hidden = nd.layers.dense(features["x"], params["hidden_units"],
                             activation=nd.nn.relu, name="hidden")
    logits = nd.layers.dense(hidden, 2, name="logits")
    classes = nd.argmax(logits, axis=1)
    predictions = {"class_ids": classes, "probabilities": nd.nn.softmax(logits)}
    if mode == nd.estimator.ModeKeys.PREDICT:
        return nd.estimator.EstimatorSpec(mode, predictions=predictions)
    loss = nd.reduce_mean(nd.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    optimizer = nd.train.AdagradOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=nd.train.get_global_step())
    metrics = {"accuracy": nd.metrics.accuracy(labels, classes)}
    return nd.estimator.EstimatorSpec(mode, predictions, loss, train_op,
                                      eval_metric_ops=metrics)


def serving_input_receiver_fn():
    x = nd.placeholder(nd.float32, [None, FEATURES], name="x")
    return nd.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


def run(model_dir, max_steps, learning_rate=0.2):
    """This process's task of ``train_and_evaluate`` (locally without
    ``TF_CONFIG``); returns the last evaluation's metrics, where there is one."""
    config = nd.estimator.RunConfig(
        model_dir=model_dir, save_checkpoints_steps=50, save_summary_steps=50,
        log_step_count_steps=50, tf_random_seed=7,
        # TF delays worker i by 5 * (i + 1) s so that they do not all update a
        # fresh model at once; a short run on one machine does without.
        experimental_max_worker_delay_secs=0)
    estimator = nd.estimator.Estimator(
        model_fn, config=config,
        params={"hidden_units": 16, "learning_rate": learning_rate})
    train_spec = nd.estimator.TrainSpec(
        lambda: train_input_fn(estimator.config), max_steps=max_steps)
    eval_spec = nd.estimator.EvalSpec(
        eval_input_fn, steps=None, start_delay_secs=0, throttle_secs=1,
        exporters=[nd.estimator.FinalExporter("final", serving_input_receiver_fn)])
    result = nd.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    # A local run returns (metrics, exports); a task of a cluster None (as TF
    # 1.15): the evaluator's metrics are its summaries in eval_dir().
    if isinstance(result, tuple):
        metrics = result[0]
    elif estimator.config.task_type == "evaluator":
        metrics = last_eval_metrics(estimator.eval_dir())
    else:
        metrics = None
    if metrics:
        print("final eval " + json.dumps(
            {k: float(v) for k, v in metrics.items()}), flush=True)
    return metrics


def last_eval_metrics(eval_dir: str) -> dict:
    """The last evaluation's metrics (and its global_step) in ``eval_dir``'s
    event files, as TensorBoard reads them."""
    metrics: dict = {}
    for name in sorted(os.listdir(eval_dir)):
        if ".tfevents." not in name:
            continue
        for event in nd.train.summary_iterator(os.path.join(eval_dir, name)):
            if event.HasField("summary"):
                metrics = {v.tag: v.simple_value for v in event.summary.value}
                metrics["global_step"] = event.step
    return metrics


# -- starting the five tasks on this machine ----------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_on_free_ports() -> dict:
    return {"chief": [f"127.0.0.1:{free_port()}"],
            "ps": [f"127.0.0.1:{free_port()}"],
            "worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}


SLURM_JOBS = {"chief": 1, "evaluator": 1, "ps": 1, "worker": 2}


def tf_config_from_slurm(port_base=8888) -> dict:
    """This SLURM task's ``TF_CONFIG``: its role in the allocation's cluster,
    the evaluator left out of the cluster (it is no part of training)."""
    from nbdist.distribute.cluster_resolver import SlurmClusterResolver

    resolver = SlurmClusterResolver(jobs=SLURM_JOBS, port_base=port_base)
    cluster = resolver.cluster_spec().as_dict()
    cluster.pop("evaluator")
    return {"cluster": cluster,
            "task": {"type": resolver.task_type, "index": resolver.task_id}}


def launch(model_dir, max_steps, cluster=None, log_dir=None) -> dict:
    """Starts one process of this script per task (chief, ps, two workers,
    evaluator), each with its ``TF_CONFIG``; returns {"<job>:<index>": Popen}.
    With ``log_dir``, each one's output goes to ``<log_dir>/<job>_<index>.log``."""
    cluster = cluster or cluster_on_free_ports()
    tasks = [(job, i) for job in ("ps", "chief", "worker")
             for i in range(len(cluster[job]))] + [("evaluator", 0)]
    procs = {}
    for job, index in tasks:
        env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": job, "index": index}}))
        out = None
        if log_dir:
            out = open(os.path.join(log_dir, f"{job}_{index}.log"), "w")
        procs[f"{job}:{index}"] = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), f"--model_dir={model_dir}",
             f"--max_steps={max_steps}"], env=env, stdin=subprocess.DEVNULL,
            stdout=out, stderr=subprocess.STDOUT if out else None)
        if out:
            out.close()  # the child holds its own copy
    return procs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", default=None)
    parser.add_argument("--max_steps", type=int, default=300)
    parser.add_argument("--launch", action="store_true",
                        help="start all five tasks on this machine and wait")
    parser.add_argument("--slurm", action="store_true",
                        help="TF_CONFIG from this SLURM task's allocation")
    parser.add_argument("--port_base", type=int, default=8888)
    args = parser.parse_args(argv)
    model_dir = args.model_dir or tempfile.mkdtemp(prefix="estimator_tf_config_")
    if args.launch:
        procs = launch(model_dir, args.max_steps)
        ps = procs.pop("ps:0")
        codes = {name: p.wait() for name, p in procs.items()}
        ps.send_signal(signal.SIGTERM)
        codes["ps:0"] = ps.wait()
        print(f"exit codes {codes}; checkpoints in {model_dir}", flush=True)
        return max(codes.values())
    if args.slurm:
        os.environ["TF_CONFIG"] = json.dumps(tf_config_from_slurm(args.port_base))
        print(f"TF_CONFIG {os.environ['TF_CONFIG']}", flush=True)
    # The ps serves until a cluster manager stops it: SIGTERM ends it cleanly.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    run(model_dir, args.max_steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
