"""``CoordinationAgent``: what every server runs to stay in its cluster.

It registers its task (incarnation, address, pid) with the coordination service,
heartbeats every ``heartbeat_interval_ms``, registers again when the leader
restarted, and forwards what its worker publishes (graph registrations, steps,
variables created, errors) in batches every 50 ms — the leader's own task
too: a step only appends to a bounded queue, and the service (and whoever
watches it) is woken once per batch, not once per step; when the leader
cannot be reached it keeps the newest ``max_pending`` events and reports how
many it dropped (an ``events_dropped`` event). It reaches the service through an
``interfaces.CoordinationClient``: in process on the leader, over a transport
elsewhere.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time

from nbdist import errors
from nbdist.runtime.coordination import service as logic
from nbdist.runtime.interfaces import CoordinationClient
from nbdist.runtime.timeouts import ms_as_seconds

__all__ = ["CoordinationAgent"]

_log = logging.getLogger("nbdist.coordination")

_BATCH_S = 0.05
_MAX_PENDING = 10000
_MAX_BATCH = 2000

_REREGISTER = (errors.AbortedError, errors.FailedPreconditionError,
               errors.NotFoundError)


class CoordinationAgent:
    """Registers a task with its cluster's coordination service, heartbeats,
    and forwards the events the task publishes.

    ``client`` reaches the service; when it is in process (``client.in_process``:
    this task is the leader) the task registers before it serves. Events go
    out in batches, in the order published, from the agent's thread.
    """

    def __init__(self, task: str, incarnation: int, address: str,
                 client: CoordinationClient, *, config: logic.Config,
                 steps_served=lambda: 0, max_pending: int = _MAX_PENDING,
                 batch_s: float = _BATCH_S):
        self.task = task
        self.incarnation = incarnation
        self.address = address
        self._client = client
        self._in_process = client.in_process
        self._interval_s = ms_as_seconds(config.heartbeat_interval_ms)
        self._timeout_s = ms_as_seconds(config.heartbeat_timeout_ms)
        self._steps_served = steps_served
        self._batch_s = batch_s
        self._pending: collections.deque = collections.deque()
        self._max_pending = max_pending
        self._dropped = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._flush_failed = False
        self.registered = False
        self.leader_incarnation = 0
        self.registrations = 0
        self._announced: dict[str, str] = {}
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"nbdist-coordination-agent{task}")

    # -- publishing (the worker's hook) -------------------------------------------
    def publish(self, kind: str, payload: dict | None = None):
        """Hands an observation of this task to the service (``Worker.publish``)."""
        payload = dict(payload or {})
        task = payload.pop("task", None) or self.task
        wall = int(time.time() * 1e6)
        with self._lock:
            was_empty = not self._pending
            self._pending.append((kind, task, payload, wall))
            if len(self._pending) > self._max_pending:
                self._pending.popleft()
                self._dropped += 1
        if was_empty:
            self._wake.set()

    def announce(self, key: str, value: str) -> None:
        """Sets ``key`` in the service after every registration (a leader that
        restarted has lost it), e.g. where a peer path listens."""
        self._announced[key] = value

    # -- lifecycle --------------------------------------------------------------
    def start(self):
        if self._in_process:
            self._register()  # the leader's own task is CONNECTED before it serves
        self._thread.start()

    def stop(self):
        """Stops heartbeating (after a last flush of pending events, when the
        service answers quickly)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(0.5)
        self._client.close()  # cancels a call still in flight
        if self._thread.is_alive():
            self._thread.join(5.0)

    # -- loop ---------------------------------------------------------------------
    def _register(self):
        inc, interval_ms = self._client.register_task(
            self.task, self.incarnation, self.address, os.getpid(),
            timeout_s=max(1.0, self._timeout_s), wait_for_ready=True)
        if interval_ms > 0:
            self._interval_s = ms_as_seconds(interval_ms)
        for key, value in list(self._announced.items()):
            self._client.insert(key, value, allow_overwrite=True)
        self.leader_incarnation = inc
        self.registrations += 1
        self.registered = True

    def _heartbeat(self):
        steps = int(self._steps_served() or 0)
        # This process's CPU time (every thread, user + system): a viewer's CPU %
        # is its change between two heartbeats. Tasks sharing a process (servers
        # in one Python) report the same figure.
        inc = self._client.heartbeat(
            self.task, self.incarnation, steps,
            timeout_s=max(0.2, min(self._timeout_s / 2, 2.0)), retry_connect=False,
            cpu_seconds=time.process_time())
        if inc != self.leader_incarnation:
            self.registered = False  # the leader restarted: register again

    def _run(self):
        next_hb = time.monotonic() + (self._interval_s if self.registered else 0.0)
        while not self._stop.is_set():
            if time.monotonic() >= next_hb:
                self._tick()
                next_hb = time.monotonic() + self._interval_s
            if self.registered and self._pending and not self._flush_failed:
                self._flush()
            timeout = next_hb - time.monotonic()
            if timeout > 0 and self._wake.wait(timeout):
                self._wake.clear()
                if not self._stop.is_set():
                    self._stop.wait(self._batch_s)  # gather a batch
        if self.registered and self._pending:
            self._flush_failed = False
            self._flush()

    def _tick(self):
        """Heartbeat (registering first, or again, when needed)."""
        try:
            if self.registered:
                try:
                    self._heartbeat()
                except _REREGISTER as e:
                    _log.debug("%s: registering again (%s)", self.task, e.message)
                    self.registered = False
            if not self.registered:
                self._register()
            self._flush_failed = False
        except errors.OpError as e:
            _log.debug("%s: coordination service unreachable: %s", self.task,
                       e.message)
        except Exception:  # noqa: BLE001 - the agent must not die
            _log.exception("%s: coordination agent error", self.task)

    def _flush(self):
        with self._lock:
            batch = [self._pending.popleft()
                     for _ in range(min(len(self._pending), _MAX_BATCH))]
            dropped, self._dropped = self._dropped, 0
        if dropped:
            batch.append(("events_dropped", self.task, {"count": dropped},
                          int(time.time() * 1e6)))
        if not batch:
            return
        try:
            self._client.publish_events(batch, timeout_s=max(0.5, self._timeout_s),
                                        retry_connect=False)
        except Exception as e:  # noqa: BLE001 - keep them for the next try
            if dropped:
                batch.pop()
            with self._lock:
                self._pending.extendleft(reversed(batch))
                self._dropped += dropped
                while len(self._pending) > self._max_pending:
                    self._pending.popleft()
                    self._dropped += 1
            self._flush_failed = True  # retried after the next heartbeat
            if isinstance(e, _REREGISTER):
                self.registered = False
            elif not isinstance(e, errors.OpError) and not self._stop.is_set():
                _log.exception("%s: could not publish events", self.task)
