"""The runtime's timeouts and the one way milliseconds become seconds.

Every transport and every service reads its bounds from here, so that a call
means the same thing whichever way it travels:

- ``UNBOUNDED_S``: a week, what "no timeout" means for anything that waits (a
  step may block on a queue, not forever; beyond a week the platform's wait
  primitives overflow);
- ``CONTROL_TIMEOUT_S``: cheap control calls (sessions, graphs, cleanup,
  key-value writes);
- ``STATUS_TIMEOUT_S``: a ``get_status`` whose caller gives no timeout.

>>> seconds_from_ms(1500), seconds_from_ms(0), seconds_from_ms(-1)
(1.5, None, None)
>>> clamp_ms(10**12) == int(UNBOUNDED_S * 1000)
True

Plain conversions, for durations and intervals that are not ``*_in_ms``
timeouts (no clamping, no "0 means none"):

>>> ms_as_seconds(250), seconds_as_ms(0.5), whole_ms(0.0004), whole_ms(2.5)
(0.25, 500.0, 1, 2500)
"""

from __future__ import annotations

import time

UNBOUNDED_S = 7 * 86400.0
MAX_TIMEOUT_MS = int(UNBOUNDED_S * 1000)
CONTROL_TIMEOUT_S = 30.0
STATUS_TIMEOUT_S = 10.0


def clamp_ms(ms: int) -> int:
    """A timeout beyond a week is no timeout at all: cut it to a week."""
    return MAX_TIMEOUT_MS if ms > MAX_TIMEOUT_MS else ms


def seconds_from_ms(ms: int) -> float | None:
    """A ``*_in_ms`` field as seconds: None (no timeout) when not positive; a
    week at most."""
    return clamp_ms(ms) / 1000.0 if ms > 0 else None


def ms_from_seconds(timeout_s: float | None) -> int:
    """The other way round: 0 (no timeout) for None or 0; at least 1 ms."""
    return whole_ms(timeout_s) if timeout_s else 0


def ms_as_seconds(ms: float) -> float:
    """Milliseconds as seconds, exactly (an interval, a wait: not a timeout
    field, whose 0 means none; see ``seconds_from_ms``)."""
    return ms / 1000.0


def seconds_as_ms(seconds: float) -> float:
    """Seconds as milliseconds, exactly (a duration to report or compare)."""
    return seconds * 1000.0


def whole_ms(seconds: float) -> int:
    """A bound in seconds as whole milliseconds for a wire field, at least 1
    (0 would mean "no timeout" there)."""
    return max(1, int(seconds * 1000))


def step_time_left(step) -> float:
    """Seconds a wait inside ``step`` (an ``executor.StepContext``) may take: the
    least of what is left of its deadline and its per-op timeout; at least 1 ms;
    ``UNBOUNDED_S`` when it has neither."""
    left = []
    if step.deadline is not None:
        left.append(step.deadline - time.monotonic())
    if step.op_timeout_s:
        left.append(step.op_timeout_s)
    return max(min(left), 0.001) if left else UNBOUNDED_S


def left_or_unbounded(left: float | None) -> float:
    """A caller's remaining time (None: it set no deadline) as a bound."""
    return left if left is not None else UNBOUNDED_S


__all__ = ["CONTROL_TIMEOUT_S", "MAX_TIMEOUT_MS", "STATUS_TIMEOUT_S", "UNBOUNDED_S",
           "clamp_ms", "left_or_unbounded", "ms_as_seconds", "ms_from_seconds",
           "seconds_as_ms", "seconds_from_ms", "step_time_left", "whole_ms"]
