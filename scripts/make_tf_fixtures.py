#!/usr/bin/env python3
"""Writes the TensorFlow-made fixtures of tests/train/test_tf_formats.py.

Run with a Python that has TensorFlow (never needed by the tests themselves)::

    /work/tfvenv/bin/python scripts/make_tf_fixtures.py

It (re)writes ``tests/fixtures/tf/``:

``ckpt/``
    A TF V2 checkpoint (``model.index`` + ``model.data-00000-of-00001`` +
    ``checkpoint`` + ``model.meta``) of three ref variables: ``w`` (float32
    [2, 3]), ``step`` (int64 scalar) and ``names`` (string [2]).
``partitioned/``
    A TF V2 checkpoint ``model`` of ``emb`` (float32 [140, 2], two shards of
    70 rows: TF saves it in slices) and ``bias`` (float32 [2]).
``saved_model/``
    A SavedModel (``saved_model.pb`` + ``variables/``) of ``y = x @ W + b``
    (``Placeholder`` -> ``MatMul`` -> ``BiasAdd``), tag ``serve``, signature
    ``serving_default`` with input ``x`` and output ``y``.

The values are fixed here and repeated in the tests (their oracle).
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import tensorflow.compat.v1 as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tf")

W = np.arange(6, dtype=np.float32).reshape(2, 3) / 4 - 0.5
STEP = 42
NAMES = [b"alpha", b"\x00b\xffc"]
DENSE_W = np.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]], dtype=np.float32)
DENSE_B = np.array([0.125, -4.0], dtype=np.float32)
EMB = np.arange(280, dtype=np.float32).reshape(140, 2) / 8


def write_checkpoint(directory):
    g = tf.Graph()
    with g.as_default():
        tf.Variable(W, name="w")
        tf.Variable(np.int64(STEP), name="step")
        tf.Variable(NAMES, name="names")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            cwd = os.getcwd()
            os.chdir(directory)  # a relative save path: a relative state file
            try:
                saver.save(sess, "model")
            finally:
                os.chdir(cwd)


def write_partitioned(directory):
    g = tf.Graph()
    with g.as_default():
        emb = tf.get_variable("emb", shape=EMB.shape,
                              initializer=tf.zeros_initializer(),
                              partitioner=tf.fixed_size_partitioner(2))
        tf.Variable(DENSE_B, name="bias")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for i, shard in enumerate(emb):
                sess.run(shard.assign(EMB[70 * i:70 * (i + 1)]))
            saver.save(sess, os.path.join(directory, "model"), write_meta_graph=False,
                       write_state=False)


def write_saved_model(directory):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        w = tf.Variable(DENSE_W, name="W")
        b = tf.Variable(DENSE_B, name="b")
        y = tf.nn.bias_add(tf.matmul(x, w), b, name="y")
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            tf.saved_model.simple_save(sess, directory, {"x": x}, {"y": y})


def main():
    tf.disable_eager_execution()
    tf.disable_resource_variables()  # ref variables (VariableV2), as nbdist's
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(os.path.join(OUT, "ckpt"))
    write_checkpoint(os.path.join(OUT, "ckpt"))
    os.makedirs(os.path.join(OUT, "partitioned"))
    write_partitioned(os.path.join(OUT, "partitioned"))
    write_saved_model(os.path.join(OUT, "saved_model"))
    for dirpath, _, files in sorted(os.walk(OUT)):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            print(f"{os.path.relpath(path, ROOT)}  {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
