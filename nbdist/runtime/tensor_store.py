"""Tensors a task holds for others to take by reference, whatever the transport.

``ParkedTensors``: large values this task hands out by reference (a fetch or a
cross-task feed too big for one message); the other side pulls them through its
``TensorTransport``. ``PushedTensors``: large client feeds pushed ahead of the
step that names them. Both are dropped after ``ttl_s`` if nobody comes, so a
client that goes away leaves nothing behind.
"""

from __future__ import annotations

import collections
import random
import threading
import time

from nbdist import errors
from nbdist.executor.rendezvous import make_key

PARK_TTL_S = 300.0
_CLIENT_TASK = "/job:client/replica:0/task:0"


class ParkedTensors:
    """Values parked in ``worker``'s rendezvous under step ids of their own."""

    def __init__(self, worker, ttl_s: float = PARK_TTL_S):
        self._worker = worker
        self._ttl_s = ttl_s
        self._lock = threading.Lock()
        self._parked: collections.deque = collections.deque()

    def park(self, value) -> tuple[str, int]:
        """Parks ``value``; returns the (rendezvous key, step id) to pull it."""
        w = self._worker
        step_id = random.getrandbits(62) | 1
        key = make_key(w.devices[0], w.incarnation, _CLIENT_TASK, f"_park/{step_id:x}")
        now = time.monotonic()
        with self._lock:
            expired = []
            while self._parked and self._parked[0][0] < now - self._ttl_s:
                expired.append(self._parked.popleft()[1])
            self._parked.append((now, step_id))
        for old in expired:
            w.rendezvous.cleanup(old)
        w.rendezvous.send(step_id, key, value)
        return key, step_id


class PushedTensors:
    """Values clients pushed for the step that feeds them by reference; one step
    takes each."""

    def __init__(self, worker, ttl_s: float = PARK_TTL_S):
        self._worker = worker
        self._ttl_s = ttl_s
        self._lock = threading.Lock()
        self._items: collections.OrderedDict = collections.OrderedDict()

    def put(self, push_id: int, value) -> str:
        """Keeps ``value``; returns the key a feed names it by."""
        w = self._worker
        key = make_key(w.devices[0], w.incarnation, _CLIENT_TASK,
                       f"_push/{push_id & 0xFFFFFFFFFFFFFFFF:x}")
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            self._items.pop(key, None)
            self._items[key] = (now, push_id, value)
        return key

    def _expire(self, now: float):
        while self._items:
            first = next(iter(self._items.values()))
            if first[0] >= now - self._ttl_s:
                break
            self._items.popitem(last=False)

    def take(self, key: str, push_id: int):
        """The value pushed as ``push_id`` under ``key`` (removed from here)."""
        with self._lock:
            self._expire(time.monotonic())
            item = self._items.get(key)
            if item is not None and item[1] == push_id:
                del self._items[key]
                return item[2]
        raise errors.InvalidArgumentError(
            None, None, "Malformed RunStep request: feeds must be sent inline or pushed with "
            f"PushTensors first; no pushed tensor {key[:200]!r} (already used, or "
            "expired)")

    def __len__(self) -> int:
        return len(self._items)


__all__ = ["PARK_TTL_S", "ParkedTensors", "PushedTensors"]
