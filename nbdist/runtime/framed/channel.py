"""``FramedChannel``: connections to one peer's framed service, over the link
its ``framed.link.Dialer`` dials."""

from __future__ import annotations

import random
import threading
import weakref

from nbdist import errors
from nbdist.runtime.framed.common import ChannelBroken
from nbdist.runtime.framed.handshake import (
    Refused,
    client_handshake,
    cluster_key,
)
from nbdist.runtime.framed.wire import (
    ChannelClosed,
    Link,
    Outgoing,
    decode_tensors,
    raise_if_error,
    recv_frame,
    send_frame,
)
from nbdist.runtime.timeouts import ms_from_seconds


def request_id() -> int:
    """A fresh nonzero 63-bit request id (TF's ``request_id``): a retry of the
    same call, over whichever transport, is run once (``RecentRequests``)."""
    return random.getrandbits(63) or 1


class FramedChannel:
    """Connections to one peer's framed service (one per concurrent call);
    ``task`` None: whichever task serves there (a session's master).
    ``dialer`` (a ``framed.link.Dialer``) makes each connection."""

    def __init__(self, task: str | None, token: str | None, calls, dialer):
        """``token``: the peer-path secret (``auth.peer_path_secret``);
        ``calls``: a ``Counter`` of the calls sent, by (peer, op)."""
        self.task = task
        self._dialer = dialer
        self._address = dialer.address
        self._key = cluster_key(token)
        self._idle: list[tuple[object, Link]] = []
        self._lock = threading.Lock()
        self._calls = calls
        self._closed = False
        self.incarnation = None
        # A channel dropped without close() (its session was never closed)
        # still closes its connections.
        weakref.finalize(self, _close_connections, self._idle)

    def connect(self) -> tuple[object, Link]:
        """A new authenticated connection; ChannelBroken if nobody (or somebody
        else) answers here."""
        try:
            sock = self._dialer.dial()
        except Refused:
            raise
        except OSError as e:
            raise ChannelBroken(str(e)) from None
        address = self._address
        try:
            # Both ends prove the cluster's secret before a request goes out.
            header = client_handshake(sock, address, self._key,
                                      uid=self._dialer.peer_user(sock),
                                      label=self._dialer.label)
            if (self.task is not None and header.get("task") != self.task) or \
                    header.get("address") != address:
                raise ChannelBroken(f"{address!r} is {header.get('task')} at "
                                    f"{header.get('address')}, not {self.task}")
            self.incarnation = header.get("incarnation")
            sock.settimeout(None)
            return sock, Link(shares_memory=self._dialer.shares_memory)
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
        if "rid" not in header:  # (a caller may retry a call: its own rid)
            header["rid"] = request_id()
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
            raise errors.DataLossError(None, None, f"push to {self._address} "
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
            raise errors.DataLossError(None, None, f"RunStep on {self._address} "
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


__all__ = ["FramedChannel", "request_id"]
