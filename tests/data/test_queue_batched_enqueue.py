"""A queue runner whose enqueue parses one reader record runs k records per run
(``queue_runner_batched``) and delivers what the one-record loop delivers.

Oracles: the records as written, parsed by hand with protobuf and NumPy (in
file order for one thread, as a multiset for several), and, for a bad record,
the error of the original one-record enqueue run on that record.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import drain

import nbdist as nd
from nbdist import errors
from nbdist.executor import tf_record
from nbdist.proto import example_pb2

_MAX_STEPS = 200


def example(i, image_len=4, garbage=False):
    if garbage:
        return b"\x0a\xffnot an example"
    ex = example_pb2.Example()
    f = ex.features.feature
    f["image"].bytes_list.value.append(bytes((i * 7 + k) % 256 for k in range(image_len)))
    f["label"].int64_list.value.append(i)
    f["f"].float_list.value.extend([i / 3, -i])
    return ex.SerializeToString()


def expected(i):
    """Record ``i`` parsed by hand, as ``parse`` computes it."""
    image = np.array([(i * 7 + k) % 256 for k in range(4)], np.float32)
    f = np.array([i / 3, -i], np.float32)
    return (image.reshape(2, 2) / np.float32(255.0), np.int64(i),
            f * np.array([2.0, 3.0], np.float32) - np.float32(1.0))


def write(tmp_path, records, per_file):
    files = []
    for k in range(0, len(records), per_file):
        path = str(tmp_path / f"part-{k // per_file}.tfrecord")
        with tf_record.TFRecordWriter(path) as w:
            for r in records[k:k + per_file]:
                w.write(r)
        files.append(path)
    return files


def parse(serialized):
    p = nd.parse_single_example(serialized, {
        "image": nd.FixedLenFeature([], nd.string),
        "label": nd.FixedLenFeature([], nd.int64),
        "f": nd.FixedLenFeature([2], nd.float32)})
    image = nd.cast(nd.decode_raw(p["image"], nd.uint8), nd.float32)
    return [nd.reshape(image, [2, 2]) / 255.0, p["label"],
            p["f"] * nd.constant([2.0, 3.0]) - 1.0]


def pipeline(files, threads, batch, fn=parse):
    producer = nd.train.string_input_producer(files, num_epochs=1, shuffle=False)
    key, value = nd.TFRecordReader().read(producer)
    tensors = fn(value)
    out = nd.train.batch(tensors, batch, num_threads=threads, capacity=64,
                         allow_smaller_final_batch=True)
    runner = nd.get_collection(nd.GraphKeys.QUEUE_RUNNERS)[-1]
    return out, runner, (key, value)


def rows(batches):
    return [tuple(c[i] for c in b) for b in batches for i in range(len(b[0]))]


def run(out, finish):
    with nd.Session() as sess:
        sess.run(nd.local_variables_initializer())
        coord = nd.train.Coordinator()
        threads = nd.train.start_queue_runners(sess, coord=coord)
        try:
            return finish(sess, coord, out)
        finally:
            coord.request_stop()
            coord.join(threads, stop_grace_period_secs=30)


def test_one_thread_gives_every_record_in_order_in_batches_of_reads(tmp_path):
    with nd.Graph().as_default() as g:
        files = write(tmp_path, [example(i) for i in range(70)], per_file=25)
        out, _, _ = pipeline(files, threads=1, batch=16)
        types = {op.type for op in g.get_operations()}
        assert {"ReaderReadUpToV2", "QueueEnqueueManyV2"} <= types
        batches = run(out, lambda sess, coord, out: drain(sess, out, _MAX_STEPS))
    assert [len(b[0]) for b in batches] == [16, 16, 16, 16, 6]
    got = rows(batches)
    for i, row in enumerate(got):
        for a, b in zip(row, expected(i)):
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=1e-6)


def test_several_threads_give_each_record_once(tmp_path):
    with nd.Graph().as_default():
        files = write(tmp_path, [example(i) for i in range(90)], per_file=20)
        out, _, _ = pipeline(files, threads=3, batch=8)
        batches = run(out, lambda sess, coord, out: drain(sess, out, _MAX_STEPS))
    got = rows(batches)
    assert sorted(int(r[1]) for r in got) == list(range(90))
    for row in got:
        for a, b in zip(row, expected(int(row[1]))):
            np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("bad", [example(5, garbage=True), example(5, image_len=6)],
                         ids=["not-a-proto", "wrong-image-size"])
def test_a_bad_record_stops_the_runner_as_the_one_record_enqueue(tmp_path, bad):
    records = [example(i) for i in range(12)]
    records[5] = bad
    with nd.Graph().as_default():
        files = write(tmp_path, records, per_file=12)
        out, runner, (key, value) = pipeline(files, threads=1, batch=1)
        size = runner.queue.size()
        enqueue = runner.enqueue_ops[0]
        # the oracle: the one-record enqueue of that record
        with nd.Session() as sess, pytest.raises(errors.InvalidArgumentError) as want:
            sess.run(enqueue, {key: b"k", value: bad})

        got = []

        def finish(sess, coord, out):
            assert coord.wait_for_stop(60)
            got.extend(sess.run(out) for _ in range(int(sess.run(size))))

        with pytest.raises(errors.InvalidArgumentError) as raised:
            run(out, finish)  # the coordinator's join raises the runner's error
    # the records before the bad one, in order; the error is the record's
    assert [int(b[1][0]) for b in got] == [0, 1, 2, 3, 4]
    assert raised.value.message == want.value.message


def summed(serialized):
    p = nd.parse_single_example(serialized, {"f": nd.FixedLenFeature([2],
                                                                      nd.float32)})
    return [nd.reduce_sum(p["f"])]  # a reduction: not per element once batched


def test_an_enqueue_that_does_not_vectorise_runs_one_record_per_run(tmp_path):
    with nd.Graph().as_default() as g:
        files = write(tmp_path, [example(i) for i in range(10)], per_file=10)
        out, _, _ = pipeline(files, threads=1, batch=4, fn=summed)
        assert "ReaderReadUpToV2" not in {op.type for op in g.get_operations()}
        batches = run(out, lambda sess, coord, out: drain(sess, out, _MAX_STEPS))
    got = np.concatenate(batches)  # one component: each batch is its array
    np.testing.assert_allclose(got, [i / 3 - i for i in range(10)], rtol=1e-6)
