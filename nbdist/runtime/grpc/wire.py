"""What every gRPC service and client of nbdist shares: status codes, lenient
request parsing (a hostile request becomes INVALID_ARGUMENT, never INTERNAL), and
telling a refused connection from a failed call."""

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


def connect_failed(e: grpc.RpcError) -> bool:
    """Nothing listens at the address (yet): the request never reached a server,
    so retrying is safe, and a restarting task may soon be back."""
    if not hasattr(e, "code") or e.code() != grpc.StatusCode.UNAVAILABLE:
        return False
    d = (e.details() or "").lower()
    return "connection refused" in d or "failed to connect" in d


class StatusError(Exception):
    """An RPC's final status (code and message), raised inside a servicer."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message
