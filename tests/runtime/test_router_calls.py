"""Every call between tasks goes through the server's ``PeerRouter``: control
calls (GetStatus, CreateWorkerSession, RegisterGraph, ...) show on the tap as
``"control"`` events for subscribers that ask for them and obey the task's
fault rules, and so does the traffic of a session's propagated cluster
(``ConfigProto.cluster_def``), whose tasks the router names by address."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import local_cluster
from test_clusterspec_propagation import _address, _cluster_def

import nbdist as nd
from nbdist.runtime.faults import FaultRule
from nbdist.runtime.tap import CONTROL

PS = "/job:ps/replica:0/task:0"
WORKER = "/job:worker/replica:0/task:0"


@pytest.fixture(scope="module")
def cluster():
    spec = local_cluster(ps=1, worker=1)
    ps = nd.Server(spec, job_name="ps", task_index=0)
    worker = nd.Server(spec, job_name="worker", task_index=0)
    yield ps, worker
    worker.stop()
    ps.stop()


def _ps_times_two():
    """A graph whose step asks the ps for a tensor, and that tensor doubled."""
    g = nd.Graph()
    with g.as_default(), nd.device(PS):
        a = nd.range(4.0)
    with g.as_default(), nd.device(WORKER):
        return g, a + a


def test_control_calls_of_a_session_show_on_the_tap_for_who_asks(cluster):
    _, worker = cluster
    every, steps = [], []
    stops = [worker.tap.subscribe(every.append, control=True),
             worker.tap.subscribe(steps.append)]
    try:
        g, b = _ps_times_two()
        with nd.Session(worker.target, graph=g) as sess:
            np.testing.assert_array_equal(sess.run(b), np.arange(4.0) * 2)
    finally:
        for stop in stops:
            stop()
    to_ps = [e for e in every if e.destination == PS]
    control = [e.method for e in to_ps if e.kind == CONTROL]
    # A session's life with the ps, in order: found, joined, its graph
    # registered, (its step), and at close its graph and session let go.
    assert control == ["GetStatus", "CreateWorkerSession", "RegisterGraph",
                       "DeregisterGraph", "DeleteWorkerSession"]
    register = next(e for e in to_ps if e.method == "RegisterGraph")
    assert register.source == WORKER and register.nbytes > 0  # the graph's size
    assert register.start <= register.end
    # The step itself is a RunGraph event (seen by every subscriber), between
    # the registration and the release.
    kinds = [e.kind if e.kind != CONTROL else e.method for e in to_ps]
    assert kinds.index("RegisterGraph") < kinds.index("RunGraph") < kinds.index(
        "DeregisterGraph")
    # A subscriber that did not ask sees the step's traffic only (the
    # notebook's traffic views subscribe so).
    assert steps and all(e.kind != CONTROL for e in steps)
    assert [e for e in every if e.kind != CONTROL] == steps


def test_a_cut_link_fails_the_first_control_call(cluster):
    """A partition to the ps fails the session at its first call there
    (GetStatus, while the session is created), naming the cut link."""
    _, worker = cluster
    worker.faults.set([FaultRule("partition", PS)])
    try:
        g, b = _ps_times_two()
        with pytest.raises(nd.errors.UnavailableError,
                           match=f"could not reach task.*{PS}.*link between them "
                                 "is cut"), nd.Session(worker.target, graph=g) as sess:
            sess.run(b)
    finally:
        worker.faults.set([])
    assert worker.faults.calls_failed >= 1
    g, b = _ps_times_two()
    with nd.Session(worker.target, graph=g) as sess:  # healed
        np.testing.assert_array_equal(sess.run(b), np.arange(4.0) * 2)


def test_a_slow_link_delays_each_control_call(cluster):
    _, worker = cluster
    g, b = _ps_times_two()
    seen = []
    stop = worker.tap.subscribe(seen.append, control=True)
    worker.faults.set([FaultRule("slow", PS, 0.05)])
    try:
        before = worker.faults.calls_delayed
        with nd.Session(worker.target, graph=g) as sess:
            sess.run(b)
        delayed = worker.faults.calls_delayed - before
    finally:
        worker.faults.set([])
        stop()
    control = [e for e in seen if e.kind == CONTROL and e.destination == PS]
    # Each control call to the ps waited for the slow link (RunGraph too,
    # counted when it went over the protocol).
    assert len(control) == 5 and delayed >= len(control)


# -- a session's propagated cluster -------------------------------------------------
@pytest.fixture(scope="module")
def two_servers():
    made = [nd.Server.create_local_server() for _ in range(2)]
    yield made
    for s in made:
        s.stop()


def _propagated(master, worker) -> nd.ConfigProto:
    return nd.ConfigProto(cluster_def=_cluster_def(master, worker))


def _worker_to_master():
    with nd.device("/job:worker/task:0"):
        a = nd.constant(np.arange(3.0)) * 2.0
    with nd.device("/job:master/task:0"):
        return a + 1.0


def test_a_propagated_clusters_traffic_shows_on_the_tap(two_servers):
    master, worker = two_servers
    seen = []
    stop = master.tap.subscribe(seen.append, control=True)
    try:
        with nd.Graph().as_default():
            out = _worker_to_master()
            with nd.Session(master.target,
                            config=_propagated(master, worker)) as sess:
                np.testing.assert_array_equal(sess.run(out), np.arange(3.0) * 2 + 1)
    finally:
        stop()
    there = _address(worker)
    recvs = [e for e in seen if e.kind == "RecvTensor"]
    assert [(e.source, e.destination, e.nbytes) for e in recvs] == [
        (there, master.task_name, np.arange(3.0).nbytes)]
    assert {"RunGraph", "RegisterGraph", "CreateWorkerSession", "GetStatus"} <= {
        e.method or e.kind for e in seen if there in (e.source, e.destination)}


def test_a_propagated_clusters_calls_obey_the_fault_rules(two_servers):
    """A rule naming a propagated peer by its address cuts the master's calls
    to it and its tensors from it."""
    master, worker = two_servers
    config = _propagated(master, worker)
    with nd.Graph().as_default():
        out = _worker_to_master()
        with nd.Session(master.target, config=config) as sess:
            master.faults.set([FaultRule("partition", _address(worker))])
            try:
                with pytest.raises(nd.errors.UnavailableError,
                                   match=f"{_address(worker)} is unreachable"):
                    sess.run(out)
            finally:
                master.faults.set([])
            np.testing.assert_array_equal(sess.run(out), np.arange(3.0) * 2 + 1)
