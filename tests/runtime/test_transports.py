"""The runtime's seams: targets resolve through the scheme registry, a tensor
transport registered in the process carries the cross-task tensors of its
servers, ``Session("")`` runs through the same master and worker with no RPC,
and each interface's implementations are interchangeable."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest

import nbdist as nd
from helpers import local_cluster
from nbdist.runtime import interfaces, transports
from nbdist.runtime.coordination import CoordinationService
from nbdist.runtime.coordination.local import LocalCoordinationClient
from nbdist.runtime.master import Master
from nbdist.runtime.service import LocalMaster
from nbdist.runtime.worker import Worker

PS = "/job:ps/replica:0/task:0"
WORKER = "/job:worker/replica:0/task:0"


def test_targets_resolve_by_scheme():
    assert transports.scheme_of("grpc://localhost:2222") == "grpc"
    assert transports.scheme_of("localhost:2222") == "grpc"
    with pytest.raises(ValueError, match="Unsupported protocol 'carrier-pigeon'"):
        nd.Session("carrier-pigeon://loft:1")


def test_a_registered_protocol_serves_sessions():
    """A protocol registered under a new scheme is what ``Session`` uses for it."""
    server = nd.Server.create_local_server()
    asked = []

    class Loopback:
        server_class = None

        @staticmethod
        def connect_master(target, config=None):
            asked.append(target)
            return server.master, False

    transports.register_protocol("loopback", Loopback())
    try:
        with nd.Session("loopback://anything") as sess:
            assert sess.run(nd.constant(20) + 22) == 42
        assert asked == ["loopback://anything"]
    finally:
        transports.register_protocol("loopback", None)
        server.stop()
    with pytest.raises(ValueError, match="loopback"):
        transports.protocol("loopback")


def test_every_cross_task_tensor_shows_on_the_servers_tap():
    """Whatever carries a tensor between tasks, the consumer's ``server.tap``
    sees it (``runtime.router``): the one place to observe tensor traffic."""
    cluster = local_cluster(ps=1, worker=1)
    ps = nd.Server(cluster, job_name="ps", task_index=0)
    worker = nd.Server(cluster, job_name="worker", task_index=0)
    seen = []
    stop = worker.tap.subscribe(seen.append)
    try:
        g = nd.Graph()
        with g.as_default():
            with nd.device(PS):
                a = nd.constant(np.arange(4.0))
            with nd.device(WORKER):
                b = a * 2.0
        with nd.Session(worker.target, graph=g) as sess:
            np.testing.assert_array_equal(sess.run(b), np.arange(4.0) * 2)
    finally:
        stop()
        worker.stop()
        ps.stop()
    recvs = [(e.source, e.destination, e.nbytes) for e in seen
             if e.kind == "RecvTensor"]
    assert recvs == [(PS, WORKER, np.arange(4.0).nbytes)]
    assert not hasattr(transports, "register_tensor_transport")


def test_in_process_session_needs_no_rpc():
    """``Session("")`` runs through its MasterHandler, Master and Worker without
    loading gRPC."""
    code = ("import sys, nbdist as nd\n"
            "with nd.Session('') as s:\n"
            "    assert s.run(nd.constant(2) * 21) == 42\n"
            "    assert type(s._master).__name__ == 'LocalMaster'\n"
            "print(sorted(m for m in sys.modules if m == 'grpc' or "
            "m.startswith('nbdist.runtime.grpc')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_in_process_session_and_server_share_master_and_worker_code():
    server = nd.Server.create_local_server()
    try:
        with nd.Session(server.target) as remote, nd.Session("") as local:
            # Both through a MasterHandler, as a remote session's calls are.
            assert type(remote._master) is type(local._master) is LocalMaster
            assert remote._master.master is server.master
            assert type(local._master.local_worker) is Worker
            assert isinstance(server.master.local_worker, Worker)
    finally:
        server.stop()


def test_implementations_provide_their_interfaces():
    from nbdist.runtime.grpc.client import GrpcMasterClient, GrpcWorkerClient
    from nbdist.runtime.grpc.coordination_client import GrpcCoordinationClient

    worker = Worker(WORKER)
    assert isinstance(worker, interfaces.WorkerInterface)
    assert isinstance(Master(WORKER, worker), interfaces.MasterInterface)
    service = CoordinationService([WORKER])
    try:
        local = LocalCoordinationClient(service, task=WORKER)
        assert isinstance(local, interfaces.CoordinationClient)
    finally:
        service.stop()
    for cls, iface in ((GrpcMasterClient, interfaces.MasterInterface),
                       (GrpcWorkerClient, interfaces.WorkerInterface),
                       (GrpcCoordinationClient, interfaces.CoordinationClient)):
        methods = [m for m in vars(iface) if not m.startswith("_")]
        assert len(methods) >= 7
        missing = [m for m in methods if not callable(getattr(cls, m, None))]
        assert missing == [], (cls.__name__, missing)


def test_local_coordination_client_behaves_as_the_grpc_one():
    """Barrier, key-value and events through the in-process client."""
    service = CoordinationService([PS, WORKER], heartbeat_timeout_ms=60000)
    try:
        clients = [LocalCoordinationClient(service, task=t) for t in (PS, WORKER)]
        for t, c in zip((PS, WORKER), clients):
            assert c.register_task(t, 7, "a:1", 1)[0] == service.incarnation
        rounds = []
        waiter = threading.Thread(
            target=lambda: rounds.append(clients[0].barrier("b", 30.0)))
        waiter.start()
        rounds.append(clients[1].barrier("b", 30.0))
        waiter.join(30.0)
        assert len(rounds) == 2 and rounds[0] == rounds[1]
        clients[0].insert("k", "v")
        assert clients[1].get("k", 5.0) == b"v"
        assert clients[1].try_get("missing") is None
        clients[0].publish_events([("custom", PS, {"i": 1}, 123)])
        with clients[1].watch(kinds=["custom"]) as watch:
            event = watch.wait_for(lambda e: e.kind == "custom", 10.0)
        assert (event.task, event.payload, event.wall_time_us) == (PS, {"i": 1}, 123)
    finally:
        service.stop()


def test_server_join_returns_when_stopped():
    server = nd.Server.create_local_server()
    joined = threading.Event()
    t = threading.Thread(target=lambda: (server.join(), joined.set()), daemon=True)
    t.start()
    assert not joined.wait(0.2)
    server.stop()
    assert joined.wait(30.0)


def test_step_cancelling_is_a_capability_of_an_in_process_master():
    """``MasterInterface.run_step(on_step=)`` and ``cancel_step``: a master of
    this process cancels a step by id; a remote one says it cannot (its step
    ids stay on the server)."""
    from nbdist import errors
    from nbdist.runtime.grpc.client import GrpcMasterClient

    server = nd.Server.create_local_server()
    g = nd.Graph()
    with g.as_default():
        q = nd.FIFOQueue(1, nd.float32, shapes=[[]])
        take = q.dequeue()
    try:
        master = server.master
        handle, _ = master.create_session(g.as_graph_def(), None)
        started = threading.Event()
        step_ids = []

        def on_step(step_id):
            step_ids.append(step_id)
            started.set()

        caught = []
        runner = threading.Thread(target=lambda: caught.append(pytest.raises(
            errors.CancelledError, master.run_step, handle, {}, [take.name], [],
            None, None, on_step)))
        runner.start()
        assert started.wait(30)
        master.cancel_step(handle, step_ids[0])
        runner.join(30)
        assert not runner.is_alive() and caught
        master.close_session(handle)
        client = GrpcMasterClient(server.target)
        try:
            with pytest.raises(errors.UnimplementedError, match="step ids"):
                client.cancel_step(handle, 1)
            with pytest.raises(errors.UnimplementedError, match="step ids"):
                client.run_step(handle, {}, [], [], on_step=on_step)
        finally:
            client.close()
    finally:
        server.stop()
