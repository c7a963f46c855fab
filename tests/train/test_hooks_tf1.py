"""TF1's session-run hooks as TensorFlow's own tests define them
(basic_session_run_hooks_test.py): they log through ``nd.compat.v1.logging``
with TF's wording, ``StepCounterHook`` writes ``global_step/sec`` summaries
TensorBoard reads, ``summary_iterator`` gives back the events, and the
timers, waiters, feeds and final ops behave as TF's.
"""

from __future__ import annotations

import glob
import logging
import os
import types
from unittest import mock

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator as ea

import nbdist as nd
from nbdist import errors
from nbdist.proto import meta_graph_pb2, summary_pb2
from nbdist.train import hooks as hooks_module
from nbdist.train.hooks import SessionRunArgs, SessionRunContext, SessionRunValues

tf_logging = nd.compat.v1.logging


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g
    nd.summary.FileWriterCache.clear()


class FakeClock:
    """Stands in for the ``time`` module of the hooks: ``time()`` is set by hand."""

    def __init__(self, now=1000.0):
        self.now = now
        self.slept = []

    def time(self):
        return self.now

    def sleep(self, secs):
        self.slept.append(secs)


@pytest.fixture
def clock():
    fake = FakeClock()
    with mock.patch.object(hooks_module, "time", fake):
        yield fake


class Lines(logging.Handler):
    """Collects the formatted lines of the logger TF-style logging goes to."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append((record.levelno, record.getMessage()))

    def text(self, level=None):
        return [m for lvl, m in self.records if level is None or lvl == level]


@pytest.fixture
def lines():
    handler = Lines()
    logger = tf_logging.get_logger()
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def run_hooked(hooks, fetch, steps, feed_dict=None, before_each=None):
    """Runs ``fetch`` ``steps`` times in a MonitoredSession with ``hooks``."""
    values = []
    with nd.train.MonitoredSession(hooks=hooks) as sess:
        for _ in range(steps):
            if before_each:
                before_each()
            values.append(sess.run(fetch, feed_dict=feed_dict))
    return values


# -- logging -------------------------------------------------------------------------
def test_compat_logging_is_the_module_the_hooks_log_through():
    from nbdist.compat import tf_logging as compat_logging
    from nbdist.train import tf_logging as train_logging

    assert compat_logging is train_logging is nd.compat.v1.logging


def test_logging_tensor_hook_lines_reach_a_patched_tf_logging_info(clock):
    foo = nd.constant(42, name="foo")
    hook = nd.train.LoggingTensorHook(tensors=[foo], every_n_iter=1)
    with mock.patch.object(tf_logging, "info") as info:
        run_hooked([hook], nd.no_op(), 1)
    logged = [c[0][0] % tuple(c[0][1:]) for c in info.call_args_list]
    # A list of tensors is tagged by the tensors themselves (as TF: str(tensor)).
    assert [m for m in logged if "foo:0" in m] == [f"{foo} = 42"]


def test_logging_tensor_hook_every_n_iter_and_elapsed_seconds(clock, lines):
    t = nd.constant([1.5, 2.0], name="t")
    step = nd.Variable(0, name="step")
    inc = step.assign_add(1)
    hook = nd.train.LoggingTensorHook({"t": t, "step": step}, every_n_iter=2)

    def tick():
        clock.now += 0.25

    run_hooked([hook], inc, 5, before_each=tick)
    # Iterations 0, 2, 4 log; tags sorted for a dict; the elapsed time since
    # the previous line follows from the second line on.
    assert lines.text(logging.INFO)[-3:] == [
        "step = 0, t = [1.5 2. ]",
        "step = 2, t = [1.5 2. ] (0.500 sec)",
        "step = 4, t = [1.5 2. ] (0.500 sec)",
    ]


def test_logging_tensor_hook_every_n_secs(clock, lines):
    x = nd.constant(7, name="x")
    hook = nd.train.LoggingTensorHook({"x": x}, every_n_secs=1.0)

    def tick():
        clock.now += 0.4

    run_hooked([hook], nd.no_op(), 7, before_each=tick)
    # Runs at t=0.4 (first), then the first run at least 1 s later: 1.6, 2.8.
    assert [m for m in lines.text(logging.INFO) if m.startswith("x = ")] == [
        "x = 7", "x = 7 (1.200 sec)", "x = 7 (1.200 sec)"]


def test_logging_tensor_hook_at_end_only_and_formatter(clock, lines):
    v = nd.Variable(3, name="v")
    inc = v.assign_add(1)
    hook = nd.train.LoggingTensorHook(
        {"v": v}, at_end=True, formatter=lambda d: f"v is {d['v']}")
    run_hooked([hook], inc, 4)
    assert lines.text(logging.INFO)[-1] == "v is 7"
    assert sum("v is" in m for m in lines.text()) == 1


def test_logging_tensor_hook_argument_errors():
    with pytest.raises(ValueError):
        nd.train.LoggingTensorHook(["a"])
    with pytest.raises(ValueError):
        nd.train.LoggingTensorHook(["a"], every_n_iter=1, every_n_secs=1)
    with pytest.raises(ValueError):
        nd.train.LoggingTensorHook(["a"], every_n_iter=0)


def test_nan_tensor_hook_warns_through_tf_logging_and_stops():
    loss = nd.constant(np.nan, name="loss")
    hook = nd.train.NanTensorHook(loss, fail_on_nan_loss=False)
    noop = nd.no_op()
    with mock.patch.object(tf_logging, "warning") as warning:
        with nd.train.MonitoredSession(hooks=[hook]) as sess:
            sess.run(noop)
            assert sess.should_stop()
    warning.assert_called_once_with("Model diverged with loss = NaN.")


def test_nan_tensor_hook_fails_with_tf_error_line():
    loss = nd.constant(np.nan, name="loss")
    hook = nd.train.NanTensorHook(loss)
    noop = nd.no_op()
    with mock.patch.object(tf_logging, "error") as error:
        with pytest.raises(nd.train.NanLossDuringTrainingError, match="NaN loss"):
            with nd.train.MonitoredSession(hooks=[hook]) as sess:
                sess.run(noop)
    error.assert_called_once_with("Model diverged with loss = NaN.")


def test_checkpoint_saver_hook_lines_and_checkpoint_events(tmp_path, lines):
    gs = nd.train.get_or_create_global_step()
    inc = gs.assign_add(1)
    nd.train.Saver()
    hook = nd.train.CheckpointSaverHook(str(tmp_path), save_steps=2)
    run_hooked([hook], inc, 3)
    save_path = os.path.join(str(tmp_path), "model.ckpt")
    info = lines.text(logging.INFO)
    assert "Create CheckpointSaverHook." in info
    saved = [m for m in info if m.startswith("Saving checkpoints")]
    # At creation (0), when step 2 is reached, and at the end (3).
    assert saved == [f"Saving checkpoints for {s} into {save_path}." for s in (0, 2, 3)]
    nd.summary.FileWriterCache.get(str(tmp_path)).flush()
    (events,) = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    checkpoints = [(e.step, e.session_log.checkpoint_path)
                   for e in nd.train.summary_iterator(events)
                   if e.HasField("session_log")
                   and e.session_log.status == summary_pb2.SessionLog.CHECKPOINT]
    assert checkpoints == [(0, save_path), (2, save_path), (3, save_path)]


# -- StepCounterHook ----------------------------------------------------------------
def test_step_counter_hook_writes_global_step_per_sec_for_tensorboard(
        tmp_path, clock, lines):
    gs = nd.train.get_or_create_global_step()
    inc = gs.assign_add(1)
    hook = nd.train.StepCounterHook(every_n_steps=10, output_dir=str(tmp_path))

    def tick():
        clock.now += 0.1

    run_hooked([hook], inc, 25, before_each=tick)
    nd.summary.FileWriterCache.get(str(tmp_path)).flush()
    acc = ea.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert "global_step/sec" in acc.Tags()["scalars"]
    points = acc.Scalars("global_step/sec")
    # First trigger at step 1 only starts the clock; then 10 steps per 1.0 s.
    assert [p.step for p in points] == [11, 21]
    assert [p.value for p in points] == pytest.approx([10.0, 10.0], rel=1e-6)
    assert [m for m in lines.text(logging.INFO) if m.startswith("global_step/sec")] \
        == ["global_step/sec: 10", "global_step/sec: 10"]


def test_step_counter_hook_uses_the_given_summary_writer(tmp_path, clock):
    gs = nd.train.get_or_create_global_step()
    inc = gs.assign_add(1)
    written = []
    writer = types.SimpleNamespace(
        add_summary=lambda s, step: written.append((s, step)))
    hook = nd.train.StepCounterHook(every_n_steps=2, summary_writer=writer)

    def tick():
        clock.now += 0.5

    run_hooked([hook], inc, 5, before_each=tick)
    assert [step for _, step in written] == [3, 5]
    assert all(s.value[0].tag == "global_step/sec" and s.value[0].simple_value == 2.0
               for s, _ in written)


def test_step_counter_hook_warns_first_five_times_the_step_stays(lines):
    nd.train.get_or_create_global_step()
    hook = nd.train.StepCounterHook(every_n_steps=10)
    run_hooked([hook], nd.no_op(), 9)
    stuck = [m for m in lines.text(logging.WARNING)
             if m.startswith("It seems that global step")]
    assert len(stuck) == 5
    assert "Current value (could be stable): 0 vs previous value: 0." in stuck[0]


# -- summary_iterator ----------------------------------------------------------------
def test_summary_iterator_reads_back_events(tmp_path):
    assert nd.compat.v1.train.summary_iterator is nd.train.summary_iterator
    with nd.summary.FileWriter(str(tmp_path)) as writer:
        for step, value in [(1, 0.5), (2, 0.25)]:
            writer.add_summary(summary_pb2.Summary(value=[
                summary_pb2.Summary.Value(tag="loss", simple_value=value)]), step)
    (path,) = glob.glob(str(tmp_path / "events.*"))
    events = list(nd.train.summary_iterator(path))
    assert isinstance(events[0], nd.summary.Event)
    assert events[0].file_version == "brain.Event:2"
    assert [(e.step, e.summary.value[0].tag, e.summary.value[0].simple_value)
            for e in events[1:]] == [(1, "loss", 0.5), (2, "loss", 0.25)]


def test_summary_iterator_raises_data_loss_on_a_corrupt_record(tmp_path):
    with nd.summary.FileWriter(str(tmp_path)) as writer:
        writer.add_summary(summary_pb2.Summary(value=[
            summary_pb2.Summary.Value(tag="loss", simple_value=1.0)]), 1)
    (path,) = glob.glob(str(tmp_path / "events.*"))
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[-6] ^= 0xFF  # inside the last record's data
    with open(path, "wb") as f:
        f.write(bytes(data))
    with pytest.raises(errors.DataLossError):
        list(nd.train.summary_iterator(path))
    with open(path, "wb") as f:
        f.write(bytes(data[:-3]))  # cut short
    with pytest.raises(errors.DataLossError, match="truncated"):
        list(nd.train.summary_iterator(path))


# -- timers, waiters, feeds, final ops -------------------------------------------------
def test_second_or_step_timer_every_steps_and_every_secs(clock):
    with pytest.raises(ValueError):
        nd.train.SecondOrStepTimer()
    with pytest.raises(ValueError):
        nd.train.SecondOrStepTimer(every_secs=1, every_steps=1)
    timer = nd.train.SecondOrStepTimer(every_steps=3)
    assert timer.should_trigger_for_step(1)
    assert timer.update_last_triggered_step(1) == (None, None)
    assert not timer.should_trigger_for_step(1)
    assert not timer.should_trigger_for_step(3)
    assert timer.should_trigger_for_step(4)
    timer = nd.train.SecondOrStepTimer(every_secs=1.0)
    timer.update_last_triggered_step(1)
    clock.now += 0.5
    assert not timer.should_trigger_for_step(2)
    clock.now += 0.5
    assert timer.should_trigger_for_step(2)
    assert timer.update_last_triggered_step(5) == (pytest.approx(1.0), 4)
    assert timer.last_triggered_step() == 5


def test_global_step_waiter_hook_polls_until_the_step_is_reached(clock, lines):
    gs = nd.train.get_or_create_global_step()
    hook = nd.train.GlobalStepWaiterHook(wait_until_step=1000)
    hook.begin()
    with nd.Session() as sess:
        sess.run(nd.global_variables_initializer())
        assign_500, assign_1100 = gs.assign(500), gs.assign(1100)
        moves = iter([assign_500, assign_1100])

        def sleep(secs):
            try:
                sess.run(next(moves))
            except StopIteration:
                raise AssertionError("before_run should have returned") from None

        clock.sleep = sleep
        hook.before_run(SessionRunContext(SessionRunArgs(None), sess))
        assert int(sess.run(gs)) == 1100
        assert "Waiting for global step 1000 before starting training." in \
            lines.text(logging.INFO)
        # Once started, it never waits again.
        clock.sleep = None
        hook.before_run(SessionRunContext(SessionRunArgs(None), sess))


def test_global_step_waiter_hook_zero_never_reads_the_step():
    nd.train.get_or_create_global_step()
    hook = nd.train.GlobalStepWaiterHook(wait_until_step=0)
    hook.begin()
    session = mock.Mock()
    assert hook.before_run(SessionRunContext(SessionRunArgs(None), session)) is None
    session.run.assert_not_called()


def test_feed_fn_hook_feeds_every_run():
    x = nd.placeholder(nd.int32, [], name="x")
    counter = iter(range(10, 20))
    hook = nd.train.FeedFnHook(lambda: {x: next(counter)})
    assert run_hooked([hook], x * 2, 3) == [20, 22, 24]


def test_final_ops_hook_values_with_feed():
    v = nd.Variable(5.0, name="v")
    scale = nd.placeholder(nd.float32, [], name="scale")
    inc = v.assign_add(1.0)
    hook = nd.train.FinalOpsHook({"scaled": v * scale}, {scale: 2.0})
    assert hook.final_ops_values is None
    run_hooked([hook], inc, 3)
    assert hook.final_ops_values == {"scaled": 16.0}


def test_final_ops_hook_out_of_range_is_warned_and_raised():
    queue = nd.FIFOQueue(1, [nd.float32])
    close = queue.close()
    hook = nd.train.FinalOpsHook(queue.dequeue())
    with mock.patch.object(tf_logging, "warning") as warning:
        with pytest.raises(errors.OutOfRangeError):
            sess = nd.train.MonitoredSession(hooks=[hook])
            sess.run(close)
            sess.close()
    assert "FinalOpsHook" in warning.call_args[0][0]


def test_session_run_values_carry_the_run_metadata_of_a_traced_run():
    seen = []

    class Trace(nd.train.SessionRunHook):
        def before_run(self, run_context):
            return SessionRunArgs(None, options=nd.RunOptions(
                trace_level=nd.RunOptions.FULL_TRACE))

        def after_run(self, run_context, run_values):
            assert isinstance(run_values, SessionRunValues)
            stats = run_values.run_metadata.step_stats
            seen.append({n.node_name for d in stats.dev_stats for n in d.node_stats})

    c = nd.constant(1.0, name="c") + 1.0
    run_hooked([Trace()], c, 1)
    assert "add" in seen[0]


def test_checkpoint_saver_hook_writes_graph_and_meta_graph_for_tensorboard(tmp_path):
    gs = nd.train.get_or_create_global_step()
    inc = gs.assign_add(1)
    saver = nd.train.Saver()
    hook = nd.train.CheckpointSaverHook(str(tmp_path), save_steps=10, saver=saver)
    run_hooked([hook], inc, 1)
    nd.summary.FileWriterCache.get(str(tmp_path)).flush()
    (events,) = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    events = list(nd.train.summary_iterator(events))
    metas = [meta_graph_pb2.MetaGraphDef.FromString(e.meta_graph_def) for e in events
             if e.HasField("meta_graph_def")]
    graphs = [e for e in events if e.HasField("graph_def")]
    assert len(metas) == 1 and graphs
    assert metas[0].saver_def == saver.saver_def
    assert "global_step" in {n.name for n in metas[0].graph_def.node}
    assert os.path.exists(tmp_path / "graph.pbtxt")
