"""``LocalCoordinationClient``: the coordination service of this process through
the same interface as the gRPC client (``interfaces.CoordinationClient``), with
no RPC. The leader task's own agent uses it, as TF's leader calls its service
directly.
"""

from __future__ import annotations

import collections
import threading
import time

from nbdist import errors
from nbdist.runtime.coordination.service import CoordinationService, Event
from nbdist.runtime.timeouts import CONTROL_TIMEOUT_S

# How often a blocked watch looks at its stop flag (the service has no per-reader
# wake-up; ``stop()`` also wakes every waiter through the service's condition).
_WATCH_SLICE_S = 0.5


class LocalCoordinationClient:
    """Calls ``service`` directly; ``task`` is who this client speaks for."""

    in_process = True

    def __init__(self, service: CoordinationService, task: str | None = None):
        self.service = service
        self.task = task

    def register_task(self, task: str, incarnation: int, address: str = "",
                      pid: int = 0, timeout_s: float | None = None,
                      wait_for_ready: bool = False) -> tuple[int, int]:
        return self.service.register_task(task, incarnation, address, pid), 0

    def heartbeat(self, task: str, incarnation: int, steps_served: int = 0,
                  timeout_s: float | None = None, retry_connect: bool = True,
                  cpu_seconds: float | None = None) -> int:
        return self.service.heartbeat(task, incarnation, steps_served, cpu_seconds)

    def report_error(self, task: str, code: int, message: str) -> None:
        self.service.report_error(task, code, message)

    def task_states(self, tasks=None, timeout_s: float | None = None) -> list:
        return self.service.task_states(tasks)

    def barrier(self, barrier_id: str, timeout_s: float, tasks=None,
                source_task: str | None = None, should_cancel=None) -> int:
        task = source_task or self.task
        if not task:
            raise ValueError("barrier() needs source_task (or a client task)")
        return self.service.barrier(barrier_id, timeout_s, tasks, task,
                                    should_cancel or (lambda: False))

    def cancel_barrier(self, barrier_id: str, source_task: str | None = None):
        self.service.cancel_barrier(barrier_id, source_task or self.task or "")

    def insert(self, key: str, value, allow_overwrite: bool = False) -> None:
        if isinstance(value, str):
            value = value.encode()
        self.service.insert(key, bytes(value), allow_overwrite)

    def get(self, key: str, timeout_s: float = CONTROL_TIMEOUT_S) -> bytes:
        return self.service.get(key, timeout_s)

    def try_get(self, key: str) -> bytes | None:
        return self.service.try_get(key)

    def delete(self, key: str) -> None:
        self.service.delete(key)

    def publish_events(self, events, timeout_s: float = CONTROL_TIMEOUT_S,
                       retry_connect: bool = True) -> int:
        """``(kind, task, payload, wall_time_us)`` tuples or ``Event``s."""
        return self.service.publish_many(
            (e.kind, e.task, e.payload, e.wall_time_us) if isinstance(e, Event)
            else e for e in events)

    def watch(self, from_seq: int = 0, kinds=None,
              owns_client: bool = False) -> LocalEventWatch:
        return LocalEventWatch(self.service, from_seq, kinds)

    def close(self) -> None:
        """Nothing to release: the service belongs to its server."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class LocalEventWatch:
    """The service's events from ``from_seq`` on, as ``EventWatch`` offers them."""

    def __init__(self, service: CoordinationService, from_seq: int = 0, kinds=None):
        self._service = service
        self._seq = max(int(from_seq), 0)
        self._kinds = list(kinds or [])
        self._buffer: collections.deque = collections.deque()
        self._stopped = threading.Event()
        self.last_seq = 0

    def _fill(self, timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        while not self._buffer:
            left = end - time.monotonic()
            if left <= 0 or self._stopped.is_set() or self._service.stopped:
                return False
            events, self._seq = self._service.wait_events_from(
                self._seq, min(left, _WATCH_SLICE_S), self._kinds)
            self._buffer.extend(events)
        return True

    def next(self, timeout: float | None = None) -> Event | None:
        """The next event, or None when none arrives within ``timeout``."""
        if not self._fill(CONTROL_TIMEOUT_S * 1e4 if timeout is None else timeout):
            return None
        event = self._buffer.popleft()
        self.last_seq = event.seq
        return event

    def __iter__(self):
        return self

    def __next__(self) -> Event:
        event = self.next()
        if event is None:
            raise StopIteration
        return event

    def wait_for(self, predicate, timeout: float) -> Event:
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            event = self.next(left)
            if event is not None and predicate(event):
                return event
        raise errors.DeadlineExceededError(
            None, None, f"No matching event within {timeout:.1f} s "
            f"(last sequence number {self.last_seq})")

    def stop(self) -> None:
        self._stopped.set()

    close = stop

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


__all__ = ["LocalCoordinationClient", "LocalEventWatch"]
