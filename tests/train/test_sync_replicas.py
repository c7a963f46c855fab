"""ConditionalAccumulator and SyncReplicasOptimizer: two replicas (two threads,
two graphs, two sessions on one in-process server) train exactly as one
process averaging the same two batches' gradients."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from helpers import averaged_gradient_descent

import nbdist as nd
from nbdist import errors
from nbdist.ops.accumulator_ops import ConditionalAccumulator, take_grads
from nbdist.train.hooks import StopAtStepHook
from nbdist.train.monitored_session import MonitoredTrainingSession
from nbdist.train.sync_replicas_optimizer import SyncReplicasOptimizer

LR = 0.1
STEPS = 5
RNG = np.random.default_rng(7)
BATCHES = [(RNG.normal(size=(8, 3)).astype(np.float32),
            RNG.normal(size=(8, 1)).astype(np.float32)) for _ in range(2)]
W0 = np.array([[0.5], [-0.3], [0.2]], np.float32)
B0 = np.float32(0.1)


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


@pytest.fixture
def server():
    s = nd.Server.create_local_server()
    yield s
    s.stop()


# -- ConditionalAccumulator ------------------------------------------------------------
def test_accumulator_average_sum_and_staleness():
    acc = ConditionalAccumulator(nd.float32, shape=[2], shared_name="acc")
    total = ConditionalAccumulator(nd.float32, shape=[2], reduction_type="SUM")
    g = nd.placeholder(nd.float32, shape=[2])
    step = nd.placeholder(nd.int64, shape=[])
    push = acc.apply_grad(g, local_step=step)
    push_sum = total.apply_grad(g)
    take, take_sum = acc.take_grad(2), total.take_grad(2)
    assert take.shape.as_list() == [2]
    with nd.Session() as s:
        s.run(push, {g: [1.0, 2.0], step: 0})
        s.run(push, {g: [3.0, 4.0], step: 0})
        assert s.run(acc.num_accumulated()) == 2
        np.testing.assert_array_equal(s.run(take), [2.0, 3.0])
        # The take moved the accumulator to global step 1: step-0 pushes are stale.
        s.run(push, {g: [9.0, 9.0], step: 0})
        assert s.run(acc.num_accumulated()) == 0
        s.run(acc.set_global_step(5))
        s.run(push, {g: [9.0, 9.0], step: 4})
        s.run(push, {g: [1.0, 1.0], step: 5})
        s.run(push, {g: [3.0, 5.0], step: 7})
        np.testing.assert_array_equal(s.run(take), [2.0, 3.0])
        s.run(push_sum, {g: [1.0, 2.0]})
        s.run(push_sum, {g: [3.0, 4.0]})
        np.testing.assert_array_equal(s.run(take_sum), [4.0, 6.0])
        with pytest.raises(errors.InvalidArgumentError, match="num_required"):
            s.run(acc.take_grad(0))
    with pytest.raises(ValueError):
        acc.apply_grad([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="reduction_type"):
        ConditionalAccumulator(nd.float32, reduction_type="MAX")


def test_take_blocks_until_enough_gradients_and_honours_timeouts():
    acc = ConditionalAccumulator(nd.float32, shape=[], shared_name="blocking")
    push = acc.apply_grad(nd.placeholder(nd.float32, shape=[], name="g"))
    take = acc.take_grad(3)
    with nd.Session(config=nd.ConfigProto(operation_timeout_in_ms=200)) as s:
        with pytest.raises(errors.DeadlineExceededError, match="gradient"):
            s.run(take)
    with nd.Session() as s:
        out = []
        t = threading.Thread(target=lambda: out.append(s.run(take)))
        t.start()
        for v in (1.0, 2.0):
            s.run(push, {"g:0": v})
        time.sleep(0.1)
        assert t.is_alive() and not out
        s.run(push, {"g:0": 6.0})
        t.join(5)
        assert out == [3.0]
        # A push arriving after a completed take is not part of it.
        s.run(push, {"g:0": 100.0})
        assert s.run(acc.num_accumulated()) == 0  # stale: local_step 0 < 1


def test_take_grads_waits_on_several_accumulators_at_once():
    a = ConditionalAccumulator(nd.float32, shape=[], shared_name="a")
    b = ConditionalAccumulator(nd.float32, shape=[], shared_name="b")
    ga, gb = (nd.placeholder(nd.float32, shape=[]) for _ in range(2))
    step = nd.placeholder(nd.int64, shape=[])
    push_a = a.apply_grad(ga, local_step=step)
    push_b = b.apply_grad(gb, local_step=step)
    both = take_grads([a, b], 2)
    with nd.Session() as s:
        out = []
        t = threading.Thread(target=lambda: out.append(s.run(both)))
        t.start()
        time.sleep(0.05)
        for va, vb in ((1.0, 10.0), (3.0, 30.0)):
            s.run(push_a, {ga: va, step: 0})
            s.run(push_b, {gb: vb, step: 0})
        # Both takes were waiting: a late push for step 0 finds both
        # accumulators already at step 1, and is dropped by both.
        s.run([push_a, push_b], {ga: 99.0, gb: 99.0, step: 0})
        t.join(5)
        assert [float(x) for x in out[0]] == [2.0, 20.0]
        assert s.run([a.num_accumulated(), b.num_accumulated()]) == [0, 0]


def test_accumulator_shared_across_sessions(server):
    acc = ConditionalAccumulator(nd.float32, shape=[2], shared_name="shared")
    push = acc.apply_grad(nd.placeholder(nd.float32, shape=[2], name="g"))
    with nd.Session(server.target) as s1, nd.Session(server.target) as s2:
        s1.run(push, {"g:0": [1.0, 1.0]})
        s2.run(push, {"g:0": [3.0, 5.0]})
        np.testing.assert_array_equal(s1.run(acc.take_grad(2)), [2.0, 3.0])


# -- SyncReplicasOptimizer ---------------------------------------------------------
def build_replica(index, num_tokens=0):
    """One worker's graph (in the default graph): a linear model on batch
    ``index``; returns (train_op, hook, opt)."""
    gs = nd.train.get_or_create_global_step()
    w = nd.Variable(W0, name="w")
    b = nd.Variable(B0, name="b")
    x, y = (nd.constant(a) for a in BATCHES[index])
    loss = nd.reduce_mean(nd.square(nd.matmul(x, w) + b - y))
    opt = SyncReplicasOptimizer(nd.train.GradientDescentOptimizer(LR),
                                replicas_to_aggregate=2, total_num_replicas=2)
    # One server holds both workers' state: each worker's local step needs its
    # own name (on a real cluster it lives on the worker's own task). The
    # accumulators and the token queue are shared through their shared names.
    with nd.name_scope(f"replica_{index}"):
        train_op = opt.minimize(loss, global_step=gs)
    hook = opt.make_session_run_hook(is_chief=index == 0, num_tokens=num_tokens)
    return train_op, hook, opt


def run_replicas(targets, build, configs=(None, None)):
    """Runs worker 0 (chief) and worker 1 in two threads in lockstep until the
    global step reaches STEPS; returns {index: number of runs}."""
    barrier = threading.Barrier(2, timeout=20)
    results: dict = {}

    def worker(index):
        try:
            with nd.Graph().as_default():
                train_op, hook = build(index)
                runs = 0
                with MonitoredTrainingSession(
                        master=targets[index], is_chief=index == 0, max_wait_secs=20,
                        config=configs[index],
                        hooks=[hook, StopAtStepHook(last_step=STEPS)],
                        log_step_count_steps=None) as sess:
                    while not sess.should_stop():
                        barrier.wait()
                        sess.run(train_op)
                        runs += 1
                results[index] = runs
        except Exception as e:  # noqa: BLE001 - reported by the test
            results[index] = e
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_sync_replicas_equals_single_process_average(server):
    def build(index):
        train_op, hook, _ = build_replica(index)
        return train_op, hook

    # Lockstep (run_replicas): each update averages one gradient of each worker;
    # otherwise a fast worker may, as in TF, take another's token and push twice.
    results = run_replicas([server.target] * 2, build)
    assert results == {0: STEPS, 1: STEPS}, results
    with nd.Graph().as_default():
        gs = nd.train.get_or_create_global_step()
        w = nd.Variable(W0, name="w")
        b = nd.Variable(B0, name="b")
        with nd.Session(server.target) as s:
            step, w_sync, b_sync = s.run([gs, w, b])
    w_ref, b_ref = averaged_gradient_descent(BATCHES, W0, B0, LR, STEPS)
    assert int(step) == STEPS
    np.testing.assert_allclose(w_sync, w_ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(b_sync, b_ref, rtol=0, atol=1e-6)
    assert not np.allclose(w_ref, W0)  # the model did move


def test_sync_replicas_graph_structure():
    train_op, hook, opt = build_replica(0)
    g = nd.get_default_graph()
    accs = [op for op in g.get_operations() if op.type == "ConditionalAccumulator"]
    assert sorted(op.get_attr("shared_name") for op in accs) == [
        "b:0/grad_accum", "w:0/grad_accum"]
    q = g.get_operation_by_name("sync_token_q")
    assert q.get_attr("shared_name") == "sync_token_q"
    local = nd.local_variables()
    assert [v.op.name for v in local] == ["replica_0/sync_rep_local_step"]
    assert local[0].dtype.base_dtype == nd.int64
    assert opt.get_chief_queue_runner().enqueue_ops[0].type == "QueueEnqueueManyV2"
    assert opt.get_init_tokens_op().type == "QueueEnqueueManyV2"
    assert opt.get_init_tokens_op(0).type == "NoOp"
    with nd.Graph().as_default():
        gs = nd.train.get_or_create_global_step()
        v = nd.Variable(1.0)
        opt = SyncReplicasOptimizer(nd.train.GradientDescentOptimizer(LR),
                                    replicas_to_aggregate=3, total_num_replicas=1)
        opt.minimize(v * 2.0, global_step=gs)
        with pytest.raises(ValueError, match="Too few tokens"):
            opt.get_init_tokens_op(1)
        assert opt.get_init_tokens_op(2).type == "QueueEnqueueManyV2"


def test_sync_replicas_argument_errors():
    opt = SyncReplicasOptimizer(nd.train.GradientDescentOptimizer(LR), 2)
    with pytest.raises(ValueError, match="after apply_gradients"):
        opt.get_chief_queue_runner()
    with pytest.raises(ValueError, match="after apply_gradients"):
        opt.get_init_tokens_op()
    v = nd.Variable(1.0)
    with pytest.raises(ValueError, match="Global step is required"):
        opt.minimize(v * 2.0)
    with pytest.raises(ValueError, match="at least one variable"):
        opt.apply_gradients([], global_step=nd.train.get_or_create_global_step())
    with pytest.raises(ValueError, match="apply_gradient should be called"):
        opt.make_session_run_hook(True).begin()


def test_sync_replicas_between_graph_on_a_cluster(servers):
    """2 ps + 2 workers (in-process servers talking gRPC), graphs built with
    replica_device_setter: each worker's local step lives on its own task."""
    from helpers import local_cluster

    from nbdist.train.device_setter import replica_device_setter

    cluster = local_cluster(ps=2, worker=2)
    for i in range(2):
        servers(cluster, "ps", i)
    workers = [servers(cluster, "worker", i) for i in range(2)]
    devices = {}

    def build(index):
        setter = replica_device_setter(cluster=cluster,
                                       worker_device=f"/job:worker/task:{index}")
        with nd.device(setter):
            gs = nd.train.get_or_create_global_step()
            w = nd.Variable(W0, name="w")
            b = nd.Variable(B0, name="b")
            x, y = (nd.constant(a) for a in BATCHES[index])
            loss = nd.reduce_mean(nd.square(nd.matmul(x, w) + b - y))
            opt = SyncReplicasOptimizer(nd.train.GradientDescentOptimizer(LR),
                                        replicas_to_aggregate=2)
            train_op = opt.minimize(loss, global_step=gs)
        g = nd.get_default_graph()
        devices[index] = {op.get_attr("shared_name"): op.device
                          for op in g.get_operations()
                          if op.type == "ConditionalAccumulator"}
        devices[index]["local_step"] = nd.local_variables()[0].device
        return train_op, opt.make_session_run_hook(index == 0, num_tokens=0)

    configs = [nd.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{i}"])
               for i in range(2)]
    results = run_replicas([w.target for w in workers], build, configs)
    assert results == {0: STEPS, 1: STEPS}, results
    assert devices[1] == {"w:0/grad_accum": "/job:ps/task:1",
                          "b:0/grad_accum": "/job:ps/task:0",
                          "local_step": "/job:worker/task:1"}
    with nd.Graph().as_default():
        with nd.device(replica_device_setter(cluster=cluster)):
            gs = nd.train.get_or_create_global_step()
            w = nd.Variable(W0, name="w")
            b = nd.Variable(B0, name="b")
        with nd.Session(workers[0].target) as s:
            step, w_sync, b_sync = s.run([gs, w, b])
    w_ref, b_ref = averaged_gradient_descent(BATCHES, W0, B0, LR, STEPS)
    assert int(step) == STEPS
    np.testing.assert_allclose(w_sync, w_ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(b_sync, b_ref, rtol=0, atol=1e-6)
