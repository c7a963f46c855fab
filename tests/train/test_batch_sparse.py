"""``SparseTensor`` s through the TF1 batching functions (``batch``,
``shuffle_batch``, ``batch_join``, ``shuffle_batch_join``, ``maybe_batch``,
``maybe_shuffle_batch``): each example's sparse tensor goes through the queue
and the batch comes out as one ``SparseTensor`` whose rows are the examples and
whose dense shape is ``[batch, largest example's shape]`` (what a
``VarLenFeature`` parsed per example needs).

Oracle: TF 2.21 (``tf.compat.v1``) on the same graphs, run in /work/tfvenv:
element ``i`` (a sparse vector of ``i + 1`` values ``10 i + k``) batched by 2
gives indices ``[[0,0],[1,0],[1,1]]``, values ``[0,10,11]``, dense shape
``[2,2]`` then ``[2,4]``; ``enqueue_many`` of a ``[3,4]`` sparse matrix by 2
gives dense shape ``[2,4]``; a ``keep_input`` vector ``[T,F,T,T]`` keeps rows
0, 2, 3; the static shapes are indices ``[?, rank+1]`` and dense shape
``[rank+1]``."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist import errors

tf = nd.compat.v1
MAX_STEPS = 50


def _element():
    """(i, a sparse vector of i + 1 values 10 i + k) for i = 0..3, one epoch."""
    i = tf.train.range_input_producer(4, num_epochs=1, shuffle=False).dequeue()
    n = tf.cast(i, tf.int64) + 1
    values = tf.cast(tf.range(n), tf.float32) + 10.0 * tf.cast(i, tf.float32)
    return i, tf.SparseTensor(tf.expand_dims(tf.range(n), 1), values,
                              tf.reshape(n, [1]))


def _drain(fetch, steps=MAX_STEPS) -> list:
    """Every batch ``fetch`` gives until the input ends (OutOfRange), at most
    ``steps``."""
    out = []
    sess = tf.Session(config=tf.ConfigProto(operation_timeout_in_ms=30_000))
    with sess:
        sess.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord=coord)
        for _ in range(steps):
            try:
                out.append(sess.run(fetch))
            except errors.OutOfRangeError:
                break
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=30)
    return out


def _rows(sp) -> dict:
    """A batched SparseTensorValue's values per row."""
    rows: dict = {}
    for (r, _), v in zip(sp.indices.tolist(), sp.values.tolist()):
        rows.setdefault(r, []).append(v)
    return rows


def test_batch_gives_a_batched_sparse_tensor_as_tf():
    with tf.Graph().as_default():
        i, sp = _element()
        ib, spb = tf.train.batch([i, sp], 2)
        assert isinstance(spb, tf.SparseTensor)
        assert spb.indices.shape.as_list() == [None, 2]
        assert spb.dense_shape.shape.as_list() == [2]
        assert spb.dtype == tf.float32
        (i0, s0), (i1, s1) = _drain([ib, spb])
    assert i0.tolist() == [0, 1] and i1.tolist() == [2, 3]
    assert s0.indices.tolist() == [[0, 0], [1, 0], [1, 1]]
    assert s0.values.tolist() == [0.0, 10.0, 11.0]
    assert s0.dense_shape.tolist() == [2, 2]
    assert s1.dense_shape.tolist() == [2, 4]
    assert s1.values.tolist() == [20.0, 21.0, 22.0, 30.0, 31.0, 32.0, 33.0]


def test_dict_input_and_smaller_final_batch():
    with tf.Graph().as_default():
        i, sp = _element()
        out = tf.train.batch({"i": i, "s": sp}, 3, allow_smaller_final_batch=True)
        first, last = _drain(out)
    assert first["i"].tolist() == [0, 1, 2]
    assert first["s"].dense_shape.tolist() == [3, 3]
    assert last["i"].tolist() == [3]
    assert last["s"].indices.tolist() == [[0, 0], [0, 1], [0, 2], [0, 3]]
    assert last["s"].dense_shape.tolist() == [1, 4]


def test_enqueue_many_and_keep_input_vector():
    with tf.Graph().as_default():
        sp = tf.SparseTensor([[0, 0], [1, 2], [2, 1], [3, 3]], [1, 2, 3, 4], [4, 4])
        many = tf.train.batch([sp], 2, enqueue_many=True)
        kept = tf.train.maybe_batch([sp], tf.constant([True, False, True, True]),
                                    3, enqueue_many=True)
        [(a, b)] = _drain([many, kept], steps=1)
    assert a.indices.tolist() == [[0, 0], [1, 2]]
    assert a.dense_shape.tolist() == [2, 4]
    assert b.indices.tolist() == [[0, 0], [1, 1], [2, 3]]
    assert b.values.tolist() == [1, 3, 4]
    assert b.dense_shape.tolist() == [3, 4]


def test_maybe_batch_keeps_examples_with_their_sparse_rows():
    with tf.Graph().as_default():
        i, sp = _element()
        ib, spb = tf.train.maybe_batch([i, sp], tf.equal(i % 2, 0), 2)
        [(idx, s)] = _drain([ib, spb])
    assert idx.tolist() == [0, 2]
    assert _rows(s) == {0: [0.0], 1: [20.0, 21.0, 22.0]}
    assert s.dense_shape.tolist() == [2, 3]


@pytest.mark.parametrize("form", ["batch_join", "shuffle_batch_join",
                                  "shuffle_batch", "maybe_shuffle_batch"])
def test_shuffling_and_join_forms_keep_each_example_whole(form):
    """Whatever the order, row r of the sparse batch is the example whose dense
    component is row r (TF's sparse values 10 i + k, + 100 for the second input
    of a join)."""
    with tf.Graph().as_default():
        i, sp = _element()
        kw = {"allow_smaller_final_batch": True}
        shuffle = {"capacity": 10, "min_after_dequeue": 0, "seed": 1}
        if form.endswith("join"):
            second = [i + 100, tf.SparseTensor(sp.indices, sp.values + 1000.0,
                                               sp.dense_shape)]
            fn = getattr(tf.train, form)
            extra = shuffle if form.startswith("shuffle") else {}
            ib, spb = fn([[i, sp], second], 8, **extra, **kw)
        elif form == "shuffle_batch":
            ib, spb = tf.train.shuffle_batch([i, sp], 8, **shuffle, **kw)
        else:
            ib, spb = tf.train.maybe_shuffle_batch([i, sp], 8, keep_input=True,
                                                   **shuffle, **kw)
        batches = _drain([ib, spb])
    seen = []
    for idx, s in batches:
        rows = _rows(s)
        width = 0
        for r, n in enumerate(idx.tolist()):
            base, offset = (n - 100, 1000.0) if n >= 100 else (n, 0.0)
            want = [10.0 * base + k + offset for k in range(base + 1)]
            assert rows[r] == want, (form, idx, s)
            width = max(width, base + 1)
            seen.append(n)
        assert s.dense_shape.tolist() == [len(idx), width]
    # A join's two inputs dequeue the same producer: each element once overall.
    assert sorted(n % 100 for n in seen) == [0, 1, 2, 3]


def test_var_len_feature_batches_to_batch_by_longest():
    """parse_single_example's VarLenFeature through train.batch: dense shape
    [batch, longest list], as a TF1 text pipeline relies on."""
    def example(ids):
        return tf.train.Example(features=tf.train.Features(feature={
            "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids))})
        ).SerializeToString()

    lists = [[5], [7, 8, 9], [], [1, 2]]
    with tf.Graph().as_default():
        records = tf.train.string_input_producer(
            [example(v) for v in lists], num_epochs=1, shuffle=False)
        feats = tf.parse_single_example(records.dequeue(),
                                        {"ids": tf.VarLenFeature(tf.int64)})
        batches = _drain(tf.train.batch([feats["ids"]], 2))
    assert [b.dense_shape.tolist() for b in batches] == [[2, 3], [2, 2]]
    dense = [nd.SparseTensorValue(b.indices, b.values, b.dense_shape) for b in batches]
    got = []
    for b in dense:
        m = np.zeros(b.dense_shape, np.int64)
        m[tuple(b.indices.T)] = b.values
        got.append(m.tolist())
    assert got == [[[5, 0, 0], [7, 8, 9]], [[0, 0], [1, 2]]]


def test_dynamic_pad_pads_the_dense_part_and_batches_the_sparse_one():
    """TF: dense rows [0] and [0, 1] pad to [[0, 0], [0, 1]]; the sparse part
    is batched as without padding (dense shape [2, 2], then [2, 4])."""
    with tf.Graph().as_default():
        i, sp = _element()
        dense = tf.range(tf.cast(i, tf.int64) + 1)
        batches = _drain(tf.train.batch([dense, sp], 2, dynamic_pad=True))
    assert [d.tolist() for d, _ in batches] == [[[0, 0], [0, 1]],
                                                [[0, 1, 2, 0], [0, 1, 2, 3]]]
    assert [s.dense_shape.tolist() for _, s in batches] == [[2, 2], [2, 4]]


def test_join_with_sparse_in_one_input_only_is_an_error():
    with tf.Graph().as_default():
        i, sp = _element()
        with pytest.raises(ValueError, match="Inconsistent SparseTensors list"):
            tf.train.batch_join([[i, sp], [i, i]], 2)
