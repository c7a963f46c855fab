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
``samehost.wire``'s: small tensors inline, large ones in a memfd. The rest
(sessions, graphs, status) stays on the protocol's own client: a transport
beside ``runtime/grpc`` (TF's ``grpc+verbs``; dask's ``comm/uds.py`` beside
``comm/tcp.py``), registered into ``runtime.transports`` as a *peer path*
that servers serve and ``runtime.router`` picks per peer.

Every connection starts with a handshake (``samehost.handshake``): when the
cluster has a secret (its token; with TLS, a key derived from the tasks' TLS
private key and the token: ``auth.peer_path_secret``), client and server each
prove they hold it by an HMAC over both ends' fresh challenges, compared in
constant time, before a request is sent or read; the secret never travels. A
process without it gets ``UNAUTHENTICATED`` and no tensor, and cannot pass for
a server: its peers log the refusal and use gRPC (TLS). So a TLS cluster on one
host keeps shared memory. ``NBDIST_SAME_HOST=0`` turns the path off (both
serving and using it).

The same service, frames and handshake also listen on a TCP port for peers on
other hosts (``samehost.tcp``, the peer path "tcp", tried after this one):
there every tensor travels in the frame, inside TLS when the cluster has TLS.
"""

from __future__ import annotations

from nbdist.runtime import transports
from nbdist.runtime.samehost.channel import SameHostChannel, client_channel
from nbdist.runtime.samehost.common import ChannelBroken, enabled, socket_name
from nbdist.runtime.samehost.peers import (
    SameHostPeers,
    SameHostStepPath,
    SameHostTransport,
)
from nbdist.runtime.samehost.service import SameHostService
from nbdist.runtime.samehost.tcp import TcpPath


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
              bind: str | None = None, reserved_ports=frozenset(), tls=None):
        """The task's service on this host's abstract socket for ``address``
        (``start()``/``stop()``); ``tls`` does not matter here (the socket
        never leaves the host)."""
        return SameHostService(worker_handler, address, token, limits,
                               master_handler=master_handler)

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
# After the same-host path: a peer this host reaches directly never goes by TCP.
transports.register_peer_path("tcp", TcpPath())

__all__ = ["ChannelBroken", "SameHostChannel", "SameHostPath", "SameHostPeers",
           "SameHostService", "SameHostStepPath", "SameHostTransport", "TcpPath",
           "client_channel", "enabled", "socket_name"]
