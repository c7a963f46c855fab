"""The coordination service over gRPC: hosted by the leader task of every
cluster, followed by clients, fed by every server's agent (heartbeats and
published events). In-process servers for the RPC surface; real processes
(LocalCluster) for deaths, restarts and SIGSTOP."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from helpers import local_cluster, wait_for

import nbdist as nd
from nbdist import errors
from nbdist.distribute.coordination import watch_events
from nbdist.runtime.coordination import CONNECTED, DISCONNECTED, leader_task
from nbdist.runtime.coordination import target_of as coordination_target
from nbdist.runtime.grpc.coordination_client import (
    GrpcCoordinationClient as CoordinationClient,
)

W0 = "/job:worker/replica:0/task:0"
W1 = "/job:worker/replica:0/task:1"
PS0 = "/job:ps/replica:0/task:0"
CHIEF = "/job:chief/replica:0/task:0"
FAST = {"heartbeat_interval_ms": 100, "heartbeat_timeout_ms": 1000}
# Slack over a configured timeout for a loaded 2-core machine (CI, or
# scripts/run_under_load.py), where heartbeats and checks run seconds late.
SLACK_S = 10.0


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()
    yield


@pytest.fixture
def local():
    s = nd.Server.create_local_server()
    c = CoordinationClient(s.coordination_target)
    yield s, c
    c.close()
    s.stop()


def _states(client) -> dict:
    return {t.task: t.state for t in client.task_states()}


# -- one in-process server ------------------------------------------------------------
def test_local_server_hosts_its_own_service(local):
    server, client = local
    assert server.coordination_target == server.target
    assert server.coordination_service is not None
    (t,) = client.task_states()
    assert (t.task, t.state, t.pid) == (server.task_name, CONNECTED, os.getpid())
    assert t.incarnation == server._worker.incarnation
    assert t.address == server.target.removeprefix("grpc://")


def test_key_value_store(local):
    _, client = local
    client.insert("a/x", b"1")
    client.insert("a/y", "2")
    with pytest.raises(errors.AlreadyExistsError, match="a/x"):
        client.insert("a/x", b"3")
    client.insert("a/x", b"3", allow_overwrite=True)
    assert client.get("a/x") == b"3"
    assert client.try_get("missing") is None
    threading.Timer(0.2, lambda: client.insert("late", b"v")).start()
    t0 = time.monotonic()
    assert client.get("late", timeout_s=5) == b"v"  # blocks until it is set
    assert time.monotonic() - t0 >= 0.15
    with pytest.raises(errors.DeadlineExceededError, match="never"):
        client.get("never", timeout_s=0.2)
    client.delete("a/")
    assert client.try_get("a/x") is None and client.try_get("a/y") is None


def test_barrier_timeout_names_barrier_and_missing_tasks():
    cluster = local_cluster(worker=3)
    servers = []
    try:
        for i in range(3):
            servers.append(nd.Server(cluster, job_name="worker", task_index=i))
        # Any task's target reaches the service (redirected to worker 0).
        client = CoordinationClient(servers[2].target)
        participants = [W0, W1, "/job:worker/replica:0/task:2"]
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError) as info:
            client.barrier("init_done", 0.5, participants, source_task=W1)
        msg = str(info.value)
        assert "'init_done'" in msg
        assert W0 in msg and "/job:worker/replica:0/task:2" in msg
        assert W1 not in msg.split("task(s)")[1]
        assert time.monotonic() - t0 < 0.5 + SLACK_S  # its timeout, not a hang
        assert client.address == cluster["worker"][0]  # followed the redirect
        client.close()
    finally:
        for s in servers:
            s.stop()


def test_barrier_passes_rounds_and_cancel_releases_every_waiter():
    cluster = local_cluster(worker=2)
    s0 = nd.Server(cluster, job_name="worker", task_index=0)
    s1 = nd.Server(cluster, job_name="worker", task_index=1)
    client = CoordinationClient(s0.coordination_target)
    try:
        rounds = {}

        def arrive(task, key):
            rounds[key] = client.barrier("b", 10, [W0, W1], source_task=task)

        for r in (1, 2):
            t = threading.Thread(target=arrive, args=(W0, r))
            t.start()
            client.barrier("b", 10, [W0, W1], source_task=W1)
            t.join(10)
            assert rounds[r] == r
        # Cancelling fails every task waiting at the round in progress.
        outcome = []

        def wait(task):
            try:
                client.barrier("c", 30, [W0, W1, PS0], source_task=task)
            except errors.CancelledError as e:
                outcome.append(str(e))

        threads = [threading.Thread(target=wait, args=(t,)) for t in (W0, W1)]
        for t in threads:
            t.start()
        wait_for(lambda: len(s0.coordination_service.barriers()
                             .get("c", ([], []))[1]) == 2, 10.0, "two arrivals")
        client.cancel_barrier("c", source_task=PS0)
        for t in threads:
            t.join(10)
        assert len(outcome) == 2 and all("cancelled by " + PS0 in m for m in outcome)
        # A client-side stop leaves the barrier too.
        stop = threading.Event()
        threading.Timer(0.3, stop.set).start()
        with pytest.raises(errors.CancelledError):
            client.barrier("d", 30, [W0, W1], source_task=W0, should_cancel=stop.is_set)
        wait_for(lambda: s0.coordination_service.barriers()["d"][1] == [],
                 10.0, "the cancelled arrival to be withdrawn")
    finally:
        client.close()
        s1.stop()
        s0.stop()


def test_events_of_graphs_steps_variables_and_errors(local):
    server, client = local
    with client.watch(from_seq=0) as watch:
        first = watch.next(timeout=5)
        assert (first.kind, first.task, first.payload["state"]) == (
            "task_state", server.task_name, CONNECTED)
        v = nd.Variable(nd.zeros([3, 4]), name="weights")
        never = nd.Variable(1.0, name="never_initialized")
        with nd.Session(server.target) as sess:
            sess.run(v.initializer)
            sess.run(v.assign_add(nd.ones([3, 4])))
            with pytest.raises(errors.FailedPreconditionError):
                sess.run(never + 1.0)
        seen = []
        watch.wait_for(lambda e: seen.append(e) or e.kind == "error", timeout=10)
    kinds = [e.kind for e in seen]
    assert kinds.index("graph_registered") < kinds.index("variable_created") < (
        kinds.index("error"))
    reg = next(e for e in seen if e.kind == "graph_registered")
    devices = {name: dev for name, _, dev in reg.payload["nodes"]}
    assert devices["weights"] == server.task_name + "/device:CPU:0"
    created = next(e for e in seen if e.kind == "variable_created")
    assert created.payload == {"name": "weights", "shape": [3, 4], "dtype": "float32",
                               "bytes": 48,
                               "device": server.task_name + "/device:CPU:0"}
    assert len([e for e in seen if e.kind == "variable_created"]) == 1
    steps = [e for e in seen if e.kind == "step"]
    assert len(steps) >= 2 and all(e.payload["duration_ms"] >= 0 for e in steps)
    err = seen[-1]
    assert err.payload["code"] == errors.FAILED_PRECONDITION
    assert "never_initialized" in err.payload["message"]
    seqs = [e.seq for e in [first] + seen]
    assert seqs == list(range(1, len(seqs) + 1))  # gap-free, in order
    # A filtered follower from a later sequence number.
    with watch_events(server, from_seq=3, kinds=["step"]) as w:
        e = w.next(timeout=5)
        assert e.kind == "step" and e.seq >= 3


def test_published_events_from_other_tasks_and_malformed_input():
    cluster = local_cluster(ps=1, worker=1)
    ps = nd.Server(cluster, job_name="ps", task_index=0)
    w0 = nd.Server(cluster, job_name="worker", task_index=0)
    try:
        assert leader_task(w0.cluster_spec) == W0
        assert ps.coordination_target == w0.target
        client = CoordinationClient(ps.target)  # redirected
        wait_for(lambda: _states(client) == {PS0: CONNECTED, W0: CONNECTED},
                 10.0, "both tasks connected")
        watch = client.watch(kinds=["variable_created"])
        with nd.device("/job:ps/task:0"):
            v = nd.Variable([1.0, 2.0], name="on_ps")
        with nd.Session(w0.target) as sess:
            sess.run(v.initializer)
        e = watch.wait_for(lambda e: True, timeout=5)
        assert (e.task, e.payload["name"], e.payload["device"]) == (
            PS0, "on_ps", PS0 + "/device:CPU:0")
        watch.stop()
        assert list(watch) == []
        with watch_events(ps.target) as w:  # the stream is redirected too
            assert w.next(timeout=5).kind == "task_state"
        from nbdist.proto import coordination_pb2 as pb

        with pytest.raises(errors.InvalidArgumentError, match="not JSON"):
            client.publish_events([pb.Event(kind="x", task=W0, json="{nope")])
        with pytest.raises(errors.InvalidArgumentError, match="not in this cluster"):
            client.heartbeat("/job:nobody/replica:0/task:0", 1)
        assert client.task_states([W0])[0].state == CONNECTED  # still serving
        client.close()
    finally:
        ps.stop()
        w0.stop()


def test_agent_keeps_newest_events_while_the_leader_is_away():
    from nbdist.runtime.coordination import resolve_config
    from nbdist.runtime.coordination.agent import CoordinationAgent

    cluster = local_cluster(worker=2)
    agent = CoordinationAgent(W1, 77, cluster["worker"][1],
                              CoordinationClient(cluster["worker"][0], tls=False,
                                                 task=W1),
                              config=resolve_config(FAST), max_pending=5)
    agent.start()
    leader = None
    try:
        for i in range(10):
            agent.publish("custom", {"i": i})
        time.sleep(0.3)  # the leader is not there yet: nothing is lost but the oldest
        assert not agent.registered
        leader = nd.Server(cluster, job_name="worker", task_index=0,
                           coordination_config=FAST)
        with watch_events(leader, kinds=["custom", "events_dropped"]) as w:
            got = [w.next(timeout=10) for _ in range(6)]
        assert [e.payload.get("i") for e in got[:5]] == [5, 6, 7, 8, 9]
        assert (got[5].kind, got[5].payload) == ("events_dropped", {"count": 5})
        assert all(e.task == W1 for e in got)
        with CoordinationClient(leader.target) as c:
            (w1,) = c.task_states([W1])
        assert (w1.state, w1.incarnation) == (CONNECTED, 77)
    finally:
        agent.stop()
        if leader is not None:
            leader.stop()


def test_token_applies_to_the_coordination_service():
    s = nd.Server.create_local_server(token="s3cret")
    try:
        with CoordinationClient(s.coordination_target, token="wrong") as bad, (
                pytest.raises(errors.UnauthenticatedError)):
            bad.task_states()
        with CoordinationClient(s.coordination_target, token="s3cret") as good:
            assert [t.state for t in good.task_states()] == [CONNECTED]
    finally:
        s.stop()


def test_config_and_stop_ends_watchers():
    s = nd.Server.create_local_server(coordination_config={"heartbeat_timeout_ms": 700,
                                                           "max_events": 5})
    assert s.coordination_service.heartbeat_timeout_ms == 700
    assert s.coordination_service.heartbeat_interval_ms == 250
    with pytest.raises(ValueError, match="heartbeat_interval_ms"):
        nd.Server.create_local_server(coordination_config={"heartbeat_interval_ms": -1})
    for i in range(10):
        s.coordination_service.publish("custom", "", {"i": i})
    # Started after the events: a watch already streaming would also get them
    # live, from whichever it caught first (its call can arrive mid-publish).
    w = watch_events(s.target)
    got = []
    wait_for(lambda: got.append(w.next(0.1)) or len([g for g in got if g]) >= 5,
             10.0, "the kept events")
    assert [g.payload.get("i") for g in got if g][-1] == 9
    assert min(g.seq for g in got if g) >= 7  # only the last 5 are kept
    t0 = time.monotonic()
    s.stop()
    assert w.next(timeout=5) is None  # the stream ended with the server
    assert time.monotonic() - t0 < 5
    w.stop()


# -- real processes -------------------------------------------------------------------
def _teardown(cluster, stopped=()):
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    cluster.shutdown()


@pytest.mark.slow
def test_watch_sees_starts_graphs_steps_barriers_death_and_return():
    from nbdist.cluster.local_cluster import LocalCluster
    from nbdist.distribute.strategies.distribute_coordinator import (
        run_distribute_coordinator,
    )
    from nbdist.distribute.strategies.distribute_coordinator_context import (
        get_current_worker_context,
    )

    cluster = LocalCluster(ps=1, workers=2, chief=1, progress=False,
                           coordination_config=FAST)
    try:
        assert cluster.coordination_target == cluster.target("chief", 0)
        watch = watch_events(cluster)
        tasks = {CHIEF, W0, W1, PS0}
        started = set()
        watch.wait_for(lambda e: e.kind == "task_state"
                       and e.payload["state"] == CONNECTED
                       and started.add(e.task) is None and started == tasks, 10)

        with nd.device("/job:ps/task:0"):
            v = nd.Variable(1.0, name="counter")
        with nd.device("/job:worker/task:1"):
            y = v * 2.0
        with nd.Session(cluster.target("worker", 0)) as sess:
            sess.run(v.initializer)
            for _ in range(3):
                sess.run(y)
        reg = watch.wait_for(lambda e: e.kind == "graph_registered"
                             and e.task == W1, 10)
        devices = {dev for _, _, dev in reg.payload["nodes"]}
        assert devices == {W1 + "/device:CPU:0"}
        assert "Mul" in [op for _, op, _ in reg.payload["nodes"]]
        steps = []
        watch.wait_for(lambda e: e.kind == "step" and e.task == W1
                       and steps.append(e) is None and len(steps) == 3, 10)

        arrivals = []

        def worker_fn(strategy):
            get_current_worker_context().wait_for_other_workers()

        run_distribute_coordinator(worker_fn, None, cluster_spec=cluster.cluster_spec)
        watch.wait_for(lambda e: e.kind == "barrier_arrival"
                       and arrivals.append(e.task) is None and len(arrivals) == 3, 10)
        assert sorted(arrivals) == sorted([CHIEF, W0, W1])
        passed = watch.wait_for(lambda e: e.kind == "barrier_passed", 10)
        assert sorted(passed.payload["participants"]) == sorted([CHIEF, W0, W1])

        old_pid = next(t.pid for t in cluster.tasks if (t.job, t.index) == ("worker", 1))
        killed_at = time.monotonic()
        cluster.kill("worker", 1)
        down = watch.wait_for(lambda e: e.kind == "task_state" and e.task == W1, 30)
        assert down.payload["state"] == DISCONNECTED
        took = time.monotonic() - killed_at
        assert took < FAST["heartbeat_timeout_ms"] / 1e3 + SLACK_S, took
        cluster.restart("worker", 1)
        up = watch.wait_for(lambda e: e.kind == "task_state" and e.task == W1, 30)
        assert up.payload["state"] == CONNECTED and up.payload["restarted"] is True
        assert up.payload["pid"] != old_pid
        seqs = [down.seq, up.seq]
        assert seqs == sorted(seqs)
        watch.stop()
    finally:
        _teardown(cluster)


@pytest.mark.slow
def test_sigstop_is_detected_by_heartbeat_and_sigcont_brings_it_back():
    from nbdist.cluster.local_cluster import LocalCluster

    cluster = LocalCluster(ps=0, workers=2, progress=False, coordination_config=FAST)
    stopped = []
    try:
        client = CoordinationClient(coordination_target(cluster))
        wait_for(lambda: _states(client) == {W0: CONNECTED, W1: CONNECTED},
                 10.0, "both workers connected")
        watch = client.watch(kinds=["task_state"])
        pid = next(t.pid for t in cluster.tasks if (t.job, t.index) == ("worker", 1))
        os.kill(pid, signal.SIGSTOP)
        stopped.append(pid)
        t0 = time.monotonic()
        watch.wait_for(lambda e: e.task == W1 and e.payload["state"] == DISCONNECTED,
                       30)
        took = time.monotonic() - t0
        # Only heartbeats see a stopped task: any finite bound proves they did.
        assert took < FAST["heartbeat_timeout_ms"] / 1e3 + SLACK_S, took
        assert _states(client)[W0] == CONNECTED
        os.kill(pid, signal.SIGCONT)
        stopped.remove(pid)
        e = watch.wait_for(lambda e: e.task == W1, 30)
        assert e.payload["state"] == CONNECTED and e.payload["restarted"] is False
        assert _states(client)[W1] == CONNECTED
        watch.stop()

        # The leader restarts: every task registers again with the new service.
        cluster.restart("worker", 0)
        wait_for(lambda: _safe_states(client) == {W0: CONNECTED, W1: CONNECTED},
                 10, "re-registration with the restarted leader")
        client.close()
    finally:
        _teardown(cluster, stopped)


def _safe_states(client):
    try:
        return _states(client)
    except errors.OpError:
        return None
