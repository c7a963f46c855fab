"""The two waits of a call between processes: a session's way to its master
(``router.MasterPath``: over a peer path when one reaches the master, else the
protocol; a step cut off after it went out is not sent again) and a ``_Recv``
asking its producer until the tensor is there (``recv_poll.poll_recv``: the
step's deadline and cancellation end it, with TF's wording)."""

from __future__ import annotations

import threading
import time

import pytest

import nbdist as nd
from nbdist import errors
from nbdist.executor.step import StepContext
from nbdist.runtime import transports
from nbdist.runtime.grpc.client import GrpcWorkerClient
from nbdist.runtime.recv_poll import PENDING, poll_recv
from nbdist.runtime.router import OFF_PATH, MasterPath


@pytest.fixture(scope="module")
def server():
    s = nd.Server.create_local_server()
    yield s
    s.stop()


def _address(server) -> str:
    return server.target[len("grpc://"):]


def _broken(sent: bool):
    def call(channel):
        raise transports.ChannelBroken("connection reset", sent=sent)
    return call


def test_a_peer_paths_broken_call_goes_again_only_when_safe(server):
    path = MasterPath(_address(server), None, None, "The master")
    assert path.channel() is not None  # the master is on this host
    # A step cut off after it went out may have run: not sent again.
    with pytest.raises(errors.UnavailableError,
                       match="The master went away during RunStep"):
        path.call("RunStep", _broken(sent=True))
    assert path.channel_now is None  # dropped; the next call looks again
    # Cut off before sending, or a call that may go again: the protocol's.
    assert path.call("RunStep", _broken(sent=False)) is OFF_PATH
    assert path.call("PushTensors", _broken(sent=True), resend_ok=True) is OFF_PATH
    assert path.call("RunStep", lambda channel: "stepped") == "stepped"
    path.drop()


def test_a_master_no_path_reaches_is_looked_for_less_and_less_often():
    path = MasterPath("127.0.0.1:1", None, None, "The master")  # nobody there
    waits = []
    for _ in range(3):
        path.look_at = 0.0  # as if the last back-off had passed
        assert path.call("RunStep", lambda channel: "stepped") is OFF_PATH
        waits.append(path.look_at - time.monotonic())
    assert 0.5 < waits[0] <= 1.0 and 1.5 < waits[1] <= 2.0 and 3.5 < waits[2] <= 4.0
    # Until then, nothing is tried.
    assert path.channel() is None and path.look_at - time.monotonic() > 3.0


def test_a_recv_from_another_task_ends_at_its_deadline_or_cancellation(server):
    client = GrpcWorkerClient(server.task_name, _address(server))
    try:
        client.get_status()
        key = (f"{server.task_name}/device:CPU:0;{client.incarnation:x};"
               "/job:w/replica:0/task:0/device:CPU:0;never:0;0:0")
        start = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError,
                           match=r"Timed out after 0\.\d s waiting for tensor never:0 "
                                 f"from Task {server.task_name}"):
            client.recv_tensor(StepContext(5, deadline=time.monotonic() + 0.3), key)
        assert time.monotonic() - start < 3.0
        step = StepContext(6)
        stop = threading.Timer(0.2, step.cancel,
                               [errors.CancelledError(None, None, "stop now")])
        stop.start()
        start = time.monotonic()
        with pytest.raises(errors.CancelledError, match="stop now"):
            client.recv_tensor(step, key)  # no deadline: the cancellation ends it
        assert time.monotonic() - start < 3.0
        stop.join()
    finally:
        client.close()


def test_a_poll_asks_for_no_longer_than_the_time_left():
    asked = []

    def ask(wait_ms, left_s):
        asked.append((wait_ms, left_s))
        time.sleep(wait_ms / 1000)
        return PENDING

    with pytest.raises(errors.DeadlineExceededError, match="tensor x:0 from peer"):
        poll_recv(StepContext(1), ask, "a;1;b;x:0;0:0", "peer", timeout_s=0.25,
                  poll_ms=100)
    assert [w for w, _ in asked[:2]] == [100, 100]
    assert all(w <= left * 1000 + 1 for w, left in asked)  # never past the deadline
    assert asked[-1][0] < 100
