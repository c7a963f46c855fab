"""Connections that have not proved the token cannot crowd peers off the TCP
peer port.

A task serves its TCP peer path with a token. A peer holds one proven
connection; then 600 idle connections without a hello (more than the 512
slots of proven connections) arrive from the same address the peer uses
(one host: 127.0.0.1). Now:

* the peer's connection still answers its steps (a proven connection keeps
  its slot);
* a new connection of the peer is taken and answers (the oldest unproven
  connections of that source are shut to make room) — before, the server
  closed it at once and the peer's calls went to gRPC for as long as the
  flood was held;
* the server holds at most ``MAX_UNPROVEN_PER_SOURCE`` unproven connections
  (threads) of that source.
"""

from __future__ import annotations

import collections
import socket

import numpy as np
import pytest
from helpers import local_cluster, wait_for

import nbdist as nd
from nbdist.runtime.framed.common import MAX_UNPROVEN_PER_SOURCE
from nbdist.runtime.tcp import TcpChannel

FLOOD = 600


@pytest.fixture
def tcp_server(monkeypatch):
    monkeypatch.setenv("NBDIST_SAME_HOST", "0")
    monkeypatch.setenv("NBDIST_PEER_TCP", "always")
    server = nd.Server(local_cluster(worker=1), job_name="worker", task_index=0,
                       token="peer-token")
    yield server
    server.stop()


def _peer(server):
    (service,) = server._path_services  # the TCP peer port
    host, _, port = service.endpoint.rpartition(":")
    channel = TcpChannel(None, server.target.removeprefix("grpc://"), "peer-token",
                         collections.Counter(), (host, int(port)))
    channel.open()
    return channel, (host, int(port))


def test_a_flood_of_unproven_connections_leaves_the_peer_its_tcp_path(tcp_server):
    g = nd.Graph()
    with g.as_default():
        nd.constant(np.arange(3, dtype=np.float32), name="c")
    handle, _ = tcp_server.master.create_session(g.as_graph_def(), None)
    held, endpoint = _peer(tcp_server)
    flood = []
    try:
        for _ in range(FLOOD):
            s = socket.create_connection(endpoint, timeout=10.0)
            flood.append(s)
        # A proven connection keeps its slot.
        np.testing.assert_array_equal(
            held.run_step(handle, {}, ["c:0"], [], 30.0)[0], [0, 1, 2])
        # A new connection of the peer is taken (it is accepted after the flood).
        fresh, _ = _peer(tcp_server)
        try:
            np.testing.assert_array_equal(
                fresh.run_step(handle, {}, ["c:0"], [], 30.0)[0], [0, 1, 2])
        finally:
            fresh.close()
        (service,) = tcp_server._path_services
        wait_for(lambda: len(service._conns) <= MAX_UNPROVEN_PER_SOURCE + 2, 30,
                 "the shut unproven connections' threads to end")
    finally:
        for s in flood:
            s.close()
        held.close()
        tcp_server.master.close_session(handle)
