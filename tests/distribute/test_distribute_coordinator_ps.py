"""A between-graph STANDALONE_CLIENT of ``run_distribute_coordinator`` whose
``worker_fn`` puts its variables on ``/job:ps`` (``replica_device_setter``)
and trains in a monitored session: the session targets the task's server, so
the ps ops are placed there, and every worker's updates land in the one
variable on the ps. In-process servers: 2 workers and 1 ps."""

from __future__ import annotations

import threading

import pytest
from helpers import local_cluster

import nbdist as nd
from nbdist.distribute.strategies.distribute_coordinator import (
    run_distribute_coordinator,
)
from nbdist.distribute.strategies.distribute_coordinator_context import (
    get_current_worker_context,
)

STEPS = 3  # each worker's steps


@pytest.fixture
def cluster():
    spec = local_cluster(worker=2, ps=1)
    servers = [nd.Server(spec, job_name=job, task_index=i)
               for job in spec for i in range(len(spec[job]))]
    yield spec
    for s in reversed(servers):
        s.stop()


def _monitored_training_session(ctx, hooks):
    return nd.train.MonitoredTrainingSession(
        master=ctx.master_target, is_chief=ctx.is_chief, hooks=hooks,
        log_step_count_steps=None)


def _bare_monitored_session(ctx, hooks):
    # As TF: under a worker context a MonitoredSession without a session
    # creator uses the context's (the task's server, its session config).
    return nd.train.MonitoredSession(hooks=hooks)


@pytest.mark.parametrize("open_session", [_monitored_training_session,
                                          _bare_monitored_session])
def test_worker_fn_trains_variables_on_the_ps(cluster, open_session):
    got, lock = [], threading.Lock()

    def worker_fn(strategy):
        ctx = get_current_worker_context()
        with nd.Graph().as_default():
            with nd.device(nd.train.replica_device_setter(
                    worker_device=f"/job:worker/task:{ctx.task_id}",
                    cluster=ctx.cluster_spec)):
                total = nd.get_variable("total", initializer=10.0)
                add = total.assign_add(2.0)
            with open_session(ctx, []) as sess:
                for _ in range(STEPS):
                    sess.run(add)
                ctx.wait_for_other_workers()  # every worker's steps are in
                value = sess.run(total)
            with lock:
                got.append((ctx.task_id, total.device, float(value)))

    assert run_distribute_coordinator(worker_fn, None, cluster_spec=cluster) is None
    # One variable on the ps, seen by both workers after both added 3 × 2.
    assert sorted(got) == [(i, "/job:ps/task:0", 10.0 + 2.0 * STEPS * 2)
                           for i in range(2)]
