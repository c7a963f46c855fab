"""The same-host path: tasks on one host move a step's tensors over a Unix socket
and shared memory instead of gRPC.

Every server listens, besides its gRPC port, on the abstract Unix socket
``\\0nbdist/<its address>``. Abstract sockets belong to a network namespace, so
a peer reaches it exactly when both run on the same host (or the same network
namespace): a peer elsewhere finds nothing there and stays on gRPC. A raw
grpcio unary call costs ~0.75 ms of CPU here, a Unix-socket round trip tens of
microseconds (issue 11's measurements), and most steps are several such calls.

What travels here: a master's ``RunGraph`` to a worker (feeds in, fetches
out), a ``_Recv``'s pull of the tensors a peer sends it (all the keys its
partition expects from that peer, in one exchange: ``Worker.recv`` passes them
as ``siblings``), step aborts, and pulls of parked tensors. Frames are
``framed.wire``'s: small tensors inline, large ones in a memfd. The rest
(sessions, graphs, status) stays on the protocol's own client: a transport
beside ``runtime/grpc`` (TF's ``grpc+verbs``; dask's ``comm/uds.py`` beside
``comm/tcp.py``), registered into ``runtime.transports`` as a *peer path*
that servers serve and ``runtime.router`` picks per peer.

Every connection starts with a handshake (``framed.handshake``): when the
cluster has a secret (its token; with TLS, a key derived from the tasks' TLS
private key and the token: ``auth.peer_path_secret``), client and server each
prove they hold it by an HMAC over both ends' fresh challenges, compared in
constant time, before a request is sent or read; the secret never travels. A
process without it gets ``UNAUTHENTICATED`` and no tensor, and cannot pass for
a server: its peers log the refusal and use gRPC (TLS). So a TLS cluster on one
host keeps shared memory. ``NBDIST_SAME_HOST=0`` turns the path off (both
serving and using it).

This package is the *link policy* (``framed.link``) of the framed protocol
(``runtime/framed``: service, frames, handshake, channels) for that socket:
how to listen and dial, who the peer is (``SO_PEERCRED``), and that large
tensors move through memfd segments both ends map. The same protocol runs
over TCP for peers on other hosts (``runtime/tcp``, the peer path "tcp",
tried after this one).

>>> socket_name("grpc://localhost:2222")
'\\x00nbdist/localhost:2222'
"""

from __future__ import annotations

import collections
import logging
import socket

from nbdist.runtime import env, transports
from nbdist.runtime.framed.channel import FramedChannel
from nbdist.runtime.framed.common import ChannelBroken
from nbdist.runtime.framed.link import Dialer, ServingLink
from nbdist.runtime.framed.peers import FramedPeers
from nbdist.runtime.framed.service import FramedService

_log = logging.getLogger("nbdist")
NAME_PREFIX = "\0nbdist/"
_LABEL = "same-host"


def enabled() -> bool:
    """Whether servers of this process serve and use the same-host path."""
    return (env.get(env.SAME_HOST) or "1").lower() not in ("0", "off", "false", "no")


def _bare(address: str) -> str:
    return address.partition("://")[2] or address


def socket_name(address: str) -> str:
    """The abstract Unix socket of the server at ``address`` (``host:port``)."""
    return NAME_PREFIX + _bare(address)


def _peer_cred(sock) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a Unix socket."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(creds[:4], "little"), int.from_bytes(creds[4:8], "little")


class UnixLink(ServingLink):
    """A task's service on the abstract socket of its address; large tensors
    through memfd segments."""

    name = "samehost"
    label = _LABEL
    shares_memory = True

    def __init__(self, address: str):
        self._name = socket_name(address)

    def listen(self, task: str):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self._name)
            listener.listen(128)
        except OSError:
            listener.close()
            raise
        return listener, None

    def refused_listen(self, task: str, error: OSError) -> str:
        # Another process holds our name: peers that trust it would reach it,
        # not us (their handshake refuses it; still, say so).
        problem = (f"{task}: no same-host path: its socket @{self._name[1:]} is "
                   f"taken by another process ({error}); peers on this host use "
                   "gRPC and refuse whoever holds the name")
        _log.error("%s", problem)
        return problem

    def peer_user(self, conn) -> int:
        return _peer_cred(conn)[1]

    def client_of(self, conn) -> str:
        return f"samehost:pid{_peer_cred(conn)[0]}"

    def source_of(self, conn) -> str:
        return f"uid:{_peer_cred(conn)[1]}"


class UnixDialer(Dialer):
    """Connections to the abstract socket of the task at ``address``."""

    label = _LABEL
    shares_memory = True

    def __init__(self, address: str):
        self.address = _bare(address)
        self._name = socket_name(address)

    def dial(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(10.0)
            sock.connect(self._name)
        except BaseException:
            sock.close()
            raise
        return sock

    def peer_user(self, sock) -> int:
        return _peer_cred(sock)[1]


class SameHostChannel(FramedChannel):
    """Connections to one peer's same-host socket (one per concurrent call);
    ``task`` None: whichever task serves ``address`` (a session's master)."""

    def __init__(self, task: str | None, address: str, token: str | None,
                 calls: collections.Counter):
        super().__init__(task, token, calls, UnixDialer(address))


class SameHostPeers(FramedPeers):
    """How one task reaches its peers on this host; all-reduce chunks are
    pushed and consumed in place (``framed.collective_push``)."""

    pushes_collectives = True

    def channel(self, task: str) -> SameHostChannel:
        return SameHostChannel(task, self._address_of(task), self._token, self.calls)


def client_channel(address: str, token: str | None) -> SameHostChannel | None:
    """A session's channel to the master serving ``address`` when it runs on
    this host (for its large feeds and fetches), else None."""
    if not enabled():
        return None
    ch = SameHostChannel(None, address, token, collections.Counter())
    try:
        ch.open()
    except ChannelBroken:
        return None
    return ch


class SameHostPath:
    """The same-host transport as ``runtime.transports`` knows it (a peer path)."""

    name = "samehost"

    @staticmethod
    def usable(tls: bool) -> bool:
        """Whether servers and clients of this process use it: on unless
        ``NBDIST_SAME_HOST=0``. ``tls``: TLS is on but the caller holds no
        peer-path secret (a client with only the CA: it could neither prove
        itself nor check a server here, so it stays on gRPC). A TLS task with
        its key uses the path, proving the secret derived from that key."""
        return enabled() and not tls

    @staticmethod
    def serve(worker_handler, master_handler, address: str, token, limits,
              bind: str | None = None, reserved_ports=frozenset(), tls=None,
              shared_port=None):
        """The task's service on this host's abstract socket for ``address``
        (``start()``/``stop()``); ``tls`` and ``shared_port`` do not matter
        here (the socket never leaves the host)."""
        return FramedService(worker_handler, address, token, limits,
                             UnixLink(address), master_handler=master_handler)

    @staticmethod
    def peers(address_of, own_task: str, token, lookup=None,
              tls=None) -> SameHostPeers:
        """One task's channels to its peers on this host."""
        return SameHostPeers(address_of, own_task, token)

    @staticmethod
    def master_channel(address: str, token, tls=None):
        """A session's channel to the master at ``address`` when it runs on this
        host, else None."""
        return client_channel(address, token)


transports.register_peer_path("samehost", SameHostPath())

__all__ = ["ChannelBroken", "SameHostChannel", "SameHostPath", "SameHostPeers",
           "UnixDialer", "UnixLink", "client_channel", "enabled", "socket_name"]
