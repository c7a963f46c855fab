"""The coordination service's state machine, driven directly (no RPC)."""

from __future__ import annotations

import threading
import time

import pytest

from nbdist import errors
from nbdist.runtime.cluster_spec import ClusterSpec
from nbdist.runtime.coordination import (CONNECTED, DISCONNECTED, ERROR,
                                         CoordinationService, leader_task)

W0, W1, PS = ("/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1",
              "/job:ps/replica:0/task:0")


@pytest.fixture
def service():
    s = CoordinationService([W0, W1, PS], heartbeat_interval_ms=50,
                            heartbeat_timeout_ms=300, max_events=100)
    yield s
    s.stop()


def _states(s):
    return {r.task: r.state for r in s.task_states()}


def test_register_heartbeat_timeout_and_return(service):
    for t in (W0, W1, PS):
        service.register_task(t, incarnation=1, address="a", pid=1)
    assert set(_states(service).values()) == {CONNECTED}
    end = time.monotonic() + 3
    while _states(service)[W1] != DISCONNECTED and time.monotonic() < end:
        service.heartbeat(W0, 1)
        service.heartbeat(PS, 1)
        time.sleep(0.05)
    assert _states(service)[W1] == DISCONNECTED
    assert _states(service)[W0] == CONNECTED
    service.heartbeat(W1, 1)
    assert _states(service)[W1] == CONNECTED
    with pytest.raises(errors.AbortedError, match="restarted"):
        service.heartbeat(W1, 2)
    service.register_task(W1, incarnation=2)
    kinds = [(e.kind, e.task, e.payload.get("state")) for e in service.events_since(0)]
    assert ("task_state", W1, DISCONNECTED) in kinds
    assert kinds[-1] == ("task_state", W1, CONNECTED)
    assert service.events_since(0)[-1].payload["restarted"] is True


def test_report_error(service):
    service.register_task(PS, 1)
    service.report_error(PS, 14, "disk on fire")
    assert _states(service)[PS] == ERROR
    assert any(e.kind == "error" and "fire" in e.payload["message"]
               for e in service.events_since(0))


def test_barrier_passes_in_rounds_and_times_out_naming_the_missing(service):
    rounds = []

    def arrive(task):
        rounds.append(service.barrier("sync", 5, [W0, W1], task))

    ts = [threading.Thread(target=arrive, args=(t,)) for t in (W0, W1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert rounds == [1, 1]
    with pytest.raises(errors.DeadlineExceededError,
                       match=r"Barrier 'sync' timed out.*task\(s\) "
                             r"/job:worker/replica:0/task:1 never arrived"):
        service.barrier("sync", 0.2, [W0, W1], W0)
    kinds = [e.kind for e in service.events_since(0)]
    assert kinds.count("barrier_arrival") == 3
    assert kinds.count("barrier_passed") == 1 and kinds[-1] == "barrier_timeout"
    with pytest.raises(errors.InvalidArgumentError, match="not a participant"):
        service.barrier("sync", 1, [W0, W1], PS)


def test_key_value_blocking_get(service):
    got = {}
    t = threading.Thread(target=lambda: got.setdefault(
        "v", service.get("addr", 5)))
    t.start()
    time.sleep(0.1)
    service.insert("addr", b"127.0.0.1:1")
    t.join(5)
    assert got["v"] == b"127.0.0.1:1"
    with pytest.raises(errors.AlreadyExistsError):
        service.insert("addr", b"x")
    service.insert("dir/a", b"1")
    service.insert("dir/b", b"2")
    service.delete("dir/")
    assert service.try_get("dir/a") is None
    with pytest.raises(errors.DeadlineExceededError, match="nope"):
        service.get("nope", 0.1)


def test_events_are_numbered_without_gaps_and_bounded(service):
    for i in range(250):
        service.publish("step", W0, {"step_id": i})
    evs = service.events_since(0, limit=1000)
    assert len(evs) == 100
    seqs = [e.seq for e in evs]
    assert seqs == list(range(seqs[0], seqs[0] + 100))
    assert evs[-1].payload == {"step_id": 249}
    assert service.wait_events(service.last_seq + 1, 0.05) == []
    assert [e.kind for e in service.events_since(0, kinds={"step"})][:1] == ["step"]


def test_leader_task():
    assert leader_task(ClusterSpec({"ps": ["a:1"], "worker": ["b:1", "c:1"]})) == W0
    assert leader_task(ClusterSpec({"ps": ["a:1"], "chief": ["b:1"]})) == \
        "/job:chief/replica:0/task:0"
    assert leader_task(ClusterSpec({"ps": ["a:1"]})) == PS
