"""Tower programs written for ``/gpu:i`` on a machine without GPUs.

* ``allow_soft_placement`` puts ``/gpu:i`` ops on the CPU; the averaged-gradient
  step matches NumPy's.
* Virtual GPU devices (``ConfigProto(device_count={"GPU": 2})``,
  ``LocalCluster(gpus_per_task=2)``): each task lists ``/device:GPU:0..1``
  (type ``GPU``), placement accepts them without soft placement, and the
  towers' ops run there (the step's trace names those devices).
* With neither, the program stops with TF's InvalidArgumentError naming the
  op and listing the devices that exist.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist.proto import config_pb2

tf = nd.compat.v1
X = np.arange(8, dtype=np.float32).reshape(4, 2)
Y = np.ones((4, 1), np.float32)
LR = 0.1


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()


def two_towers(task=""):
    """TF1's multi-GPU idiom: a tower per ``/gpu:i`` on half the batch, the
    towers' gradients averaged and applied to a variable on the CPU."""
    with tf.device(task + "/cpu:0"):
        w = tf.get_variable("w", [2, 1], initializer=tf.constant_initializer(0.5))
    opt = tf.train.GradientDescentOptimizer(LR)
    grads = []
    for i in range(2):
        with tf.device(f"{task}/gpu:{i}"), tf.name_scope(f"tower_{i}"):
            xs, ys = tf.constant(X[2 * i:2 * i + 2]), tf.constant(Y[2 * i:2 * i + 2])
            loss = tf.reduce_mean(tf.square(tf.matmul(xs, w) - ys))
            grads.append(opt.compute_gradients(loss, [w])[0][0])
    train = opt.apply_gradients([(tf.add_n(grads) / 2.0, w)])
    return w, train


def expected_w():
    w = np.full((2, 1), 0.5, np.float32)
    grads = [2 * xs.T @ (xs @ w - ys) / 2 for xs, ys in ((X[:2], Y[:2]), (X[2:], Y[2:]))]
    return w - LR * (grads[0] + grads[1]) / 2


def run_step(sess, w, train):
    sess.run(tf.global_variables_initializer())
    opts = config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE)
    meta = config_pb2.RunMetadata()
    sess.run(train, options=opts, run_metadata=meta)
    return sess.run(w), {d.device for d in meta.step_stats.dev_stats}


def test_soft_placement_runs_gpu_towers_on_the_cpu():
    w, train = two_towers()
    with tf.Session(config=tf.ConfigProto(allow_soft_placement=True)) as sess:
        got, devices = run_step(sess, w, train)
    np.testing.assert_allclose(got, expected_w(), rtol=1e-6)
    assert not any("GPU" in d for d in devices)


def test_virtual_gpus_are_listed_and_placed_without_soft_placement():
    w, train = two_towers()
    with tf.Session(config=tf.ConfigProto(device_count={"GPU": 2})) as sess:
        listed = {d.name: d.device_type for d in sess.list_devices()}
        got, devices = run_step(sess, w, train)
    task = "/job:localhost/replica:0/task:0"
    assert listed == {f"{task}/device:CPU:0": "CPU", f"{task}/device:GPU:0": "GPU",
                      f"{task}/device:GPU:1": "GPU"}
    np.testing.assert_allclose(got, expected_w(), rtol=1e-6)
    assert {f"{task}/device:GPU:0", f"{task}/device:GPU:1"} <= devices


def test_gpu_towers_without_gpus_or_soft_placement_name_the_devices():
    w, train = two_towers()
    with tf.Session() as sess:
        with pytest.raises(nd.errors.InvalidArgumentError) as info:
            sess.run(tf.global_variables_initializer())
            sess.run(train)
    msg = str(info.value)
    assert "Cannot assign a device for operation tower_0/" in msg
    assert "/device:GPU:0" in msg and "/job:localhost/replica:0/task:0/device:CPU:0" in msg


@pytest.mark.slow
def test_local_cluster_tasks_have_virtual_gpus():
    with nd.LocalCluster(ps=1, workers=1, progress=False, gpus_per_task=2) as cluster:
        w, train = two_towers("/job:worker/task:0")
        with tf.Session(cluster.target("worker", 0)) as sess:
            names = {d.name for d in sess.list_devices()}
            got, devices = run_step(sess, w, train)
    for task in ("/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"):
        assert {f"{task}/device:GPU:0", f"{task}/device:GPU:1"} <= names
    np.testing.assert_allclose(got, expected_w(), rtol=1e-6)
    assert "/job:worker/replica:0/task:0/device:GPU:1" in devices
