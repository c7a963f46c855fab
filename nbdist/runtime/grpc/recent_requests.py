"""``RecentRequests``: a retried request (same nonzero ``request_id``) among the
last 10,000 is not executed again; the retry waits for and gets the first answer
(answers are kept up to a total of 64 MiB; a retry whose answer was dropped gets
``ABORTED``)."""

from __future__ import annotations

import collections
import threading

import grpc
from nbdist.runtime.grpc.wire import StatusError
from nbdist.runtime.timeouts import UNBOUNDED_S

RECENT_REQUESTS = 10000
_RECENT_BYTES = 64 << 20


def message_size(response) -> int:
    return len(response) if isinstance(response, bytes) else response.ByteSize()


class _Done:
    __slots__ = ("dropped", "error", "event", "finished", "response", "size")

    def __init__(self):
        self.event = None  # made only when a retry has to wait
        self.finished = False
        self.response = None
        self.error = None  # (grpc.StatusCode, message)
        self.size = 0
        self.dropped = False


class RecentRequests:
    """The last ``capacity`` request ids and their answers."""

    def __init__(
        self, capacity: int = RECENT_REQUESTS, max_bytes: int = _RECENT_BYTES
    ):
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict = collections.OrderedDict()

    def run(self, key, fn):
        """``fn()`` once per key; returns its answer (or re-raises its error)."""
        with self._lock:
            entry = self._entries.get(key)
            first = entry is None
            if first:
                entry = self._entries[key] = _Done()
                while len(self._entries) > self._capacity:
                    _, old = self._entries.popitem(last=False)
                    self._bytes -= old.size
            elif not entry.finished and entry.event is None:
                entry.event = threading.Event()
        if first:
            try:
                entry.response = fn()
            except StatusError as e:
                entry.error = (e.code, e.message)
            finally:
                self._store(entry)
        else:
            if entry.event is not None:
                entry.event.wait(UNBOUNDED_S)
            if entry.dropped:
                raise StatusError(
                    grpc.StatusCode.ABORTED,
                    f"Request {key[1]} was already executed and its "
                    "answer is no longer kept",
                )
        if entry.error is not None:
            raise StatusError(*entry.error)
        return entry.response

    def _store(self, entry: _Done):
        with self._lock:
            if entry.response is not None:
                entry.size = message_size(entry.response)
                self._bytes += entry.size
            if self._bytes > self._max_bytes:
                for old in self._entries.values():
                    if self._bytes <= self._max_bytes:
                        break
                    if old.size and old.finished:
                        self._bytes -= old.size
                        old.size, old.response, old.dropped = 0, None, True
            entry.finished = True
            event = entry.event
        if event is not None:
            event.set()


__all__ = ["RECENT_REQUESTS", "RecentRequests"]
