"""The service handlers' contracts, over the in-process codec (no sockets).

``WorkerHandler`` and ``MasterHandler`` own what serving means whatever the
transport; an in-process server (``protocol="inproc"``) calls them directly,
so each method is exercised on a real ``Worker`` and ``Master``:

* a valid request gets its answer (NumPy is the oracle of the values);
* a malformed one gets ``InvalidArgumentError`` saying ``Malformed <Method>
  request: ...`` (an empty session handle, a tensor sent twice, a zero
  push id); a step its master cleaned up fails at once with ``CancelledError``;
  a parked tensor that is not there is ``NotFoundError``, a pull still pending
  when its poll ends is ``None``;
* timeouts beyond a week are cut to a week (``timeouts.MAX_TIMEOUT_MS``);
* a request id retried (through the task's one ``RecentRequests``, shared by
  both handlers and so by every transport) runs once and gets the first
  answer; another id runs again;
* ``HangupWatch``: a step whose caller goes away is cancelled (worker and
  master); a caller already gone gets ``CancelledError`` before the step
  starts; a caller that stays never fires it.
"""

from __future__ import annotations

import threading
import types
import uuid

import numpy as np
import pytest

import nbdist as nd
from nbdist import errors
from nbdist.executor.rendezvous import make_key
from nbdist.proto import config_pb2, graph_pb2
from nbdist.runtime.service import HangupWatch
from nbdist.runtime.timeouts import MAX_TIMEOUT_MS

WAIT_S = 10.0  # bound of every wait here; a passing test takes milliseconds


@pytest.fixture
def server():
    name = f"handlers-{uuid.uuid4().hex[:8]}"
    srv = nd.Server({"worker": [name]}, job_name="worker", task_index=0,
                    protocol="inproc")
    yield srv
    srv.stop()


def _doubling_partition(device: str):
    """A worker partition: ``_Feed`` x:0 -> y = x + x -> ``_Fetch`` y:0."""
    gd = graph_pb2.GraphDef()
    float32 = nd.float32.as_datatype_enum
    for name, op, inputs, attrs in (
            ("_feed/x_0", "_Feed", [], {"key": b"x:0", "dtype": float32}),
            ("y", "Add", ["_feed/x_0"] * 2, {"T": float32}),
            ("_fetch/y_0", "_Fetch", ["y"], {"key": b"y:0"})):
        node = gd.node.add(name=name, op=op, input=inputs, device=device)
        for key, value in attrs.items():
            if isinstance(value, bytes):
                node.attr[key].s = value
            else:
                node.attr[key].type = value
    return gd


def _blocked_graph():
    """A step that blocks until cancelled: a dequeue from a queue nobody fills."""
    g = nd.Graph()
    with g.as_default():
        q = nd.FIFOQueue(1, [nd.float32], shapes=[[]], name="never_filled")
        nd.identity(q.dequeue(), name="out")
    return g.as_graph_def()


def _in_thread(fn):
    """Runs ``fn()`` on a thread; returns ``wait() -> (value, error)``."""
    done, got = threading.Event(), {}

    def run():
        try:
            got["value"] = fn()
        except errors.OpError as e:
            got["error"] = e
        done.set()

    threading.Thread(target=run, daemon=True).start()

    def wait():
        assert done.wait(WAIT_S), "the call did not end"
        return got.get("value"), got.get("error")
    return wait


class Caller:
    """A codec's ``on_hangup``: remembers the callback; ``leave()`` fires it."""

    def __init__(self, gone: bool = False):
        self.gone = gone
        self.registered = threading.Event()
        self._fn = None

    def on_hangup(self, fn) -> bool:
        if self.gone:
            return False
        self._fn = fn
        self.registered.set()
        return True

    def leave(self):
        assert self.registered.wait(WAIT_S)
        self.gone = True
        self._fn()


# -- WorkerHandler ------------------------------------------------------------------
def test_worker_handler_runs_a_registered_graph_and_clamps_its_timeout(server):
    handler = server.worker_handler
    handler.create_worker_session("s")
    config = config_pb2.ConfigProto(operation_timeout_in_ms=10**13)
    graph = handler.register_graph("s", _doubling_partition(
        server.task_name + "/device:CPU:0"), config)
    assert config.operation_timeout_in_ms == MAX_TIMEOUT_MS  # a week
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out, _ = handler.run_graph("s", graph, 11, [("x:0", x)], ["y:0"],
                               timeout_ms=10**13)
    np.testing.assert_array_equal(out["y:0"], x + x)
    handler.deregister_graph("s", graph)
    with pytest.raises(errors.AbortedError, match="Graph handle is not found"):
        handler.run_graph("s", graph, 12, [("x:0", x)], ["y:0"])


def test_worker_handler_refuses_malformed_requests(server):
    handler = server.worker_handler
    with pytest.raises(errors.InvalidArgumentError,
                       match="Malformed CreateWorkerSession request: empty "
                             "session_handle"):
        handler.create_worker_session("")
    handler.create_worker_session("s")
    graph = handler.register_graph("s", _doubling_partition(
        server.task_name + "/device:CPU:0"), None)
    one = np.ones(3, np.float32)
    with pytest.raises(errors.InvalidArgumentError,
                       match="Malformed RunGraph request: a tensor is sent twice"):
        handler.run_graph("s", graph, 21, [("x:0", one), ("x:0", one)], ["y:0"])


def test_worker_handler_fails_a_run_graph_arriving_after_its_cleanup(server):
    handler = server.worker_handler
    handler.create_worker_session("s")
    graph = handler.register_graph("s", _doubling_partition(
        server.task_name + "/device:CPU:0"), None)
    handler.cleanup_graph(31)
    with pytest.raises(errors.CancelledError,
                       match=f"Step 1f was cancelled on {server.task_name} by its "
                             "master"):
        handler.run_graph("s", graph, 31, [("x:0", np.ones(1, np.float32))],
                          ["y:0"])


def test_worker_handler_recv_tensor_parked_pending_and_missing(server):
    handler = server.worker_handler
    value = np.arange(4, dtype=np.float32)
    key, step_id = handler.park(value)
    np.testing.assert_array_equal(handler.recv_tensor(step_id, key, WAIT_S), value)
    # Pulled once: a parked tensor is there or gone.
    with pytest.raises(errors.NotFoundError, match="is not parked on"):
        handler.recv_tensor(step_id, key, 0.05)
    device = server.task_name + "/device:CPU:0"
    pending = make_key(device, handler.worker.incarnation, device, "never_sent")
    assert handler.recv_tensor(41, pending, WAIT_S, wait_s=0.02) is None
    with pytest.raises(errors.DeadlineExceededError):
        handler.recv_tensor(41, pending, 0.02)


def test_worker_handler_cancels_the_step_of_a_master_that_went_away(server):
    handler = server.worker_handler
    handler.create_worker_session("s")
    graph = handler.register_graph("s", _blocked_graph(), None)
    caller = Caller()
    wait = _in_thread(lambda: handler.run_graph("s", graph, 51, [], ["out:0"],
                                                on_hangup=caller.on_hangup))
    caller.leave()
    _, error = wait()
    assert isinstance(error, errors.CancelledError), error
    assert "The master of this step went away" in str(error)
    # A master already gone: refused before the step starts.
    with pytest.raises(errors.CancelledError, match="went away before it started"):
        handler.run_graph("s", graph, 52, [], ["out:0"],
                          on_hangup=Caller(gone=True).on_hangup)


# -- MasterHandler ------------------------------------------------------------------
def _session(handler, graph_def):
    config = config_pb2.ConfigProto(operation_timeout_in_ms=10**13)
    handle, _ = handler.create_session(graph_def, config)
    assert config.operation_timeout_in_ms == 10**13  # the caller's copy is kept
    return handle


def test_master_handler_runs_a_step_and_clamps_its_timeout(server):
    handler = server.master_handler
    g = nd.Graph()
    with g.as_default():
        x = nd.placeholder(nd.float32, [None], name="x")
        nd.multiply(x, 3.0, name="y")
    handle = _session(handler, g.as_graph_def())
    options = config_pb2.RunOptions(timeout_in_ms=10**13)
    value = np.array([1.0, -2.0, 0.5], np.float32)
    (y,) = handler.run_step(handle, [("x:0", value)], ["y:0"], [], options)
    np.testing.assert_allclose(y, value * 3.0)
    assert options.timeout_in_ms == MAX_TIMEOUT_MS  # cut to a week, in place
    with pytest.raises(errors.InvalidArgumentError,
                       match="Malformed RunStep request: a tensor is fed twice"):
        handler.run_step(handle, [("x:0", value), ("x:0", value)], ["y:0"], [])
    handler.close_session(handle)


def test_master_handler_push_then_take(server):
    handler = server.master_handler
    with pytest.raises(errors.InvalidArgumentError,
                       match="Malformed PushTensors request: push_id must be "
                             "nonzero"):
        handler.push(0, np.ones(2, np.float32), "c")
    value = np.arange(5, dtype=np.float64)
    handler.admit_push(value.nbytes, "c")
    key = handler.push(61, value, "c")
    ref = types.SimpleNamespace(key=key, step_id=61)
    np.testing.assert_array_equal(handler.take_pushed(ref), value)
    with pytest.raises(errors.InvalidArgumentError, match="already used, or expired"):
        handler.take_pushed(ref)


def test_a_retried_request_id_runs_once_for_both_handlers(server):
    master, worker = server.master_handler, server.worker_handler
    assert master.recent is worker.recent  # one key space for the task
    g = nd.Graph()
    with g.as_default():
        counter = nd.Variable(0.0, name="counter")
        counter.assign_add(1.0, name="bump")
    handle = _session(master, g.as_graph_def())
    master.run_step(handle, [], [], [counter.initializer.name])

    def bump(rid):
        return master.recent.run(("RunStep", rid), lambda: master.run_step(
            handle, [], ["bump:0"], []))

    assert bump(7) == [1.0]
    assert bump(7) == [1.0]  # the retry gets the first answer, not a second run
    assert master.run_step(handle, [], ["counter:0"], []) == [1.0]
    assert bump(8) == [2.0]  # another id runs again


def test_master_handler_cancels_the_step_of_a_client_that_went_away(server):
    handler = server.master_handler
    handle = _session(handler, _blocked_graph())
    caller = Caller()
    wait = _in_thread(lambda: handler.run_step(handle, [], ["out:0"], [],
                                               on_hangup=caller.on_hangup))
    caller.leave()
    _, error = wait()
    assert isinstance(error, errors.CancelledError), error
    assert "The client of this step went away" in str(error)


# -- HangupWatch ----------------------------------------------------------------------
def test_hangup_watch_fires_only_for_a_started_unfinished_step():
    cancelled = []

    def watch_of(caller):
        return HangupWatch(caller.on_hangup, lambda sid, e: cancelled.append((sid, e)))

    stays = Caller()
    watch = watch_of(stays)
    watch.started(5)
    watch.finished()
    stays.leave()  # the call ended first: nothing to cancel
    assert cancelled == []

    before = Caller()
    watch_of(before).finished()
    before.leave()  # no step yet, none started: nothing to cancel
    assert cancelled == []

    leaves = Caller()
    watch = watch_of(leaves)
    watch.started(9)
    leaves.leave()
    assert [sid for sid, _ in cancelled] == [9]
    assert isinstance(cancelled[0][1], errors.CancelledError)
    with pytest.raises(errors.CancelledError, match="went away before it started"):
        watch.started(10)  # a later step of a caller gone
    # No codec hook (in-process calls): never fires, never refuses.
    HangupWatch(None, lambda sid, e: cancelled.append(sid)).started(11)
    assert len(cancelled) == 1
