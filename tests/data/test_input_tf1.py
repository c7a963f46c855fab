"""The TF1 queue input pipeline as TF's own input tests define it: producers with
``num_epochs`` (a local ``epochs`` counter), an empty input that ends the
consumer instead of hanging it, ``match_filenames_once``, ``batch`` with
``dynamic_pad`` / ``enqueue_many`` / ``allow_smaller_final_batch``, the ``*_join``
and ``maybe_*`` forms, and ``PaddingFIFOQueue``. Oracles: the NumPy sequence a
counter produces, as a sequence (one thread) or a multiset (several)."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from helpers import drain

import nbdist as nd
from nbdist import errors

JOIN_SECS = 30


def _session():
    # A blocked dequeue fails after 30 s instead of hanging the test.
    return nd.Session(config=nd.ConfigProto(operation_timeout_in_ms=30_000))


def _start(sess):
    sess.run(nd.global_variables_initializer())
    sess.run(nd.local_variables_initializer())
    coord = nd.train.Coordinator()
    return coord, nd.train.start_queue_runners(sess, coord=coord)


def _stop(coord, threads):
    coord.request_stop()
    coord.join(threads, stop_grace_period_secs=JOIN_SECS)


def _counter(limit, dtype=nd.int64):
    return nd.Variable(nd.constant(0, dtype=dtype)).count_up_to(limit)


# -- producers ----------------------------------------------------------------------
def test_limit_epochs_counts_in_a_local_variable(graph):
    twice = nd.train.limit_epochs(nd.constant("Love Me"), num_epochs=2)
    forever = nd.train.limit_epochs(nd.constant(7))
    (epochs,) = nd.local_variables()
    assert epochs.op.name.endswith("epochs") and epochs.dtype.base_dtype == nd.int64
    with _session() as sess:
        sess.run(nd.local_variables_initializer())
        assert [sess.run(twice) for _ in range(2)] == [b"Love Me"] * 2
        with pytest.raises(errors.OutOfRangeError):
            sess.run(twice)
        assert [int(sess.run(forever)) for _ in range(5)] == [7] * 5
    with pytest.raises(ValueError, match="num_epochs"):
        nd.train.limit_epochs(nd.constant(1), num_epochs=0)


def test_input_producer_epochs_in_order_then_out_of_range(graph):
    rows = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
    unknown = nd.placeholder_with_default(np.array(rows, np.int32), shape=None)
    queue = nd.train.input_producer(unknown, element_shape=[4], num_epochs=2,
                                    shuffle=False)
    every, one = queue.dequeue_many(6), queue.dequeue()
    with _session() as sess:
        coord, threads = _start(sess)
        np.testing.assert_array_equal(sess.run(every), rows * 2)
        with pytest.raises(errors.OutOfRangeError):
            sess.run(one)
        _stop(coord, threads)
    with pytest.raises(ValueError, match="fully defined shape"):
        nd.train.input_producer(nd.placeholder(nd.float32, None))


def test_empty_string_input_closes_the_queue_instead_of_hanging(graph):
    queue = nd.train.string_input_producer(nd.constant([], dtype=nd.string))
    dequeue = queue.dequeue()
    with _session() as sess:
        coord, threads = _start(sess)
        with pytest.raises(errors.OutOfRangeError):
            sess.run(dequeue)
        coord.request_stop()
        # The runner's assertion is what stopped everything.
        with pytest.raises(errors.InvalidArgumentError, match="non-null input"):
            coord.join(threads, stop_grace_period_secs=JOIN_SECS)
    with pytest.raises(ValueError, match="non-null"):
        nd.train.string_input_producer([])


def _epoch_orders(producer_fn, n_epochs, epoch_len):
    with nd.Graph().as_default(), _session() as sess:
        queue = producer_fn()
        batch = queue.dequeue_many(epoch_len)
        coord, threads = _start(sess)
        orders = [tuple(sess.run(batch).tolist()) for _ in range(n_epochs)]
        with pytest.raises(errors.OutOfRangeError):
            sess.run(queue.dequeue())
        _stop(coord, threads)
    return orders


def test_shuffled_producers_permute_within_each_epoch_repeatably():
    def strings():
        return nd.train.string_input_producer(["a", "b", "c"], num_epochs=120,
                                              seed=271828)

    orders = _epoch_orders(strings, 120, 3)
    assert {tuple(sorted(o)) for o in orders} == {(b"a", b"b", b"c")}
    counts = {p: orders.count(p) for p in itertools.permutations((b"a", b"b", b"c"))}
    assert all(c > 5 for c in counts.values()), counts  # all 6 orders, ~20 each
    assert _epoch_orders(strings, 120, 3) == orders  # the seed fixes the sequence

    def ranges():
        return nd.train.range_input_producer(2, num_epochs=100, seed=314159)

    orders = _epoch_orders(ranges, 100, 2)
    assert 20 < orders.count((0, 1)) < 80 and set(orders) == {(0, 1), (1, 0)}


def test_producer_names_shared_name_capacity_and_cancel_op(graph):
    cancel = nd.no_op(name="my_cancel")
    queue = nd.train.string_input_producer(["to", "be"], shared_name="SHARED_XYZ",
                                           name="Q", capacity=7, cancel_op=cancel)
    assert queue.name == "Q"
    attrs = queue.queue_ref.op.node_def.attr
    assert attrs["shared_name"].s == b"SHARED_XYZ" and attrs["capacity"].i == 7
    (qr,) = nd.get_collection(nd.GraphKeys.QUEUE_RUNNERS)
    assert qr.queue is queue and qr.cancel_op is cancel
    ranged = nd.train.range_input_producer(5, shared_name="R_XYZ", name="R")
    assert ranged.queue_ref.op.node_def.attr["shared_name"].s == b"R_XYZ"
    x, _ = nd.train.slice_input_producer([["A", "B"], [7, 3]], shared_name="S_XYZ")
    index = x.op.inputs[1]
    assert index.op.inputs[0].op.node_def.attr["shared_name"].s == b"S_XYZ"


def test_slice_input_producer_keeps_rows_together_across_epochs(graph):
    strings, ints = ["A", "B", "D", "G"], [7, 3, 5, 2]
    s, i = nd.train.slice_input_producer([strings, ints], num_epochs=3, seed=161803)
    with _session() as sess:
        coord, threads = _start(sess)
        pairs = drain(sess, [s, i])
        _stop(coord, threads)
    assert len(pairs) == 12
    for epoch in range(3):
        got = sorted((p[0].decode(), int(p[1])) for p in pairs[4 * epoch:4 * epoch + 4])
        assert got == sorted(zip(strings, ints))


def test_match_filenames_once_globs_into_a_local_variable(graph, tmp_path):
    extra = [str(tmp_path / f"match_filenames.{i}") for i in range(3)]
    for name in extra + [str(tmp_path / "other.txt"), str(tmp_path / ".hidden")]:
        with open(name, "w") as f:
            f.write("contents")
    star = nd.train.match_filenames_once(str(tmp_path / "*"))
    question = nd.train.match_filenames_once(str(tmp_path / "match_filenames.?"))
    one = nd.train.match_filenames_once(extra[1])
    assert star in nd.local_variables() and star not in nd.global_variables()
    assert star.op.name == "matching_filenames"
    with _session() as sess:
        sess.run(nd.local_variables_initializer())
        everything = sorted(os.path.join(tmp_path, n) for n in os.listdir(tmp_path))
        assert sess.run(star).tolist() == [n.encode() for n in everything]
        assert sess.run(question).tolist() == [n.encode() for n in extra]
        assert sess.run(one).tolist() == [extra[1].encode()]
        both = nd.matching_files([str(tmp_path / "*.txt"), extra[2]])
        assert sess.run(both).tolist() == [extra[2].encode(),
                                           str(tmp_path / "other.txt").encode()]
        assert sess.run(nd.matching_files(str(tmp_path / "none*"))).tolist() == []


# -- batch --------------------------------------------------------------------------
@pytest.mark.parametrize("as_dict", [False, True])
def test_batch_of_a_counter_list_or_dict(graph, as_dict):
    counter = _counter(30)
    if as_dict:
        batched = nd.train.batch({"c": counter, "S": "string"}, batch_size=10)
        fetch = [batched["c"], batched["S"]]
    else:
        fetch = nd.train.batch([counter, "string"], batch_size=10)
    assert fetch[0].shape.as_list() == [10] and fetch[1].shape.as_list() == [10]
    with _session() as sess:
        coord, threads = _start(sess)
        for i in range(3):
            c, s = sess.run(fetch)
            np.testing.assert_array_equal(c, np.arange(10 * i, 10 * i + 10))
            assert s.tolist() == [b"string"] * 10
        with pytest.raises(errors.OutOfRangeError):
            sess.run(fetch)
        _stop(coord, threads)


def test_batch_dynamic_pad_pads_strings_with_empty_strings(graph):
    counter = _counter(30)
    words = nd.tile(["string"], nd.cast(nd.stack([counter]), nd.int32))
    batched = nd.train.batch([counter, words], batch_size=10, dynamic_pad=True)
    assert batched[1].shape.as_list() == [10, None]
    assert batched[0].op.inputs[0].op.type == "PaddingFIFOQueueV2"
    with _session() as sess:
        coord, threads = _start(sess)
        for i in range(3):
            c, w = sess.run(batched)
            expect = np.arange(10 * i, 10 * i + 10)
            np.testing.assert_array_equal(c, expect)
            longest = expect[-1]
            assert w.tolist() == [[b"string"] * n + [b""] * (longest - n)
                                  for n in expect]
        with pytest.raises(errors.OutOfRangeError):
            sess.run(batched)
        _stop(coord, threads)


def test_batch_dynamic_pad_pads_numbers_with_zeros(graph):
    counter = _counter(6, nd.int32)
    ramp = nd.range(1, counter + 2)  # 1..counter+1
    batched = nd.train.batch([ramp], batch_size=3, dynamic_pad=True)
    with _session() as sess:
        coord, threads = _start(sess)
        assert sess.run(batched).tolist() == [[1, 0, 0], [1, 2, 0], [1, 2, 3]]
        assert sess.run(batched).tolist() == [[1, 2, 3, 4, 0, 0], [1, 2, 3, 4, 5, 0],
                                              [1, 2, 3, 4, 5, 6]]
        _stop(coord, threads)


def test_batch_enqueue_many_rebatches_batches(graph):
    pre = nd.train.batch([_counter(30), "string"], batch_size=2)
    batched = nd.train.batch(pre, enqueue_many=True, batch_size=10)
    with _session() as sess:
        coord, threads = _start(sess)
        for i in range(3):
            c, s = sess.run(batched)
            np.testing.assert_array_equal(c, np.arange(10 * i, 10 * i + 10))
            assert s.tolist() == [b"string"] * 10
        with pytest.raises(errors.OutOfRangeError):
            sess.run(batched)
        _stop(coord, threads)


@pytest.mark.parametrize("threads_n", [1, 4])
def test_batch_allow_smaller_final_batch(graph, threads_n):
    batched = nd.train.batch([_counter(35), "s"], batch_size=10, num_threads=threads_n,
                             allow_smaller_final_batch=True)
    assert batched[0].shape.as_list() == [None]
    with _session() as sess:
        coord, threads = _start(sess)
        got = drain(sess, batched)
        _stop(coord, threads)
    assert [len(c) for c, _ in got] == [10, 10, 10, 5]
    values = np.concatenate([c for c, _ in got])
    if threads_n == 1:
        np.testing.assert_array_equal(values, np.arange(35))
    else:
        assert sorted(values.tolist()) == list(range(35))


def test_batch_shapes_names_and_errors(graph):
    batched = nd.train.batch([_counter(30), "string"], batch_size=10,
                             shared_name="SHARED_NAME_XYZ", name="Q")
    assert batched[0].op.inputs[0].op.node_def.attr["shared_name"].s == (
        b"SHARED_NAME_XYZ")
    single = nd.train.batch({"c": [12, 12]}, batch_size=8)
    assert single["c"].shape.as_list() == [8, 2]
    with pytest.raises(ValueError, match="Cannot infer Tensor's rank"):
        nd.train.batch([nd.placeholder(nd.int64)], batch_size=2)
    with pytest.raises(ValueError, match="fully defined"):
        nd.train.batch([nd.placeholder(nd.int64, [None])], batch_size=2)
    with pytest.raises(ValueError, match="capacity 5 must be bigger"):
        nd.train.shuffle_batch([1], 2, capacity=5, min_after_dequeue=5)


def test_dict_inputs_are_ordered_by_key_as_strings():
    from nbdist.train import input as inp

    d = {"z": 1, 1: 42, ("a", "b"): 100}
    assert inp._as_tensor_list(d) == [100, 42, 1]
    assert inp._as_original_type(d, [100, 42, 1]) == d


@pytest.mark.skipif(not hasattr(nd, "uint32"), reason="needs nd.uint32/nd.uint64")
@pytest.mark.parametrize("name", ["uint32", "uint64"])
def test_unsigned_dtypes_go_through_a_batch(graph, name):
    dtype = getattr(nd, name)
    batched = nd.train.batch([nd.constant([0, 1, 2, 3, 4, 5], dtype=dtype)],
                             batch_size=2, enqueue_many=True)
    with _session() as sess:
        coord, threads = _start(sess)
        out = sess.run(batched)
        assert out.dtype == np.dtype(name) and out.tolist() == [0, 1]
        _stop(coord, threads)


# -- batch_join ---------------------------------------------------------------------
def _a_and_b(num_a, num_b):
    return _counter(num_a), nd.train.limit_epochs(nd.constant(99, nd.int64), num_b)


@pytest.mark.parametrize("smaller", [False, True])
def test_batch_join_mixes_inputs_and_keeps_each_ones_order(graph, smaller):
    num_a, num_b = (72, 92) if smaller else (70, 90)
    a, b = _a_and_b(num_a, num_b)
    batched = nd.train.batch_join([[a, "a"], [b, "b"]], batch_size=5,
                                  allow_smaller_final_batch=smaller)
    assert batched[0].shape.as_list() == [None if smaller else 5]
    with _session() as sess:
        coord, threads = _start(sess)
        got = drain(sess, batched)
        _stop(coord, threads)
    sizes = [len(c) for c, _ in got]
    assert sizes == [5] * 32 + ([4] if smaller else [])
    values = np.concatenate([c for c, _ in got])
    tags = np.concatenate([s for _, s in got])
    np.testing.assert_array_equal(values[tags == b"a"], np.arange(num_a))
    assert (values[tags == b"b"] == 99).sum() == num_b


def test_batch_join_dicts_need_the_same_keys(graph):
    batched = nd.train.batch_join([{"c": 1, "S": "a"}, {"c": 2, "S": "b"}], 4)
    assert set(batched) == {"c", "S"}
    with pytest.raises(ValueError, match="must have the same keys"):
        nd.train.batch_join([{"c": 12, "S": "a"}, {"cool": -12, "S": "b"}], 8)
    with pytest.raises(ValueError, match="Cannot infer Tensor's rank"):
        nd.train.batch_join([[nd.placeholder(nd.int64)]], batch_size=2)
    with pytest.raises(TypeError, match="consistent"):
        nd.train.batch_join([[1], ["x"]], batch_size=2)


def test_batch_join_dynamic_pad(graph):
    a, b = _a_and_b(20, 10)
    a_words = nd.tile(["a"], nd.cast(nd.stack([a + 1]), nd.int32))
    b_words = nd.tile(["b"], nd.cast(nd.stack([b]), nd.int32))
    batched = nd.train.batch_join([[a, a_words], [b, b_words]], batch_size=5,
                                  dynamic_pad=True)
    assert batched[1].shape.as_list() == [5, None]
    with _session() as sess:
        coord, threads = _start(sess)
        got = drain(sess, batched)
        _stop(coord, threads)
    assert len(got) == 6
    a_counts = []
    for values, words in got:
        for v, row in zip(values, words):
            if row[0] == b"b":
                assert v == 99 and row.tolist() == [b"b"] * 99
            else:
                n = int((row == b"a").sum())
                assert n == v + 1 and set(row[n:].tolist()) <= {b""}
                a_counts.append(n)
    assert a_counts == list(range(1, 21))


# -- maybe_* ------------------------------------------------------------------------
@pytest.mark.parametrize("threads_n,enqueue_many,per_example",
                         [(1, False, False), (5, False, False), (1, True, False),
                          (1, True, True), (5, True, True)])
def test_maybe_batch_keeps_only_even_examples(graph, threads_n, enqueue_many,
                                             per_example):
    counter = nd.Variable(0).count_up_to(40)
    to_batch = [counter, "string"]
    if enqueue_many:
        to_batch = nd.train.batch(to_batch, 4 if per_example else 1)
    keep = nd.squeeze(nd.equal(0, to_batch[0] % 2))
    assert keep.shape.rank == (1 if per_example else 0)
    batched = nd.train.maybe_batch(to_batch, keep, 5, num_threads=threads_n,
                                   enqueue_many=enqueue_many)
    with _session() as sess:
        coord, threads = _start(sess)
        got = drain(sess, batched)
        _stop(coord, threads)
    assert len(got) == 4
    values = np.concatenate([c for c, _ in got])
    assert sorted(values.tolist()) == list(range(0, 40, 2))
    assert all(s.tolist() == [b"string"] * 5 for _, s in got)


def test_maybe_batch_join_keeps_only_even_examples(graph):
    counter = nd.Variable(0).count_up_to(40)
    keep = nd.equal(0, counter % 2)
    joined = nd.train.maybe_batch_join([[counter]] * 3, keep, 4)
    with _session() as sess:
        coord, threads = _start(sess)
        values = np.concatenate(drain(sess, joined))
        _stop(coord, threads)
    assert sorted(values.tolist()) == list(range(0, 40, 2))


def test_maybe_shuffle_forms_keep_only_even_examples(graph):
    counter = nd.Variable(0).count_up_to(40)
    keep = nd.equal(0, counter % 2)
    shuffled = nd.train.maybe_shuffle_batch([counter], 4, capacity=30,
                                            min_after_dequeue=10, keep_input=keep,
                                            seed=3, allow_smaller_final_batch=True)
    joined = nd.train.maybe_shuffle_batch_join(
        [[counter], [counter]], 4, capacity=30, min_after_dequeue=10,
        keep_input=keep, seed=3, allow_smaller_final_batch=True)
    assert shuffled.op.inputs[0].op.type == "RandomShuffleQueueV2"
    with _session() as sess:
        coord, threads = _start(sess)
        # Both batches drain the one counter: together they hold its evens.
        first = drain(sess, shuffled)
        second = drain(sess, joined)
        _stop(coord, threads)
    both = np.concatenate(first + second).tolist()
    assert sorted(both) == list(range(0, 40, 2))


def test_maybe_batch_keep_input_checks(graph):
    with pytest.raises(ValueError, match="`keep_input` cannot be a vector"):
        nd.train.maybe_batch([nd.zeros(5)], keep_input=nd.constant([True, False]),
                             batch_size=1, enqueue_many=False)
    with pytest.raises(ValueError, match="must be 0 or 1 dimensions"):
        nd.train.maybe_batch([nd.zeros(5)], keep_input=nd.constant([[True], [False]]),
                             batch_size=1, enqueue_many=True)
    with pytest.raises(ValueError, match="must be known at graph construction"):
        nd.train.maybe_batch([nd.zeros(5)], keep_input=nd.placeholder(nd.bool),
                             batch_size=1, enqueue_many=True)


def test_maybe_batch_with_a_constant_keep_input(graph):
    rows = nd.constant([[5, 4], [7, 2]])
    kept = nd.train.maybe_batch([rows], keep_input=[True, False], batch_size=1,
                                enqueue_many=True)
    always = nd.train.maybe_batch([nd.constant(3)], keep_input=True, batch_size=2)
    with _session() as sess:
        coord, threads = _start(sess)
        assert sess.run(kept).tolist() == [[5, 4]]
        assert sess.run(always).tolist() == [3, 3]
        _stop(coord, threads)


def test_shuffle_batch_join_returns_every_example_once(graph):
    a, b = _a_and_b(30, 10)
    batched = nd.train.shuffle_batch_join([[a], [b]], 8, capacity=20,
                                          min_after_dequeue=5, seed=7,
                                          allow_smaller_final_batch=True)
    with _session() as sess:
        coord, threads = _start(sess)
        values = np.concatenate(drain(sess, batched)).tolist()
        _stop(coord, threads)
    assert sorted(values) == list(range(30)) + [99] * 10
    assert values != sorted(values)  # shuffled across the queue


# -- PaddingFIFOQueue ---------------------------------------------------------------
def test_padding_fifo_queue_pads_each_batch_to_its_longest(graph):
    q = nd.PaddingFIFOQueue(10, [nd.int32, nd.string], shapes=[[None], [None, 2]])
    a, b = nd.placeholder(nd.int32, [None]), nd.placeholder(nd.string, [None, 2])
    enqueue = q.enqueue([a, b])
    two, up_to, none = q.dequeue_many(2), q.dequeue_up_to(5), q.dequeue_many(0)
    assert two[0].shape.as_list() == [2, None] and up_to[1].shape.as_list() == [
        None, None, 2]
    with _session() as sess:
        sess.run(enqueue, {a: [1], b: [["x", "y"]]})
        sess.run(enqueue, {a: [2, 3, 4], b: [["p", "q"], ["r", "s"]]})
        ints, strs = sess.run(two)
        assert ints.tolist() == [[1, 0, 0], [2, 3, 4]]
        assert strs.tolist() == [[[b"x", b"y"], [b"", b""]],
                                 [[b"p", b"q"], [b"r", b"s"]]]
        assert [x.shape for x in sess.run(none)] == [(0, 0), (0, 0, 2)]
        sess.run(enqueue, {a: [5, 6], b: [["u", "v"]]})
        sess.run(q.close())
        ints, strs = sess.run(up_to)  # fewer than 5 once closed
        assert ints.tolist() == [[5, 6]] and strs.tolist() == [[[b"u", b"v"]]]
        loose = nd.placeholder(nd.string, None)
        with pytest.raises(errors.InvalidArgumentError, match="Shape mismatch"):
            sess.run(q.enqueue([[1], loose]), {loose: [["too", "many", "cols"]]})


def test_padding_fifo_queue_needs_shapes_and_fifo_queue_full_shapes(graph):
    with pytest.raises(ValueError, match="a list of shapes must be provided"):
        nd.PaddingFIFOQueue(10, [nd.int32], shapes=None)
    with pytest.raises(ValueError, match="All shapes must be fully defined"):
        nd.FIFOQueue(10, [nd.int32], shapes=[[None]])
    assert isinstance(nd.PaddingFIFOQueue(1, [nd.int32], [[None]]), nd.QueueBase)


# -- queue-fill summaries -----------------------------------------------------------
def test_queue_fill_summaries_as_tf_names_them(graph):
    from nbdist.proto import summary_pb2

    nd.train.string_input_producer(["a", "b"], capacity=8)
    x = nd.train.range_input_producer(5, capacity=4).dequeue()
    nd.train.batch([x], 2, capacity=6)
    nd.train.shuffle_batch([nd.constant(1)], 2, capacity=10, min_after_dequeue=3)
    summaries = nd.get_collection(nd.GraphKeys.SUMMARIES)
    assert [s.op.name for s in summaries] == [
        "input_producer/fraction_of_8_full", "input_producer_1/fraction_of_4_full",
        "batch/fraction_of_6_full", "shuffle_batch/fraction_over_3_of_7_full"]
    runners = nd.get_collection(nd.GraphKeys.QUEUE_RUNNERS)
    with _session() as sess:
        for _ in range(5):  # five examples into the shuffling queue, by hand
            sess.run(runners[-1].enqueue_ops[0])
        sess.run(runners[0].enqueue_ops[0])  # one epoch: two strings
        values = [summary_pb2.Summary.FromString(v).value[0].simple_value
                  for v in sess.run(summaries)]
    # sizes 2 of 8, 0 of 4, 0 of 6; (5 - 3) of the 7 above min_after_dequeue
    np.testing.assert_allclose(values, [2 / 8, 0.0, 0.0, 2 / 7], rtol=1e-6)


def test_runner_threads_end_by_themselves_when_the_input_ends(graph):
    # No coordinator: the producer's OutOfRangeError closes each queue in turn.
    batched = nd.train.shuffle_batch([_counter(35), "s"], batch_size=10, capacity=32,
                                     min_after_dequeue=16, seed=141421, num_threads=4,
                                     allow_smaller_final_batch=True)
    with _session() as sess:
        sess.run(nd.global_variables_initializer())
        threads = nd.train.start_queue_runners(sess)
        got = drain(sess, batched)
        for t in threads:
            t.join(JOIN_SECS)
            assert not t.is_alive(), t.name
    values = np.concatenate([c for c, _ in got]).tolist()
    assert [len(c) for c, _ in got] == [10, 10, 10, 5]
    assert sorted(values) == list(range(35)) and values != sorted(values)
