"""A TF1 queue input pipeline end to end: ``string_input_producer(files,
num_epochs)`` -> ``TFRecordReader`` -> ``parse_single_example`` ->
``shuffle_batch`` trains under ``MonitoredTrainingSession`` until the input
ends (``OutOfRangeError`` stops the session), in one process and on a
``LocalCluster`` of 1 ps and 2 workers, each worker reading its own shard."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import nbdist as nd

EPOCHS = 2
RECORDS_PER_FILE = (7, 5, 6, 4)           # four files: two shards of two
TRUE_W = np.array([[2.0], [-1.0]], np.float32)


def _example(x):
    x = np.asarray(x, np.float32)
    y = float(x @ TRUE_W[:, 0])
    f = nd.train.Feature
    return nd.train.Example(features=nd.train.Features(feature={
        "x": f(float_list=nd.train.FloatList(value=x.tolist())),
        "y": f(float_list=nd.train.FloatList(value=[y]))})).SerializeToString()


@pytest.fixture
def shards(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for k, n in enumerate(RECORDS_PER_FILE):
        path = str(tmp_path / f"part-{k}.tfrecord")
        with nd.python_io.TFRecordWriter(path) as w:
            for _ in range(n):
                w.write(_example(rng.normal(size=2)))
        paths.append(path)
    return paths


def _pipeline(files, batch_size=3):
    """The TF1 input pipeline: the batch and its size (for counting)."""
    filename_queue = nd.train.string_input_producer(files, num_epochs=EPOCHS,
                                                    seed=1)
    reader = nd.TFRecordReader()
    _, serialized = reader.read(filename_queue)
    parsed = nd.parse_single_example(serialized, {
        "x": nd.FixedLenFeature([2], nd.float32),
        "y": nd.FixedLenFeature([1], nd.float32)})
    x, y = nd.train.shuffle_batch([parsed["x"], parsed["y"]], batch_size,
                                  capacity=20, min_after_dequeue=4, seed=2,
                                  allow_smaller_final_batch=True)
    return x, y, nd.shape(x)[0]


def _train(sess_factory, files, device_fn=None):
    """Runs the pipeline's training loop to its end; examples consumed."""
    with nd.device(device_fn):
        gs = nd.train.get_or_create_global_step()
        w = nd.Variable(np.zeros([2, 1], np.float32), name="w")
    x, y, n = _pipeline(files)
    loss = nd.reduce_mean(nd.square(nd.matmul(x, w) - y))
    with nd.device(device_fn):
        train_op = nd.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=gs)
    consumed = 0
    with sess_factory() as sess:
        steps = 0
        while not sess.should_stop() and steps < 1000:
            _, got = sess.run([train_op, n])
            consumed += int(got)
            steps += 1
    return consumed


def test_pipeline_in_one_process_consumes_every_record_each_epoch(shards):
    with nd.Graph().as_default():
        consumed = _train(lambda: nd.train.MonitoredTrainingSession(
            log_step_count_steps=None, save_summaries_steps=None,
            save_checkpoint_secs=None), shards)
    assert consumed == sum(RECORDS_PER_FILE) * EPOCHS


def test_pipeline_on_a_cluster_each_worker_reads_its_shard(shards):
    from nbdist.train.device_setter import replica_device_setter

    cluster = nd.LocalCluster(ps=1, workers=2, progress=False, start_timeout=60)
    try:
        spec = cluster.cluster_spec
        results: dict = {}

        def worker(i):
            try:
                with nd.Graph().as_default():
                    setter = replica_device_setter(
                        cluster=spec, worker_device=f"/job:worker/task:{i}")
                    with nd.device(f"/job:worker/task:{i}"):
                        results[i] = _train(
                            lambda: nd.train.MonitoredTrainingSession(
                                master=cluster.target("worker", i),
                                is_chief=i == 0, max_wait_secs=60,
                                log_step_count_steps=None,
                                config=nd.ConfigProto(device_filters=[
                                    "/job:ps", f"/job:worker/task:{i}"])),
                            shards[2 * i:2 * i + 2], setter)
            except BaseException as e:  # noqa: BLE001 - reported below
                results[i] = e

        threads = [threading.Thread(target=worker, args=(i,), daemon=True)
                   for i in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 180
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in threads), results
        for i in range(2):
            assert results[i] == sum(RECORDS_PER_FILE[2 * i:2 * i + 2]) * EPOCHS, \
                results
        with nd.Graph().as_default():
            with nd.device("/job:ps/task:0"):
                w = nd.Variable(np.zeros([2, 1], np.float32), name="w")
            with nd.Session(cluster.target("worker", 0)) as s:
                trained = s.run(w)
        # Both workers' updates reached the ps's w (it moved towards TRUE_W).
        assert np.abs(trained - TRUE_W).sum() < np.abs(TRUE_W).sum()
    finally:
        cluster.shutdown()
