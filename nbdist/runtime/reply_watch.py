"""``ReplyWatch``: the master awaits its peers' RunGraph replies on its own
thread, after its local partition, unless the step turns out slow.

A step on one host sends RunGraph to its peers (the same-host channel sends
without waiting), runs the local partition on the caller's thread and then
reads the replies there: no pool thread per step and no handoff on the step's
path. The catch is an error: a peer's failure must cancel the local partition
at once when that partition is blocked (on a tensor, a queue) — which only a
thread reading the reply can notice. So a step whose replies are still
unclaimed after ``slow_s`` is handed to ``submit`` (the master's pool), as
every step was before: a failing peer then cancels the others within about
``slow_s``, and a fast step never pays for a watcher.

One daemon thread serves all steps of the process. It ticks every ``slow_s / 2``
while steps are pending and sleeps on an event otherwise (woken only by the
first step after an idle spell).
"""

from __future__ import annotations

import threading
import time

__all__ = ["PendingReplies", "ReplyWatch"]

_IDLE_AFTER_TICKS = 64  # ticks without a pending step before the thread sleeps


class PendingReplies:
    """The replies one step still has to read: ``(part, finish)`` pairs, taken
    once, either by the step's thread (``claim``) or by the watch."""

    __slots__ = ("_items", "_lock", "_submit", "futures", "started")

    def __init__(self, items: list, submit, started: float):
        self._items = items
        self._submit = submit
        self._lock = threading.Lock()
        self.futures: list = []  # what the watch handed to the pool
        self.started = started

    def claim(self) -> list:
        """The pairs nobody took yet (then none are left)."""
        with self._lock:
            items, self._items = self._items, []
        return items

    def hand_over(self) -> None:
        """``submit(part, finish)`` (a future) for every pair not claimed yet."""
        with self._lock:
            items, self._items = self._items, []
            self.futures.extend(self._submit(p, f) for p, f in items)


class ReplyWatch:
    """Hands the replies of steps pending longer than ``slow_s`` to their
    ``submit``."""

    def __init__(self, slow_s: float = 0.05):
        self.slow_s = slow_s
        self._pending: set[PendingReplies] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = True
        self._thread: threading.Thread | None = None
        self.handed_over = 0  # steps whose replies the pool read (for tests)

    def watch(self, items: list, submit) -> PendingReplies:
        """Starts watching a step's unread ``(part, finish)`` replies;
        ``submit(part, finish)`` reads one elsewhere (returns a future). Call
        ``done()`` when the step's own partition finished."""
        entry = PendingReplies(items, submit, time.monotonic())
        with self._lock:
            self._pending.add(entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="nbdist-reply-watch")
                self._thread.start()
            wake = self._idle
            self._idle = False
        if wake:
            self._wake.set()
        return entry

    def done(self, entry: PendingReplies) -> None:
        with self._lock:
            self._pending.discard(entry)

    def _run(self):
        tick = self.slow_s / 2
        quiet = 0
        while True:
            if self._idle:
                self._wake.wait()
                self._wake.clear()
                quiet = 0
            time.sleep(tick)
            now = time.monotonic()
            with self._lock:
                slow = [e for e in self._pending if now - e.started >= self.slow_s]
                for e in slow:
                    self._pending.discard(e)
                if self._pending or slow:
                    quiet = 0
                else:
                    quiet += 1
                    if quiet >= _IDLE_AFTER_TICKS:
                        self._idle = True
            for e in slow:
                self.handed_over += 1
                e.hand_over()
