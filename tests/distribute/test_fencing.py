"""Fencing: a step of a worker declared failed never applies late.

A ``ClusterCoordinator`` puts a failed worker's closures back and runs them
elsewhere; the step still in flight on the failed worker must not apply its
update on the ps afterwards (at least once, and nothing after ``join()``).
The runtime half (a deleted worker session aborts its running steps and
refuses late ones) runs in process; the coordinator half on real processes
(a worker SIGSTOPped mid-closure, then SIGCONTed after ``join()``).
"""

from __future__ import annotations

import os
import signal
import threading

import pytest
from helpers import local_cluster, sleep_op, wait_for

import nbdist as nd
from nbdist import errors
from nbdist.distribute.coordinator.cluster_coordinator import ClusterCoordinator
from nbdist.distribute.strategies.parameter_server_strategy import (
    ParameterServerStrategy,
)
from nbdist.runtime import transports

_HEARTBEATS = {"NBDIST_HEARTBEAT_INTERVAL_MS": "100",
               "NBDIST_HEARTBEAT_TIMEOUT_MS": "1000"}


def _read(target, variable) -> int:
    config = nd.ConfigProto(device_filters=["/job:ps"])
    with nd.Session(target, graph=variable.graph, config=config) as sess:
        return int(sess.run(variable))


def test_deleted_worker_session_aborts_its_step_and_refuses_late_ones(servers, graph):
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(0, name="v")
    with nd.device("/job:worker/task:0"):
        slow = sleep_op(nd.constant(1), 60.0)
    with nd.device("/job:ps/task:0"):
        add = v.assign_add(slow)
        add_now = v.assign_add(1)
    sess = nd.Session(worker.target)
    sess.run(v.initializer)
    box: list = []

    def run():
        try:
            box.append(sess.run(add))
        except Exception as e:  # noqa: BLE001 - checked below
            box.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    # The ps partition is waiting for the sleep's value when its session goes.
    wait_for(lambda: ps._worker._steps, 30, "the step on the ps")
    ps_client = transports.connect_worker("/job:ps/replica:0/task:0",
                                          cluster["ps"][0])
    try:
        ps_client.delete_worker_session(sess._handle)
        t.join(30)
        assert not t.is_alive()
        assert isinstance(box[0], errors.AbortedError), box
        # A later step of the fenced session is refused on the ps.
        with pytest.raises(errors.AbortedError):
            sess.run(add_now)
    finally:
        ps_client.close()
        sess.close()
    with nd.Session(worker.target) as check:
        assert int(check.run(v)) == 0


@pytest.mark.slow
def test_sigstopped_worker_does_not_apply_its_closure_after_join(spawn):
    cluster = local_cluster(ps=1, worker=2)
    procs = {(job, i): spawn(job, i, cluster, test_ops=True, env=_HEARTBEATS,
                             wait=False)
             for job in ("worker", "ps") for i in range(len(cluster[job]))}
    for p in procs.values():
        p.wait_ready()
    strategy = ParameterServerStrategy(nd.train.ClusterSpec(cluster))
    coordinator = ClusterCoordinator(strategy)
    try:
        with strategy.scope():
            counter = nd.Variable(0, name="counter")

        @nd.function
        def slow_add():
            # Runs on the worker for 2 s, then adds on the ps: a non-idempotent
            # update still in flight when its worker is stopped.
            return counter.assign_add(sleep_op(nd.constant(1), 2.0))

        @nd.function
        def add_one():
            return counter.assign_add(1)

        coordinator.fetch(coordinator.schedule(add_one))  # variables initialised
        state = coordinator._state
        wait_for(lambda: all(w.incarnation is not None for w in state.workers), 30,
                 "both workers' heartbeats")
        # Warm: each worker has its session, so a dispatch is a RunStep at once.
        for _ in range(5):
            for _ in range(2):
                coordinator.schedule(slow_add)
            coordinator.join()
            if coordinator.stats.get("completed/worker:1"):
                break
        assert coordinator.stats.get("completed/worker:1")
        base = _read(strategy.extended.task_target("ps", 0), counter)
        rvs = [coordinator.schedule(slow_add) for _ in range(2)]
        wait_for(lambda: state.running_on(1), 30, "a closure on worker 1")
        os.kill(procs["worker", 1].pid, signal.SIGSTOP)
        try:
            wait_for(lambda: not state.is_alive(1), 30, "worker 1 declared failed")
            coordinator.join()  # worker 1's closure ran again on worker 0
            assert sorted(int(r.fetch()) for r in rvs) == [base + 1, base + 2]
            assert coordinator.stats["put_back"] >= 1
            assert _read(strategy.extended.task_target("ps", 0), counter) == base + 2
        finally:
            os.kill(procs["worker", 1].pid, signal.SIGCONT)
        # The stopped step resumes: its RunStep returns (applied or refused)
        # and worker 1's loop is idle again.
        wait_for(lambda: state.is_alive(1) and not state.workers[1].busy, 60,
                 "worker 1's stale step to end")
        assert _read(strategy.extended.task_target("ps", 0), counter) == base + 2
        # Worker 1 takes work again (in new sessions: the old ones are fenced).
        before = coordinator.stats.get("completed/worker:1", 0)
        more = [coordinator.schedule(add_one) for _ in range(40)]
        coordinator.join()
        assert sorted(int(r.fetch()) for r in more) == list(range(base + 3,
                                                                  base + 43))
        assert coordinator.stats.get("completed/worker:1", 0) > before
        assert _read(strategy.extended.task_target("ps", 0), counter) == base + 42
    finally:
        coordinator.close()
        for p in procs.values():
            try:
                os.kill(p.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
