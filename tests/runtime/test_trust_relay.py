"""A relay cannot pass for a task: the handshake binds its channel.

A process of this user takes a task's same-host socket name before the task
starts, and relays every connection made to it to the task's TCP peer port,
byte for byte. Before, a client's handshake passed through it (the proofs
covered the nonces and the address only), so the relay saw every fed value
and could rewrite fetched ones. Now each proof also covers the transport kind
and the endpoints each end sees: the task sees a TCP connection from the
relay, the client a Unix socket, so the client's proof fails at the task
(``UNAUTHENTICATED``), the client refuses the channel (``Refused``, logged as
an error) and sends nothing more there. The task says its name was taken
(``server.peer_path_problems``, its log). Sessions still get the right value
(over gRPC).
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from helpers import free_port

import nbdist as nd
from nbdist.runtime import samehost
from nbdist.runtime.framed.handshake import Refused

_RELAY = r"""
import socket, sys, threading
name = "\0" + sys.argv[1]
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(name)
listener.listen(16)
print("bound", flush=True)
host, port = sys.stdin.readline().split()
seen = [0]

def pump(src, dst, count):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if count:
                seen[0] += len(data)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

def accept():
    while True:
        client, _ = listener.accept()
        upstream = socket.create_connection((host, int(port)))
        print("relaying", flush=True)
        for a, b, c in ((client, upstream, True), (upstream, client, False)):
            threading.Thread(target=pump, args=(a, b, c), daemon=True).start()

threading.Thread(target=accept, daemon=True).start()
sys.stdin.readline()  # until the test closes stdin
"""


# A squatter of another user: it answers a hello as a server without a secret
# would (frames of samehost.wire: "<IQ" header and payload sizes, JSON header).
_SQUATTER = r"""
import json, socket, struct, sys, threading
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind("\0" + sys.argv[1])
listener.listen(4)
print("bound", flush=True)

def answer():
    while True:
        conn, _ = listener.accept()
        conn.recv(4096)
        head = json.dumps({"task": "/job:worker/replica:0/task:0",
                           "address": sys.argv[1].split("/", 1)[1],
                           "incarnation": 1}).encode()
        conn.sendall(struct.pack("<IQ", len(head), 0) + head)

threading.Thread(target=answer, daemon=True).start()
sys.stdin.readline()
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("python3", path="/usr/bin"),
                    reason="runs a process as another user: needs root and a "
                           "system python3")
def test_a_same_host_name_held_by_another_user_is_refused():
    """Without a token nothing can be proved, but the socket's peer is known
    (``SO_PEERCRED``): a name held by a process of another user (here uid
    65534) is refused before anything is sent; before, its answer was taken
    and every same-host call of the cluster went to it."""
    address = f"localhost:{free_port()}"
    squatter = subprocess.Popen(["/usr/bin/python3", "-c", _SQUATTER,
                                 "nbdist/" + address], user=65534, group=65534,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, cwd="/")
    try:
        assert squatter.stdout.readline().strip() == "bound"
        channel = samehost.SameHostChannel(None, address, None, collections.Counter())
        with pytest.raises(Refused, match="another user"):
            channel.open()
        channel.close()
    finally:
        squatter.kill()
        squatter.wait(30)
        squatter.stdin.close()
        squatter.stdout.close()


@pytest.fixture
def relayed(monkeypatch):
    """``(server, relay)``: a task whose same-host name a relay took first."""
    monkeypatch.setenv("NBDIST_SAME_HOST", "1")
    monkeypatch.setenv("NBDIST_PEER_TCP", "always")
    address = f"localhost:{free_port()}"
    relay = subprocess.Popen([sys.executable, "-c", _RELAY, "nbdist/" + address],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert relay.stdout.readline().strip() == "bound"
        server = nd.Server({"worker": [address]}, job_name="worker", task_index=0,
                           token="cluster-token")
        try:
            (endpoint,) = [s.endpoint for s in server._path_services if s.endpoint]
            host, _, port = endpoint.rpartition(":")
            relay.stdin.write(f"{host} {port}\n")
            relay.stdin.flush()
            yield server, relay
        finally:
            server.stop()
    finally:
        relay.kill()
        relay.wait(30)
        relay.stdin.close()
        relay.stdout.close()


def test_a_client_refuses_a_relay_on_the_same_host_name(relayed, caplog):
    server, relay = relayed
    address = server.target.removeprefix("grpc://")
    channel = samehost.SameHostChannel(None, address, "cluster-token",
                                       collections.Counter())
    with caplog.at_level("ERROR", logger="nbdist"):
        with pytest.raises(Refused, match="refused this process's credentials"):
            channel.open()
    assert relay.stdout.readline().strip() == "relaying"  # it did relay the hello
    assert any(r.levelname == "ERROR" and "credentials" in r.getMessage()
               for r in caplog.records)
    channel.close()
    with nd.Graph().as_default():
        x = nd.placeholder(nd.float32, [3])
        y = x * 2.0
        with nd.Session(server.target, config=nd.ConfigProto(
                auth_token="cluster-token")) as sess:
            np.testing.assert_array_equal(
                sess.run(y, {x: np.array([1, 2, 3], np.float32)}), [2, 4, 6])
    assert any("is taken by another process" in p for p in server.peer_path_problems)
