"""``Tap``: every call and tensor between the tasks of a cluster, as events.

A server's ``runtime.router.PeerRouter`` wraps every peer client and its
tensor transport with the server's tap, so whatever transport a call takes
(gRPC, same-host), a subscriber sees one ``TapEvent`` per call: its kind
(``RunGraph``, ``AbortStep``, ``RecvTensor``, ``collective`` (one ring chunk),
``PullTensor``), source and destination task, step id, tensor bytes moved, and
start and end (``time.monotonic``). Nobody listening costs one check of the
subscriber tuple per call.

>>> tap = Tap()
>>> seen = []
>>> stop = tap.subscribe(seen.append)
>>> tap.emit(TapEvent("RunGraph", "/job:a", "/job:b", 7, 8, 0.0, 0.001))
>>> seen[0].kind, seen[0].nbytes
('RunGraph', 8)
>>> stop()
>>> tap.listening
False
"""

from __future__ import annotations

import threading
from typing import Callable, NamedTuple

__all__ = ["Tap", "TapEvent", "nbytes_of"]


class TapEvent(NamedTuple):
    kind: str
    source: str  # the task that sends the call (or the tensor's producer)
    destination: str
    step: int
    nbytes: int  # tensor bytes carried, both directions
    start: float
    end: float


def nbytes_of(values) -> int:
    """Tensor bytes of an iterable of values (non-arrays count 0)."""
    return sum(int(getattr(v, "nbytes", 0)) for v in values)


class Tap:
    """Subscribers of one task's calls to its peers."""

    def __init__(self):
        self._subscribers: tuple = ()
        self._lock = threading.Lock()

    @property
    def listening(self) -> bool:
        return bool(self._subscribers)

    def subscribe(self, fn: Callable[[TapEvent], None]) -> Callable[[], None]:
        """Calls ``fn(event)`` for every event from now on (on the thread that
        made the call: keep it quick); returns what unsubscribes it."""
        with self._lock:
            self._subscribers = (*self._subscribers, fn)

        def unsubscribe():
            with self._lock:
                subs = list(self._subscribers)
                if fn in subs:
                    subs.remove(fn)
                self._subscribers = tuple(subs)

        return unsubscribe

    def emit(self, event: TapEvent) -> None:
        for fn in self._subscribers:
            fn(event)
