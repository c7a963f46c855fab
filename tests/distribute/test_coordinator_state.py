"""The ClusterCoordinator's queue and failure logic, driven directly: events in,
actions out, no threads or processes."""

from __future__ import annotations

import pytest

from nbdist import errors
from nbdist.distribute.coordinator import coordinator_state as cs


def kinds(actions):
    return [type(a).__name__ for a in actions]


def of(actions, cls):
    return [a for a in actions if isinstance(a, cls)]


def closure(i, key=None):
    return cs.Closure(i, key, payload=f"payload-{i}")


def ids(closures):
    return [c.id for c in closures]


def fn_error(msg="boom"):
    return errors.InvalidArgumentError(None, "Reshape", msg)


def unavailable(msg="gone"):
    return errors.UnavailableError(None, None, msg)


# -- scheduling and results -------------------------------------------------------------
def test_schedule_dispatches_to_idle_workers_then_queues():
    s = cs.CoordinatorState(num_workers=2)
    a1 = s.handle(cs.Schedule(closure(1)))
    a2 = s.handle(cs.Schedule(closure(2)))
    assert kinds(a1) == kinds(a2) == ["Dispatch"]
    assert {a1[0].worker, a2[0].worker} == {0, 1}
    assert s.handle(cs.Schedule(closure(3))) == []  # both busy: queued
    assert s.num_queued == 1 and s.num_running == 2
    w = a1[0].worker
    # The worker reports its result, then that it is idle: it gets closure 3.
    res = s.handle(cs.ClosureDone(1, w, "v1"))
    assert kinds(res) == ["Resolve"] and res[0].value == "v1"
    assert res[0].closure.status == cs.DONE
    nxt = s.handle(cs.WorkerReady(w))
    assert kinds(nxt) == ["Dispatch"] and ids(nxt[0].closures) == [3]
    assert nxt[0].worker == w


def test_join_waits_until_everything_ran_and_done_reports():
    s = cs.CoordinatorState(num_workers=1)
    assert s.handle(cs.Join()) == []
    assert s.handle(cs.Done()) == [cs.DoneStatus(True)]
    s.handle(cs.Schedule(closure(1)))
    assert kinds(s.handle(cs.Join())) == ["Wait"]
    assert s.handle(cs.Done()) == [cs.DoneStatus(False)]
    s.handle(cs.ClosureDone(1, 0, 7))
    assert s.handle(cs.Join()) == []
    assert s.handle(cs.Done()) == [cs.DoneStatus(True)]


def test_same_function_closures_are_batched_in_powers_of_two():
    s = cs.CoordinatorState(num_workers=1, max_batch=16)
    first = s.handle(cs.Schedule(closure(1, "f")))
    assert ids(first[0].closures) == [1]
    for i in range(2, 9):
        assert s.handle(cs.Schedule(closure(i, "f"))) == []
    s.handle(cs.Schedule(closure(9, "g")))
    s.handle(cs.Schedule(closure(10, None)))
    s.handle(cs.Schedule(closure(11, None)))
    s.handle(cs.ClosureDone(1, 0))
    # 7 queued closures of "f" in a row: the largest power of two, in order.
    d = s.handle(cs.WorkerReady(0))
    assert ids(d[0].closures) == [2, 3, 4, 5]
    for i in (2, 3, 4, 5):
        s.handle(cs.ClosureDone(i, 0))
    assert ids(s.handle(cs.WorkerReady(0))[0].closures) == [6, 7]
    for i in (6, 7):
        s.handle(cs.ClosureDone(i, 0))
    assert ids(s.handle(cs.WorkerReady(0))[0].closures) == [8]
    s.handle(cs.ClosureDone(8, 0))
    assert ids(s.handle(cs.WorkerReady(0))[0].closures) == [9]  # another key
    s.handle(cs.ClosureDone(9, 0))
    assert ids(s.handle(cs.WorkerReady(0))[0].closures) == [10]  # key None: alone


def test_queued_work_is_shared_between_live_workers():
    s = cs.CoordinatorState(num_workers=2, max_batch=16)
    s.handle(cs.Schedule(closure(0)))
    s.handle(cs.Schedule(closure(1)))
    for i in range(2, 10):
        s.handle(cs.Schedule(closure(i, "f")))
    s.handle(cs.ClosureDone(0, 0))
    d = s.handle(cs.WorkerReady(0))
    assert ids(d[0].closures) == [2, 3, 4, 5]  # half: worker 1 is alive too
    s.handle(cs.ClosureDone(1, 1))
    # Of the 4 left, again a half.
    assert ids(s.handle(cs.WorkerReady(1))[0].closures) == [6, 7]


def test_queue_capacity_makes_schedule_wait():
    s = cs.CoordinatorState(num_workers=1, capacity=1)
    s.handle(cs.Schedule(closure(1)))  # running
    s.handle(cs.Schedule(closure(2)))  # queued
    assert kinds(s.handle(cs.Schedule(closure(3)))) == ["Wait"]
    s.handle(cs.ClosureDone(1, 0))
    s.handle(cs.WorkerReady(0))
    assert s.handle(cs.Schedule(closure(3))) == []


def test_unknown_event_is_a_type_error():
    with pytest.raises(TypeError, match="unknown event"):
        cs.CoordinatorState(num_workers=1).handle(object())


# -- worker failure: put back, at least once ----------------------------------------------
def test_failed_worker_closures_are_put_back_first_and_run_elsewhere():
    s = cs.CoordinatorState(num_workers=2, max_batch=4)
    s.handle(cs.Schedule(closure(1, "f")))  # -> worker 0
    s.handle(cs.Schedule(closure(2, "f")))  # -> worker 1
    s.handle(cs.Schedule(closure(3, "f")))  # queued
    out = s.handle(cs.WorkerFailed(1, "missed heartbeats"))
    assert kinds(out) == ["PutBack"]
    assert out[0].worker == 1 and ids(out[0].closures) == [2]
    assert ids(s.queue) == [2, 3]  # at the head of the queue
    assert not s.is_alive(1) and s.failed_workers == [1]
    s.handle(cs.ClosureDone(1, 0, "one"))
    d = s.handle(cs.WorkerReady(0))
    assert d[0].worker == 0 and ids(d[0].closures) == [2, 3]
    assert s.handle(cs.WorkerFailed(1)) == []  # already failed
    # A failed worker gets nothing, even when its thread comes back idle.
    s.handle(cs.Schedule(closure(4)))
    assert s.handle(cs.WorkerReady(1)) == []
    assert ids(s.queue) == [4]
    assert s.stats["put_back"] == 1


def test_put_back_closure_runs_immediately_on_an_idle_worker():
    s = cs.CoordinatorState(num_workers=2)
    s.handle(cs.Schedule(closure(1)))
    s.handle(cs.Schedule(closure(2)))
    s.handle(cs.ClosureDone(2, 1))
    s.handle(cs.WorkerReady(1))  # worker 1 idle
    out = s.handle(cs.WorkerFailed(0))
    assert kinds(out) == ["PutBack", "Dispatch"]
    assert out[1].worker == 1 and ids(out[1].closures) == [1]


def test_stale_result_of_a_failed_worker_counts_once():
    """At least once: a worker declared failed (e.g. stopped) may still finish;
    its result is used if the closure has not finished elsewhere, and the
    closure's other run is then ignored."""
    s = cs.CoordinatorState(num_workers=2)
    s.handle(cs.Schedule(closure(1)))  # worker 0
    s.handle(cs.Schedule(closure(2)))  # worker 1
    s.handle(cs.WorkerFailed(0))       # 1 queued again
    assert ids(s.queue) == [1]
    out = s.handle(cs.ClosureDone(1, 0, "late"))
    assert kinds(out) == ["Resolve"] and out[0].value == "late"
    assert ids(s.queue) == []
    assert s.handle(cs.ClosureDone(1, 1, "again")) == []
    assert s.handle(cs.ClosureFailed(1, 1, unavailable(), True)) == []
    # Closure 2 is re-dispatched after worker 1 failed, then both runs report.
    s.handle(cs.ClosureDone(2, 1, "x"))
    assert s.handle(cs.ClosureDone(2, 1, "y")) == []


def test_stale_failure_report_is_ignored():
    s = cs.CoordinatorState(num_workers=2)
    s.handle(cs.Schedule(closure(1)))  # worker 0
    out = s.handle(cs.WorkerFailed(0))
    assert kinds(out) == ["PutBack", "Dispatch"]
    assert ids(out[1].closures) == [1] and out[1].worker == 1
    # Worker 0's old run of closure 1 reports an error: not about its current run.
    assert s.handle(cs.ClosureFailed(1, 0, unavailable(), True)) == []
    assert s.handle(cs.ClosureFailed(1, 0, fn_error(), False)) == []
    assert s.error is None


def test_an_rpc_error_of_a_run_taken_back_asks_no_check_of_the_worker():
    """A worker killed mid-call is declared failed (heartbeats), restarts and
    rejoins; only then does its old call fail. That error tells of the loss
    already handled: checking the worker again (a probe, which a restarted
    process may not answer yet) would declare a second failure."""
    s = cs.CoordinatorState(num_workers=2)
    s.handle(cs.Schedule(closure(1)))  # worker 0
    s.handle(cs.Schedule(closure(2)))  # worker 1
    s.handle(cs.WorkerFailed(0, "DISCONNECTED (heartbeats)"))
    s.handle(cs.ClosureDone(2, 1, "v2"))
    s.handle(cs.WorkerReady(1))  # runs closure 1 again
    s.handle(cs.WorkerRecovered(0, 7))
    assert s.handle(cs.ClosureFailed(1, 0, unavailable(), True)) == []
    assert s.stats["worker_failures"] == 1
    # The same error on the run worker 1 holds now is about worker 1.
    out = s.handle(cs.ClosureFailed(1, 1, unavailable(), True))
    assert of(out, cs.CheckWorker) == [cs.CheckWorker(1)]
    # A resource build that fails on a live worker is checked; on one
    # declared failed since, not.
    assert s.handle(cs.ResourceBuildFailed(1, (), unavailable(), True)) == [
        cs.CheckWorker(1)]
    s.handle(cs.WorkerFailed(1))
    assert s.handle(cs.ResourceBuildFailed(1, (), unavailable(), True)) == []


def test_retryable_failure_puts_back_until_max_retries():
    s = cs.CoordinatorState(num_workers=1, max_retries=2)
    s.handle(cs.Schedule(closure(1)))
    for attempt in range(2):
        out = s.handle(cs.ClosureFailed(1, 0, unavailable(), True))
        assert kinds(out) == ["PutBack", "CheckWorker"]
        d = s.handle(cs.WorkerReady(0))
        assert ids(d[0].closures) == [1]
    out = s.handle(cs.ClosureFailed(1, 0, unavailable("third"), True))
    assert kinds(out) == ["Resolve", "CheckWorker"] and str(out[0].error) == "third"
    assert s.error is None  # a task failure is not a function error
    assert s.handle(cs.Join()) == []


# -- recovery and per-worker resources ------------------------------------------------------
def test_resources_are_built_before_closures_and_rebuilt_after_restart():
    s = cs.CoordinatorState(num_workers=2)
    r = cs.Resource(100, payload="iterator")
    out = s.handle(cs.CreateResource(r))
    assert kinds(out) == ["BuildResources", "BuildResources"]
    assert {a.worker for a in out} == {0, 1}
    s.handle(cs.Schedule(closure(1)))  # both workers busy building
    assert s.num_queued == 1
    ready = s.handle(cs.ResourcesBuilt(0, (100,)))
    assert kinds(ready) == ["ResourcesReady"] and ready[0].resources == [r]
    d = s.handle(cs.WorkerReady(0))
    assert kinds(d) == ["Dispatch"] and d[0].worker == 0
    s.handle(cs.ResourcesBuilt(1, (100,)))
    s.handle(cs.WorkerReady(1))
    s.handle(cs.WorkerRecovered(0, 11))  # first sighting: incarnation recorded
    # Worker 0 dies with closure 1: resource aborted, closure to worker 1.
    out = s.handle(cs.WorkerFailed(0))
    assert kinds(out) == ["PutBack", "AbortResources", "Dispatch"]
    assert out[1].resources == [r] and out[2].worker == 1
    s.handle(cs.WorkerReady(0))  # its thread came back from the failed RPC
    # It restarts (a new incarnation): it rebuilds before running anything.
    s.handle(cs.Schedule(closure(2)))
    out = s.handle(cs.WorkerRecovered(0, 12))
    assert kinds(out) == ["BuildResources"] and out[0].worker == 0
    assert s.handle(cs.ResourcesBuilt(0, (100,)))[0].resources == [r]
    d = s.handle(cs.WorkerReady(0))
    assert ids(d[0].closures) == [2]


def test_worker_back_with_same_incarnation_keeps_its_resources():
    """A worker cut off (stopped) and back: its resources survived."""
    s = cs.CoordinatorState(num_workers=1)
    r = cs.Resource(7)
    s.handle(cs.WorkerRecovered(0, 3))
    s.handle(cs.CreateResource(r))
    s.handle(cs.ResourcesBuilt(0, (7,)))
    s.handle(cs.WorkerReady(0))
    assert kinds(s.handle(cs.WorkerFailed(0, "DISCONNECTED"))) == ["AbortResources"]
    out = s.handle(cs.WorkerRecovered(0, 3))
    assert kinds(out) == ["ResourcesReady"]
    assert s.is_alive(0)


def test_unknown_incarnation_after_failure_means_rebuild():
    s = cs.CoordinatorState(num_workers=1)
    s.handle(cs.CreateResource(cs.Resource(7)))
    s.handle(cs.ResourcesBuilt(0, (7,)))
    s.handle(cs.WorkerReady(0))
    s.handle(cs.WorkerFailed(0))
    assert kinds(s.handle(cs.WorkerRecovered(0, None))) == ["BuildResources"]


def test_restart_seen_while_alive_is_a_failure_and_a_recovery():
    s = cs.CoordinatorState(num_workers=1)
    s.handle(cs.WorkerRecovered(0, 1))
    s.handle(cs.CreateResource(cs.Resource(7)))
    s.handle(cs.ResourcesBuilt(0, (7,)))
    s.handle(cs.WorkerReady(0))
    s.handle(cs.Schedule(closure(1)))
    assert s.handle(cs.WorkerRecovered(0, 1)) == []  # same incarnation: nothing
    out = s.handle(cs.WorkerRecovered(0, 2))
    assert kinds(out) == ["PutBack", "AbortResources"]  # busy: rebuild later
    assert s.is_alive(0) and ids(s.queue) == [1]
    out = s.handle(cs.WorkerReady(0))
    assert kinds(out) == ["BuildResources"]


def test_failed_worker_builds_new_resources_when_it_recovers():
    s = cs.CoordinatorState(num_workers=2)
    s.handle(cs.WorkerFailed(1))
    out = s.handle(cs.CreateResource(cs.Resource(5)))
    assert [a.worker for a in out] == [0]
    assert [a.worker for a in s.handle(cs.WorkerRecovered(1, 9))] == [1]


def test_resource_build_error_is_raised_once():
    s = cs.CoordinatorState(num_workers=1)
    s.handle(cs.CreateResource(cs.Resource(5)))
    # A task failure while building: built again when the worker is ready.
    assert s.handle(cs.ResourceBuildFailed(0, (5,), unavailable(), True)) == [
        cs.CheckWorker(0)]
    assert kinds(s.handle(cs.WorkerReady(0))) == ["BuildResources"]
    err = fn_error("bad dataset")
    s.handle(cs.ResourceBuildFailed(0, (5,), err, False))
    s.handle(cs.WorkerReady(0))
    assert s.handle(cs.Join()) == [cs.Raise(err)]
    assert s.handle(cs.Join()) == []


# -- function errors: raised once, queued closures cancelled --------------------------------
def test_function_error_is_raised_once_after_in_flight_closures_then_cleared():
    s = cs.CoordinatorState(num_workers=2)
    s.handle(cs.Schedule(closure(1)))  # worker 0
    s.handle(cs.Schedule(closure(2)))  # worker 1
    s.handle(cs.Schedule(closure(3)))  # queued
    err = fn_error()
    out = s.handle(cs.ClosureFailed(1, 0, err, False))
    assert kinds(out) == ["Resolve"] and out[0].error is err
    # Nothing more is dispatched while the error is pending.
    assert s.handle(cs.WorkerReady(0)) == []
    # join: queued closures cancelled, then wait for closure 2 (in flight).
    out = s.handle(cs.Join())
    assert kinds(out) == ["Cancel", "Wait"]
    assert out[0].closure.id == 3 and isinstance(out[0].error, errors.CancelledError)
    assert "reschedule" in str(out[0].error)
    s.handle(cs.ClosureDone(2, 1, "two"))  # in flight: still completes
    assert s.handle(cs.Join()) == [cs.Raise(err)]
    assert s.handle(cs.Join()) == []  # cleared
    # Scheduling works again.
    assert kinds(s.handle(cs.Schedule(closure(4)))) == ["Dispatch"]


def test_only_the_first_function_error_is_kept():
    s = cs.CoordinatorState(num_workers=2)
    s.handle(cs.Schedule(closure(1)))
    s.handle(cs.Schedule(closure(2)))
    first, second = fn_error("first"), fn_error("second")
    s.handle(cs.ClosureFailed(1, 0, first, False))
    out = s.handle(cs.ClosureFailed(2, 1, second, False))
    assert out[0].error is second  # its own RemoteValue has its own error
    assert s.handle(cs.Done()) == [cs.Raise(first)]
    assert s.handle(cs.Done()) == [cs.DoneStatus(True)]


def test_schedule_raises_the_pending_error_and_cancels_its_closure():
    s = cs.CoordinatorState(num_workers=1)
    s.handle(cs.Schedule(closure(1)))
    s.handle(cs.Schedule(closure(2)))
    err = fn_error()
    s.handle(cs.ClosureFailed(1, 0, err, False))
    new = closure(3)
    out = s.handle(cs.Schedule(new))
    assert kinds(out) == ["Cancel", "Raise", "Cancel"]
    assert out[0].closure.id == 2 and out[2].closure is new
    assert new.status == cs.CANCELLED and out[1].error is err
    assert kinds(s.handle(cs.Schedule(closure(4)))) == []  # worker still busy
    assert ids(s.handle(cs.WorkerReady(0))[0].closures) == [4]


def test_batch_mates_of_a_failing_closure_are_put_back_then_cancelled():
    s = cs.CoordinatorState(num_workers=1, max_batch=4)
    s.handle(cs.Schedule(closure(0, "f")))
    for i in (1, 2, 3, 4):
        s.handle(cs.Schedule(closure(i, "f")))
    s.handle(cs.ClosureDone(0, 0))
    batch = s.handle(cs.WorkerReady(0))[0].closures
    err = fn_error()
    s.handle(cs.ClosureFailed(batch[2].id, 0, err, False))
    for c in batch:
        if c is not batch[2]:
            s.handle(cs.ClosureFailed(c.id, 0, err, True))
    s.handle(cs.WorkerReady(0))
    out = s.handle(cs.Join())
    assert sorted(a.closure.id for a in of(out, cs.Cancel)) == [1, 2, 4]
    assert out[-1] == cs.Raise(err)


# -- parameter servers ------------------------------------------------------------------------
def test_ps_failure_raises_at_once_and_while_the_ps_is_down():
    s = cs.CoordinatorState(num_workers=2)
    s.handle(cs.Schedule(closure(1)))
    s.handle(cs.Schedule(closure(2)))
    s.handle(cs.Schedule(closure(3)))
    ps = "/job:ps/replica:0/task:0"
    assert s.handle(cs.PsFailed(ps, unavailable("ps down"))) == []
    # No waiting for in-flight closures (they may hang on the dead ps).
    out = s.handle(cs.Join())
    assert kinds(out) == ["Cancel", "Raise"]
    assert isinstance(out[-1].error, errors.UnavailableError)
    assert str(out[-1].error) == "ps down"
    # In-flight closures fail with their error, not retried while the ps is down.
    out = s.handle(cs.ClosureFailed(1, 0, unavailable("rpc"), True))
    assert kinds(out) == ["Resolve", "CheckWorker"]
    out = s.handle(cs.Schedule(closure(4)))
    assert kinds(out) == ["Raise", "Cancel"]
    assert ps in str(out[0].error)
    assert s.handle(cs.PsFailed(ps)) == []  # known
    s.handle(cs.ClosureDone(2, 1))
    s.handle(cs.WorkerReady(0))
    s.handle(cs.WorkerReady(1))
    s.handle(cs.PsRecovered(ps))
    assert s.handle(cs.Join()) == []
    assert kinds(s.handle(cs.Schedule(closure(5)))) == ["Dispatch"]


def test_ps_failure_reported_after_it_came_back_is_still_raised_once():
    s = cs.CoordinatorState(num_workers=1)
    ps = "/job:ps/replica:0/task:1"
    s.handle(cs.PsFailed(ps))
    s.handle(cs.PsRecovered(ps))
    out = s.handle(cs.Done())
    assert kinds(out) == ["Raise"] and ps in str(out[0].error)
    assert s.handle(cs.Done()) == [cs.DoneStatus(True)]


def test_nothing_is_dispatched_while_a_ps_is_down():
    s = cs.CoordinatorState(num_workers=1)
    ps = "/job:ps/replica:0/task:0"
    s.handle(cs.Schedule(closure(1)))
    s.handle(cs.PsFailed(ps))
    s.handle(cs.ClosureFailed(1, 0, unavailable(), True))
    assert s.handle(cs.WorkerReady(0)) == []
    s.handle(cs.PsRecovered(ps))
    assert kinds(s.handle(cs.Join())) == ["Raise"]  # raised once, then cleared
    assert kinds(s.handle(cs.Schedule(closure(2)))) == ["Dispatch"]
