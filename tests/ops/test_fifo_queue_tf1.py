"""``FIFOQueue`` / ``PaddingFIFOQueue`` as TF's own queue kernel tests define them:
how ``shapes`` and ``names`` are read, the ValueErrors a graph gets for values that
cannot fit, TF's wording for the run-time shape error, shared queues that must
agree, ``DequeueMany`` needing shapes, ``from_list``. Oracles: the values
enqueued, and the errors TF 1.15 raises for the same programs."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist import errors


def _session():
    return nd.Session(config=nd.ConfigProto(operation_timeout_in_ms=30_000))


@pytest.mark.parametrize("queue_cls", [nd.FIFOQueue, nd.PaddingFIFOQueue])
def test_shapes_may_be_one_shape_or_a_list(graph, queue_cls):
    assert queue_cls(10, nd.float32, (3, 2)).shapes == [nd.TensorShape([3, 2])]
    assert queue_cls(10, nd.float32, ()).shapes == [nd.TensorShape([])]
    assert queue_cls(10, (nd.int32, nd.int32), ((), (2,))).shapes == [
        nd.TensorShape([]), nd.TensorShape([2])]
    assert queue_cls(10, nd.int32, nd.TensorShape([4])).shapes == [
        nd.TensorShape([4])]
    attr = queue_cls(10, nd.float32, [(1, 2)]).queue_ref.op.node_def.attr["shapes"]
    assert [[d.size for d in s.dim] for s in attr.list.shape] == [[1, 2]]


def test_padding_queue_shapes_are_required_with_a_known_rank(graph):
    assert nd.PaddingFIFOQueue(10, nd.float32, ((None,),)).shapes[0].as_list() == [
        None]
    with pytest.raises(ValueError, match="a list of shapes must be provided"):
        nd.PaddingFIFOQueue(10, nd.float32, None)
    with pytest.raises(ValueError, match="known rank"):
        nd.PaddingFIFOQueue(10, nd.float32, [nd.TensorShape(None)])
    with pytest.raises(ValueError, match="fully defined"):
        nd.FIFOQueue(10, nd.float32, ((None,),))


def test_names_and_dicts(graph):
    plain = nd.FIFOQueue(10, nd.float32)
    with pytest.raises(ValueError, match="must have names"):
        plain.enqueue({"a": 12.0})
    with pytest.raises(ValueError, match="must have names"):
        plain.enqueue_many({"a": [12.0, 13.0]})
    named = nd.FIFOQueue(10, nd.float32, shapes=((),), names="f")
    assert named.names == ["f"]
    with pytest.raises(ValueError, match="enqueue a dictionary"):
        named.enqueue((10.0,))
    with pytest.raises(ValueError, match="match names of Queue"):
        named.enqueue({"f": 10.0, "s": "aa"})
    with pytest.raises(ValueError, match="same length"):
        nd.FIFOQueue(10, (nd.float32, nd.int32), names="f")
    many = named.enqueue_many({"f": [40.0, 50.0]})
    two = named.dequeue_many(2)
    with _session() as sess:
        sess.run(many)
        assert sess.run(two["f"]).tolist() == [40.0, 50.0]


@pytest.mark.parametrize("queue_cls", [nd.FIFOQueue, nd.PaddingFIFOQueue])
def test_values_that_cannot_fit_are_value_errors_in_the_graph(graph, queue_cls):
    q = queue_cls(10, (nd.int32, nd.int32), ((), (2,)))
    with pytest.raises(ValueError):
        q.enqueue(([1, 2], [2, 2]))
    with pytest.raises(ValueError, match="batch dimension"):
        q.enqueue_many((7, [[1, 2], [3, 4], [5, 6]]))
    with pytest.raises(ValueError, match="not compatible"):
        q.enqueue_many(([1, 2], [[1, 2, 3], [4, 5, 6]]))
    q3 = queue_cls(10, (nd.int32,) * 3, ((), (), ()))
    for vals in (([1, 2, 3], [1, 2], [1, 2, 3]),
                 ([1, 2, 3], [1, 2], nd.placeholder(nd.int32)),
                 (nd.placeholder(nd.int32), [1, 2], [1, 2, 3])):
        with pytest.raises(ValueError, match="first"):
            q3.enqueue_many(vals)
    typed = queue_cls(10, (nd.int32, nd.float32), ((), ()))
    with pytest.raises(ValueError):
        typed.enqueue((nd.placeholder(nd.int32), nd.placeholder(nd.int32)))
    enq = typed.enqueue_many(([], []))
    assert [t.dtype for t in enq.inputs[1:]] == [nd.int32, nd.float32]


@pytest.mark.parametrize("queue_cls,want", [
    (nd.FIFOQueue, ((2, 2), (3, 3), r"\[3,3\]", r"\[2,3,3\]")),
    (nd.PaddingFIFOQueue, ((2, 2), (None, 3), r"\[\?,3\]", r"\[2,\?,3\]"))])
def test_run_time_shape_errors_use_tf_wording(graph, queue_cls, want):
    first, second, one, many = want
    q = queue_cls(10, (nd.int32, nd.int32), (first, second))
    bad = nd.placeholder(nd.int32)
    enqueue = q.enqueue((np.ones((2, 2), np.int32), bad))
    enqueue_many = q.enqueue_many((np.ones((2, 2, 2), np.int32), bad))
    with _session() as sess:
        with pytest.raises(errors.InvalidArgumentError,
                           match=rf"component 1\. Expected {one}, got \[3,4\]"):
            sess.run(enqueue, {bad: np.ones((3, 4), np.int32)})
        with pytest.raises(errors.InvalidArgumentError,
                           match=rf"component 1\. Expected {many}, got \[2,3,4\]"):
            sess.run(enqueue_many, {bad: np.ones((2, 3, 4), np.int32)})


def test_dequeue_many_needs_shapes_but_empty_enqueue_many_does_not(graph):
    q = nd.FIFOQueue(10, nd.float32)
    empty = nd.constant(np.zeros([0, 2, 3], np.float32))
    shaped = nd.FIFOQueue(10, nd.float32, shapes=())
    with _session() as sess:
        sess.run(q.enqueue_many((empty,)))
        assert int(sess.run(q.size())) == 0
        with pytest.raises(errors.InvalidArgumentError, match="specified shapes"):
            sess.run(q.dequeue_many(0))
        assert sess.run(shaped.dequeue_many(0)).tolist() == []
        assert sess.run(shaped.dequeue_up_to(0)).tolist() == []


def test_shared_queues_must_agree(graph):
    cases = [({"capacity": 10}, {"capacity": 15}, "capacity"),
             ({"dtypes": nd.float32}, {"dtypes": nd.int32}, "component types"),
             ({}, {"shapes": [(1, 1, 2, 3)]}, "component shapes"),
             ({"shapes": [(1, 2)]}, {"shapes": [(1, 3)]}, "component shapes"),
             ({}, {"dtypes": (nd.float32, nd.int32)}, "component types")]
    with _session() as sess:
        for i, (a, b, what) in enumerate(cases):
            base = {"capacity": 10, "dtypes": nd.float32, "shared_name": f"q{i}"}
            first, second = nd.FIFOQueue(**{**base, **a}), nd.FIFOQueue(**{**base, **b})
            sess.run(first.queue_ref.op)
            with pytest.raises(errors.InvalidArgumentError, match=what):
                sess.run(second.queue_ref.op)
        same = [nd.FIFOQueue(1, nd.float32, shared_name="same") for _ in range(2)]
        sess.run(same[0].enqueue((10.0,)))
        assert float(sess.run(same[1].dequeue())) == 10.0


def test_from_list_selects_a_queue_when_run(graph):
    queues = [nd.FIFOQueue(10, nd.float32) for _ in range(4)]
    index = nd.placeholder(nd.int32, [])
    chosen = nd.FIFOQueue.from_list(index, queues)
    assert isinstance(chosen, nd.QueueBase)
    enqueue, dequeue = chosen.enqueue((10.0,)), chosen.dequeue()
    sizes = [q.size() for q in queues]
    with _session() as sess:
        sess.run(enqueue, {index: 2})
        assert [int(v) for v in sess.run(sizes)] == [0, 0, 1, 0]
        assert float(sess.run(dequeue, {index: 2})) == 10.0
        with pytest.raises(errors.InvalidArgumentError, match="is not in"):
            sess.run(dequeue, {index: 7})
    with pytest.raises(TypeError, match="incompatible dtypes"):
        nd.FIFOQueue.from_list(0, [queues[0], nd.FIFOQueue(1, nd.int32)])


def test_padding_queue_pads_strings_and_partially_known_shapes(graph):
    q = nd.PaddingFIFOQueue(10, (nd.string, nd.int32), shapes=((None,), (1, None)))
    words = [["a"], ["ab"], ["abc"], ["abc", "d"], ["abc", "d", "e"],
             ["abc", "d", "e", "f"]]
    ints = [[[1]], [[2]], [[3]], [[1, 2]], [[1, 2, 3]], [[1, 2, 3, 4]]]
    enqueues = [q.enqueue((w, i)) for w, i in zip(words, ints)]
    five, one = q.dequeue_up_to(5), q.dequeue()
    with _session() as sess:
        for e in enqueues:
            sess.run(e)
        got_words, got_ints = sess.run(five)
        assert got_words.tolist() == [[b"a", b"", b""], [b"ab", b"", b""],
                                      [b"abc", b"", b""], [b"abc", b"d", b""],
                                      [b"abc", b"d", b"e"]]
        assert got_ints.tolist() == [[[1, 0, 0]], [[2, 0, 0]], [[3, 0, 0]],
                                     [[1, 2, 0]], [[1, 2, 3]]]
        last_words, last_ints = sess.run(one)  # a single element is not padded
        assert last_words.tolist() == [b"abc", b"d", b"e", b"f"]
        assert last_ints.tolist() == [[1, 2, 3, 4]]
