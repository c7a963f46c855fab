#!/usr/bin/env python3
"""Write the TFRecord fixtures of tests/data/test_tfrecord.py with TensorFlow.

Run with a Python that has TensorFlow (not nbdist's venv; tests never import
TF):

    /work/tfvenv/bin/python scripts/make_tfrecord_fixtures.py

Writes ``tests/fixtures/tf/examples.tfrecord`` (uncompressed) and
``examples_gzip.tfrecord`` (GZIP): four ``tf.train.Example``s, example ``i``
having ``id`` = [i] (int64), ``label`` = [i * 0.5] (float), ``name`` =
[b"ex<i>"] (bytes) and ``tokens`` = i int64 values 10*i .. 10*i + i - 1
(empty for i = 0), so a fixed-length and a variable-length feature can be
checked against these formulas.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "tf"
N = 4


def example(i: int) -> tf.train.Example:
    f = tf.train.Feature
    return tf.train.Example(features=tf.train.Features(feature={
        "id": f(int64_list=tf.train.Int64List(value=[i])),
        "label": f(float_list=tf.train.FloatList(value=[i * 0.5])),
        "name": f(bytes_list=tf.train.BytesList(value=[b"ex%d" % i])),
        "tokens": f(int64_list=tf.train.Int64List(
            value=list(range(10 * i, 10 * i + i)))),
    }))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, options in (("examples.tfrecord", None),
                          ("examples_gzip.tfrecord",
                           tf.io.TFRecordOptions(compression_type="GZIP"))):
        with tf.io.TFRecordWriter(str(OUT / name), options) as w:
            for i in range(N):
                w.write(example(i).SerializeToString())
        print("wrote", OUT / name)


if __name__ == "__main__":
    main()
