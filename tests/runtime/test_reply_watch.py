"""The master reads same-host RunGraph replies on the step's own thread
(``runtime.reply_watch``): a fast step's replies are claimed by it, a slow
step's are handed to the pool, and a peer's failure still cancels a local
partition that is blocked, with the peer's error (as TF's master does)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import numpy as np
import pytest
from helpers import local_cluster

import nbdist as nd
from nbdist.runtime import master as master_mod


def ReplyWatch(**kw):  # the class, imported when a test runs
    from nbdist.runtime.reply_watch import ReplyWatch as watch_class

    return watch_class(**kw)


def _done_future(value) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f


def test_a_fast_step_claims_its_replies_and_nothing_is_handed_over():
    watch = ReplyWatch(slow_s=5.0)
    submitted = []
    entry = watch.watch([("ps", "finish-ps")],
                        lambda p, f: submitted.append(p) or _done_future(p))
    watch.done(entry)
    assert entry.claim() == [("ps", "finish-ps")]
    assert entry.claim() == []  # taken once
    assert submitted == [] and entry.futures == [] and watch.handed_over == 0


def test_a_slow_step_hands_every_reply_to_the_pool_once():
    watch = ReplyWatch(slow_s=0.02)
    handed = threading.Event()
    submitted = []

    def submit(part, finish):
        submitted.append((part, finish))
        if len(submitted) == 2:
            handed.set()
        return _done_future(part)

    entry = watch.watch([("ps0", "f0"), ("ps1", "f1")], submit)
    assert handed.wait(10.0), "the watch never handed the slow step over"
    watch.done(entry)
    assert entry.claim() == []  # the step's thread finds nothing left to read
    assert submitted == [("ps0", "f0"), ("ps1", "f1")]
    assert [f.result(timeout=10.0) for f in entry.futures] == ["ps0", "ps1"]
    assert watch.handed_over == 1


def test_the_watch_sleeps_when_idle_and_wakes_for_the_next_step():
    watch = ReplyWatch(slow_s=0.002)
    for _ in range(3):  # each round: idle again, then a slow step
        deadline = time.monotonic() + 10.0
        while not watch._idle and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watch._idle
        got = threading.Event()
        watch.watch([("ps", "f")], lambda p, f, got=got: got.set() or _done_future(p))
        assert got.wait(10.0)


@pytest.fixture
def ps_and_worker(servers):
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    return cluster, servers(cluster, "worker", 0)


def test_a_failing_peer_cancels_the_blocked_local_partition_with_its_error(
        ps_and_worker):
    """The worker's partition blocks on an empty queue; the ps's partition
    fails: the step ends with the ps's error (not a cancellation, not the
    operation timeout)."""
    _, worker = ps_and_worker
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            bad = nd.Assert(nd.constant(False), [nd.constant(1.0)], name="ps_check")
        with nd.device("/job:worker/task:0"):
            q = nd.FIFOQueue(1, nd.float32)
            blocked = q.dequeue()
    before = master_mod._reply_watch.handed_over
    config = nd.ConfigProto(operation_timeout_in_ms=60000)
    with nd.Session(worker.target, graph=g, config=config) as sess:
        start = time.monotonic()
        with pytest.raises(nd.errors.InvalidArgumentError, match="ps_check"):
            sess.run([bad, blocked])
        assert time.monotonic() - start < 30.0
    assert master_mod._reply_watch.handed_over > before


def test_cross_task_steps_give_the_single_process_results(ps_and_worker):
    """Steps whose replies are read on the step's thread: a ps variable updated
    by the worker's gradients, step after step, as NumPy says."""
    _, worker = ps_and_worker
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            w = nd.Variable(np.ones(4, np.float32))
        with nd.device("/job:worker/task:0"):
            x = nd.placeholder(nd.float32, [4])
            loss = nd.reduce_sum(w * x)
            step = nd.train.GradientDescentOptimizer(0.5).minimize(loss)
    xs = np.arange(4, dtype=np.float32)
    expected = np.ones(4, np.float32)
    with nd.Session(worker.target, graph=g) as sess:
        sess.run(w.initializer)
        for _ in range(20):
            loss_value, _ = sess.run([loss, step], {x: xs})
            np.testing.assert_allclose(loss_value, float(expected @ xs), rtol=1e-6)
            expected = expected - 0.5 * xs
        np.testing.assert_allclose(sess.run(w), expected, rtol=1e-6)


def test_a_step_reads_its_same_host_replies_without_the_pool(ps_and_worker,
                                                            monkeypatch):
    """Every pool hand-off of a same-host step is a slow step's (none of a
    fast one): the step's own thread reads the ps's RunGraph reply."""
    _, worker = ps_and_worker
    submitted = []
    pool_submit = master_mod._pool.submit

    def counting_submit(fn, *args):
        submitted.append(fn)
        return pool_submit(fn, *args)

    monkeypatch.setattr(master_mod._pool, "submit", counting_submit)
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            v = nd.Variable(np.float32(0.0))
        with nd.device("/job:worker/task:0"):
            bump = nd.assign_add(v, nd.constant(1.0) * 1.0)
    watch = getattr(master_mod, "_reply_watch", None)
    with nd.Session(worker.target, graph=g) as sess:
        sess.run(v.initializer)
        before = watch.handed_over if watch is not None else 0
        for _ in range(20):
            sess.run(bump)
        assert float(sess.run(v)) == 20.0
        handed = (watch.handed_over if watch is not None else 0) - before
    assert len(submitted) <= handed + 2  # the two runs outside the loop, if slow
    assert len(submitted) < 20
