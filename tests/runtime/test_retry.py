"""Transient connection failures are retried, within bounds (issue 10, item 8).

A TCP proxy on 127.0.0.1 that this test controls stands between a client and
a real in-process server, and misbehaves on purpose:

* every connection's handshake is slow (the server's first bytes held back
  ``SLOW_HANDSHAKE_S``), as on a loaded machine: a call still succeeds;
* the first connection is cut the moment the server starts an answer (the
  request was executed): a call that the server de-duplicates by
  ``request_id`` (RunStep) is retried and runs once; an idempotent one
  (GetStatus) is retried; a call that is neither (RecvTensor, which takes
  the tensor it answers with) is not retried and fails with
  ``UnavailableError`` naming the peer and the call;
* the first connection is closed at once, before any byte: retried.
"""

from __future__ import annotations

import socket
import struct
import threading

import numpy as np
import pytest

import nbdist as nd
from nbdist import errors
from nbdist.runtime.grpc.client import GrpcMasterClient, GrpcWorkerClient
from nbdist.runtime.grpc.rpc import make_channel, wait_connected
from helpers import free_port

SLOW_HANDSHAKE_S = 1.5  # more than grpc's reconnect backoff (at most 1 s)
_HEADERS = 0x1  # HTTP/2 frame type of a response's first frame


class Proxy:
    """Forwards 127.0.0.1:<port> to ``upstream``; ``policy(n)`` says what to do
    with the n-th connection (from 0): "pass", "slow", "close", or
    ``("cut_at_answer", k)``: cut both ways when the server starts answering
    its k-th call (from 1) on that connection."""

    def __init__(self, upstream: str, policy):
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._policy = policy
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self.connections = 0
        self.cut = 0
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._spawn(self._accept)

    def _spawn(self, fn, *args):
        t = threading.Thread(target=fn, args=args, daemon=True)
        with self._lock:
            self._threads.append(t)
        t.start()

    def _accept(self):
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                n = self.connections
                self.connections += 1
                self._sockets.append(client)
            what = self._policy(n)
            if what == "close":
                client.close()
                continue
            server = socket.create_connection(self._upstream, timeout=10)
            server.settimeout(None)
            with self._lock:
                self._sockets.append(server)
            self._spawn(self._pump, client, server, "pass", (client, server))
            self._spawn(self._pump, server, client, what, (client, server))

    def _pump(self, src, dst, what, pair):
        if what == "slow":
            # The slowness being simulated: nothing signals its end.
            self._stop.wait(SLOW_HANDSHAKE_S)
        buf = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if isinstance(what, tuple):
                    buf += data
                    if _answers_started(buf) >= what[1]:
                        with self._lock:
                            self.cut += 1
                        break
                dst.sendall(data)
        except OSError:
            pass
        for s in pair:
            _hang_up(s)

    def close(self):
        self._stop.set()
        _hang_up(self._listener)  # the shutdown wakes the accept()
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for s in sockets:
            _hang_up(s)
        for t in threads:
            t.join(5)


def _hang_up(s: socket.socket):
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()


def _answers_started(data: bytes) -> int:
    """How many calls the server->client HTTP/2 bytes start answering (streams
    with a HEADERS frame)."""
    at, streams = 0, set()
    while at + 9 <= len(data):
        length = int.from_bytes(data[at:at + 3], "big")
        kind = data[at + 3]
        stream = struct.unpack(">I", data[at + 5:at + 9])[0] & 0x7FFFFFFF
        if kind == _HEADERS and stream:
            streams.add(stream)
        at += 9 + length
    return len(streams)


@pytest.fixture
def server():
    s = nd.Server.create_local_server()
    yield s
    s.stop()


@pytest.fixture
def proxies():
    made = []

    def make(upstream, policy):
        p = Proxy(upstream, policy)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def _address(server) -> str:
    return server.target.removeprefix("grpc://")


def _first(what):
    return lambda n: what if n == 0 else "pass"


@pytest.fixture
def counter(graph):
    v = nd.Variable(0.0, name="counter")
    return v, v.assign_add(1.0)


def _session(client, graph):
    handle, _ = client.create_session(graph.as_graph_def())
    return handle


def test_slow_handshake_on_a_loaded_machine_still_connects(server, proxies, graph):
    proxy = proxies(_address(server), lambda n: "slow")
    client = GrpcMasterClient("grpc://" + proxy.address)
    try:
        c = nd.constant(3.0, name="c")
        handle = _session(client, graph)
        assert client.run_step(handle, {}, [c.name], []) == [np.float32(3.0)]
    finally:
        client.close()


def test_run_step_cut_after_it_ran_is_retried_and_runs_once(server, proxies, graph,
                                                            counter):
    v, inc = counter
    direct = GrpcMasterClient(server.target)
    handle = _session(direct, graph)
    direct.run_step(handle, {}, [], [v.initializer.name])
    proxy = proxies(_address(server), _first(("cut_at_answer", 1)))
    client = GrpcMasterClient("grpc://" + proxy.address)
    try:
        assert client.run_step(handle, {}, [inc.name], []) == [np.float32(1.0)]
        assert proxy.cut == 1 and proxy.connections >= 2
        assert direct.run_step(handle, {}, [v.name], []) == [np.float32(1.0)]
    finally:
        client.close()
        direct.close()


def test_idempotent_calls_cut_mid_call_are_retried(server, proxies):
    proxy = proxies(_address(server), _first(("cut_at_answer", 1)))
    task = "/job:localhost/replica:0/task:0"
    worker = GrpcWorkerClient(task, proxy.address)
    try:
        devices = worker.get_status()
        assert devices and all(name.startswith(task) for name, _ in devices)
        assert proxy.cut == 1
    finally:
        worker.close()


def test_a_call_neither_idempotent_nor_deduplicated_is_not_retried(server, proxies,
                                                                   graph):
    n = 1 << 20  # 4 MiB: fetched by reference, then pulled with RecvTensor
    big = nd.fill([n], 2.0, name="big")
    direct = GrpcMasterClient(server.target)
    handle = _session(direct, graph)
    # Answer 1 is the RunStep's; answer 2 the RecvTensor's, which took the tensor.
    proxy = proxies(_address(server), _first(("cut_at_answer", 2)))
    client = GrpcMasterClient("grpc://" + proxy.address)
    try:
        with pytest.raises(errors.UnavailableError, match="calling RecvTensor") as info:
            client.run_step(handle, {}, [big.name], [])
        assert proxy.address in str(info.value)
        assert proxy.cut == 1 and proxy.connections == 1  # not tried again
        # The next call goes through a new connection.
        out = client.run_step(handle, {}, [big.name], [])
        np.testing.assert_array_equal(out[0], np.full(n, 2.0, np.float32))
    finally:
        client.close()
        direct.close()


def test_connection_closed_before_any_byte_is_retried(server, proxies, graph):
    proxy = proxies(_address(server), _first("close"))
    client = GrpcMasterClient("grpc://" + proxy.address)
    try:
        c = nd.constant(2.0, name="c")
        handle = _session(client, graph)
        assert client.run_step(handle, {}, [c.name], []) == [np.float32(2.0)]
        assert proxy.connections >= 2
    finally:
        client.close()


def test_waiting_to_reconnect_says_ready_timeout_or_cancelled(server):
    """The wait a retry makes for its channel: "ready" once a server answers,
    "timeout" when nothing listens, and "cancelled" at once when the channel's
    owner closes it mid-wait — with no thread left failing on the closed
    channel (grpc's own ready future leaves one: pytest turns its exception
    into an error of this test)."""
    live = make_channel(_address(server), None)
    try:
        assert wait_connected(live, 30.0) == "ready"
    finally:
        live.close()
    nothing = f"127.0.0.1:{free_port()}"
    dead = make_channel(nothing, None)
    try:
        assert wait_connected(dead, 0.3) == "timeout"
    finally:
        dead.close()
    for _ in range(10):  # closing races the wait at different points
        channel = make_channel(nothing, None)
        stop = []
        waiter = threading.Thread(
            target=lambda c=channel: stop.append(wait_connected(c, 30.0)))
        waiter.start()
        channel.close()
        waiter.join(timeout=30)
        assert not waiter.is_alive()
        assert stop[-1] == "cancelled"
    # A closed channel is not waited on; a wait its owner cancels ends at once.
    assert wait_connected(channel, 30.0) == "cancelled"
    channel = make_channel(nothing, None)
    try:
        assert wait_connected(channel, 30.0, lambda cancel: cancel() or True) == (
            "cancelled")
        assert wait_connected(channel, 30.0, lambda cancel: False) == "cancelled"
    finally:
        channel.close()
