#!/usr/bin/env python3
"""Checks that TensorFlow serves a SavedModel that an nbdist canned estimator
exported, with the predictions nbdist gives.

Run with a Python that has TensorFlow; it runs nbdist in ``NBDIST_PYTHON``
(default: the repository's ``.venv``)::

    /work/tfvenv/bin/python scripts/check_tf_serves_canned.py

nbdist trains a ``DNNClassifier`` over a numeric column, the embedding of a
vocabulary column and the indicator of a crossed (vocabulary x bucketized)
column, exports it with a raw serving input receiver and prints its own
predictions; TensorFlow loads the SavedModel (``tf.compat.v1.saved_model``)
and runs its ``predict`` signature on the same rows. Exit status 0 when the
logistic outputs agree to 1e-6.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NBDIST_SIDE = r'''
import json, os, sys
import numpy as np
import nbdist as nd
fc = nd.feature_column
out = sys.argv[1]
rng = np.random.RandomState(0)
x = rng.randn(200, 2).astype(np.float32)
color = rng.choice(["R", "G", "B"], 200)
y = ((x[:, 0] + x[:, 1] > 0) | (color == "R")).astype(np.int64)
vocab = fc.categorical_column_with_vocabulary_list("color", ["R", "G", "B"])
sign = fc.bucketized_column(fc.numeric_column("x", shape=2), [0.0])
cols = [fc.numeric_column("x", shape=2), fc.embedding_column(vocab, 2),
        fc.indicator_column(fc.crossed_column([vocab, sign], 20))]
est = nd.estimator.DNNClassifier([8], cols, model_dir=os.path.join(out, "model"),
                                 optimizer=nd.train.AdagradOptimizer(0.3))
est.train(lambda: nd.data.Dataset.from_tensor_slices(
    ({"x": x, "color": color}, y)).repeat().batch(40), steps=50)
receiver = nd.estimator.export.build_raw_serving_input_receiver_fn(
    {"x": nd.placeholder(nd.float32, [None, 2], name="x"),
     "color": nd.placeholder(nd.string, [None, 1], name="color")})
path = est.export_saved_model(os.path.join(out, "export"), receiver)
rows = {"x": x[:8], "color": color[:8]}
preds = est.predict(lambda: nd.data.Dataset.from_tensor_slices(rows).batch(8))
json.dump({"path": path.decode() if isinstance(path, bytes) else path,
           "x": x[:8].tolist(), "color": color[:8].tolist(),
           "logistic": [float(p["logistic"][0]) for p in preds]},
          open(os.path.join(out, "nbdist.json"), "w"))
'''


def main():
    import tensorflow.compat.v1 as tf

    tf.disable_eager_execution()
    python = os.environ.get("NBDIST_PYTHON", os.path.join(ROOT, ".venv", "bin",
                                                          "python"))
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, PYTHONPATH=ROOT)
        subprocess.run([python, "-c", NBDIST_SIDE, out], check=True, env=env,
                       timeout=600)
        got = json.load(open(os.path.join(out, "nbdist.json")))
        with tf.Session(graph=tf.Graph()) as sess:
            meta = tf.saved_model.load(sess, ["serve"], got["path"])
            sig = meta.signature_def["predict"]
            feed = {sig.inputs["x"].name: np.array(got["x"], np.float32),
                    sig.inputs["color"].name: np.array(got["color"]).reshape(-1, 1)}
            served = sess.run(sig.outputs["logistic"].name, feed).ravel()
    print("nbdist    ", np.round(got["logistic"], 6).tolist())
    print("TensorFlow", np.round(served.astype(float), 6).tolist())
    ok = np.allclose(served, got["logistic"], atol=1e-6)
    print("agree" if ok else "DIFFER")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
