"""ParameterServerStrategy + ClusterCoordinator on real processes (LocalCluster,
the slow tests): the seed examples, a worker SIGKILLed or SIGSTOPped mid-run, a ps killed, a
function that raises. Every task is a process of its LocalCluster, stopped by
PID (SIGCONT first, in case a test stopped it)."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
from helpers import counting_step, wait_for

import nbdist as nd
from nbdist import errors
from nbdist.distribute.coordinator.cluster_coordinator import ClusterCoordinator
from nbdist.distribute.strategies.parameter_server_strategy import (
    ParameterServerStrategy,
)
from nbdist.distribute.coordinator.values import PerWorkerValues, RemoteValueStatus

HEARTBEAT_TIMEOUT_S = 1.0
# Detection slack over the heartbeat timeout: a watcher poll (0.1 s) and a GetStatus
# probe (0.5 s) when idle; seconds more on a loaded 2-core machine (CI, or
# scripts/run_under_load.py), where heartbeats, polls and probes run late. Nothing
# but heartbeats sees a stopped worker, so a finite bound still proves they did.
MARGIN_S = 10.0


@pytest.fixture
def ps_cluster():
    """A factory: (cluster, strategy, coordinator), heartbeats every 100 ms and a
    1 s timeout unless told (tests that do not time the heartbeats use 2 s, so
    a loaded machine cannot make a live worker miss them)."""
    made = []

    def make(ps=1, workers=2, heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S, **kwargs):
        cluster = nd.LocalCluster(
            ps=ps, workers=workers, progress=False,
            coordination_config={"heartbeat_interval_ms": 100,
                                 "heartbeat_timeout_ms": int(heartbeat_timeout_s * 1000)})
        made.append(cluster)
        strategy = ParameterServerStrategy(cluster.cluster_spec)
        coordinator = ClusterCoordinator(strategy, **kwargs)
        made.append(coordinator)
        return cluster, strategy, coordinator

    yield make
    for obj in reversed(made):
        if isinstance(obj, ClusterCoordinator):
            obj.close()
        else:
            for t in obj.tasks:
                if t.pid:
                    try:
                        os.kill(t.pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
            obj.shutdown()
    # Variables made under strategy.scope() land in the default graph, as TF2
    # code expects: leave the next test a fresh one.
    nd.reset_default_graph()


def read(cluster, variable):
    # Only the ps: a session does not wait for a worker that a test killed.
    config = nd.ConfigProto(device_filters=["/job:ps"])
    with nd.Session(cluster.target("ps", 0), config=config) as sess:
        return int(sess.run(variable))


def completed_on(coordinator, worker):
    return coordinator.stats.get(f"completed/worker:{worker}", 0)


def kill_recording_in_flight(coordinator, cluster, worker, sig=None):
    """SIGKILLs (or signals) a worker while the coordinator's state is frozen:
    the closures it is running at that moment are the ones in flight. Also
    returns how many it had completed by then: an in-flight closure whose answer
    had already left the worker still completes there, so what is put back is
    the in-flight count less those late completions."""
    with coordinator._lock:
        in_flight = len(coordinator._state.running_on(worker))
        done_before = coordinator._state.stats[f"completed/worker:{worker}"]
        if sig is None:
            cluster.kill("worker", worker)
        else:
            os.kill(_pid(cluster, "worker", worker), sig)
        killed_at = time.monotonic()
    return in_flight, done_before, killed_at


def _pid(cluster, job, index):
    return next(t.pid for t in cluster.tasks if t.job == job and t.index == index)


# -- the strategy on its own (no processes) ------------------------------------------------
def _spec(ps=2, workers=2, chief=0):
    jobs = {"ps": [f"localhost:{1000 + i}" for i in range(ps)],
            "worker": [f"localhost:{2000 + i}" for i in range(workers)]}
    if chief:
        jobs["chief"] = ["localhost:3000"]
    return nd.train.ClusterSpec(jobs)


def test_strategy_places_variables_round_robin_on_ps_only():
    strategy = ParameterServerStrategy(_spec(ps=2))
    with nd.Graph().as_default():
        with strategy.scope():
            a = nd.Variable(1.0, name="a")
            b = nd.get_variable("b", shape=[2], initializer=nd.zeros_initializer())
            c = a + 1.0
        with strategy.scope():  # the round robin goes on
            d = nd.Variable(2.0, name="d")
        e = nd.Variable(3.0, name="e")  # outside: not the strategy's
    assert [a.device, b.device, d.device] == [
        "/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0"]
    assert c.device == "" and e.device == ""
    assert strategy.variables == [a, b, d]
    assert strategy.num_replicas_in_sync == 1
    assert strategy.run(lambda x, y=0: x + y, args=(1,), kwargs={"y": 2}) == 3
    assert strategy.cluster_resolver.cluster_spec() == _spec(ps=2)
    assert strategy.extended.parameter_devices == (
        "/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0")


def test_strategy_speaks_the_distribute_coordinator_protocol():
    import copy

    strategy = ParameterServerStrategy(_spec(ps=1, workers=2, chief=1))
    ext = strategy.extended
    assert ext.experimental_between_graph is True
    assert ext.experimental_should_init and ext.should_checkpoint
    worker = copy.deepcopy(strategy)
    config = nd.ConfigProto()
    worker.configure(config, _spec(ps=1, workers=2, chief=1), "worker", 1)
    assert list(config.device_filters) == ["/job:worker/task:1", "/job:ps"]
    wext = worker.extended
    assert not (wext.experimental_should_init or wext.should_checkpoint
                or wext.should_save_summary)
    assert ext.experimental_should_init  # the original is unchanged
    with nd.Graph().as_default(), worker.scope():
        v = nd.Variable(1.0, name="v")
        y = v * 2.0
    assert v.device == "/job:ps/task:0" and y.device == "/job:worker/task:1"
    assert worker.variables == [v] and strategy.variables == []


def test_strategy_needs_ps_and_workers():
    with pytest.raises(ValueError, match="'ps'"):
        ParameterServerStrategy(nd.train.ClusterSpec({"worker": ["localhost:1"]}))
    with pytest.raises(TypeError):
        ParameterServerStrategy(42)


# -- the seed examples ---------------------------------------------------------------------
@pytest.mark.slow
def test_seed_examples(ps_cluster):
    _cluster, strategy, coordinator = ps_cluster(heartbeat_timeout_s=2.0)

    def dataset_fn():
        return nd.data.Dataset.from_tensor_slices([3] * 3)

    @nd.function
    def worker_fn(iterator):
        return next(iterator)

    per_worker_dataset = coordinator.create_per_worker_dataset(dataset_fn)
    per_worker_iter = iter(per_worker_dataset)
    assert isinstance(per_worker_iter, PerWorkerValues)
    remote_value = coordinator.schedule(worker_fn, args=(per_worker_iter,))
    assert remote_value.fetch() == 3
    assert remote_value.status is RemoteValueStatus.READY

    with strategy.scope():
        v = nd.Variable(initial_value=0, dtype=nd.int32)
    assert v.device == "/job:ps/task:0"

    @nd.function
    def worker_fn2():
        def replica_fn():
            return v.assign_add(1)

        return strategy.run(replica_fn)

    result = coordinator.schedule(worker_fn2)
    assert coordinator.fetch(result) == 1
    coordinator.join()
    assert coordinator.done()
    assert coordinator.strategy is strategy
    assert ClusterCoordinator(strategy) is coordinator


@pytest.mark.slow
def test_per_worker_iterators_live_on_their_workers(ps_cluster):
    """TF's fetch example: each worker reads its own iterator of [1, 1, 1]."""
    cluster, strategy, coordinator = ps_cluster(heartbeat_timeout_s=2.0)
    with strategy.scope():
        v = nd.Variable(initial_value=0)

    @nd.function
    def worker_fn(iterator):
        def replica_fn(x):
            v.assign_add(x)
            return v.read_value()

        return strategy.run(replica_fn, args=(next(iterator),))

    it = iter(coordinator.create_per_worker_dataset(
        lambda: nd.data.Dataset.from_tensor_slices([1, 1, 1]).repeat()))
    assert coordinator.fetch(coordinator.schedule(worker_fn, args=(it,))) == 1
    results = [coordinator.schedule(worker_fn, args=(it,)) for _ in range(19)]
    coordinator.join()
    assert all(2 <= int(r.fetch()) <= 20 for r in results)
    assert read(cluster, v) == 20
    # Each worker's iterator is built on it (worker 1's perhaps after worker 0
    # ran every step).
    wait_for(lambda: [rv.status for rv in it.values] == [RemoteValueStatus.READY] * 2,
             30, "both iterators built")


# -- a worker SIGKILLed mid-run ---------------------------------------------------------------
@pytest.mark.slow
def test_sigkilled_worker_closures_run_elsewhere_then_it_rejoins(ps_cluster):
    cluster, strategy, coordinator = ps_cluster(heartbeat_timeout_s=2.0)
    counter, step = counting_step(strategy, double=False)
    n = 500
    results = [coordinator.schedule(step, args=(np.int32(i),)) for i in range(n)]
    wait_for(lambda: coordinator.stats.get("completed", 0) >= n // 3, 60, "progress")
    in_flight, done_before, killed_at = kill_recording_in_flight(coordinator, cluster, 1)
    coordinator.join()
    join_s = time.monotonic() - killed_at
    assert [int(r.fetch()) for r in results] == list(range(n))
    value = read(cluster, counter)
    assert n <= value <= n + in_flight, (value, in_flight)
    answered_late = completed_on(coordinator, 1) - done_before
    assert coordinator.stats.get("put_back", 0) + answered_late >= in_flight
    # Seen dead by the probe after the RPC error (or by its heartbeats).
    wait_for(lambda: not coordinator._state.is_alive(1), 2.0 + MARGIN_S,
             "worker 1 to be declared failed")
    print(f"in flight at the kill: {in_flight}; counter {value}; "
          f"join {join_s:.2f} s after the kill")

    # Restarted, worker 1 rejoins and runs functions again.
    before = completed_on(coordinator, 1)
    cluster.restart("worker", 1)
    wait_for(lambda: coordinator._state.is_alive(1), 30, "worker 1 to rejoin")
    # Until it has run some (a few batches; worker 0 may take the first ones while
    # worker 1 opens its new session).
    rejoined_at, more = time.monotonic(), []
    while completed_on(coordinator, 1) <= before:
        assert time.monotonic() - rejoined_at < 60, "worker 1 ran nothing in 60 s"
        batch = [coordinator.schedule(step, args=(np.int32(i),)) for i in range(50)]
        coordinator.join()
        assert [int(r.fetch()) for r in batch] == list(range(50))
        more += batch
    print(f"worker 1 ran again {time.monotonic() - rejoined_at:.2f} s after "
          f"rejoining ({len(more)} closures scheduled)")


@pytest.mark.slow
def test_restarted_worker_gets_its_iterator_rebuilt(ps_cluster):
    cluster, _strategy, coordinator = ps_cluster()

    @nd.function
    def worker_fn(iterator):
        return next(iterator)

    it = iter(coordinator.create_per_worker_dataset(
        lambda: nd.data.Dataset.range(1000)))
    coordinator.fetch(coordinator.schedule(worker_fn, args=(it,)))
    wait_for(lambda: all(v.status is RemoteValueStatus.READY for v in it.values),
             30, "iterators built")
    wait_for(lambda: coordinator._state.workers[1].incarnation is not None, 30,
             "worker 1's heartbeat")
    cluster.kill("worker", 1)
    wait_for(lambda: it.values[1].status is RemoteValueStatus.ABORTED,
             HEARTBEAT_TIMEOUT_S + MARGIN_S + 1, "worker 1's iterator aborted")
    with pytest.raises(errors.CancelledError):
        it.values[1].fetch()
    cluster.restart("worker", 1)
    wait_for(lambda: it.values[1].status is RemoteValueStatus.READY, 30,
             "worker 1's iterator rebuilt")
    before = completed_on(coordinator, 1)
    rvs = [coordinator.schedule(worker_fn, args=(it,)) for _ in range(60)]
    coordinator.join()
    assert all(0 <= int(r.fetch()) < 1000 for r in rvs)
    assert completed_on(coordinator, 1) > before


# -- a worker cut off without dying ------------------------------------------------------------
@pytest.mark.slow
def test_sigstopped_worker_is_detected_by_heartbeat_and_comes_back(ps_cluster):
    cluster, strategy, coordinator = ps_cluster()
    counter, step = counting_step(strategy)
    n = 300
    results = [coordinator.schedule(step, args=(np.int32(i),)) for i in range(n)]
    wait_for(lambda: coordinator.stats.get("completed", 0) >= n // 4, 60, "progress")
    in_flight, done_before, stopped_at = kill_recording_in_flight(
        coordinator, cluster, 1, signal.SIGSTOP)
    try:
        wait_for(lambda: not coordinator._state.is_alive(1),
                 HEARTBEAT_TIMEOUT_S + MARGIN_S, "worker 1 to be declared failed")
        detected_s = time.monotonic() - stopped_at
        assert detected_s <= HEARTBEAT_TIMEOUT_S + MARGIN_S
        coordinator.join()  # its closures ran on worker 0
        assert [int(r.fetch()) for r in results] == [2 * i for i in range(n)]
        answered_late = completed_on(coordinator, 1) - done_before
        assert coordinator.stats["put_back"] + answered_late >= in_flight
        print(f"stopped worker declared failed after {detected_s:.2f} s "
              f"({in_flight} closure(s) in flight, {answered_late} answered "
              f"before the stop took hold)")
    finally:
        os.kill(_pid(cluster, "worker", 1), signal.SIGCONT)
    wait_for(lambda: coordinator._state.is_alive(1), 30, "worker 1 back")
    before = completed_on(coordinator, 1)
    more = [coordinator.schedule(step, args=(np.int32(i),)) for i in range(200)]
    coordinator.join()
    assert [int(r.fetch()) for r in more] == [2 * i for i in range(200)]
    assert completed_on(coordinator, 1) > before
    # Each closure taken back from a worker ran at most once more.
    assert n + 200 <= read(cluster, counter) <= n + 200 + coordinator.stats["put_back"]


# -- a ps killed ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_killed_ps_makes_join_raise_unavailable(ps_cluster):
    cluster, strategy, coordinator = ps_cluster()
    with strategy.scope():
        counter = nd.Variable(0, name="counter")

    @nd.function
    def step():
        return counter.assign_add(1)

    coordinator.schedule(step)
    coordinator.join()
    # Busy: closures are running against the ps when it dies.
    for _ in range(200):
        coordinator.schedule(step)
    cluster.kill("ps", 0)
    killed_at = time.monotonic()
    with pytest.raises(errors.UnavailableError, match="ps"):
        for _ in range(10_000):  # scheduling goes on until the failure is seen
            coordinator.schedule(step)
            time.sleep(0.001)
        coordinator.join()
    raised_s = time.monotonic() - killed_at
    assert raised_s <= HEARTBEAT_TIMEOUT_S + MARGIN_S, raised_s
    # Raised again while the ps is down.
    with pytest.raises(errors.UnavailableError):
        coordinator.join()
    print(f"UnavailableError {raised_s:.2f} s after the ps was killed")


@pytest.mark.slow
def test_killed_idle_ps_is_seen_by_heartbeats(ps_cluster):
    cluster, strategy, coordinator = ps_cluster()
    with strategy.scope():
        counter = nd.Variable(0, name="counter")
    coordinator.fetch(coordinator.schedule(lambda: counter.assign_add(1)))
    cluster.kill("ps", 0)
    killed_at = time.monotonic()
    wait_for(lambda: coordinator._state.failed_ps, HEARTBEAT_TIMEOUT_S + MARGIN_S,
             "the ps failure to be seen")
    assert time.monotonic() - killed_at <= HEARTBEAT_TIMEOUT_S + MARGIN_S
    with pytest.raises(errors.UnavailableError, match="/job:ps/replica:0/task:0"):
        coordinator.done()
    # Back (empty): the coordinator accepts work again; the variable is lost.
    cluster.restart("ps", 0)
    wait_for(lambda: not coordinator._state.failed_ps, 30, "the ps back")
    rv = coordinator.schedule(lambda: counter.assign_add(1))
    with pytest.raises(errors.FailedPreconditionError, match="uninitialized"):
        coordinator.join()
    with pytest.raises(errors.FailedPreconditionError):
        rv.fetch()


# -- a function that raises --------------------------------------------------------------------
@pytest.mark.slow
def test_function_error_is_raised_once_then_scheduling_works(ps_cluster):
    _, _, coordinator = ps_cluster(heartbeat_timeout_s=2.0)

    @nd.function(input_signature=[nd.data.TensorSpec([None], nd.int32)])
    def to_three(x):
        return nd.reshape(x, [3])

    good = [coordinator.schedule(to_three, args=(np.arange(3, dtype=np.int32),))
            for _ in range(20)]
    coordinator.join()
    bad = coordinator.schedule(to_three, args=(np.arange(4, dtype=np.int32),))
    with pytest.raises(errors.InvalidArgumentError, match="reshape"):
        coordinator.join()
    coordinator.join()  # raised once: cleared
    assert coordinator.done()
    with pytest.raises(errors.InvalidArgumentError):
        bad.fetch()
    assert bad.status is RemoteValueStatus.READY
    assert all(list(r.fetch()) == [0, 1, 2] for r in good)
    after = coordinator.schedule(to_three, args=(np.arange(3, dtype=np.int32),))
    assert list(after.fetch()) == [0, 1, 2]


@pytest.mark.slow
def test_error_among_many_cancels_the_queued_ones(ps_cluster):
    _, _, coordinator = ps_cluster(heartbeat_timeout_s=2.0)

    @nd.function(input_signature=[nd.data.TensorSpec([None], nd.int32)])
    def to_three(x):
        return nd.reshape(x, [3])

    ok, bad = np.arange(3, dtype=np.int32), np.arange(4, dtype=np.int32)
    rvs = [coordinator.schedule(to_three, args=(bad if i == 100 else ok,))
           for i in range(400)]
    with pytest.raises(errors.InvalidArgumentError):
        coordinator.join()
    statuses = [r.status for r in rvs]
    assert RemoteValueStatus.NOT_READY not in statuses
    with pytest.raises(errors.InvalidArgumentError):
        rvs[100].fetch()
    cancelled = [r for r in rvs if r.status is RemoteValueStatus.ABORTED]
    for r in cancelled:
        with pytest.raises(errors.CancelledError, match="reschedule"):
            r.fetch()
    done = [r for i, r in enumerate(rvs) if i != 100
            and r.status is RemoteValueStatus.READY]
    assert all(list(r.fetch()) == [0, 1, 2] for r in done)
    assert len(done) + len(cancelled) == 399
    coordinator.join()
    assert list(coordinator.schedule(to_three, args=(ok,)).fetch()) == [0, 1, 2]
