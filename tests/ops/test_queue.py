"""FIFOQueue: order, shared names, blocking with timeouts and cancellation."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()
    yield


def test_fifo_order_and_many():
    q = nd.FIFOQueue(10, [nd.int32, nd.float32], shapes=[[], [2]])
    enq = q.enqueue_many([[1, 2, 3], np.arange(6, dtype=np.float32).reshape(3, 2)])
    deq = q.dequeue()
    deq2 = q.dequeue_many(2)
    assert deq2[1].shape.as_list() == [2, 2]
    with nd.Session() as s:
        s.run(enq)
        a, b = s.run(deq)
        assert a == 1 and list(b) == [0.0, 1.0]
        a, b = s.run(deq2)
        assert list(a) == [2, 3] and b.shape == (2, 2)
        assert s.run(q.size()) == 0


def test_named_components():
    q = nd.FIFOQueue(2, [nd.int32, nd.string], shapes=[[], []], names=["n", "s"])
    enq = q.enqueue({"n": 7, "s": "seven"})
    deq = q.dequeue()
    with nd.Session() as s:
        s.run(enq)
        assert s.run(deq) == {"n": 7, "s": b"seven"}


def test_dequeue_honours_operation_timeout():
    q = nd.FIFOQueue(1, [nd.float32], shapes=[[]])
    deq = q.dequeue()
    cfg = nd.ConfigProto(operation_timeout_in_ms=200)
    with nd.Session(config=cfg) as s:
        start = time.monotonic()
        with pytest.raises(nd.errors.DeadlineExceededError, match="QueueDequeue"):
            s.run(deq)
        assert time.monotonic() - start < 5
        # The session still works afterwards.
        s.run(q.enqueue([1.0]))
        assert s.run(deq) == 1.0


def test_run_options_timeout_bounds_a_blocked_enqueue():
    q = nd.FIFOQueue(1, [nd.float32], shapes=[[]])
    enq = q.enqueue([1.0])
    with nd.Session() as s:
        s.run(enq)
        with pytest.raises(nd.errors.DeadlineExceededError):
            s.run(enq, options=nd.RunOptions(timeout_in_ms=150))


def test_closed_empty_queue_is_out_of_range_and_wakes_waiters():
    q = nd.FIFOQueue(5, [nd.float32], shapes=[[]])
    deq = q.dequeue()
    close = q.close()
    result = {}
    with nd.Session() as s:
        def waiter():
            try:
                s.run(deq)
            except nd.errors.OutOfRangeError as e:
                result["err"] = e

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.1)
        s.run(close)
        t.join(timeout=10)
        assert not t.is_alive()
    assert "closed" in str(result["err"])


def test_enqueue_shape_and_dtype_checked():
    q = nd.FIFOQueue(5, [nd.float32], shapes=[[2]])
    with pytest.raises(ValueError, match="compatible"):
        q.enqueue([np.zeros(3, np.float32)])
    p = nd.placeholder(nd.float32, [None])
    enq = q.enqueue([p])
    with nd.Session() as s:
        with pytest.raises(nd.errors.InvalidArgumentError, match="Shape mismatch"):
            s.run(enq, {p: np.zeros(3)})


def test_shared_name_queue_is_shared_by_graphs_on_one_worker():
    from nbdist.runtime.master import Master
    from nbdist.runtime.worker import Worker

    worker = Worker()
    master = Master(worker.task_name, worker)
    outs = []
    for value in (1.0, None):
        g = nd.Graph()
        with g.as_default():
            q = nd.FIFOQueue(5, [nd.float32], shapes=[[]], shared_name="tokens")
            op = q.enqueue([value]) if value is not None else q.dequeue()
        gd = g.as_graph_def()
        h, _ = master.create_session(gd)
        name = op.name if value is not None else op.name
        if value is not None:
            master.run_step(h, {}, [], [name])
        else:
            outs.extend(master.run_step(h, {}, [name], []))
    assert outs == [1.0]


def test_closing_the_session_cancels_a_blocked_step():
    q = nd.FIFOQueue(1, [nd.float32], shapes=[[]])
    deq = q.dequeue()
    s = nd.Session()
    result = {}

    def waiter():
        try:
            s.run(deq)
        except nd.errors.CancelledError as e:
            result["err"] = e

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)
    s.close()
    t.join(timeout=10)
    assert not t.is_alive()
    assert "Session::Close" in str(result["err"])  # TF's wording
