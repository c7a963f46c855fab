"""Keeping and shipping what a task's ``tap.Tap`` sees, bounded in memory.

* ``TapRecord``: a ``TapEvent`` with wall-clock times in microseconds (the
  clock of ``StepStats``), so that records of several processes line up.
* ``TapRecorder``: the last ``maxlen`` records of one or more taps, in a ring
  (what ``TrafficView`` reads for servers of this process).
* ``TapPublisher``: forwards a task's records as ``"tap"`` events through the
  worker's event publishing (the coordination service's event log, which
  ``EventFollower`` reads), in batches, dropping the oldest when the service
  falls behind. A task started with ``NBDIST_TAP_EVENTS=1`` in its
  environment (``LocalCluster`` tasks inherit the notebook's) publishes;
  by default nothing is published and the tap costs nothing.

>>> from nbdist.runtime.tap import Tap, TapEvent
>>> tap = Tap()
>>> rec = TapRecorder(tap, maxlen=2)
>>> for step in (1, 2, 3):
...     tap.emit(TapEvent("RecvTensor", "/job:ps/replica:0/task:0",
...                       "/job:worker/replica:0/task:0", step, 8, 0.0, 0.001))
>>> [r.step for r in rec.records()]  # the ring keeps the last two
[2, 3]
>>> rec.close()
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

__all__ = [
    "ENV_TAP_EVENTS",
    "TAP_CONTROL_KIND",
    "TAP_EVENT_KIND",
    "TAP_SWITCHED_KIND",
    "TapSwitch",
    "TapPublisher",
    "TapRecord",
    "TapRecorder",
    "publish_from_env",
    "records_from_payload",
    "switch_for",
    "tap_events_on",
]

ENV_TAP_EVENTS = "NBDIST_TAP_EVENTS"
TAP_EVENT_KIND = "tap"
TAP_CONTROL_KIND = "tap_control"  # switches a running cluster's TapSwitches
TAP_SWITCHED_KIND = "tap_switched"  # a task's answer: its switch is set
_FIELDS = 7


class TapRecord(NamedTuple):
    kind: str
    source: str
    destination: str
    step: int
    nbytes: int
    start_us: int  # wall clock (time.time()) in microseconds
    end_us: int

    def as_row(self) -> list:
        return list(self)


class _Clock:
    """``time.monotonic`` to wall-clock microseconds (one offset per process:
    steps are short, the drift between the two clocks is not)."""

    def __init__(self):
        self.offset = time.time() - time.monotonic()

    def wall_us(self, monotonic_s: float) -> int:
        return int((monotonic_s + self.offset) * 1e6)

    def record(self, e) -> TapRecord:
        return TapRecord(e.kind, e.source, e.destination, int(e.step), int(e.nbytes),
                         self.wall_us(e.start), self.wall_us(e.end))


class TapRecorder:
    """The last ``maxlen`` events of ``taps`` (one ``Tap`` or several), as
    ``TapRecord``; ``on_record(record)`` (optional) is called for each."""

    def __init__(self, taps, maxlen: int = 4096,
                 on_record: Callable[[TapRecord], None] | None = None):
        if not isinstance(taps, (list, tuple)):
            taps = [taps]
        self._clock = _Clock()
        self._records: collections.deque = collections.deque(maxlen=max(1, maxlen))
        self._lock = threading.Lock()
        self._on_record = on_record
        self.seen = 0
        self._stops = [t.subscribe(self._add) for t in taps]

    def _add(self, event) -> None:
        record = self._clock.record(event)
        with self._lock:
            self._records.append(record)
            self.seen += 1
        if self._on_record is not None:
            self._on_record(record)

    def records(self) -> list[TapRecord]:
        with self._lock:
            return list(self._records)

    def for_step(self, step_id: int) -> list[TapRecord]:
        return [r for r in self.records() if r.step == step_id]

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def close(self) -> None:
        stops, self._stops = self._stops, []
        for stop in stops:
            stop()


class TapPublisher:
    """Publishes the records of ``tap`` as ``"tap"`` events with payload
    ``{"records": [[kind, source, destination, step, nbytes, start_us,
    end_us], ...]}``, at most ``max_batch`` per event, every ``batch_s``;
    at most ``maxlen`` wait (the oldest go first, counted in ``dropped``)."""

    def __init__(self, tap, publish: Callable[[str, dict], None], *,
                 maxlen: int = 4096, batch_s: float = 0.2, max_batch: int = 512):
        self._publish = publish
        self._batch_s = batch_s
        self._max_batch = max_batch
        self._pending: collections.deque = collections.deque()
        self._maxlen = maxlen
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.dropped = 0
        self.published = 0
        self._recorder = TapRecorder(tap, maxlen=1, on_record=self._add)
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="nbdist-tap-publisher")
        self._thread.start()

    def _add(self, record: TapRecord) -> None:
        with self._lock:
            self._pending.append(record.as_row())
            if len(self._pending) > self._maxlen:
                self._pending.popleft()
                self.dropped += 1

    def _run(self):
        while not self._stop.wait(self._batch_s):
            self.flush()
        self.flush()

    def flush(self) -> None:
        while True:
            with self._lock:
                batch = [self._pending.popleft()
                         for _ in range(min(len(self._pending), self._max_batch))]
            if not batch:
                return
            try:
                self._publish(TAP_EVENT_KIND, {"records": batch})
                self.published += len(batch)
            except Exception:  # noqa: BLE001 - observing must never fail the task
                self.dropped += len(batch)
                return

    def close(self) -> None:
        self._recorder.close()
        self._stop.set()
        self._thread.join(5.0)


def tap_events_on(environ=None, default: bool = False) -> bool:
    """Whether ``NBDIST_TAP_EVENTS`` says to publish taps: 1/true/yes on,
    0/false/no off, unset (or anything else) ``default``."""
    environ = os.environ if environ is None else environ
    value = environ.get(ENV_TAP_EVENTS, "").strip().lower()
    if value in ("1", "true", "yes"):
        return True
    if value in ("0", "false", "no"):
        return False
    return default


class TapSwitch:
    """Whether a server publishes its tap's records (a ``TapPublisher`` while
    on), switchable while it runs: ``set(on)`` here, or from anywhere a
    ``"tap_control"`` event (payload ``{"on": true}``, optionally
    ``"tasks": [...]``) on the cluster's coordination service, which
    ``follow`` watches from the oldest event kept (a restarted task takes the
    last switch). Off, the tap costs nothing.

    >>> from nbdist.runtime.tap import Tap, TapEvent
    >>> published = []
    >>> switch = TapSwitch(Tap(), lambda kind, payload: published.append(payload))
    >>> switch.on
    False
    >>> switch.set(True)
    >>> switch.on, switch.set(False), switch.on
    (True, None, False)
    """

    def __init__(self, tap, publish: Callable[[str, dict], None], on: bool = False,
                 task: str = ""):
        self._tap, self._publish, self.task = tap, publish, task
        self._publisher: TapPublisher | None = None
        self._lock = threading.Lock()
        self._watch = None
        self.set(on)

    @property
    def on(self) -> bool:
        return self._publisher is not None

    def set(self, on: bool) -> None:
        with self._lock:
            if on and self._publisher is None:
                self._publisher = TapPublisher(self._tap, self._publish)
            elif not on and self._publisher is not None:
                self._publisher.close()
                self._publisher = None

    def follow(self, client) -> None:
        """Applies the ``"tap_control"`` events of ``client`` (a coordination
        client; this switch closes it), in a thread, until ``close``."""
        self._watch = client.watch(0, kinds=[TAP_CONTROL_KIND], owns_client=True)
        threading.Thread(target=self._follow, args=(self._watch,), daemon=True,
                         name="nbdist-tap-switch").start()

    def _follow(self, watch) -> None:
        try:
            for event in watch:
                tasks = event.payload.get("tasks") or ()
                if not tasks or self.task in tasks:
                    on = bool(event.payload.get("on"))
                    self.set(on)
                    # The answer the switching notebook waits for.
                    self._publish(TAP_SWITCHED_KIND, {
                        "on": on, "id": str(event.payload.get("id", ""))})
        except Exception:  # noqa: BLE001 - observing must never fail the task
            return

    def close(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.stop()
        self.set(False)


def switch_for(server, environ=None) -> TapSwitch | None:
    """``server``'s ``TapSwitch``, on when ``NBDIST_TAP_EVENTS`` says so and
    following the cluster's ``"tap_control"`` events (None when the server
    publishes no events)."""
    worker = getattr(getattr(server, "master", None), "local_worker", None)
    publish = getattr(worker, "publish", None)
    if publish is None:
        return None
    switch = TapSwitch(server.tap, publish, tap_events_on(environ),
                       task=server.task_name)
    from nbdist.runtime import transports
    from nbdist.runtime.coordination import LocalCoordinationClient

    service = getattr(server, "coordination_service", None)
    try:
        client = (LocalCoordinationClient(service) if service is not None
                  else transports.connect_coordination(server.coordination_target))
    except Exception:  # noqa: BLE001 - no service to follow: the env's switch only
        return switch
    switch.follow(client)
    return switch


def publish_from_env(server, environ=None) -> TapPublisher | None:
    """A ``TapPublisher`` of ``server``'s tap through its worker's event
    publishing when ``NBDIST_TAP_EVENTS`` is set to 1 (else None)."""
    if not tap_events_on(environ):
        return None
    worker = getattr(getattr(server, "master", None), "local_worker", None)
    publish = getattr(worker, "publish", None)
    if publish is None:
        return None
    return TapPublisher(server.tap, publish)


def records_from_payload(payload) -> list[TapRecord]:
    """The records of a ``"tap"`` event's payload; malformed rows are skipped
    (it came over the wire: only strings and numbers are taken)."""
    rows = payload.get("records") if isinstance(payload, dict) else None
    out = []
    for row in rows if isinstance(rows, list) else ():
        if not isinstance(row, list) or len(row) != _FIELDS:
            continue
        kind, src, dst, *numbers = row
        if not all(isinstance(s, str) for s in (kind, src, dst)):
            continue
        if not all(isinstance(n, (int, float)) and not isinstance(n, bool)
                   for n in numbers):
            continue
        out.append(TapRecord(kind, src, dst, *(int(n) for n in numbers)))
    return out
