"""What a task publishes for the notebook's views (steps, graphs, errors)
leaves the step's path: the leader's own task too appends to a bounded queue
that the coordination agent flushes in batches, and every event arrives, in
the order published; when the service does not take them, the newest are kept
and the rest are counted in an ``events_dropped`` event."""

from __future__ import annotations

import threading

import pytest

from nbdist.runtime.coordination import (
    CoordinationAgent,
    CoordinationService,
    LocalCoordinationClient,
    resolve_config,
)

W0 = "/job:worker/replica:0/task:0"
FAST = {"heartbeat_interval_ms": 100, "heartbeat_timeout_ms": 1000}


class RecordingClient(LocalCoordinationClient):
    """The leader's in-process client; records who publishes, and can hold
    the first batch at a gate."""

    def __init__(self, service, gate: threading.Event | None = None):
        super().__init__(service, W0)
        self.publishers: list[int] = []
        self.gate = gate
        self.held = threading.Event()

    def publish_events(self, events, timeout_s=10.0, retry_connect=True):
        self.publishers.append(threading.get_ident())
        if self.gate is not None and not self.gate.is_set():
            self.held.set()
            assert self.gate.wait(30.0)
        return super().publish_events(events, timeout_s, retry_connect)


def _collect(service, kinds, count, timeout_s=30.0):
    """The first ``count`` events of ``kinds``, waiting up to ``timeout_s``."""
    got, seq = [], 0
    for _ in range(1000):
        events, seq = service.wait_events_from(seq, timeout_s, kinds=kinds)
        got.extend(events)
        if len(got) >= count or not events:
            break
    return got


@pytest.fixture
def service():
    s = CoordinationService([W0], heartbeat_interval_ms=100,
                            heartbeat_timeout_ms=1000)
    yield s
    s.stop()


def test_the_leaders_events_arrive_all_in_order_from_the_agents_thread(service):
    client = RecordingClient(service)
    agent = CoordinationAgent(W0, 7, "localhost:1", client,
                              config=resolve_config(FAST))
    agent.start()
    try:
        for i in range(500):
            agent.publish("step", {"task": W0, "step_id": i, "duration_ms": 1.0})
        got = _collect(service, {"step"}, 500)
    finally:
        agent.stop()
    assert [e.payload["step_id"] for e in got] == list(range(500))
    assert all(e.task == W0 and e.payload["duration_ms"] == 1.0 for e in got)
    assert "task" not in got[0].payload
    # Published on the agent's thread, never on the caller's (the step's), in
    # fewer calls than events.
    assert threading.get_ident() not in client.publishers
    assert 0 < len(client.publishers) < 500


def test_a_busy_service_keeps_the_newest_events_and_counts_the_rest(service):
    gate = threading.Event()
    client = RecordingClient(service, gate)
    agent = CoordinationAgent(W0, 7, "localhost:1", client,
                              config=resolve_config(FAST), max_pending=10)
    agent.start()
    try:
        agent.publish("step", {"step_id": 0})
        assert client.held.wait(30.0)  # the first batch is stuck at the gate
        for i in range(1, 50):
            agent.publish("step", {"step_id": i})
        assert len(agent._pending) == 10  # bounded while nobody takes them
        gate.set()
        got = _collect(service, {"step", "events_dropped"}, 12)
    finally:
        gate.set()
        agent.stop()
    assert [e.payload.get("step_id") for e in got[:11]] == [0, *range(40, 50)]
    assert (got[11].kind, got[11].payload) == ("events_dropped", {"count": 39})


def test_events_still_pending_at_stop_are_flushed(service):
    client = RecordingClient(service)
    agent = CoordinationAgent(W0, 7, "localhost:1", client,
                              config=resolve_config(FAST), batch_s=5.0)
    agent.start()
    for i in range(3):
        agent.publish("graph_registered", {"graph_handle": f"g{i}"})
    agent.stop()
    got = service.events_since(0, kinds={"graph_registered"})
    assert [e.payload["graph_handle"] for e in got] == ["g0", "g1", "g2"]
