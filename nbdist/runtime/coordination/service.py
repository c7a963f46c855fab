"""The coordination service's logic: task liveness, barriers, key-value store
and the event log. Pure Python (no RPC); a transport's codec serves it
(``runtime/grpc/coordination_service.py``), and it validates what every
codec passes on.

Transitions of a task:
    (unknown) --register--> CONNECTED
    CONNECTED --silent > heartbeat_timeout--> DISCONNECTED
    DISCONNECTED --heartbeat/register--> CONNECTED
    any --register with a new incarnation--> CONNECTED (a restart: event says so)
    any --report_error--> ERROR --register--> CONNECTED
Every transition, barrier arrival/pass/timeout/cancellation and published
observation is an event with a gap-free sequence number, kept in a bounded log.

``Config``/``resolve_config`` hold the heartbeat interval and timeout and the
size of the log: explicit values, else ``NBDIST_HEARTBEAT_INTERVAL_MS``,
``NBDIST_HEARTBEAT_TIMEOUT_MS`` and ``NBDIST_COORDINATION_MAX_EVENTS``, else
250 ms, 2 s and 20,000 events.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from dataclasses import dataclass, field

from nbdist import errors
from nbdist.executor.limits import over_limit
from nbdist.runtime import env
from nbdist.runtime.timeouts import ms_as_seconds, seconds_as_ms

CONNECTED = "CONNECTED"
DISCONNECTED = "DISCONNECTED"
ERROR = "ERROR"
UNKNOWN = "UNSPECIFIED"

DEFAULT_HEARTBEAT_INTERVAL_MS = 250
DEFAULT_HEARTBEAT_TIMEOUT_MS = 2000
DEFAULT_MAX_EVENTS = 20000


@dataclass(frozen=True)
class Config:
    """How tasks heartbeat and how many events the service keeps."""

    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS
    heartbeat_timeout_ms: int = DEFAULT_HEARTBEAT_TIMEOUT_MS
    max_events: int = DEFAULT_MAX_EVENTS

    def __post_init__(self):
        for name in ("heartbeat_interval_ms", "heartbeat_timeout_ms", "max_events"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Coordination config: {name} must be a positive "
                                 f"int, got {value!r}")

    def as_dict(self) -> dict:
        return {"heartbeat_interval_ms": self.heartbeat_interval_ms,
                "heartbeat_timeout_ms": self.heartbeat_timeout_ms,
                "max_events": self.max_events}


_CONFIG_FIELDS = ("heartbeat_interval_ms", "heartbeat_timeout_ms", "max_events")


def resolve_config(value=None) -> Config:
    """A ``Config`` from ``value`` (a ``Config``, a ``CoordinationConfig`` proto,
    a dict with some of its fields, or None); fields it leaves unset (or 0) come
    from the ``NBDIST_*`` variables, then the defaults.

    >>> resolve_config({"heartbeat_timeout_ms": 500}).heartbeat_timeout_ms
    500
    """
    if isinstance(value, Config):
        return value
    given: dict = {}
    if value is None:
        pass
    elif isinstance(value, dict):
        unknown = set(value) - set(_CONFIG_FIELDS)
        if unknown:
            raise ValueError(f"Unknown coordination config field(s) {sorted(unknown)}; "
                             f"known: {list(_CONFIG_FIELDS)}")
        given = {k: v for k, v in value.items() if v}
    elif all(hasattr(value, f) for f in _CONFIG_FIELDS):  # CoordinationConfig
        given = {f: int(getattr(value, f)) for f in _CONFIG_FIELDS
                 if getattr(value, f)}
    else:
        raise TypeError("coordination_config must be a dict, a CoordinationConfig or "
                        f"None, got {type(value).__name__}")
    from_env = {"heartbeat_interval_ms": env.heartbeat_interval_ms(),
                "heartbeat_timeout_ms": env.heartbeat_timeout_ms(),
                "max_events": env.coordination_max_events()}
    out = {}
    for f in _CONFIG_FIELDS:
        v = given.get(f, from_env[f])
        if v is not None:
            out[f] = v
    return Config(**out)


@dataclass
class TaskRecord:
    task: str
    state: str = UNKNOWN
    incarnation: int = 0
    address: str = ""
    pid: int = 0
    error_message: str = ""
    last_heartbeat: float = 0.0  # monotonic
    last_heartbeat_wall: float = 0.0
    steps_served: int = 0
    # The task's process CPU seconds at its last heartbeat; None: not told
    # (a peer older than the field, or no heartbeat since it registered).
    cpu_seconds: float | None = None


@dataclass
class Event:
    seq: int
    wall_time_us: int
    kind: str
    task: str
    payload: dict = field(default_factory=dict)

    @property
    def json(self) -> str:
        return json.dumps(self.payload, sort_keys=True)


@dataclass
class _Barrier:
    participants: tuple
    arrived: set = field(default_factory=set)
    round: int = 0  # rounds passed so far
    generation: int = 0  # bumped when the round in progress is cancelled
    cancel_reason: str = ""


class CoordinationService:
    """Liveness, barriers, key-value and events for the tasks of one cluster."""

    def __init__(self, tasks, heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
                 heartbeat_timeout_ms: int = DEFAULT_HEARTBEAT_TIMEOUT_MS,
                 max_events: int = DEFAULT_MAX_EVENTS, incarnation: int = 0,
                 max_key_value_bytes: int | None = None):
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.max_events = max_events
        self.incarnation = incarnation
        self._lock = threading.Condition()
        self._tasks = {t: TaskRecord(t) for t in tasks}
        self._events: collections.deque[Event] = collections.deque(maxlen=max_events)
        self._seq = 0
        self._barriers: dict[str, _Barrier] = {}
        self._kv: dict[str, bytes] = {}
        self._kv_bytes = 0  # keys plus values, capped by max_key_value_bytes
        self.max_key_value_bytes = max_key_value_bytes
        self._stopped = threading.Event()
        self._checker = threading.Thread(target=self._check_heartbeats, daemon=True,
                                         name="nbdist-coordination-check")
        self._checker.start()

    # -- events ---------------------------------------------------------------------
    def _emit(self, kind: str, task: str, payload: dict) -> int:
        # Called with self._lock held.
        self._seq += 1
        self._events.append(Event(self._seq, int(time.time() * 1e6), kind, task,
                                  payload))
        self._lock.notify_all()
        return self._seq

    def _emit_at(self, kind, task, payload, wall_time_us):
        self._seq += 1
        self._events.append(Event(self._seq, wall_time_us, kind, task, payload))
        return self._seq

    def publish(self, kind: str, task: str, payload: dict | None = None,
                wall_time_us: int | None = None) -> int:
        """Adds an observation; ``wall_time_us``: when it happened (default now)."""
        with self._lock:
            if wall_time_us is None:
                return self._emit(kind, task, dict(payload or {}))
            seq = self._emit_at(kind, task, dict(payload or {}), int(wall_time_us))
            self._lock.notify_all()
            return seq

    def publish_many(self, events) -> int:
        """Adds ``(kind, task, payload, wall_time_us or None)`` tuples in order,
        under one lock; returns the last sequence number."""
        with self._lock:
            now = int(time.time() * 1e6)
            for kind, task, payload, wall in events:
                self._emit_at(kind, task, dict(payload or {}), wall or now)
            self._lock.notify_all()
            return self._seq

    def events_since(self, seq: int, kinds=None, limit: int = 1000) -> list[Event]:
        with self._lock:
            return self._select(seq, kinds, limit)

    def _select(self, seq, kinds, limit):
        if not self._events or self._events[-1].seq < seq:
            return []
        first = self._events[0].seq
        start = max(0, seq - first)
        out = []
        for i in range(start, len(self._events)):
            e = self._events[i]
            if not kinds or e.kind in kinds:
                out.append(e)
                if len(out) >= limit:
                    break
        return out

    def wait_events(self, seq: int, timeout_s: float, kinds=None,
                    limit: int = 1000) -> list[Event]:
        """Events with sequence >= ``seq``, waiting up to ``timeout_s`` for one."""
        end = time.monotonic() + timeout_s
        with self._lock:
            while True:
                out = self._select(seq, kinds, limit)
                if out or self._stopped.is_set():
                    return out
                remaining = end - time.monotonic()
                if remaining <= 0:
                    return []
                self._lock.wait(remaining)  # publish() and stop() notify

    def wait_events_from(self, seq: int, timeout_s: float, kinds=None,
                         limit: int = 1000) -> tuple[list[Event], int]:
        """As ``wait_events``, also returning the sequence number to ask for
        next (past events of other kinds, so a filtered follower never rescans
        them). Returns at once when the service is stopped."""
        end = time.monotonic() + timeout_s
        with self._lock:
            while True:
                if self._events and self._events[-1].seq >= seq:
                    first = self._events[0].seq
                    out, nxt = [], max(seq, first)
                    for i in range(nxt - first, len(self._events)):
                        e = self._events[i]
                        nxt = e.seq + 1
                        if not kinds or e.kind in kinds:
                            out.append(e)
                            if len(out) >= limit:
                                break
                    if out:
                        return out, nxt
                    seq = nxt
                if self._stopped.is_set():
                    return [], seq
                remaining = end - time.monotonic()
                if remaining <= 0:
                    return [], seq
                self._lock.wait(remaining)  # publish() and stop() notify

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    @property
    def last_seq(self) -> int:
        with self._lock:
            return self._seq

    # -- tasks ------------------------------------------------------------------------
    def _record(self, task: str) -> TaskRecord:
        rec = self._tasks.get(task)
        if rec is None:
            raise errors.InvalidArgumentError(
                None, None, f"Task {task} is not in this cluster (tasks: "
                f"{', '.join(self._tasks)})")
        return rec

    def _set_state(self, rec: TaskRecord, state: str, **extra):
        previous = rec.state
        rec.state = state
        self._emit("task_state", rec.task, {
            "state": state, "previous": previous, "incarnation": f"{rec.incarnation:x}",
            "address": rec.address, "pid": rec.pid, **extra})

    def register_task(self, task: str, incarnation: int, address: str = "",
                      pid: int = 0) -> int:
        with self._lock:
            rec = self._record(task)
            restarted = rec.incarnation not in (0, incarnation)
            rec.incarnation, rec.address, rec.pid = incarnation, address, pid
            rec.error_message = ""
            rec.steps_served = 0 if restarted else rec.steps_served
            rec.cpu_seconds = None if restarted else rec.cpu_seconds
            self._touch(rec)
            if rec.state != CONNECTED or restarted:
                self._set_state(rec, CONNECTED, restarted=restarted)
            return self.incarnation

    def _touch(self, rec):
        rec.last_heartbeat = time.monotonic()
        rec.last_heartbeat_wall = time.time()

    def heartbeat(self, task: str, incarnation: int, steps_served: int = 0,
                  cpu_seconds: float | None = None) -> int:
        """A task is alive; ``steps_served`` and ``cpu_seconds`` (its process's
        CPU time, None when it does not say) are kept for ``task_states``."""
        with self._lock:
            rec = self._record(task)
            if rec.incarnation == 0:
                raise errors.FailedPreconditionError(
                    None, None, f"Task {task} sent a heartbeat before registering")
            if incarnation != rec.incarnation:
                raise errors.AbortedError(
                    None, None, f"Task {task} heartbeats with incarnation "
                    f"{incarnation:x} but registered {rec.incarnation:x}: it "
                    "restarted and must register again")
            self._touch(rec)
            rec.steps_served = steps_served
            rec.cpu_seconds = cpu_seconds
            if rec.state == DISCONNECTED:
                self._set_state(rec, CONNECTED, restarted=False)
            return self.incarnation

    def report_error(self, task: str, code: int, message: str):
        with self._lock:
            rec = self._record(task)
            rec.error_message = message
            self._emit("error", task, {"code": code, "message": message})
            if rec.state != ERROR:
                self._set_state(rec, ERROR, error=message)

    def task_states(self, tasks=None) -> list[TaskRecord]:
        with self._lock:
            names = list(tasks) if tasks else list(self._tasks)
            out = []
            for t in names:
                r = self._record(t)
                out.append(TaskRecord(r.task, r.state, r.incarnation, r.address, r.pid,
                                      r.error_message, r.last_heartbeat,
                                      r.last_heartbeat_wall, r.steps_served,
                                      r.cpu_seconds))
            return out

    def _check_heartbeats(self):
        while not self._stopped.wait(self.heartbeat_interval_ms / 2000.0):
            limit = ms_as_seconds(self.heartbeat_timeout_ms)
            now = time.monotonic()
            with self._lock:
                for rec in self._tasks.values():
                    if rec.state == CONNECTED and now - rec.last_heartbeat > limit:
                        silent = seconds_as_ms(now - rec.last_heartbeat)
                        self._set_state(rec, DISCONNECTED, silent_ms=int(silent))

    # -- barriers -------------------------------------------------------------------
    def barrier(self, barrier_id: str, timeout_s: float, tasks, source_task: str,
                is_cancelled=lambda: False) -> int:
        """Blocks until every participant arrived; returns the round number."""
        if not barrier_id:
            raise errors.InvalidArgumentError(None, None, "Barrier needs a barrier_id")
        if not source_task:
            raise errors.InvalidArgumentError(
                None, None, f"Barrier '{barrier_id}' needs the source_task")
        participants = tuple(sorted(tasks)) if tasks else tuple(sorted(self._tasks))
        if source_task not in participants:
            raise errors.InvalidArgumentError(
                None, None, f"Task {source_task} is not a participant of barrier "
                f"'{barrier_id}' ({', '.join(participants)})")
        end = time.monotonic() + timeout_s
        with self._lock:
            b = self._barriers.get(barrier_id)
            if b is None:
                b = self._barriers[barrier_id] = _Barrier(participants)
            elif b.participants != participants and not b.arrived:
                b.participants = participants
            elif b.participants != participants:
                raise errors.InvalidArgumentError(
                    None, None, f"Barrier '{barrier_id}' has participants "
                    f"{list(b.participants)}, {source_task} asked for "
                    f"{list(participants)}")
            if source_task in b.arrived:
                raise errors.AlreadyExistsError(
                    None, None, f"Task {source_task} already waits at barrier "
                    f"'{barrier_id}'")
            my_round = b.round + 1
            my_generation = b.generation
            b.arrived.add(source_task)
            self._emit("barrier_arrival", source_task, {
                "barrier_id": barrier_id, "round": my_round,
                "arrived": sorted(b.arrived), "participants": list(participants)})
            if b.arrived >= set(participants):
                b.round = my_round
                b.arrived = set()
                self._emit("barrier_passed", source_task, {
                    "barrier_id": barrier_id, "round": my_round,
                    "participants": list(participants)})
                return my_round
            while b.round < my_round:
                if b.generation != my_generation:
                    raise errors.CancelledError(None, None, b.cancel_reason)
                if is_cancelled():
                    b.arrived.discard(source_task)
                    self._emit("barrier_cancelled", source_task, {
                        "barrier_id": barrier_id, "round": my_round,
                        "waiting": [source_task],
                        "reason": f"{source_task} stopped waiting"})
                    raise errors.CancelledError(
                        None, None, f"{source_task} stopped waiting at barrier "
                        f"'{barrier_id}'")
                remaining = end - time.monotonic()
                if remaining <= 0:
                    missing = sorted(set(participants) - b.arrived)
                    b.arrived.discard(source_task)
                    self._emit("barrier_timeout", source_task, {
                        "barrier_id": barrier_id, "round": my_round,
                        "missing": missing})
                    raise errors.DeadlineExceededError(
                        None, None, f"Barrier '{barrier_id}' timed out after "
                        f"{timeout_s:.1f} s: task(s) {', '.join(missing)} never "
                        "arrived")
                # is_cancelled is a predicate nothing signals: look every 0.25 s.
                self._lock.wait(min(remaining, 0.25))
            return my_round

    def cancel_barrier(self, barrier_id: str, source_task: str):
        """Fails the round in progress: every task waiting at the barrier gets
        ``CancelledError``; later arrivals start the round afresh."""
        with self._lock:
            b = self._barriers.get(barrier_id)
            if b is None:
                raise errors.NotFoundError(None, None,
                                           f"No barrier named '{barrier_id}'")
            waiting = sorted(b.arrived)
            b.cancel_reason = (f"Barrier '{barrier_id}' was cancelled by "
                               f"{source_task or 'a client'}")
            b.generation += 1
            b.arrived = set()
            self._emit("barrier_cancelled", source_task, {
                "barrier_id": barrier_id, "round": b.round + 1, "waiting": waiting,
                "reason": b.cancel_reason})

    def barriers(self) -> dict:
        with self._lock:
            return {k: (list(b.participants), sorted(b.arrived), b.round)
                    for k, b in self._barriers.items()}

    # -- key-value ------------------------------------------------------------------
    def insert(self, key: str, value: bytes, allow_overwrite: bool = False):
        if not key:
            raise errors.InvalidArgumentError(None, None, "Empty key")
        with self._lock:
            if key in self._kv and not allow_overwrite:
                raise errors.AlreadyExistsError(None, None,
                                                f"Key '{key}' is already set")
            self._kv_reserve(key, value)
            self._kv[key] = bytes(value)
            self._emit("key_value", "", {"key": key})

    def _kv_reserve(self, key: str, value: bytes):
        # Called with self._lock held: counts the entry, or refuses it.
        old = self._kv.get(key)
        old_size = 0 if old is None else len(key) + len(old)
        size = self._kv_bytes - old_size + len(key) + len(value)
        cap = self.max_key_value_bytes
        if cap is not None and size > cap:
            raise over_limit("max_key_value_bytes", cap,
                             f"InsertKeyValue '{key[:100]}': the key-value store "
                             f"with this value of {len(value)} bytes", size)
        self._kv_bytes = size

    def get(self, key: str, timeout_s: float, is_cancelled=lambda: False) -> bytes:
        end = time.monotonic() + timeout_s
        with self._lock:
            while key not in self._kv:
                remaining = end - time.monotonic()
                if remaining <= 0 or is_cancelled():
                    raise errors.DeadlineExceededError(
                        None, None, f"Key '{key}' was not set within {timeout_s:.1f} s")
                # is_cancelled is a predicate nothing signals: look every 0.25 s.
                self._lock.wait(min(remaining, 0.25))
            return self._kv[key]

    def try_get(self, key: str):
        with self._lock:
            return self._kv.get(key)

    def delete(self, key: str):
        with self._lock:
            doomed = ([k for k in self._kv if k.startswith(key)]
                      if key.endswith("/") else [key] if key in self._kv else [])
            for k in doomed:
                self._kv_bytes -= len(k) + len(self._kv.pop(k))

    def stop(self):
        self._stopped.set()
        with self._lock:
            self._lock.notify_all()

