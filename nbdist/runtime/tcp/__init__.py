"""The TCP peer path: the framed protocol (``runtime/framed``: its service,
frames and handshake) over a TCP port, for peers on other hosts; this package
is its link policy (``framed.link``).

Across hosts every call went through grpcio, whose Python per-call cost (a
unary call ~0.75 ms of CPU on each side) is most of a small step's time. Here
a ``RunGraph``, a ``_Recv``'s exchange, an abort and a collective's chunk are
one frame each way on a connection kept open (one per concurrent call, as the
same-host path): a JSON header and the tensors' raw bytes, sent from the
arrays and received into one buffer the tensors are views of. There is no
shared memory between hosts, so every tensor travels in the frame
(``shares_memory`` False).

A server listens on a free port of the interface its gRPC port is bound to and
announces ``host:port`` under ``nbdist/peer_path/tcp/<task>`` (and
``.../@<its address>``, for sessions) in its cluster's coordination service (its agent inserts it after every registration, so a
restarted task's new port replaces the old one). A peer looks it up when it
first needs a connection to that task (and after one broke), in the
background: until it is known, and for a task that announced none, calls stay
on gRPC. A session on another host reaches its master the same way (its
steps, large feeds and fetches). Tasks on one host keep the same-host path (or gRPC, with it off):
``NBDIST_PEER_TCP=always`` uses this path for them too, ``0`` turns it off.

A single-port server (``NBDIST_SINGLE_PORT=1``, ``Server(single_port=True)``:
a cluster whose tasks expose one port each) serves this path on its gRPC port
instead (``framed.port_sharing.SharedPort``, ``SharedPortLink``) and announces
that port with ``SHARED_SUFFIX``: a client then sends ``PREAMBLE`` first, in
plaintext, and the rest (TLS, the handshake, frames) as on a port of its own.
A client that reads no port in an endpoint (an older one) stays on gRPC; one
whose preamble nobody serves (the path off there) is refused at once and
stays on gRPC too.

In a cluster with TLS every connection here is TLS with the cluster's own
certificates (``tcp.tls``: the server's checked against the CA and the
host dialed, the client's required with mutual TLS, as gRPC does), and inside
it the handshake makes both ends prove the peer-path secret (derived from the
task's key and the token); without TLS the frames go in plaintext and the
handshake proves the cluster's token when it has one. A client whose
certificate or CA does not pass is refused (both ends log it) and stays on
gRPC. A session on another host reaches its master the same way (its
lookup then takes the cluster's token from ``NBDIST_TOKEN``).

>>> same_host("grpc://127.0.0.1:2222", "localhost:2223")
True
"""

from __future__ import annotations

import collections
import logging
import socket
import threading

from nbdist.runtime import env, transports
from nbdist.runtime.framed.channel import FramedChannel
from nbdist.runtime.framed.common import ChannelBroken
from nbdist.runtime.framed.link import Dialer, ServingLink
from nbdist.runtime.framed.peers import FramedPeers
from nbdist.runtime.framed.port_sharing import PREAMBLE
from nbdist.runtime.framed.service import FramedService
from nbdist.runtime.tcp.tls import TlsLink
from nbdist.runtime.timeouts import whole_ms

__all__ = ["SharedPortLink", "TcpChannel", "TcpLink", "TcpPath", "TcpPeers", "mode", "same_host",
           "tune_tcp"]

_log = logging.getLogger("nbdist")
LOOKUP_WAIT_S = 0.5  # a step waits this long for an endpoint before using gRPC
TCP_DEAD_AFTER_S = 30  # a link silent this long is broken (as gRPC's keepalive)
_PORT_TRIES = 16  # free ports tried, skipping the cluster's
_LABEL = "TCP peer-path"


def mode() -> str:
    """"off", "other_hosts" (the default) or "always" (``NBDIST_PEER_TCP``)."""
    value = (env.get(env.PEER_TCP) or "1").lower()
    if value in ("0", "off", "false", "no"):
        return "off"
    return "always" if value == "always" else "other_hosts"


def _bare(address: str) -> str:
    return address.partition("://")[2] or address


def _host(address: str) -> str:
    return _bare(address).rpartition(":")[0].strip("[]").lower()


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def same_host(a: str, b: str) -> bool:
    """Whether the tasks at addresses ``a`` and ``b`` name one host."""
    ha, hb = _host(a), _host(b)
    return ha == hb or (_loopback(ha) and _loopback(hb))


# An announced endpoint that is the task's gRPC port, shared (``SharedPort``):
# a client sends the preamble first. (A client that does not know the suffix
# reads no port in it, so it stays on gRPC.)
SHARED_SUFFIX = "+framed"


def _parse_endpoint(value) -> tuple[str, int, bool] | None:
    """``(host, port, shared)`` of an announced endpoint, or None."""
    text = value.decode() if isinstance(value, bytes) else str(value or "")
    shared = text.endswith(SHARED_SUFFIX)
    host, sep, port = text.removesuffix(SHARED_SUFFIX).rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]"), int(port), shared


class _Lookup:
    """One task's endpoint lookup in flight (a coordination call may be slow
    or wait for a leader that is down: never on a step's thread for long)."""

    def __init__(self, lookup, key: str):
        self.done = threading.Event()
        self.endpoint: tuple[str, int, bool] | None = None
        threading.Thread(target=self._run, args=(lookup, key), daemon=True,
                         name="nbdist-tcp-lookup").start()

    def _run(self, lookup, key):
        try:
            self.endpoint = _parse_endpoint(lookup(key))
        except Exception:  # noqa: BLE001 - unreachable service: gRPC meanwhile
            self.endpoint = None
        finally:
            self.done.set()


def tune_tcp(sock) -> None:
    """A peer-path connection: no Nagle delay (frames are whole messages), and
    a peer cut off without a reset (a dead host, a cut link) is noticed within
    ``TCP_DEAD_AFTER_S``, as gRPC's keepalive would, instead of never."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, TCP_DEAD_AFTER_S // 2)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT,
                    whole_ms(TCP_DEAD_AFTER_S))


def tcp_listener(bind: str, reserved: frozenset) -> socket.socket:
    """A listening socket on a free port of ``bind`` that is none of
    ``reserved`` (a free port the kernel hands out may be one a cluster spec
    named for a task that has not started yet: it must find it free)."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    taken = []
    try:
        for _ in range(_PORT_TRIES):
            listener = socket.create_server((bind, 0), backlog=128, family=family)
            if listener.getsockname()[1] not in reserved:
                return listener
            taken.append(listener)  # held, so the next try gets another port
        raise OSError(f"no free port outside the cluster's in {_PORT_TRIES} tries")
    finally:
        for s in taken:
            s.close()


class TcpLink(ServingLink):
    """A task's service on a free TCP port of ``bind`` (none of ``reserved``);
    every tensor inline; each connection TLS-wrapped with ``wrap`` (a
    ``TlsLink.server_wrapper``) when the cluster has TLS."""

    name = "tcp"
    label = _LABEL
    shares_memory = False

    def __init__(self, bind: str, address: str, reserved: frozenset, wrap=None):
        self._bind = bind
        self._host = _bare(address).rpartition(":")[0]
        self._reserved = reserved
        self._wrap = wrap

    def listen(self, task: str):
        listener = tcp_listener(self._bind.strip("[]"), self._reserved)
        return listener, f"{self._host}:{listener.getsockname()[1]}"

    def refused_listen(self, task: str, error: OSError) -> None:
        _log.warning("%s: no TCP peer path (cannot listen on %s: %s); peers on "
                     "other hosts use gRPC", task, self._bind, error)

    def accepted(self, conn):
        tune_tcp(conn)
        return conn if self._wrap is None else self._wrap(conn)

    def client_of(self, conn) -> str:
        return "tcp:" + str(conn.getpeername()[0])


class SharedPortLink(TcpLink):
    """A task's service on its gRPC port, shared (``framed.port_sharing``):
    its framed connections, the preamble read; announced as the gRPC
    address with ``SHARED_SUFFIX``."""

    def __init__(self, shared_port, address: str, wrap=None):
        super().__init__("", address, frozenset(), wrap)
        self._shared_port = shared_port

    def listen(self, task: str):
        return (self._shared_port.framed_listener(),
                f"{self._host}:{self._shared_port.port}{SHARED_SUFFIX}")


class TcpDialer(Dialer):
    """Connections to the TCP peer-path port ``endpoint`` (``(host, port)``,
    or ``(host, port, shared)``; shared: the task's gRPC port, the preamble
    sent first) of the task at ``address``, TLS-wrapped by ``tls`` (a
    ``TlsLink``) or plaintext (None)."""

    label = _LABEL
    shares_memory = False

    def __init__(self, address: str, endpoint: tuple, tls=None):
        self.address = _bare(address)
        self.endpoint = tuple(endpoint[:2])
        self.shared = bool(endpoint[2:] and endpoint[2])
        self._tls = tls

    def dial(self):
        sock = socket.create_connection(self.endpoint, timeout=10.0)
        try:
            tune_tcp(sock)
            sock.settimeout(10.0)
            if self.shared:  # in plaintext, before any TLS: it picks the protocol
                sock.sendall(PREAMBLE)
            if self._tls is not None:  # its certificate checked against the host
                sock = self._tls.client(sock, self.endpoint[0], self.address)
        except BaseException:
            sock.close()
            raise
        return sock


class TcpChannel(FramedChannel):
    """Connections to one peer's TCP peer-path port (``endpoint``: as
    ``TcpDialer``'s); ``tls``: a ``TlsLink``, or None for plaintext."""

    def __init__(self, task: str | None, address: str, token: str | None,
                 calls: collections.Counter, endpoint: tuple, tls=None):
        dialer = TcpDialer(address, endpoint, tls)
        super().__init__(task, token, calls, dialer)
        self.endpoint = dialer.endpoint  # (host, port)


class TcpPeers(FramedPeers):
    """How one task reaches its peers on other hosts over TCP: a peer's step
    path connects to the endpoint the peer announced (``lookup(key)``: the
    coordination service's value of ``key``, or None). All-reduce chunks are
    pulled (over the channel when it is up), never pushed: a push needs both
    ends to agree that the path is up, and here each end learns its peer's
    endpoint on its own."""

    def __init__(self, address_of, own_task: str, token: str | None, lookup=None,
                 tls: TlsLink | None = None):
        super().__init__(address_of, own_task, token)
        self._lookup = lookup
        self._tls = tls
        self._lookups: dict[str, _Lookup] = {}
        self._lock = threading.Lock()

    def channel(self, task: str) -> TcpChannel:
        address = self._address_of(task)
        if mode() != "always" and same_host(address, self._address_of(self._own_task)):
            raise ChannelBroken(f"{task} is on this host")
        endpoint = self._endpoint(task)
        if endpoint is None:
            raise ChannelBroken(f"{task} announced no TCP peer-path endpoint (yet)")
        return TcpChannel(task, address, self._token, self.calls, endpoint, self._tls)

    def _endpoint(self, task: str) -> tuple[str, int, bool] | None:
        """The endpoint ``task`` announced, looked up afresh for each new
        connection (a restarted task listens on another port)."""
        if self._lookup is None:
            return None
        with self._lock:
            pending = self._lookups.get(task)
            if pending is None or pending.done.is_set():
                pending = self._lookups[task] = _Lookup(
                    self._lookup, transports.endpoint_key("tcp", task))
        pending.done.wait(LOOKUP_WAIT_S)
        return pending.endpoint if pending.done.is_set() else None


class _NotServing:
    """The TCP path of a task only this host can reach: no port."""

    endpoint = None
    problem = None

    def start(self):
        pass

    def stop(self):
        pass


class TcpPath:
    """The TCP peer path as ``runtime.transports`` knows it."""

    name = "tcp"
    plaintext = False  # TLS-wrapped in a cluster with TLS (the ``tls`` below)

    @staticmethod
    def usable(tls: bool) -> bool:
        return mode() != "off" and not tls

    @staticmethod
    def serve(worker_handler, master_handler, address: str, token, limits,
              bind: str | None = None, reserved_ports=frozenset(), *, tls,
              shared_port=None):
        """The task's service on a free TCP port of ``bind`` (its gRPC
        interface) outside ``reserved_ports``, or with ``shared_port`` (a
        ``framed.port_sharing.SharedPort``: a single-port server's) on the
        gRPC port itself; its ``endpoint`` is what it announces. A task bound
        to loopback has no peer on another host: it serves none (unless
        ``NBDIST_PEER_TCP=always``). ``tls``: the task's TLS configuration (its
        gRPC server's), or None for plaintext; no default, so that no caller
        serves plaintext in a TLS cluster by omission."""
        bind = bind or "127.0.0.1"
        if mode() != "always" and _loopback(bind.strip("[]")):
            return _NotServing()
        wrap = None
        if tls is not None:
            wrap = TlsLink(tls).server_wrapper(worker_handler.worker.task_name)
        if shared_port is not None:
            link = SharedPortLink(shared_port, address, wrap)
        else:
            link = TcpLink(bind, address, frozenset(reserved_ports), wrap)
        return FramedService(worker_handler, address, token, limits, link,
                             master_handler=master_handler)

    @staticmethod
    def peers(address_of, own_task: str, token, lookup=None, *, tls) -> TcpPeers:
        """One task's channels to its peers on other hosts (``tls``: as
        ``serve``'s)."""
        return TcpPeers(address_of, own_task, token, lookup,
                        None if tls is None else TlsLink(tls))

    @staticmethod
    def master_channel(address: str, token, *, tls):
        """A session's channel to the master at ``address`` on another host
        (its steps, large feeds and fetches), or None: its endpoint is looked
        up by address in the master's cluster (``token``: the peer-path
        secret; without TLS the cluster's token). ``tls``: the client's TLS
        configuration, or None: with it the lookup is a TLS call with the
        token of ``NBDIST_TOKEN`` (the secret is not the token), and the
        channel is TLS."""
        if mode() == "off" or (mode() != "always" and _loopback(_host(address))):
            return None
        try:  # (the scheme of ``address``; a bare one is the default protocol's)
            client = transports.connect_coordination(
                address, token=token if tls is None else None, tls=tls or False)
        except Exception:  # noqa: BLE001 - no coordination reachable: gRPC
            return None
        try:
            lookup = _Lookup(client.try_get,
                             transports.endpoint_key("tcp", "@" + _bare(address)))
            lookup.done.wait(LOOKUP_WAIT_S)
        finally:
            client.close()
        if lookup.endpoint is None:
            return None
        ch = TcpChannel(None, address, token, collections.Counter(), lookup.endpoint,
                        None if tls is None else TlsLink(tls))
        try:
            ch.open()
        except ChannelBroken:
            return None
        return ch
