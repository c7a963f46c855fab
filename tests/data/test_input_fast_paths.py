"""The per-record fast paths of a queue-fed input pipeline give what the general
paths give: ``decode_raw`` of one record, ``parse_single_example`` of one
example, ``ReaderReadV2`` of one record and an enqueue of arrays that already
fit the queue. Each test compares a one-record run with the batched (general)
run of the same data, or with NumPy / protobuf built by hand, and checks that
what does not fit still fails as it did."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import nbdist as nd
from nbdist.proto import example_pb2


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


RAW = bytes(range(200, 256)) + bytes(range(8))  # 64 bytes, not symmetric


@pytest.mark.parametrize("dtype", [nd.uint8, nd.int16, nd.int32, nd.float32,
                                   nd.float64, nd.int64])
@pytest.mark.parametrize("little_endian", [True, False])
def test_decode_raw_of_one_record_is_the_batch_row(dtype, little_endian):
    one = nd.placeholder(nd.string, [])
    many = nd.placeholder(nd.string, [None])
    a = nd.decode_raw(one, dtype, little_endian=little_endian)
    b = nd.decode_raw(many, dtype, little_endian=little_endian)
    order = "<" if little_endian else ">"
    want = np.frombuffer(RAW, np.dtype(dtype.as_numpy_dtype).newbyteorder(order))
    with nd.Session() as s:
        got_one, got_many = s.run([a, b], {one: RAW, many: [RAW, RAW]})
    np.testing.assert_array_equal(got_one, want)
    np.testing.assert_array_equal(got_many, np.stack([want, want]))
    assert got_one.dtype == np.dtype(dtype.as_numpy_dtype)
    assert got_one.shape == (64 // np.dtype(dtype.as_numpy_dtype).itemsize,)


def test_decode_raw_of_one_record_of_a_bad_length_fails_as_the_batch():
    one = nd.placeholder(nd.string, [])
    with nd.Session() as s, pytest.raises(
            nd.errors.InvalidArgumentError,
            match="length 5 that is not a multiple of 4, the size of float"):
        s.run(nd.decode_raw(one, nd.float32), {one: b"12345"})


def example(image=None, label=None, feats=None, label_floats=None):
    ex = example_pb2.Example()
    f = ex.features.feature
    if image is not None:
        f["image"].bytes_list.value.append(image)
    if label is not None:
        f["label"].int64_list.value.extend(label)
    if label_floats is not None:
        f["label"].float_list.value.extend(label_floats)
    if feats is not None:
        f["feats"].float_list.value.extend(feats)
    return ex.SerializeToString()


def features(default_label=None):
    return {"image": nd.FixedLenFeature([], nd.string),
            "label": nd.FixedLenFeature([2], nd.int64,
                                        default_value=default_label),
            "feats": nd.FixedLenFeature([2, 3], nd.float32)}


def test_parse_single_example_is_row_0_of_parse_example():
    rng = np.random.default_rng(3)
    feats = rng.standard_normal(6).astype(np.float32)
    serialized = [example(b"\x00img", [7, -9], feats),
                  example(b"", [1 << 40, 0], -feats)]
    one = nd.placeholder(nd.string, [])
    many = nd.placeholder(nd.string, [None])
    single = nd.parse_single_example(one, features())
    batch = nd.parse_example(many, features())
    with nd.Session() as s:
        got_batch = s.run(batch, {many: serialized})
        for i, ser in enumerate(serialized):
            got = s.run(single, {one: ser})
            for k in ("image", "label", "feats"):
                assert np.asarray(got[k]).shape == got_batch[k].shape[1:]
                np.testing.assert_array_equal(got[k], got_batch[k][i])
    np.testing.assert_array_equal(got_batch["label"], [[7, -9], [1 << 40, 0]])
    np.testing.assert_array_equal(got_batch["feats"][0], feats.reshape(2, 3))
    assert list(got_batch["image"]) == [b"\x00img", b""]


@pytest.mark.parametrize("kwargs, message", [
    ({"image": b"x", "feats": [0.0] * 6},
     "Feature: label \\(data type: int64\\) is required but could not be found"),
    ({"image": b"x", "label": [1, 2, 3], "feats": [0.0] * 6},
     ("Key: label, Index: 0.  Number of int64 values != expected.  Values size: 3 "
      "but output shape: \\[2\\]")),
    ({"image": b"x", "label_floats": [1.0, 2.0], "feats": [0.0] * 6},
     ("Key: label.  Data types don't match. Data type: float but expected type: "
      "int64")),
])
def test_parse_single_example_that_does_not_fit_fails_as_before(kwargs, message):
    one = nd.placeholder(nd.string, [])
    single = nd.parse_single_example(one, features())
    with nd.Session() as s, pytest.raises(nd.errors.InvalidArgumentError,
                                          match=message):
        s.run(single, {one: example(**kwargs)})


def test_parse_single_example_missing_feature_takes_its_default():
    one = nd.placeholder(nd.string, [])
    single = nd.parse_single_example(one, features(default_label=[4, 5]))
    with nd.Session() as s:
        got = s.run(single, {one: example(b"i", None, [1.0] * 6)})
    np.testing.assert_array_equal(got["label"], [4, 5])


def test_reader_read_one_record_at_a_time_matches_read_up_to(tmp_path):
    files = []
    for k, n in enumerate([3, 0, 2]):  # an empty file in the middle
        path = str(tmp_path / f"f{k}.tfrecord")
        with nd.python_io.TFRecordWriter(path) as w:
            for i in range(n):
                w.write(f"file{k}-rec{i}".encode() * (i + 1))
        files.append(path)

    def run(read):
        with nd.Graph().as_default():
            queue = nd.FIFOQueue(10, nd.string)
            reader = nd.TFRecordReader()
            kv = read(reader, queue)
            counts = [reader.num_records_produced(),
                      reader.num_work_units_completed()]
            out = []
            with nd.Session() as s:
                s.run(queue.enqueue_many([files]))
                s.run(queue.close())
                for _ in range(10):
                    try:
                        k, v = s.run(kv)
                    except nd.errors.OutOfRangeError:
                        break
                    out += list(zip(np.atleast_1d(k).tolist(),
                                    np.atleast_1d(v).tolist()))
                    out.append(tuple(int(c) for c in s.run(counts)))
        return out

    one = run(lambda r, q: r.read(q))
    up_to = run(lambda r, q: r.read_up_to(q, 1))
    assert one == up_to
    records = [kv for kv in one if isinstance(kv[0], bytes)]
    assert [v for _, v in records] == [b"file0-rec0", b"file0-rec1" * 2,
                                       b"file0-rec2" * 3, b"file2-rec0",
                                       b"file2-rec1" * 2]
    assert records[3][0] == f"{files[2]}:0".encode()
    # After the last record: 5 records; files 0 and 1 (empty) done, file 2 only
    # once a read finds its end (as TF's reader: the read past the last record).
    assert one[-1] == (5, 2)


def test_enqueue_of_fitting_arrays_and_numpy_scalars_round_trips():
    q = nd.FIFOQueue(5, [nd.float32, nd.int64, nd.string], shapes=[[2], [], []])
    x = nd.placeholder(nd.float32, [2])
    label = nd.parse_single_example(
        nd.constant(example(label=[5, 6])),
        {"label": nd.FixedLenFeature([2], nd.int64)})["label"][1]  # a scalar
    enq = q.enqueue([x, label, nd.constant(b"s")])
    with nd.Session() as s:
        s.run(enq, {x: [1.5, -2.0]})
        a, b, c = s.run(q.dequeue())
        s.run(enq, {x: [3.0, 4.0]})
        s.run(enq, {x: [5.0, 6.0]})
        many = s.run(q.dequeue_many(2))
    np.testing.assert_array_equal(a, np.float32([1.5, -2.0]))
    assert (int(b), c) == (6, b"s")
    np.testing.assert_array_equal(many[0], [[3.0, 4.0], [5.0, 6.0]])
    assert many[1].dtype == np.int64 and many[1].tolist() == [6, 6]


def test_enqueue_that_does_not_fit_the_queue_is_refused():
    q = nd.FIFOQueue(5, [nd.float32], shapes=[[2]])
    wrong_shape = nd.placeholder(nd.float32, None)
    with nd.Session() as s:
        with pytest.raises(nd.errors.InvalidArgumentError,
                           match="Shape mismatch in tuple component 0. Expected "
                                 "\\[2\\], got \\[3\\]"):
            s.run(q.enqueue([wrong_shape]), {wrong_shape: [1.0, 2.0, 3.0]})
        assert int(s.run(q.size())) == 0


def test_blocked_dequeue_gets_elements_enqueued_one_at_a_time_then_close():
    """A dequeue waiting for more than one enqueue brings is served once enough
    arrived (past ``min_after_dequeue``); a close wakes a blocked dequeue, which
    fails, and what is left can still be taken."""
    q = nd.RandomShuffleQueue(10, 2, [nd.int64], shapes=[[]], seed=1)
    x = nd.placeholder(nd.int64, [])
    enq = q.enqueue([x])
    deq = {3: q.dequeue_many(3), 5: q.dequeue_many(5)}
    rest = q.dequeue_up_to(5)
    got, errors = [], []
    with nd.Session() as s:
        def take(n):
            try:
                got.append(sorted(s.run(deq[n]).tolist()))
            except nd.errors.OutOfRangeError as e:
                errors.append(e)

        t = threading.Thread(target=take, args=(3,))
        t.start()
        for i in range(5):  # 3 to take, 2 to keep behind
            s.run(enq, {x: i})
        t.join(timeout=30)
        assert not t.is_alive() and len(got[0]) == 3
        left = sorted(set(range(5)) - set(got[0]))
        t = threading.Thread(target=take, args=(5,))
        t.start()
        s.run(q.close())
        t.join(timeout=30)
        assert not t.is_alive()
        assert "is closed and has insufficient elements" in str(errors[0])
        assert sorted(s.run(rest).tolist()) == left


class _RunOnly:
    """A session-like object with ``run`` only (no ``make_callable``)."""

    def __init__(self, sess):
        self.sess, self.graph, self.runs = sess, sess.graph, 0

    def run(self, *args, **kwargs):
        self.runs += 1
        return self.sess.run(*args, **kwargs)


@pytest.mark.parametrize("wrap", [False, True])
def test_queue_runner_runs_its_enqueue_op_until_the_input_ends(wrap):
    """The runner's loop (a callable made once, as TF's; ``run`` for a
    session-like object without ``make_callable``) enqueues every record in
    order and closes its queue when its input queue is closed and empty."""
    source = nd.FIFOQueue(10, [nd.int64], shapes=[[]])
    fill = source.enqueue_many([nd.constant(np.arange(7, dtype=np.int64))])
    sink = nd.FIFOQueue(10, [nd.int64], shapes=[[]])
    qr = nd.train.QueueRunner(sink, [sink.enqueue([source.dequeue() * 10])])
    with nd.Session() as s:
        s.run([fill, source.close()])
        target = _RunOnly(s) if wrap else s
        (thread,) = qr.create_threads(target, start=True)
        thread.join(timeout=60)
        assert not thread.is_alive() and not qr.exceptions_raised
        assert s.run(sink.dequeue_up_to(10)).tolist() == list(range(0, 70, 10))
    if wrap:
        assert target.runs == 9  # 7 records, the run that ended, the close


def test_queue_and_reader_of_a_reset_container_start_fresh(tmp_path):
    """A queue op and a reader op hold on to their resource between runs; after
    ``Session.reset`` of its container a new session gets new ones (an empty,
    open queue; a reader at its start), as TF."""
    path = str(tmp_path / "a.tfrecord")
    with nd.python_io.TFRecordWriter(path) as w:
        for r in (b"r0", b"r1"):
            w.write(r)
    server = nd.Server.create_local_server()
    try:
        with nd.Graph().as_default():
            with nd.container("c1"):
                q = nd.FIFOQueue(5, [nd.int64], shapes=[[]], shared_name="q")
                files = nd.FIFOQueue(5, nd.string, shared_name="files")
                reader = nd.TFRecordReader()
            enq = q.enqueue([nd.constant(3, nd.int64)])
            fill = files.enqueue_many([[path, path]])
            read = reader.read(files)
            for round_ in range(2):
                with nd.Session(server.target) as s:
                    assert int(s.run(q.size())) == 0
                    s.run([enq, fill])
                    s.run(enq)
                    assert int(s.run(q.size())) == 2
                    assert s.run(read)[1] == b"r0"
                    assert int(s.run(reader.num_records_produced())) == 1
                    s.run(q.close())
                nd.Session.reset(server.target, ["c1"])
    finally:
        server.stop()


def test_two_waiting_dequeues_of_different_sizes_are_both_served():
    """Dequeues waiting for 2 and for 4 elements while elements arrive one at a
    time: each gets its own elements, every element goes out exactly once."""
    q = nd.FIFOQueue(20, [nd.int64], shapes=[[]])
    x = nd.placeholder(nd.int64, [])
    enq = q.enqueue([x])
    deq = {2: q.dequeue_many(2), 4: q.dequeue_many(4)}
    got = {}
    with nd.Session() as s:
        threads = [threading.Thread(target=lambda n=n: got.__setitem__(
            n, s.run(deq[n]).tolist())) for n in (4, 2)]
        for t in threads:
            t.start()
        for i in range(6):
            s.run(enq, {x: i})
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads)
    assert sorted(got) == [2, 4] and [len(got[2]), len(got[4])] == [2, 4]
    assert sorted(got[2] + got[4]) == list(range(6))


def test_parse_keys_fed_in_one_run_apply_to_that_run_only():
    """The keys are inputs of the parse op (``ParseExampleV2``, as TF 2 writes
    it): the keys a run feeds are the ones it parses, run after run."""
    with nd.Graph().as_default() as g:
        one = nd.placeholder(nd.string, [])
        dense_keys = nd.placeholder(nd.string, [1])
        empty = nd.constant([], nd.string)
        op = g.create_op(
            "ParseExampleV2",
            [one, empty, empty, dense_keys, empty, nd.constant([], nd.int64)],
            {"Tdense": [nd.int64], "num_sparse": 0, "sparse_types": [],
             "ragged_value_types": [], "ragged_split_types": [],
             "dense_shapes": [nd.TensorShape([])]})
        ex = example_pb2.Example()
        ex.features.feature["a"].int64_list.value.append(1)
        ex.features.feature["b"].int64_list.value.append(2)
        feed = {one: ex.SerializeToString()}
        with nd.Session() as s:
            for key, want in [(b"a", 1), (b"b", 2), (b"a", 1)]:
                assert int(s.run(op.outputs[0], {**feed, dense_keys: [key]})) == want
