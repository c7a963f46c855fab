"""Link policies: what the framed protocol leaves to the link it runs over.

The framed codec (``framed.service``, ``framed.channel``, ``framed.wire``,
``framed.handshake``) is the same over every link; a *link policy* says how a
server listens and accepts, how a client dials, who the peer is, and how bulk
bytes move: ``shares_memory`` links (a Unix socket on one host) send large
tensors through memfd segments both ends map; the others (a TCP stream, plain
or TLS-wrapped) send every byte inline in the frame. ``runtime/samehost`` and
``runtime/tcp`` are the two policies; nothing in the codec branches on which
one it runs over.

A policy's server half is a ``ServingLink``, its client half a ``Dialer``.

>>> class Loopback(Dialer):
...     label = "test"
>>> Loopback().shares_memory
False
"""

from __future__ import annotations

__all__ = ["Dialer", "ServingLink"]


class ServingLink:
    """How a task's framed service listens and who its callers are."""

    name = "framed"  # the path's name (threads, logs)
    label = "framed"  # how messages name the channel ("same-host", "TCP peer-path")
    shares_memory = False  # large tensors through memfd segments, not inline

    def listen(self, task: str):
        """``(listening socket, endpoint to announce or None)``; raises
        ``OSError`` (``refused_listen`` then says what it means)."""
        raise NotImplementedError

    def refused_listen(self, task: str, error: OSError) -> str | None:
        """Logs why the service could not listen; the problem to publish, or None."""
        return None

    def accepted(self, conn):
        """An accepted connection as the service uses it (tuned, TLS-wrapped:
        no I/O here, a TLS handshake runs on the connection's thread)."""
        return conn

    def peer_user(self, conn) -> int | None:
        """The peer process's user when the link tells (a Unix socket), else None."""
        return None

    def client_of(self, conn) -> str:
        """Who a connection's pushes count against (the per-client caps)."""
        return f"{self.name}:{conn.getpeername()!s}"

    def source_of(self, conn) -> str:
        """Where an unproven connection comes from (its hello slots)."""
        return self.client_of(conn)


class Dialer:
    """How a client reaches one framed service: ``dial()`` a connected socket
    (TLS-wrapped where the link is), ``address`` the server's task address
    both ends' handshake names."""

    label = "framed"
    shares_memory = False

    def dial(self):
        """A connected socket (timeout set); ``OSError`` when nobody answers,
        ``framed.handshake.Refused`` when the link refuses us."""
        raise NotImplementedError

    def peer_user(self, sock) -> int | None:
        return None
