"""``Tap``: every call and tensor between the tasks of a cluster, as events.

A server's ``runtime.router.PeerRouter`` wraps every peer client and its
tensor transport with the server's tap, so whatever transport a call takes
(gRPC, same-host), a subscriber sees one ``TapEvent`` per call: its kind
(``RunGraph``, ``AbortStep``, ``RecvTensor``, ``collective`` (one ring chunk),
``PullTensor``), source and destination task, step id, tensor bytes moved, and
start and end (``time.monotonic``). Nobody listening costs one check of the
subscriber tuple per call.

The other calls between tasks (``GetStatus``, ``CreateWorkerSession``,
``RegisterGraph``, ``CleanupGraph``, ...) are ``"control"`` events, their
call's name in ``method``; only subscribers that ask for them
(``subscribe(fn, control=True)``) get them, so views of a step's traffic see
what they always saw and nobody asking costs one check per call.

>>> tap = Tap()
>>> seen = []
>>> stop = tap.subscribe(seen.append)
>>> tap.emit(TapEvent("RunGraph", "/job:a", "/job:b", 7, 8, 0.0, 0.001))
>>> seen[0].kind, seen[0].nbytes
('RunGraph', 8)
>>> stop()
>>> tap.listening
False
>>> stop = tap.subscribe(seen.append, control=True)
>>> tap.emit(TapEvent(CONTROL, "/job:a", "/job:b", 0, 0, 0.0, 0.001,
...                   "RegisterGraph"))
>>> seen[-1].method
'RegisterGraph'
>>> stop()
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["CONTROL", "Tap", "TapEvent", "nbytes_of"]

CONTROL = "control"  # the kind of a control call's event (opt-in: subscribe)


class TapEvent(NamedTuple):
    kind: str
    source: str  # the task that sends the call (or the tensor's producer)
    destination: str
    step: int
    nbytes: int  # tensor bytes carried, both directions
    start: float
    end: float
    method: str = ""  # a "control" event's call (RegisterGraph, GetStatus, ...)


def nbytes_of(values) -> int:
    """Tensor bytes of an iterable of values (non-arrays count 0)."""
    return sum(int(getattr(v, "nbytes", 0)) for v in values)


class Tap:
    """Subscribers of one task's calls to its peers."""

    def __init__(self):
        self._subscribers: tuple = ()
        self._control: tuple = ()  # those that asked for control events too
        self._lock = threading.Lock()

    @property
    def listening(self) -> bool:
        return bool(self._subscribers)

    @property
    def listening_control(self) -> bool:
        """Whether anyone takes ``"control"`` events."""
        return bool(self._control)

    def subscribe(self, fn: Callable[[TapEvent], None],
                  control: bool = False) -> Callable[[], None]:
        """Calls ``fn(event)`` for every event from now on (on the thread that
        made the call: keep it quick), control calls' too when ``control``;
        returns what unsubscribes it."""
        with self._lock:
            self._subscribers = (*self._subscribers, fn)
            if control:
                self._control = (*self._control, fn)

        def unsubscribe():
            with self._lock:
                self._subscribers = _without(self._subscribers, fn)
                self._control = _without(self._control, fn)

        return unsubscribe

    def emit(self, event: TapEvent) -> None:
        for fn in self._control if event.kind == CONTROL else self._subscribers:
            fn(event)


def _without(subscribers: tuple, fn) -> tuple:
    subs = list(subscribers)
    if fn in subs:
        subs.remove(fn)
    return tuple(subs)
