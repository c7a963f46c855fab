"""Per-step state: feeds, fetches, cancellation, deadline, step stats."""

from __future__ import annotations

import time

from nbdist import errors

_POLL_S = 0.02  # how often a blocked op re-checks cancellation and its deadline


class StepContext:
    """One run of one graph on one task."""

    __slots__ = (
        "_cancel_error",
        "_cancelled",
        "_on_cancel",
        "deadline",
        "feeds",
        "fetches",
        "node_name",
        "op_timeout_s",
        "recv_extras",
        "stats",
        "step_id",
        "trace",
    )

    def __init__(self, step_id: int, feeds=None, deadline: float | None = None,
                 trace: bool = False, op_timeout_s: float | None = None):
        self.step_id = step_id
        self.feeds = feeds if feeds is not None else {}
        self.fetches: dict = {}
        self.deadline = deadline  # time.monotonic() bound for the whole step
        self.op_timeout_s = op_timeout_s  # operation_timeout_in_ms for blocking ops
        self.trace = trace
        self.stats: list | None = [] if trace else None
        self._cancel_error: errors.OpError | None = None
        self._cancelled = False  # a flag, not an Event: nothing waits on it
        self._on_cancel: list | None = None
        self.node_name = ""
        # Tensors a remote pull brought along for later _Recvs of this step
        # (runtime.tensor_store.StepExtras).
        self.recv_extras: dict | None = None

    def cancel(self, error: errors.OpError | None = None):
        if self._cancel_error is None:
            self._cancel_error = error or errors.CancelledError(
                None, None, "Step was cancelled")
        self._cancelled = True
        callbacks, self._on_cancel = self._on_cancel or [], None
        for fn in callbacks:
            fn()

    def add_cancel_callback(self, fn) -> bool:
        """Calls ``fn()`` once if the step is cancelled (an RPC in flight for it
        cancels itself). False, and no call, when it already is."""
        if self._on_cancel is None:
            self._on_cancel = []
        self._on_cancel.append(fn)
        if self._cancelled:  # cancelled meanwhile: cancel() may have run
            return False
        return True

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def check(self):
        if self._cancelled:
            raise self._cancel_error
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise errors.DeadlineExceededError(
                None, self.node_name, "Timed out waiting for the step to finish")

    def wait(self, ready, what: str, wait_fn):
        """Blocks until ``ready()``; ``wait_fn(timeout)`` sleeps until a change.

        Honours cancellation, the step deadline and ``operation_timeout_in_ms``.
        """
        start = time.monotonic()
        op_deadline = start + self.op_timeout_s if self.op_timeout_s else None
        while not ready():
            if self._cancelled:
                raise self._cancel_error
            now = time.monotonic()
            for d in (self.deadline, op_deadline):
                if d is not None and now > d:
                    raise errors.DeadlineExceededError(
                        None, self.node_name,
                        f"Timed out after {(now - start) * 1000:.0f} ms waiting for "
                        f"{what}")
            bound = _POLL_S
            for d in (self.deadline, op_deadline):
                if d is not None:
                    bound = min(bound, max(0.0, d - now) + 0.001)
            wait_fn(bound)
