"""Distributed training on real processes (issue 4).

Every task is an OS process (a ``LocalCluster`` or ``subprocess.Popen``), all
on 127.0.0.1; every process is stopped by PID and every wait is bounded.

* Synchronous training (``SyncReplicasOptimizer``, 2 of 2 replicas, no initial
  tokens, workers in lockstep) on 1 ps + 2 worker processes equals, to 1e-6,
  one process applying the average of the same two batches' gradients.
* Asynchronous training on 1 ps + 2 worker processes: the loss on 1,000
  held-out examples falls from ln(10) = 2.303 to below ``ASYNC_LOSS_BOUND``
  (0.5), and ``global_step`` equals the sum of the workers' local steps.
* A worker process started before its chief logs "Waiting for model to be
  ready" and goes on once the chief initialised the model; with no chief it
  fails after ``max_wait_secs`` naming the uninitialised variables.
* A ps SIGKILLed and restarted mid-training: ``MonitoredTrainingSession``
  restores the latest checkpoint and finishes; the loop never sees an error,
  and the result equals an uninterrupted run.
* A process SIGKILLed at random moments while it saves checkpoints in a tight
  loop, 10 times: ``latest_checkpoint`` always restores, into a fresh graph,
  one of the versions that was saved.
* ``examples/trainer.py`` as 1 ps + 2 worker processes started by hand trains
  to a falling loss (the ps, which never exits, is killed by PID).

Client processes run this file as a script (``python
tests/train/test_training_cluster.py <role> ...``); see ``ROLES`` at the end.
"""

from __future__ import annotations

import logging
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import nbdist as nd
from nbdist import errors

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: helpers
from helpers import ROOT, averaged_gradient_descent

pytestmark = pytest.mark.slow

# The loss bound of the asynchronous test (held-out loss; it starts at ln 10).
ASYNC_LOSS_BOUND = 0.5

# Linear regression data shared by the synchronous and restart tests.
LR = 0.1
SYNC_STEPS = 5
_RNG = np.random.default_rng(7)
BATCHES = [(_RNG.normal(size=(8, 3)).astype(np.float32),
            _RNG.normal(size=(8, 1)).astype(np.float32)) for _ in range(2)]
W0 = np.array([[0.5], [-0.3], [0.2]], np.float32)
B0 = np.float32(0.1)


# -- processes ------------------------------------------------------------------------
def child_env() -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    return env


class Proc:
    """A child process whose merged stdout/stderr is read line by line."""

    def __init__(self, args, cwd=ROOT):
        self.proc = subprocess.Popen([sys.executable, *map(str, args)], cwd=cwd,
                                     env=child_env(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.pid = self.proc.pid
        self.lines: list[str] = []
        self._q: queue.Queue = queue.Queue()
        self._pump = threading.Thread(target=self._read, daemon=True)
        self._pump.start()

    def _read(self):
        for line in self.proc.stdout:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def _drain(self, timeout):
        try:
            line = self._q.get(timeout=timeout)
        except queue.Empty:
            return False
        if line is None:
            self._q.put(None)
            return None
        self.lines.append(line)
        return True

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        """The first line matching ``pattern`` (read so far or to come)."""
        rx = re.compile(pattern)
        seen = 0
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines[seen:]:
                m = rx.search(line)
                if m:
                    return m
            seen = len(self.lines)
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line matching {pattern!r} within {timeout} s; "
                                     f"output:\n" + self.output)
            if self._drain(min(left, 0.1)) is None and seen == len(self.lines):
                raise AssertionError(f"process exited ({self.proc.poll()}) without a "
                                     f"line matching {pattern!r}; output:\n"
                                     + self.output)

    def wait(self, timeout: float) -> int:
        """Waits for the exit and for all the output."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"process did not exit within {timeout} s; output:\n"
                                 + self.output) from None
        self._pump.join(10)
        while self._drain(0) is True:
            pass
        return rc

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def kill(self):
        """SIGKILL by PID (if still running), then reap."""
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self._pump.join(5)
        while self._drain(0) is True:  # keep what it printed before dying
            pass
        self.proc.stdout.close()


@pytest.fixture
def procs():
    """Starts client processes; every one is SIGKILLed by PID at teardown."""
    started: list[Proc] = []

    def start(*args) -> Proc:
        p = Proc(args)
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()


@pytest.fixture
def cluster_factory():
    """``make(ps=1, workers=2)``: LocalClusters shut down at teardown."""
    from nbdist.cluster.local_cluster import LocalCluster

    made = []

    def make(**kw):
        c = LocalCluster(progress=False, start_timeout=60, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.shutdown()


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def run_threads(fn, n, timeout):
    """Runs ``fn(i)`` for i < n in threads; returns {i: result or exception}."""
    results: dict = {}

    def body(i):
        try:
            results[i] = fn(i)
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            results[i] = e

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), f"threads still running: {results}"
    return results


def worker_config(i):
    return nd.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{i}"])


def linear_model(batch):
    gs = nd.train.get_or_create_global_step()
    w = nd.Variable(W0, name="w")
    b = nd.Variable(B0, name="b")
    x, y = (nd.constant(a) for a in batch)
    loss = nd.reduce_mean(nd.square(nd.matmul(x, w) + b - y))
    return gs, w, b, loss


def read_ps_variables(target, names_and_values):
    """Values of variables living on /job:ps/task:0 (built like the originals)."""
    with nd.Graph().as_default():
        with nd.device("/job:ps/task:0"):
            vs = [nd.train.get_or_create_global_step() if n == "global_step"
                  else nd.Variable(v, name=n) for n, v in names_and_values]
        with nd.Session(target) as s:
            return s.run(vs)


# -- synchronous -----------------------------------------------------------------------
@pytest.mark.timeout(240)
def test_sync_replicas_on_two_worker_processes_equals_averaged_single_process(
        cluster_factory):
    from nbdist.train.device_setter import replica_device_setter

    cluster = cluster_factory(ps=1, workers=2)
    spec = cluster.cluster_spec
    lockstep = threading.Barrier(2, timeout=60)

    def worker(i):
        try:
            with nd.Graph().as_default():
                with nd.device(replica_device_setter(
                        cluster=spec, worker_device=f"/job:worker/task:{i}")):
                    gs, _, _, loss = linear_model(BATCHES[i])
                    opt = nd.train.SyncReplicasOptimizer(
                        nd.train.GradientDescentOptimizer(LR),
                        replicas_to_aggregate=2, total_num_replicas=2)
                    train_op = opt.minimize(loss, global_step=gs)
                hook = opt.make_session_run_hook(is_chief=i == 0, num_tokens=0)
                runs = 0
                with nd.train.MonitoredTrainingSession(
                        master=cluster.target("worker", i), is_chief=i == 0,
                        hooks=[hook, nd.train.StopAtStepHook(last_step=SYNC_STEPS)],
                        config=worker_config(i), max_wait_secs=60,
                        log_step_count_steps=None) as sess:
                    while not sess.should_stop():
                        lockstep.wait()  # each update: one gradient per worker
                        sess.run(train_op)
                        runs += 1
                return runs
        except BaseException:
            lockstep.abort()
            raise

    results = run_threads(worker, 2, timeout=180)
    assert results == {0: SYNC_STEPS, 1: SYNC_STEPS}, results
    step, w_sync, b_sync = read_ps_variables(
        cluster.target("worker", 0), [("global_step", None), ("w", W0), ("b", B0)])
    w_ref, b_ref = averaged_gradient_descent(BATCHES, W0, B0, LR, SYNC_STEPS)
    assert int(step) == SYNC_STEPS
    np.testing.assert_allclose(w_sync, w_ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(b_sync, b_ref, rtol=0, atol=1e-6)
    assert not np.allclose(w_ref, W0, atol=1e-3)  # the model did move


# -- asynchronous ----------------------------------------------------------------------
def blobs(rng, n):
    """n examples of 10 noisy clusters in 64 dimensions (trainer.py's data)."""
    centers = (0.5 * np.random.default_rng(42).standard_normal((10, 64))).astype(
        np.float32)
    labels = rng.integers(0, 10, n)
    x = centers[labels] + rng.standard_normal((n, 64))
    return x.astype(np.float32), labels.astype(np.int32)


def softmax_model():
    x = nd.placeholder(nd.float32, [None, 64], name="x")
    y = nd.placeholder(nd.int32, [None], name="y")
    w = nd.get_variable("w", [64, 10], initializer=nd.zeros_initializer())
    b = nd.get_variable("b", [10], initializer=nd.zeros_initializer())
    loss = nd.reduce_mean(nd.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y, logits=nd.matmul(x, w) + b))
    return x, y, loss


@pytest.mark.timeout(240)
def test_async_training_on_two_worker_processes(cluster_factory):
    from nbdist.train.device_setter import replica_device_setter

    last_step = 200
    cluster = cluster_factory(ps=1, workers=2)
    spec = cluster.cluster_spec

    def worker(i):
        rng = np.random.default_rng(100 + i)
        with nd.Graph().as_default():
            with nd.device(replica_device_setter(
                    cluster=spec, worker_device=f"/job:worker/task:{i}")):
                x, y, loss = softmax_model()
                gs = nd.train.get_or_create_global_step()
                train_op = nd.train.AdagradOptimizer(0.05).minimize(
                    loss, global_step=gs)
            steps = 0
            with nd.train.MonitoredTrainingSession(
                    master=cluster.target("worker", i), is_chief=i == 0,
                    hooks=[nd.train.StopAtStepHook(last_step=last_step)],
                    config=worker_config(i), max_wait_secs=60,
                    log_step_count_steps=None) as sess:
                while not sess.should_stop():
                    xs, ys = blobs(rng, 64)
                    sess.run(train_op, {x: xs, y: ys})
                    steps += 1
            return steps

    results = run_threads(worker, 2, timeout=180)
    assert all(isinstance(n, int) for n in results.values()), results
    assert all(n > 0 for n in results.values()), results  # both took part
    with nd.Graph().as_default():
        with nd.device("/job:ps/task:0"):
            x, y, loss = softmax_model()
            gs = nd.train.get_or_create_global_step()
        xs, ys = blobs(np.random.default_rng(999), 1000)
        with nd.Session(cluster.target("worker", 0)) as s:
            final_loss, step = s.run([loss, gs], {x: xs, y: ys})
    print(f"held-out loss {final_loss:.3f} after {int(step)} steps {results}")
    assert int(step) == results[0] + results[1] >= last_step
    assert final_loss < ASYNC_LOSS_BOUND, (final_loss, results)


def test_optimizer_update_is_grouped_per_device_as_tf():
    """As TF's ``group``: the update ops of variables on one ps task are grouped
    by a NoOp on that task, so the global step increment waits for them there
    (no control message to the worker and back in every step); variables on
    two ps tasks get one NoOp each under a root in the current scope."""
    from nbdist.train.device_setter import replica_device_setter

    for ps_tasks, want in ((1, {"/job:ps/task:0"}),
                           (2, {"/job:ps/task:0", "/job:ps/task:1"})):
        with nd.Graph().as_default() as g:
            with nd.device(replica_device_setter(
                    ps_tasks=ps_tasks, worker_device="/job:worker/task:0")):
                gs, _, _, loss = linear_model(BATCHES[0])
                train = nd.train.GradientDescentOptimizer(LR).minimize(
                    loss, global_step=gs)
            assert train.device == gs.device == "/job:ps/task:0"
            update = g.get_operation_by_name("GradientDescent/update")
            assert update.type == "NoOp"
            if ps_tasks == 1:
                assert update.device == "/job:ps/task:0"
                assert {c.type for c in update.control_inputs} == {
                    "ApplyGradientDescent"}
            else:
                assert update.device == "/job:worker/task:0"
                per_device = update.control_inputs
                assert {c.device for c in per_device} == want
                assert all(c.type == "NoOp" for c in per_device)


# -- a worker waiting for its chief ----------------------------------------------------
def counter_model(scope):
    with nd.variable_scope(scope):
        w = nd.Variable(0.0, name="w")
        b = nd.Variable(0.0, name="b")
    with nd.control_dependencies([w.assign_add(1.0)]):
        inc = b.assign_add(1.0)
    return w, b, inc


def role_waiting_worker(target, spec, scope, max_wait):
    """A non-chief worker: waits for the model, then runs one step."""
    from nbdist.train.device_setter import replica_device_setter

    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(levelname)s %(message)s")
    cluster = nd.train.ClusterSpec.from_string(spec)
    with nd.device(replica_device_setter(cluster=cluster,
                                         worker_device="/job:worker/task:1")):
        _, _, inc = counter_model(scope)
    print("STARTED", flush=True)
    t0 = time.monotonic()
    try:
        with nd.train.MonitoredTrainingSession(
                master=target, is_chief=False, max_wait_secs=float(max_wait),
                config=worker_config(1)) as sess:
            print(f"READY after {time.monotonic() - t0:.2f} s", flush=True)
            print(f"STEP {float(sess.run(inc)):.1f}", flush=True)
    except errors.OpError as e:
        print(f"ERROR after {time.monotonic() - t0:.2f} s: {type(e).__name__}: {e}",
              flush=True)
        return 3
    return 0


@pytest.mark.timeout(240)
def test_worker_started_before_the_chief_waits_then_proceeds(cluster_factory, procs):
    from nbdist.train.device_setter import replica_device_setter

    cluster = cluster_factory(ps=1, workers=2)
    spec = cluster._cluster_string()
    worker = procs(__file__, "waiting_worker", cluster.target("worker", 1), spec,
                   "model", 120)
    worker.wait_for(r"Waiting for model to be ready.*not initialized", timeout=90)
    assert worker.proc.poll() is None  # still waiting
    # The chief comes up and initialises the model.
    with nd.device(replica_device_setter(cluster=cluster.cluster_spec,
                                         worker_device="/job:worker/task:0")):
        _, _, inc = counter_model("model")
    with nd.train.MonitoredTrainingSession(master=cluster.target("worker", 0),
                                           is_chief=True,
                                           config=worker_config(0)) as sess:
        chief_step = float(sess.run(inc))
    worker.wait_for(r"^READY after", timeout=60)
    m = worker.wait_for(r"^STEP (\S+)", timeout=60)
    # Once the model is ready either may step first; each step counts once.
    assert sorted([chief_step, float(m.group(1))]) == [1.0, 2.0]
    assert worker.wait(60) == 0, worker.output
    assert "model/w" in worker.output  # what it waited for was logged


@pytest.mark.timeout(180)
def test_worker_without_a_chief_fails_naming_the_variables(cluster_factory, procs):
    cluster = cluster_factory(ps=1, workers=2)
    worker = procs(__file__, "waiting_worker", cluster.target("worker", 1),
                   cluster._cluster_string(), "nochief", 2.0)
    assert worker.wait(90) == 3, worker.output
    m = worker.wait_for(r"^ERROR after (\S+) s: DeadlineExceededError: (.*)", 1)
    assert float(m.group(1)) >= 2.0
    assert "not ready after waiting 2 secs" in m.group(2)
    assert "nochief/w" in m.group(2) and "nochief/b" in m.group(2)
    assert "Waiting for model to be ready" in worker.output


# -- a ps that dies and comes back -------------------------------------------------------
def reference_linear_run(steps):
    """``steps`` uninterrupted steps on batch 0, in one process."""
    with nd.Graph().as_default():
        gs, w, b, loss = linear_model(BATCHES[0])
        train = nd.train.GradientDescentOptimizer(LR).minimize(loss, global_step=gs)
        with nd.Session() as s:
            s.run(nd.global_variables_initializer())
            for _ in range(steps):
                s.run(train)
            return s.run([w, b])


@pytest.mark.timeout(240)
def test_ps_killed_and_restarted_mid_training_recovers_from_checkpoint(
        cluster_factory, tmp_path, caplog):
    from nbdist.train.device_setter import replica_device_setter

    caplog.set_level(logging.INFO, logger="nbdist")
    last_step, kill_at = 30, 12
    cluster = cluster_factory(ps=1, workers=1)
    ps_pid = next(t.pid for t in cluster.tasks if t.job == "ps")
    with nd.device(replica_device_setter(cluster=cluster.cluster_spec,
                                         worker_device="/job:worker/task:0")):
        gs, w, b, loss = linear_model(BATCHES[0])
        train = nd.train.GradientDescentOptimizer(LR).minimize(loss, global_step=gs)
    final = nd.train.FinalOpsHook([w, b])
    restarted = []

    def restart_later():
        time.sleep(0.5)
        cluster.restart("ps", 0)
        restarted.append(next(t.pid for t in cluster.tasks if t.job == "ps"))

    restarter = threading.Thread(target=restart_later, daemon=True)
    seen = []
    # Any exception out of this loop fails the test: the loop must never see one.
    with nd.train.MonitoredTrainingSession(
            master=cluster.target("worker", 0), is_chief=True,
            checkpoint_dir=str(tmp_path), save_checkpoint_steps=5,
            hooks=[nd.train.StopAtStepHook(last_step=last_step), final],
            log_step_count_steps=None) as sess:
        while not sess.should_stop():
            _, step = sess.run([train, gs])
            seen.append(int(step))
            if len(seen) == kill_at:
                cluster.kill("ps", 0)
                restarter.start()
            assert len(seen) < 200
    restarter.join(60)
    assert restarted and restarted[0] != ps_pid
    # gs fetched with the update may be before it: seen[k] is k or k+1.
    assert seen[kill_at - 1] in (kill_at - 1, kill_at)
    after = seen[kill_at:]
    assert after and after[0] <= 11  # resumed from checkpoint 10, not step 12
    assert max(seen) >= last_step - 1
    restored = [r.getMessage() for r in caplog.records
                if "Restoring parameters from" in r.getMessage()]
    assert restored and restored[-1].endswith("model.ckpt-10"), restored
    step, w_ps, b_ps = read_ps_variables(
        cluster.target("worker", 0), [("global_step", None), ("w", W0), ("b", B0)])
    assert int(step) == last_step
    w_ref, b_ref = reference_linear_run(last_step)
    np.testing.assert_allclose(w_ps, w_ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(final.final_ops_values[0], w_ref, rtol=0, atol=1e-6)
    np.testing.assert_allclose(b_ps, b_ref, rtol=0, atol=1e-6)
    assert os.path.basename(nd.train.latest_checkpoint(str(tmp_path))) == \
        f"model.ckpt-{last_step}"


# -- SIGKILL during checkpoint saves -------------------------------------------------------
BIG = 1 << 20  # a 4 MiB variable: a save takes a while


def saver_graph():
    big = nd.Variable(np.zeros(BIG, np.float32), name="big")
    step = nd.Variable(np.int64(-1), name="step")
    return big, step


def role_saver_loop(directory, start, seconds=60.0):
    """Saves checkpoints in a tight loop (each holding its step number in every
    element of ``big``) for at most ``seconds``."""
    big, step = saver_graph()
    big_in = nd.placeholder(nd.float32, [BIG])
    step_in = nd.placeholder(nd.int64, [])
    assign = nd.group(big.assign(big_in), step.assign(step_in))
    saver = nd.train.Saver(max_to_keep=3)
    end = time.monotonic() + float(seconds)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        i = int(start)
        while time.monotonic() < end:
            s.run(assign, {big_in: np.full(BIG, i, np.float32), step_in: i})
            saver.save(s, os.path.join(directory, "model"), global_step=i)
            print(f"SAVED {i}", flush=True)
            i += 1
    return 0


@pytest.mark.timeout(300)
def test_sigkill_during_checkpoint_saves_never_breaks_latest_checkpoint(tmp_path, procs):
    rnd = random.Random(4)
    directory = str(tmp_path)
    mid_write = 0
    for round_ in range(10):
        start = 1000 * round_
        tmp_before = {n for n in os.listdir(directory) if n.endswith(".tmp")}
        p = procs(__file__, "saver_loop", directory, start)
        p.wait_for(r"^SAVED", timeout=90)
        time.sleep(rnd.uniform(0.0, 0.3))
        p.kill()
        saved = [int(line.split()[1]) for line in p.lines if line.startswith("SAVED")]
        if {n for n in os.listdir(directory) if n.endswith(".tmp")} - tmp_before:
            mid_write += 1
        path = nd.train.latest_checkpoint(directory)
        assert path is not None
        n = int(path.rsplit("-", 1)[1])
        # The newest checkpoint: the last one reported, or one written whose
        # report the kill cut off.
        assert n in saved or n == saved[-1] + 1, (n, saved)
        with nd.Graph().as_default():
            big, step = saver_graph()
            with nd.Session() as s:
                nd.train.Saver().restore(s, path)
                big_v, step_v = s.run([big, step])
        assert int(step_v) == n
        assert big_v.shape == (BIG,) and np.all(big_v == np.float32(n))
    # (How many kills left a temporary file behind, i.e. hit a write.)
    print(f"{mid_write} of 10 kills interrupted a file write")


# -- examples/trainer.py by hand ---------------------------------------------------------
@pytest.mark.timeout(300)
def test_trainer_py_as_one_ps_and_two_worker_processes(tmp_path, procs):
    from helpers import free_port

    hosts = {"ps": f"localhost:{free_port()}",
             "worker": f"localhost:{free_port()},localhost:{free_port()}"}
    common = [f"--ps_hosts={hosts['ps']}", f"--worker_hosts={hosts['worker']}",
              "--train_steps=200", "--log_every=20",
              f"--checkpoint_dir={tmp_path}"]
    trainer = ROOT / "examples" / "trainer.py"
    ps = procs(trainer, *common, "--job_name=ps", "--task_index=0")
    ps.wait_for(r"^ps 0 serving at", timeout=90)
    workers = [procs(trainer, *common, "--job_name=worker", f"--task_index={i}")
               for i in range(2)]
    for wp in workers:
        assert wp.wait(240) == 0, wp.output
    assert ps.proc.poll() is None  # TF's ps serves until killed...
    ps.kill()  # ... so it is killed by PID
    local_steps = []
    for i, wp in enumerate(workers):
        losses = [float(m.group(1)) for m in
                  (re.search(r"loss (\S+)$", line) for line in wp.lines) if m]
        assert losses, wp.output
        # Which worker steps when is the scheduler's: one may take all but one of
        # the 200 global steps (seen on an idle 2-core machine), so a worker's own
        # loss is compared only when it stepped more than once.
        if len(losses) >= 2:
            assert losses[-1] < losses[0], wp.output
        m = wp.wait_for(rf"^worker {i} done after (\d+) local steps", 1)
        local_steps.append(int(m.group(1)))
    first = [float(m.group(1)) for m in (re.search(r"step 1 .*loss (\S+)$", line)
                                         for line in workers[0].lines) if m]
    # The chief starts from zero weights (loss ln 10) unless worker 1, which may
    # start training the moment the chief has initialised, got an update in first.
    assert first and first[0] <= np.log(10) + 1e-3
    last = [float(re.search(r"loss (\S+)$", [ln for ln in wp.lines if "loss" in ln][-1]
                            ).group(1)) for wp in workers]
    assert min(last) < 0.6, last
    assert sum(local_steps) >= 200
    assert nd.train.latest_checkpoint(str(tmp_path)) is not None


# -- client processes ------------------------------------------------------------------
ROLES = {"waiting_worker": role_waiting_worker, "saver_loop": role_saver_loop}

if __name__ == "__main__":
    sys.exit(ROLES[sys.argv[1]](*sys.argv[2:]))
