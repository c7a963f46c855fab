"""What the framed protocol's server and clients share: its bounds, and how a
broken connection is reported."""

from __future__ import annotations

import os

from nbdist import errors
from nbdist.runtime.transports import ChannelBroken

MAX_CONNECTIONS = 512  # proven ones, per server: each holds a thread while it waits
# Connections that have not proved the secret yet (framed.hello_slots): a
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


def went_away(task: str, what: str, e: ChannelBroken) -> errors.OpError:
    return errors.UnavailableError(
        None, None, f"{task} went away during {what} (its peer-path channel: {e})")


def close_fd(fd: int) -> None:
    os.close(fd)


__all__ = ["ChannelBroken", "close_fd", "went_away"]
