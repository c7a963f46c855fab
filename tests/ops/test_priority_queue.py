"""``tf.io.PriorityQueue`` (also ``tf.queue``/``tf.PriorityQueue``): elements
leave lowest priority first; the priority is an int64 scalar first component;
shapes are required (TF's error when missing). Checked against TF 2.21."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def test_dequeues_lowest_priority_first_ties_in_arrival_order():
    q = nd.compat.v1.io.PriorityQueue(10, [nd.string, nd.int32], shapes=[[], [2]])
    assert q.dtypes == [nd.int64, nd.string, nd.int32]
    enq = q.enqueue_many([[3, 1, 2, 1], [b"c", b"a", b"b", b"a2"],
                          [[3, 3], [1, 1], [2, 2], [4, 4]]])
    one, many = q.dequeue(), q.dequeue_many(3)
    with nd.Session() as s:
        s.run(enq)
        assert s.run(q.size()) == 4
        p, name, vec = s.run(one)
        assert (int(p), name, vec.tolist()) == (1, b"a", [1, 1])
        ps, names, vecs = s.run(many)
    assert ps.tolist() == [1, 2, 3] and list(names) == [b"a2", b"b", b"c"]
    np.testing.assert_array_equal(vecs, [[4, 4], [2, 2], [3, 3]])


def test_closed_empty_queue_is_out_of_range_and_shapes_are_required():
    q = nd.queue.PriorityQueue(2, [nd.float32], shapes=[[]])
    enq, deq = q.enqueue((np.int64(5), 1.5)), q.dequeue()
    with nd.Session() as s:
        s.run(enq)
        s.run(q.close())
        assert s.run(deq)[1] == 1.5
        with pytest.raises(nd.errors.OutOfRangeError, match="closed"):
            s.run(deq)
    with pytest.raises(TypeError, match="Expected list for 'shapes'"):
        nd.PriorityQueue(2, [nd.float32])
    with pytest.raises(ValueError, match="not compatible"):
        q.enqueue(([1], [1.0]))
