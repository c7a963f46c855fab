"""The ``ClusterCoordinator``'s queue, failure handling and fencing as a pure
state machine.

``CoordinatorState.handle(event)`` is the only method that changes the state;
it returns the actions the I/O side (threads, RPCs, the heartbeat watcher in
``cluster_coordinator.py``) must carry out. No threads, clocks or RPCs here:
the tests drive it directly (``tests/distribute/test_coordinator_state.py``).

    >>> s = CoordinatorState(num_workers=1)
    >>> c = Closure(1)
    >>> [type(a).__name__ for a in s.handle(Schedule(c))]
    ['Dispatch']
    >>> [type(a).__name__ for a in s.handle(ClosureDone(1, 0, 42))]
    ['Resolve']
    >>> s.handle(WorkerReady(0)), s.handle(Join())
    ([], [])

Closures: ``QUEUED -> RUNNING(worker) -> DONE | FAILED | CANCELLED``, and
``RUNNING -> QUEUED`` when put back. Workers: alive or failed, idle or busy
(its thread is carrying out a ``Dispatch`` or ``BuildResources``), with the
per-worker resources (iterators) it still has to build.

Transitions (event: what changes -> actions):

``Schedule(closure)``
    an error pending (see ``Join``) -> that error path, the closure is not
    queued (``Cancel(closure)``); queue full -> ``Wait``; else the closure is
    queued -> ``Dispatch`` to idle workers.
``WorkerReady(w)``
    w's thread is idle again -> ``Dispatch`` / ``BuildResources`` to it.
``ClosureDone(id, w, value)``
    first result of the closure (from any attempt, even a stale one of a
    worker since declared failed: at least once) -> ``Resolve(value)``;
    the closure leaves the queue or whichever worker runs it. Later results
    of the same closure are ignored.
``ClosureFailed(id, w, error, retryable)``
    ignored unless the closure is RUNNING on w. Retryable (a task failure:
    Unavailable/Aborted/...): put back at the head of the queue
    (``PutBack``), up to ``max_retries`` times, then failed with the error;
    while a ps is down: failed with the error. Not retryable (the function's
    own error): ``Resolve(error)``, and the first such error becomes the
    pending error; no closure is dispatched until it has been raised. A
    retryable failure also asks ``CheckWorker(w)``; one of a run the state
    already took back (w was declared failed since, and may be back) asks
    nothing: it tells of a loss already handled, not of w now.
``WorkerFailed(w, reason)``
    (heartbeats stopped, or a probe after an RPC error failed) w is marked
    failed; its running closures are put back at the head of the queue
    (``PutBack``) and go to other workers (``Dispatch``); its built
    resources are ``AbortResources``.
``WorkerRecovered(w, incarnation)``
    w answers (heartbeats again or a probe succeeded). Failed -> alive; if it
    restarted (another or an unknown incarnation) its resources are rebuilt
    (``BuildResources`` before any closure), else they are ready again
    (``ResourcesReady``). Alive with another incarnation: it restarted under
    us -> as ``WorkerFailed`` then ``WorkerRecovered``. Alive with the same
    (or a first) incarnation: recorded, nothing else.
``CreateResource(resource)``
    every worker must build it -> ``BuildResources`` to idle live workers
    (failed ones build it when they recover); a worker runs no closure until
    its resources are built.
``ResourcesBuilt(w, ids)`` -> ``ResourcesReady``.
``ResourceBuildFailed(w, ids, error, retryable)``
    retryable: kept to build again (``CheckWorker(w)`` while w is alive);
    else the error becomes the pending error and w drops those resources.
``PsFailed(task, error)``
    a ps is down (heartbeats, a probe, or its restart): pending
    ``UnavailableError``; nothing more is dispatched while it is down.
``PsRecovered(task)`` -> dispatching resumes once every ps is back and the
    error has been raised.
``Fence(w)``
    (before w's closures go elsewhere: w failed, restarted under us, or an RPC
    to it failed) w's epoch advances, so dispatches made before are refused,
    and no step is admitted on w until ``FenceLifted(w)``; the sessions w used
    since the last fence are fenced -> ``FenceSessions`` (the I/O deletes them
    on every ps, then sends ``FenceLifted``).
``ReleaseFenced(w)`` (before a step) -> ``CloseSessions`` of w's fenced ones.
``Admit(w, epoch, session)`` (a step of a dispatch of ``epoch`` about to run
    in ``session``) -> ``Admitted(False)`` if w was fenced since;
    ``Admitted(True)`` if the session is open in this epoch; else
    ``OpenSession`` (the I/O has its master create it, so a fence knows its
    handle, then sends ``SessionOpened(w, epoch, session)`` -> ``Admitted``,
    or, fenced meanwhile, the session is fenced and ``Admitted(False)``).
``Join()`` / ``Done()`` / ``Schedule``'s error check
    a ps failure -> every queued closure ``Cancel``, ``Raise(error)`` at once
    (later calls raise again while a ps is still down); a function error ->
    queued closures ``Cancel``, ``Wait`` until no closure is running, then
    ``Raise(error)`` once and clear it. Otherwise ``Join``: ``Wait`` until no
    closure is queued or running; ``Done``: ``DoneStatus(bool)``.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field
from typing import Any

from nbdist import errors

__all__ = [
    "AbortResources",
    "Admit",
    "Admitted",
    "BuildResources",
    "Cancel",
    "CheckWorker",
    "CloseSessions",
    "Closure",
    "ClosureDone",
    "ClosureFailed",
    "CoordinatorState",
    "CreateResource",
    "Dispatch",
    "Done",
    "DoneStatus",
    "Fence",
    "FenceLifted",
    "FenceSessions",
    "Join",
    "OpenSession",
    "PsFailed",
    "PsRecovered",
    "PutBack",
    "Raise",
    "ReleaseFenced",
    "Resolve",
    "Resource",
    "ResourceBuildFailed",
    "ResourcesBuilt",
    "ResourcesReady",
    "Schedule",
    "SessionOpened",
    "Wait",
    "WorkerFailed",
    "WorkerReady",
    "WorkerRecovered",
]

QUEUED, RUNNING, DONE, FAILED, CANCELLED = (
    "QUEUED", "RUNNING", "DONE", "FAILED", "CANCELLED")

DEFAULT_QUEUE_CAPACITY = 256 * 1024  # as TF's _CLOSURE_QUEUE_MAX_SIZE
DEFAULT_MAX_RETRIES = 10

CANCELLED_MESSAGE = ("The corresponding function is cancelled. Please reschedule "
                     "the function.")


@dataclass(eq=False)
class Closure:
    """A scheduled function call as the state machine sees it. Closures with the
    same non-None ``batch_key`` may run together in one step (see
    ``max_batch``); ``payload`` is the I/O side's (function, arguments,
    RemoteValue)."""

    id: int
    batch_key: Any = None
    payload: Any = None
    status: str = QUEUED
    worker: int | None = None
    retries: int = 0


@dataclass(eq=False)
class Resource:
    """A per-worker resource (an iterator) every worker builds once, and again
    after it restarts."""

    id: int
    payload: Any = None


# -- events ---------------------------------------------------------------------------
@dataclass
class Schedule:
    closure: Closure


@dataclass
class WorkerReady:
    worker: int


@dataclass
class ClosureDone:
    closure_id: int
    worker: int
    value: Any = None


@dataclass
class ClosureFailed:
    closure_id: int
    worker: int
    error: BaseException
    retryable: bool


@dataclass
class WorkerFailed:
    worker: int
    reason: str = ""


@dataclass
class WorkerRecovered:
    worker: int
    incarnation: int | None = None


@dataclass
class CreateResource:
    resource: Resource


@dataclass
class ResourcesBuilt:
    worker: int
    resource_ids: tuple


@dataclass
class ResourceBuildFailed:
    worker: int
    resource_ids: tuple
    error: BaseException
    retryable: bool


@dataclass
class PsFailed:
    task: str
    error: BaseException | None = None


@dataclass
class PsRecovered:
    task: str


@dataclass
class Fence:
    worker: int


@dataclass
class FenceLifted:
    worker: int


@dataclass
class ReleaseFenced:
    worker: int


@dataclass
class Admit:
    worker: int
    epoch: int
    session: Any


@dataclass
class SessionOpened:
    worker: int
    epoch: int
    session: Any


@dataclass
class Join:
    pass


@dataclass
class Done:
    pass


# -- actions --------------------------------------------------------------------------
@dataclass
class Dispatch:
    """Run ``closures`` (one step) on ``worker``; report ``ClosureDone`` /
    ``ClosureFailed`` for each, then ``WorkerReady``."""

    worker: int
    closures: list
    epoch: int = 0  # the worker's fencing epoch: ``Admit`` the step under it


@dataclass
class Resolve:
    """The closure finished: its RemoteValue becomes READY with ``value`` or
    ``error``."""

    closure: Closure
    value: Any = None
    error: BaseException | None = None


@dataclass
class Cancel:
    """The closure will not run: its RemoteValue is aborted with ``error``."""

    closure: Closure
    error: BaseException


@dataclass
class CheckWorker:
    """An RPC to ``worker`` failed on work it still held: the I/O probes it
    (and the ps tasks) and reports what it finds (``WorkerFailed``,
    ``WorkerRecovered``, ``PsFailed``)."""

    worker: int


@dataclass
class PutBack:
    """``closures`` were taken back from ``worker`` and queued again."""

    worker: int
    closures: list
    reason: str


@dataclass
class BuildResources:
    """Build (or rebuild) ``resources`` on ``worker``; report ``ResourcesBuilt``
    or ``ResourceBuildFailed``, then ``WorkerReady``."""

    worker: int
    resources: list


@dataclass
class AbortResources:
    worker: int
    resources: list


@dataclass
class ResourcesReady:
    worker: int
    resources: list


@dataclass
class Raise:
    """The caller of ``schedule``/``join``/``done`` raises ``error``."""

    error: BaseException


@dataclass
class Wait:
    """The caller blocks until the state changes, then sends its event again."""


@dataclass
class DoneStatus:
    done: bool


@dataclass
class FenceSessions:
    """Delete ``sessions`` (the master's handles of them) on every ps task, so
    no step still running in them changes a ps variable; then ``FenceLifted``."""

    worker: int
    sessions: list


@dataclass
class CloseSessions:
    worker: int
    sessions: list


@dataclass
class OpenSession:
    """Have ``session``'s master create it (a fence must know its handle), then
    send ``SessionOpened``."""

    worker: int
    epoch: int
    session: Any


@dataclass
class Admitted:
    ok: bool


@dataclass
class _Worker:
    index: int
    alive: bool = True
    busy: bool = False
    incarnation: int | None = None
    running: dict = field(default_factory=dict)  # closure id -> Closure
    needs_build: set = field(default_factory=set)  # resource ids
    built: set = field(default_factory=set)
    aborted: set = field(default_factory=set)
    # Fencing: a dispatch runs only in the epoch it was made in; ``fences``
    # in progress; sessions used since the last fence; fenced ones to close.
    epoch: int = 0
    fences: int = 0
    open_sessions: dict = field(default_factory=dict)  # id(session) -> session
    fenced_sessions: list = field(default_factory=list)


class CoordinatorState:
    """The queue, the workers and the pending error (see the module docstring).

    ``max_batch``: most closures with one ``batch_key`` dispatched to a worker
    as one step (rounded down to a power of two, so few step shapes exist).
    ``max_retries``: how often a closure is put back after retryable errors
    before it fails with the last one.
    """

    def __init__(self, num_workers: int, max_batch: int = 1,
                 capacity: int = DEFAULT_QUEUE_CAPACITY,
                 max_retries: int = DEFAULT_MAX_RETRIES):
        if num_workers < 1:
            raise ValueError("CoordinatorState needs at least one worker")
        self.workers = [_Worker(i) for i in range(num_workers)]
        self.max_batch = max(1, int(max_batch))
        self.capacity = capacity
        self.max_retries = max_retries
        self.queue: collections.deque = collections.deque()
        self.closures: dict[int, Closure] = {}  # unresolved: queued or running
        self.resources: dict[int, Resource] = {}
        self.error: BaseException | None = None  # first function error, unraised
        self.ps_error: BaseException | None = None  # unraised ps failure
        self.failed_ps: set = set()
        self.stats = collections.Counter()
        self._next_worker = 0

    # -- queries (read-only) ----------------------------------------------------------
    @property
    def num_running(self) -> int:
        return sum(len(w.running) for w in self.workers)

    @property
    def num_queued(self) -> int:
        return len(self.queue)

    @property
    def idle(self) -> bool:
        """No closure queued or running."""
        return not self.closures

    def running_on(self, worker: int) -> list:
        return list(self.workers[worker].running.values())

    def is_alive(self, worker: int) -> bool:
        return self.workers[worker].alive

    @property
    def failed_workers(self) -> list[int]:
        return [w.index for w in self.workers if not w.alive]

    def must_fence(self, event) -> int | None:
        """The worker ``event`` fails, if it is alive now (reported failed, or
        back in another incarnation): fence it before handling ``event``."""
        t = type(event)
        if t is not WorkerFailed and t is not WorkerRecovered:
            return None
        w = self.workers[event.worker]
        if not w.alive:
            return None
        if t is WorkerFailed or (event.incarnation is not None and w.incarnation
                                 not in (None, event.incarnation)):
            return event.worker
        return None

    def _blocked(self) -> bool:
        return bool(self.error or self.ps_error or self.failed_ps)

    # -- the one mutator ----------------------------------------------------------------
    def handle(self, event) -> list:
        """Applies ``event``; returns the actions to carry out, in order."""
        method = getattr(self, "_on_" + type(event).__name__, None)
        if method is None:
            raise TypeError(f"CoordinatorState: unknown event {event!r}")
        self.stats["events"] += 1
        return method(event)

    # -- scheduling ---------------------------------------------------------------------
    def _on_Schedule(self, ev: Schedule) -> list:
        c = ev.closure
        raising = self._error_actions()
        if raising is not None:
            if any(isinstance(a, Raise) for a in raising):
                self.stats["cancelled"] += 1
                c.status = CANCELLED
                return raising + [Cancel(c, errors.CancelledError(
                    None, None, CANCELLED_MESSAGE))]
            return raising
        if len(self.queue) >= self.capacity:
            return [Wait()]
        c.status, c.worker = QUEUED, None
        self.closures[c.id] = c
        self.queue.append(c)
        self.stats["scheduled"] += 1
        return self._dispatch()

    def _on_Join(self, ev: Join) -> list:
        raising = self._error_actions()
        if raising is not None:
            return raising
        return [] if self.idle else [Wait()]

    def _on_Done(self, ev: Done) -> list:
        raising = self._error_actions()
        if raising is not None:
            return raising
        return [DoneStatus(self.idle)]

    def _error_actions(self) -> list | None:
        """None when nothing is to be raised; else the actions of raising."""
        if self.ps_error is not None or self.failed_ps:
            err = self.ps_error or errors.UnavailableError(
                None, None, "Parameter server task(s) "
                f"{', '.join(sorted(self.failed_ps))} are still unavailable")
            self.ps_error = None
            return self._cancel_queued() + [Raise(err)]
        if self.error is not None:
            actions = self._cancel_queued()
            if self.num_running:
                return actions + [Wait()]
            err, self.error = self.error, None
            return actions + [Raise(err)] + self._dispatch()
        return None

    def _cancel_queued(self) -> list:
        out = []
        while self.queue:
            c = self.queue.popleft()
            c.status = CANCELLED
            self.closures.pop(c.id, None)
            self.stats["cancelled"] += 1
            out.append(Cancel(c, errors.CancelledError(None, None, CANCELLED_MESSAGE)))
        return out

    # -- dispatch -----------------------------------------------------------------------
    def _dispatch(self) -> list:
        out = []
        n = len(self.workers)
        order = [self.workers[(self._next_worker + k) % n] for k in range(n)]
        idle = [w for w in order if w.alive and not w.busy]
        if not idle:
            return out
        ready = []
        for w in idle:
            todo = [self.resources[r] for r in sorted(w.needs_build)
                    if r in self.resources]
            if todo:
                w.busy = True
                out.append(BuildResources(w.index, todo))
            else:
                ready.append(w)
        if self._blocked():
            return out
        alive = sum(1 for w in self.workers if w.alive)
        while self.queue and ready:
            # Leave a share of the queue to each live worker (busy ones too).
            share = max(1, math.ceil(len(self.queue) / alive))
            w = ready.pop(0)
            batch = self._take_batch(min(share, self.max_batch))
            for c in batch:
                c.status, c.worker = RUNNING, w.index
                w.running[c.id] = c
            w.busy = True
            self._next_worker = (w.index + 1) % n
            self.stats["dispatched"] += len(batch)
            self.stats["steps"] += 1
            out.append(Dispatch(w.index, batch, w.epoch))
        return out

    def _take_batch(self, limit: int) -> list:
        first = self.queue.popleft()
        batch = [first]
        if first.batch_key is not None:
            while (len(batch) < limit and self.queue
                   and self.queue[0].batch_key == first.batch_key):
                batch.append(self.queue.popleft())
            keep = 1 << (len(batch).bit_length() - 1)  # a power of two
            for c in reversed(batch[keep:]):
                self.queue.appendleft(c)
            del batch[keep:]
        return batch

    def _on_WorkerReady(self, ev: WorkerReady) -> list:
        self.workers[ev.worker].busy = False
        return self._dispatch()

    # -- results ------------------------------------------------------------------------
    def _forget(self, c: Closure):
        self.closures.pop(c.id, None)
        if c.status == QUEUED:
            try:
                self.queue.remove(c)
            except ValueError:
                pass
        for w in self.workers:
            w.running.pop(c.id, None)

    def _on_ClosureDone(self, ev: ClosureDone) -> list:
        c = self.closures.get(ev.closure_id)
        if c is None:
            return []
        if c.worker != ev.worker or c.status != RUNNING:
            self.stats["stale_results_used"] += 1
        self._forget(c)
        c.status, c.worker = DONE, ev.worker
        self.stats["completed"] += 1
        self.stats[f"completed/worker:{ev.worker}"] += 1
        return [Resolve(c, ev.value)]

    def _on_ClosureFailed(self, ev: ClosureFailed) -> list:
        c = self.closures.get(ev.closure_id)
        if c is None or c.status != RUNNING or c.worker != ev.worker:
            return []
        check = [CheckWorker(ev.worker)] if ev.retryable else []
        if ev.retryable and not self.failed_ps and c.retries < self.max_retries:
            c.retries += 1
            self.stats["retried"] += 1
            self._put_back(self.workers[ev.worker], [c])
            return [PutBack(ev.worker, [c], f"{type(ev.error).__name__}: "
                            f"{ev.error}"), *check] + self._dispatch()
        self._forget(c)
        c.status = FAILED
        self.stats["failed"] += 1
        if not ev.retryable and self.error is None:
            self.error = ev.error
        return [Resolve(c, error=ev.error), *check]

    def _put_back(self, w: _Worker, closures: list):
        for c in closures:
            w.running.pop(c.id, None)
            c.status, c.worker = QUEUED, None
        self.queue.extendleft(reversed(closures))
        self.stats["put_back"] += len(closures)

    # -- workers ------------------------------------------------------------------------
    def _fail_worker(self, w: _Worker, reason: str) -> list:
        w.alive = False
        out = []
        running = list(w.running.values())
        if running:
            self._put_back(w, running)
            out.append(PutBack(w.index, running, reason))
        lost = [self.resources[r] for r in sorted(w.built) if r in self.resources]
        w.aborted |= w.built
        w.built = set()
        if lost:
            out.append(AbortResources(w.index, lost))
        self.stats["worker_failures"] += 1
        return out

    def _on_WorkerFailed(self, ev: WorkerFailed) -> list:
        w = self.workers[ev.worker]
        if not w.alive:
            return []
        return self._fail_worker(w, ev.reason or "worker failed") + self._dispatch()

    def _on_WorkerRecovered(self, ev: WorkerRecovered) -> list:
        w = self.workers[ev.worker]
        inc = ev.incarnation
        out = []
        if w.alive:
            if inc is None or w.incarnation is None or inc == w.incarnation:
                if w.incarnation is None:
                    w.incarnation = inc
                return []
            out += self._fail_worker(w, "worker restarted")
        restarted = inc is None or w.incarnation is None or inc != w.incarnation
        if inc is not None:
            w.incarnation = inc
        w.alive = True
        self.stats["worker_recoveries"] += 1
        if restarted:
            w.needs_build |= w.aborted | w.built
            w.built = set()
            w.aborted = set()
        elif w.aborted:
            back = [self.resources[r] for r in sorted(w.aborted) if r in self.resources]
            w.built |= w.aborted
            w.aborted = set()
            if back:
                out.append(ResourcesReady(w.index, back))
        return out + self._dispatch()

    # -- per-worker resources -----------------------------------------------------------
    def _on_CreateResource(self, ev: CreateResource) -> list:
        r = ev.resource
        self.resources[r.id] = r
        for w in self.workers:
            w.needs_build.add(r.id)
        return self._dispatch()

    def _on_ResourcesBuilt(self, ev: ResourcesBuilt) -> list:
        w = self.workers[ev.worker]
        ids = set(ev.resource_ids)
        w.needs_build -= ids
        w.built |= ids
        return [ResourcesReady(w.index, [self.resources[r] for r in sorted(ids)
                                         if r in self.resources])]

    def _on_ResourceBuildFailed(self, ev: ResourceBuildFailed) -> list:
        w = self.workers[ev.worker]
        if ev.retryable:
            return [CheckWorker(w.index)] if w.alive else []
        w.needs_build -= set(ev.resource_ids)
        if self.error is None:
            self.error = ev.error
        return []

    # -- parameter servers --------------------------------------------------------------
    def _on_PsFailed(self, ev: PsFailed) -> list:
        if ev.task in self.failed_ps:
            return []
        self.failed_ps.add(ev.task)
        if self.ps_error is None:
            self.ps_error = ev.error or errors.UnavailableError(
                None, None, f"Parameter server {ev.task} is unavailable")
        self.stats["ps_failures"] += 1
        return []

    def _on_PsRecovered(self, ev: PsRecovered) -> list:
        if ev.task not in self.failed_ps:
            return []
        self.failed_ps.discard(ev.task)
        return self._dispatch()

    # -- fencing ------------------------------------------------------------------------
    def _on_Fence(self, ev: Fence) -> list:
        w = self.workers[ev.worker]
        w.epoch += 1
        w.fences += 1
        sessions = list(w.open_sessions.values())
        w.open_sessions.clear()
        w.fenced_sessions += sessions
        return [FenceSessions(w.index, sessions)]

    def _on_FenceLifted(self, ev: FenceLifted) -> list:
        w = self.workers[ev.worker]
        if w.fences < 1:
            raise ValueError(f"FenceLifted: worker {w.index} is not being fenced")
        w.fences -= 1
        return []

    def _on_ReleaseFenced(self, ev: ReleaseFenced) -> list:
        w = self.workers[ev.worker]
        sessions, w.fenced_sessions = w.fenced_sessions, []
        return [CloseSessions(w.index, sessions)] if sessions else []

    def _on_Admit(self, ev: Admit) -> list:
        w = self.workers[ev.worker]
        if w.epoch != ev.epoch or w.fences:
            return [Admitted(False)]
        if id(ev.session) in w.open_sessions:
            return [Admitted(True)]
        return [OpenSession(w.index, ev.epoch, ev.session)]

    def _on_SessionOpened(self, ev: SessionOpened) -> list:
        w = self.workers[ev.worker]
        if w.epoch != ev.epoch or w.fences:
            w.fenced_sessions.append(ev.session)
            return [Admitted(False)]
        w.open_sessions[id(ev.session)] = ev.session
        return [Admitted(True)]
