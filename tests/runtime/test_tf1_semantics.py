"""TF1 session semantics, after TensorFlow's own ``server_lib_test.py`` and
``server_lib_*_test.py``: isolated session state, ``nd.container`` with
``Session.reset``, TF's error classes and messages, ``GPUOptions``."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest
from helpers import blocked_threads, local_cluster

import nbdist as nd
from nbdist import errors
from nbdist.runtime.grpc.client import GrpcMasterClient


@pytest.fixture(scope="module")
def server():
    s = nd.Server.create_local_server()
    yield s
    s.stop()


def _rpc_session(target, config=None):
    """A session that talks to ``target`` over gRPC even if it is in-process."""
    sess = nd.Session("", config=config)
    sess._master.close()
    sess._master = GrpcMasterClient(target, config)
    sess._target = target
    return sess


def _uninitialized(sess, fetch) -> bool:
    try:
        sess.run(fetch)
    except errors.FailedPreconditionError:
        return True
    return False


# -- isolate_session_state (testIsolateSessionState, testShapeChangingIsolateState) --
@pytest.mark.parametrize("rpc", [False, True], ids=["in-process", "grpc"])
def test_isolated_sessions_have_their_own_variables(server, graph, rpc):
    init_value = nd.placeholder(nd.int32)
    v = nd.Variable(init_value, validate_shape=False, name="v")
    make = _rpc_session if rpc else (lambda t, config: nd.Session(t, config=config))
    sharing = nd.ConfigProto(isolate_session_state=False)
    isolated = nd.ConfigProto(isolate_session_state=True)
    sh0, sh1 = make(server.target, sharing), make(server.target, sharing)
    is0, is1 = make(server.target, isolated), make(server.target, isolated)
    try:
        assert all(_uninitialized(s, v) for s in (sh0, sh1, is0, is1))
        sh0.run(v.initializer, feed_dict={init_value: 86})
        assert sh1.run(v) == 86
        assert _uninitialized(is0, v) and _uninitialized(is1, v)
        # A shape change is shared too (validate_shape=False).
        sh1.run(v.initializer, feed_dict={init_value: [86, 99]})
        np.testing.assert_array_equal(sh0.run(v), [86, 99])
        assert _uninitialized(is0, v) and _uninitialized(is1, v)
        is0.run(v.initializer, feed_dict={init_value: 37})
        np.testing.assert_array_equal(sh0.run(v), [86, 99])
        assert is0.run(v) == 37 and _uninitialized(is1, v)
        is1.run(v.initializer, feed_dict={init_value: [19, 86]})
        np.testing.assert_array_equal(sh1.run(v), [86, 99])
        assert is0.run(v) == 37
        np.testing.assert_array_equal(is1.run(v), [19, 86])
    finally:
        for s in (sh0, sh1, is0, is1):
            s.close()
    # Closing an isolated session drops its state; the shared state stays.
    with make(server.target, isolated) as again:
        assert _uninitialized(again, v)
    nd.Session.reset(server.target)


def test_shape_changing_isolate_state(server):
    sharing = nd.ConfigProto(isolate_session_state=False)
    isolated = nd.ConfigProto(isolate_session_state=True)
    with nd.Graph().as_default():
        w = nd.Variable([1, 2, 3], name="w")
        with nd.Session(server.target, config=sharing) as sess:
            assert _uninitialized(sess, w)
            sess.run(w.initializer)
            np.testing.assert_array_equal(sess.run(w), [1, 2, 3])
    with nd.Graph().as_default():
        w = nd.Variable([4, 5, 6], name="w")
        with nd.Session(server.target, config=sharing) as sess:
            np.testing.assert_array_equal(sess.run(w), [1, 2, 3])  # server-wide
            sess.run(w.initializer)
            np.testing.assert_array_equal(sess.run(w), [4, 5, 6])
    with nd.Graph().as_default():
        w = nd.Variable(37, name="w")
        with nd.Session(server.target, config=isolated) as sess:
            assert _uninitialized(sess, w)
            sess.run(w.initializer)
            assert sess.run(w) == 37
    nd.Session.reset(server.target)


def test_isolation_reaches_other_tasks(servers, graph):
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(1.0, name="on_ps")
    with nd.device("/job:worker/task:0"):
        y = v * 2.0
    with nd.Session(worker.target) as shared:
        shared.run(v.initializer)
        iso = nd.ConfigProto(isolate_session_state=True)
        with nd.Session(worker.target, config=iso) as isolated:
            assert _uninitialized(isolated, y)
            isolated.run(v.assign(5.0))
            assert isolated.run(y) == 10.0
        assert shared.run(y) == 2.0


# -- containers and Session.reset ---------------------------------------------------
def test_container_scope_sets_the_attr(graph):
    with nd.container("test0"):
        v0 = nd.Variable(1.0, name="v0")
        q = nd.FIFOQueue(2, [nd.float32])
        with nd.container("inner"):
            v1 = nd.Variable(1.0, name="v1")
        c = nd.constant(1.0)
    v2 = nd.Variable(2.0, name="v2")
    assert v0.op.get_attr("container") == "test0"
    assert q.queue_ref.op.get_attr("container") == "test0"
    assert v1.op.get_attr("container") == "inner"
    assert v2.op.get_attr("container") == ""
    assert "container" not in c.op.attrs  # only ops with the attr get it


def test_reset_fails_as_tf(server, graph):
    """testResetFails: an unknown target, an unreachable one with a deadline, an
    unknown container (no error, nothing cleared)."""
    with nd.container("test0"):
        v0 = nd.Variable(1.0, name="v0")
    v1 = nd.Variable(2.0, name="v1")
    with pytest.raises(errors.NotFoundError, match="nonexistent"):
        nd.Session.reset("nonexistent", ["test0"])
    with pytest.raises(errors.NotFoundError):
        nd.Session("nonexistent")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, never listening: nobody answers
        dead = f"grpc://127.0.0.1:{s.getsockname()[1]}"
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError):
            nd.Session.reset(dead, ["test0"],
                             config=nd.ConfigProto(operation_timeout_in_ms=5))
        assert time.monotonic() - t0 < 2.0
    sess = nd.Session(server.target)
    sess.run(nd.global_variables_initializer())
    assert (sess.run(v0), sess.run(v1)) == (1.0, 2.0)
    nd.Session.reset(server.target, ["test1"])
    with nd.Session(server.target) as sess:
        assert (sess.run(v0), sess.run(v1)) == (1.0, 2.0)
    nd.Session.reset(server.target)


@pytest.mark.parametrize("rpc_reset", [False, True], ids=["in-process", "grpc"])
def test_reset_clears_exactly_one_container(graph, rpc_reset):
    """testMultipleContainers."""
    with nd.container("test0"):
        v0 = nd.Variable(1.0, name="v0")
    with nd.container("test1"):
        v1 = nd.Variable(2.0, name="v0")
    with nd.Server.create_local_server() as server:
        sess = nd.Session(server.target)
        sess.run(nd.global_variables_initializer())
        assert (sess.run(v0), sess.run(v1)) == (1.0, 2.0)
        if rpc_reset:
            client = GrpcMasterClient(server.target)
            client.reset(["test0"])
            client.close()
        else:
            nd.Session.reset(server.target, ["test0"])
        with pytest.raises(errors.AbortedError):
            sess.run(v1)
        with nd.Session(server.target) as sess:
            assert _uninitialized(sess, v0)
            assert sess.run(v1) == 2.0


def test_default_container_is_the_job_name(servers, graph):
    """testSameVariablesClearContainer: resetting a server's job clears its
    default container and no other server's."""
    server0 = servers({"local0": ["localhost:0"]}, "local0", 0)
    server1 = servers({"local1": ["localhost:0"]}, "local1", 0)
    v0 = nd.Variable(1.0, name="v0")
    v1 = nd.Variable(2.0, name="v0")
    sess0, sess1 = nd.Session(server0.target), nd.Session(server1.target)
    sess0.run(v0.initializer)
    sess1.run(v1.initializer)
    nd.Session.reset(server0.target, ["local0"])
    with nd.Session(server0.target) as s:
        assert _uninitialized(s, v0)
        s.run(v0.initializer)
    assert sess1.run(v1) == 2.0
    nd.Session.reset(server1.target, ["local1"])
    with nd.Session(server1.target) as s:
        assert _uninitialized(s, v1)
    with nd.Session(server0.target) as s:
        assert s.run(v0) == 1.0
    with nd.Session() as local:  # Session("") keeps TF's "localhost" container
        assert local._master.local_worker.default_container == "localhost"


def test_reset_all_aborts_sessions_and_clears(server, graph):
    """testSameVariablesClear."""
    v0 = nd.Variable([[2, 1]], name="v0")
    v1 = nd.Variable([[1], [2]], name="v1")
    v2 = nd.matmul(v0, v1)
    sess1, sess2 = nd.Session(server.target), nd.Session(server.target)
    sess1.run(nd.global_variables_initializer())
    assert sess2.run(v2) == [[4]]
    nd.Session.reset(server.target)
    with pytest.raises(errors.AbortedError):
        sess2.run(v2)
    with nd.Session(server.target) as sess:
        assert _uninitialized(sess, v2)
        sess.run(nd.global_variables_initializer())
        assert sess.run(v2) == [[4]]
    nd.Session.reset(server.target)


# -- error classes and messages --------------------------------------------------------
def _close_while_blocked(sess, fetch) -> list:
    """Closes ``sess`` while another thread's ``sess.run(fetch)`` blocks in a
    wait; the errors that run raised (it must end)."""
    caught = []
    started = threading.Event()

    def blocking():
        started.set()
        try:
            sess.run(fetch)
        except errors.OpError as e:
            caught.append(e)

    t = threading.Thread(target=blocking)
    t.start()
    assert started.wait(10)
    deadline = time.monotonic() + 10
    while not blocked_threads(("wait",)) and time.monotonic() < deadline:
        time.sleep(0.01)  # polls: the step blocks in another thread
    assert blocked_threads(("wait",))
    sess.close()
    t.join(30)
    assert not t.is_alive()
    return caught


def test_close_cancels_a_blocked_step_with_tf_wording(server, graph):
    q = nd.FIFOQueue(10, [nd.float32])
    enq, deq = q.enqueue(37.0), q.dequeue()
    for sess in (nd.Session(server.target), _rpc_session(server.target)):
        sess.run(enq)
        sess.run(deq)
        caught = _close_while_blocked(sess, deq)
        assert len(caught) == 1 and isinstance(caught[0], errors.CancelledError)
        assert "Session::Close" in str(caught[0])
    nd.Session.reset(server.target)


def test_close_cancels_a_step_across_tasks_with_tf_wording(servers, graph):
    """A step blocked on the ps while its session (on the worker) closes: the
    cancel is the error, not what the graphs' removal on the ps then says."""
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    with nd.device("/job:ps/task:0"):
        q = nd.FIFOQueue(10, [nd.float32], shared_name="close_across_tasks")
        deq = q.dequeue()
    with nd.device("/job:worker/task:0"):
        out = deq * 2.0
    for attempt in range(5):  # each close races the partitions' unwinding
        caught = _close_while_blocked(nd.Session(worker.target), out)
        assert len(caught) == 1, attempt
        assert isinstance(caught[0], errors.CancelledError), (attempt, caught[0])


def test_invalid_hostname_is_invalid_argument():
    with pytest.raises(errors.InvalidArgumentError, match="port") as info:
        nd.Server({"local": ["localhost"]}, job_name="local", task_index=0)
    assert isinstance(info.value, ValueError)  # as it has always been
    assert "/job:local/replica:0/task:0" in str(info.value)


def test_two_servers_same_port_is_unknown_error(server):
    address = server.target[len("grpc://"):]
    with pytest.raises(errors.UnknownError, match="Address already in use") as info:
        nd.Server({"local_2": [address]})
    msg = str(info.value)
    assert address.rsplit(":", 1)[1] in msg and "\n" not in msg


# -- GPUOptions ----------------------------------------------------------------------
def test_gpu_options_are_accepted_and_ignored(graph):
    config = nd.ConfigProto(
        gpu_options=nd.GPUOptions(per_process_gpu_memory_fraction=0.1,
                                  allow_growth=True, visible_device_list="0"))
    server = nd.Server.create_local_server(config=config, start=False)
    try:
        opts = server.server_def.default_session_config.gpu_options
        assert opts.per_process_gpu_memory_fraction == pytest.approx(0.1)
        assert opts.allow_growth and opts.visible_device_list == "0"
    finally:
        server.stop()
    with nd.Session(config=config) as sess:
        assert sess.run(nd.constant(2.0) * 3.0) == 6.0
        assert [d.device_type for d in sess.list_devices()] == ["CPU"]
