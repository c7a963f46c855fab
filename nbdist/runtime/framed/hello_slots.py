"""``HelloSlots``: room for connections that have not proved the cluster's
secret yet, apart from the room of those that have.

A connection holds a thread from its accept, and until its handshake ends
nothing says it is a peer. Unproven connections get few slots per source
(a TCP peer's address, a Unix peer's uid), and when a source's slots or all
of them are taken the oldest unproven connection is shut to make room: a
flood of idle connections (from the address a peer uses too, as on one host)
cannot keep a peer's new connection out, and a proven connection never
counts here. A connection still unproven ``deadline_s`` after its accept is
shut when a new one comes (a silent one is also shut by its own read timeout).

>>> slots = HelloSlots(per_source=1, total=4, deadline_s=5.0)
>>> slots.enter("a", "tcp:10.0.0.1")
[]
>>> slots.enter("b", "tcp:10.0.0.1")  # the oldest of that source makes room
['a']
>>> slots.leave("b"); slots.leave("a"); len(slots)
0
"""

from __future__ import annotations

import collections
import threading
import time

__all__ = ["HelloSlots"]


class HelloSlots:
    """Unproven connections by source, oldest first (thread-safe)."""

    __slots__ = ("_by_source", "_lock", "_order", "deadline_s", "per_source", "total")

    def __init__(self, per_source: int, total: int, deadline_s: float):
        self.per_source = per_source
        self.total = total
        self.deadline_s = deadline_s
        self._order: collections.OrderedDict = collections.OrderedDict()
        self._by_source: collections.Counter = collections.Counter()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._order)

    def enter(self, conn, source: str) -> list:
        """Takes a slot for ``conn``; returns the connections to shut for it
        (past their deadline; the oldest of its source, or of all, when they
        are full)."""
        now = time.monotonic()
        evicted = []
        with self._lock:
            for old, (_, since) in self._order.items():
                if now - since < self.deadline_s:
                    break
                evicted.append(old)
            if self._by_source[source] - sum(
                    self._order[c][0] == source for c in evicted) >= self.per_source:
                evicted.append(next(c for c, (s, _) in self._order.items()
                                    if s == source and c not in evicted))
            if len(self._order) - len(evicted) >= self.total:
                evicted.append(next(c for c in self._order if c not in evicted))
            for old in evicted:
                self._drop(old)
            self._order[conn] = (source, now)
            self._by_source[source] += 1
        return evicted

    def leave(self, conn) -> None:
        """``conn`` proved itself, was refused or went away."""
        with self._lock:
            self._drop(conn)

    def _drop(self, conn) -> None:
        entry = self._order.pop(conn, None)
        if entry is not None:
            source = entry[0]
            self._by_source[source] -= 1
            if not self._by_source[source]:
                del self._by_source[source]
