"""In-process servers: ``Server`` construction and lifecycle, sessions over
gRPC between tasks of one process, placement, errors, shared resources."""

from __future__ import annotations

import socket
import threading
import time

import grpc
import numpy as np
import pytest
from helpers import free_port, local_cluster, rpc_methods, sleep_op

import nbdist as nd
from nbdist import errors
from nbdist.proto import cluster_pb2, master_pb2, server_def_pb2, worker_pb2
from nbdist.runtime.grpc.client import GrpcMasterClient, GrpcWorkerClient


def _rpc_session(target, graph=None, config=None):
    """A session that talks to ``target`` over gRPC even if it is in-process."""
    sess = nd.Session("", graph=graph, config=config)
    sess._master.close()
    sess._master = GrpcMasterClient(target, config)
    sess._target = target
    return sess


# -- hello, construction, lifecycle -------------------------------------------------
def test_hello_distributed_local_server():
    c = nd.constant("Hello, distributed!")
    server = nd.Server.create_local_server()
    try:
        assert server.target.startswith("grpc://localhost:")
        port = int(server.target.rsplit(":", 1)[1])
        assert port > 0
        assert server.server_def.cluster.job[0].tasks[0] == f"localhost:{port}"
        assert server.server_def.job_name == "localhost"
        with nd.Session(server.target) as sess:
            assert sess.run(c) == b"Hello, distributed!"
            # Same process: the session uses the server's master without RPC,
            # through its handler (validation, timeouts, admission).
            assert sess._master is server.local_master
            assert sess._master.master is server._master
    finally:
        server.stop()


def test_hello_distributed_over_rpc(graph):
    c = nd.constant("Hello, distributed!")
    v = nd.Variable(np.arange(4, dtype=np.float32), name="v")
    inc = v.assign_add(np.ones(4, np.float32))
    with nd.Server.create_local_server() as server, _rpc_session(server.target) as sess:
        assert isinstance(sess._master, GrpcMasterClient)
        assert sess.run(c) == b"Hello, distributed!"
        sess.run(v.initializer)
        out = sess.run(inc)
        np.testing.assert_array_equal(out, np.arange(4) + 1)
        assert out.flags.writeable
        assert [d.name for d in sess.list_devices()] == [
            "/job:localhost/replica:0/task:0/device:CPU:0"
        ]


def test_server_forms_and_job_inference():
    port = free_port()
    spec = {"worker": [f"localhost:{port}"]}
    sd = server_def_pb2.ServerDef(
        cluster=nd.ClusterSpec(spec).as_cluster_def(),
        job_name="worker",
        task_index=0,
        protocol="grpc",
    )
    for arg in (spec, nd.ClusterSpec(spec), nd.ClusterSpec(spec).as_cluster_def(), sd):
        s = nd.Server(arg, start=False)
        try:
            assert s.task_name == "/job:worker/replica:0/task:0"
            assert s.target == f"grpc://localhost:{port}"
        finally:
            s.stop()
    two = {"ps": [f"localhost:{free_port()}"], "worker": [f"localhost:{free_port()}"]}
    with pytest.raises(ValueError, match="job_name"):
        nd.Server(two)
    with pytest.raises(ValueError, match="task_index"):
        nd.Server({"w": ["localhost:1", "localhost:2"]})
    with pytest.raises(ValueError, match="protocol"):
        nd.Server(spec, protocol="grpc+verbs")
    with pytest.raises(TypeError):
        nd.Server(42)


def test_start_false_then_start_and_context_manager():
    s = nd.Server.create_local_server(start=False)
    with pytest.raises((errors.UnavailableError, errors.DeadlineExceededError)):
        GrpcWorkerClient(
            "/job:localhost/replica:0/task:0", s.target[len("grpc://") :]
        ).get_status(timeout_s=0.5)
    with s:
        w = GrpcWorkerClient(
            "/job:localhost/replica:0/task:0", s.target[len("grpc://") :]
        )
        assert w.get_status(timeout_s=5)[0][0].endswith("/device:CPU:0")
        w.close()
    with pytest.raises(errors.FailedPreconditionError):
        s.start()


def test_stop_really_stops(graph):
    v = nd.Variable(1.0, name="v")
    server = nd.Server.create_local_server()
    address = server.target[len("grpc://") :]
    port = int(address.rsplit(":", 1)[1])
    with nd.Session(server.target) as sess:
        sess.run(v.initializer)
    server.stop()
    server.stop()  # idempotent
    client = GrpcWorkerClient("/job:localhost/replica:0/task:0", address)
    t0 = time.monotonic()
    with pytest.raises((errors.UnavailableError, errors.DeadlineExceededError)):
        client.get_status(timeout_s=1.0)
    assert time.monotonic() - t0 < 5
    client.close()
    # The port is free again and the local master is gone.
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
    from nbdist.runtime import transports

    master, owned = transports.connect_master(server.target)
    assert owned and master is not server.master  # a remote client, not in process
    master.close()


def test_port_in_use_is_one_clear_line():
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        with pytest.raises(errors.UnknownError) as info:  # as TF
            nd.Server({"ps": [f"localhost:{port}"]})
    msg = str(info.value)
    assert f"127.0.0.1:{port}" in msg and "\n" not in msg
    assert "Address already in use" in msg


def test_device_count_gives_cpus_and_bind_address():
    cfg = nd.ConfigProto(device_count={"CPU": 3})
    with (
        nd.Server.create_local_server(config=cfg) as server,
        nd.Session(server.target) as sess,
    ):
        names = [d.name for d in sess.list_devices()]
    assert names == [
        f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(3)
    ]
    assert server.bind_address.startswith("127.0.0.1:")


# -- two tasks in one process ---------------------------------------------------------
@pytest.fixture
def ps_worker(servers):
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0, config=nd.ConfigProto(device_count={"CPU": 2}))
    worker = servers(cluster, "worker", 0)
    return ps, worker


def test_cross_task_values_and_metadata(ps_worker, graph):
    _ps, worker = ps_worker
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="v")
        s = nd.constant(["a", "bc"], name="s")
    with nd.device("/job:worker/task:0"):
        y = nd.stop_gradient(v)
        s2 = nd.stop_gradient(s)
        ph = nd.placeholder(nd.float32, [2, 3], name="ph")
        z = nd.stop_gradient(ph)
    with nd.device("/job:ps/task:0"):
        put = v.assign(z)
    with nd.Session(worker.target) as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(y), np.arange(6).reshape(2, 3))
        assert list(sess.run(s2)) == [b"a", b"bc"]
        sess.run(put, {ph: np.full((2, 3), 7, np.float32)})
        md = nd.RunMetadata()
        out = sess.run(
            y,
            options=nd.RunOptions(
                trace_level=nd.RunOptions.FULL_TRACE, output_partition_graphs=True
            ),
            run_metadata=md,
        )
    np.testing.assert_array_equal(out, np.full((2, 3), 7))
    assert {d.task for d in md.step_stats.dev_stats} == {
        "/job:ps/replica:0/task:0",
        "/job:worker/replica:0/task:0",
    }
    devices = {n.device for g in md.partition_graphs for n in g.node}
    assert devices == {
        "/job:ps/replica:0/task:0/device:CPU:0",
        "/job:worker/replica:0/task:0/device:CPU:0",
    }


def test_large_tensor_streams_between_tasks(ps_worker, graph):
    _ps, worker = ps_worker
    value = np.random.default_rng(0).random((16, 1 << 20), dtype=np.float32)  # 64 MiB
    with nd.device("/job:ps/task:0"):
        ph = nd.placeholder(nd.float32, value.shape)
        v = nd.Variable(ph, name="big")
    with nd.device("/job:worker/task:0"):
        y = nd.stop_gradient(v)
    with nd.Session(worker.target) as sess:
        sess.run(v.initializer, {ph: value})
        out = sess.run(y)
    assert out.flags.writeable
    np.testing.assert_array_equal(out, value)


def test_impossible_device_lists_devices_and_soft_placement(ps_worker, graph):
    _ps, worker = ps_worker
    with nd.device("/job:ps/task:0/cpu:5"):
        a = nd.constant(1.0, name="a")
    with nd.device("/job:worker/task:0"):
        b = nd.stop_gradient(a)
    with (
        nd.Session(worker.target) as sess,
        pytest.raises(errors.InvalidArgumentError) as info,
    ):
        sess.run(b)
    msg = str(info.value)
    assert "/job:ps/replica:0/task:0/device:CPU:0" in msg
    assert "/job:ps/replica:0/task:0/device:CPU:1" in msg
    assert "/job:worker/replica:0/task:0/device:CPU:0" in msg
    cfg = nd.ConfigProto(allow_soft_placement=True)
    with nd.Session(worker.target, config=cfg) as sess:
        assert sess.run(b) == 1.0


def test_cpu1_exists_with_device_count(ps_worker, graph):
    _ps, worker = ps_worker
    with nd.device("/job:ps/task:0/cpu:1"):
        v = nd.Variable(3.0, name="v1")
    with nd.Session(worker.target) as sess:
        sess.run(v.initializer)
        md = nd.RunMetadata()
        assert (
            sess.run(
                v, options=nd.RunOptions(output_partition_graphs=True), run_metadata=md
            )
            == 3.0
        )
    assert any(
        n.device == "/job:ps/replica:0/task:0/device:CPU:1"
        for g in md.partition_graphs
        for n in g.node
    )


def test_remote_op_error_names_op_and_task(ps_worker, graph):
    _ps, worker = ps_worker
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(1.0, name="never_initialized")
    with nd.device("/job:worker/task:0"):
        y = nd.stop_gradient(v)
    for sess in (nd.Session(worker.target), _rpc_session(worker.target)):
        with sess, pytest.raises(errors.FailedPreconditionError) as info:
            sess.run(y)
        assert "never_initialized" in str(info.value)
        assert "/job:ps/replica:0/task:0" in str(info.value)


def test_resources_shared_between_sessions_until_reset(ps_worker, graph):
    ps, worker = ps_worker
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(0.0, name="shared")
        inc = v.assign_add(1.0)
    with nd.Session(worker.target) as s1:
        s1.run(v.initializer)
        s1.run(inc)
    with nd.Session(worker.target) as s2, _rpc_session(ps.target) as s3:
        assert s2.run(inc) == 2.0
        assert s3.run(inc) == 3.0
    nd.Session.reset(worker.target)
    with nd.Session(worker.target) as s4, pytest.raises(errors.FailedPreconditionError):
        s4.run(v)


def test_step_timeout_on_remote_task(ps_worker, graph):
    _ps, worker = ps_worker
    with nd.device("/job:ps/task:0"):
        slow = sleep_op(nd.constant(1.0), 30.0)
    with nd.device("/job:worker/task:0"):
        y = nd.stop_gradient(slow)
    with nd.Session(worker.target) as sess:
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(y, options=nd.RunOptions(timeout_in_ms=500))
        assert time.monotonic() - t0 < 5
    cfg = nd.ConfigProto(operation_timeout_in_ms=500)
    with _rpc_session(worker.target, config=cfg) as sess:
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(y)
        assert time.monotonic() - t0 < 5


def test_unknown_session_handle_is_aborted():
    with nd.Server.create_local_server() as server:
        client = GrpcMasterClient(server.target)
        with pytest.raises(errors.AbortedError, match="not found"):
            client.run_step("no-such-session", {}, [], [])
        client.close()


# -- discovery with a task that never answers ----------------------------------------
def test_create_session_gives_up_on_silent_task(servers, graph):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()  # accepts TCP connections, never speaks HTTP/2
    try:
        cluster = {
            "ps": [f"localhost:{silent.getsockname()[1]}"],
            "worker": [f"localhost:{free_port()}"],
        }
        worker = servers(cluster, "worker", 0)
        c = nd.constant(1.0)
        cfg = nd.ConfigProto(operation_timeout_in_ms=1000)
        for sess in (
            nd.Session(worker.target, config=cfg),
            _rpc_session(worker.target, config=cfg),
        ):
            t0 = time.monotonic()
            with sess, pytest.raises(errors.UnavailableError) as info:
                sess.run(c)
            assert time.monotonic() - t0 < 6
            assert "/job:ps/replica:0/task:0" in str(info.value)
        # device_filters leave the silent task out.
        cfg = nd.ConfigProto(device_filters=["/job:worker"])
        with nd.Session(worker.target, config=cfg) as sess:
            assert sess.run(c) == 1.0
    finally:
        silent.close()


# -- the wire: de-duplication, malformed requests ----------------------------------
def test_request_id_deduplicates_run_step(graph):
    v = nd.Variable(0.0, name="counter")
    inc = v.assign_add(1.0)
    with nd.Server.create_local_server() as server, nd.Session(server.target) as sess:
        sess.run(v.initializer)
        sess.run(inc)  # registers the graph
        client = GrpcMasterClient(server.target)
        handle = sess._handle
        from nbdist.runtime.grpc import coding

        req = master_pb2.RunStepRequest(
            session_handle=handle, fetch=[inc.name], request_id=12345
        )
        data = coding.encode_message(req, 2, [])
        r1 = client._run_step(data, timeout=10)
        r2 = client._run_step(data, timeout=10)
        assert r1[1][0][1] == r2[1][0][1] == 2.0
        assert sess.run(v) == 2.0
        client.close()


def test_malformed_requests_are_invalid_argument_and_server_survives(graph):
    c = nd.constant(2.0)
    with nd.Server.create_local_server() as server:
        address = server.target[len("grpc://") :]
        channel = grpc.insecure_channel(address)
        methods = [(f"/nbdist.{svc}/{name}", kind == "us")
                   for svc, name, kind, _ in rpc_methods(with_coordination=False)
                   if kind != "su"]
        for path, stream in methods:
            if stream:
                call = channel.unary_stream(path)
                with pytest.raises(grpc.RpcError) as info:
                    list(call(b"\xff\xff\xff", timeout=5))
                assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                continue
            call = channel.unary_unary(path)
            try:
                resp = call(b"\x0a\xff\xff\xff\xff\x0f", timeout=5)
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (path, e)
            else:  # RunStep / RunGraph: the error is in the body
                cls = (
                    master_pb2.RunStepResponse
                    if "RunStep" in path
                    else worker_pb2.RunGraphResponse
                )
                assert cls.FromString(resp).status_code == errors.INVALID_ARGUMENT
        # A hostile RecvTensor (unknown key) and an unknown graph: errors, no crash.
        recv = channel.unary_stream("/nbdist.WorkerService/RecvTensor")
        with pytest.raises(grpc.RpcError) as info:
            list(
                recv(
                    worker_pb2.RecvTensorRequest(
                        step_id=1, rendezvous_key="x"
                    ).SerializeToString(),
                    timeout=5,
                )
            )
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        channel.close()
        with _rpc_session(server.target) as sess:
            assert sess.run(c) == 2.0


def test_register_unknown_op_is_invalid_argument():
    with nd.Server.create_local_server() as server:
        w = GrpcWorkerClient(
            "/job:localhost/replica:0/task:0", server.target[len("grpc://") :]
        )
        w.get_status()
        w.create_worker_session("s1")
        gd = nd.Graph().as_graph_def()
        gd.node.add(name="x", op="NoSuchOp")
        with pytest.raises(errors.InvalidArgumentError, match="NoSuchOp"):
            w.register_graph("s1", gd)
        w.close()


def test_concurrent_runs_on_one_remote_session(ps_worker, graph):
    _ps, worker = ps_worker
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(0.0, name="c")
        inc = v.assign_add(1.0)
    with _rpc_session(worker.target) as sess:
        sess.run(v.initializer)
        errs = []

        def run():
            try:
                for _ in range(20):
                    sess.run(inc.op)
            except Exception as e:  # noqa: BLE001
                errs.append(e)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errs
        assert sess.run(v) == 80.0


def test_cluster_def_proto_roundtrip():
    cd = cluster_pb2.ClusterDef()
    job = cd.job.add(name="worker")
    job.tasks[0] = f"localhost:{free_port()}"
    with nd.Server(cd) as server:
        assert server.server_def.cluster == cd


def test_train_aliases():
    assert nd.train.Server is nd.Server
    assert nd.train.ClusterSpec is nd.ClusterSpec


def test_client_feeds_must_be_inline():
    from nbdist.runtime.grpc import coding

    with nd.Server.create_local_server() as server:
        client = GrpcMasterClient(server.target)
        req = master_pb2.RunStepRequest(session_handle="x", request_id=7)
        big = np.zeros(1 << 20, np.float32)
        data = coding.encode_message(
            req,
            2,
            [("p:0", big)],
            park=lambda v: (
                "/job:localhost/replica:0/task:0/device:CPU:0;1;/job:c;_park/1;0:0",
                1,
            ),
        )
        resp, _ = client._run_step(data, timeout=10)
        assert resp.status_code == errors.INVALID_ARGUMENT
        assert "inline" in resp.status_error_message
        client.close()


def test_an_op_with_many_outputs_feeds_another_task(servers, graph):
    """Every output of a 100-output op placed on one task can reach another."""
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    with nd.device("/job:ps/task:0"):
        parts = nd.unstack(nd.range(100), num=100)
    with nd.device("/job:worker/task:0"):
        total = nd.add_n(parts)
    with nd.Session(worker.target) as sess:
        assert sess.run(total) == sum(range(100))


def test_a_step_aborted_before_its_run_graph_registers_it_is_cancelled_at_once():
    """An abort (a CleanupGraph, a hang-up) that lands while a RunGraph is still
    starting (before the worker registered the step) cancels the step when it
    registers: a partition blocked on an empty queue does not wait forever."""
    with nd.Server.create_local_server() as server:
        worker = server._worker
        worker.create_worker_session("s1")
        g = nd.Graph()
        with g.as_default():
            q = nd.FIFOQueue(1, [nd.float32], shapes=[[]], name="never_filled")
            nd.identity(q.dequeue(), name="out")
        handle = worker.register_graph("s1", g.as_graph_def())
        step_id = 0x5EED
        worker.abort_step(step_id, errors.AbortedError(None, None,
                                                       "another partition failed"))
        done = threading.Event()
        got = []

        def run():
            try:
                worker.run_graph("s1", handle, step_id, {}, ["out:0"])
            except errors.OpError as e:
                got.append(e)
            done.set()

        threading.Thread(target=run, daemon=True).start()
        assert done.wait(30), "the aborted step blocked on its dequeue"
        assert isinstance(got[0], errors.AbortedError), got
        assert "another partition failed" in str(got[0])
