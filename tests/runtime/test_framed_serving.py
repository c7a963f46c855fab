"""The framed protocol (same-host socket, TCP peer path) serves through the
task's handlers, as gRPC does (issue 38, item 2):

* one de-duplication key space: a framed call's request id is kept under the
  gRPC method's name, ``(method, rid)``, in the task's one ``RecentRequests``,
  so a step sent over the same-host channel and retried over gRPC with the same
  id (or the other way round) runs once and the retry gets the first answer; every framed call carries a fresh nonzero 63-bit id;
* pushed feeds go through ``MasterHandler.push`` (its validation: a zero push
  id is refused, as ``PushTensors`` refuses it);
* a collective chunk pushed over the channel goes through
  ``WorkerHandler.push_collective`` (a chunk without its key is refused at
  once, naming the call).

The servers are ``nd.Server``s of this process; calls go over real sockets.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import local_cluster
from test_service_transports import _counter_session, _run_step_with_id

import nbdist as nd
from nbdist import errors
from nbdist.runtime import samehost
from nbdist.runtime.framed.wire import Outgoing


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("NBDIST_SAME_HOST", "1")
    s = nd.Server(local_cluster(worker=1), job_name="worker", task_index=0)
    yield s
    s.stop()


def _channel(server):
    ch = samehost.client_channel(server.target.removeprefix("grpc://"), None)
    assert ch is not None, "the same-host channel answers"
    return ch


@pytest.mark.parametrize("first, retry", [("samehost", "grpc"), ("grpc", "samehost")])
def test_a_step_retried_over_another_transport_with_its_request_id_runs_once(
        server, first, retry):
    master, handle, inc, read = _counter_session(server)
    try:
        _run_step_with_id(first, server, handle, inc, 4242)
        # The retry, the other way: it gets the first try's answer (every codec
        # keeps the handler's answer, not its own encoding), and the step does
        # not run again.
        _run_step_with_id(retry, server, handle, inc, 4242)
        assert master.run_step(handle, {}, [read], [])[0] == 1.0
        _run_step_with_id(retry, server, handle, inc, 4243)  # a new id runs
        assert master.run_step(handle, {}, [read], [])[0] == 2.0
    finally:
        master.close_session(handle)


def test_every_framed_call_carries_a_fresh_request_id_in_grpcs_key_space(server):
    master, handle, inc, read = _counter_session(server)
    recent = server._worker_handler.recent
    ch = _channel(server)
    try:
        before = set(recent._entries)
        for _ in range(3):
            ch.run_step(handle, {}, [read], [inc], 30.0)
        keys = [k for k in set(recent._entries) - before]
        assert len(keys) == 3, keys  # one per call: none reused
        assert {method for method, _ in keys} == {"RunStep"}
        assert all(0 < rid < 1 << 63 for _, rid in keys), keys
        assert master.run_step(handle, {}, [read], [])[0] == 3.0
    finally:
        ch.close()
        master.close_session(handle)


def test_a_push_over_the_channel_is_validated_by_the_master_handler(server):
    ch = _channel(server)
    try:
        out = Outgoing()
        out.add("0", np.ones(4, np.float32))  # push id 0
        with pytest.raises(errors.InvalidArgumentError,
                           match="PushTensors.*push_id must be nonzero"):
            ch.call("push", {"t": out.entries}, out, 30.0)
        (key, push_id), = ch.push([np.arange(3.0)], 30.0)  # a good one is kept
        assert push_id and key
    finally:
        ch.close()


def test_a_collective_chunk_without_its_key_is_refused_by_the_worker_handler(server):
    ch = _channel(server)
    try:
        out = Outgoing()
        out.add("", np.ones(4, np.float32))
        with pytest.raises(errors.InvalidArgumentError,
                           match="PushCollective.*a chunk needs its key"):
            ch.call("cpush", {"exec": 1, "key": "", "t": out.entries,
                              "timeout_ms": 60_000}, out, 30.0)
    finally:
        ch.close()
