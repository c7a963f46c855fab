"""What every gRPC service and client of nbdist shares: status codes, lenient
request parsing (a hostile request becomes INVALID_ARGUMENT, never INTERNAL), and
telling a connection that was never set up (safe to retry) from one that broke
during a call (safe only for idempotent or de-duplicated calls)."""

from __future__ import annotations

import grpc

MAX_MESSAGE_CHARS = 16384  # of a status sent in gRPC metadata


def status_code(code: int) -> grpc.StatusCode:
    """The ``grpc.StatusCode`` of a canonical error code."""
    for sc in grpc.StatusCode:
        if sc.value[0] == code:
            return sc
    return grpc.StatusCode.UNKNOWN


class Malformed:
    """A request that did not parse; the servicer answers INVALID_ARGUMENT."""

    __slots__ = ("error",)

    def __init__(self, error: Exception):
        self.error = error


def lenient(parse):
    """A request deserializer that returns ``Malformed`` instead of raising."""

    def deserialize(data: bytes):
        try:
            return parse(data)
        except Exception as e:  # noqa: BLE001 - whatever a hostile input triggers
            return Malformed(e)

    return deserialize


# What grpc says when a connection could not be set up: the request never
# reached a server, so any call may be retried.
_CONNECT_PHRASES = (
    "connection refused",
    "failed to connect",
    "before receiving settings frame",
)
# What it says when an established connection broke during a call: the server
# may have run the request, so only a call that is idempotent or de-duplicated
# by its request_id may be retried.
_LOST_PHRASES = (
    "socket closed",
    "stream removed",
    "connection reset",
    "broken pipe",
    "goaway",
    "rst_stream",
    "endpoint closing",
    "connection closed",
)


def _details(e) -> str:
    return ((e.details() if hasattr(e, "details") else "") or "").lower()


def connect_failed(e: grpc.RpcError) -> bool:
    """Nothing listens at the address (yet), or the connection was not set up in
    time: the request never reached a server, so retrying is safe, and a
    restarting task may soon be back."""
    if not hasattr(e, "code") or e.code() != grpc.StatusCode.UNAVAILABLE:
        return False
    d = _details(e)
    return any(p in d for p in _CONNECT_PHRASES)


def connection_lost(e: grpc.RpcError) -> bool:
    """The connection broke during the call (the peer died, restarted, or a
    network hop reset it), whatever status grpc gave it."""
    if not hasattr(e, "code") or e.code() not in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.INTERNAL,
    ):
        return False
    d = _details(e)
    return not connect_failed(e) and any(p in d for p in _LOST_PHRASES)


class StatusError(Exception):
    """An RPC's final status (code and message), raised inside a servicer."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message
