"""The classic MNIST conv net written with TF-Slim (``nd.contrib.slim``),
trained between-graph on a parameter-server cluster.

The same net and synthetic data as ``mnist_conv_layers.py``, in slim's style:
``arg_scope`` for the shared defaults (``relu``, ``SAME`` padding, an l2
weight penalty), ``slim.conv2d``/``max_pool2d``/``fully_connected``/
``dropout``, ``slim.losses`` and ``slim.learning.create_train_op``. Variables
are ``conv1/weights``, ``fc3/biases`` ..., placed on the ps by
``replica_device_setter``.

    python examples/mnist_conv_slim.py --local_cluster --num_workers=2

(or one process per task with ``--ps_hosts/--worker_hosts/--job_name``, as
``mnist_conv_layers.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbdist as nd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mnist_conv_layers as common

slim = nd.contrib.slim


def conv_net(images, is_training, conv1=32, conv2=64, hidden=1024):
    """The logits of ``images`` [batch, 28, 28, 1], slim style."""
    with slim.arg_scope([slim.conv2d, slim.fully_connected],
                        weights_regularizer=slim.l2_regularizer(1e-5)):
        net = slim.conv2d(images, conv1, [5, 5], scope="conv1")
        net = slim.max_pool2d(net, [2, 2], scope="pool1")
        net = slim.conv2d(net, conv2, [5, 5], scope="conv2")
        net = slim.max_pool2d(net, [2, 2], scope="pool2")
        net = slim.flatten(net)
        net = slim.fully_connected(net, hidden, scope="fc3")
        net = slim.dropout(net, 0.6, is_training=is_training, scope="dropout3")
        return slim.fully_connected(net, 10, activation_fn=None, scope="fc4")


def build(task_index, cluster, flags):
    graph = nd.Graph()
    with graph.as_default(), nd.device(nd.train.replica_device_setter(
            worker_device=f"/job:worker/task:{task_index}", cluster=cluster)):
        images = nd.placeholder(nd.float32, [None, 28, 28, 1], name="images")
        labels = nd.placeholder(nd.int64, [None], name="labels")
        training = nd.placeholder_with_default(False, [], name="training")
        logits = conv_net(images, training, flags.conv1, flags.conv2, flags.hidden)
        slim.losses.sparse_softmax_cross_entropy(logits, labels)
        loss = slim.losses.get_total_loss()
        accuracy = nd.reduce_mean(nd.cast(nd.equal(nd.argmax(logits, 1), labels),
                                          nd.float32))
        train_op = slim.learning.create_train_op(
            loss, nd.train.AdamOptimizer(flags.learning_rate))
    return graph, (images, labels, training, loss, accuracy, train_op)


common.build = build  # the training loop of mnist_conv_layers, with this net
parse, main = common.parse, common.main

if __name__ == "__main__":
    sys.exit(main(parse(sys.argv[1:])))
