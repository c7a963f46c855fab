"""``poll_recv``: asking a producer for a tensor until it has it.

A ``_Recv`` whose tensor is not ready yet asks its producer with a bounded
wait (``wait_ms``); the producer answers the tensor, or "pending" when the
wait ran out, so that the consumer notices its step's cancellation and
deadline between asks (and the producer frees the thread). Every transport's
ask is one call of ``poll_recv``: gRPC's RecvTensorUnary
(``grpc/client.py``), and the framed ``recv`` of a peer path's channel
(same-host, TCP, the gRPC stream path), as::

    def ask(wait_ms, left_s):
        reply, tensors = channel.call("recv", {**header, "wait_ms": wait_ms},
                                      timeout_s=left_s)
        return PENDING if reply.get("pending") else dict(tensors)

    tensors = poll_recv(step, ask, key, channel.task)

>>> from nbdist.executor.step import StepContext
>>> answers = iter([PENDING, PENDING, "the tensor"])
>>> poll_recv(StepContext(1), lambda wait_ms, left_s: next(answers),
...           "a;1;b;x:0;0:0", "/job:ps/replica:0/task:0")
'the tensor'
>>> poll_recv(StepContext(1), lambda wait_ms, left_s: PENDING,
...           "a;1;b;x:0;0:0", "/job:ps/replica:0/task:0", timeout_s=0.01)
Traceback (most recent call last):
...
nbdist.errors.DeadlineExceededError: Timed out after 0.0 s waiting for tensor x:0 from /job:ps/replica:0/task:0
"""

from __future__ import annotations

import time
from collections.abc import Callable

from nbdist import errors
from nbdist.runtime.timeouts import step_time_left, whole_ms

__all__ = ["PENDING", "RECV_POLL_MS", "poll_recv", "tensor_name", "timed_out"]

# A blocked recv answers "pending" this often, so the consumer can notice
# that its step was cancelled (and the producer frees the thread).
RECV_POLL_MS = 100


class _Pending:
    def __repr__(self) -> str:
        return "PENDING"


PENDING = _Pending()  # an ask's answer: not ready yet, ask again


def tensor_name(key: str) -> str:
    """The tensor of a rendezvous key (``src;inc;dst;name;frame``)."""
    return key.split(";")[3] if key.count(";") == 4 else key[:100]


def timed_out(key: str, source: str, start: float) -> errors.DeadlineExceededError:
    """The error of a recv of ``key`` from ``source`` begun at ``start``
    (``time.monotonic``) that ran out of time."""
    return errors.DeadlineExceededError(
        None, None, f"Timed out after {time.monotonic() - start:.1f} s waiting for "
        f"tensor {tensor_name(key)} from {source}")


def poll_recv(step, ask: Callable[[int, float], object], key: str, source: str,
              timeout_s: float | None = None, poll_ms: int = RECV_POLL_MS):
    """``ask(wait_ms, left_s)``'s first answer other than ``PENDING``.

    ``step``: the consumer's ``StepContext`` (its cancellation stops the
    asking at once: its error is raised); ``timeout_s``: how long to ask
    (default: what ``step``'s deadline and op timeout leave); ``wait_ms``:
    how long the producer may hold this ask (``poll_ms``, less near the
    deadline); ``left_s``: the time left (a bound for the call itself).

    Raises:
      DeadlineExceededError: "Timed out after X s waiting for tensor NAME
        from SOURCE" when the time ran out.
    """
    timeout = step_time_left(step) if timeout_s is None else timeout_s
    start = time.monotonic()
    while True:
        if step.cancelled:
            step.check()
        left = start + timeout - time.monotonic()
        if left <= 0:
            raise timed_out(key, source, start)
        got = ask(min(poll_ms, whole_ms(left)), left)
        if got is not PENDING:
            return got
