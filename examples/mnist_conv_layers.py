"""The classic MNIST conv net, written with ``nd.layers``, trained
between-graph on a parameter-server cluster.

conv 5x5x32 -> max pool -> conv 5x5x64 -> max pool -> dense 1024 -> dropout ->
dense 10, as in TensorFlow's ``mnist_deep``/``tf.layers`` tutorial. Every
worker builds the same graph; ``replica_device_setter`` puts the variables
(``conv2d/kernel``, ``dense_1/bias`` ...) on the ps tasks and the compute on
the worker. The data are synthetic 28x28 digits-like images (one noisy
template per class), so no download is needed and the loss falls quickly.

One process per task::

    python examples/mnist_conv_layers.py --ps_hosts=localhost:2222 \\
        --worker_hosts=localhost:2223,localhost:2224 --job_name=ps --task_index=0
    python examples/mnist_conv_layers.py ... --job_name=worker --task_index=0
    python examples/mnist_conv_layers.py ... --job_name=worker --task_index=1

or on a ``LocalCluster(ps=1, workers=2)`` with a thread per worker::

    python examples/mnist_conv_layers.py --local_cluster --num_workers=2
"""

from __future__ import annotations

import argparse
import sys
import threading

import numpy as np

import nbdist as nd

_print_lock = threading.Lock()


def log(msg: str):
    with _print_lock:
        print(msg, flush=True)


def templates(size=28):
    """One fixed random 'digit' image per class (the same on every worker)."""
    rng = np.random.default_rng(1234)
    return (rng.random((10, size, size, 1)) > 0.7).astype(np.float32)


def make_batch(rng, protos, batch):
    labels = rng.integers(0, 10, batch)
    noise = 0.3 * rng.standard_normal((batch,) + protos.shape[1:])
    return (protos[labels] + noise).astype(np.float32), labels.astype(np.int64)


def conv_net(images, training, conv1=32, conv2=64, hidden=1024):
    """The logits of ``images`` [batch, 28, 28, 1]."""
    net = nd.layers.conv2d(images, conv1, 5, padding="same", activation=nd.nn.relu)
    net = nd.layers.max_pooling2d(net, 2, 2)
    net = nd.layers.conv2d(net, conv2, 5, padding="same", activation=nd.nn.relu)
    net = nd.layers.max_pooling2d(net, 2, 2)
    net = nd.layers.flatten(net)
    net = nd.layers.dense(net, hidden, activation=nd.nn.relu)
    net = nd.layers.dropout(net, rate=0.4, training=training)
    return nd.layers.dense(net, 10)


def build(task_index, cluster, flags):
    graph = nd.Graph()
    with graph.as_default(), nd.device(nd.train.replica_device_setter(
            worker_device=f"/job:worker/task:{task_index}", cluster=cluster)):
        images = nd.placeholder(nd.float32, [None, 28, 28, 1], name="images")
        labels = nd.placeholder(nd.int64, [None], name="labels")
        training = nd.placeholder_with_default(False, [], name="training")
        logits = conv_net(images, training, flags.conv1, flags.conv2, flags.hidden)
        loss = nd.losses.sparse_softmax_cross_entropy(labels, logits)
        accuracy = nd.reduce_mean(nd.cast(nd.equal(nd.argmax(logits, 1), labels),
                                          nd.float32))
        global_step = nd.train.get_or_create_global_step()
        train_op = nd.train.AdamOptimizer(flags.learning_rate).minimize(
            loss, global_step=global_step)
    return graph, (images, labels, training, loss, accuracy, train_op)


def train_worker(master, cluster, task_index, flags) -> int:
    rng = np.random.default_rng(task_index)
    protos = templates()
    graph, (images, labels, training, loss, _, train_op) = build(
        task_index, cluster, flags)
    config = nd.ConfigProto(device_filters=["/job:ps",
                                            f"/job:worker/task:{task_index}"])
    hooks = [nd.train.StopAtStepHook(last_step=flags.train_steps)]
    steps = 0
    with graph.as_default(), nd.train.MonitoredTrainingSession(
            master=master, is_chief=task_index == 0, hooks=hooks, config=config,
            log_step_count_steps=None, max_wait_secs=flags.max_wait_secs) as sess:
        while not sess.should_stop():
            xs, ys = make_batch(rng, protos, flags.batch_size)
            _, lv = sess.run([train_op, loss], {images: xs, labels: ys,
                                                training: True})
            steps += 1
            if steps == 1 or steps % flags.log_every == 0:
                log(f"worker {task_index} step {steps} loss {lv:.4f}")
    log(f"worker {task_index} done after {steps} local steps")
    return steps


def evaluate(master, cluster, flags) -> float:
    """Accuracy of the trained net (dropout off) on a fresh synthetic batch."""
    graph, (images, labels, _, _, accuracy, _) = build(0, cluster, flags)
    xs, ys = make_batch(np.random.default_rng(99), templates(), 64)
    with graph.as_default(), nd.Session(master) as sess:
        return float(sess.run(accuracy, {images: xs, labels: ys}))


def run_task(flags) -> int:
    cluster = nd.train.ClusterSpec({"ps": flags.ps_hosts.split(","),
                                    "worker": flags.worker_hosts.split(",")})
    server = nd.train.Server(cluster, job_name=flags.job_name,
                             task_index=flags.task_index)
    if flags.job_name == "ps":
        print(f"ps {flags.task_index} serving at {server.target}", flush=True)
        server.join()
        return 0
    try:
        train_worker(server.target, cluster, flags.task_index, flags)
    finally:
        server.stop()
    return 0


def run_local_cluster(flags) -> int:
    errors = []

    def worker(i, target):
        try:
            train_worker(target, cluster.cluster_spec, i, flags)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    with nd.LocalCluster(ps=1, workers=flags.num_workers) as cluster:
        threads = [threading.Thread(target=worker,
                                    args=(i, cluster.target("worker", i)))
                   for i in range(flags.num_workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        acc = evaluate(cluster.target("worker", 0), cluster.cluster_spec, flags)
        print(f"accuracy {acc:.3f}", flush=True)
    return 0


def main(flags) -> int:
    if flags.local_cluster:
        return run_local_cluster(flags)
    if not (flags.ps_hosts and flags.worker_hosts and flags.job_name):
        print("mnist_conv_layers.py: give --ps_hosts, --worker_hosts and "
              "--job_name, or --local_cluster", file=sys.stderr)
        return 2
    return run_task(flags)


def parse(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--ps_hosts", default="")
    p.add_argument("--worker_hosts", default="")
    p.add_argument("--job_name", choices=["ps", "worker"])
    p.add_argument("--task_index", type=int, default=0)
    p.add_argument("--local_cluster", action="store_true")
    p.add_argument("--num_workers", type=int, default=2)
    p.add_argument("--train_steps", type=int, default=200, help="global steps")
    p.add_argument("--batch_size", type=int, default=50)
    p.add_argument("--learning_rate", type=float, default=1e-3)
    p.add_argument("--conv1", type=int, default=32)
    p.add_argument("--conv2", type=int, default=64)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--log_every", type=int, default=10)
    p.add_argument("--max_wait_secs", type=float, default=120.0)
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main(parse(sys.argv[1:])))
