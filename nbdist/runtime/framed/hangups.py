"""``Hangups``: one thread that notices a framed connection's hang-up (its
client died or gave up), so the step that connection waits for is cancelled,
as a gRPC call's end cancels it."""

from __future__ import annotations

import os
import select
import threading

__all__ = ["Hangups"]


class Hangups:
    """Calls a connection's ``fn`` when it hangs up (its client died or gave
    up): the step it waits for is cancelled, as a gRPC call's end cancels it.
    A connection is watched from its hello to its end; a call only sets its
    ``fn`` (``on_hangup``: a dict store, no system call per step). An ``fn``
    left by a finished call is harmless: its ``HangupWatch`` has finished."""

    def __init__(self):
        self._poll = select.epoll()
        self._wake_r, self._wake_w = os.pipe()
        self._poll.register(self._wake_r, select.EPOLLIN)
        self._fns: dict[int, object] = {}
        self._gone: set[int] = set()  # watched connections that hung up
        self._watched: set[int] = set()
        self._lock = threading.Lock()  # taken per connection, not per call
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="nbdist-framed-hangups")
        self._thread.start()

    def watch(self, conn):
        """Watches ``conn`` until ``unwatch``; its ``on_hangup(fn) -> True``."""
        fd = conn.fileno()
        fns, gone = self._fns, self._gone
        with self._lock:
            self._watched.add(fd)
            gone.discard(fd)
            self._poll.register(fd, select.EPOLLRDHUP | select.EPOLLHUP)

        def on_hangup(fn) -> bool:  # False: it hung up already
            fns[fd] = fn
            return fd not in gone  # _run marks it gone before taking its fn
        return on_hangup

    def unwatch(self, conn) -> None:
        """Before ``conn`` closes (its fd may be reused)."""
        fd = conn.fileno()
        with self._lock:
            self._watched.discard(fd)
            self._fns.pop(fd, None)
            self._gone.discard(fd)
            try:
                self._poll.unregister(fd)
            except (OSError, ValueError):
                pass

    def _run(self):
        while True:
            for fd, _ in self._poll.poll():
                if fd == self._wake_r:
                    os.close(self._wake_r)
                    self._poll.close()
                    return
                with self._lock:
                    if fd not in self._watched or not _hung_up(fd):
                        # Unwatched since the poll, or its number now belongs
                        # to a new connection (the old one closed meanwhile).
                        continue
                    self._gone.add(fd)
                    fn = self._fns.pop(fd, None)
                    try:
                        self._poll.unregister(fd)
                    except (OSError, ValueError):
                        pass
                if fn is not None:
                    fn()

    def close(self):
        os.write(self._wake_w, b"x")
        os.close(self._wake_w)


def _hung_up(fd: int) -> bool:
    """Whether the connection on ``fd`` has hung up, now."""
    probe = select.poll()
    probe.register(fd, select.POLLRDHUP | select.POLLHUP)
    return bool(probe.poll(0))
