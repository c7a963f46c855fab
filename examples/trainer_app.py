"""The classic TF1 ``trainer.py`` (``tf.app.flags``, ``tf.train.Supervisor``,
``tf.app.run``), with ``tf.`` replaced by ``nd.``.

Between-graph asynchronous training of a linear regression: every worker
builds the same graph with ``replica_device_setter`` (the weights on the ps),
the chief (worker 0) initialises them through its ``Supervisor`` and the
other workers wait for it. One process per task::

    python examples/trainer_app.py --ps_hosts=localhost:2222 \\
        --worker_hosts=localhost:2223,localhost:2224 --job_name=ps --task_index=0
    python examples/trainer_app.py ... --job_name=worker --task_index=0
    python examples/trainer_app.py ... --job_name=worker --task_index=1

As in TensorFlow, the ps serves until it is killed. Each worker prints its
loss (mean squared error) as it falls.
"""

from __future__ import annotations

import tempfile

import numpy as np

import nbdist as nd

flags = nd.app.flags
flags.DEFINE_string("ps_hosts", "", "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("worker_hosts", "", "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("job_name", "", "One of 'ps', 'worker'")
flags.DEFINE_integer("task_index", 0, "Index of task within the job")
flags.DEFINE_integer("train_steps", 200, "Global steps to train for")
flags.DEFINE_integer("batch_size", 32, "Examples per step")
flags.DEFINE_float("learning_rate", 0.05, "Learning rate")
flags.DEFINE_integer("log_every", 10, "Print the loss every this many local steps")
flags.DEFINE_string("logdir", None, "The chief's checkpoints (default: a new "
                    "temporary directory)")
FLAGS = flags.FLAGS

DIM = 8
TRUE_W = np.linspace(-1.0, 1.0, DIM, dtype=np.float32).reshape(DIM, 1)
TRUE_B = np.float32(0.5)


def make_batch(rng, batch):
    """A batch of y = x @ TRUE_W + TRUE_B + noise."""
    x = rng.standard_normal((batch, DIM)).astype(np.float32)
    y = x @ TRUE_W + TRUE_B + 0.05 * rng.standard_normal((batch, 1)).astype(np.float32)
    return x, y


def main(_):
    ps_hosts = FLAGS.ps_hosts.split(",")
    worker_hosts = FLAGS.worker_hosts.split(",")
    cluster = nd.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    server = nd.train.Server(cluster, job_name=FLAGS.job_name,
                             task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        print(f"ps {FLAGS.task_index} serving at {server.target}", flush=True)
        server.join()
        return 0
    try:
        train(server.target, cluster)
    finally:
        server.stop()
    return 0


def train(target, cluster):
    index = FLAGS.task_index
    is_chief = index == 0
    with nd.device(nd.train.replica_device_setter(
            worker_device=f"/job:worker/task:{index}", cluster=cluster)):
        x = nd.placeholder(nd.float32, [None, DIM], name="x")
        y = nd.placeholder(nd.float32, [None, 1], name="y")
        w = nd.Variable(np.zeros((DIM, 1), np.float32), name="w")
        b = nd.Variable(0.0, name="b")
        loss = nd.reduce_mean(nd.square(nd.matmul(x, w) + b - y))
        global_step = nd.Variable(0, name="global_step", trainable=False)
        train_op = nd.train.GradientDescentOptimizer(FLAGS.learning_rate).minimize(
            loss, global_step=global_step)
        saver = nd.train.Saver()
        init_op = nd.global_variables_initializer()

    logdir = FLAGS.logdir or tempfile.mkdtemp(prefix="trainer_app-")
    sv = nd.train.Supervisor(is_chief=is_chief, logdir=logdir, init_op=init_op,
                             summary_op=None, saver=saver, global_step=global_step,
                             save_model_secs=600)
    # A worker talks to the ps tasks and itself only (not to the other workers).
    config = nd.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"])
    rng = np.random.default_rng(index)
    local_step, step = 0, 0
    with sv.managed_session(target, config=config) as sess:
        while not sv.should_stop() and step < FLAGS.train_steps:
            xs, ys = make_batch(rng, FLAGS.batch_size)
            _, lv, step = sess.run([train_op, loss, global_step], {x: xs, y: ys})
            local_step += 1
            if local_step == 1 or local_step % FLAGS.log_every == 0:
                print(f"worker {index} step {local_step} global_step {step} "
                      f"loss {lv:.4f}", flush=True)
        if is_chief:
            sv.saver.save(sess, sv.save_path, global_step=global_step)
    print(f"worker {index} done after {local_step} local steps", flush=True)


if __name__ == "__main__":
    nd.app.run()
