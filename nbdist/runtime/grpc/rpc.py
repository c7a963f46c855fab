"""One unary call of a client, with its deadline, retries and error mapping
(shared by ``GrpcMasterClient`` and ``GrpcWorkerClient``).

Retries: a call that failed on a transient connection error is tried again,
at most ``RETRIES`` times, each after a jittered backoff (``RETRY_BACKOFF_S``
doubling up to ``RETRY_BACKOFF_MAX_S``) and once the channel is connected
again (waiting up to ``RECONNECT_S``, so a restarting task is found again):

* a connection that could not be set up (refused, or its handshake timed
  out): the request never reached a server, so every call is retried
  (``Retry.CONNECT``) except best-effort cleanup (``Retry.NEVER``);
* a connection that broke during the call (reset, closed, GOAWAY): the server
  may have run the request, so only calls that are idempotent or de-duplicated
  by their ``request_id`` are retried (``Retry.SAFE``). A retried RunStep or
  RunGraph whose first attempt the server cancelled (its caller seemed gone)
  is ``UnavailableError``, as the lost connection it stands for.

Errors name the peer: a dead task is ``UnavailableError("Task
/job:ps/replica:0/task:0 at 127.0.0.1:2222 is unavailable: ... (calling
RunGraph)")``, whatever status grpc gave the broken connection.
"""

from __future__ import annotations

import enum
import random
import re
import time

import grpc
from nbdist import errors
from nbdist.runtime.grpc import auth
from nbdist.runtime.grpc.wire import connect_failed, connection_lost

__all__ = ["RECONNECT_S", "RETRIES", "Retry", "Rpc", "channel_options", "make_channel"]

# A call that could not connect waits this long for the channel to (re)connect
# before the task counts as unavailable: long enough for a restarted task.
RECONNECT_S = 3.0
RETRIES = 4
RETRY_BACKOFF_S = 0.05
RETRY_BACKOFF_MAX_S = 1.0
# How long a connection attempt may wait for the server's HTTP/2 SETTINGS: a
# loaded peer can take seconds (grpc's default; a short one fails under load).
CONNECT_TIMEOUT_MS = 20000

_NODE_RE = re.compile(r"\[\[node ([^ \]]+)")


class Retry(enum.Enum):
    NEVER = 0  # best-effort cleanup: a dead task is not waited for
    CONNECT = 1  # only when the request never reached a server
    SAFE = 2  # also after a connection broke mid-call: idempotent or de-duplicated


def channel_options() -> list[tuple[str, int]]:
    """Options of every nbdist channel: no message size limit, keepalive that
    notices a dead peer, quick reconnection to a restarted task and patience
    with a slow handshake."""
    return [
        ("grpc.max_send_message_length", -1),
        ("grpc.max_receive_message_length", -1),
        ("grpc.keepalive_time_ms", 20000),
        ("grpc.keepalive_timeout_ms", 10000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
        # grpc takes this as the shortest connection attempt, not as a backoff.
        ("grpc.min_reconnect_backoff_ms", CONNECT_TIMEOUT_MS),
        ("grpc.enable_retries", 0),
    ]


def make_channel(address: str, tls: auth.TlsConfig | None) -> grpc.Channel:
    if tls is not None:
        return grpc.secure_channel(
            address, tls.channel_credentials(), options=channel_options()
        )
    return grpc.insecure_channel(address, options=channel_options())


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text and text.strip() else ""


# How gRPC refuses a message over the server's max_receive_message_length
# (set from server_limits.max_request_bytes).
_TOO_LARGE_RE = re.compile(
    r"SERVER: Received message larger than max \((\d+) vs\. (\d+)\)")


def error_from_status(code: int, message: str) -> errors.OpError:
    """The error a body status (RunStep/RunGraph) stands for, with its op name."""
    m = _NODE_RE.search(message or "")
    return errors.make_error(code, message, m.group(1) if m else None)


def retryable(e: grpc.RpcError, retry: Retry) -> bool:
    if retry is Retry.NEVER:
        return False
    return connect_failed(e) or (retry is Retry.SAFE and connection_lost(e))


def backoff_s(failures: int) -> float:
    """The pause before retry number ``failures`` (from 1), with jitter."""
    base = min(RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_S * 2 ** (failures - 1))
    return base * random.uniform(0.5, 1.0)


# A method no server has: once connected, any server answers it UNIMPLEMENTED.
_PROBE = "/nbdist.Probe/Connected"


def wait_connected(channel: grpc.Channel, timeout_s: float, on_cancel=None) -> str:
    """Waits (at most ``timeout_s``) for ``channel`` to connect: "ready",
    "timeout" or "cancelled" (``on_cancel(fn)`` registers ``fn`` to stop the
    wait; False: cancelled already).

    A call that waits for ready, not ``grpc.channel_ready_future``: that one's
    polling thread can outlive its future and fail on a channel closed meanwhile
    (grpc's ``_poll_connectivity`` raises "Channel closed!" in its own thread).
    """
    try:
        call = channel.unary_unary(_PROBE).future(
            b"", timeout=max(timeout_s, 0.001), wait_for_ready=True)
    except ValueError:  # the channel was closed: its owner is going away
        return "cancelled"
    if on_cancel is not None and not on_cancel(call.cancel):
        call.cancel()
    try:
        call.result()
        return "ready"  # no server answers the probe, but say so if one did
    except grpc.FutureCancelledError:
        return "cancelled"
    except grpc.RpcError as e:
        code = e.code()
        if code == grpc.StatusCode.CANCELLED:
            return "cancelled"
        if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
            return "timeout"
        return "ready"  # UNIMPLEMENTED (or refused): a server answered


class Rpc:
    """A channel to one peer, its call metadata, and the calls' shared logic."""

    def __init__(
        self, who: str, address: str, token: str | None, tls: auth.TlsConfig | None
    ):
        self.who = who  # "Task /job:ps/replica:0/task:0 at 127.0.0.1:2222"
        self.address = address
        self.metadata = auth.call_metadata(token)
        self.channel = make_channel(address, tls)
        self._closed = False

    def error(
        self, method: str, e: grpc.RpcError, timeout_s: float | None
    ) -> errors.OpError:
        code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
        details = (e.details() if hasattr(e, "details") else str(e)) or ""
        who = self.who
        if code == grpc.StatusCode.UNAVAILABLE or connection_lost(e):
            return errors.UnavailableError(
                None,
                None,
                f"{who} is unavailable: {first_line(details)} (calling {method})",
            )
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            within = f" within {timeout_s:.1f} s" if timeout_s else ""
            return errors.DeadlineExceededError(
                None, None, f"{who} did not answer {method}{within}"
            )
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return errors.UnauthenticatedError(
                None, None, f"{who} rejected {method}: {details}"
            )
        too_large = _TOO_LARGE_RE.match(details)
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED and too_large:
            # gRPC's own words name no limit: say which of server_limits it is.
            details = (f"{method} request of {too_large.group(1)} bytes exceeds "
                       f"the server's max_request_bytes = {too_large.group(2)} "
                       "(ConfigProto.server_limits)")
        cls = errors.exception_type_from_error_code(code.value[0])
        m = _NODE_RE.search(details)
        return cls(
            None,
            m.group(1) if m else None,
            f"{details}\n\t [[{method} on {who[:1].lower()}{who[1:]}]]",
        )

    def reconnect(
        self,
        method: str,
        deadline: float,
        failures: int,
        timeout_s: float,
        on_cancel=None,
    ):
        """Backs off, then waits (at most ``RECONNECT_S``, and not past
        ``deadline``) for the channel to connect; else ``UnavailableError``, or
        ``DeadlineExceededError`` if the call's ``timeout_s`` ran out first.
        ``on_cancel(fn)`` registers ``fn`` to stop the wait (False: cancelled
        already); a cancelled wait returns at once."""
        # A deliberate pause: spaced retries spare a peer that is struggling.
        time.sleep(max(0.0, min(deadline - time.monotonic(), backoff_s(failures))))
        left = deadline - time.monotonic()
        wait = max(min(left, RECONNECT_S), 0.001)
        state = wait_connected(self.channel, wait, on_cancel)
        if state != "timeout":
            return
        if left < RECONNECT_S:
            raise errors.DeadlineExceededError(
                None,
                None,
                f"{self.who} did not answer {method} within {timeout_s:.1f} s "
                "(could not connect)",
            ) from None
        raise errors.UnavailableError(
            None,
            None,
            f"{self.who} is unavailable: could not connect within "
            f"{wait:.1f} s (calling {method})",
        ) from None

    def call(
        self,
        method: str,
        fn,
        request,
        timeout_s: float,
        *,
        wait_for_ready: bool = False,
        retry: Retry = Retry.CONNECT,
        lost: list | None = None,
    ):
        """``fn(request)`` within ``timeout_s``, retried as ``retry`` allows. The
        details of each connection lost mid-call (and retried) go to ``lost``."""
        deadline = time.monotonic() + timeout_s
        failures = 0
        while True:
            try:
                return fn(
                    request,
                    timeout=max(deadline - time.monotonic(), 0.001),
                    metadata=self.metadata,
                    wait_for_ready=wait_for_ready,
                )
            except grpc.RpcError as e:
                out_of_time = deadline - time.monotonic() <= 0
                if out_of_time and connect_failed(e):
                    # Never connected before the call's deadline: TF's answer is
                    # DEADLINE_EXCEEDED, whatever the last attempt said.
                    raise errors.DeadlineExceededError(
                        None,
                        None,
                        f"{self.who} did not answer {method} within {timeout_s:.1f} s "
                        "(could not connect)",
                    ) from None
                if failures >= RETRIES or out_of_time or not retryable(e, retry):
                    raise self.error(method, e, timeout_s) from None
                failures += 1
                if lost is not None and connection_lost(e):
                    lost.append(first_line(e.details() or ""))
                self.reconnect(method, deadline, failures, timeout_s)
            except ValueError as e:  # a response the deserializer rejected
                raise errors.DataLossError(
                    None, None, f"Malformed {method} response from {self.who}: {e}"
                ) from None

    def lost_error(self, method: str, lost: list) -> errors.OpError:
        """A retried step that the server cancelled when its first attempt's
        connection broke: the broken connection is the error."""
        return errors.UnavailableError(
            None,
            None,
            f"{self.who} is unavailable: the connection broke during {method} "
            f"({lost[-1]}) and the step was cancelled",
        )

    def close(self):
        if not self._closed:
            self._closed = True
            self.channel.close()
