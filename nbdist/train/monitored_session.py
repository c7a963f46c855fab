"""``MonitoredTrainingSession`` and its parts, as TF's ``monitored_session.py``.

A ``MonitoredSession`` is a session wrapper that

* calls the hooks' ``begin``, finalizes the graph through a ``Scaffold``,
  creates the session (the chief initialises or restores the model, other
  workers wait until it is ready), starts queue runners and calls the hooks'
  ``after_create_session``;
* runs the hooks around each ``run`` (``before_run``/``after_run``);
* recovers from ``AbortedError``/``UnavailableError`` (a parameter server
  that restarted): the session is closed and created again — the chief
  restores the latest checkpoint, a worker waits for the model again — and
  the failed ``run`` is retried, so the training loop never sees the error.
  Unlike TF, which retries immediately and forever, retries back off
  exponentially (0.1 s doubling to 2 s) and stop after
  ``max_recovery_attempts`` consecutive failures (default 20), after which
  the last error is raised. A task that went away or restarted surfaces as
  one of these two however the runtime met it (a call that could not
  connect, a connection cut mid-call, a ``_Recv`` from a restarted
  producer), and each attempt waits a few seconds for a lost task to answer
  again, so a parameter server down for 60 s is recovered from
  (tests/test_ps_outage.py);
* on ``close`` calls the hooks' ``end``, stops the coordinator's threads and
  closes the session, swallowing preemption errors. A thread still blocked
  in a step shortly after the stop (the SyncReplicas chief waiting for
  gradients that will never come) is cancelled by closing the session
  instead of being waited for during the whole grace period.

Summaries go to ``summary_dir`` (default ``checkpoint_dir``) through a
``SummarySaverHook`` on the chief, every 100 steps unless told otherwise.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time

from nbdist import errors
from nbdist.graph import summary_ops
from nbdist.graph.ops import GraphKeys, get_default_graph
from nbdist.proto import config_pb2
from nbdist.train import hooks as _hooks
from nbdist.train import session_manager as sm
from nbdist.train.coordinator import Coordinator
from nbdist.train.summary_hooks import SummarySaverHook

_log = logging.getLogger("nbdist")

# The errors a session is re-created after.
_PREEMPTION_ERRORS = (errors.AbortedError, errors.UnavailableError)

# Value that indicates no value was provided.
USE_DEFAULT = object()

DEFAULT_MAX_RECOVERY_ATTEMPTS = 20
_INITIAL_BACKOFF_SECS = 0.1
_MAX_BACKOFF_SECS = 2.0
# How long closing waits for the coordinator's threads to stop on their own
# before cancelling the steps they are blocked in.
_THREAD_STOP_WAIT_SECS = 0.5


class Scaffold:
    """The pieces a training session needs: init, ready and local-init ops and
    a ``Saver``. Missing pieces are taken from the graph's collections, or
    built, by ``finalize()``."""

    def __init__(self, init_op=None, init_feed_dict=None, init_fn=None, ready_op=None,
                 ready_for_local_init_op=None, local_init_op=None, summary_op=None,
                 saver=None, copy_from_scaffold=None):
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise TypeError("copy_from_scaffold is not a Scaffold instance.")

            def coalesce(a, b):
                return a if a is not None else b

            init_op = coalesce(init_op, copy_from_scaffold.init_op)
            init_feed_dict = coalesce(init_feed_dict, copy_from_scaffold.init_feed_dict)
            init_fn = coalesce(init_fn, copy_from_scaffold._user_init_fn)
            ready_op = coalesce(ready_op, copy_from_scaffold.ready_op)
            ready_for_local_init_op = coalesce(
                ready_for_local_init_op, copy_from_scaffold.ready_for_local_init_op)
            local_init_op = coalesce(local_init_op, copy_from_scaffold.local_init_op)
            summary_op = coalesce(summary_op, copy_from_scaffold.summary_op)
            saver = coalesce(saver, copy_from_scaffold.saver)
        self._user_init_fn = init_fn
        self._init_fn = (lambda sess: init_fn(self, sess)) if init_fn else None
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._local_init_op = local_init_op
        self._summary_op = summary_op
        self._saver = saver

    def finalize(self):
        """Builds the missing pieces, then finalizes the default graph."""
        from nbdist.graph.variables import (
            global_variables,
            report_uninitialized_variables,
        )

        if self._init_op is None:
            self._init_op = Scaffold.get_or_default(
                "init_op", GraphKeys.INIT_OP,
                lambda: _initializer(global_variables(), "init"))
        if self._ready_op is None:
            self._ready_op = Scaffold.get_or_default(
                "ready_op", GraphKeys.READY_OP, report_uninitialized_variables)
        if self._ready_for_local_init_op is None:
            self._ready_for_local_init_op = Scaffold.get_or_default(
                "ready_for_local_init_op", GraphKeys.READY_FOR_LOCAL_INIT_OP,
                lambda: report_uninitialized_variables(global_variables()))
        if self._local_init_op is None:
            self._local_init_op = Scaffold.get_or_default(
                "local_init_op", GraphKeys.LOCAL_INIT_OP,
                Scaffold.default_local_init_op)
        if self._summary_op is None:
            self._summary_op = Scaffold.get_or_default(
                "summary_op", GraphKeys.SUMMARY_OP, summary_ops.merge_all)
        if self._saver is None:
            self._saver = _get_saver_or_default()
        build = getattr(self._saver, "build", None)
        if build is not None:
            build()
        get_default_graph().finalize()
        _log.info("Graph was finalized.")
        return self

    init_fn = property(lambda self: self._init_fn)
    init_op = property(lambda self: self._init_op)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    local_init_op = property(lambda self: self._local_init_op)
    summary_op = property(lambda self: self._summary_op)
    saver = property(lambda self: self._saver)
    init_feed_dict = property(lambda self: self._init_feed_dict)

    @staticmethod
    def get_or_default(arg_name, collection_key, default_constructor):
        """The only member of ``collection_key``, else a new default (added to
        the collection)."""
        elements = get_default_graph().get_collection(collection_key)
        if elements:
            if len(elements) > 1:
                raise RuntimeError(
                    f'More than one item in the collection "{collection_key}". '
                    "Please indicate which one to use by passing it to the "
                    f"nd.train.Scaffold constructor as:  "
                    f"nd.train.Scaffold({arg_name}=item to use)")
            return elements[0]
        op = default_constructor()
        if op is not None:
            get_default_graph().add_to_collection(collection_key, op)
        return op

    @staticmethod
    def default_local_init_op():
        """Initialises the local variables."""
        from nbdist.graph.variables import local_variables

        return _initializer(local_variables(), "init")


def _initializer(var_list, name):
    """An op running the initializers of ``var_list`` (a no-op if empty)."""
    from nbdist.graph.control_flow_ops import no_op

    g = get_default_graph()
    with g.control_dependencies([v.initializer for v in var_list]):
        return no_op(name=name)


def _get_saver_or_default():
    """The graph's only ``SAVERS`` member, else a new ``Saver`` (added there)."""
    g = get_default_graph()
    savers = g.get_collection(GraphKeys.SAVERS)
    if savers:
        if len(savers) > 1:
            raise RuntimeError(f"More than one item in collection {GraphKeys.SAVERS}. "
                               "Please indicate which one to use by passing it to "
                               "the constructor.")
        return savers[0]
    from nbdist.train.saver import Saver

    saver = Saver(sharded=True, allow_empty=True)
    if saver is not None:
        g.add_to_collection(GraphKeys.SAVERS, saver)
    return saver


# -- session creators -------------------------------------------------------------------
class SessionCreator:
    """A factory of sessions."""

    def create_session(self):
        raise NotImplementedError(f"create_session is not implemented for {self}.")


class ChiefSessionCreator(SessionCreator):
    """Creates a session for a chief: restores or initialises the model."""

    def __init__(self, scaffold=None, master="", config=None, checkpoint_dir=None,
                 checkpoint_filename_with_path=None):
        self._checkpoint_dir = checkpoint_dir
        self._checkpoint_filename_with_path = checkpoint_filename_with_path
        self._scaffold = scaffold or Scaffold()
        self._session_manager = None
        self._master = master
        self._config = config

    def _get_session_manager(self):
        if self._session_manager is None:
            self._session_manager = sm.SessionManager(
                local_init_op=self._scaffold.local_init_op,
                ready_op=self._scaffold.ready_op,
                ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                graph=get_default_graph())
        return self._session_manager

    def create_session(self):
        self._scaffold.finalize()
        return self._get_session_manager().prepare_session(
            self._master, saver=self._scaffold.saver,
            checkpoint_dir=self._checkpoint_dir,
            checkpoint_filename_with_path=self._checkpoint_filename_with_path,
            config=self._config, init_op=self._scaffold.init_op,
            init_feed_dict=self._scaffold.init_feed_dict,
            init_fn=self._scaffold.init_fn)


class WorkerSessionCreator(SessionCreator):
    """Creates a session for a non-chief worker: waits until the model is ready."""

    def __init__(self, scaffold=None, master="", config=None, max_wait_secs=30 * 60):
        self._scaffold = scaffold or Scaffold()
        self._session_manager = None
        self._master = master
        self._config = config
        self._max_wait_secs = max_wait_secs

    def _get_session_manager(self):
        if self._session_manager is None:
            self._session_manager = sm.SessionManager(
                local_init_op=self._scaffold.local_init_op,
                ready_op=self._scaffold.ready_op,
                ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                graph=get_default_graph())
        return self._session_manager

    def create_session(self):
        self._scaffold.finalize()
        return self._get_session_manager().wait_for_session(
            self._master, config=self._config, max_wait_secs=self._max_wait_secs)


# -- MonitoredTrainingSession -----------------------------------------------------------
def MonitoredTrainingSession(master="", is_chief=True, checkpoint_dir=None,
                             scaffold=None, hooks=None, chief_only_hooks=None,
                             save_checkpoint_secs=USE_DEFAULT,
                             save_summaries_steps=USE_DEFAULT,
                             save_summaries_secs=USE_DEFAULT, config=None,
                             stop_grace_period_secs=120, log_step_count_steps=100,
                             max_wait_secs=7200, save_checkpoint_steps=USE_DEFAULT,
                             summary_dir=None,
                             max_recovery_attempts=DEFAULT_MAX_RECOVERY_ATTEMPTS):
    """A ``MonitoredSession`` for training, set up for a chief or a worker.

    The chief initialises or restores the model from ``checkpoint_dir`` and
    gets a ``StepCounterHook`` and a ``CheckpointSaverHook`` (every
    ``save_checkpoint_secs`` = 600 s by default, or every
    ``save_checkpoint_steps``; only the seconds if both are given) plus
    ``chief_only_hooks``; a worker waits up to ``max_wait_secs`` for the model
    and gets only ``hooks``. ``max_recovery_attempts`` bounds how many times
    in a row the session is re-created after a preemption error. In a notebook,
    a ``StopAtStepHook`` comes with a ``ProgressBarHook`` of the global step.
    """
    if save_summaries_steps is USE_DEFAULT and save_summaries_secs is USE_DEFAULT:
        save_summaries_steps, save_summaries_secs = 100, None
    elif save_summaries_secs is USE_DEFAULT:
        save_summaries_secs = None
    elif save_summaries_steps is USE_DEFAULT:
        save_summaries_steps = None
    if save_checkpoint_steps is USE_DEFAULT and save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_steps = None
        save_checkpoint_secs = 600
    elif save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_secs = None
    elif save_checkpoint_steps is USE_DEFAULT:
        save_checkpoint_steps = None
    scaffold = scaffold or Scaffold()
    hooks = _hooks.add_notebook_progress(hooks, chief_only_hooks if is_chief else None)
    if not is_chief:
        session_creator = WorkerSessionCreator(scaffold=scaffold, master=master,
                                               config=config,
                                               max_wait_secs=max_wait_secs)
        return MonitoredSession(session_creator=session_creator, hooks=hooks or [],
                                stop_grace_period_secs=stop_grace_period_secs,
                                max_recovery_attempts=max_recovery_attempts)
    all_hooks = []
    if chief_only_hooks:
        all_hooks.extend(chief_only_hooks)
    session_creator = ChiefSessionCreator(scaffold=scaffold,
                                          checkpoint_dir=checkpoint_dir,
                                          master=master, config=config)
    summary_dir = summary_dir or checkpoint_dir
    if summary_dir:
        if log_step_count_steps and log_step_count_steps > 0:
            all_hooks.append(_hooks.StepCounterHook(output_dir=summary_dir,
                                                    every_n_steps=log_step_count_steps))
        if (save_summaries_steps and save_summaries_steps > 0) or (
                save_summaries_secs and save_summaries_secs > 0):
            all_hooks.append(SummarySaverHook(
                scaffold=scaffold, save_steps=save_summaries_steps,
                save_secs=save_summaries_secs, output_dir=summary_dir))
    if checkpoint_dir:
        if (save_checkpoint_secs and save_checkpoint_secs > 0) or (
                save_checkpoint_steps and save_checkpoint_steps > 0):
            if save_checkpoint_secs and save_checkpoint_secs > 0:
                save_checkpoint_steps = None  # TF: only the seconds are used
            all_hooks.append(_hooks.CheckpointSaverHook(
                checkpoint_dir, save_steps=save_checkpoint_steps,
                save_secs=save_checkpoint_secs, scaffold=scaffold))
    if hooks:
        all_hooks.extend(hooks)
    return MonitoredSession(session_creator=session_creator, hooks=all_hooks,
                            stop_grace_period_secs=stop_grace_period_secs,
                            max_recovery_attempts=max_recovery_attempts)


# -- the monitored sessions ----------------------------------------------------------------
class _MonitoredSession:
    """See ``MonitoredSession`` and ``SingularMonitoredSession``."""

    def __init__(self, session_creator, hooks, should_recover, stop_grace_period_secs=120,
                 max_recovery_attempts=DEFAULT_MAX_RECOVERY_ATTEMPTS):
        self._graph_was_finalized = get_default_graph().finalized
        self._hooks = list(hooks or [])
        for h in self._hooks:
            h.begin()
        self._stop_requested_in_step_fn = False
        self._coordinated_creator = self._CoordinatedSessionCreator(
            session_creator=session_creator or ChiefSessionCreator(),
            hooks=self._hooks, stop_grace_period_secs=stop_grace_period_secs)
        if should_recover:
            self._sess = _RecoverableSession(self._coordinated_creator,
                                             max_recovery_attempts)
        else:
            self._sess = self._coordinated_creator.create_session()

    @property
    def graph(self):
        """The graph that was launched in this session."""
        if self._tf_sess() is None:
            return None
        return self._tf_sess().graph

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs ``fetches`` as ``Session.run``, with the hooks around it."""
        if self._sess is None:
            raise RuntimeError("Attempted to use a closed MonitoredSession.")
        return self._sess.run(fetches, feed_dict=feed_dict, options=options,
                              run_metadata=run_metadata)

    def run_step_fn(self, step_fn):
        """Runs ``step_fn(step_context)``; ``step_context.session`` is the raw
        session, ``step_context.run_with_hooks`` runs with the hooks and
        ``step_context.request_stop()`` ends the loop (``should_stop()``
        returns True afterwards)."""
        try:
            params = list(inspect.signature(step_fn).parameters)
        except (TypeError, ValueError):
            params = None
        if params not in (["step_context"], ["self", "step_context"]):
            raise ValueError("`step_fn` may either have one `step_context` argument, "
                             "or `self` and `step_context` arguments if it's an "
                             f"instance method. Got {params} instead.")
        try:
            return self._sess.run_step_fn(step_fn, self._tf_sess(),
                                          run_with_hooks=None)
        except StopIteration:
            self._stop_requested_in_step_fn = True
            raise

    class StepContext:
        """What ``step_fn`` gets: the raw ``session``, ``run_with_hooks`` and
        ``request_stop``."""

        def __init__(self, session, run_with_hooks_fn):
            self._session = session
            self._run_with_hooks_fn = run_with_hooks_fn

        @property
        def session(self):
            return self._session

        def run_with_hooks(self, *args, **kwargs):
            """Same as ``MonitoredSession.run``."""
            return self._run_with_hooks_fn(*args, **kwargs)

        def request_stop(self):
            """Ends the loop: raises StopIteration out of ``step_fn``."""
            raise StopIteration("step_fn has requested the iterations to stop.")

    def should_stop(self) -> bool:
        return (self._sess is None or self._stop_requested_in_step_fn or
                self._sess.should_stop())

    def close(self):
        self._close_internal()

    def __enter__(self):
        return self

    def __exit__(self, exception_type, exception_value, traceback):
        if exception_type in (errors.OutOfRangeError, StopIteration):
            exception_type = None
        self._close_internal(exception_type)
        return exception_type is None

    class _CoordinatedSessionCreator(SessionCreator):
        """Creates the session, a coordinator and its threads, and calls the
        hooks' ``after_create_session``."""

        def __init__(self, session_creator, hooks, stop_grace_period_secs):
            self._session_creator = session_creator
            self._hooks = hooks
            self.coord = None
            self.tf_sess = None
            self._stop_grace_period_secs = stop_grace_period_secs

        def create_session(self):
            self.tf_sess = self._session_creator.create_session()
            # The coordinator must not swallow any exception.
            self.coord = Coordinator(clean_stop_exception_types=[])
            try:
                graph = getattr(self.tf_sess, "graph", None) or get_default_graph()
                if graph.get_collection(GraphKeys.QUEUE_RUNNERS):
                    from nbdist.train.queue_runner import start_queue_runners

                    start_queue_runners(sess=self.tf_sess, coord=self.coord)
                for hook in self._hooks:
                    hook.after_create_session(self.tf_sess, self.coord)
            except BaseException:
                # Do not leak the session and its threads.
                _CoordinatedSession(self.tf_sess, self.coord,
                                    self._stop_grace_period_secs).close()
                raise
            return _CoordinatedSession(_HookedSession(self.tf_sess, self._hooks),
                                       self.coord, self._stop_grace_period_secs)

    def _close_internal(self, exception_type=None):
        try:
            if not exception_type:
                for h in self._hooks:
                    try:
                        h.end(self._coordinated_creator.tf_sess)
                    except _PREEMPTION_ERRORS as e:
                        _log.warning("%s.end() failed, which may be due to a "
                                     "preemption of a connected worker or parameter "
                                     "server: %s", type(h).__name__, e)
        finally:
            try:
                if self._sess is None:
                    raise RuntimeError("Session is already closed.")
                self._sess.close()
            finally:
                self._sess = None
                self._coordinated_creator.tf_sess = None
                self._coordinated_creator.coord = None
                if not self._graph_was_finalized:
                    get_default_graph()._unsafe_unfinalize()

    def _is_closed(self) -> bool:
        return self._coordinated_creator.tf_sess is None

    def _tf_sess(self):
        return self._coordinated_creator.tf_sess


class MonitoredSession(_MonitoredSession):
    """A session that handles initialisation, recovery and hooks.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     gs = nd.train.get_or_create_global_step()
    ...     inc = gs.assign_add(1)
    ...     with nd.train.MonitoredSession(
    ...             hooks=[nd.train.StopAtStepHook(last_step=3)]) as sess:
    ...         while not sess.should_stop():
    ...             step = sess.run(inc)
    >>> int(step)
    3
    """

    def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs=120,
                 max_recovery_attempts=DEFAULT_MAX_RECOVERY_ATTEMPTS):
        super().__init__(session_creator, hooks, should_recover=True,
                         stop_grace_period_secs=stop_grace_period_secs,
                         max_recovery_attempts=max_recovery_attempts)


class SingularMonitoredSession(_MonitoredSession):
    """A chief's monitored session without recovery; ``raw_session()`` gives
    the underlying session."""

    def __init__(self, hooks=None, scaffold=None, master="", config=None,
                 checkpoint_dir=None, stop_grace_period_secs=120,
                 checkpoint_filename_with_path=None):
        session_creator = ChiefSessionCreator(
            scaffold=scaffold, master=master, config=config,
            checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path)
        super().__init__(session_creator, hooks, should_recover=False,
                         stop_grace_period_secs=stop_grace_period_secs)

    def raw_session(self):
        return self._tf_sess()


# -- session wrappers ---------------------------------------------------------------------
class _WrappedSession:
    """Wraps a session (or another wrapper); ``close`` never raises preemption
    errors."""

    def __init__(self, sess):
        self._sess = sess
        self._wrapped_is_stoppable = isinstance(self._sess, _WrappedSession)

    @property
    def graph(self):
        return self._sess.graph

    @property
    def sess_str(self):
        return self._sess.sess_str

    def should_stop(self) -> bool:
        if self._check_stop():
            return True
        if self._sess:
            return self._wrapped_is_stoppable and self._sess.should_stop()
        return True

    def _check_stop(self) -> bool:
        return False

    def close(self):
        if self._sess:
            try:
                self._sess.close()
            except _PREEMPTION_ERRORS as e:
                _log.warning("An error occurred when attempting to close the session. "
                             "This may be due to a preemption in a connected worker "
                             "or parameter server. Error: %s", e)
            finally:
                self._sess = None

    def run(self, *args, **kwargs):
        return self._sess.run(*args, **kwargs)

    def run_step_fn(self, step_fn, raw_session, run_with_hooks):
        run_with_hooks = run_with_hooks or self.run
        return step_fn(_MonitoredSession.StepContext(raw_session, run_with_hooks))


class _RecoverableSession(_WrappedSession):
    """Re-creates the session after ``AbortedError``/``UnavailableError``, with
    exponential backoff and at most ``max_recovery_attempts`` failures in a row."""

    def __init__(self, sess_creator, max_recovery_attempts=DEFAULT_MAX_RECOVERY_ATTEMPTS):
        self._sess_creator = sess_creator
        self._max_recovery_attempts = max(0, int(max_recovery_attempts))
        self._failures = 0
        self._recoveries = 0
        _WrappedSession.__init__(self, self._create_session())

    @property
    def recoveries(self) -> int:
        """How many times the session was re-created after an error."""
        return self._recoveries

    def _backoff_or_raise(self, e, where):
        """Counts a failure; sleeps before the next try, or re-raises ``e`` once
        the attempts are used up."""
        self._failures += 1
        if self._failures > self._max_recovery_attempts:
            _log.error("Giving up after %d attempts to recover from preemption "
                       "errors; the last one (%s): %s", self._failures - 1, where, e)
            raise e
        delay = min(_MAX_BACKOFF_SECS,
                    _INITIAL_BACKOFF_SECS * 2 ** (self._failures - 1))
        _log.warning("%s %s: %s. This may be due to a preemption (a restarted "
                     "worker or parameter server). Creating a new session in %.1f s "
                     "(attempt %d of %d).", type(e).__name__, where,
                     str(e).splitlines()[0] if str(e) else "", delay, self._failures,
                     self._max_recovery_attempts)
        # A deliberate delay: a preempted task needs time to come back (as TF).
        time.sleep(delay)

    def _create_session(self):
        while True:
            try:
                sess = self._sess_creator.create_session()
            except _PREEMPTION_ERRORS as e:
                self._backoff_or_raise(e, "while a session was being created")
                continue
            if self._failures:
                self._recoveries += 1
                _log.info("Recovered: created a new session after %d failed "
                          "attempt(s).", self._failures)
            return sess

    def _recover(self, e, where):
        self.close()
        self._sess = None
        self._backoff_or_raise(e, where)

    def _check_stop(self) -> bool:
        try:
            if self._sess:
                return self._sess._check_stop()
            return True
        except _PREEMPTION_ERRORS as e:
            self._recover(e, "while checking whether to stop")
            self._sess = self._create_session()
            # A new session was just created: the computation goes on.
            return False
        except Exception:  # noqa: BLE001 - should_stop() returns True instead
            return True

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        while True:
            try:
                if not self._sess:
                    self._sess = self._create_session()
                result = self._sess.run(fetches, feed_dict=feed_dict, options=options,
                                        run_metadata=run_metadata)
                self._failures = 0
                return result
            except _PREEMPTION_ERRORS as e:
                self._recover(e, "during run")

    def run_step_fn(self, step_fn, raw_session, run_with_hooks):
        while True:
            try:
                if not self._sess:
                    self._sess = self._create_session()
                run_with_hooks = self._sess.run
                result = self._sess.run_step_fn(step_fn, self._sess_creator.tf_sess,
                                                run_with_hooks)
                self._failures = 0
                return result
            except _PREEMPTION_ERRORS as e:
                self._recover(e, "during run_step_fn")


class _CoordinatedSession(_WrappedSession):
    """Reports errors of the coordinator's threads through ``run`` and
    ``should_stop``; ``close`` stops the threads, then closes the session."""

    def __init__(self, sess, coord, stop_grace_period_secs=120):
        _WrappedSession.__init__(self, sess)
        self._coord = coord
        self._stop_grace_period_secs = stop_grace_period_secs

    def _check_stop(self) -> bool:
        # An exception a thread reported surfaces here.
        self._coord.raise_requested_exception()
        return self._coord.should_stop()

    def close(self):
        self._coord.request_stop()
        try:
            threads = list(self._coord._registered_threads)
            grace = self._stop_grace_period_secs
            wait_until = time.monotonic() + min(_THREAD_STOP_WAIT_SECS, max(0, grace))
            for t in threads:
                if t.is_alive() and t is not threading.current_thread():
                    t.join(max(0.0, wait_until - time.monotonic()))
            if any(t.is_alive() for t in threads):
                # Threads blocked in a step: closing the session cancels it.
                self._quiet_close()
            self._coord.join(stop_grace_period_secs=grace, ignore_live_threads=True)
        finally:
            self._quiet_close()

    def _quiet_close(self):
        try:
            _WrappedSession.close(self)
        except Exception:  # noqa: BLE001 - as TF: join() reports the useful errors
            pass

    def run(self, *args, **kwargs):
        try:
            return self._sess.run(*args, **kwargs)
        except _PREEMPTION_ERRORS:
            raise
        except Exception:
            # A preemption error a thread reported is the root cause: raise it.
            try:
                self._coord.raise_requested_exception()
            except _PREEMPTION_ERRORS:
                raise
            except Exception:  # noqa: BLE001 - keep the original error
                pass
            raise


class _HookedSession(_WrappedSession):
    """Calls the hooks around each ``run``; a hook's ``request_stop`` makes
    ``should_stop`` True."""

    def __init__(self, sess, hooks):
        _WrappedSession.__init__(self, sess)
        self._hooks = hooks
        self._should_stop = False

    def _check_stop(self) -> bool:
        return self._should_stop

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        if self.should_stop():
            raise RuntimeError("Run called even after should_stop requested.")
        actual_fetches = {"caller": fetches}
        run_context = _hooks.SessionRunContext(
            original_args=_hooks.SessionRunArgs(fetches, feed_dict), session=self._sess)
        options = options or config_pb2.RunOptions()
        feed_dict = self._call_hook_before_run(run_context, actual_fetches, feed_dict,
                                               options)
        run_metadata = run_metadata or config_pb2.RunMetadata()
        outputs = _WrappedSession.run(self, fetches=actual_fetches, feed_dict=feed_dict,
                                      options=options, run_metadata=run_metadata)
        for hook in self._hooks:
            hook.after_run(run_context, _hooks.SessionRunValues(
                results=outputs[hook] if hook in outputs else None, options=options,
                run_metadata=run_metadata))
        self._should_stop = self._should_stop or run_context.stop_requested
        return outputs["caller"]

    def _call_hook_before_run(self, run_context, fetch_dict, user_feed_dict, options):
        hook_feeds = {}
        for hook in self._hooks:
            request = hook.before_run(run_context)
            if request is not None:
                if request.fetches is not None:
                    fetch_dict[hook] = request.fetches
                if request.feed_dict:
                    self._raise_if_feeds_intersects(hook_feeds, request.feed_dict,
                                                    "Same tensor is fed by two hooks.")
                    hook_feeds.update(request.feed_dict)
                if request.options:
                    self._merge_run_options(options, request.options)
        if not hook_feeds:
            return user_feed_dict
        if not user_feed_dict:
            return hook_feeds
        self._raise_if_feeds_intersects(
            user_feed_dict, hook_feeds,
            "Same tensor is fed by a SessionRunHook and user.")
        hook_feeds.update(user_feed_dict)
        return hook_feeds

    @staticmethod
    def _raise_if_feeds_intersects(feeds1, feeds2, message):
        intersection = set(feeds1.keys()) & set(feeds2.keys())
        if intersection:
            raise RuntimeError(message + " Conflict(s): " + str(list(intersection)))

    @staticmethod
    def _merge_run_options(options, incoming_options):
        """Numbers take the larger value, booleans are OR-ed (as TF)."""
        options.trace_level = max(options.trace_level, incoming_options.trace_level)
        options.timeout_in_ms = max(options.timeout_in_ms,
                                    incoming_options.timeout_in_ms)
        options.output_partition_graphs = (options.output_partition_graphs or
                                           incoming_options.output_partition_graphs)


__all__ = [
    "USE_DEFAULT",
    "ChiefSessionCreator",
    "MonitoredSession",
    "MonitoredTrainingSession",
    "Scaffold",
    "SessionCreator",
    "SingularMonitoredSession",
    "WorkerSessionCreator",
]
