#!/usr/bin/env python3
"""Checks by hand that TensorFlow reads what nbdist writes in TF's formats.

Two steps, each with its own Python (the tests never import TensorFlow)::

    DIR=$(mktemp -d)
    PYTHONPATH=$PWD /work/main/.venv/bin/python \
        scripts/check_tf_reads_nbdist.py write $DIR
    /work/tfvenv/bin/python scripts/check_tf_reads_nbdist.py read $DIR

``write`` (nbdist) saves, in ``DIR``: a V2 checkpoint ``ckpt/model-7`` of
``w`` (float32 [2, 3]), ``step`` (int64), ``names`` (string [2]) with
``Saver(write_version=SaverDef.V2)``, and a SavedModel ``saved_model/`` of
``y = x @ W + b`` with ``simple_save``. ``read`` (TensorFlow) restores the
checkpoint with ``tf.train.Saver`` and loads the SavedModel with
``tf.saved_model.loader.load``, runs its signature, and prints each value
beside the expected one; it exits 1 on a mismatch.
"""

from __future__ import annotations

import os
import sys

import numpy as np

W = np.arange(6, dtype=np.float32).reshape(2, 3) / 4 - 0.5
STEP = 42
NAMES = [b"alpha", b"\x00b\xffc"]
DENSE_W = np.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]], dtype=np.float32)
DENSE_B = np.array([0.125, -4.0], dtype=np.float32)
X = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 0.5]], dtype=np.float32)


def write(directory):
    import nbdist as nd

    g = nd.Graph()
    with g.as_default():
        nd.Variable(W, name="w")
        nd.Variable(np.int64(STEP), name="step")
        nd.Variable(np.array(NAMES, dtype=object), name="names")
        saver = nd.train.Saver(write_version=nd.train.SaverDef.V2)
        with nd.Session(graph=g) as sess:
            sess.run(nd.global_variables_initializer())
            os.makedirs(os.path.join(directory, "ckpt"))
            path = saver.save(sess, os.path.join(directory, "ckpt", "model"),
                              global_step=7, write_meta_graph=False)
    print("nbdist wrote", path, sorted(os.listdir(os.path.dirname(path))))
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float32, [None, 3], name="x")
        w = nd.Variable(DENSE_W, name="W")
        b = nd.Variable(DENSE_B, name="b")
        y = nd.nn.bias_add(nd.matmul(x, w), b, name="y")
        with nd.Session(graph=g) as sess:
            sess.run(nd.global_variables_initializer())
            export_dir = os.path.join(directory, "saved_model")
            nd.saved_model.simple_save(sess, export_dir, {"x": x}, {"y": y})
    print("nbdist wrote", export_dir, sorted(
        os.path.relpath(os.path.join(d, f), export_dir)
        for d, _, fs in os.walk(export_dir) for f in fs))


def read(directory):
    import tensorflow.compat.v1 as tf

    tf.disable_eager_execution()
    tf.disable_resource_variables()
    ok = True

    def report(what, got, want):
        nonlocal ok
        same = np.array_equal(np.asarray(got), np.asarray(want))
        ok &= bool(same)
        print(f"{'OK ' if same else 'BAD'} {what}: got {np.asarray(got).tolist()!r}"
              f" want {np.asarray(want).tolist()!r}")

    prefix = tf.train.latest_checkpoint(os.path.join(directory, "ckpt"))
    print("TF latest_checkpoint:", prefix)
    reader = tf.train.NewCheckpointReader(prefix)
    print("TF NewCheckpointReader:", sorted(reader.get_variable_to_shape_map().items()))
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(np.zeros((2, 3), np.float32), name="w")
        step = tf.Variable(np.int64(0), name="step")
        names = tf.Variable([b"", b""], name="names")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            saver.restore(sess, prefix)
            got_w, got_step, got_names = sess.run([w, step, names])
    report("tf.train.Saver.restore w", got_w, W)
    report("tf.train.Saver.restore step", got_step, STEP)
    report("tf.train.Saver.restore names", got_names, NAMES)
    g = tf.Graph()
    with g.as_default(), tf.Session() as sess:
        mg = tf.saved_model.loader.load(sess, [tf.saved_model.tag_constants.SERVING],
                                        os.path.join(directory, "saved_model"))
        sig = mg.signature_def["serving_default"]
        print("TF signature:", sig.method_name,
              {k: v.name for k, v in sig.inputs.items()},
              {k: v.name for k, v in sig.outputs.items()})
        y = sess.run(sig.outputs["y"].name, {sig.inputs["x"].name: X})
    report("tf.saved_model.loader.load + run signature y", y, X @ DENSE_W + DENSE_B)
    print("ALL OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    mode, directory = sys.argv[1], sys.argv[2]
    if mode == "write":
        write(directory)
    elif mode == "read":
        sys.exit(read(directory))
    else:
        sys.exit(f"usage: {sys.argv[0]} write|read DIR")
