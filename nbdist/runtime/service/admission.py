"""Admission control, for every transport: each class of call has a bound on
the calls it admits, so that calls which block by design (a barrier, a key
nobody has set yet, an event stream) can never take the threads that steps need.

=========  ==========================================  =======  =======
class      methods                                     threads  waiting
=========  ==========================================  =======  =======
step       RunStep, RunGraph, RecvTensor(Unary),       256      1024
           PushTensors
blocking   Barrier, GetKeyValue, WatchEvents           128      0
control    every other method (sessions, graphs,       32       1024
           heartbeats, key-value writes, ...)
=========  ==========================================  =======  =======

A class serves ``threads`` calls at once; up to ``waiting`` more wait for a
thread, without holding one. A call beyond that is refused at once with
``ResourceExhaustedError`` naming the class and its bound. Blocking calls never
wait: a waiting barrier arrival could only be admitted once another ends, which
may be never. One ``Admission`` serves all the transports of a task (the caps
are the task's), and these rules live here only: a codec asks ``enter(method)``
(or ``admit(method)``) before it reads a request where it can, and
``refused(method)`` where it can only look (gRPC's interceptor, on its poller
thread, runs each class on a pool of its own: ``runtime/grpc/admission.py``).
A codec that reads nothing (the in-process transport) lets the handlers admit
(``Serving.call``).

Deadlines: a call that starts after waiting learns how long it waited
(``queued_s``): RunStep and RunGraph count their ``timeout_in_ms`` from the
call's arrival, not from its start.

>>> admission = Admission("/job:w/replica:0/task:0")
>>> admission.class_of("RunGraph").call_class.name
'step'
>>> with admission.admit("GetStatus"):
...     admission.class_of("GetStatus").in_flight
1
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from dataclasses import dataclass

from nbdist import errors

__all__ = ["CALL_CLASSES", "Admission", "CallClass", "ClassCount", "arrived_at",
           "queued_s"]


@dataclass(frozen=True)
class CallClass:
    """A class of methods and the bounds of its admission."""

    name: str
    threads: int  # calls served at once
    waiting: int  # calls admitted beyond those, waiting for a thread
    methods: frozenset = frozenset()  # empty: every method of no other class


CALL_CLASSES = (
    CallClass("step", 256, 1024, frozenset(
        {"RunStep", "RunGraph", "RecvTensor", "RecvTensorUnary", "PushTensors"})),
    CallClass("blocking", 128, 0, frozenset({"Barrier", "GetKeyValue", "WatchEvents"})),
    CallClass("control", 32, 1024),
)

_arrival: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "nbdist_call_arrival", default=None)


def arrived_at(when: float) -> None:
    """Tells ``queued_s`` when the call being served on this thread arrived."""
    _arrival.set(when)


def queued_s() -> float:
    """Seconds the call being served waited between its arrival and its start."""
    arrived = _arrival.get()
    return 0.0 if arrived is None else max(time.monotonic() - arrived, 0.0)


class ClassCount:
    """The calls of one class admitted and not yet finished (``in_flight``)."""

    def __init__(self, call_class: CallClass):
        self.call_class = call_class
        self.bound = call_class.threads + call_class.waiting
        # One entry per call: list append and pop are atomic in CPython, so a
        # call is counted without a lock (a step's hot path counts twice).
        self._calls: list = []

    @property
    def in_flight(self) -> int:
        return len(self._calls)

    @property
    def full(self) -> bool:
        return len(self._calls) >= self.bound

    def enter(self) -> None:
        self._calls.append(None)

    def leave(self) -> None:
        self._calls.pop()


class Admission:
    """The call classes of one task and their counts."""

    def __init__(self, task_name: str, classes=CALL_CLASSES):
        self.task_name = task_name
        self.counts = [ClassCount(c) for c in classes]
        self._by_method = {m: n for n in self.counts for m in n.call_class.methods}
        self._default = next(n for n in self.counts if not n.call_class.methods)

    def class_of(self, method: str) -> ClassCount:
        return self._by_method.get(method, self._default)

    def refusal(self, method: str, count: ClassCount) -> str:
        c = count.call_class
        return (f"{method} refused: {self.task_name} already serves {c.threads} "
                f"{c.name} calls and queues {c.waiting} more; retry later")

    def refused(self, method: str) -> str | None:
        """Why a call of ``method`` would be refused now (its class is full),
        else None: for a codec that must answer before it may count."""
        count = self.class_of(method)
        return self.refusal(method, count) if count.full else None

    def enter(self, method: str) -> ClassCount:
        """Counts a call of ``method`` (``leave()`` the count it returns when
        the call ends); ``ResourceExhaustedError`` when its class is full."""
        count = self._by_method.get(method, self._default)
        calls = count._calls
        calls.append(None)  # counted first: two racing calls never both pass
        if len(calls) > count.bound:
            calls.pop()
            raise errors.ResourceExhaustedError(None, None,
                                                self.refusal(method, count))
        return count

    @contextlib.contextmanager
    def admit(self, method: str):
        """Counts a call of ``method`` while it runs (``enter``)."""
        count = self.enter(method)
        try:
            yield count
        finally:
            count.leave()
