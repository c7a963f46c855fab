"""The two input-pipeline programs of ``benchmarks/bench_programs.py`` run as
written with ``tf`` bound to nbdist, on a ps and a chief worker (two servers in
this process; the benchmark runs them as processes):

- ``embedding``: ``WholeFileReader`` queues over one-Example shard files,
  ``parse_single_example`` of ``VarLenFeature``s, ``sparse_to_dense``,
  ``shuffle_batch`` and ``embedding_lookup`` of tables on the ps under Adagrad.
  Oracle: the global step counts the steps, and Adagrad's accumulator (0.1 at
  the start, as TF's ``initial_accumulator_value``) grew on exactly the rows
  whose ids some shard holds, never on the rest (the sparse update reached the
  ps's rows the parsed, padded ids name: id 0 is padding and is masked out of
  the mean, so its row gets a zero gradient and TF adds 0 to its accumulator).
- ``dataset``: ``MonitoredTrainingSession`` over ``TFRecordDataset`` ->
  ``map(parse)`` -> ``shuffle`` -> ``batch`` -> ``repeat``: the global step
  counts the steps, and a batch the iterator gives afterwards holds 64 of the
  files' records, each image (its bytes / 255) with its own label.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from helpers import ROOT, local_cluster

import nbdist as nd
from nbdist.proto import example_pb2

STEPS = 30


@pytest.fixture
def shapes(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.setenv("BENCH_STEPS", str(STEPS))
    monkeypatch.delenv("BENCH_PROFILE", raising=False)
    import _program_shapes

    return _program_shapes


@contextlib.contextmanager
def _run(program, logdir):
    """``program`` on 1 ps + 1 worker in this process; its graph and the ps."""
    cluster = local_cluster(ps=1, worker=1)
    spec = nd.train.ClusterSpec(cluster)
    ps = nd.train.Server(spec, job_name="ps", task_index=0)
    worker = nd.train.Server(spec, job_name="worker", task_index=0)
    graph = nd.Graph()
    try:
        with graph.as_default():
            program(nd, worker, spec, 0, str(logdir), 0.0)
        yield graph, worker
    finally:
        worker.stop()
        ps.stop()


def _values(graph, worker, names):
    with graph.as_default(), nd.Session(worker.target) as sess:
        return sess.run([graph.get_tensor_by_name(n) for n in names])


def test_embedding_program_updates_exactly_the_rows_its_files_name(shapes, tmp_path):
    shapes.write_shards(str(tmp_path))
    named = set()
    for path in tmp_path.glob("shard-*.example"):
        ex = example_pb2.Example.FromString(path.read_bytes())
        named.update(ex.features.feature["words"].int64_list.value)
    with _run(shapes.embedding_program, tmp_path) as (graph, worker):
        step, acc = _values(graph, worker, ["global_step:0", "words/Adagrad:0"])
    assert step == STEPS
    grown = set(np.flatnonzero(np.any(acc > np.float32(0.1), axis=1)).tolist())
    assert grown and grown <= named  # only rows some shard names ...
    untouched = np.setdiff1d(np.arange(shapes.VOCAB), sorted(named))
    np.testing.assert_array_equal(acc[untouched], np.float32(0.1))  # ... the rest
    # 30 batches of 32 from 400 shards reach most of the named rows
    assert len(grown) > 0.5 * len(named)


def test_dataset_program_steps_on_the_files_records(shapes, tmp_path):
    shapes.write_records(str(tmp_path))
    with _run(shapes.dataset_program, tmp_path) as (graph, worker):
        step, x, y = _values(graph, worker, ["global_step:0", "IteratorGetNext:0",
                                             "IteratorGetNext:1"])
    assert step == STEPS
    records = {}
    for path in tmp_path.glob("records-*.tfrecord"):
        for raw in nd.python_io.tf_record_iterator(str(path)):
            f = example_pb2.Example.FromString(raw).features.feature
            records[f["image_raw"].bytes_list.value[0]] = f["label"].int64_list.value[0]
    assert x.shape == (64, 784) and x.dtype == np.float32 and y.dtype == np.int64
    for image, label in zip(x, y):
        key = np.rint(image * 255).astype(np.uint8).tobytes()
        assert records[key] == label
