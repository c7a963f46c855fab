"""MonitoredTrainingSession in-process: hooks, session creators, Scaffold,
recovery from preemption errors; Coordinator and QueueRunner."""

from __future__ import annotations

import logging
import os
import threading
import time

import numpy as np
import pytest

import nbdist as nd
from nbdist import errors
from nbdist.train.coordinator import Coordinator
from nbdist.train.hooks import (
    CheckpointSaverHook,
    CheckpointSaverListener,
    FinalOpsHook,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunHook,
    StepCounterHook,
    StopAtStepHook,
)
from nbdist.train.monitored_session import (
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    Scaffold,
    SessionCreator,
    SingularMonitoredSession,
    WorkerSessionCreator,
)
from nbdist.train.queue_runner import QueueRunner
from nbdist.train.session_manager import SessionManager


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


@pytest.fixture
def log(caplog):
    caplog.set_level(logging.INFO, logger="nbdist")
    return caplog


def counter_model():
    """global_step and w, both incremented by train_op (which returns the new
    global step)."""
    gs = nd.train.get_or_create_global_step()
    w = nd.Variable(0.0, name="w")
    with nd.control_dependencies([w.assign_add(1.0)]):
        train_op = gs.assign_add(1)
    return gs, w, train_op


class RecordCreation(SessionRunHook):
    """Records the global step at each session creation."""

    def __init__(self, gs):
        self.gs = gs
        self.steps = []

    def after_create_session(self, session, coord):
        self.steps.append(int(session.run(self.gs)))


class Preempt(SessionRunHook):
    """Raises ``error`` in before_run once ``at`` runs went through, ``times``
    times (as a task that restarted would)."""

    def __init__(self, at, error=errors.AbortedError, times=1):
        self.at, self.error, self.left = at, error, times
        self.runs = 0

    def before_run(self, run_context):
        if self.runs >= self.at and self.left > 0:
            self.left -= 1
            raise self.error(None, None, "Session handle is not found (simulated "
                             "restart of a parameter server)")

    def after_run(self, run_context, run_values):
        self.runs += 1


# -- hooks --------------------------------------------------------------------------
def test_stop_at_step_hook_last_step_and_num_steps():
    gs, w, train_op = counter_model()
    with MonitoredTrainingSession(hooks=[StopAtStepHook(last_step=5)]) as sess:
        steps = []
        while not sess.should_stop():
            steps.append(int(sess.run(train_op)))
        assert steps == [1, 2, 3, 4, 5]
        with pytest.raises(RuntimeError, match="even after should_stop"):
            sess.run(train_op)
    with pytest.raises(ValueError):
        StopAtStepHook()
    with pytest.raises(ValueError):
        StopAtStepHook(num_steps=1, last_step=2)


def test_stop_at_step_counts_from_the_restored_step(tmp_path):
    gs, w, train_op = counter_model()
    with MonitoredTrainingSession(checkpoint_dir=str(tmp_path),
                                  hooks=[StopAtStepHook(last_step=4)]) as sess:
        while not sess.should_stop():
            sess.run(train_op)
    with nd.Graph().as_default():
        gs, w, train_op = counter_model()
        final = FinalOpsHook(w)
        with MonitoredTrainingSession(checkpoint_dir=str(tmp_path),
                                      hooks=[StopAtStepHook(num_steps=3),
                                             final]) as sess:
            steps = []
            while not sess.should_stop():
                steps.append(int(sess.run(train_op)))
        assert steps == [5, 6, 7]
        assert float(final.final_ops_values) == 7.0


def test_checkpoint_saver_hook_by_steps(tmp_path, log):
    gs, w, train_op = counter_model()
    with MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_checkpoint_steps=3,
                                  hooks=[StopAtStepHook(last_step=10)]) as sess:
        while not sess.should_stop():
            sess.run(train_op)
    state = nd.train.get_checkpoint_state(str(tmp_path))
    names = [os.path.basename(p) for p in state.all_model_checkpoint_paths]
    assert names == [f"model.ckpt-{s}" for s in (0, 3, 6, 9, 10)]
    assert os.path.basename(nd.train.latest_checkpoint(str(tmp_path))) == \
        "model.ckpt-10"
    assert (tmp_path / "graph.pbtxt").exists()
    assert "Saving checkpoints for 9 into" in log.text


def test_checkpoint_saver_hook_by_seconds_and_listener(tmp_path, monkeypatch):
    gs, w, train_op = counter_model()
    clock = [1000.0]
    monkeypatch.setattr("nbdist.train.hooks.time.time", lambda: clock[0])
    events = []

    class Listener(CheckpointSaverListener):
        def after_save(self, session, step):
            events.append(step)
            return step >= 4  # asks to stop

    saver = nd.train.Saver()
    hook = CheckpointSaverHook(str(tmp_path), save_secs=60, saver=saver,
                               listeners=[Listener()])
    with MonitoredSession(hooks=[hook]) as sess:
        for _ in range(3):
            sess.run(train_op)  # no time passes: no save
        assert events == [0]
        clock[0] += 61
        sess.run(train_op)  # step 4, 61 s later: saves, and the listener stops
        assert events == [0, 4]
        assert sess.should_stop()
    assert events == [0, 4]  # end(): step 4 already saved
    with pytest.raises(ValueError):
        CheckpointSaverHook(str(tmp_path))
    with pytest.raises(ValueError):
        CheckpointSaverHook(str(tmp_path), save_secs=1, saver=saver, scaffold=Scaffold())


def test_second_or_step_timer(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr("nbdist.train.hooks.time.time", lambda: clock[0])
    t = SecondOrStepTimer(every_steps=3)
    assert t.should_trigger_for_step(0)
    assert t.update_last_triggered_step(0) == (None, None)
    assert not t.should_trigger_for_step(2) and t.should_trigger_for_step(3)
    clock[0] = 5.0
    assert t.update_last_triggered_step(3) == (5.0, 3)
    t = SecondOrStepTimer(every_secs=10)
    t.update_last_triggered_step(1)
    assert not t.should_trigger_for_step(2)
    clock[0] = 16.0
    assert t.should_trigger_for_step(2) and not t.should_trigger_for_step(1)
    with pytest.raises(ValueError):
        SecondOrStepTimer()
    with pytest.raises(ValueError):
        SecondOrStepTimer(every_secs=1, every_steps=1)


def test_logging_tensor_hook_and_final_ops(log):
    gs, w, train_op = counter_model()
    final = FinalOpsHook(w)
    hooks = [LoggingTensorHook({"weight": w, "step": gs.name}, every_n_iter=2),
             StopAtStepHook(last_step=5), final]
    with MonitoredSession(hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op)
    lines = [r.getMessage() for r in log.records if "weight = " in r.getMessage()]
    assert len(lines) == 3  # iterations 0, 2, 4
    assert lines[0].startswith("step = ") and ", weight = 0.0" in lines[0]
    assert "sec)" in lines[1]
    assert float(final.final_ops_values) == 5.0
    with pytest.raises(ValueError):
        LoggingTensorHook([w])


def test_nan_tensor_hook():
    x = nd.placeholder(nd.float32, shape=[])
    gs = nd.train.get_or_create_global_step()
    with MonitoredSession(hooks=[NanTensorHook(x)]) as sess:
        sess.run(gs, feed_dict={x: 1.0})
        with pytest.raises(NanLossDuringTrainingError, match="NaN loss"):
            sess.run(gs, feed_dict={x: float("nan")})
    with MonitoredSession(hooks=[NanTensorHook(x, fail_on_nan_loss=False)]) as sess:
        sess.run(gs, feed_dict={x: float("nan")})
        assert sess.should_stop()


def test_step_counter_hook_logs_rate(log, monkeypatch):
    gs, w, train_op = counter_model()
    with MonitoredSession(hooks=[StepCounterHook(every_n_steps=2),
                                 StopAtStepHook(last_step=6)]) as sess:
        while not sess.should_stop():
            sess.run(train_op)
    assert "global_step/sec:" in log.text
    with pytest.raises(ValueError):
        StepCounterHook(every_n_steps=None)


def test_hooks_feed_fetch_and_run_step_fn():
    x = nd.placeholder(nd.float32, shape=[], name="x")
    y = x * 2.0
    gs = nd.train.get_or_create_global_step()
    seen = []

    class FeedAndFetch(SessionRunHook):
        def before_run(self, run_context):
            seen.append(run_context.original_args.fetches)
            return SessionRunArgs({"gs": gs}, feed_dict={x: 3.0})

        def after_run(self, run_context, run_values):
            seen.append(run_values.results)

    with MonitoredSession(hooks=[FeedAndFetch()]) as sess:
        assert float(sess.run(y)) == 6.0
        assert seen == [y, {"gs": 0}]
        with pytest.raises(RuntimeError, match="fed by a SessionRunHook and user"):
            sess.run(y, feed_dict={x: 1.0})

        def step_fn(step_context):
            assert float(step_context.session.run(y, feed_dict={x: 1.0})) == 2.0
            return step_context.run_with_hooks(y)

        assert float(sess.run_step_fn(step_fn)) == 6.0

        def stopper(step_context):
            step_context.request_stop()

        with pytest.raises(StopIteration):
            sess.run_step_fn(stopper)
        # As TF: the StopIteration ends a with-block; should_stop() is unchanged.
        assert not sess.should_stop()
        with pytest.raises(ValueError, match="step_context"):
            sess.run_step_fn(lambda ctx: None)


# -- session creation ---------------------------------------------------------------
def test_scaffold_defaults_and_local_variables():
    gs, w, train_op = counter_model()
    loc = nd.Variable(5.0, name="loc", collections=[nd.GraphKeys.LOCAL_VARIABLES])
    scaffold = Scaffold()
    with SingularMonitoredSession(scaffold=scaffold) as sess:
        raw = sess.raw_session()
        assert raw.run(scaffold.ready_op).size == 0
        assert float(sess.run(loc)) == 5.0
        assert isinstance(scaffold.saver, nd.train.Saver)
    assert not nd.get_default_graph().finalized  # un-finalized on close
    with nd.Session() as s:
        names = sorted(v.decode() for v in s.run(scaffold.ready_op))
        assert names == ["global_step", "loc", "w"]
        assert sorted(v.decode() for v in s.run(scaffold.ready_for_local_init_op)) \
            == ["global_step", "w"]
    copy = Scaffold(copy_from_scaffold=scaffold, init_op=train_op)
    assert copy.init_op is train_op and copy.ready_op is scaffold.ready_op


def test_init_fn_and_init_feed_dict():
    v = nd.Variable(nd.placeholder_with_default(1.0, shape=[]), name="v")
    calls = []
    scaffold = Scaffold(init_fn=lambda scaffold, sess: calls.append(scaffold),
                        init_feed_dict={v.initial_value: 7.0})
    with SingularMonitoredSession(scaffold=scaffold) as sess:
        assert float(sess.run(v)) == 7.0
    assert calls == [scaffold]


def test_worker_session_creator_times_out_naming_variables(log):
    gs, w, train_op = counter_model()
    start = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError) as e:
        WorkerSessionCreator(max_wait_secs=0.5).create_session()
    assert time.monotonic() - start < 5
    msg = str(e.value)
    assert "not ready after waiting" in msg
    assert "global_step" in msg and "w" in msg
    assert "Waiting for model to be ready." in log.text
    assert "Variables not initialized: global_step, w" in log.text
    # Through MonitoredTrainingSession as a non-chief.
    with pytest.raises(errors.DeadlineExceededError, match="global_step, w"):
        MonitoredTrainingSession(is_chief=False, max_wait_secs=0.3)


def test_worker_waits_for_the_chief():
    server = nd.Server.create_local_server()
    result = {}

    def worker():
        with nd.Graph().as_default():
            gs, w, train_op = counter_model()
            try:
                with MonitoredTrainingSession(master=server.target, is_chief=False,
                                              max_wait_secs=20) as sess:
                    result["waited"] = time.monotonic() - t0
                    result["w"] = float(sess.run(w))
            except Exception as e:  # noqa: BLE001 - reported below
                result["error"] = e

    try:
        t0 = time.monotonic()
        t = threading.Thread(target=worker)
        t.start()
        time.sleep(0.4)  # the worker starts first and waits
        gs, w, train_op = counter_model()
        with MonitoredTrainingSession(master=server.target, is_chief=True) as sess:
            sess.run(train_op)
            t.join(20)
        assert "error" not in result, result
        assert 0.35 < result["waited"] < 5
        assert result["w"] in (0.0, 1.0)
    finally:
        server.stop()


def test_prepare_session_errors():
    v = nd.Variable(1.0, name="v")
    sm = SessionManager(ready_op=nd.report_uninitialized_variables())
    with pytest.raises(RuntimeError, match="no init_op or init_fn"):
        sm.prepare_session("")
    with pytest.raises(RuntimeError, match="did not make model ready.*v"):
        sm.prepare_session("", init_op=nd.no_op())
    with pytest.raises(ValueError, match="local_init_op"):
        SessionManager(ready_for_local_init_op=nd.report_uninitialized_variables())
    sess = sm.prepare_session("", init_op=v.initializer)
    assert float(sess.run(v)) == 1.0
    sess.close()


# -- recovery -------------------------------------------------------------------------
def test_recovery_restores_the_checkpoint_and_the_loop_never_sees_it(tmp_path, log):
    gs, w, train_op = counter_model()
    record = RecordCreation(gs)
    preempt = Preempt(at=7)
    final = FinalOpsHook([gs, w])
    values = []
    with MonitoredTrainingSession(checkpoint_dir=str(tmp_path), save_checkpoint_steps=3,
                                  hooks=[preempt, record, final,
                                         StopAtStepHook(last_step=10)]) as sess:
        while not sess.should_stop():
            values.append(int(sess.run(train_op)))
    # A new session (a fresh in-process task: the state was lost) restored
    # checkpoint 6; steps 7..10 were run again.
    assert record.steps == [0, 6]
    assert values == [1, 2, 3, 4, 5, 6, 7, 7, 8, 9, 10]
    assert [float(v) for v in final.final_ops_values] == [10.0, 10.0]
    assert "AbortedError during run" in log.text
    assert "Restoring parameters from" in log.text
    assert os.path.basename(nd.train.latest_checkpoint(str(tmp_path))) == \
        "model.ckpt-10"


def test_recovery_after_a_ps_restart(servers, tmp_path, log):
    """A real (in-process) ps task stops and comes back at the same address:
    its variables are gone; the chief restores the latest checkpoint."""
    from helpers import local_cluster

    from nbdist.train.device_setter import replica_device_setter

    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    with nd.device(replica_device_setter(cluster=cluster,
                                         worker_device="/job:worker/task:0")):
        gs = nd.train.get_or_create_global_step()
        w = nd.Variable(0.0, name="w")
        # (explicit colocation: see the note in the report about ref edges)
        with nd.colocate_with(w):
            update = w.assign_add(1.0)
        with nd.control_dependencies([update]), nd.colocate_with(gs):
            train_op = gs.assign_add(1)
    final = FinalOpsHook(w)

    def restart_ps():
        time.sleep(0.3)
        servers(cluster, "ps", 0)

    values = []
    restarter = threading.Thread(target=restart_ps)
    with MonitoredTrainingSession(master=worker.target, checkpoint_dir=str(tmp_path),
                                  save_checkpoint_steps=3, log_step_count_steps=None,
                                  hooks=[StopAtStepHook(last_step=12),
                                         final]) as sess:
        while not sess.should_stop():
            values.append(int(sess.run(train_op)))
            if len(values) == 8:
                ps.stop()
                restarter.start()
    restarter.join()
    assert values == [1, 2, 3, 4, 5, 6, 7, 8, 7, 8, 9, 10, 11, 12]
    assert float(final.final_ops_values) == 12.0
    assert "during run" in log.text and "model.ckpt-6" in log.text


def test_recovery_during_creation_with_backoff(log):
    gs, w, train_op = counter_model()

    class Flaky(SessionCreator):
        def __init__(self):
            self.calls = 0
            self.inner = ChiefSessionCreator()

        def create_session(self):
            self.calls += 1
            if self.calls <= 2:
                raise errors.UnavailableError(None, None, "ps is restarting")
            return self.inner.create_session()

    creator = Flaky()
    start = time.monotonic()
    with MonitoredSession(session_creator=creator) as sess:
        sess.run(train_op)
    assert creator.calls == 3
    assert time.monotonic() - start >= 0.3  # 0.1 s then 0.2 s
    assert "attempt 2 of 20" in log.text


def test_recovery_gives_up_after_max_attempts():
    gs, w, train_op = counter_model()
    preempt = Preempt(at=1, error=errors.UnavailableError, times=100)
    sess = MonitoredSession(hooks=[preempt], max_recovery_attempts=2)
    sess.run(train_op)
    with pytest.raises(errors.UnavailableError, match="simulated"):
        sess.run(train_op)
    assert preempt.left == 97  # the first try and two recoveries
    sess.close()


def test_singular_session_does_not_recover():
    gs, w, train_op = counter_model()
    with pytest.raises(errors.AbortedError):
        with SingularMonitoredSession(hooks=[Preempt(at=1)]) as sess:
            sess.run(train_op)
            sess.run(train_op)


def test_close_swallows_preemption_errors():
    gs, w, train_op = counter_model()

    class BadClose:
        def __init__(self, sess):
            self._sess = sess

        def __getattr__(self, name):
            return getattr(self._sess, name)

        def close(self):
            self._sess.close()
            raise errors.UnavailableError(None, None, "the ps is gone")

    class Creator(SessionCreator):
        def create_session(self):
            return BadClose(ChiefSessionCreator().create_session())

    class EndFails(SessionRunHook):
        def end(self, session):
            raise errors.AbortedError(None, None, "cannot save: the ps restarted")

    with MonitoredSession(session_creator=Creator(), hooks=[EndFails()]) as sess:
        sess.run(train_op)
    assert sess._is_closed()


def test_thread_errors_surface_in_the_loop():
    gs, w, train_op = counter_model()

    class Failing(SessionRunHook):
        def after_create_session(self, session, coord):
            def work():
                with coord.stop_on_exception():
                    raise ValueError("boom in a thread")

            t = threading.Thread(target=work)
            coord.register_thread(t)
            t.start()
            t.join()

    with pytest.raises(ValueError, match="boom"):
        with MonitoredSession(hooks=[Failing()]) as sess:
            while not sess.should_stop():
                sess.run(train_op)


# -- Coordinator and QueueRunner ------------------------------------------------------
def test_coordinator_join_and_exceptions():
    coord = Coordinator()
    stopped = []

    def loop():
        while not coord.should_stop():
            time.sleep(0.01)
        stopped.append(True)

    threads = [threading.Thread(target=loop) for _ in range(3)]
    for t in threads:
        coord.register_thread(t)
        t.start()
    coord.request_stop()
    coord.join()
    assert stopped == [True] * 3 and coord.joined
    coord = Coordinator()
    with coord.stop_on_exception():
        raise errors.OutOfRangeError(None, None, "done")  # a clean stop
    coord.join()
    coord = Coordinator()
    with coord.stop_on_exception():
        raise RuntimeError("bad")
    assert coord.should_stop()
    with pytest.raises(RuntimeError, match="bad"):
        coord.join()
    coord = Coordinator()
    t = threading.Thread(target=time.sleep, args=(0.5,))
    t.start()
    coord.request_stop()
    with pytest.raises(RuntimeError, match="threads still running"):
        coord.join([t], stop_grace_period_secs=0.01)


def test_queue_runner_fills_a_queue_until_stopped():
    q = nd.FIFOQueue(4, [nd.int64], shapes=[[]])
    counter = nd.Variable(np.int64(0), name="counter")
    qr = QueueRunner(q, [q.enqueue([counter.assign_add(1)])])
    deq = q.dequeue()
    with nd.Session() as sess:
        sess.run(counter.initializer)
        coord = Coordinator()
        threads = qr.create_threads(sess, coord=coord, start=True)
        assert qr.create_threads(sess, coord=coord) == []  # already running
        assert [int(sess.run(deq)) for _ in range(6)] == [1, 2, 3, 4, 5, 6]
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=5)
        assert not any(t.is_alive() for t in threads)
