"""Stragglers and cut links as instruments (``%cluster slow/partition/heal``):
faults injected at each task's router (every transport), off by default,
refused on clusters the notebook does not own; ``BarrierView`` showing the
straggler; ``SyncReplicasOptimizer`` backup workers dropping stale gradients
as TF's do; the staleness of asynchronous gradients.

Servers are in-process (``protocol="inproc"``, or gRPC in this process: the
``SetFaults`` call goes over the wire); no processes are started.
"""

from __future__ import annotations

import threading
import time
import types

import numpy as np
import pytest
from helpers import load_factor, local_cluster, wait_for

import nbdist as nd
from nbdist import errors
from nbdist.notebook import BarrierView, ClusterView, StalenessView, fault_control
from nbdist.notebook.attach import AttachedCluster
from nbdist.notebook.control import ClusterCommandError
from nbdist.runtime import faults as faults_module
from nbdist.train.device_setter import replica_device_setter

PS0 = "/job:ps/replica:0/task:0"
W1 = "/job:worker/replica:0/task:1"


@pytest.fixture
def inproc():
    """ps:0, worker:0, worker:1 served in process (no sockets)."""
    cluster = {"ps": ["ps0"], "worker": ["w0", "w1"]}
    started = [nd.Server(cluster, job_name="ps", task_index=0, protocol="inproc")]
    started += [nd.Server(cluster, job_name="worker", task_index=i, protocol="inproc")
                for i in range(2)]
    yield types.SimpleNamespace(
        cluster_spec=nd.train.ClusterSpec(cluster), ps=started[0], workers=started[1:],
        server_def=types.SimpleNamespace(protocol="inproc"))
    for s in reversed(started):
        s.stop()


def _pull_graph():
    """A variable on ps:0 read by worker:1 (each step: one RunGraph to ps:0
    and one tensor from ps:0 to worker:1)."""
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(np.arange(4, dtype=np.float32), name="v")
    with nd.device("/job:worker/task:1"):
        y = v * 2.0
    return v, y


@pytest.fixture
def sleeps(monkeypatch):
    """Every injected delay, in seconds (``runtime.faults`` sleeps, recorded
    instead of slept: the tests do not depend on timing)."""
    seen = []
    monkeypatch.setattr(faults_module.time, "sleep", seen.append)
    return seen


# -- the runtime: off by default, slow, partition, heal -----------------------------
def test_faults_are_off_by_default_no_call_is_delayed(inproc, sleeps, graph):
    v, y = _pull_graph()
    with nd.Session(inproc.workers[1].target) as sess:
        sess.run(v.initializer)
        for _ in range(5):
            np.testing.assert_array_equal(sess.run(y), np.arange(4) * 2.0)
    for server in (inproc.ps, *inproc.workers):
        assert server.faults.rules == []
        assert not server.faults.active
    assert sleeps == []


def test_slow_task_delays_each_call_it_makes_and_each_step_it_serves(
        inproc, sleeps, graph):
    v, y = _pull_graph()
    with nd.Session(inproc.workers[1].target) as sess:
        sess.run(v.initializer)
        sess.run(y)  # the graphs are registered: a step is RunGraph + a tensor
        line = fault_control.slow(inproc, "worker:1", "20ms")
        assert line.startswith("slowed worker:1 by 20 ms")
        assert fault_control.active_faults(inproc) == {
            "worker:1": [faults_module.FaultRule("slow", "", 0.02)]}
        np.testing.assert_array_equal(sess.run(y), np.arange(4) * 2.0)
        # RunGraph to ps:0 and the tensor pulled from it: two calls.
        assert sleeps == [0.02, 0.02]
    sleeps.clear()
    # worker:0 is not slowed: its session's calls to ps:0 are not delayed...
    with nd.Session(inproc.workers[0].target) as sess:
        sess.run(v)
    assert sleeps == []
    # ...but a step worker:1 serves for it is.
    with nd.Graph().as_default():
        with nd.device("/job:worker/task:1"):
            z = nd.constant(1.0) + 1.0
        with nd.Session(inproc.workers[0].target) as sess:
            assert sess.run(z) == 2.0
    assert sleeps == [0.02]


def test_slow_link_delays_only_the_messages_between_its_two_tasks(
        inproc, sleeps, graph):
    v, y = _pull_graph()
    assert fault_control.slow(inproc, "worker:1", "5ms", peer="ps:0") == (
        "slowed the link worker:1 ↔ ps:0 by 5 ms")
    assert inproc.ps.faults.rules == [
        faults_module.FaultRule("slow", W1, 0.005)]
    with nd.Session(inproc.workers[0].target) as sess:  # worker:0 <-> ps:0: not slow
        sess.run(v.initializer)
    assert sleeps == []
    with nd.Session(inproc.workers[1].target) as sess:
        sess.run(y)
        sleeps.clear()
        np.testing.assert_array_equal(sess.run(y), np.arange(4) * 2.0)
        assert sleeps == [0.005, 0.005]  # the step's RunGraph and its tensor
    # Closing, the session's DeregisterGraph and DeleteWorkerSession cross it too.
    assert sleeps == [0.005] * 4


def test_partition_fails_calls_across_the_link_as_a_cut_link_and_heal_recovers(
        inproc, graph):
    v, y = _pull_graph()
    with nd.Session(inproc.workers[1].target) as sess:
        sess.run(v.initializer)
        fault_control.partition(inproc, "worker:1", "ps:0")
        # The class a real cut link gives (test_multihost's network-namespace
        # test: UnavailableError naming the unreachable task).
        with pytest.raises(errors.UnavailableError) as e:
            sess.run(y)
        assert PS0 in str(e.value) and W1 in str(e.value)
        # The other worker's link to ps:0 is not cut.
        with nd.Session(inproc.workers[0].target) as other:
            np.testing.assert_array_equal(other.run(v), np.arange(4))
        assert fault_control.heal(inproc) == (
            "healed: removed link worker:1 ↔ ps:0 cut (no fault left)")
        np.testing.assert_array_equal(sess.run(y), np.arange(4) * 2.0)
    assert fault_control.active_faults(inproc) == {}
    assert fault_control.heal(inproc) == "no fault to heal"


def test_a_monitored_session_recovers_after_heal_as_after_a_restored_link(servers):
    """gRPC servers: the fault is set over the wire (SetFaults). The step
    across the cut link fails with UnavailableError; MonitoredSession takes
    it for a preemption and opens its session again, which succeeds once the
    link is healed: the same path as a link cut and restored."""
    cluster = local_cluster(ps=1, worker=2)
    started = [servers(cluster, "ps", 0)]
    started += [servers(cluster, "worker", i) for i in range(2)]
    c = types.SimpleNamespace(cluster_spec=nd.train.ClusterSpec(cluster))
    with nd.Graph().as_default():
        with nd.device("/job:ps/task:0"):
            counter = nd.Variable(0, name="counter")
        with nd.device("/job:worker/task:1"):
            bump = counter.assign_add(1)
        failures = []

        def heal_after_a_failure():
            deadline = time.monotonic() + 30
            while started[2].faults.calls_failed == 0:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            failures.append(started[2].faults.calls_failed)
            fault_control.heal(c)

        with nd.train.MonitoredSession(
                session_creator=nd.train.ChiefSessionCreator(
                    master=started[2].target)) as sess:
            assert sess.run(bump) == 1
            fault_control.partition(c, "worker:1", "ps:0")
            healer = threading.Thread(target=heal_after_a_failure)
            healer.start()
            value = sess.run(bump)  # fails, recovers after heal, runs
            healer.join(30)
        assert failures and failures[0] >= 1
        # A recovered session re-initialises (no checkpoint): counter starts at 0.
        assert value == 1


def test_set_faults_validates_over_the_wire(servers):
    cluster = local_cluster(worker=1)
    server = servers(cluster, "worker", 0)
    from nbdist.runtime import transports

    client = transports.connect_worker("/job:worker/replica:0/task:0",
                                       cluster["worker"][0])
    try:
        with pytest.raises(errors.InvalidArgumentError, match="Unknown fault kind"):
            client.set_faults([("jitter", "", 0.1)])
        with pytest.raises(errors.InvalidArgumentError, match="at most 10 s"):
            client.set_faults([("slow", "", 60.0)])
        with pytest.raises(errors.InvalidArgumentError, match="name the peer"):
            client.set_faults([("partition", "", 0.0)])
        assert client.set_faults([("slow", "", 0.02)]) == [("slow", "", 0.02)]
        assert server.faults.active
        assert client.set_faults([]) == []
        assert not server.faults.active
    finally:
        client.close()


# -- refusals and the view's history --------------------------------------------------
def test_faults_are_refused_on_a_cluster_the_notebook_does_not_own():
    attached = AttachedCluster(nd.train.ClusterSpec(
        {"ps": ["localhost:1"], "worker": ["localhost:2"]}), source="a spec")
    for act in (lambda: fault_control.slow(attached, "worker:0", "20ms"),
                lambda: fault_control.partition(attached, "worker:0", "ps:0"),
                lambda: fault_control.heal(attached)):
        with pytest.raises(ClusterCommandError, match="does not own its processes"):
            act()
    view = ClusterView(attached, live=False)
    with pytest.raises(ClusterCommandError, match="slow is unavailable"):
        view.slow("worker:0", "20ms")
    assert "slow" not in repr(view)  # nothing was recorded
    for bad, match in ((lambda: fault_control.parse_delay("fast"), "not a delay"),
                       (lambda: fault_control.parse_delay("20s"), "at most 10 s")):
        with pytest.raises(ClusterCommandError, match=match):
            bad()


def test_cluster_view_records_each_fault_in_its_tasks_history(inproc):
    inproc.kill = inproc.restart = lambda *a: None  # a cluster this notebook owns
    view = ClusterView(inproc, live=False)
    view.slow("worker:1", "20ms")
    view.partition("worker:0", "ps:0")
    view.heal()
    lines = dict(view.state.history_lines())
    assert "slowed worker:1 by 20 ms" in lines["worker:1"]
    assert "healed" in lines["worker:1"]
    assert "cut the link worker:0 ↔ ps:0" in lines["ps:0"]
    assert view.message == ("healed: removed link worker:0 ↔ ps:0 cut; worker:1 "
                            "slowed by 20 ms (no fault left)")
    assert "slowed worker:1 by 20 ms" in repr(view)
    assert not inproc.workers[1].faults.active


# -- SyncReplicasOptimizer: the straggler, backup workers ------------------------------
def _train_sync(cluster, targets, replicas_to_aggregate, steps, num_tokens=-1):
    """Between-graph SyncReplicas training, one thread per worker, until the
    global step reaches ``steps``; returns {worker index: steps run}."""
    n = len(targets)
    results: dict = {}
    # Training starts once every worker has its session (a slowed worker's
    # session takes longer to make): then all of them train at once.
    ready = threading.Barrier(n, timeout=60)

    def worker(i):
        try:
            with nd.Graph().as_default():
                setter = replica_device_setter(
                    cluster=cluster, worker_device=f"/job:worker/task:{i}")
                with nd.device(setter):
                    gs = nd.train.get_or_create_global_step()
                    w = nd.Variable(np.zeros((4, 1), np.float32), name="w")
                    x = nd.constant(np.full((8, 4), i + 1.0, np.float32))
                    loss = nd.reduce_mean(nd.square(nd.matmul(x, w) - 1.0))
                    opt = nd.train.SyncReplicasOptimizer(
                        nd.train.GradientDescentOptimizer(0.01),
                        replicas_to_aggregate=replicas_to_aggregate,
                        total_num_replicas=n)
                    train_op = opt.minimize(loss, global_step=gs)
                    # Tokens for a worker still in a step when the others stop.
                    leave_tokens = opt.get_init_tokens_op(num_tokens=n)
                hooks = [opt.make_session_run_hook(i == 0, num_tokens=num_tokens),
                         nd.train.StopAtStepHook(last_step=steps)]
                config = nd.ConfigProto(
                    device_filters=["/job:ps", f"/job:worker/task:{i}"])
                ran = 0
                with nd.train.MonitoredTrainingSession(
                        master=targets[i], is_chief=i == 0, hooks=hooks, config=config,
                        max_wait_secs=30, log_step_count_steps=None) as sess:
                    ready.wait()
                    while not sess.should_stop():
                        sess.run(train_op)
                        ran += 1
                with nd.Session(targets[i], config=config) as sess:
                    sess.run(leave_tokens)
                results[i] = ran
        except Exception as e:  # noqa: BLE001 - reported by the test
            results[i] = e
            ready.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a worker is stuck"
    return results


def _global_step(target, cluster):
    with nd.Graph().as_default():
        with nd.device(replica_device_setter(cluster=cluster)):
            gs = nd.train.get_or_create_global_step()
        with nd.Session(target) as sess:
            return int(sess.run(gs))


def test_a_slowed_worker_arrives_last_in_barrier_view(servers):
    """2 workers, every round needs both gradients (no spare tokens: each
    update averages one gradient per worker); worker:1 slowed by 20 ms."""
    cluster = local_cluster(ps=1, worker=2)
    servers(cluster, "ps", 0)
    workers = [servers(cluster, "worker", i) for i in range(2)]
    c = types.SimpleNamespace(cluster_spec=nd.train.ClusterSpec(cluster))
    view = BarrierView(workers[0])
    try:
        # 20 ms on an idle machine; beside busy loops the scheduler's own delays
        # grow by about the load per core, so the slowdown does too.
        fault_control.slow(c, "worker:1", f"{round(20 * load_factor())}ms")
        steps = 30
        results = _train_sync(cluster, [w.target for w in workers], 2, steps,
                              num_tokens=0)
        # A fast worker may take both tokens of a round (TF's semantics), so
        # only the total is fixed, up to one step per worker past the end: as
        # in TF, StopAtStepHook judges a step by the global step read as it
        # began, so a worker whose step began before the last round closed may
        # start one more (released by the tokens the others leave).
        extra = sum(results.values()) - 2 * steps
        assert 0 <= extra <= 2, results
        assert view.follower.sync(timeout=20)
        rec = view["sync_replicas@ps:0"]
        rounds = rec.rounds
        assert rec.round == steps and len(rounds.done) == steps
        # Of the rounds both workers reached, the slowed one closed nearly all.
        last = rounds.last_counts
        shared = sum(last.values())
        assert shared == sum(1 for r in rounds.done if len(set(r.workers)) == 2)
        assert shared >= 5 and last["worker:1"] >= 0.9 * shared, last
        assert rounds.straggler() == "worker:1"
        # The one waiting is the fast worker, by about the injected delay(s).
        mean = rounds.mean_waits()
        assert mean["worker:0"] > 0.015 > mean["worker:1"], mean
        assert sum(rounds.dropped.values()) == 0
        text = repr(view)
        assert (f"straggler: worker:1, last in {last['worker:1']} of {shared} rounds"
                in text)
        html = view._repr_html_()
        assert "class='nbdist-rounds'" in html and "arrived last" in html
        if extra == 0:
            # The run is over: nobody is shown at a round that never comes.
            assert f"round {steps + 1}: none of 2 arrived yet" in text
            assert "width='0' height='8'" in html  # the bar agrees: nobody arrived
        else:  # the extra steps' gradients wait in the next round, and show there
            assert f"round {steps + 1}: " in text
    finally:
        view.close()


def test_backup_workers_finish_without_the_straggler_and_drop_its_gradients(servers):
    """3 workers, replicas_to_aggregate=2 (one backup), TF's default tokens;
    worker:2 slowed by 100 ms (well above a loaded machine's scheduling noise,
    so it is the straggler in every round): training completes on the other
    two's gradients and worker:2's late gradients are dropped as stale."""
    cluster = local_cluster(ps=1, worker=3)
    servers(cluster, "ps", 0)
    workers = [servers(cluster, "worker", i) for i in range(3)]
    c = types.SimpleNamespace(cluster_spec=nd.train.ClusterSpec(cluster))
    view = BarrierView(workers[0])
    try:
        fault_control.slow(c, "worker:2", f"{round(100 * load_factor())}ms")
        steps = 60
        results = _train_sync(cluster, [w.target for w in workers], 2, steps)
        assert all(isinstance(n, int) for n in results.values()), results
        assert _global_step(workers[0].target, cluster) >= steps
        assert view.follower.sync(timeout=20)
        rounds = view["sync_replicas@ps:0"].rounds
        assert len(rounds.done) >= steps
        # Every round took (at least) 2 gradients; few were worker:2's.
        assert all(len(r.arrivals) >= 2 for r in rounds.done)
        made = sum(r.workers.count("worker:2") for r in rounds.done)
        assert made <= steps // 3, made
        assert rounds.dropped["worker:2"] >= 1, rounds.dropped
        assert "stale gradients dropped:" in repr(view)
        assert "2 needed of 3" in repr(view)
    finally:
        view.close()


def test_three_workers_one_backup_as_tf(server_and_events):
    """TF's test3Workers1Backup, step by step on one server (each worker's
    graph in its own scope): the first two gradients make the update, the
    third is stale and dropped; spare tokens give every worker local step 1."""
    server, view = server_and_events
    graphs = []
    for i in range(3):
        g = nd.Graph()
        with g.as_default():
            gs = nd.train.get_or_create_global_step()
            v = nd.Variable([0.0, 1.0], name="v")
            grad = nd.constant([0.1 + 0.2 * i, 0.9 + 0.2 * i])
            opt = nd.train.SyncReplicasOptimizer(
                nd.train.GradientDescentOptimizer(2.0), replicas_to_aggregate=2,
                total_num_replicas=3)
            with nd.name_scope(f"replica_{i}"):
                train_op = opt.apply_gradients([(grad, v)], global_step=gs)
            # As TF's test: one initial token per worker.
            hook = opt.make_session_run_hook(is_chief=i == 0, num_tokens=3)
            config = nd.ConfigProto(operation_timeout_in_ms=20000)  # no hang
            sess = nd.train.MonitoredSession(
                session_creator=nd.train.ChiefSessionCreator(
                    master=server.target, config=config) if i == 0 else
                nd.train.WorkerSessionCreator(master=server.target, config=config),
                hooks=[hook])
        graphs.append((g, sess, train_op, gs, v, opt))
    try:
        run = [lambda i=i: graphs[i][1].run(graphs[i][2]) for i in range(3)]
        read = graphs[1][1]
        run[0]()
        run[2]()
        deadline = time.monotonic() + 20
        while read.run(graphs[1][3]) != 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        np.testing.assert_allclose(read.run(graphs[1][4]),
                                   [0 - (0.1 + 0.5) / 2 * 2.0, 1 - (0.9 + 1.3) / 2 * 2.0],
                                   rtol=1e-6)
        run[1]()  # late: its gradient is stale, dropped
        for i in range(3):  # spare tokens (value 0): wasted once more
            run[i]()
        assert read.run(graphs[1][3]) == 1
        local_step = graphs[1][5]._local_step
        assert read.run(local_step) == 1
        # 1 + 3 gradients dropped: worker 1's late one, then the wasted round
        # (the events reach the view in batches: wait for them).
        def dropped():
            view.follower.sync(timeout=1)
            # A barrier is known from its take before any push reaches it.
            rec = next(iter(view.barriers.values()), None)
            return sum(rec.rounds.dropped.values()) if rec and rec.rounds else 0

        wait_for(lambda: dropped() >= 4, 30, "4 dropped gradients in BarrierView")
        assert dropped() == 4
    finally:
        for _, sess, *_ in graphs:
            sess.close()


@pytest.fixture
def server_and_events():
    server = nd.Server.create_local_server()
    view = BarrierView(server)
    yield server, view
    view.close()
    server.stop()


# -- asynchronous training: staleness ---------------------------------------------------
def test_async_staleness_histogram_matches_what_each_worker_saw(servers):
    cluster = local_cluster(ps=1, worker=2)
    servers(cluster, "ps", 0)
    workers = [servers(cluster, "worker", i) for i in range(2)]
    c = types.SimpleNamespace(cluster_spec=nd.train.ClusterSpec(cluster))
    fault_control.slow(c, "worker:1", f"{round(10 * load_factor())}ms")
    seen: dict = {}
    start = threading.Barrier(2, timeout=30)
    # The fast worker steps for as long as the slowed one does (bounded), so the
    # two overlap however a loaded machine schedules them: 15 steps each could
    # run one after the other, every gradient fresh.
    slowed_done = threading.Event()

    def worker(i):
        with nd.Graph().as_default():
            with nd.device(replica_device_setter(
                    cluster=cluster, worker_device=f"/job:worker/task:{i}")):
                gs = nd.train.get_or_create_global_step()
                w = nd.Variable(np.zeros(3, np.float32), name="w")
                computed_at = nd.identity(gs.read_value())
                with nd.control_dependencies([computed_at]):
                    loss = nd.reduce_sum(nd.square(w - 1.0))
                opt = nd.train.GradientDescentOptimizer(0.1)
                with nd.control_dependencies([opt.minimize(loss)]):
                    applied_at = gs.assign_add(1) - 1
            with nd.Session(workers[i].target) as sess:
                if i == 0:
                    sess.run(nd.global_variables_initializer())
                start.wait()
                pairs = []
                for n in range(2000):
                    if n >= 15 and (i == 1 or slowed_done.is_set()):
                        break
                    pairs.append(tuple(int(x) for x in sess.run([computed_at,
                                                                 applied_at])))
                seen[i] = pairs
                if i == 1:
                    slowed_done.set()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert set(seen) == {0, 1}
    view = StalenessView({f"worker:{i}": pairs for i, pairs in seen.items()})
    # Oracle: each worker's own pairs; every applied step is distinct.
    applied = sorted(a for pairs in seen.values() for _, a in pairs)
    total = len(applied)
    assert len(seen[1]) == 15 and total >= 30
    assert applied == list(range(total))
    hist = view.histogram()
    for i, pairs in seen.items():
        got = {s: n[f"worker:{i}"] for s, n in hist.items() if f"worker:{i}" in n}
        want: dict = {}
        for comp, app in pairs:
            want[app - comp] = want.get(app - comp, 0) + 1
        assert got == want
        assert all(app >= comp for comp, app in pairs)
    # The slowed worker's gradients are the stale ones.
    mean = {w: np.mean(view.staleness(w)) for w in view.workers}
    assert mean["worker:1"] > mean["worker:0"], mean
    html = view._repr_html_()
    assert "<svg class='nbdist-staleness'" in html and "worker:1" in html
    assert repr(view).startswith(f"StalenessView: {total} gradients, mean staleness ")
