"""What the MasterService and WorkerService servicers share (``master_service``,
``worker_service``).

Errors: an ``nbdist.errors.OpError`` keeps its canonical code. RunStep and
RunGraph put it in the response body (``status_code``,
``status_error_message``) so that long messages are never truncated; the
other RPCs end with that gRPC status. Any other exception is ``INTERNAL`` and
the server keeps serving. A request that does not parse is
``INVALID_ARGUMENT`` (it is decoded by hand, never unpickled or evaluated).

Retries: a request with a nonzero ``request_id`` seen among the last 10,000
is not executed again; the retry waits for and gets the first answer
(responses are kept up to a total of 64 MiB; a retry whose answer was
dropped gets ``ABORTED``). PushTensors has no request_id: the client names
each pushed tensor with a random push id, and pushing it again replaces it.

Large feeds of a client arrive by PushTensors (kept in ``PushedTensors``
until the RunStep that names them takes them). A RunStep or RunGraph whose
caller goes away (the call is cancelled or the connection drops) has its
step cancelled. RecvTensorUnary answers a waiting consumer ``pending`` after
``wait_ms`` so that no call blocks for longer than its caller can cancel.
"""

from __future__ import annotations

import logging
import threading

import grpc
from nbdist import errors
from nbdist.runtime import timeouts
from nbdist.runtime.grpc.admission import queued_s
from nbdist.runtime.grpc.recent_requests import RecentRequests
from nbdist.runtime.grpc.wire import (
    MAX_MESSAGE_CHARS,
    Malformed,
    StatusError,
    lenient,
    status_code,
)

_log = logging.getLogger("nbdist.server")


def clamp_ms(msg, field: str = "timeout_in_ms"):
    """A timeout beyond a week is no timeout at all (and would overflow the
    platform's wait primitives): cut it to a week."""
    setattr(msg, field, timeouts.clamp_ms(getattr(msg, field)))
    return msg


def since_arrival(msg):
    """A step's ``timeout_in_ms`` counts from its call's arrival: take off the
    time the call waited for a thread (``admission.queued_s``)."""
    if msg.timeout_in_ms > 0:
        msg.timeout_in_ms = max(1, msg.timeout_in_ms - int(queued_s() * 1000))
    return msg


class StepWatch:
    """Cancels the step of an RPC whose caller went away."""

    __slots__ = ("_cancel", "_finished", "_gone", "_lock", "_step_id", "_who")

    def __init__(self, context, cancel, who: str = "client"):
        self._lock = threading.Lock()
        self._step_id = None
        self._finished = False
        self._gone = False
        self._cancel = cancel  # cancel(step_id, error)
        self._who = who
        if not context.add_callback(self._on_rpc_done):
            self._gone = True

    def started(self, step_id: int):
        with self._lock:
            if self._gone:
                raise errors.CancelledError(
                    None,
                    None,
                    f"The {self._who} of this step went away before "
                    "it started (its RPC was cancelled)",
                )
            self._step_id = step_id

    def finished(self):
        with self._lock:
            self._finished = True

    def _on_rpc_done(self):
        with self._lock:
            self._gone = True
            step_id = None if self._finished else self._step_id
        if step_id is not None:
            self._cancel(
                step_id,
                errors.CancelledError(
                    None,
                    None,
                    f"The {self._who} of this step went away (its RPC was "
                    "cancelled); the step was cancelled",
                ),
            )


def encoded(value) -> bytes:
    return value if isinstance(value, bytes) else value.SerializeToString()


def message_size(response) -> int:
    return len(response) if isinstance(response, bytes) else response.ByteSize()


def to_status(e: Exception) -> StatusError:
    if isinstance(e, StatusError):
        return e
    if isinstance(e, errors.OpError):
        return StatusError(status_code(e.error_code), e.message)
    _log.exception("Unexpected error serving an RPC")
    return StatusError(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")


def invalid(what: str, detail) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        None, None, f"Malformed {what} request: {detail}"
    )


class ServicerBase:
    _recent: RecentRequests

    def _serve(self, name: str, request, context, fn):
        """Runs ``fn(request)``; errors become the RPC's status."""
        try:
            if isinstance(request, Malformed):
                raise invalid(name, request.error)
            rid = getattr(request, "request_id", 0)
            if rid:
                return self._recent.run((name, rid), lambda: self._guard(fn, request))
            return fn(request)
        except Exception as e:  # noqa: BLE001 - every error gets a status
            st = to_status(e)
        context.abort(st.code, st.message[:MAX_MESSAGE_CHARS])

    @staticmethod
    def _guard(fn, request):
        try:
            return fn(request)
        except Exception as e:  # noqa: BLE001
            raise to_status(e) from None

    def _serve_in_body(self, name: str, request, context, fn, error_response):
        """As ``_serve`` for RunStep/RunGraph: errors go in the response body."""
        if isinstance(request, Malformed):
            return encoded(
                body_error(error_response(), invalid(name, request.error))
            )
        msg = request[0]

        def run():
            try:
                return fn(request)
            except Exception as e:  # noqa: BLE001
                return encoded(body_error(error_response(), e))

        if msg.request_id:
            try:
                return self._recent.run((name, msg.request_id), run)
            except StatusError as e:
                context.abort(e.code, e.message)
        return run()


def body_error(response, e: Exception):
    st = to_status(e)
    response.status_code = st.code.value[0]
    response.status_error_message = st.message
    return response


def unary(method, deserializer, serializer=encoded):
    return grpc.unary_unary_rpc_method_handler(
        method,
        request_deserializer=lenient(deserializer),
        response_serializer=serializer,
    )
