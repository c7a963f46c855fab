#!/usr/bin/env python3
"""Checks that TensorFlow serves a SavedModel that an nbdist canned estimator
exported, with the predictions nbdist gives.

Run with a Python that has TensorFlow; it runs nbdist in ``NBDIST_PYTHON``
(default: the repository's ``.venv``)::

    /work/tfvenv/bin/python scripts/check_tf_serves_canned.py

nbdist trains a ``DNNClassifier`` over a numeric column, the embedding of a
vocabulary column and the indicator of a crossed (vocabulary x bucketized)
column, exports it twice, with a raw serving input receiver and with a parsing
one (``build_parsing_serving_input_receiver_fn`` over
``make_parse_example_spec``: a ``ParseExampleV2`` node), and prints its own
predictions; TensorFlow loads each SavedModel (``tf.compat.v1.saved_model``)
and runs its ``predict`` signature on the same rows, raw tensors for the
first and serialized ``tf.train.Example``s for the second. Exit status 0 when
the logits agree to 1e-5.
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
parsing = nd.estimator.export.build_parsing_serving_input_receiver_fn(
    fc.make_parse_example_spec(cols))
parsing_path = est.export_saved_model(os.path.join(out, "export_parsing"), parsing)
rows = {"x": x[:8], "color": color[:8]}
preds = list(est.predict(
    lambda: nd.data.Dataset.from_tensor_slices(rows).batch(8)))
examples = [nd.train.Example(features=nd.train.Features(feature={
    "x": nd.train.Feature(float_list=nd.train.FloatList(value=x[i])),
    "color": nd.train.Feature(bytes_list=nd.train.BytesList(
        value=[color[i].encode()]))})).SerializeToString().hex() for i in range(8)]
as_str = lambda p: p.decode() if isinstance(p, bytes) else p
json.dump({"path": as_str(path), "parsing_path": as_str(parsing_path),
           "x": x[:8].tolist(), "color": color[:8].tolist(), "examples": examples,
           "logits": [float(p["logits"][0]) for p in preds]},
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
        raw = serve(tf, got["path"], {
            "x": np.array(got["x"], np.float32),
            "color": np.array(got["color"]).reshape(-1, 1)})
        parsed = serve(tf, got["parsing_path"], {
            "examples": np.array([bytes.fromhex(e) for e in got["examples"]],
                                 dtype=object)})
    print("logits")
    print("nbdist                       ", np.round(got["logits"], 6).tolist())
    ok = True
    for what, served in (("raw receiver", raw), ("parsing receiver", parsed)):
        print(f"TensorFlow, {what:17s}", np.round(served.astype(float), 6).tolist())
        ok &= bool(np.allclose(served, got["logits"], atol=1e-5, rtol=1e-6))
    print("agree" if ok else "DIFFER")
    sys.exit(0 if ok else 1)


def serve(tf, path, inputs):
    """The ``logits`` output of the SavedModel at ``path``'s ``predict``
    signature, run by TensorFlow on ``inputs`` (by signature input key)."""
    with tf.Session(graph=tf.Graph()) as sess:
        meta = tf.saved_model.load(sess, ["serve"], path)
        sig = meta.signature_def["predict"]
        feed = {sig.inputs[k].name: v for k, v in inputs.items()}
        return sess.run(sig.outputs["logits"].name, feed).ravel()


if __name__ == "__main__":
    main()
