"""run_distribute_coordinator: contexts, TF_CONFIG, strategies, the evaluator
split, and wait_for_other_workers as a coordination-service barrier (threads of
one client, and separate processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers import ROOT, local_cluster

import nbdist as nd
from nbdist import errors
from nbdist.distribute.strategies import distribute_coordinator as dc
from nbdist.distribute.strategies.distribute_coordinator import (
    run_distribute_coordinator,
)
from nbdist.distribute.strategies.distribute_coordinator_context import (
    get_current_worker_context,
)
from nbdist.runtime.cluster_spec import ClusterSpec

CHIEF = "/job:chief/replica:0/task:0"


@pytest.fixture(autouse=True)
def no_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    nd.reset_default_graph()
    yield


def _context_dict(ctx) -> dict:
    return {"task_type": ctx.task_type, "task_id": ctx.task_id,
            "master_target": ctx.master_target, "is_chief": ctx.is_chief,
            "num_workers": ctx.num_workers, "distributed_mode": ctx.distributed_mode,
            "should_checkpoint": ctx.should_checkpoint,
            "should_save_summary": ctx.should_save_summary,
            "experimental_should_init": ctx.experimental_should_init,
            "has_barrier": ctx.has_barrier,
            "cluster_spec": ctx.cluster_spec.as_dict() if ctx.cluster_spec else {}}


class _MockExtended:
    def __init__(self, between_graph):
        self.experimental_between_graph = between_graph
        self.experimental_should_init = None
        self.should_checkpoint = None
        self.should_save_summary = None


class MockStrategy:
    """As TF's distribute_coordinator_test.MockStrategy."""

    def __init__(self, between_graph=True, should_init=None, should_checkpoint=None,
                 should_save_summary=None):
        self.extended = _MockExtended(between_graph)
        self._should_init = should_init
        self._should_checkpoint = should_checkpoint
        self._should_save_summary = should_save_summary
        self.configured = None

    def configure(self, session_config=None, cluster_spec=None, task_type=None,
                  task_id=None):
        self.configured = (task_type, task_id)
        is_chief = dc._is_chief(cluster_spec, task_type, task_id)
        e = self.extended
        e.experimental_should_init = (is_chief if self._should_init is None
                                      else self._should_init)
        e.should_checkpoint = (is_chief if self._should_checkpoint is None
                               else self._should_checkpoint)
        e.should_save_summary = (is_chief if self._should_save_summary is None
                                 else self._should_save_summary)


@pytest.fixture
def in_process_cluster():
    """chief + 2 workers as in-process servers: fast coordination-barrier tests."""
    spec = local_cluster(chief=1, worker=2)
    servers = [nd.Server(spec, job_name=j, task_index=i)
               for j, n in (("chief", 1), ("worker", 2)) for i in range(n)]
    yield spec
    for s in reversed(servers):
        s.stop()


# -- local and unit behaviour ----------------------------------------------------------
def test_local_training_without_cluster():
    got = []

    def worker_fn(strategy):
        ctx = get_current_worker_context()
        got.append((_context_dict(ctx), type(strategy).__name__))
        ctx.wait_for_other_workers()  # no barrier: returns at once
        with pytest.raises(ValueError, match="cannot run distribute coordinator"):
            run_distribute_coordinator(lambda s: None, None)
        return 42

    assert run_distribute_coordinator(worker_fn, None) == 42
    ctx, strategy = got[0]
    assert strategy == "BetweenGraphStrategy"
    assert ctx["master_target"] == "" and ctx["is_chief"] and ctx["num_workers"] == 0
    assert not ctx["distributed_mode"] and not ctx["has_barrier"]
    assert get_current_worker_context() is None


def test_evaluator_split_and_contexts():
    spec = ClusterSpec({"chief": ["c:1"], "worker": ["w:1", "w:2"], "ps": ["p:1"],
                        "evaluator": ["e:1"]})
    assert dc._split_cluster_for_evaluator(spec, "evaluator").as_dict() == {
        "evaluator": ["e:1"]}
    assert "evaluator" not in dc._split_cluster_for_evaluator(spec, "worker").jobs
    with pytest.raises(ValueError, match="cluster_spec"):
        dc._normalize_cluster_spec(["c:1"])
    ev = dc._WorkerContext(None, spec, "evaluator", 0)
    # As TF: the evaluator runs locally (an empty master target).
    assert (ev.master_target, ev.is_chief, ev.distributed_mode) == (
        "", True, False)
    w1 = dc._WorkerContext(None, spec, "worker", 1, rpc_layer="grpc")
    assert (w1.master_target, w1.is_chief, w1.num_workers) == ("grpc://w:2", False, 3)
    in_graph = dc._WorkerContext(None, spec, None, None, rpc_layer="")
    assert (in_graph.master_target, in_graph.is_chief) == ("c:1", True)
    no_chief = ClusterSpec({"worker": ["w:1", "w:2"]})
    assert dc._WorkerContext(None, no_chief, "worker", 0).is_chief
    assert not dc._WorkerContext(None, no_chief, "worker", 1).is_chief


def test_tf_config_is_read_as_tensorflow_reads_it(monkeypatch):
    spec = {"chief": ["localhost:1"], "worker": ["localhost:2"]}
    seen = []
    monkeypatch.setattr(dc, "_run_between_graph_client",
                        lambda *a: seen.append(("between", a[4], a[6])))
    monkeypatch.setattr(dc, "_run_in_graph_client",
                        lambda *a: seen.append(("in_graph", a[4], a[6])))
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": spec, "rpc_layer": "grpc+x",
                                                "task": {"type": "client"}}))
    run_distribute_coordinator(lambda s: None, None, rpc_layer="grpc")
    kind, cluster, rpc_layer = seen.pop()
    assert kind == "between" and cluster.as_dict() == spec and rpc_layer == "grpc+x"
    run_distribute_coordinator(lambda s: None, MockStrategy(between_graph=False))
    assert seen.pop()[0] == "in_graph"
    # An explicit cluster_spec wins, and then TF_CONFIG's task is not read.
    other = {"worker": ["localhost:9"]}
    run_distribute_coordinator(lambda s: None, None, cluster_spec=other)
    assert seen.pop()[1].as_dict() == other
    with pytest.raises(ValueError, match="Unexpected coordinator mode"):
        run_distribute_coordinator(lambda s: None, None, mode="bogus")
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": spec}))
    with pytest.raises(ValueError, match='"task" is not found'):
        dc.run_standard_tensorflow_server()


def test_std_server_config_strips_device_filters():
    cfg = nd.ConfigProto(device_filters=["/job:ps"], allow_soft_placement=True)
    strategy = MockStrategy()
    dc._configure_session_config_for_std_servers(strategy, None, cfg,
                                                 ClusterSpec({"worker": ["a:1"]}),
                                                 "worker", 0)
    assert list(cfg.device_filters) == [] and cfg.allow_soft_placement
    assert strategy.configured is None  # a copy was configured


# -- STANDALONE_CLIENT with in-process servers ----------------------------------------
def test_standalone_strategy_protocol_and_evaluator(in_process_cluster):
    spec = dict(in_process_cluster, evaluator=["localhost:1"])  # never dialled
    strategy = MockStrategy(should_checkpoint=False)
    got, evals = {}, []
    lock = threading.Lock()

    def worker_fn(s):
        ctx = get_current_worker_context()
        assert isinstance(s, MockStrategy) and s is not strategy
        assert s.configured == (ctx.task_type, ctx.task_id)
        ctx.wait_for_other_workers()
        ctx.wait_for_other_workers()  # the barrier can be used again
        with lock:
            got[(ctx.task_type, ctx.task_id)] = _context_dict(ctx)

    def eval_fn(s):
        ctx = get_current_worker_context()
        evals.append((s, ctx.task_type, ctx.master_target, ctx.is_chief))
        ctx.wait_for_other_workers()

    run_distribute_coordinator(worker_fn, strategy, eval_fn=eval_fn,
                               cluster_spec=spec)
    assert sorted(got) == [("chief", 0), ("worker", 0), ("worker", 1)]
    assert got[("chief", 0)]["experimental_should_init"]
    assert not got[("worker", 1)]["experimental_should_init"]
    assert not any(c["should_checkpoint"] for c in got.values())
    assert evals == [(None, "evaluator", "", True)]


def test_a_failing_worker_releases_the_others_from_the_barrier(in_process_cluster):
    def worker_fn(strategy):
        ctx = get_current_worker_context()
        if ctx.task_id == 1:
            raise RuntimeError("worker 1 broke")
        ctx.wait_for_other_workers()

    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="worker 1 broke"):
        run_distribute_coordinator(worker_fn, None, cluster_spec=in_process_cluster)
    assert time.monotonic() - t0 < 10


def test_wait_for_other_workers_timeout_names_missing(in_process_cluster):
    def worker_fn(strategy):
        ctx = get_current_worker_context()
        if ctx.task_type == "chief":
            with pytest.raises(errors.DeadlineExceededError) as info:
                ctx.wait_for_other_workers(timeout=0.3)
            msg = str(info.value)
            assert dc.WORKER_BARRIER_ID in msg
            assert "/job:worker/replica:0/task:0" in msg

    run_distribute_coordinator(worker_fn, None, cluster_spec={
        "chief": in_process_cluster["chief"], "worker": in_process_cluster["worker"]},
        task_type=None)


# -- real processes ---------------------------------------------------------------------
@pytest.mark.slow
def test_standalone_client_between_graph_on_local_cluster():
    from nbdist.cluster.local_cluster import LocalCluster

    cluster = LocalCluster(ps=0, workers=2, chief=1, progress=False)
    try:
        got = {}
        lock = threading.Lock()
        passed = []

        def worker_fn(strategy):
            ctx = get_current_worker_context()
            g = nd.Graph()
            with g.as_default(), nd.Session(ctx.master_target) as sess:
                where = sess.run(nd.constant(ctx.task_id or 0) + 1)
            ctx.wait_for_other_workers()
            with lock:
                passed.append(ctx.task_type)
                got[(ctx.task_type, ctx.task_id)] = dict(_context_dict(ctx),
                                                         ran=int(where))

        assert run_distribute_coordinator(
            worker_fn, None, cluster_spec=cluster.cluster_spec) is None
        assert sorted(got) == [("chief", 0), ("worker", 0), ("worker", 1)]
        assert len(passed) == 3
        for (job, index), ctx in got.items():
            assert ctx["master_target"] == cluster.target(job, index)
            assert ctx["is_chief"] == (job == "chief")
            assert ctx["num_workers"] == 3
            assert ctx["distributed_mode"] and ctx["has_barrier"]
            assert ctx["should_checkpoint"] == (job == "chief")
            assert ctx["ran"] == index + 1
    finally:
        cluster.shutdown()


_INDEPENDENT = r"""
import json, sys
import nbdist as nd
from nbdist.distribute.strategies.distribute_coordinator import (
    CoordinatorMode, run_distribute_coordinator)
from nbdist.distribute.strategies.distribute_coordinator_context import (
    get_current_worker_context,
)

def worker_fn(strategy):
    ctx = get_current_worker_context()
    g = nd.Graph()
    # No barrier (as TF): a peer may already be done and gone, so the session
    # needs only this task, as between-graph sessions filter their devices.
    own = nd.ConfigProto(device_filters=[f"/job:{ctx.task_type}/task:{ctx.task_id}"])
    with g.as_default(), nd.Session(ctx.master_target, config=own) as sess:
        ran = int(sess.run(nd.constant(1) + 1))
    assert ctx.wait_for_other_workers(timeout=60) is None  # as TF: no barrier
    print("CONTEXT " + json.dumps({
        "task_type": ctx.task_type, "task_id": ctx.task_id,
        "master_target": ctx.master_target, "is_chief": ctx.is_chief,
        "num_workers": ctx.num_workers, "ran": ran, "has_barrier": ctx.has_barrier,
        "should_checkpoint": ctx.should_checkpoint,
        "cluster": ctx.cluster_spec.as_dict()}), flush=True)
    return ran

result = run_distribute_coordinator(worker_fn, None,
                                    mode=CoordinatorMode.INDEPENDENT_WORKER)
print("RESULT", result, flush=True)
"""


@pytest.mark.slow
def test_independent_workers_from_tf_config_in_three_processes():
    spec = local_cluster(chief=1, worker=2)
    procs = []
    try:
        # Workers first: their servers wait for the chief, which hosts the service.
        for job, index in (("worker", 1), ("worker", 0), ("chief", 0)):
            tf_config = {"cluster": spec, "task": {"type": job, "index": index},
                         "rpc_layer": "grpc"}
            env = dict(os.environ, TF_CONFIG=json.dumps(tf_config),
                       PYTHONUNBUFFERED="1")
            procs.append(((job, index), subprocess.Popen(
                [sys.executable, "-c", _INDEPENDENT], cwd=ROOT, env=env,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
        contexts = {}
        for key, p in procs:
            out, _ = p.communicate(timeout=120)
            assert p.returncode == 0, out
            line = next(x for x in out.splitlines() if x.startswith("CONTEXT "))
            contexts[key] = json.loads(line[len("CONTEXT "):])
            assert "RESULT 2" in out
        for (job, index), ctx in contexts.items():
            assert (ctx["task_type"], ctx["task_id"]) == (job, index)
            assert ctx["master_target"] == "grpc://" + spec[job][index]
            assert ctx["is_chief"] == (job == "chief")
            assert ctx["should_checkpoint"] == (job == "chief")
            assert ctx["num_workers"] == 3
            assert ctx["cluster"] == spec
            assert ctx["ran"] == 2
            assert ctx["has_barrier"] is False  # as TF in INDEPENDENT_WORKER mode
    finally:
        for _, p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(10)
            p.stdout.close()
