#!/usr/bin/env python3
"""Checks by hand that TensorFlow reads what a distributed ``nd.estimator``
run writes. Two steps, each with its own Python (the tests never import
TensorFlow)::

    DIR=$(mktemp -d)
    PYTHONPATH=$PWD /work/main/.venv/bin/python \
        scripts/check_tf_reads_estimator.py train $DIR
    /work/tfvenv/bin/python scripts/check_tf_reads_estimator.py read $DIR

``train`` (nbdist) runs ``examples/estimator_tf_config.py`` as five processes
with ``TF_CONFIG`` (chief, ps, two workers, evaluator) into ``DIR/model``, then
saves what nbdist reads back (every variable of the chief's latest checkpoint,
and the final SavedModel's predictions for a few inputs) to
``DIR/expected.npz``. ``read`` (TensorFlow) opens the chief's latest checkpoint
with ``tf.train.load_checkpoint``, loads the SavedModel with
``tf.compat.v1.saved_model.loader.load`` and serves the inputs, printing each
value beside nbdist's; it exits 1 on a mismatch.
"""

from __future__ import annotations

import glob
import os
import signal
import sys

import numpy as np

INPUTS = np.linspace(-2.0, 2.0, 5 * 8, dtype=np.float32).reshape(5, 8)


def train(directory):
    import nbdist as nd

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    import estimator_tf_config as example

    model_dir = os.path.join(directory, "model")
    procs = example.launch(model_dir, max_steps=300)
    ps = procs.pop("ps:0")
    codes = {name: p.wait(timeout=300) for name, p in procs.items()}
    ps.send_signal(signal.SIGTERM)
    codes["ps:0"] = ps.wait(timeout=30)
    print("exit codes", codes)
    checkpoint = nd.train.latest_checkpoint(model_dir)
    reader = nd.train.load_checkpoint(checkpoint)
    values = {f"var/{name}": reader.get_tensor(name)
              for name in reader.get_variable_to_shape_map()}
    (export_dir,) = glob.glob(os.path.join(model_dir, "export", "final", "*"))
    with nd.Graph().as_default(), nd.Session() as sess:
        meta = nd.saved_model.loader.load(sess, ["serve"], export_dir)
        sig = meta.signature_def["serving_default"]
        values["probabilities"] = sess.run(sig.outputs["probabilities"].name,
                                           {sig.inputs["x"].name: INPUTS})
    np.savez(os.path.join(directory, "expected.npz"), checkpoint=checkpoint,
             export_dir=export_dir, **values)
    print("nbdist wrote", checkpoint, "and", export_dir)
    return 0 if set(codes.values()) == {0} else 1


def read(directory):
    import tensorflow as tf

    expected = np.load(os.path.join(directory, "expected.npz"))
    checkpoint = str(expected["checkpoint"])
    reader = tf.train.load_checkpoint(checkpoint)
    shapes = reader.get_variable_to_shape_map()
    print("TensorFlow", tf.__version__, "reads", checkpoint, "->", sorted(shapes))
    ok = True
    for key in expected.files:
        if not key.startswith("var/"):
            continue
        name = key[4:]
        got = reader.get_tensor(name)
        match = np.array_equal(got, expected[key])
        ok &= match
        print(f"  {name:32s} {str(got.dtype):8s} {list(got.shape)!s:10s} "
              f"{'same as nbdist' if match else 'DIFFERS'}")
    ok &= set(shapes) == {k[4:] for k in expected.files if k.startswith("var/")}
    export_dir = str(expected["export_dir"])
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], export_dir)
        sig = meta.signature_def["serving_default"]
        probs = sess.run(sig.outputs["probabilities"].name,
                         {sig.inputs["x"].name: INPUTS})
    close = np.allclose(probs, expected["probabilities"], rtol=1e-5, atol=1e-6)
    ok &= close
    print("TensorFlow serves", export_dir, "probabilities",
          np.round(probs[:, 1], 4).tolist(),
          "same as nbdist" if close else "DIFFER from nbdist",
          np.round(expected["probabilities"][:, 1], 4).tolist())
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("train", "read"):
        sys.exit(__doc__)
    sys.exit({"train": train, "read": read}[sys.argv[1]](sys.argv[2]))
