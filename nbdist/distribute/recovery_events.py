"""Recovery events: the story of a failure, told by the code that recovers.

``ClusterCoordinator`` and ``MonitoredSession`` (so ``MonitoredTrainingSession``)
publish one event of kind ``"recovery"`` per phase of a failure. The payload's
``phase`` is one of:

``lost``
    a task was found down: ``task`` ("ps:0"; "" when unknown), ``how`` (what
    showed it: heartbeats, a probe, the error of a step), ``at`` (when, wall
    seconds), ``at_step`` (the global step reached before, sessions only).
``requeued``
    the closures that were in flight on a lost worker went back to the queue:
    ``task``, ``count``.
``rejoined``
    the task answers again: ``task``, ``restarted`` (another incarnation).
``restored``
    a new session restored the model: ``step`` (the global step it restored,
    the checkpoint's), ``checkpoint`` (its path; "" when initialised afresh),
    ``attempts`` (sessions that failed before).
``redone``
    the lost work was done again: ``count`` and ``unit`` ("steps": the steps
    between the restored step and the step reached before; "closures": the
    re-queued closures, which ran elsewhere), ``seconds`` it took.

Every payload also has ``source`` ("ClusterCoordinator" or
"MonitoredSession"), ``story`` (an id shared by the events of one recovery)
and ``at``. Events go to the in-process listeners (``subscribe``) at once and
to the cluster's coordination service (``target``) from a background thread,
so the notebook views following that service (``ClusterView``) draw them.

>>> seen = []
>>> _ = subscribe(seen.append)
>>> _ = publish("lost", {"task": "ps:0", "how": "a probe"}, source="test")
>>> [(e["phase"], e["task"]) for e in seen]
[('lost', 'ps:0')]
>>> unsubscribe(seen.append)
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import re
import threading
import time

__all__ = [
    "KIND",
    "PHASES",
    "CoordinatorStory",
    "SessionStory",
    "flush",
    "publish",
    "subscribe",
    "unsubscribe",
]

_log = logging.getLogger("nbdist.distribute.recovery")

KIND = "recovery"
PHASES = ("lost", "requeued", "rejoined", "restored", "redone")
_SEND_RETRY_S = 0.25
_SEND_GIVE_UP_S = 30.0  # a service that stays away this long misses the event
_SENDER_IDLE_S = 1.0  # a sender thread ends after this long without events
_PROBE_TIMEOUT_S = 0.5

_listeners: list = []
_listeners_lock = threading.Lock()
_senders: dict = {}
_senders_lock = threading.Lock()
_story_ids = itertools.count(1)


def subscribe(fn):
    """Calls ``fn(payload)`` with every recovery event of this process."""
    with _listeners_lock:
        _listeners.append(fn)
    return fn


def unsubscribe(fn):
    with _listeners_lock:
        if fn in _listeners:
            _listeners.remove(fn)


def short_name(task: str) -> str:
    """ "/job:ps/replica:0/task:0" -> "ps:0" (other strings unchanged)."""
    if task.startswith("/job:") and "/task:" in task:
        job = task[5:].split("/", 1)[0]
        return f"{job}:{task.rsplit('/task:', 1)[1].split('/', 1)[0]}"
    return task


def publish(
    phase: str,
    payload: dict,
    *,
    source: str,
    target: str | None = None,
    reporter: str = "",
    listeners=(),
) -> dict:
    """Publishes one recovery event: to ``listeners`` and this process's
    subscribers, and to the coordination service at ``target`` (when given).
    Returns the payload as published."""
    if phase not in PHASES:
        raise ValueError(
            f"recovery event: phase must be one of {PHASES}, got {phase!r}"
        )
    event = {"phase": phase, "source": source, "at": time.time(), "task": ""}
    event.update(payload)
    with _listeners_lock:
        everyone = list(listeners) + list(_listeners)
    for fn in everyone:
        try:
            fn(dict(event))
        except Exception:  # noqa: BLE001 - a listener must not stop recovery
            _log.exception("recovery event listener %r failed", fn)
    if target:
        _sender(target).put(reporter or f"client:{os.getpid()}", event)
    return event


def flush(timeout: float = 5.0) -> bool:
    """Waits until the events published so far reached their services (or
    were given up); returns whether every sender is idle."""
    end = time.monotonic() + timeout
    with _senders_lock:
        senders = list(_senders.values())
    return all(s.wait_idle(max(0.0, end - time.monotonic())) for s in senders)


class _Sender:
    """Hands the events for one coordination service to it, in order, from a
    thread that ends when idle (and starts again with the next event)."""

    def __init__(self, target: str):
        self.target = target
        self._pending: collections.deque = collections.deque()
        self._cond = threading.Condition()
        self._thread = None

    def put(self, reporter: str, event: dict):
        wall = int(event["at"] * 1e6)
        with self._cond:
            self._pending.append((KIND, reporter, event, wall))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, daemon=True, name="nbdist-recovery-events"
                )
                self._thread.start()
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._thread is None, timeout)

    def _run(self):
        from nbdist.runtime import transports

        client = None
        first_failure = None
        try:
            while True:
                with self._cond:
                    if not self._pending:
                        self._cond.wait(_SENDER_IDLE_S)
                    if not self._pending:
                        self._thread = None
                        self._cond.notify_all()
                        return
                    batch = list(self._pending)
                try:
                    if client is None:
                        client = transports.connect_coordination(self.target)
                    client.publish_events(batch, timeout_s=2.0)
                except Exception as e:  # noqa: BLE001 - the service may be away
                    if client is not None:
                        client.close()
                        client = None
                    now = time.monotonic()
                    first_failure = first_failure or now
                    if now - first_failure < _SEND_GIVE_UP_S:
                        time.sleep(_SEND_RETRY_S)
                        continue
                    _log.info("recovery events not delivered to %s: %s", self.target, e)
                first_failure = None
                with self._cond:
                    for _ in batch:
                        self._pending.popleft()
        finally:
            if client is not None:
                client.close()
            with self._cond:
                self._thread = None
                self._cond.notify_all()


def _sender(target: str) -> _Sender:
    with _senders_lock:
        s = _senders.get(target)
        if s is None:
            s = _senders[target] = _Sender(target)
        return s


class CoordinatorStory:
    """What a ``ClusterCoordinator`` publishes: fed the state machine's events
    and the actions they produced (``observe``).

    A worker's closures are put back before it is declared failed (the step's
    RPC error comes first), so the closures put back since its last result
    are counted, and published as ``requeued`` when it is declared failed;
    ``redone`` once every one of them has a result."""

    source = "ClusterCoordinator"

    def __init__(self, target: str | None = None, listeners=()):
        self.target = target
        self.listeners = list(listeners)
        self._lock = threading.Lock()
        # worker -> {closure id: resolved?} put back since its last result, and
        # when the first of them was
        self._put_back: dict = collections.defaultdict(dict)
        self._put_back_at: dict = {}
        self._down: dict = {}  # task -> story id
        self._redo: dict = {}  # story id -> [task, closure ids left, count, start]

    def _publish(self, phase, payload):
        publish(
            phase,
            payload,
            source=self.source,
            target=self.target,
            listeners=self.listeners,
        )

    def observe(self, events, actions):
        """Feeds the coordinator's events and the actions they produced."""
        from nbdist.distribute.coordinator import coordinator_state as cs

        out = []
        with self._lock:
            for ev in events:
                t = type(ev)
                if t is cs.ClosureDone and ev.worker not in self._failed_workers():
                    # A result: what it put back before was a retry, not a loss.
                    self._put_back.pop(ev.worker, None)
                    self._put_back_at.pop(ev.worker, None)
            for a in actions:
                t = type(a)
                if t is cs.PutBack:
                    self._put_back_at.setdefault(a.worker, time.time())
                    for c in a.closures:
                        self._put_back[a.worker][c.id] = False
                elif t is cs.Resolve or t is cs.Cancel:
                    out += self._resolved(a.closure.id)
            for ev in events:
                t = type(ev)
                if t is cs.WorkerFailed:
                    out += self._worker_failed(ev.worker, ev.reason)
                elif t is cs.WorkerRecovered:
                    out += self._back(f"worker:{ev.worker}", ev.incarnation)
                elif t is cs.PsFailed:
                    out += self._lost(short_name(ev.task), _first_line(ev.error))
                elif t is cs.PsRecovered:
                    out += self._back(short_name(ev.task), None)
            # Under the lock: another thread's observe (a re-run closure's result,
            # "redone") must not be published between this one's "lost" and its
            # "requeued". Listeners are quick and sending to the service is queued.
            for phase, payload in out:
                self._publish(phase, payload)

    def _failed_workers(self) -> set:
        out = set()
        for task in self._down:
            job, _, index = task.partition(":")
            if job == "worker" and index.isdigit():
                out.add(int(index))
        return out

    def _lost(self, task: str, how: str) -> list:
        if task in self._down:
            return []
        story = self._down[task] = f"{os.getpid()}-{next(_story_ids)}"
        return [("lost", {"task": task, "how": how, "story": story})]

    def _worker_failed(self, worker: int, reason: str) -> list:
        task = f"worker:{worker}"
        out = self._lost(task, reason)
        if not out:
            return []
        put_back = self._put_back.pop(worker, {})
        start = self._put_back_at.pop(worker, time.time())
        story = self._down[task]
        out.append(("requeued", {"task": task, "count": len(put_back), "story": story}))
        left = {i for i, done in put_back.items() if not done}
        if left:
            self._redo[story] = [task, left, len(put_back), start]
        elif put_back:  # they already ran elsewhere
            out.append(
                (
                    "redone",
                    {
                        "task": task,
                        "story": story,
                        "count": len(put_back),
                        "unit": "closures",
                        "seconds": time.time() - start,
                    },
                )
            )
        return out

    def _back(self, task: str, incarnation) -> list:
        story = self._down.pop(task, None)
        if story is None:
            return []
        return [
            ("rejoined", {"task": task, "story": story, "incarnation": incarnation})
        ]

    def _resolved(self, closure_id) -> list:
        for put_back in self._put_back.values():
            if closure_id in put_back:
                put_back[closure_id] = True
        out = []
        for story, redo in list(self._redo.items()):
            task, left, count, start = redo
            if closure_id in left:
                left.discard(closure_id)
                if not left:
                    del self._redo[story]
                    out.append(
                        (
                            "redone",
                            {
                                "task": task,
                                "story": story,
                                "count": count,
                                "unit": "closures",
                                "seconds": time.time() - start,
                            },
                        )
                    )
        return out


def _first_line(e) -> str:
    """ "UnavailableError: first line of its message" (also for an error whose
    message is None, as ``AbortedError(None, None, None)``)."""
    if e is None:
        return ""
    try:
        text = str(e).strip()
    except Exception:  # noqa: BLE001 - __str__ of a message-less OpError fails
        text = str(getattr(e, "message", None) or "").strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


class SessionStory:
    """What a ``MonitoredSession`` publishes, fed by its recoverable session
    (``lost``) and its hook (``created``, ``step``).

    Which task was lost is found without reading the error: the coordination
    service (reached through ``master``, a ``grpc://`` target) lists the tasks
    and their addresses, and those that are not connected or do not answer a
    ``GetStatus`` probe are the lost ones. Only when the probe finds none (the
    task was back before it ran, or no service is reachable) are the tasks the
    error names taken ("Task /job:ps/replica:0/task:0 at ... is unavailable")."""

    source = "MonitoredSession"

    def __init__(
        self, master: str = "", checkpoint_dir: str | None = None, listeners=()
    ):
        self.target = master if "://" in (master or "") else None
        self.checkpoint_dir = checkpoint_dir
        self.listeners = list(listeners)
        self.last_step: int | None = None
        self.sessions = 0
        self._lock = threading.Lock()
        self._story: str | None = None  # the recovery under way
        self._lost_step: int | None = None
        self._finder: threading.Thread | None = None
        self._redo: tuple | None = None  # (story, from step, to step, start)
        self.lost_tasks: list = []
        self._attempts = 0
        self._incarnations: dict = {}  # task -> incarnation when it was lost

    def _publish(self, phase, payload):
        publish(
            phase,
            payload,
            source=self.source,
            target=self.target,
            listeners=self.listeners,
        )

    def lost(self, error, where: str):
        """A step (or a session's creation) failed with a preemption error."""
        with self._lock:
            self._attempts += 1
            if self._story is not None:
                return  # the same recovery: another attempt failed
            self._story = story = f"{os.getpid()}-{next(_story_ids)}"
            self._lost_step = self.last_step
            self._redo = None
        at = time.time()
        payload = {
            "story": story,
            "how": f"{_first_line(error)} ({where})",
            "at": at,
            "at_step": self._lost_step,
        }
        named = tasks_named(error)
        if self.target is None:
            self.lost_tasks = named
            if named:
                payload["task"] = ", ".join(named)
            self._publish("lost", payload)
            return
        # Probing takes up to a second: the recovery goes on meanwhile.
        self._finder = threading.Thread(
            target=self._find_and_publish,
            args=(payload, named),
            daemon=True,
            name="nbdist-recovery-probe",
        )
        self._finder.start()

    def _find_and_publish(self, payload, named):
        tasks = []
        try:
            tasks, self._incarnations = lost_tasks(self.target)
        except Exception as e:  # noqa: BLE001 - the leader may be the lost one
            _log.debug("could not tell which task was lost: %s", e)
        tasks = tasks or named
        self.lost_tasks = tasks
        payload["task"] = ", ".join(tasks)
        self._publish("lost", payload)

    def created(self, step: int | None):
        """A session was created (after ``lost``: restored), at ``step``."""
        self.sessions += 1
        with self._lock:
            story, self._story = self._story, None
            lost_step = self._lost_step
            attempts, self._attempts = self._attempts, 0
        if story is None:
            if step is not None:
                self.last_step = step
            return
        finder = self._finder
        if finder is not None:
            finder.join(2.0)  # "lost" first
        if not self.lost_tasks and self._incarnations:
            # Back before the probes: the task that restarted was the lost one.
            try:
                now = _incarnations(self.target)
                self.lost_tasks = sorted(
                    short_name(t)
                    for t, inc in self._incarnations.items()
                    if t in now and now[t] != inc
                )
            except Exception as e:  # noqa: BLE001 - not known, then
                _log.debug("could not tell which task was lost: %s", e)
        checkpoint = ""
        if self.checkpoint_dir:
            from nbdist.train.checkpoint_management import latest_checkpoint

            checkpoint = latest_checkpoint(self.checkpoint_dir) or ""
        task = ", ".join(self.lost_tasks)
        self._publish(
            "restored",
            {
                "story": story,
                "step": step,
                "task": task,
                "checkpoint": checkpoint,
                "at_step": lost_step,
                "attempts": attempts,
            },
        )
        if step is not None and lost_step is not None and lost_step > step:
            with self._lock:
                self._redo = (story, step, lost_step, time.time(), task)
        elif step is not None:
            self._publish(
                "redone",
                {
                    "story": story,
                    "task": task,
                    "count": 0,
                    "unit": "steps",
                    "seconds": 0.0,
                },
            )
        if step is not None:
            self.last_step = step

    def step(self, step: int):
        """The global step after a run."""
        self.last_step = step
        redo = self._redo
        if redo is None or step < redo[2]:
            return
        with self._lock:
            if self._redo is not redo:
                return
            self._redo = None
        story, start_step, lost_step, start, task = redo
        self._publish(
            "redone",
            {
                "story": story,
                "task": task,
                "count": lost_step - start_step,
                "unit": "steps",
                "seconds": time.time() - start,
            },
        )


def _task_records(target: str) -> list:
    from nbdist.runtime import transports

    client = transports.connect_coordination(target)
    try:
        return client.task_states(timeout_s=1.0)
    finally:
        client.close()


def _incarnations(target: str) -> dict:
    return {r.task: r.incarnation for r in _task_records(target)}


# The task an error is about: "Task <name> at <address> is unavailable: ...",
# "Task <name> restarted: ..." (the task that ran the step is named too).
_NAMED_TASK = re.compile(r"\bTask (/job:[\w.-]+/replica:\d+/task:\d+)")


def tasks_named(error) -> list[str]:
    """The tasks ``error``'s message is about, short: ``["ps:0"]`` for
    "Task /job:ps/replica:0/task:0 at localhost:1 is unavailable"."""
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - __str__ of a message-less OpError fails
        text = str(getattr(error, "message", None) or "")
    return sorted({short_name(t) for t in _NAMED_TASK.findall(text)})


def lost_tasks(target: str) -> tuple[list[str], dict]:
    """The tasks of the cluster whose coordination service ``target`` reaches
    that are not connected to it or do not answer a status probe ("ps:0"),
    and the incarnation of every task as the service knows it."""
    from nbdist.runtime import transports

    records = _task_records(target)
    out = []
    for r in records:
        if r.state != "CONNECTED" or not r.address:
            if r.state in ("DISCONNECTED", "ERROR"):
                out.append(short_name(r.task))
            continue
        worker = transports.connect_worker(r.task, r.address)
        try:
            worker.get_status(timeout_s=_PROBE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - no answer: down
            out.append(short_name(r.task))
        finally:
            worker.close()
    return sorted(out), {r.task: r.incarnation for r in records}
