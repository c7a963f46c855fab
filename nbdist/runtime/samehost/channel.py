"""``SameHostChannel``: connections to one peer's same-host socket."""

from __future__ import annotations

import collections
import random
import socket
import threading
import weakref

from nbdist import errors
from nbdist.runtime.samehost.common import (
    NAME_PREFIX,
    ChannelBroken,
    enabled,
    socket_name,
    tune_tcp,
)
from nbdist.runtime.samehost.handshake import (
    Refused,
    client_handshake,
    cluster_key,
)
from nbdist.runtime.samehost.wire import (
    ChannelClosed,
    Link,
    Outgoing,
    decode_tensors,
    raise_if_error,
    recv_frame,
    send_frame,
)
from nbdist.runtime.timeouts import ms_from_seconds


class SameHostChannel:
    """Connections to one peer's same-host socket (one per concurrent call);
    ``task`` None: whichever task serves ``address`` (a session's master).
    With ``endpoint`` (``(host, port)``), to the peer's TCP peer-path port
    instead (``samehost.tcp``: a peer on another host): the same frames and
    handshake, every tensor in the payload."""

    def __init__(self, task: str | None, address: str, token: str | None,
                 calls: collections.Counter, endpoint: tuple[str, int] | None = None,
                 wrap=None):
        """``token``: the peer-path secret (``auth.peer_path_secret``);
        ``wrap``: what a connected socket is used through (the TCP path's TLS,
        ``samehost.tls``), or None."""
        self.task = task
        self._endpoint = endpoint
        self._wrap = wrap
        self._name = socket_name(address)
        self._key = cluster_key(token)
        self._idle: list[tuple[socket.socket, Link]] = []
        self._lock = threading.Lock()
        self._calls = calls
        self._closed = False
        self.incarnation = None
        # A channel dropped without close() (its session was never closed)
        # still closes its connections.
        weakref.finalize(self, _close_connections, self._idle)

    def connect(self) -> tuple[socket.socket, Link]:
        """A new authenticated connection; ChannelBroken if nobody (or somebody
        else) answers here."""
        if self._endpoint is not None:
            try:
                sock = socket.create_connection(self._endpoint, timeout=10.0)
                tune_tcp(sock)
            except OSError as e:
                raise ChannelBroken(str(e)) from None
        else:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(10.0)
            if self._endpoint is None:
                sock.connect(self._name)
            if self._wrap is not None:
                sock = self._wrap(sock)
            # Both ends prove the cluster's secret before a request goes out.
            header = client_handshake(sock, self._name[len(NAME_PREFIX):], self._key)
            if (self.task is not None and header.get("task") != self.task) or \
                    header.get("address") != self._name[len(NAME_PREFIX):]:
                raise ChannelBroken(f"{self._name[1:]!r} is {header.get('task')} at "
                                    f"{header.get('address')}, not {self.task}")
            self.incarnation = header.get("incarnation")
            sock.settimeout(None)
            return sock, Link(shares_memory=self._endpoint is None)
        except Refused:
            sock.close()
            raise
        except (OSError, ChannelClosed, ValueError) as e:
            sock.close()
            raise ChannelBroken(str(e)) from None
        except BaseException:
            sock.close()
            raise

    def open(self) -> None:
        """Connects once now: ChannelBroken when nobody serves here."""
        conn = self.connect()
        with self._lock:
            self._idle.append(conn)

    def call(self, op: str, header: dict, out: Outgoing | None = None,
             timeout_s: float | None = None):
        """(reply header, [(name, array)]); raises the peer's OpError, or
        ChannelBroken when the connection failed before an answer."""
        return self.receive(self.send(op, header, out, timeout_s))

    def send(self, op: str, header: dict, out: Outgoing | None = None,
             timeout_s: float | None = None):
        """Sends a request on a connection of its own; ``receive`` its answer."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self.connect()
        sock, link = conn
        header["op"] = op
        if link.returns:  # the peer's segments this side read in place, done with
            header["ret"] = link.take_returns()
        self._calls[(self.task, op)] += 1
        try:
            current = sock.gettimeout()
            # settimeout is a syscall (ioctl) each time: skipped when the
            # guard it sets (the call's wait plus slack) moves by under 1%.
            if (current is None) != (timeout_s is None) or (
                    current is not None and abs(current - timeout_s) > 0.01 * timeout_s):
                sock.settimeout(timeout_s)
            send_frame(sock, header, out, link)
        except (OSError, ChannelClosed, ValueError) as e:  # an idle one went stale
            sock.close()
            link.close()
            raise ChannelBroken(f"{op} to {self.task}: {e}") from None
        return op, conn

    def receive(self, sent):
        """The answer to ``send``'s request (see ``call``)."""
        op, conn = sent
        sock, link = conn
        try:
            reply, payload, fds = recv_frame(sock, 1 << 62)
            # Large tensors are views of the peer's lent segment (wire.Link).
            tensors = decode_tensors(reply.get("t", ()), payload, fds,
                                     reply.get("seg"), link)
        except (OSError, ChannelClosed, ValueError) as e:
            sock.close()
            link.close()
            raise ChannelBroken(f"{op} to {self.task}: {e}", sent=True) from None
        with self._lock:
            closed = self._closed
            if not closed:
                self._idle.append(conn)
        if closed:
            sock.close()
            link.close()
        raise_if_error(reply)
        return reply, tensors

    def push(self, values: list, timeout_s: float | None) -> list[tuple[str, int]]:
        """Keeps ``values`` on the peer for the step that feeds them; their
        (key, push id)s."""
        ids = [random.getrandbits(62) | 1 for _ in values]
        out = Outgoing()
        for push_id, v in zip(ids, values):
            out.add(f"{push_id:x}", v)
        reply, _ = self.call("push", {"t": out.entries}, out, timeout_s)
        keys = reply.get("keys")
        if not isinstance(keys, list) or len(keys) != len(values):
            raise errors.DataLossError(None, None, f"push to {self._name[1:]} "
                                       f"answered {keys!r:.200}")
        return [(str(k), i) for k, i in zip(keys, ids)]

    def run_step(self, handle: str, feeds: dict, fetches: list, targets: list,
                 timeout_s: float | None) -> list:
        """A session's step on the master serving this channel."""
        out = Outgoing()
        for k, v in feeds.items():
            out.add(k, v)
        header = {"session": handle, "fetch": list(fetches), "target": list(targets),
                  "t": out.entries,
                  "timeout_ms": ms_from_seconds(timeout_s)}
        _, tensors = self.call("step", header, out,
                               timeout_s + 10.0 if timeout_s else None)
        if len(tensors) != len(fetches):
            raise errors.DataLossError(None, None, f"RunStep on {self._name[1:]} "
                                       f"answered {len(tensors)} of {len(fetches)} "
                                       "values")
        return [v for _, v in tensors]

    def pull(self, step_id: int, key: str, timeout_s: float):
        """The tensor the peer parked under ``key`` for ``step_id``."""
        _, tensors = self.call("pull", {"step": step_id, "key": key,
                                        "timeout_s": timeout_s}, None, timeout_s + 10.0)
        return tensors[0][1]

    def close(self):
        with self._lock:
            self._closed = True
            idle = list(self._idle)
            self._idle.clear()
        _close_connections(idle)


def _close_connections(conns: list) -> None:
    for sock, link in conns:
        sock.close()
        link.close()


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


__all__ = ["SameHostChannel", "client_channel"]
