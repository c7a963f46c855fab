"""The seams between clusters, the coordination service and the notebook.

One rule says which task hosts a cluster's coordination service and at which
target (``runtime.coordination.target_of``), and every cluster class, server
and notebook helper asks it; clusters declare what the notebook may read
(``cluster.base.Cluster``) and the views read only that; the notebook reaches
the distribute layer through public factories; a server's peer clients park
large feeds in a declared ``TensorParking`` made before them.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path

import numpy as np
import pytest

import nbdist as nd
from nbdist import errors
from nbdist.runtime.cluster_spec import ClusterSpec
from nbdist.runtime.coordination import CoordinationService, leader_task

NBDIST = Path(nd.__file__).resolve().parent
SPEC = {"ps": ["h:1"], "worker": ["h:2", "h:3"], "chief": ["h:4"]}


def _wait(predicate, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


# -- one leader, one target -------------------------------------------------------
@pytest.mark.parametrize("cluster, leader", [
    ({"ps": ["h:1"], "worker": ["h:2"], "chief": ["h:4"]}, "chief:0"),
    ({"ps": ["h:1"], "worker": ["h:2", "h:3"]}, "worker:0"),
    ({"ps": ["h:1", "h:5"], "evaluator": ["h:6"]}, "ps:0"),
    ({"evaluator": ["h:6"]}, "evaluator:0"),
])
def test_the_leader_is_chief_then_worker_then_ps_then_the_first_job(cluster, leader):
    from nbdist.cluster.attached import AttachedCluster
    from nbdist.runtime.coordination import target_of

    spec = ClusterSpec(cluster)
    job, index = leader.split(":")
    address = spec.task_address(job, int(index))
    assert leader_task(spec) == f"/job:{job}/replica:0/task:{index}"
    # Every way of naming the cluster gives the same target.
    for named in (spec, cluster, spec.as_cluster_def(), AttachedCluster(spec)):
        assert target_of(named) == "grpc://" + address


def test_target_of_strings_and_bad_values():
    from nbdist.runtime.coordination import target_of

    assert target_of("grpc://h:9") == "grpc://h:9"
    assert target_of("h:9") == "grpc://h:9"
    with pytest.raises(ValueError, match="empty"):
        target_of(ClusterSpec({}))
    with pytest.raises(TypeError, match="int"):
        target_of(7)


def test_every_cluster_class_takes_its_leader_from_the_one_rule():
    from nbdist.cluster.attached import AttachedCluster
    from nbdist.cluster.base import ClusterBase
    from nbdist.cluster.local_cluster import LocalCluster
    from nbdist.cluster.slurm_cluster import SlurmCluster

    for cls in (LocalCluster, SlurmCluster, AttachedCluster):
        assert issubclass(cls, ClusterBase), cls
        # Not re-implemented anywhere: the base's properties, which ask
        # runtime.coordination.
        for name in ("leader", "coordination_target", "targets", "closed",
                     "cluster_spec"):
            assert getattr(cls, name) is getattr(ClusterBase, name), (cls, name)
    attached = AttachedCluster(ClusterSpec(SPEC))
    assert attached.leader == ("chief", 0)
    assert attached.coordination_target == "grpc://h:4"


def test_a_server_that_does_not_lead_names_the_leader_by_the_same_rule():
    from nbdist.runtime.coordination import target_of

    ports = [_free_port(), _free_port()]
    cluster = {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{ports[1]}"]}
    ps = nd.Server(cluster, job_name="ps", task_index=0)
    try:
        assert ps.coordination_service is None
        assert ps.coordination_target == target_of(ClusterSpec(cluster))
        assert target_of(ps) == ps.coordination_target
    finally:
        ps.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_duplicates_are_gone():
    from nbdist.cluster.attached import AttachedCluster
    from nbdist.distribute import coordination as strategy_coordination
    from nbdist.notebook import events

    for module, name in ((events, "_leader_target"), (events, "_ServiceWatch"),
                         (strategy_coordination, "coordination_target")):
        assert not hasattr(module, name), f"{module.__name__}.{name}"
    for old in ("coordination_local.py", "coordination_agent.py", "coordination.py"):
        assert not (NBDIST / "runtime" / old).exists(), old
    assert not hasattr(AttachedCluster, "_scontrol"), "scontrol is SlurmCluster's"


# -- the in-process watch --------------------------------------------------------------
def test_the_notebook_follows_an_in_process_service_with_the_runtime_watch():
    from nbdist.notebook.events import EventFollower, ServiceEventSource
    from nbdist.runtime.coordination import LocalCoordinationClient, LocalEventWatch

    task = "/job:worker/replica:0/task:0"
    service = CoordinationService([task])
    try:
        source = ServiceEventSource(service)
        watch = source.watch(from_seq=0, kinds=["step"])
        assert isinstance(watch, LocalEventWatch)
        watch.stop()
        # The one watch, also the local client's.
        assert isinstance(LocalCoordinationClient(service).watch(), LocalEventWatch)
        follower = EventFollower(source, kinds=["step"])
        seen = []
        follower.subscribe(lambda e: seen.append(e.payload["step_id"]))
        follower.start()
        for i in range(5):
            service.publish("key_value", task, {"key": str(i)})
            service.publish("step", task, {"step_id": i})
        assert _wait(lambda: len(seen) == 5), seen
        assert seen == list(range(5))
        follower.stop()
        assert not follower.running
    finally:
        service.stop()


def test_the_service_validates_what_every_codec_passes_on():
    from nbdist.runtime.coordination import LocalCoordinationClient

    task = "/job:worker/replica:0/task:0"
    service = CoordinationService([task])
    try:
        with pytest.raises(errors.InvalidArgumentError, match="barrier_id"):
            service.barrier("", 1.0, None, task)
        with pytest.raises(errors.InvalidArgumentError, match="source_task"):
            service.barrier("b", 1.0, None, "")
        with pytest.raises(errors.InvalidArgumentError, match="Empty key"):
            LocalCoordinationClient(service).insert("", b"v")
    finally:
        service.stop()


# -- the protocol the views read -------------------------------------------------------
class OwnCluster:
    """A cluster of the user's making with every name of ``Cluster`` (no base)."""

    owned = True
    not_owned_reason = ""
    restarts_tasks = False

    def __init__(self):
        self.cluster_spec = ClusterSpec({"worker": ["h:2", "h:3"]})
        self.state = "running"
        self.closed = False
        self.leader = ("worker", 0)
        self.coordination_target = "grpc://h:2"
        self.targets = {"worker": ["grpc://h:2", "grpc://h:3"]}
        self.reads = 0

    def target(self, job="worker", index=0):
        return self.targets[job][index]

    @property
    def tasks(self):
        from nbdist.cluster.local_cluster import TaskInfo

        self.reads += 1
        return [TaskInfo("worker", i, self.cluster_spec.task_address("worker", i),
                         1000 + i, self.state) for i in range(2)]


def test_views_read_any_object_with_the_protocol():
    from nbdist.cluster.base import as_cluster, is_cluster
    from nbdist.notebook import ClusterView
    from nbdist.notebook.events import cluster_gone

    cluster = OwnCluster()
    assert is_cluster(cluster) and cluster.reads == 0  # no property ran
    assert as_cluster(cluster) is cluster
    view = ClusterView(cluster, live=False)
    try:
        rows = view.state.rows
        assert [rows[f"worker:{i}"].pid for i in range(2)] == [1000, 1001]
        assert all(r.state == "running" for r in rows.values())
        # restarts_tasks False: no kill or restart buttons.
        assert view._can_act(rows["worker:0"]) == (False, False)
        cluster.restarts_tasks = True
        assert view._can_act(rows["worker:0"]) == (True, True)
        assert not cluster_gone(cluster)
        cluster.closed, cluster.state = True, "stopped"
        assert cluster_gone(cluster)
        assert view._can_act(rows["worker:0"]) == (False, False)
        view._poll()
        assert all(r.state == "stopped" for r in rows.values())
    finally:
        view.close()


def test_an_attached_cluster_is_not_owned_and_closes_on_disconnect():
    from nbdist.cluster.attached import AttachedCluster
    from nbdist.cluster.base import is_cluster
    from nbdist.notebook.events import cluster_gone

    cluster = AttachedCluster(ClusterSpec(SPEC), source="a spec string")
    assert is_cluster(cluster)
    assert not cluster.owned and not cluster.restarts_tasks
    assert "does not own" in cluster.not_owned_reason
    assert not cluster.closed and not cluster_gone(cluster)
    cluster.disconnect()
    assert cluster.closed and cluster_gone(cluster) and cluster.tasks == []
    assert nd.cluster.AttachedCluster is AttachedCluster


def test_an_in_process_server_is_read_as_the_cluster_of_its_task():
    from nbdist.cluster.base import as_cluster
    from nbdist.notebook.events import cluster_gone

    server = nd.Server.create_local_server()
    try:
        cluster = as_cluster(server)
        assert cluster.coordination_target == server.coordination_target
        [task] = cluster.tasks
        assert (task.job, task.index, task.state) == ("localhost", 0, "running")
        assert "grpc://" + task.address == server.target
        assert not server.stopped and not cluster_gone(server)
    finally:
        server.stop()
    assert server.stopped and cluster.closed and cluster_gone(server)
    assert cluster.tasks[0].state == "stopped"
    assert as_cluster(ClusterSpec(SPEC)) is None


# -- SLURM: one parser, one layout --------------------------------------------------------
def test_attaching_to_a_slurm_job_lays_tasks_out_as_the_resolver(monkeypatch):
    from nbdist.cluster.attached import spec_from_slurm_job
    from nbdist.cluster.resolvers import SlurmClusterResolver

    answer = ("JobId=7 JobState=RUNNING NodeList=n[1-2] NumTasks=4 "
              "Comment=(null)\n")

    class Done:
        returncode, stderr, stdout = 0, "", answer

    asked = []

    def run(args, **kwargs):
        asked.append(args)
        return Done()

    spec, _ = spec_from_slurm_job("7", {"ps": 1, "worker": 3}, run=run)
    assert asked == [["scontrol", "show", "job", "-o", "7"]]  # SlurmCluster's call
    for var, value in (("PROCID", "0"), ("STEP_NUM_TASKS", "4"),
                       ("STEP_NODELIST", "n[1-2]"), ("STEP_TASKS_PER_NODE", "2(x2)")):
        monkeypatch.setenv("SLURM_" + var, value)
    resolver = SlurmClusterResolver(jobs={"ps": 1, "worker": 3}, gpus_per_node=0)
    assert spec.as_dict() == resolver.cluster_spec().as_dict()


# -- the notebook uses public names of lower packages ---------------------------------------
def test_the_notebook_imports_no_private_name_of_another_package():
    found = []
    for path in sorted((NBDIST / "notebook").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and (
                    node.module.startswith("nbdist.")
                    and not node.module.startswith("nbdist.notebook")):
                found += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_")]
    assert found == []


def test_a_cell_task_gets_the_between_graph_context_of_its_task():
    """As ``run_distribute_coordinator`` without a strategy: worker 0 is the
    chief and alone initialises, checkpoints and writes summaries."""
    from nbdist.distribute.worker_context import between_graph_context
    from nbdist.notebook.worker_context import make_context

    spec = ClusterSpec({"worker": ["a:1", "b:1"]})

    def flags(ctx):
        return (ctx.master_target, ctx.is_chief, ctx.num_workers,
                ctx.experimental_should_init, ctx.should_checkpoint,
                ctx.should_save_summary, ctx.task_name)

    for index in (0, 1):
        ctx = make_context(spec, "worker", index, barrier=None)
        chief = index == 0
        assert flags(ctx) == (f"grpc://{'ab'[index]}:1", chief, 2, chief, chief,
                              chief, f"/job:worker/replica:0/task:{index}")
        assert flags(ctx) == flags(between_graph_context(spec, "worker", index))


# -- parking: a declared dependency, made before the clients ---------------------------------
def test_peer_clients_park_in_the_tasks_parking_made_before_the_worker():
    from nbdist.executor.rendezvous import Rendezvous
    from nbdist.runtime.grpc.transport import GrpcPeers
    from nbdist.runtime.interfaces import TensorParking
    from nbdist.runtime.tensor_store import ParkedTensors
    from nbdist.runtime.worker import Worker

    task = "/job:worker/replica:0/task:0"
    parked = ParkedTensors(f"{task}/device:CPU:0", 5, Rendezvous())
    assert isinstance(parked, TensorParking)
    worker = Worker(task, incarnation=5, parked=parked)
    assert worker.parked is parked and worker.rendezvous is parked.rendezvous
    value = np.arange(6.0)
    key, step_id = parked.park(value)
    np.testing.assert_array_equal(worker.rendezvous.recv_blocking(
        step_id, key, 1.0, lambda: False), value)
    with pytest.raises(ValueError, match="not its own"):
        Worker(task, incarnation=6, parked=parked)
    peers = GrpcPeers(ClusterSpec({"worker": ["h:2"], "ps": ["h:1"]}), task,
                      parking=parked)
    client = peers.client("/job:ps/replica:0/task:0")
    try:
        assert client._park == parked.park  # the declared object, not the server
    finally:
        client.close()


def test_a_large_feed_reaches_a_peer_task():
    ports = [_free_port(), _free_port()]
    cluster = {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{ports[1]}"]}
    servers = [nd.Server(cluster, job_name=j, task_index=0) for j in ("ps", "worker")]
    try:
        g = nd.Graph()
        with g.as_default(), nd.device("/job:ps/task:0"):
            x = nd.placeholder(nd.float32, [None])
            total = nd.reduce_sum(x)
        value = np.random.default_rng(0).random(1 << 20).astype(np.float32)  # 4 MiB
        with nd.Session(servers[1].target, graph=g) as sess:
            got = sess.run(total, {x: value})
        np.testing.assert_allclose(got, value.sum(dtype=np.float64), rtol=1e-4)
    finally:
        for s in servers:
            s.stop()
