"""``MonitoredSession``, ``MonitoredTrainingSession`` and ``Scaffold`` as
TensorFlow's monitored_session_test.py defines them: scaffold defaults and
feeds, ``save_graph_def``, the distribute-coordinator worker context deciding
who checkpoints and writes summaries, recovery from preemption errors (also
message-less ones and ones raised inside ``step_fn``), ``step_context``
semantics, and the session wrappers.
"""

from __future__ import annotations

import glob
import os
import threading

import pytest

import nbdist as nd
from nbdist import errors
from nbdist.distribute.strategies.distribute_coordinator import _WorkerContext
from nbdist.train import monitored_session as ms
from nbdist.train.hooks import SessionRunArgs, SessionRunHook


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g
    nd.summary.FileWriterCache.clear()


def step_model():
    gs = nd.train.get_or_create_global_step()
    return gs, gs.assign_add(1)


def summary_tags(logdir):
    tags = set()
    for path in glob.glob(os.path.join(logdir, "events.*")):
        for event in nd.train.summary_iterator(path):
            tags.update(v.tag for v in event.summary.value)
    return tags


# -- Scaffold ------------------------------------------------------------------------
def test_scaffold_creates_nothing_before_finalize():
    scaffold = nd.train.Scaffold()
    assert (scaffold.init_op, scaffold.init_feed_dict, scaffold.init_fn,
            scaffold.ready_op, scaffold.ready_for_local_init_op,
            scaffold.local_init_op, scaffold.local_init_feed_dict,
            scaffold.saver) == (None,) * 8


def test_scaffold_defaults_report_and_initialise_global_and_local_variables():
    nd.Variable(1, name="my_var")
    nd.Variable(2, name="my_local_var", collections=[nd.GraphKeys.LOCAL_VARIABLES])
    scaffold = nd.train.Scaffold().finalize()
    assert scaffold.init_feed_dict is None and scaffold.local_init_feed_dict is None
    assert isinstance(scaffold.saver, nd.train.Saver)
    assert nd.get_default_graph().finalized
    with nd.Session() as sess:
        assert sorted(sess.run(scaffold.ready_op)) == [b"my_local_var", b"my_var"]
        assert list(sess.run(scaffold.ready_for_local_init_op)) == [b"my_var"]
        sess.run(scaffold.init_op)
        assert len(sess.run(scaffold.ready_for_local_init_op)) == 0
        sess.run(scaffold.local_init_op)
        assert len(sess.run(scaffold.ready_op)) == 0


def test_scaffold_uses_passed_values_and_copies_from_another():
    nd.Variable([1])
    saver = nd.train.Saver()
    first = nd.train.Scaffold(init_op=2, init_feed_dict=3, init_fn=lambda s, sess: 4,
                              ready_op=5, ready_for_local_init_op=6, local_init_op=7,
                              local_init_feed_dict=8, saver=saver)
    second = nd.train.Scaffold(init_op=4, local_init_feed_dict=15,
                               copy_from_scaffold=first).finalize()
    assert (second.init_op, second.init_feed_dict, second.ready_op,
            second.ready_for_local_init_op, second.local_init_op,
            second.local_init_feed_dict, second.saver) == (4, 3, 5, 6, 7, 15, saver)
    assert callable(second.init_fn)
    with pytest.raises(TypeError, match="copy_from_scaffold is not a Scaffold"):
        nd.train.Scaffold(copy_from_scaffold=1)


def test_scaffold_get_or_default_caches_and_refuses_ambiguity():
    made = []
    op = nd.train.Scaffold.get_or_default(
        "init_op", "my_key", lambda: made.append(1) or nd.no_op(name="made"))
    again = nd.train.Scaffold.get_or_default("init_op", "my_key", lambda: 1 / 0)
    assert op is again and made == [1]
    nd.add_to_collection("my_key", nd.no_op())
    with pytest.raises(RuntimeError, match="More than one item"):
        nd.train.Scaffold.get_or_default("init_op", "my_key", nd.no_op)


def test_local_init_feed_dict_is_fed_to_the_local_init_op():
    p = nd.placeholder(nd.float32, [3])
    v = nd.Variable(p, name="v", collections=[nd.GraphKeys.LOCAL_VARIABLES])
    scaffold = nd.train.Scaffold(local_init_op=v.initializer,
                                 local_init_feed_dict={p: [1.0, 2.0, 3.0]})
    with nd.train.MonitoredTrainingSession(scaffold=scaffold) as sess:
        assert list(sess.run(v)) == [1.0, 2.0, 3.0]


# -- MonitoredTrainingSession ----------------------------------------------------------
def test_save_graph_def_false_writes_no_graph_and_no_meta(tmp_path):
    _, step = step_model()
    logdir = str(tmp_path)
    with nd.train.MonitoredTrainingSession(checkpoint_dir=logdir,
                                           save_checkpoint_steps=1,
                                           save_graph_def=False) as sess:
        assert "graph.pbtxt" not in os.listdir(logdir)
        assert glob.glob(os.path.join(logdir, "*.meta")) == []
        sess.run(step)
        assert glob.glob(os.path.join(logdir, "*.meta")) == []
    assert nd.train.latest_checkpoint(logdir).endswith("model.ckpt-1")


def test_save_graph_def_true_writes_graph_and_a_meta_per_checkpoint(tmp_path):
    _, step = step_model()
    logdir = str(tmp_path)
    with nd.train.MonitoredTrainingSession(checkpoint_dir=logdir,
                                           save_checkpoint_steps=1) as sess:
        assert "graph.pbtxt" in os.listdir(logdir)
        assert len(glob.glob(os.path.join(logdir, "*.meta"))) == 1
        sess.run(step)
        assert len(glob.glob(os.path.join(logdir, "*.meta"))) == 2


def test_summaries_include_global_step_per_sec(tmp_path):
    _, step = step_model()
    nd.summary.scalar("my_summary_tag", nd.cast(step, nd.float32) * 2.0)
    logdir = str(tmp_path)
    with nd.train.MonitoredTrainingSession(checkpoint_dir=logdir,
                                           save_summaries_steps=100,
                                           log_step_count_steps=10) as sess:
        for _ in range(101):
            sess.run(step)
    assert {"my_summary_tag", "global_step/sec"} <= summary_tags(logdir)


class Extended:
    def __init__(self, should_checkpoint=None, should_save_summary=None):
        self.experimental_between_graph = False
        self.experimental_should_init = True
        self.should_checkpoint = should_checkpoint
        self.should_save_summary = should_save_summary


class Strategy:
    def __init__(self, **flags):
        self.extended = Extended(**flags)


@pytest.mark.parametrize("should_checkpoint", [True, False])
def test_worker_context_decides_who_checkpoints(tmp_path, should_checkpoint):
    gs, step = step_model()
    logdir = str(tmp_path)
    context = _WorkerContext(Strategy(should_checkpoint=should_checkpoint),
                             None, None, None)
    with context, nd.train.MonitoredTrainingSession(
            checkpoint_dir=logdir, save_checkpoint_steps=100,
            log_step_count_steps=10) as sess:
        for _ in range(100):
            sess.run(step)
    if should_checkpoint:
        assert nd.train.latest_checkpoint(logdir).endswith("model.ckpt-100")
    else:
        assert nd.train.latest_checkpoint(logdir) is None


@pytest.mark.parametrize("should_save_summary", [True, False])
def test_worker_context_decides_who_writes_summaries(tmp_path, should_save_summary):
    _, step = step_model()
    nd.summary.scalar("my_summary_tag", nd.cast(step, nd.float32))
    logdir = str(tmp_path)
    context = _WorkerContext(Strategy(should_save_summary=should_save_summary),
                             None, None, None)
    with context, nd.train.MonitoredTrainingSession(
            checkpoint_dir=logdir, save_summaries_steps=100,
            log_step_count_steps=10) as sess:
        for _ in range(101):
            sess.run(step)
    tags = summary_tags(logdir)
    if should_save_summary:
        assert {"my_summary_tag", "global_step/sec"} <= tags
    else:
        assert tags == set()


def test_worker_context_chief_only_hooks_need_a_chief():
    _, step = step_model()

    class Counting(SessionRunHook):
        runs = 0

        def after_run(self, run_context, run_values):
            Counting.runs += 1

    cluster = nd.train.ClusterSpec({"chief": ["localhost:1"],
                                    "worker": ["localhost:2"]})
    strategy = Strategy(should_checkpoint=False, should_save_summary=False)
    context = _WorkerContext(strategy, cluster, "worker", 0)
    assert not context.is_chief
    # The worker's session is made by the context (for its own master): only
    # which hooks it gets is checked here.
    made = {}

    def creator(scaffold, config=None, checkpoint_dir=None, max_wait_secs=None):
        made["scaffold"] = scaffold
        return nd.train.ChiefSessionCreator(scaffold=scaffold)

    context.session_creator = creator
    with context, nd.train.MonitoredTrainingSession(
            chief_only_hooks=[Counting()]) as sess:
        sess.run(step)
    assert Counting.runs == 0 and made["scaffold"] is not None


# -- recovery --------------------------------------------------------------------------
class RaiseOnceAtRun(SessionRunHook):
    """Raises ``error`` in the ``n``-th before_run (counting from 1), once."""

    def __init__(self, n, error):
        self.n, self.error, self.count, self.raised = n, error, 0, False

    def before_run(self, run_context):
        self.count += 1
        if self.count == self.n and not self.raised:
            self.raised = True
            raise self.error


@pytest.mark.parametrize("error", [
    errors.AbortedError(None, None, None),
    errors.UnavailableError(None, None, None),
    errors.AbortedError(None, None, "Abort"),
])
def test_recovers_from_a_preemption_error_with_or_without_a_message(error):
    gs, step = step_model()
    hook = RaiseOnceAtRun(4, error)
    with nd.train.MonitoredSession(hooks=[hook]) as sess:
        assert sess.run(gs) == 0
        assert sess.run(step) == 1
        assert sess.run(step) == 2
        # The 4th run hits the error: a fresh session (nothing to restore
        # from) starts again at 0, and the run is retried.
        assert sess.run(step) == 1
        assert hook.raised and not sess.should_stop()
        assert sess.run(step) == 2


def test_recovery_restores_the_latest_checkpoint(tmp_path):
    gs, step = step_model()
    scaffold = nd.train.Scaffold()
    logdir = str(tmp_path)
    hooks = [RaiseOnceAtRun(4, errors.AbortedError(None, None, None)),
             nd.train.CheckpointSaverHook(logdir, save_steps=1, scaffold=scaffold)]
    creator = nd.train.ChiefSessionCreator(scaffold, checkpoint_dir=logdir)
    with nd.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
        assert [sess.run(gs), sess.run(step), sess.run(step)] == [0, 1, 2]
        assert sess.run(step) == 3  # restored at 2, then the retried step
        assert sess.run(step) == 4


def test_step_fn_is_retried_whole_after_an_aborted_error():
    c = nd.placeholder(nd.float32, [])
    v = nd.identity(c)
    state = nd.Variable(0.0)
    side_effect = state.assign_add(0.25)
    calls = []

    def step_fn(step_context):
        calls.append(1)
        step_context.session.run(side_effect)
        value = step_context.run_with_hooks(fetches=v, feed_dict={c: 3.5})
        if len(calls) == 1:
            raise errors.AbortedError(None, None, None)
        return value

    with nd.train.MonitoredSession() as sess:
        assert sess.run_step_fn(step_fn) == 3.5
        assert len(calls) == 2
        # A new session initialised the variable again: one side effect counts.
        assert sess.run(state) == 0.25


def test_singular_session_does_not_recover_in_step_fn():
    def step_fn(step_context):
        raise errors.AbortedError(None, None, "Abort")

    with nd.train.SingularMonitoredSession() as sess:
        with pytest.raises(errors.AbortedError, match="Abort"):
            sess.run_step_fn(step_fn)


def test_step_context_request_stop_skips_the_hooks_and_stops():
    calls = []

    class Hook(SessionRunHook):
        def before_run(self, run_context):
            calls.append("before_run")

        def after_run(self, run_context, run_values):
            calls.append("after_run")

    def step_fn(step_context):
        step_context.request_stop()

    with nd.train.MonitoredSession(hooks=[Hook()]) as sess:
        assert sess.run_step_fn(step_fn) is None
        assert sess.should_stop()
    assert calls == []
    # Without a with-block the StopIteration reaches the caller.
    session = nd.train.MonitoredSession()
    with pytest.raises(StopIteration):
        session.run_step_fn(step_fn)
    assert not session.should_stop()
    session.close()


def test_step_context_session_runs_without_hooks_and_run_with_hooks_with_them():
    var = nd.Variable(0.0)
    stage_0 = var.assign_add(0.5)
    stage_1 = var.assign_add(0.25)
    read = var.read_value()
    seen = []

    class Hook(SessionRunHook):
        def before_run(self, run_context):
            seen.append("before")
            return SessionRunArgs(fetches=read)

        def after_run(self, run_context, run_values):
            seen.append(run_values.results)

    def step_fn(step_context):
        assert isinstance(step_context.session, nd.Session)
        assert step_context.session.run(stage_0) == 0.5
        return step_context.run_with_hooks(fetches=stage_1)

    with nd.train.MonitoredSession(hooks=[Hook()]) as sess:
        assert sess.run_step_fn(step_fn) == 0.75
    assert seen[0] == "before" and len(seen) == 2


def test_step_fn_signature_is_checked():
    def two_args(step_context, extra):
        del step_context, extra

    with nd.train.MonitoredSession() as sess:
        with pytest.raises(ValueError, match="`step_fn` may either have one"):
            sess.run_step_fn(two_args)


# -- closing and the wrappers ----------------------------------------------------------
def test_close_inside_with_says_the_session_is_already_closed():
    with pytest.raises(RuntimeError, match="Session is already closed"):
        with nd.train.MonitoredSession() as sess:
            sess.close()


def test_run_after_close_raises_runtime_error():
    _, step = step_model()
    sess = nd.train.MonitoredSession()
    sess.run(step)
    sess.close()
    assert sess.should_stop()
    with pytest.raises(RuntimeError, match="closed"):
        sess.run(step)
    with pytest.raises(RuntimeError, match="closed"):
        sess.run_step_fn(lambda step_context: None)


def test_regular_exception_stops_and_closes():
    gs, step = step_model()
    session = nd.train.MonitoredSession(
        hooks=[RaiseOnceAtRun(2, RuntimeError("regular exception"))])
    with pytest.raises(RuntimeError, match="regular exception"):
        with session:
            session.run(step)
            session.run(step)
    assert session.should_stop() and session._is_closed()


def test_out_of_range_ends_the_with_block_cleanly():
    _, step = step_model()
    session = nd.train.MonitoredSession(
        hooks=[RaiseOnceAtRun(2, errors.OutOfRangeError(None, None, "EOI"))])
    with session:
        session.run(step)
        session.run(step)
        pytest.fail("the OutOfRangeError should end the block")
    assert session.should_stop()


def test_singular_monitored_session_raw_session_and_graph(fresh_graph):
    v = nd.Variable(7, name="v")
    with nd.train.SingularMonitoredSession() as sess:
        raw = sess.raw_session()
        assert isinstance(raw, nd.Session)
        assert raw.run(v) == 7
        assert sess.graph is fresh_graph
    assert not fresh_graph.finalized


def test_wrapped_session_stops_after_close_and_delegates_should_stop():
    c = nd.placeholder(nd.int32, [])
    v = nd.identity(c)

    class StopAtN(ms._WrappedSession):
        def __init__(self, sess, n):
            super().__init__(sess)
            self.n = n

        def _check_stop(self):
            self.n -= 1
            return self.n < 0

    with nd.Session() as raw:
        wrapped = ms._WrappedSession(raw)
        assert wrapped.graph is raw.graph and wrapped.sess_str == raw.sess_str
        assert wrapped.run(v, feed_dict={c: 51}) == 51
        assert not wrapped.should_stop()
        wrapped.close()
        assert wrapped.should_stop()
        wrapped.close()  # twice is fine
        outer = ms._WrappedSession(StopAtN(raw, 2))
        assert [outer.should_stop() for _ in range(3)] == [False, False, True]


def test_recoverable_session_moves_to_the_next_session_on_abort():
    c = nd.placeholder(nd.int32, [])
    v = nd.identity(c)

    class AbortAtN:
        def __init__(self, sess, n):
            self.sess, self.n = sess, n

        def close(self):
            pass

        def run(self, *args, **kwargs):
            if self.n == 0:
                raise errors.AbortedError(None, None, None)
            self.n -= 1
            return self.sess.run(*args, **kwargs)

    with nd.Session() as raw:
        stack = [AbortAtN(raw, n) for n in (1, 2)]

        class Creator:
            def create_session(self):
                return stack.pop(0)

        recoverable = ms._RecoverableSession(Creator())
        assert recoverable.run(v, feed_dict={c: 51}) == 51
        assert recoverable.run(v, feed_dict={c: 42}) == 42  # second session
        assert len(stack) == 0
        assert recoverable.run(v, feed_dict={c: 33}) == 33
        with pytest.raises(IndexError):
            recoverable.run(v, feed_dict={c: 24})


# -- errors reported through the coordinator -------------------------------------------
class StopCoordinatorAfter(SessionRunHook):
    """After ``n`` runs a thread of the coordinator reports ``error`` (once)."""

    def __init__(self, n, error):
        self.n, self.error = n, error
        self.go, self.stored = threading.Event(), threading.Event()
        self.started = False

    def after_create_session(self, session, coord):
        if self.started:
            return
        self.started = True

        def report():
            self.go.wait(60)
            coord.request_stop(self.error)
            self.stored.set()

        thread = threading.Thread(target=report, daemon=True)
        coord.register_thread(thread)
        thread.start()

    def after_run(self, run_context, run_values):
        self.n -= 1
        if self.n == 0:
            self.go.set()
            assert self.stored.wait(60)


class CountingCreator:
    """Hands out one session again and again, counting the calls."""

    def __init__(self, sess):
        self.sess = sess
        self.created = 0

    def create_session(self):
        self.created += 1
        return self.sess


class Unclosable:
    def __init__(self, sess):
        self.sess = sess
        self.graph = sess.graph

    def run(self, *args, **kwargs):
        return self.sess.run(*args, **kwargs)

    def close(self):
        pass


def test_a_preemption_reported_by_a_thread_recreates_the_session():
    c = nd.placeholder(nd.int32, [])
    v = nd.identity(c)
    with nd.Session() as raw:
        creator = CountingCreator(Unclosable(raw))
        hook = StopCoordinatorAfter(2, errors.AbortedError(None, None, None))
        session = nd.train.MonitoredSession(creator, [hook])
        assert session.run(v, feed_dict={c: 51}) == 51
        assert not session.should_stop()
        assert session.run(v, feed_dict={c: 42}) == 42
        # The coordinator stopped with a preemption error: a new session goes on.
        assert not session.should_stop()
        assert creator.created == 2
        session.close()


def test_a_fatal_error_reported_by_a_thread_stops_and_close_raises_it():
    c = nd.placeholder(nd.int32, [])
    v = nd.identity(c)
    with nd.Session() as raw:
        creator = CountingCreator(Unclosable(raw))
        hook = StopCoordinatorAfter(
            2, errors.UnknownError(None, None, "Some fatal exception"))
        session = nd.train.MonitoredSession(creator, [hook])
        assert session.run(v, feed_dict={c: 51}) == 51
        assert session.run(v, feed_dict={c: 42}) == 42
        assert session.should_stop()
        assert creator.created == 1
        with pytest.raises(errors.UnknownError, match="Some fatal exception"):
            session.close()


# -- more of TF's MonitoredSession contract --------------------------------------------
def test_scaffold_defaults_without_variables():
    nd.constant(1, name="my_const")
    scaffold = nd.train.Scaffold().finalize()
    assert isinstance(scaffold.init_op, nd.Operation)
    assert isinstance(scaffold.ready_op, nd.Tensor)
    assert isinstance(scaffold.ready_for_local_init_op, nd.Tensor)
    assert isinstance(scaffold.local_init_op, nd.Operation)
    assert isinstance(scaffold.saver, nd.train.Saver)
    with pytest.raises(RuntimeError, match="Graph is finalized"):
        nd.constant([0])


def test_a_preemption_in_init_fn_is_retried():
    gs = nd.train.get_or_create_global_step()
    raised = []

    def init_fn(scaffold, session):
        if not raised:
            raised.append(True)
            raise errors.AbortedError(None, None, "Abort")

    creator = nd.train.ChiefSessionCreator(scaffold=nd.train.Scaffold(init_fn=init_fn))
    with nd.train.MonitoredSession(session_creator=creator) as sess:
        assert not sess.should_stop()
        assert sess.run(gs) == 0
    assert raised == [True]


def test_singular_session_raises_preemption_errors_of_hooks():
    gs = nd.train.get_or_create_global_step()

    class RaiseAborted(SessionRunHook):
        def before_run(self, run_context):
            raise errors.AbortedError(None, None, "Abort")

    with nd.train.SingularMonitoredSession(hooks=[RaiseAborted()]) as sess:
        with pytest.raises(errors.AbortedError):
            sess.run(gs)
    with pytest.raises(errors.AbortedError):
        with nd.train.SingularMonitoredSession(hooks=[RaiseAborted()]) as sess:
            sess.run(gs)


def test_graph_finalized_while_running_and_unfinalized_after(fresh_graph):
    v = nd.Variable(0)
    with nd.train.MonitoredSession() as sess:
        assert sess.run(v) == 0 and fresh_graph.finalized
        assert sess.graph is fresh_graph
    assert not fresh_graph.finalized
    nd.train.Scaffold().finalize()
    with nd.train.MonitoredSession() as sess:
        sess.run(v)
    assert fresh_graph.finalized  # it was finalized before: it stays so


def test_run_options_of_caller_and_hooks_are_merged():
    const = nd.constant(42, name="my_const")
    seen = []

    class Options(SessionRunHook):
        def before_run(self, run_context):
            return SessionRunArgs(None, options=nd.RunOptions(
                trace_level=2, timeout_in_ms=60000, output_partition_graphs=False))

        def after_run(self, run_context, run_values):
            seen.append((run_values.options, run_values.run_metadata))

    with nd.train.MonitoredSession(hooks=[Options()]) as sess:
        caller = nd.RunOptions(trace_level=3, timeout_in_ms=30000,
                               output_partition_graphs=True)
        assert sess.run(const, options=caller) == 42
    (options, metadata), = seen
    assert (options.trace_level, options.timeout_in_ms,
            options.output_partition_graphs) == (3, 60000, True)
    assert isinstance(metadata, nd.RunMetadata)
    assert len(metadata.partition_graphs) > 0
