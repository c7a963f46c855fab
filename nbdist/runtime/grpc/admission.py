"""gRPC's glue for ``runtime.service.admission``, which has the rules (classes,
bounds, the refusal's words, ``queued_s``): here is only the mechanism. Each
call class runs on a pool of its own (grpc's per-method
``experimental_thread_pool``) sized by the class; a call the task's
``Admission`` refuses (its class full; its ``refusal`` words) ends at once with ``RESOURCE_EXHAUSTED``
from the interceptor, before its request is read. A call still waiting when
its deadline passes fails with ``DEADLINE_EXCEEDED`` (its work never starts).
"""

from __future__ import annotations

import time
from concurrent import futures

import grpc
from nbdist.runtime.grpc.stream_frames import STREAM_METHOD
from nbdist.runtime.service.admission import (
    CALL_CLASSES,
    Admission,
    CallClass,
    ClassCount,
    arrived_at,
    queued_s,
)

__all__ = ["CALL_CLASSES", "AdmissionInterceptor", "CallClass", "queued_s"]


class _ClassPool(futures.ThreadPoolExecutor):
    """A class's threads; counts the calls submitted and not yet finished into
    the task's ``ClassCount`` (which the other transports share)."""

    def __init__(self, count: ClassCount, prefix: str):
        cls = count.call_class
        super().__init__(cls.threads, thread_name_prefix=f"{prefix}-{cls.name}")
        self.count = count

    def submit(self, fn, /, *args, **kwargs):
        self.count.enter()
        try:
            return super().submit(self._counted, fn, *args, **kwargs)
        except BaseException:
            self.count.leave()
            raise

    def _counted(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            self.count.leave()


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
    ``admission``: the task's (shared with its other transports); else one of
    its own over ``classes``. ``shutdown()`` stops the pools, after the server's
    ``stop`` ended their calls."""

    def __init__(self, task_name: str, classes=CALL_CLASSES,
                 admission: Admission | None = None):
        self._admission = (admission if admission is not None
                           else Admission(task_name, classes))
        prefix = f"nbdist-rpc{task_name}"
        self._pools = {id(n): _ClassPool(n, prefix) for n in self._admission.counts}
        # Per method: (handler, kind, class count, pool). A server's methods are
        # fixed once it starts, so each is looked up and classified once, not
        # on every call (grpc asks this interceptor for every call).
        self._routes: dict[str, tuple] = {}

    def shutdown(self):
        for p in self._pools.values():
            p.shutdown(wait=False, cancel_futures=True)

    def intercept_service(self, continuation, handler_call_details):
        full_name = handler_call_details.method
        if full_name == STREAM_METHOD:  # a connection: its frames are admitted
            return continuation(handler_call_details)
        route = self._routes.get(full_name)
        if route is None:
            handler = continuation(handler_call_details)
            if handler is None:
                return None
            count = self._admission.class_of(full_name.rsplit("/", 1)[-1])
            kind = _kind(handler)
            route = (handler, kind, count, self._pools[id(count)])
            if len(self._routes) < _MAX_ROUTES:  # bounded: names come from peers
                self._routes[full_name] = route
        handler, kind, count, pool = route
        if count.full:  # on grpc's poller thread: read a count, nothing more
            return _refusal(self._admission.refusal(
                full_name.rsplit("/", 1)[-1], count))
        return _MAKERS[kind](
            _admitted(getattr(handler, kind), time.monotonic(), pool),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


# Unknown method names are not cached (continuation answers None for them);
# this bounds the table anyway.
_MAX_ROUTES = 1024


def _admitted(behaviour, arrived: float, pool: _ClassPool):
    """``behaviour`` on ``pool``, knowing when its call arrived."""

    def run(request, context):
        arrived_at(arrived)
        left = context.time_remaining()
        if left is not None and left <= 0:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                          f"Deadline passed after waiting {queued_s():.1f} s "
                          "for a thread")
        return behaviour(request, context)

    run.experimental_thread_pool = pool
    return run
