"""Chaos (issue 10): tasks of a real 1 ps + 2 worker ``LocalCluster`` are
SIGKILLed, SIGSTOPped/SIGCONTed and restarted at seeded random moments while

* a ``ClusterCoordinator`` runs ``N_CLOSURES`` ``assign_add`` closures (workers
  only: a ps holds the variables, whose loss ``join`` reports as an error), the
  last action a worker stopped with closures in flight until ``join()`` has
  returned: every ``RemoteValue`` is right, the counter on the ps counts each
  closure at least once and at most once more per closure put back (at least
  once, as documented), and once the stopped worker is resumed and its calls
  have returned, nothing more was applied;
* two ``MonitoredTrainingSession``s (a chief with a ``checkpoint_dir`` on worker
  0, a non-chief on worker 1) train a linear regression (every task, ps
  included): neither loop sees an error, ``global_step`` reaches
  ``LAST_STEP`` and the loss (NumPy, from the weights on the ps) falls.

Afterwards no process of the cluster is left, restarted ones included. The
moments are events ("after K closures completed", "after K training steps"),
drawn with fixed seeds (``SEEDS``, one run each), which also shuffle the order
of the actions and pick their tasks. Nothing but the length of a ps outage is a
wall-clock wait.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
import traceback

import numpy as np
import pytest
from helpers import counting_step, current_frames, pid_alive, wait_for

import nbdist as nd

pytestmark = pytest.mark.slow

SEEDS = (10, 11, 12)  # one run per seed
N_CLOSURES = 1000  # N_FIRST scheduled at once, the others before the last stop
N_FIRST = 700
LAST_STEP = 200
# A worker missing heartbeats for this long is failed (2 s: a loaded machine
# must not make a live worker miss them).
HEARTBEAT = {"heartbeat_interval_ms": 100, "heartbeat_timeout_ms": 2000}
EVENT_TIMEOUT_S = 60.0  # bound of every wait for an event
CAPPED_TIMEOUT_S = 180.0  # bound of the other loop's hold: the whole schedule


# -- helpers ---------------------------------------------------------------------
class Chaos:
    """Signals the tasks of a ``LocalCluster``; remembers every PID it saw
    and what it did (``log``), and SIGCONTs what it stopped on ``resume_all``."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.pids: set[int] = set()
        self.stopped: set[int] = set()
        self.log: list[str] = []
        self._seen()

    def _note(self, what: str):
        self.log.append(what)
        logging.getLogger("nbdist").info("chaos: %s", what)

    def _seen(self):
        self.pids.update(t.pid for t in self.cluster.tasks if t.pid)

    def pid(self, job: str, index: int) -> int:
        return next(t.pid for t in self.cluster.tasks
                    if t.job == job and t.index == index)

    def kill(self, job, index):
        self._note(f"SIGKILL {job}:{index}")
        self.cluster.kill(job, index)

    def restart(self, job, index):
        self._note(f"restart {job}:{index}")
        self.cluster.restart(job, index)
        self._seen()

    def stop(self, job, index):
        pid = self.pid(job, index)
        self._note(f"SIGSTOP {job}:{index}")
        os.kill(pid, signal.SIGSTOP)
        self.stopped.add(pid)

    def resume(self, job, index):
        pid = self.pid(job, index)
        self._note(f"SIGCONT {job}:{index}")
        os.kill(pid, signal.SIGCONT)
        self.stopped.discard(pid)

    def resume_all(self):
        for pid in list(self.stopped):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.stopped.clear()

    def shutdown_and_check_no_process_left(self):
        self.resume_all()
        self._seen()
        self.cluster.shutdown()
        wait_for(lambda: not any(pid_alive(p) for p in self.pids), 15,
                 "every task process to exit")


@pytest.fixture
def make_cluster():
    """``make(**kw)``: a 1 ps + 2 worker ``LocalCluster`` and its ``Chaos``; at
    teardown every stopped task is resumed and every task stopped by PID."""
    made = []

    def make(**kw):
        cluster = nd.LocalCluster(ps=1, workers=2, progress=False, start_timeout=60,
                                  **kw)
        chaos = Chaos(cluster)
        made.append(chaos)
        return cluster, chaos

    yield make
    for chaos in made:
        chaos.resume_all()
        chaos.cluster.shutdown()


def read_on_ps(cluster, tensors):
    # Only the ps: a session does not wait for workers.
    config = nd.ConfigProto(device_filters=["/job:ps"])
    with nd.Session(cluster.target("ps", 0), config=config) as sess:
        return sess.run(tensors)


def in_closure_call() -> list[str]:
    """Coordinator threads of this process still inside a closure's call."""
    import sys

    from nbdist.distribute.coordinator.cluster_coordinator import ClusterCoordinator

    assert hasattr(ClusterCoordinator, "_run_closures")  # the frame looked for
    frames = current_frames()
    out = []
    for t in threading.enumerate():
        if not t.name.startswith("WorkerClosureProcessingLoop"):
            continue
        f = frames.get(t.ident)
        while f is not None:
            if f.f_code.co_name in ("_run_closures", "_build_resources"):
                out.append(t.name)
                break
            f = f.f_back
    return out


# -- a ClusterCoordinator under chaos --------------------------------------------
def stop_with_closures_in_flight(coordinator, chaos, worker: int) -> int:
    """SIGSTOPs ``worker`` at a moment it runs closures; how many it runs."""
    end = time.monotonic() + EVENT_TIMEOUT_S
    while time.monotonic() < end:
        with coordinator._lock:  # the state is frozen: these are in flight
            running = len(coordinator._state.running_on(worker))
            if running:
                chaos.stop("worker", worker)
                return running
        time.sleep(0.001)
    raise AssertionError(f"worker {worker} ran no closure for {EVENT_TIMEOUT_S} s")


def _coordinator_schedule(rng: random.Random):
    """(completed closures that trigger it, action, worker) x 4, in seeded order.

    kill: SIGKILL, restart once it is declared failed; restart: SIGKILL and
    restart at once; stop: SIGSTOP, SIGCONT once declared failed (its in-flight
    closures run elsewhere and it comes back with them unfinished); pause:
    SIGSTOP, SIGCONT after more closures completed (usually too soon to be
    failed)."""
    actions = ["kill", "restart", "stop", "pause"]
    rng.shuffle(actions)
    moments = sorted(rng.sample(range(N_FIRST // 10, N_FIRST // 2, 10), len(actions)))
    return [(m, a, rng.randrange(2)) for m, a in zip(moments, actions)]


class AppliedAfterJoin(AssertionError):
    """A closure's update reached the ps after ``join()`` returned."""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.usefixtures("graph")  # its variable stays out of later tests' graphs
def test_coordinator_run_loses_nothing_under_kills_stops_and_restarts(make_cluster,
                                                                       seed):
    from nbdist.distribute.coordinator.cluster_coordinator import ClusterCoordinator
    from nbdist.distribute.strategies.parameter_server_strategy import (
        ParameterServerStrategy,
    )

    rng = random.Random(seed)
    plan = _coordinator_schedule(rng)
    cluster, chaos = make_cluster(coordination_config=HEARTBEAT)
    strategy = ParameterServerStrategy(cluster.cluster_spec)
    coordinator = ClusterCoordinator(strategy)
    try:
        counter, step = counting_step(strategy)
        results = [coordinator.schedule(step, args=(np.int32(i),))
                   for i in range(N_FIRST)]

        def completed():
            return coordinator.stats.get("completed", 0)

        def failed(i):
            return not coordinator._state.is_alive(i)

        for at, action, w in plan:
            wait_for(lambda at=at: completed() >= at or coordinator.done(),
                     EVENT_TIMEOUT_S, f"{at} closures completed")
            if action == "restart":
                chaos.kill("worker", w)
                chaos.restart("worker", w)
            elif action == "kill":
                chaos.kill("worker", w)
                wait_for(lambda w=w: failed(w), EVENT_TIMEOUT_S,
                         f"worker {w} to be declared failed")
                chaos.restart("worker", w)
            elif action == "stop":
                chaos.stop("worker", w)
                wait_for(lambda w=w: failed(w), EVENT_TIMEOUT_S,
                         f"worker {w} to be declared failed")
                chaos.resume("worker", w)
            else:  # pause
                chaos.stop("worker", w)
                more = completed() + rng.randrange(5, 50)
                wait_for(lambda more=more: completed() >= more or coordinator.done(),
                         EVENT_TIMEOUT_S, "closures completed on the other worker")
                chaos.resume("worker", w)
            wait_for(lambda w=w: not failed(w), EVENT_TIMEOUT_S, f"worker {w} back")
        # Last, a worker stopped with closures in flight stays stopped until
        # join() returned: its closures run on the other one meanwhile.
        last = rng.randrange(2)
        results += [coordinator.schedule(step, args=(np.int32(i),))
                    for i in range(N_FIRST, N_CLOSURES)]
        stale = stop_with_closures_in_flight(coordinator, chaos, last)
        wait_for(lambda: failed(last), EVENT_TIMEOUT_S,
                 f"worker {last} to be declared failed")
        print("chaos:", "; ".join(chaos.log))

        coordinator.join()
        (at_join,) = read_on_ps(cluster, [counter])
        assert [int(r.fetch()) for r in results] == [2 * i for i in range(N_CLOSURES)]
        put_back = coordinator.stats.get("put_back", 0)
        assert put_back >= stale
        # At least once; a closure taken back from a worker ran at most once more.
        assert N_CLOSURES <= at_join <= N_CLOSURES + put_back, (at_join, put_back)
        # Nothing applied after join(): resumed, the stopped worker's calls
        # return (or were cancelled), and the counter did not move.
        chaos.resume("worker", last)
        wait_for(lambda: not in_closure_call(), EVENT_TIMEOUT_S,
                 "stale closure calls to return")
        (after,) = read_on_ps(cluster, [counter])
        if after != at_join:
            raise AppliedAfterJoin(f"{after - at_join} closure(s) applied after join()")
        print(f"{N_CLOSURES} closures, counter {at_join}, {put_back} put back, "
              f"{stale} in flight on the worker stopped until join() returned")
    finally:
        coordinator.close()
    chaos.shutdown_and_check_no_process_left()


# -- MonitoredTrainingSession under chaos ----------------------------------------
_DATA_RNG = np.random.default_rng(7)
X = _DATA_RNG.normal(size=(64, 3)).astype(np.float32)
W_TRUE = np.array([[1.5], [-2.0], [0.5]], np.float32)
Y = X @ W_TRUE + 0.3


def np_loss(w, b) -> float:
    return float(np.mean((X @ w + b - Y) ** 2))


class Clock:
    """Steps run by each training loop: the chaos schedule's clock. A moment
    comes once both loops ran ``at`` steps in all and the chief (loop 0) ran
    one since the last action (it is training, not recovering); the chief
    then holds until the action is done, so every action lands while it
    trains (a ps lost after the chief finished is never restored, as in
    TensorFlow). Until the schedule is done, the other loop holds at
    ``LEAD_CAP`` steps (unless the chief's worker is stopped, when it must
    run on): otherwise, while the chief recovers on a slow machine, it could
    train the model to ``LAST_STEP`` alone and end the run before the
    schedule's later actions."""

    LEAD_CAP = LAST_STEP // 2

    def __init__(self):
        self._cond = threading.Condition()
        self.steps = [0, 0]
        self.done = [False, False]
        self.capped = True
        self._armed: int | None = None
        self._chief_mark = 0

    def total(self) -> int:
        return sum(self.steps)

    def tick(self, i: int):
        with self._cond:
            self.steps[i] += 1
            self._cond.notify_all()
            if i == 0:
                self._wait(lambda: not self._come(), "the chaos thread to act")
            else:
                self._wait(lambda: not self.capped or self.steps[1] < self.LEAD_CAP
                           or self.done[0], "the schedule to end",
                           timeout=CAPPED_TIMEOUT_S)

    def cap(self, on: bool):
        with self._cond:
            self.capped = on
            self._cond.notify_all()

    def finish(self, i: int):
        with self._cond:
            self.done[i] = True
            self._cond.notify_all()

    def moment(self, at: int):
        """Waits for ``at`` steps in all (or the chief's end); the chief holds
        from then until ``acted``."""
        with self._cond:
            self._armed = at
            self._wait(lambda: self._come() or self.done[0], f"{at} steps")

    def _come(self) -> bool:
        return (self._armed is not None and self.total() >= self._armed
                and self.steps[0] > self._chief_mark)

    def acted(self):
        with self._cond:
            self._armed = None
            self._chief_mark = self.steps[0]
            self._cond.notify_all()

    def wait(self, predicate, what: str):
        with self._cond:
            self._wait(predicate, what)

    def _wait(self, predicate, what, timeout=EVENT_TIMEOUT_S):
        end = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for {what} (steps of the "
                                     f"loops {self.steps}, done {self.done})")
            self._cond.wait(0.1)


def _training_schedule(rng: random.Random):
    """(training steps of both loops that trigger it, action, task) x 5, in
    seeded order, early in training; ``stop`` of a worker lasts
    until the other loop ran a few more steps, of the ps a seeded fraction of a
    second (both loops wait for it meanwhile)."""
    actions = [("kill", ("ps", 0)), ("stop", ("ps", 0)),
               ("kill", ("worker", rng.randrange(2))),
               ("stop", ("worker", rng.randrange(2))),
               ("kill", ("ps", 0))]
    rng.shuffle(actions)
    moments = sorted(rng.sample(range(5, 60, 2), len(actions)))
    return [(m, a, task) for m, (a, task) in zip(moments, actions)]


def where_stuck(threads) -> str:
    """The stacks of the live ``threads``: where a loop that did not finish is."""
    frames = current_frames()
    return "\n".join(f"{t.name}:\n" + "".join(traceback.format_stack(frames[t.ident]))
                     for t in threads if t.is_alive() and t.ident in frames)


def _linear_regression(spec, i):
    with nd.device(nd.train.replica_device_setter(
            cluster=spec, worker_device=f"/job:worker/task:{i}")):
        gs = nd.train.get_or_create_global_step()
        w = nd.get_variable("w", [3, 1], initializer=nd.zeros_initializer())
        b = nd.get_variable("b", [], initializer=nd.zeros_initializer())
        loss = nd.reduce_mean(nd.square(nd.matmul(nd.constant(X), w) + b
                                        - nd.constant(Y)))
    return gs, w, b, loss


@pytest.mark.timeout(240)
@pytest.mark.parametrize("seed", SEEDS)
def test_training_completes_under_kills_stops_and_restarts(make_cluster, tmp_path,
                                                           caplog, seed):
    caplog.set_level("INFO", logger="nbdist")
    rng = random.Random(seed)
    plan = _training_schedule(rng)
    cluster, chaos = make_cluster()
    spec = cluster.cluster_spec
    clock = Clock()
    errors_seen: dict[int, BaseException] = {}

    def train(i):
        try:
            with nd.Graph().as_default():
                gs, _, _, loss = _linear_regression(spec, i)
                train_op = nd.train.GradientDescentOptimizer(0.05).minimize(
                    loss, global_step=gs)
                config = nd.ConfigProto(
                    device_filters=["/job:ps", f"/job:worker/task:{i}"])
                with nd.train.MonitoredTrainingSession(
                        master=cluster.target("worker", i), is_chief=i == 0,
                        checkpoint_dir=str(tmp_path) if i == 0 else None,
                        save_checkpoint_steps=10, config=config, max_wait_secs=60,
                        hooks=[nd.train.StopAtStepHook(last_step=LAST_STEP)],
                        log_step_count_steps=None) as sess:
                    while not sess.should_stop():
                        sess.run(train_op)
                        clock.tick(i)
                        assert clock.steps[i] < 20 * LAST_STEP
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors_seen[i] = e
        finally:
            clock.finish(i)

    trainers = [threading.Thread(target=train, args=(i,), name=f"trainer-{i}",
                                 daemon=True) for i in range(2)]
    for t in trainers:
        t.start()
    try:
        for at, action, (job, index) in plan:
            clock.moment(at)
            if clock.done[0]:
                break
            if action == "kill":
                chaos.kill(job, index)
                chaos.restart(job, index)
                clock.acted()
                continue
            if (job, index) == ("worker", 0):
                clock.cap(False)  # the other loop must run on meanwhile
            chaos.stop(job, index)
            clock.acted()
            if job == "ps":
                time.sleep(rng.uniform(0.2, 1.5))  # the outage itself
            else:
                other = 1 - index
                more = clock.steps[other] + rng.randrange(5, 20)
                clock.wait(lambda o=other, m=more: clock.steps[o] >= m or clock.done[o],
                           f"steps of loop {other}")
            chaos.resume(job, index)
            clock.cap(True)
        print("chaos:", "; ".join(chaos.log))
    finally:
        clock.cap(False)
        chaos.resume_all()
        for t in trainers:
            t.join(150)
    assert not any(t.is_alive() for t in trainers), \
        f"a training loop did not finish; steps {clock.steps}\n{where_stuck(trainers)}"
    assert not errors_seen, errors_seen
    assert len(chaos.log) == sum(2 for _ in plan), chaos.log  # every action, whole
    assert all(clock.steps), "both loops took part"
    with nd.Graph().as_default(), nd.device("/job:ps/task:0"):
        gs = nd.train.get_or_create_global_step()
        w = nd.get_variable("w", [3, 1])
        b = nd.get_variable("b", [])
        gs_ps, w_ps, b_ps = read_on_ps(cluster, [gs, w, b])
    assert int(gs_ps) >= LAST_STEP
    start, end = np_loss(np.zeros((3, 1), np.float32), 0.0), np_loss(w_ps, b_ps)
    assert end < 0.05 * start, (start, end)
    restores = [r.getMessage() for r in caplog.records
                if "Restoring parameters from" in r.getMessage()]
    assert len(restores) >= 2, restores  # at least one after each ps restart
    assert nd.train.latest_checkpoint(str(tmp_path)) is not None
    print(f"global step {int(gs_ps)}, loss {start:.3f} -> {end:.5f}, "
          f"steps {clock.steps}")
    chaos.shutdown_and_check_no_process_left()
