"""A failed step leaves nothing of its session behind on the tasks it ran on.

When a step fails on one task, its master aborts it on the others; a task whose
part had already finished remembers the abort (up to 1024 of them, so that a
late RunGraph of that step is refused), and so does its rendezvous. It kept
the error object itself, whose traceback's frames held the failed step's
whole ``MasterSession`` (its plan, partitions and executors): ~0.5 MiB per
failed session, which is how the monitored job's worker in ``scripts/soak.py``
grew 58 -> 122 MiB over ~107 ps restarts (each one fails a step).

Oracle: after N sessions each of whose steps failed on the ps and were closed,
the ``MasterSession`` objects alive (``gc``) are as few as after one.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from helpers import local_cluster

import nbdist as nd
from nbdist import errors
from nbdist.runtime.master import MasterSession

SESSIONS = 12


@pytest.fixture(scope="module")
def servers():
    cluster = local_cluster(ps=1, worker=1)
    ps = nd.Server(cluster, job_name="ps", task_index=0)
    worker = nd.Server(cluster, job_name="worker", task_index=0)
    yield ps, worker
    worker.stop()
    ps.stop()


def _failed_session(target):
    """One session whose step fails on the ps after the worker's part ran."""
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:worker/task:0"):
            done = nd.constant(1.0) + 1.0
        with nd.device("/job:ps/task:0"):
            shape = nd.placeholder(nd.int32, [2])
            bad = nd.reshape(nd.constant([1.0, 2.0, 3.0]), shape)
        with nd.Session(target) as sess, pytest.raises(errors.InvalidArgumentError):
            sess.run([done, bad], {shape: np.array([2, 2], np.int32)})


def _alive_master_sessions() -> int:
    gc.collect()
    return sum(isinstance(o, MasterSession) for o in gc.get_objects())


def test_failed_sessions_are_not_kept_alive(servers):
    _, worker = servers
    _failed_session(worker.target)
    after_one = _alive_master_sessions()
    for _ in range(SESSIONS):
        _failed_session(worker.target)
    assert _alive_master_sessions() <= after_one, (
        f"{SESSIONS} failed, closed sessions left "
        f"{_alive_master_sessions() - after_one} MasterSessions alive")
