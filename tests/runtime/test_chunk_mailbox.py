"""``ChunkMailbox``: a pushed all-reduce chunk meets the collective that takes it
exactly once, whichever of the two comes first, however the threads interleave."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from nbdist import errors
from nbdist.executor.step import StepContext
from nbdist.runtime.collective_mailbox import ChunkMailbox

ROUNDS = 3000
BOUND_S = 30.0


@pytest.fixture
def fine_thread_switching():
    # Threads switch every microsecond: a delivery and a take racing for the
    # same chunk interleave at every point (a gap seen once under load hung a
    # ring all-reduce: the chunk was left for a taker that had just started waiting).
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_deliveries_racing_takes_are_each_consumed_once(fine_thread_switching):
    box = ChunkMailbox()
    end = time.monotonic() + BOUND_S
    delivered_errors, taken = [], []

    def deliver(i):
        try:
            box.deliver(1, f"k{i}", i, {}, max(0.1, end - time.monotonic()),
                        threading.Event())
        except errors.OpError as e:
            delivered_errors.append((i, e))

    for i in range(ROUNDS):
        pusher = threading.Thread(target=deliver, args=(i,))
        pusher.start()
        step = StepContext(i, deadline=min(end, time.monotonic() + 10.0))
        taken.append(box.take(step, 1, f"k{i}", lambda v, meta: v * 2, "a chunk"))
        pusher.join(max(0.1, end - time.monotonic()))
        assert not pusher.is_alive(), f"chunk {i}'s pusher was never answered"
    assert taken == [2 * i for i in range(ROUNDS)]
    assert delivered_errors == []
    assert box._slots == {} and box._takers == {}


def test_a_consumer_error_reaches_both_sides():
    box = ChunkMailbox()
    got = []

    def deliver():
        try:
            box.deliver(3, "k", 1, {}, 10.0, threading.Event())
        except errors.OpError as e:
            got.append(e)

    pusher = threading.Thread(target=deliver)
    pusher.start()

    def refuse(value, meta):
        raise ValueError("not a float32 of shape [4]")

    with pytest.raises(errors.InternalError, match="a chunk: ValueError: not a float32"):
        box.take(StepContext(1, deadline=time.monotonic() + 10), 3, "k", refuse,
                 "a chunk")
    pusher.join(10)
    assert len(got) == 1 and "not a float32" in str(got[0])


def test_an_aborted_execution_refuses_a_chunk_that_comes_late():
    box = ChunkMailbox()
    box.abort(5, errors.AbortedError(None, None, "all-reduce 5 failed on task 1"))
    with pytest.raises(errors.AbortedError, match="failed on task 1"):
        box.deliver(5, "k", 1, {}, 10.0, threading.Event())
    with pytest.raises(errors.AbortedError, match="failed on task 1"):
        box.take(StepContext(1), 5, "k", lambda v, m: v, "a chunk")
