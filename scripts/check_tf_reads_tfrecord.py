#!/usr/bin/env python3
"""Check by hand that TensorFlow reads the TFRecord files nbdist writes.

Run with a Python that has TensorFlow; nbdist's own Python writes the files:

    /work/tfvenv/bin/python scripts/check_tf_reads_tfrecord.py \
        [--nbdist-python /work/main/.venv/bin/python]

nbdist writes three ``nd.train.Example`` files (uncompressed, ZLIB and GZIP)
with ``nd.python_io.TFRecordWriter``; TensorFlow reads each with
``tf.data.TFRecordDataset`` and ``tf.io.parse_single_example`` and the values
are compared with the formulas nbdist wrote. Prints one line per file and
exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
N = 5

WRITE = """
import sys
import nbdist as nd
out = sys.argv[1]
for name, comp in (("plain", None), ("zlib", "ZLIB"), ("gzip", "GZIP")):
    opts = nd.python_io.TFRecordOptions(comp)
    with nd.python_io.TFRecordWriter(f"{out}/{name}.tfrecord", opts) as w:
        for i in range(%d):
            ex = nd.train.Example(features=nd.train.Features(feature={
                "x": nd.train.Feature(float_list=nd.train.FloatList(
                    value=[i, i / 4])),
                "n": nd.train.Feature(int64_list=nd.train.Int64List(
                    value=range(i))),
                "s": nd.train.Feature(bytes_list=nd.train.BytesList(
                    value=[b"r%%d" %% i]))}))
            w.write(ex.SerializeToString())
""" % N


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nbdist-python", default="/work/main/.venv/bin/python")
    args = ap.parse_args()
    import tensorflow as tf

    out = tempfile.mkdtemp()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([args.nbdist_python, "-c", WRITE, out], check=True, env=env)
    spec = {"x": tf.io.FixedLenFeature([2], tf.float32),
            "n": tf.io.VarLenFeature(tf.int64),
            "s": tf.io.FixedLenFeature([], tf.string)}
    bad = 0
    for name, comp in (("plain", ""), ("zlib", "ZLIB"), ("gzip", "GZIP")):
        ds = tf.data.TFRecordDataset(f"{out}/{name}.tfrecord", compression_type=comp)
        got = [tf.io.parse_single_example(r, spec) for r in ds]
        ok = len(got) == N and all(
            e["x"].numpy().tolist() == [i, i / 4]
            and tf.sparse.to_dense(e["n"]).numpy().tolist() == list(range(i))
            and e["s"].numpy() == b"r%d" % i for i, e in enumerate(got))
        bad += not ok
        print(f"{name:5s} ({comp or 'NONE'}): TF read {len(got)} Examples written by "
              f"nbdist: {'OK' if ok else 'MISMATCH'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
