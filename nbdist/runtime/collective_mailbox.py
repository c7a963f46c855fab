"""``ChunkMailbox``: where a peer's pushed all-reduce chunk meets the collective
that consumes it, with no copy in between.

A peer on this host pushes a chunk (``samehost.collective_push``); the service
thread that read it holds it as a view of the pusher's shared-memory segment and
``deliver``s it here. If the collective already waits for it (``take``), that
thread reduces (or copies) it into the collective's buffer itself; otherwise
it blocks until the collective takes it. Only then does the pusher get its
answer and may reuse its segment: a chunk is consumed exactly where it landed.

A collective that fails ``abort``s its execution: chunks waiting for it and
chunks that arrive later are refused with its error, so the pusher fails at once.
A chunk withdrawn because its pusher hung up (its run failed or was cancelled)
aborts the execution here too, so the local run fails instead of waiting.

>>> import threading
>>> from nbdist.executor.step import StepContext
>>> box = ChunkMailbox()
>>> t = threading.Thread(target=box.deliver, args=(7, "k", [1, 2], {}, 5.0,
...                                                 threading.Event()))
>>> t.start()
>>> box.take(StepContext(1), 7, "k", lambda v, meta: sum(v), "a chunk")
3
>>> t.join()
"""

from __future__ import annotations

import collections
import threading
import time

from nbdist import errors

__all__ = ["ChunkMailbox"]

_ABORTED_KEPT = 1024  # failed executions remembered, for chunks that come late


class _Slot:
    __slots__ = ("done", "error", "meta", "result", "value")

    def __init__(self, value, meta: dict):
        self.value = value
        self.meta = meta
        self.done = False
        self.result = None
        self.error: BaseException | None = None


class _Taker:
    __slots__ = ("consume", "done", "error", "result", "what")

    def __init__(self, consume, what: str):
        self.consume = consume
        self.what = what
        self.done = False
        self.result = None
        self.error: BaseException | None = None


class ChunkMailbox:
    """Pushed chunks by ``(exec_id, key)`` until their collective consumes them."""

    def __init__(self):
        self._cond = threading.Condition()
        self._slots: dict[tuple[int, str], _Slot] = {}
        self._takers: dict[tuple[int, str], _Taker] = {}
        self._aborted: collections.OrderedDict[int, errors.OpError] = (
            collections.OrderedDict())

    def deliver(self, exec_id: int, key: str, value, meta: dict, timeout_s: float,
                hung_up: threading.Event) -> None:
        """Leaves ``value`` for ``take`` and blocks until it was consumed; raises
        the consumer's error, the execution's abort, ``DeadlineExceededError``
        after ``timeout_s``, or ``CancelledError`` once ``hung_up`` is set (the
        pusher went away)."""
        slot = _Slot(value, meta)
        name = (exec_id, key)
        end = time.monotonic() + timeout_s
        with self._cond:
            if exec_id in self._aborted:
                raise self._aborted[exec_id]
            # Looked for and left in one hold of the lock: a taker arriving in
            # between would wait for a chunk no one hands it (a ring hung so).
            taker = self._takers.pop(name, None)
            if taker is None:
                if name in self._slots:
                    raise errors.InvalidArgumentError(
                        None, None, f"collective chunk {key} was pushed twice")
                self._slots[name] = slot
                self._cond.notify_all()
        if taker is not None:  # the collective waits for it: consumed right here
            self._consume(taker, slot)
            if slot.error is not None:
                raise slot.error
            return
        with self._cond:
            while not slot.done:
                error = None
                if exec_id in self._aborted:
                    error = self._aborted[exec_id]
                elif hung_up.is_set():
                    error = errors.CancelledError(
                        None, None, f"the pusher of collective chunk {key} went away")
                elif time.monotonic() >= end:
                    error = errors.DeadlineExceededError(
                        None, None, f"collective chunk {key} was not taken within "
                        f"{timeout_s:.1f} s")
                if error is not None and self._slots.get(name) is slot:
                    del self._slots[name]  # not taken: withdrawn
                    if hung_up.is_set() and exec_id not in self._aborted:
                        # The pusher's run failed or was cancelled: this task's
                        # run of it can never complete (it would wait for a
                        # chunk no one sends again).
                        self._abort_locked(exec_id, errors.CancelledError(
                            None, None, f"collective chunk {key} was withdrawn: "
                            "its sender's run of this collective failed or was "
                            "cancelled"))
                    raise error
                self._cond.wait(min(0.25, max(0.0, end - time.monotonic())))
        if slot.error is not None:
            raise slot.error

    def take(self, step, exec_id: int, key: str, consume, what: str):
        """``consume(value, meta)`` of the chunk pushed under ``(exec_id, key)``,
        waited for under ``step``'s cancellation and deadlines; the pusher is
        answered when it returns (with its error if it raised).

        Raises:
          DeadlineExceededError: the step's time ran out first: it names
            ``what`` (the collective and the peer) and the chunk's ``key``.
        """
        name = (exec_id, key)
        with self._cond:
            slot = self._slots.pop(name, None)
            if slot is None:
                if exec_id in self._aborted:
                    raise self._aborted[exec_id]
                # Waits for it: the service thread that reads it consumes it
                # (one thread hand-off less on the ring's critical path).
                taker = self._takers[name] = _Taker(consume, what)
                try:
                    # Bounded by the step: its deadline, its op timeout, its
                    # cancellation (the watchdog's, when a member died), or
                    # this execution's abort (a pusher hung up).
                    step.wait(lambda: taker.done or (
                        exec_id in self._aborted and name in self._takers),
                        f"{what} (collective chunk {key})", self._cond.wait)
                finally:
                    if self._takers.get(name) is taker:
                        del self._takers[name]
                if not taker.done:
                    raise self._aborted[exec_id]
                if taker.error is not None:
                    raise taker.error
                return taker.result
        self._consume(_Taker(consume, what), slot)
        if slot.error is not None:
            raise slot.error
        return slot.result

    def _consume(self, taker: _Taker, slot: _Slot) -> None:
        """``taker``'s consume of ``slot``; both learn its outcome."""
        try:
            slot.result = taker.result = taker.consume(slot.value, slot.meta)
        except BaseException as e:  # noqa: BLE001 - handed to both sides
            slot.error = taker.error = e if isinstance(e, errors.OpError) else (
                errors.InternalError(None, None,
                                     f"{taker.what}: {type(e).__name__}: {e}"))
        finally:
            slot.value = None  # the pusher's segment is its own again
            with self._cond:
                slot.done = taker.done = True
                self._cond.notify_all()

    def abort(self, exec_id: int, error: errors.OpError) -> None:
        """Refuses the chunks of ``exec_id``, waiting and to come, with ``error``."""
        with self._cond:
            self._abort_locked(exec_id, error)

    def _abort_locked(self, exec_id: int, error: errors.OpError) -> None:
        self._aborted[exec_id] = error
        while len(self._aborted) > _ABORTED_KEPT:
            self._aborted.popitem(last=False)
        self._cond.notify_all()

    def poke(self) -> None:
        """Wakes waiting deliveries (a pusher hung up)."""
        with self._cond:
            self._cond.notify_all()
