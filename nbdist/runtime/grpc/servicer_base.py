"""What the MasterService and WorkerService servicers share (``master_service``,
``worker_service``): the gRPC codec's side of errors and retries. What serving
means (validation, timeouts, de-duplication, cancel-on-hang-up) is the
transport-neutral handlers' (``runtime.service``).

Errors: an ``nbdist.errors.OpError`` keeps its canonical code. RunStep and
RunGraph put it in the response body (``status_code``,
``status_error_message``) so that long messages are never truncated; the
other RPCs end with that gRPC status. Any other exception is ``INTERNAL`` and
the server keeps serving. A request that does not parse is
``INVALID_ARGUMENT`` (it is decoded by hand, never unpickled or evaluated).

Retries: a request with a nonzero ``request_id`` seen among the last 10,000
is not executed again (the handlers' ``Serving.once``, keyed ``(method,
request_id)`` as on every transport of the task); the retry waits for and
gets the handler's first answer, encoded again (answers are kept up to a
total of 64 MiB; a retry whose answer was dropped gets ``ABORTED``).
PushTensors has no request_id: the client names each pushed tensor with a
random push id, and pushing it again replaces it.

Large feeds of a client arrive by PushTensors (kept in ``PushedTensors``
until the RunStep that names them takes them). A RunStep or RunGraph whose
caller goes away (the call is cancelled or the connection drops) has its
step cancelled. RecvTensorUnary answers a waiting consumer ``pending`` after
``wait_ms`` so that no call blocks for longer than its caller can cancel.
"""

from __future__ import annotations

import logging

import grpc
from nbdist import errors
from nbdist.runtime.grpc.wire import (
    MAX_MESSAGE_CHARS,
    Malformed,
    StatusError,
    lenient,
    status_code,
)
from nbdist.runtime.service.serving import Serving
from nbdist.runtime.service.worker_handler import invalid

_log = logging.getLogger("nbdist.server")


def encoded(value) -> bytes:
    return value if isinstance(value, bytes) else value.SerializeToString()


def to_status(e: Exception) -> StatusError:
    if isinstance(e, StatusError):
        return e
    if isinstance(e, errors.OpError):
        return StatusError(status_code(e.error_code), e.message)
    _log.exception("Unexpected error serving an RPC")
    return StatusError(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")


class ServicerBase:
    _serving: Serving  # the task's handler this servicer decodes calls for

    def _serve(self, name: str, request, context, call, encode=None):
        """``encode(call(request))`` (``call``'s answer when no ``encode``);
        errors become the RPC's status. ``call`` asks the handler: its answer
        is what a request id keeps (``Serving.once``), so that a retry gets it
        whichever transport brought the first try; ``encode`` makes the
        response of it, on every try."""
        try:
            if isinstance(request, Malformed):
                raise invalid(name, request.error)
            rid = getattr(request, "request_id", 0)
            answer = self._serving.once(name, rid, lambda: call(request))
            return answer if encode is None else encode(answer)
        except Exception as e:  # noqa: BLE001 - every error gets a status
            st = to_status(e)
        context.abort(st.code, st.message[:MAX_MESSAGE_CHARS])

    def _serve_in_body(self, name: str, request, context, call, encode,
                       error_response):
        """As ``_serve`` for RunStep/RunGraph (``encode(request, answer)``):
        errors go in the response body."""
        if isinstance(request, Malformed):
            return encoded(
                body_error(error_response(), invalid(name, request.error))
            )
        try:
            answer = self._serving.once(name, request[0].request_id,
                                        lambda: call(request))
            return encode(request, answer)
        except Exception as e:  # noqa: BLE001
            return encoded(body_error(error_response(), e))


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
