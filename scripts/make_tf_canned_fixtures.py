#!/usr/bin/env python3
"""Writes the TensorFlow-made checkpoint of tests/estimator/test_canned_estimators.py.

Run with a Python that has TensorFlow (never needed by the tests themselves)::

    /work/tfvenv/bin/python scripts/make_tf_canned_fixtures.py

It (re)writes ``tests/fixtures/tf/canned_dnn/``: the checkpoint TF 1.15's
``DNNClassifier(hidden_units=[4], feature_columns=[embedding_column(
categorical_column_with_vocabulary_list("color", ["R", "G", "B"]), 2),
numeric_column("x")])`` writes, built the way its ``model_fn`` builds it
(``tf.estimator`` is gone from TF >= 2.16): the scope ``dnn`` with a one-shard
partitioner, ``input_from_feature_columns/input_layer`` from
``tf.compat.v1.feature_column.input_layer``, dense layers
``hiddenlayer_0`` and ``logits`` with ``kernel``/``bias``, Adagrad slots and
``global_step`` = 7. Weights are fixed here and repeated in the test.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import tensorflow.compat.v1 as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tf", "canned_dnn")

EMBEDDING = np.array([[0.5, -1.0], [0.25, 0.75], [-0.5, 2.0]], np.float32)
HIDDEN_KERNEL = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 8
HIDDEN_BIAS = np.array([0.1, -0.2, 0.3, 0.0], np.float32)
LOGITS_KERNEL = np.array([[1.0], [-0.5], [0.25], [2.0]], np.float32)
LOGITS_BIAS = np.array([-0.75], np.float32)
STEP = 7


def main():
    tf.disable_eager_execution()
    fc = tf.feature_column
    shutil.rmtree(OUT, ignore_errors=True)
    with tf.Graph().as_default():
        step = tf.train.get_or_create_global_step()
        features = {"color": tf.constant([["R"]]), "x": tf.constant([[1.0]])}
        color = fc.categorical_column_with_vocabulary_list("color", ["R", "G", "B"])
        columns = [fc.embedding_column(color, 2), fc.numeric_column("x")]
        one_shard = tf.min_max_variable_partitioner(max_partitions=0)
        with tf.variable_scope("dnn", partitioner=one_shard):
            with tf.variable_scope("input_from_feature_columns",
                                   partitioner=tf.min_max_variable_partitioner(
                                       max_partitions=0, min_slice_size=64 << 20)):
                net = fc.input_layer(features, columns)
            for scope, (k, b) in (("hiddenlayer_0", (HIDDEN_KERNEL, HIDDEN_BIAS)),
                                  ("logits", (LOGITS_KERNEL, LOGITS_BIAS))):
                with tf.variable_scope(scope):
                    kernel = tf.get_variable("kernel", shape=k.shape,
                                             initializer=tf.constant_initializer(k))
                    bias = tf.get_variable("bias", shape=b.shape,
                                           initializer=tf.constant_initializer(b))
                    net = tf.matmul(net, kernel) + bias
        loss = tf.reduce_sum(net)
        tf.train.AdagradOptimizer(0.05).minimize(loss)
        table = [v for v in tf.global_variables()
                 if v.name.endswith("embedding_weights/part_0:0")]
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for v in table:
                sess.run(v.assign(EMBEDDING))
            sess.run(step.assign(STEP))
            tf.train.Saver().save(sess, os.path.join(OUT, "model.ckpt"),
                                  global_step=STEP, write_meta_graph=False)
    # A relative path, so the directory can be copied anywhere.
    with open(os.path.join(OUT, "checkpoint"), "w") as f:
        f.write(f'model_checkpoint_path: "model.ckpt-{STEP}"\n'
                f'all_model_checkpoint_paths: "model.ckpt-{STEP}"\n')
    for name, shape in tf.train.list_variables(OUT):
        print(name, shape)


if __name__ == "__main__":
    main()
