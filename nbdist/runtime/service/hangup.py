"""``HangupWatch``: a step whose caller went away is cancelled, whichever
transport the call came by. The codec says how it learns that its caller left
(``on_hangup(fn) -> bool``: grpc's ``context.add_callback``; the same-host
transport's epoll watch of the connection)."""

from __future__ import annotations

import threading
from typing import Callable

from nbdist import errors

__all__ = ["HangupWatch", "OnHangup"]

# Registers fn to run when the caller goes away; False when it already has.
OnHangup = Callable[[Callable[[], None]], bool]


class HangupWatch:
    """Cancels the step of a call whose caller went away: ``started(step_id)``
    when the step has an id (raises ``CancelledError`` if the caller is already
    gone), ``finished()`` when it ended."""

    __slots__ = ("_cancel", "_finished", "_gone", "_lock", "_step_id", "_who")

    def __init__(self, on_hangup: OnHangup | None, cancel, who: str = "client"):
        self._lock = threading.Lock()
        self._step_id = None
        self._finished = False
        self._gone = False
        self._cancel = cancel  # cancel(step_id, error)
        self._who = who
        if on_hangup is not None and not on_hangup(self._on_hangup):
            self._gone = True

    def started(self, step_id: int):
        with self._lock:
            if self._gone:
                raise errors.CancelledError(
                    None, None, f"The {self._who} of this step went away before "
                    "it started (its call was cancelled)")
            self._step_id = step_id

    def finished(self):
        with self._lock:
            self._finished = True

    def _on_hangup(self):
        with self._lock:
            self._gone = True
            step_id = None if self._finished else self._step_id
        if step_id is not None:
            self._cancel(step_id, errors.CancelledError(
                None, None, f"The {self._who} of this step went away (its call "
                "was cancelled); the step was cancelled"))
