"""Following a cluster's event stream from a notebook, in a background thread.

An *event source* is anything with ``watch(from_seq=0)`` returning an iterator of
events (objects with ``seq``, ``wall_time_us``, ``kind``, ``task`` and a
``payload`` dict), oldest first, that blocks for new ones. The coordination
service's client is one (``transports.connect_coordination(target).watch``);
``ServiceEventSource`` wraps the in-process ``CoordinationService`` (tests, and
servers in this process) with the runtime's one in-process watch
(``coordination.LocalEventWatch``). If the iterator has ``cancel()`` or ``stop()``,
stopping the follower ends it at once; otherwise the follower stops at the
next event.

``EventFollower`` reads a source in one thread and hands every event, in
sequence order, to each subscriber: nothing is lost (after a broken stream it
resumes from the last sequence number it delivered), duplicated (sequence
numbers it already delivered are skipped) or reordered (one thread delivers).

>>> from nbdist.runtime.coordination import CoordinationService
>>> service = CoordinationService(["/job:worker/replica:0/task:0"])
>>> follower = EventFollower(ServiceEventSource(service))
>>> seen = []
>>> _ = follower.subscribe(lambda e: seen.append(e.kind))
>>> _ = follower.start()
>>> _ = service.publish("step", "/job:worker/replica:0/task:0", {"step_id": 1})
>>> follower.sync(timeout=5)
True
>>> seen
['step']
>>> follower.stop(); service.stop()
"""

from __future__ import annotations

import logging
import threading
import time

from nbdist.cluster.base import as_cluster
from nbdist.runtime import transports
from nbdist.runtime.coordination import LocalEventWatch, target_of

__all__ = ["EventFollower", "ServiceEventSource", "Throttle", "event_source_for"]

_log = logging.getLogger("nbdist.notebook")


class ServiceEventSource:
    """An event source over an in-process ``CoordinationService`` (no RPC)."""

    def __init__(self, service):
        self.service = service

    def watch(self, from_seq: int = 0, kinds=None):
        return LocalEventWatch(self.service, from_seq, kinds)

    def last_seq(self) -> int:
        return self.service.last_seq


def event_source_for(cluster=None, target: str | None = None):
    """The event source of a running cluster: the coordination service of a
    ``LocalCluster``, an in-process ``Server`` or a ``grpc://`` target. None
    when there is no coordination service to follow."""
    service = getattr(cluster, "coordination_service", None)
    if service is not None:  # an in-process server hosting the service
        return ServiceEventSource(service)
    if target is None and cluster is not None:
        try:
            target = target_of(cluster)
        except (TypeError, ValueError):  # not a cluster, or one without tasks
            return None
    if not target:
        return None
    try:
        return transports.connect_coordination(target)
    except ImportError:  # the target's transport is not installed
        return None


def cluster_gone(cluster) -> bool:
    """Whether ``cluster`` (a ``Cluster`` or an in-process ``Server``) was
    shut down (or disconnected)."""
    c = as_cluster(cluster)
    return c is not None and c.closed


class EventFollower:
    """Follows an event source in a daemon thread and delivers each event, in
    order and once, to every subscriber (``fn(event)``, on that thread).

    ``from_seq`` is the first sequence number wanted (0: the oldest kept).
    ``kinds`` filters event kinds. When the stream breaks (the task hosting the
    service restarts, say), the follower reconnects every ``retry_s`` from
    where it was; ``stop()`` ends it, and so does a broken stream once
    ``until()`` is true (the cluster was shut down). ``gaps`` counts sequence
    numbers that the source no longer had (its log is bounded) when the
    follower caught up.
    """

    def __init__(
        self,
        source,
        from_seq: int = 0,
        kinds=None,
        name: str = "nbdist-events",
        retry_s: float = 0.25,
        until=None,
    ):
        self.source = source
        self.until = until
        self.kinds = list(kinds) if kinds else None
        self.retry_s = retry_s
        self.last_seq = max(0, int(from_seq) - 1)
        self.delivered = 0
        self.gaps = 0
        self.errors = 0
        self.restarts = 0  # times the service restarted under the follower
        self.guard_s = 1.0
        self._gen = None
        self._subscribers: list = []
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._current = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False

    # -- subscribers --------------------------------------------------------------
    def subscribe(self, fn):
        """Adds ``fn(event)``; returns ``fn``."""
        with self._lock:
            self._subscribers.append(fn)
        return fn

    def unsubscribe(self, fn):
        with self._lock:
            if fn in self._subscribers:
                self._subscribers.remove(fn)

    # -- lifecycle ----------------------------------------------------------------
    def start(self):
        """Starts following (idempotent)."""
        with self._lock:
            if self._started:
                return self
            self._started = True
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def stop(self, timeout: float = 5.0):
        """Stops following; returns when the thread has ended (or ``timeout``)."""
        self._stop.set()
        _end_watch(self._current)
        if self._started and threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        with self._lock:
            self._lock.notify_all()

    def sync(self, timeout: float = 10.0, quiet_s: float = 0.3) -> bool:
        """Waits until every event the source has now was delivered. With a
        source that tells its last sequence number (``last_seq()``) that is
        exact; otherwise it waits until no event came for ``quiet_s``."""
        end = time.monotonic() + timeout
        last = getattr(self.source, "last_seq", None)
        if callable(last):
            try:
                target = int(last())
            except Exception:  # noqa: BLE001 - source gone: nothing more will come
                target = None
            if target is not None:
                with self._lock:
                    while self.last_seq < target and not self._stop.is_set():
                        remaining = end - time.monotonic()
                        if remaining <= 0:
                            return False
                        self._lock.wait(min(remaining, 0.1))
                    return self.last_seq >= target
        with self._lock:
            while True:
                seen = self.delivered
                self._lock.wait(quiet_s)
                if self.delivered == seen:
                    return True
                if time.monotonic() > end:
                    return False

    # -- the thread ----------------------------------------------------------------
    def _run(self):
        if callable(getattr(self.source, "generation", None)) or hasattr(
            self.source, "task_states"
        ):
            threading.Thread(
                target=self._guard, name=self._thread.name + "-guard", daemon=True
            ).start()
        while not self._stop.is_set():
            self._check_generation()
            try:
                it = self.source.watch(from_seq=self.last_seq + 1, kinds=self.kinds)
            except TypeError:
                it = self.source.watch(self.last_seq + 1)
            except Exception as e:  # noqa: BLE001 - the service is not reachable yet
                self._broken(e)
                continue
            self._current = it
            if self._stop.is_set():
                _end_watch(it)
                break
            try:
                for event in it:
                    if self._stop.is_set():
                        break
                    self._deliver(event)
            except Exception as e:  # noqa: BLE001 - a broken stream: resume later
                if not self._stop.is_set():
                    self._broken(e)
                continue
            finally:
                self._current = None
            if self.until is not None and self.until():
                self._stop.set()
            elif not self._stop.is_set():
                self._stop.wait(self.retry_s)  # the stream ended: look again

    # A restarted service (its task was killed and came back) numbers its events
    # from 1 again: following it from where we were would skip them all.
    def _generation(self):
        fn = getattr(self.source, "generation", None)
        if callable(fn):
            return fn()
        address = getattr(self.source, "address", None)
        for r in self.source.task_states():
            if address and r.address == address:
                return r.incarnation
        return None

    def _check_generation(self) -> bool:
        try:
            gen = self._generation()
        except Exception:  # noqa: BLE001 - not reachable: the stream will say so
            return False
        if gen is None:
            return False
        old, self._gen = self._gen, gen
        if old is not None and gen != old:
            with self._lock:
                self.last_seq = 0
                self.restarts += 1
            return True
        return False

    def _guard(self):
        while not self._stop.wait(self.guard_s):
            if self._current is not None and self._check_generation():
                _end_watch(self._current)  # reopen from the new service's start

    def _broken(self, error):
        self.errors += 1
        if self.until is not None and self.until():
            self._stop.set()  # the cluster is gone: nothing more will come
            return
        _log.debug("event stream broken (%s); retrying", error)
        self._stop.wait(self.retry_s)

    def _deliver(self, event):
        seq = int(event.seq)
        if seq <= self.last_seq:
            return  # already delivered (a resumed stream repeats nothing new)
        if self.kinds is None and self.last_seq and seq > self.last_seq + 1:
            self.gaps += seq - self.last_seq - 1
        with self._lock:
            subscribers = list(self._subscribers)
        for fn in subscribers:
            try:
                fn(event)
            except Exception:  # noqa: BLE001 - one bad subscriber must not stop others
                _log.exception("nbdist event subscriber %r failed", fn)
        with self._lock:
            self.last_seq = seq
            self.delivered += 1
            self._lock.notify_all()


def _end_watch(it):
    """Ends a watch iterator at once: ``cancel()`` (gRPC streams, in-process
    watches) or ``stop()`` (``CoordinationClient.watch``)."""
    for name in ("cancel", "stop"):
        fn = getattr(it, name, None)
        if fn is not None:
            try:
                fn()
            except Exception:  # noqa: BLE001, S110 - already finished
                pass
            return


class Throttle:
    """Calls ``fn()`` at most every ``interval`` seconds after ``poke()``s, and
    always once after the last poke (so the final state is always drawn).

    Its thread starts at the first poke and ends after ``idle_s`` without one
    (the next poke starts another): a view nobody closes holds no thread once
    its source falls quiet."""

    def __init__(self, fn, interval: float = 0.1, name: str = "nbdist-render",
                 idle_s: float = 5.0):
        self._fn = fn
        self._interval = interval
        self._idle_s = idle_s
        self._name = name
        self._cond = threading.Condition()
        self._dirty = False
        self._closed = False
        self._call_lock = threading.Lock()  # the thread and flush() never overlap
        self._thread: threading.Thread | None = None

    def poke(self):
        with self._cond:
            self._dirty = True
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name=self._name,
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def flush(self):
        """Calls ``fn`` now if a poke is pending (in the caller's thread)."""
        with self._cond:
            dirty, self._dirty = self._dirty, False
        if dirty:
            self._call()

    def close(self):
        with self._cond:
            self._closed = True
            thread = self._thread
            self._cond.notify()
        if thread is not None and threading.current_thread() is not thread:
            thread.join(2.0)
        self.flush()

    def _call(self):
        try:
            with self._call_lock:
                self._fn()
        except Exception:  # noqa: BLE001 - drawing must not kill the thread
            _log.exception("nbdist widget refresh failed")

    def _run(self):
        while True:
            with self._cond:
                if not self._cond.wait_for(lambda: self._dirty or self._closed,
                                           self._idle_s) or self._closed:
                    # Idle (or closed): end; a later poke starts a new thread.
                    if self._thread is threading.current_thread():
                        self._thread = None
                    return
                self._dirty = False
            self._call()
            with self._cond:  # pokes meanwhile make one call; close() ends it at once
                self._cond.wait_for(lambda: self._closed, self._interval)
