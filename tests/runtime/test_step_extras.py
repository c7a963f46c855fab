"""A pull of a tensor from another task brings along the step's other tensors
from that task that are ready (its siblings); the sender hands them over with
it. A step's pulls from one peer may take different paths: the same-host
channel to a parameter server that just restarted is down for a moment (gRPC
is used meanwhile) and back for the step's next pull. The siblings the first
path brought must be found by the next pull whatever its path; before, they
were kept by the gRPC transport alone, and the next pull asked the ps over the
same-host channel for a tensor it no longer had: the step (and its
``MonitoredTrainingSession``) waited forever (tests/cluster/test_chaos.py, seed 11).
"""

from __future__ import annotations

import numpy as np

from nbdist.executor.rendezvous import make_key
from nbdist.executor.step import StepContext
from nbdist.runtime.framed.peers import FramedTransport
from nbdist.runtime.grpc.transport import GrpcTensorTransport
from nbdist.runtime.tensor_store import MISSING, StepExtras

PS = "/job:ps/replica:0/task:0"
WORKER = "/job:worker/replica:0/task:0"


def _key(name: str) -> str:
    return make_key(f"{PS}/device:CPU:0", 1, f"{WORKER}/device:CPU:0", name)


W, B = _key("w/read"), _key("b/read")


class _PsOverGrpc:
    """``GrpcPeers`` of the worker: the ps's client, whose pull of a key hands
    over the step's other keys the ps already sent (as RecvTensor's extras)."""

    def __init__(self, sent: dict):
        self.sent = sent
        self.pulled: list[str] = []

    def client(self, task):
        assert task == PS
        return self

    def recv_tensor(self, step, key, siblings=(), extras=None):
        self.pulled.append(key)
        for k in siblings:
            if k != key and k in self.sent:
                extras[k] = self.sent.pop(k)
        return self.sent.pop(key)


class _HandedOver:
    """A same-host channel to a ps that handed every tensor over already."""

    task = PS

    def call(self, op, header, out=None, timeout_s=None):
        raise AssertionError(f"{op} of {header['key'].split(';')[3]} over the "
                             "same-host channel: the ps handed it over already")


class _ChannelBackAfterFirstPull:
    """The ps's same-host path (``SameHostStepPath``) whose channel is down for
    the first call (a restarted ps, retried 2 s later) and back from the second
    on."""

    def __init__(self):
        self.calls = 0

    def channel(self):
        self.calls += 1
        return None if self.calls == 1 else _HandedOver()

    def forget(self):
        pass


def test_sibling_brought_over_grpc_is_found_once_the_same_host_channel_is_back():
    grpc_peers = _PsOverGrpc({W: np.float32(1.5), B: np.float32(-2.0)})
    peers = _ChannelBackAfterFirstPull()
    transport = FramedTransport(GrpcTensorTransport(grpc_peers.client),
                                lambda task: peers, pushes=True)
    step = StepContext(7)

    assert transport.recv(step, PS, W, (W, B)) == np.float32(1.5)
    assert transport.recv(step, PS, B, (W, B)) == np.float32(-2.0)
    assert grpc_peers.pulled == [W]  # b came along with w: one exchange
    assert peers.calls == 1  # b was not asked for again


def test_extras_kept_by_one_store_are_taken_from_another_in_the_same_step_only():
    kept_by, taken_by = StepExtras(), StepExtras()
    step, other = StepContext(7), StepContext(8)
    kept_by.keep(step, {B: np.float32(2.0)})

    assert taken_by.take(other, B) is MISSING
    assert taken_by.take(step, B) == np.float32(2.0)
    assert kept_by.take(step, B) is MISSING  # taken once


def test_a_cancelled_steps_extras_are_dropped():
    extras = StepExtras()
    step = StepContext(7)
    extras.keep(step, {B: np.zeros(1000, np.float32)})
    step.cancel()
    assert extras.take(step, B) is MISSING
