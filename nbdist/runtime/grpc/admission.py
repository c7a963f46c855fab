"""Admission control: each class of RPC runs on its own threads, with a bound on
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

A class serves ``threads`` calls at once on a thread pool of its own (grpc's
per-method ``experimental_thread_pool``); up to ``waiting`` more wait for a
thread, without holding one. A call beyond that is refused at once with
``RESOURCE_EXHAUSTED`` naming the class and its bound, from the interceptor,
before its request is read. Blocking calls never wait: a waiting barrier
arrival could only be admitted once another ends, which may be never.

Deadlines: a call still waiting when its deadline passes fails with
``DEADLINE_EXCEEDED`` (grpc cancels it; its work never starts), and one that
starts after waiting learns how long it waited (``queued_s``): RunStep and
RunGraph count their ``timeout_in_ms`` from the call's arrival, not from its
start.
"""

from __future__ import annotations

import contextvars
import threading
import time
from concurrent import futures
from dataclasses import dataclass

import grpc

__all__ = ["CALL_CLASSES", "AdmissionInterceptor", "CallClass", "queued_s"]


@dataclass(frozen=True)
class CallClass:
    """A class of RPC methods and the bounds of its admission."""

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
    "nbdist_rpc_arrival", default=None)


def queued_s() -> float:
    """Seconds the RPC being served waited between its arrival and its start."""
    arrived = _arrival.get()
    return 0.0 if arrived is None else max(time.monotonic() - arrived, 0.0)


class _ClassPool(futures.ThreadPoolExecutor):
    """A class's threads; counts the calls submitted and not yet finished."""

    def __init__(self, cls: CallClass, prefix: str):
        super().__init__(cls.threads, thread_name_prefix=f"{prefix}-{cls.name}")
        self.call_class = cls
        self._count_lock = threading.Lock()
        self.in_flight = 0

    def submit(self, fn, /, *args, **kwargs):
        with self._count_lock:
            self.in_flight += 1
        try:
            return super().submit(self._counted, fn, *args, **kwargs)
        except BaseException:
            self._finished()
            raise

    def _counted(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            self._finished()

    def _finished(self):
        with self._count_lock:
            self.in_flight -= 1

    @property
    def full(self) -> bool:
        return self.in_flight >= self.call_class.threads + self.call_class.waiting


def _kind(handler) -> str:
    for kind in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
        if getattr(handler, kind) is not None:
            return kind
    raise ValueError(f"RPC handler {handler!r} has no behaviour")


_MAKERS = {
    "unary_unary": grpc.unary_unary_rpc_method_handler,
    "unary_stream": grpc.unary_stream_rpc_method_handler,
    "stream_unary": grpc.stream_unary_rpc_method_handler,
    "stream_stream": grpc.stream_stream_rpc_method_handler,
}


def _refusal(message: str):
    # Request-streaming, so the refused request is never read (any call kind
    # gets the same status on the wire).
    def refuse(request_iterator, context):
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)

    return grpc.stream_unary_rpc_method_handler(refuse)


class AdmissionInterceptor(grpc.ServerInterceptor):
    """Routes each call to its class's pool, or refuses it when the class is full.
    ``shutdown()`` stops the pools, after the server's ``stop`` ended their calls."""

    def __init__(self, task_name: str, classes=CALL_CLASSES):
        prefix = f"nbdist-rpc{task_name}"
        self._pools = [_ClassPool(c, prefix) for c in classes]
        self._by_method = {m: p for p in self._pools for m in p.call_class.methods}
        self._default = next(p for p in self._pools if not p.call_class.methods)
        self._task = task_name

    def shutdown(self):
        for p in self._pools:
            p.shutdown(wait=False, cancel_futures=True)

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method.rsplit("/", 1)[-1]
        pool = self._by_method.get(method, self._default)
        kind = _kind(handler)
        if pool.full:  # on grpc's poller thread: read a count, nothing more
            c = pool.call_class
            return _refusal(
                f"{method} refused: {self._task} already serves {c.threads} "
                f"{c.name} calls and queues {c.waiting} more; retry later")
        return _MAKERS[kind](
            _admitted(getattr(handler, kind), time.monotonic(), pool),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def _admitted(behaviour, arrived: float, pool: _ClassPool):
    """``behaviour`` on ``pool``, knowing when its call arrived."""

    def run(request, context):
        _arrival.set(arrived)
        left = context.time_remaining()
        if left is not None and left <= 0:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                          f"Deadline passed after waiting {queued_s():.1f} s "
                          "for a thread")
        return behaviour(request, context)

    run.experimental_thread_pool = pool
    return run
