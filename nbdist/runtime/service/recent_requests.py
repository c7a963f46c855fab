"""``RecentRequests``: a retried request (same nonzero ``request_id``) among the
last 10,000 is not executed again; the retry waits for and gets the first answer
(answers are kept up to a total of 64 MiB; a retry whose answer was dropped gets
``AbortedError``). Transport-neutral: what is kept is the handler's answer,
before any codec encodes it (``Serving.once``), so a retry may come back by
another transport; ``size_of`` says how big an answer is.

>>> recent = RecentRequests(size_of=len)
>>> calls = []
>>> recent.run(("RunStep", 7), lambda: calls.append(1) or b"answer")
b'answer'
>>> recent.run(("RunStep", 7), lambda: calls.append(1) or b"again")
b'answer'
>>> len(calls)
1
"""

from __future__ import annotations

import collections
import threading

from nbdist import errors
from nbdist.runtime.timeouts import UNBOUNDED_S

RECENT_REQUESTS = 10000
_RECENT_BYTES = 64 << 20


def message_size(response, depth: int = 3) -> int:
    """Bytes an answer holds: ``bytes``, a protobuf message, an array (its
    ``nbytes``), and the lists, tuples and dicts of them (a handler's answer,
    e.g. a RunGraph's ``(outputs, stats)``); else 0."""
    if isinstance(response, (bytes, bytearray, memoryview)):
        return len(response)
    nbytes = getattr(response, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    size = getattr(response, "ByteSize", None)
    if size is not None:
        return size()
    if depth and isinstance(response, (list, tuple, dict)):
        items = response.values() if isinstance(response, dict) else response
        return sum(message_size(v, depth - 1) for v in items)
    return 0


class _Done:
    __slots__ = ("dropped", "error", "event", "finished", "response", "size")

    def __init__(self):
        self.event = None  # made only when a retry has to wait
        self.finished = False
        self.response = None
        self.error = None  # the first run's exception, raised again for retries
        self.size = 0
        self.dropped = False


class RecentRequests:
    """The last ``capacity`` request ids and their answers (shared by every
    transport of a task: a retry may come back another way)."""

    def __init__(self, capacity: int = RECENT_REQUESTS,
                 max_bytes: int = _RECENT_BYTES, size_of=message_size):
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._size_of = size_of
        self._bytes = 0
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict = collections.OrderedDict()

    def __len__(self) -> int:
        """Request ids kept (their answers, or their runs in progress)."""
        return len(self._entries)

    def run(self, key, fn, size_of=None):
        """``fn()`` once per key; returns its answer (or re-raises its error).
        ``key`` is ``(method, request_id)``."""
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
            except Exception as e:  # noqa: BLE001 - the retry gets the same error
                entry.error = e
            finally:
                self._store(entry, size_of or self._size_of)
        else:
            if entry.event is not None:
                entry.event.wait(UNBOUNDED_S)
            if entry.dropped:
                raise errors.AbortedError(
                    None, None, f"Request {key[1]} was already executed and its "
                    "answer is no longer kept")
        if entry.error is not None:
            raise entry.error
        return entry.response

    def _store(self, entry: _Done, size_of):
        with self._lock:
            if entry.response is not None:
                entry.size = size_of(entry.response)
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


__all__ = ["RECENT_REQUESTS", "RecentRequests", "message_size"]
