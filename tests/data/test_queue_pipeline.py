"""The TF1 queue input pipeline (``nd.train.input_producer`` ... ``shuffle_batch``)
and the queue pieces under it (``RandomShuffleQueue``, ``dequeue_up_to``,
``CountUpTo``). Oracles: the NumPy input, as a sequence or a multiset."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import drain, local_cluster

import nbdist as nd
from nbdist import errors
from nbdist.ops.state_ops import count_up_to


def _start(sess):
    coord = nd.train.Coordinator()
    sess.run(nd.local_variables_initializer())
    return coord, nd.train.start_queue_runners(sess, coord=coord)


def _stop(coord, threads):
    coord.request_stop()
    coord.join(threads, stop_grace_period_secs=30)


# -- the queue pieces ----------------------------------------------------------------
def test_count_up_to(graph):
    v = nd.Variable(np.int64(0), name="counter")
    c = count_up_to(v, 3)
    with nd.Session() as sess:
        sess.run(v.initializer)
        assert [int(sess.run(c)) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(errors.OutOfRangeError, match="Reached limit of 3"):
            sess.run(c)
        assert sess.run(v) == 3
    with pytest.raises(TypeError, match="int32 or int64"):
        count_up_to(nd.Variable(0.0), 3)


def test_dequeue_up_to_returns_the_rest_once_closed(graph):
    q = nd.FIFOQueue(10, [nd.int32], shapes=[[]])
    up_to = q.dequeue_up_to(4)
    assert up_to.shape.as_list() == [None]
    with nd.Session() as sess:
        sess.run(q.enqueue_many([[1, 2, 3, 4, 5, 6]]))
        sess.run(q.close())
        assert sess.run(up_to).tolist() == [1, 2, 3, 4]
        assert sess.run(up_to).tolist() == [5, 6]
        with pytest.raises(errors.OutOfRangeError):
            sess.run(up_to)


def test_random_shuffle_queue_is_seeded_and_keeps_min_after_dequeue(graph):
    data = np.arange(20, dtype=np.int32)
    orders = []
    for _ in range(2):
        with nd.Graph().as_default():
            q = nd.RandomShuffleQueue(30, 5, [nd.int32], shapes=[[]], seed=7)
            enq, close = q.enqueue_many([data]), q.close()
            deq, size = q.dequeue_many(15), q.size()
            rest = q.dequeue_up_to(15)
            with nd.Session() as sess:
                sess.run(enq)
                first = sess.run(deq)
                assert sess.run(size) == 5
                # Only 5 left: a 1-element dequeue would take it below min.
                with pytest.raises(errors.DeadlineExceededError):
                    sess.run(deq, options=nd.RunOptions(timeout_in_ms=100))
                sess.run(close)
                orders.append(np.concatenate([first, sess.run(rest)]))
    np.testing.assert_array_equal(np.sort(orders[0]), data)
    np.testing.assert_array_equal(orders[0], orders[1])  # same seed, same order
    assert not np.array_equal(orders[0], data)


# -- producers ---------------------------------------------------------------------------
def test_input_producer_epochs_in_order(graph):
    data = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    q = nd.train.input_producer(nd.constant(data), num_epochs=2, shuffle=False,
                                capacity=4)
    assert q.dequeue().shape.as_list() == [2]
    with nd.Session() as sess:
        coord, threads = _start(sess)
        got = drain(sess, q.dequeue())
        _stop(coord, threads)
    np.testing.assert_array_equal(np.stack(got), np.concatenate([data, data]))


def test_string_input_producer_shuffles_each_epoch(graph):
    names = [f"file{i}" for i in range(8)]
    nd.set_random_seed(3)
    q = nd.train.string_input_producer(names, num_epochs=3, seed=1)
    with nd.Session() as sess:
        coord, threads = _start(sess)
        got = [x.decode() for x in drain(sess, q.dequeue())]
        _stop(coord, threads)
    epochs = [got[i * 8:(i + 1) * 8] for i in range(3)]
    assert len(got) == 24
    assert all(sorted(e) == names for e in epochs)
    assert any(e != names for e in epochs)
    with pytest.raises(ValueError, match="non-null"):
        nd.train.string_input_producer([])


def test_slice_input_producer_keeps_rows_together(graph):
    x = np.arange(6, dtype=np.int32)
    y = np.array([f"row{i}" for i in range(6)])
    xs, ys = nd.train.slice_input_producer([x, y], num_epochs=2, seed=5)
    with nd.Session() as sess:
        coord, threads = _start(sess)
        pairs = drain(sess, [xs, ys])
        _stop(coord, threads)
    assert len(pairs) == 12
    assert all(b.decode() == f"row{a}" for a, b in pairs)
    assert sorted(int(a) for a, _ in pairs) == sorted(list(x) * 2)


def test_range_input_producer_repeats_without_num_epochs(graph):
    q = nd.train.range_input_producer(3, shuffle=False, capacity=2)
    with nd.Session() as sess:
        coord, threads = _start(sess)
        got = [int(sess.run(q.dequeue())) for _ in range(7)]
        _stop(coord, threads)
    assert got == [0, 1, 2, 0, 1, 2, 0]


# -- batching ----------------------------------------------------------------------------
def test_batch_with_threads_and_a_smaller_final_batch(graph):
    data = np.arange(10, dtype=np.float32)
    x = nd.train.input_producer(nd.constant(data), num_epochs=1,
                                shuffle=False).dequeue()
    b = nd.train.batch({"x": x, "sq": x * x}, batch_size=4, num_threads=2,
                       capacity=6, allow_smaller_final_batch=True)
    assert set(b) == {"x", "sq"} and b["x"].shape.as_list() == [None]
    with nd.Session() as sess:
        coord, threads = _start(sess)
        batches = drain(sess, b)
        _stop(coord, threads)
    assert [len(bt["x"]) for bt in batches] == [4, 4, 2]
    xs = np.concatenate([bt["x"] for bt in batches])
    np.testing.assert_array_equal(np.sort(xs), data)
    for bt in batches:
        np.testing.assert_array_equal(bt["sq"], bt["x"] ** 2)


def test_batch_enqueue_many_exact_batches(graph):
    rows = nd.constant(np.arange(12, dtype=np.int32).reshape(6, 2))
    b = nd.train.batch([rows], batch_size=4, enqueue_many=True, capacity=8)
    assert b.shape.as_list() == [4, 2]
    with nd.Session() as sess:
        coord, threads = _start(sess)
        first, second = sess.run(b), sess.run(b)
        _stop(coord, threads)
    np.testing.assert_array_equal(first, [[0, 1], [2, 3], [4, 5], [6, 7]])
    np.testing.assert_array_equal(second, [[8, 9], [10, 11], [0, 1], [2, 3]])


def test_shuffle_batch_covers_the_input_once(graph):
    data = np.arange(40, dtype=np.int64)
    x = nd.train.input_producer(nd.constant(data), num_epochs=1,
                                shuffle=False).dequeue()
    b = nd.train.shuffle_batch([x], batch_size=8, capacity=20, min_after_dequeue=10,
                               num_threads=2, seed=11,
                               allow_smaller_final_batch=True)
    with nd.Session() as sess:
        coord, threads = _start(sess)
        got = np.concatenate(drain(sess, b))
        _stop(coord, threads)
    np.testing.assert_array_equal(np.sort(got), data)
    assert not np.array_equal(got, data)
    with pytest.raises(ValueError, match="must be bigger than min_after_dequeue"):
        nd.train.shuffle_batch([x], 2, capacity=5, min_after_dequeue=5)


def test_extend_after_queue_runners_on_a_server(graph):
    """testExtendAfterQueueRunners: the graph grows while runners use it."""
    with nd.Server.create_local_server() as server, \
            nd.Session(server.target) as sess:
        q = nd.train.input_producer(nd.constant([0.0]))
        var = nd.Variable(1.0, trainable=False, name="var")
        sess.run(nd.global_variables_initializer())
        coord = nd.train.Coordinator()
        threads = nd.train.start_queue_runners(sess, coord=coord)
        assert sess.run(var.assign(3.0)) == 3.0
        assert sess.run(q.dequeue()) == 0.0
        _stop(coord, threads)


def test_pipeline_on_a_parameter_server(servers, graph):
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    with nd.device("/job:ps/task:0"):
        x = nd.train.range_input_producer(6, num_epochs=1, shuffle=False).dequeue()
        b = nd.train.batch([x], 4, allow_smaller_final_batch=True)
    with nd.device("/job:worker/task:0"):
        total = nd.reduce_sum(b)
    with nd.Session(worker.target) as sess:
        coord, threads = _start(sess)
        sums = drain(sess, total)
        _stop(coord, threads)
    assert [int(s) for s in sums] == [0 + 1 + 2 + 3, 4 + 5]
