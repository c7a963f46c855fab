"""Records/s through TF1 input pipelines, nbdist beside TensorFlow. Run on demand:

    python benchmarks/bench_input.py [--records=3000] [--rounds=2]
        [--tf_python=/work/tfvenv/bin/python] [--no_tf]

The pipelines (``pipelines`` below, written once; only the module bound to
``tf`` changes) read 4 TFRecord files of MNIST-shaped ``Example``s (a
784-byte ``image_raw``, an int64 ``label``, a 16-float ``features``: one
feature of each kind) and deliver batches of 128 to ``sess.run``:

- ``queue, N threads``: ``string_input_producer`` -> ``TFRecordReader.read``
  -> ``parse_single_example`` -> ``decode_raw`` -> ``shuffle_batch`` with
  ``num_threads=N`` (N queue-runner threads; TF's enqueue one record each run,
  nbdist's read and enqueue up to 32 per run: ``queue_runner_batched``),
  queue runners started by ``start_queue_runners``;
- ``dataset``: ``TFRecordDataset`` -> ``map(parse_single_example,
  decode_raw)`` -> ``repeat`` -> ``batch(128)`` and a one-shot iterator
  (nbdist's ``map_and_batch_fusion`` sees through the ``repeat`` and parses
  each batch once; TF's rewrite needs the batch right after the map, and its
  fused op still calls the function per element).

The figure is records/s over ``--records`` records after a warm-up of 5
batches, and CPU seconds per 1,000 records (the whole process, every thread:
``time.process_time``), which holds better than wall time on a busy machine.
Each framework runs in its own process (TF's in ``--tf_python``);
frameworks alternate (A/B/A/B), ``--rounds`` rounds, the best round is shown
(the one least disturbed by the neighbours on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _children import load_note, print_table

ROOT = Path(__file__).resolve().parent.parent
BATCH = 128
FILES = 4
PER_FILE = 2500
THREADS = (1, 2, 4)
WARMUP_BATCHES = 5


def import_tf(framework: str):
    if framework == "tf":
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
        tf.logging.set_verbosity(tf.logging.ERROR)
        return tf
    import nbdist as nd

    return nd


def features(tf):
    return {"image_raw": tf.FixedLenFeature([], tf.string),
            "label": tf.FixedLenFeature([], tf.int64),
            "features": tf.FixedLenFeature([16], tf.float32)}


def decode(tf, parsed):
    image = tf.cast(tf.decode_raw(parsed["image_raw"], tf.uint8), tf.float32)
    image.set_shape([784])
    return image, parsed["label"], parsed["features"]


def queue_pipeline(tf, files, threads):
    producer = tf.train.string_input_producer(files)
    _, serialized = tf.TFRecordReader().read(producer)
    tensors = decode(tf, tf.parse_single_example(serialized, features(tf)))
    return tf.train.shuffle_batch(list(tensors), BATCH, num_threads=threads,
                                  capacity=20 * BATCH, min_after_dequeue=10 * BATCH)


def dataset_pipeline(tf, files):
    def parse(serialized):
        return decode(tf, tf.parse_single_example(serialized, features(tf)))

    ds = tf.data.TFRecordDataset(files).map(parse).repeat().batch(BATCH)
    return tf.data.make_one_shot_iterator(ds).get_next()


def measure(tf, build, records):
    """(records/s, CPU s per 1,000 records) of ``sess.run(batch)`` in a loop."""
    with tf.Graph().as_default():
        batch = build()
        with tf.Session() as sess:
            sess.run([tf.global_variables_initializer(),
                      tf.local_variables_initializer()])
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess, coord)
            for _ in range(WARMUP_BATCHES):
                sess.run(batch)
            n = max(1, records // BATCH)
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(n):
                sess.run(batch)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            coord.request_stop()
            sess.run(batch)  # wakes a runner blocked on a full queue
            coord.join(threads, stop_grace_period_secs=10)
    return n * BATCH / wall, 1000 * cpu / (n * BATCH)


def child(framework, files, records):
    tf = import_tf(framework)
    out = {}
    for t in THREADS:
        out[f"queue, {t} threads"] = measure(
            tf, lambda t=t: queue_pipeline(tf, files, t), records)
    out["dataset"] = measure(tf, lambda: dataset_pipeline(tf, files), records)
    print("result " + json.dumps(out), flush=True)


# -- the parent ------------------------------------------------------------------
def write_files(directory):
    import numpy as np

    from nbdist.executor import tf_record
    from nbdist.proto import example_pb2

    rng = np.random.default_rng(0)
    files = []
    for k in range(FILES):
        path = os.path.join(directory, f"train-{k}.tfrecord")
        with tf_record.TFRecordWriter(path) as w:
            for _ in range(PER_FILE):
                ex = example_pb2.Example()
                f = ex.features.feature
                f["image_raw"].bytes_list.value.append(
                    rng.integers(0, 256, 784, dtype=np.uint8).tobytes())
                f["label"].int64_list.value.append(int(rng.integers(0, 10)))
                f["features"].float_list.value.extend(rng.standard_normal(16))
                w.write(ex.SerializeToString())
        files.append(path)
    return files


def run_child(python, framework, files, records):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2",
               OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [python, __file__, "--child", framework, json.dumps(files), str(records)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=900,
        check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("result "):
            return json.loads(line[7:])
    raise RuntimeError(f"{framework} child failed:\n{proc.stderr[-3000:]}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=3000, help="timed records per row")
    p.add_argument("--rounds", type=int, default=2, help="A/B rounds")
    p.add_argument("--tf_python", default="/work/tfvenv/bin/python")
    p.add_argument("--no_tf", action="store_true", help="nbdist only")
    p.add_argument("--nbdist_before", metavar="CHECKOUT",
                   help="another nbdist tree, run as a third column")
    args = p.parse_args(argv)
    columns = {"nbdist": (sys.executable, "nbdist", None)}
    if args.nbdist_before:
        columns["before"] = (sys.executable, "nbdist", args.nbdist_before)
    if not args.no_tf:
        columns["tf"] = (args.tf_python, "tf", None)
    results: dict = {c: [] for c in columns}
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench_input_") as d:
        files = write_files(d)
        for r in range(args.rounds):
            for col, (python, fw, tree) in columns.items():
                global ROOT
                root, ROOT = ROOT, Path(tree) if tree else ROOT
                try:
                    results[col].append(run_child(python, fw, files, args.records))
                finally:
                    ROOT = root
                print(f"  round {r + 1} {col} done", file=sys.stderr, flush=True)
    rows = list(results["nbdist"][0])
    head = ["pipeline"]
    for col in columns:
        head += [f"{col} rec/s", f"{col} CPU ms/1k"]
    if "tf" in columns:
        head += ["nbdist/TF rec/s", "TF/nbdist CPU"]
    table = []
    for row in rows:
        best = {c: max(rs[row][0] for rs in results[c]) for c in columns}
        cpu = {c: min(rs[row][1] for rs in results[c]) for c in columns}
        line = [row]
        for c in columns:
            line += [f"{best[c]:.0f}", f"{1000 * cpu[c]:.0f}"]
        if "tf" in columns:
            line += [f"{best['nbdist'] / best['tf']:.2f}x",
                     f"{cpu['tf'] / cpu['nbdist']:.2f}x"]
        table.append(line)
    print_table(head, table)
    print(f"(best of {args.rounds} alternating rounds, {args.records} records per row, "
          f"batches of {BATCH}; CPU ms per 1,000 records; {load_note(load0)})")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(main())
