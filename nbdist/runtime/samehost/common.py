"""What the same-host transport's server and clients share: whether it is on,
where a server listens, and how a broken connection is reported."""

from __future__ import annotations

import os
import socket

from nbdist import errors
from nbdist.runtime import env
from nbdist.runtime.timeouts import whole_ms
from nbdist.runtime.transports import ChannelBroken

MAX_CONNECTIONS = 512  # proven ones, per server: each holds a thread while it waits
# Connections that have not proved the secret yet (samehost.hello_slots): a
# bounded number per source (all tasks of a user are one source on the Unix
# socket, a host one on TCP: room for a cluster's tasks connecting at once),
# and their handshake done within the deadline.
MAX_UNPROVEN = 128
MAX_UNPROVEN_PER_SOURCE = 64
HELLO_DEADLINE_S = 5.0
HELLO_BYTES = 1 << 12
HELLO_TIMEOUT_S = 5.0  # a read of the handshake
RECV_POLL_MS = 100  # a blocked pull answers "pending" this often
RETRY_CONNECT_S = 2.0  # a peer that did not answer here is tried again after


def enabled() -> bool:
    """Whether servers of this process serve and use the same-host path."""
    return (env.get(env.SAME_HOST) or "1").lower() not in ("0", "off", "false", "no")


NAME_PREFIX = "\0nbdist/"


def socket_name(address: str) -> str:
    """The abstract Unix socket of the server at ``address`` (``host:port``)."""
    return NAME_PREFIX + address.removeprefix("grpc://")


TCP_DEAD_AFTER_S = 30  # a TCP peer-path link silent this long is broken (as gRPC's keepalive)


def tune_tcp(sock) -> None:
    """A TCP peer-path connection: no Nagle delay (frames are whole messages),
    and a peer cut off without a reset (a dead host, a cut link) is noticed
    within ``TCP_DEAD_AFTER_S``, as gRPC's keepalive would, instead of never."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, TCP_DEAD_AFTER_S // 2)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT,
                    whole_ms(TCP_DEAD_AFTER_S))


def went_away(task: str, what: str, e: ChannelBroken) -> errors.OpError:
    return errors.UnavailableError(
        None, None, f"{task} went away during {what} (same-host channel: {e})")


def close_fd(fd: int) -> None:
    os.close(fd)


__all__ = ["ChannelBroken", "enabled", "socket_name", "went_away"]
