#!/usr/bin/env python3
"""Writes ``tests/fixtures/tf/rnn/``, the TensorFlow-made checkpoint of
tests/ops/test_rnn.py's ``test_a_tf_checkpoint_of_the_same_model_loads``.

Run with a Python that has TensorFlow and tf_keras (never needed by the tests)::

    /work/tfvenv/bin/python scripts/make_tf_rnn_fixture.py

It builds, with ``tf.compat.v1`` as TF 1.15 did, a ``dynamic_rnn`` over a
``MultiRNNCell([LSTMCell(5, use_peepholes=True, num_proj=3), GRUCell(4)])`` on
the input ``X`` below with ``sequence_length=[4, 2]``, initialises it with TF's
own initialisers, saves a V2 checkpoint ``model`` (no meta graph) and the
outputs TF computes, ``outputs.npy`` (the test's oracle).
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.nn.rnn_cell needs tf_keras

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tf", "rnn")
X = (np.arange(24, dtype=np.float32).reshape(2, 4, 3) % 7 - 3) / 4


def main():
    tf.disable_v2_behavior()
    os.makedirs(OUT, exist_ok=True)
    g = tf.Graph()
    with g.as_default():
        cell = tf.nn.rnn_cell.MultiRNNCell([
            tf.nn.rnn_cell.LSTMCell(5, use_peepholes=True, num_proj=3),
            tf.nn.rnn_cell.GRUCell(4)])
        outputs, _ = tf.nn.dynamic_rnn(cell, tf.constant(X), sequence_length=[4, 2],
                                       dtype=tf.float32)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            np.save(os.path.join(OUT, "outputs.npy"), sess.run(outputs))
            saver.save(sess, os.path.join(OUT, "model"), write_meta_graph=False,
                       write_state=False)


if __name__ == "__main__":
    main()
