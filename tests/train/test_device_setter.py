"""replica_device_setter placement, as TF's device_setter_test.py, and the
greedy load-balancing strategy."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist.framework.device import canonical_name
from nbdist.runtime.cluster_spec import ClusterSpec
from nbdist.train.device_setter import (
    STANDARD_PS_OPS,
    GreedyLoadBalancingStrategy,
    byte_size_load_fn,
    replica_device_setter,
)

CLUSTER = {"ps": ["ps0:2222", "ps1:2222"],
           "worker": ["worker0:2222", "worker1:2222", "worker2:2222"]}


def assert_device(expected, actual):
    assert canonical_name(expected) == canonical_name(actual), (expected, actual)


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def test_cpu_override():
    with nd.device(replica_device_setter(cluster=ClusterSpec(CLUSTER))):
        with nd.device("/cpu:0"):
            v = nd.Variable([1, 2])
        w = nd.Variable([2, 1])
        with nd.device("/cpu:0"):
            a = v + w
    assert_device("/job:ps/task:0/cpu:0", v.device)
    assert_device("/job:ps/task:0/cpu:0", v.initializer.device)
    assert_device("/job:ps/task:1", w.device)
    assert_device("/job:ps/task:1", w.initializer.device)
    assert_device("/job:worker/cpu:0", a.device)


@pytest.mark.parametrize("kind", ["class", "dict", "cluster_def"])
def test_round_robin_over_two_ps(kind):
    cluster = {"class": ClusterSpec(CLUSTER), "dict": CLUSTER,
               "cluster_def": ClusterSpec(CLUSTER).as_cluster_def()}[kind]
    with nd.device(replica_device_setter(cluster=cluster)):
        v = nd.Variable([1, 2])
        w = nd.Variable([2, 1])
        a = v + w
    assert_device("/job:ps/task:0", v.device)
    assert_device("/job:ps/task:0", v.initializer.device)
    assert_device("/job:ps/task:1", w.device)
    assert_device("/job:ps/task:1", w.initializer.device)
    assert_device("/job:worker", a.device)


def test_round_robin_over_three_ps_tasks():
    with nd.device(replica_device_setter(ps_tasks=3)):
        vs = [nd.Variable(float(i), name=f"v{i}") for i in range(7)]
    assert [v.device for v in vs] == [f"/job:ps/task:{i % 3}" for i in range(7)]


def test_pin_variable_to_job():
    with nd.device(replica_device_setter(cluster=CLUSTER)):
        v = nd.Variable([1, 2])
        with nd.device("/job:moon"):
            w = nd.Variable([2, 1])
            with nd.device("/job:ps"):  # an explicit ps job still gets its task
                x = nd.Variable([0, 1])
        a = v + w + x
    assert_device("/job:ps/task:0", v.device)
    assert_device("/job:ps/task:0", v.initializer.device)
    assert_device("/job:moon", w.device)
    assert_device("/job:moon", w.initializer.device)
    assert_device("/job:ps/task:1", x.device)
    assert_device("/job:ps/task:1", x.initializer.device)
    assert_device("/job:worker", a.device)


def test_use_cpu_for_ps():
    with nd.device(replica_device_setter(ps_tasks=1, ps_device="/cpu:0")):
        v = nd.Variable([1, 2])
        with nd.device("/job:moon"):
            w = nd.Variable([2, 1])
        a = v + w
    assert_device("/cpu:0", v.device)
    assert_device("/cpu:0", v.initializer.device)
    assert_device("/job:moon/cpu:0", w.device)
    assert_device("/job:moon/cpu:0", w.initializer.device)
    assert_device("/job:worker", a.device)


def test_no_merging():
    with nd.device(replica_device_setter(cluster=CLUSTER, merge_devices=False)):
        v = nd.Variable([1, 2])
        with nd.device("/job:ps"):  # no task is set without merging
            w = nd.Variable([2, 1])
        a = v + w
    assert_device("/job:ps/task:0", v.device)
    assert_device("/job:ps", w.device)
    assert_device("/job:ps", w.initializer.device)
    assert_device("/job:worker", a.device)


def test_other_job_names_and_cpu_constraint():
    cluster = ClusterSpec({"sun": ["sun0:2222", "sun1:2222", "sun2:2222"],
                           "moon": ["moon0:2222", "moon1:2222"]})
    with nd.device(replica_device_setter(ps_device="/job:moon",
                                         worker_device="/job:sun",
                                         cluster=cluster.as_cluster_def())):
        v = nd.Variable([1, 2])
        w = nd.Variable([2, 1])
        a = v + w
    assert_device("/job:moon/task:0", v.device)
    assert_device("/job:moon/task:1", w.device)
    assert_device("/job:sun", a.device)
    with nd.device(replica_device_setter(ps_device="/job:moon/cpu:0",
                                         worker_device="/job:sun/task:2",
                                         cluster=cluster)):
        v = nd.Variable([1, 2])
        w = nd.Variable([2, 1])
        a = v + w
    assert_device("/job:moon/task:0/cpu:0", v.device)
    assert_device("/job:moon/task:1/cpu:0", w.device)
    assert_device("/job:sun/task:2", a.device)


def test_worker_fields_merge_under_inner_scopes():
    with nd.device(replica_device_setter(ps_tasks=1,
                                         worker_device="/job:worker/task:1/cpu:0")):
        a = nd.constant(1.0)
        with nd.device("/task:3"):
            b = nd.constant(2.0)
    assert_device("/job:worker/task:1/cpu:0", a.device)
    assert_device("/job:worker/task:3/cpu:0", b.device)


def test_ps_ops_and_queues():
    # Queues are not ps ops by default (as TF) ...
    with nd.device(replica_device_setter(ps_tasks=2)):
        q = nd.FIFOQueue(2, [nd.float32], shapes=[[]])
        v = nd.Variable(1.0)
    assert_device("/job:worker", q.queue_ref.device)
    assert_device("/job:ps/task:0", v.device)
    assert "FIFOQueueV2" not in STANDARD_PS_OPS
    # ... unless listed in ps_ops.
    with nd.device(replica_device_setter(ps_tasks=2,
                                         ps_ops=["VariableV2", "FIFOQueueV2"])):
        q = nd.FIFOQueue(2, [nd.float32], shapes=[[]])
        v = nd.Variable(1.0)
        deq = q.dequeue()
    assert_device("/job:ps/task:0", q.queue_ref.device)
    assert_device("/job:ps/task:1", v.device)
    assert_device("/job:ps/task:0", deq.device)  # colocated with its queue


def test_no_ps_gives_none_and_bad_strategy():
    assert replica_device_setter() is None
    assert replica_device_setter(cluster={"worker": ["w:1"]}) is None
    with pytest.raises(TypeError, match="callable"):
        replica_device_setter(ps_tasks=1, ps_strategy=3)


def test_custom_strategy_gets_the_op():
    seen = []

    def strategy(op):
        seen.append(op.type)
        return 1

    with nd.device(replica_device_setter(ps_tasks=2, ps_strategy=strategy)):
        v = nd.Variable(1.0)
    assert seen == ["VariableV2"]
    assert v.device == "/job:ps/task:1"


def test_greedy_load_balancing_4_1_1_1_mib():
    strategy = GreedyLoadBalancingStrategy(2, byte_size_load_fn)
    mib = 1 << 20
    with nd.device(replica_device_setter(ps_tasks=2, ps_strategy=strategy)):
        big = nd.get_variable("big", shape=[1024, 1024], dtype=nd.float32,
                              initializer=nd.zeros_initializer())
        small = [nd.get_variable(f"small{i}", shape=[512, 512], dtype=nd.float32,
                                 initializer=nd.zeros_initializer())
                 for i in range(3)]
    assert byte_size_load_fn(big.op) == 4 * mib
    assert all(byte_size_load_fn(s.op) == mib for s in small)
    assert big.device == "/job:ps/task:0"
    assert [s.device for s in small] == ["/job:ps/task:1"] * 3
    np.testing.assert_array_equal(strategy._ps_loads, [4 * mib, 3 * mib])


def test_greedy_round_robins_equal_loads():
    strategy = GreedyLoadBalancingStrategy(3, byte_size_load_fn)
    with nd.device(replica_device_setter(ps_tasks=3, ps_strategy=strategy)):
        vs = [nd.Variable(np.zeros([4], np.float32)) for _ in range(6)]
    assert [v.device for v in vs] == [f"/job:ps/task:{i % 3}" for i in range(6)]


def test_byte_size_load_fn_errors_and_attr_fallback():
    x = nd.placeholder(nd.float32, shape=[None, 3])
    with pytest.raises(ValueError, match="not fully defined"):
        byte_size_load_fn(x.op)
    q = nd.FIFOQueue(2, [nd.float32, nd.int32], shapes=[[], []])
    with pytest.raises(ValueError, match="single output"):
        byte_size_load_fn(q.dequeue()[0].op)
    v = nd.Variable(np.zeros([2, 5], np.float64))
    assert byte_size_load_fn(v.op) == 80
    # An op whose output shape is unknown falls back to its "shape" attr (TF's
    # legacy scalar variables).
    g = nd.get_default_graph()
    legacy = g.create_op("VariableV2", [], {"shape": nd.TensorShape([3, 2]),
                                            "dtype": nd.int64},
                         output_specs=[(nd.int64._as_ref, nd.TensorShape(None))])
    assert not legacy.outputs[0].shape.is_fully_defined()
    assert byte_size_load_fn(legacy) == 48


def test_placement_runs_on_a_cluster(servers):
    from helpers import local_cluster

    cluster = local_cluster(ps=2, worker=1)
    for i in range(2):
        servers(cluster, "ps", i)
    worker = servers(cluster, "worker", 0)
    with nd.device(replica_device_setter(cluster=cluster,
                                         worker_device="/job:worker/task:0")):
        v = nd.Variable([1.0, 2.0], name="v")
        w = nd.Variable([3.0, 4.0], name="w")
        total = v + w
    options = nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE)
    meta = nd.RunMetadata()
    with nd.Session(worker.target) as sess:
        sess.run(nd.global_variables_initializer())
        np.testing.assert_allclose(sess.run(total, options=options,
                                            run_metadata=meta), [4.0, 6.0])
    devices = {ns.node_name: ds.device for ds in meta.step_stats.dev_stats
               for ns in ds.node_stats}
    assert devices["v"].startswith("/job:ps/replica:0/task:0")
    assert devices["w"].startswith("/job:ps/replica:0/task:1")
    assert devices[total.op.name].startswith("/job:worker/replica:0/task:0")
