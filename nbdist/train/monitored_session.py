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
  (tests/train/test_ps_outage.py);
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
import os

from nbdist import errors
from nbdist.distribute.strategies import distribute_coordinator_context
from nbdist.framework.ops import GraphKeys, get_default_graph
from nbdist.train import hooks as _hooks
from nbdist.train import session_manager as sm
from nbdist.train import tf_logging as logging
from nbdist.train.coordinator import Coordinator
from nbdist.train.recovery_hook import RecoveryStoryHook, story_for
from nbdist.train.scaffold import Scaffold, _get_saver_or_default  # noqa: F401
from nbdist.train.session_wrappers import (  # noqa: F401
    _PREEMPTION_ERRORS,
    DEFAULT_MAX_RECOVERY_ATTEMPTS,
    StepContext,
    _CoordinatedSession,
    _HookedSession,
    _RecoverableSession,
    _WrappedSession,
    error_text,
)
from nbdist.train.summary_hooks import SummarySaverHook

# Value that indicates no value was provided.
USE_DEFAULT = object()


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
                local_init_feed_dict=self._scaffold.local_init_feed_dict,
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
                local_init_feed_dict=self._scaffold.local_init_feed_dict,
                ready_op=self._scaffold.ready_op,
                ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                graph=get_default_graph())
        return self._session_manager

    def create_session(self):
        self._scaffold.finalize()
        return self._get_session_manager().wait_for_session(
            self._master, config=self._config, max_wait_secs=self._max_wait_secs)


# -- MonitoredTrainingSession -----------------------------------------------------------
def _training_hooks(all_hooks, scaffold, checkpoint_dir, summary_dir,
                    save_checkpoint_secs, save_checkpoint_steps, save_summaries_steps,
                    save_summaries_secs, log_step_count_steps, save_graph_def,
                    summaries_to=None, checkpoints_to=None):
    """Appends the step-counter, summary and checkpoint hooks to ``all_hooks``;
    they write to ``summaries_to``/``checkpoints_to`` (default ``summary_dir``
    / ``checkpoint_dir``; an empty string leaves the hooks out)."""
    summary_dir = summary_dir or checkpoint_dir
    summaries_to = summary_dir if summaries_to is None else summaries_to
    checkpoints_to = checkpoint_dir if checkpoints_to is None else checkpoints_to
    if summary_dir and summaries_to:
        if log_step_count_steps and log_step_count_steps > 0:
            all_hooks.append(_hooks.StepCounterHook(output_dir=summaries_to,
                                                    every_n_steps=log_step_count_steps))
        if (save_summaries_steps and save_summaries_steps > 0) or (
                save_summaries_secs and save_summaries_secs > 0):
            all_hooks.append(SummarySaverHook(
                scaffold=scaffold, save_steps=save_summaries_steps,
                save_secs=save_summaries_secs, output_dir=summaries_to))
    if checkpoint_dir and checkpoints_to:
        if (save_checkpoint_secs and save_checkpoint_secs > 0) or (
                save_checkpoint_steps and save_checkpoint_steps > 0):
            if save_checkpoint_secs and save_checkpoint_secs > 0:
                save_checkpoint_steps = None  # TF: only the seconds are used
            all_hooks.append(_hooks.CheckpointSaverHook(
                checkpoints_to, save_steps=save_checkpoint_steps,
                save_secs=save_checkpoint_secs, scaffold=scaffold,
                save_graph_def=save_graph_def))
    return all_hooks


_COLLECTIVE_STRATEGIES = ("CollectiveAllReduceStrategy",
                          "CollectiveAllReduceStrategyV1", "MultiWorkerMirroredStrategy")


def _with_worker_context(worker_context, scaffold, checkpoint_dir, hooks,
                         chief_only_hooks, save_checkpoint_secs, save_checkpoint_steps,
                         save_summaries_steps, save_summaries_secs, config,
                         stop_grace_period_secs, log_step_count_steps, max_wait_secs,
                         summary_dir, save_graph_def, max_recovery_attempts):
    """``MonitoredTrainingSession`` inside ``run_distribute_coordinator``: the
    strategy decides who checkpoints and writes summaries (as TF)."""
    all_hooks = list(hooks or [])
    if chief_only_hooks and worker_context.is_chief:
        all_hooks.extend(chief_only_hooks)
    tmpdir = None
    strategy = getattr(worker_context, "_strategy", None)
    if type(strategy).__name__ in _COLLECTIVE_STRATEGIES:
        # Every worker must run the same save and summary ops (they may hold
        # collectives): the ones that should not write, write to a side dir.
        tmpdir = (f"tmp_{worker_context.task_type}_{worker_context.task_id}"
                  if worker_context.task_type else "tmp")
        if save_checkpoint_secs:
            logging.warning("Collective ops may deadlock with `save_checkpoints_secs`"
                            " please use `save_checkpoint_steps` instead. Clearing "
                            "`save_checkpoint_secs` and setting "
                            "`save_checkpoint_steps` to 1000 now.")
            save_checkpoint_secs, save_checkpoint_steps = None, 1000
        if save_summaries_secs:
            logging.warning("Collective ops may run out of sync with "
                            "`save_summaries_secs`, please use "
                            "`save_summaries_steps` instead.")
    summary_root = summary_dir or checkpoint_dir

    def target(root, allowed):
        if allowed:
            return root
        return os.path.join(root, tmpdir) if (root and tmpdir) else ""

    _training_hooks(all_hooks, scaffold, checkpoint_dir, summary_dir,
                    save_checkpoint_secs, save_checkpoint_steps, save_summaries_steps,
                    save_summaries_secs, log_step_count_steps, save_graph_def,
                    summaries_to=target(summary_root,
                                        worker_context.should_save_summary),
                    checkpoints_to=target(checkpoint_dir,
                                          worker_context.should_checkpoint))
    logging.info("all_hooks %r", all_hooks)
    session_creator = worker_context.session_creator(
        scaffold, config=config, checkpoint_dir=checkpoint_dir,
        max_wait_secs=max_wait_secs)
    return MonitoredSession(session_creator=session_creator, hooks=all_hooks,
                            stop_grace_period_secs=stop_grace_period_secs,
                            max_recovery_attempts=max_recovery_attempts)


def MonitoredTrainingSession(master="", is_chief=True, checkpoint_dir=None,
                             scaffold=None, hooks=None, chief_only_hooks=None,
                             save_checkpoint_secs=USE_DEFAULT,
                             save_summaries_steps=USE_DEFAULT,
                             save_summaries_secs=USE_DEFAULT, config=None,
                             stop_grace_period_secs=120, log_step_count_steps=100,
                             max_wait_secs=7200, save_checkpoint_steps=USE_DEFAULT,
                             summary_dir=None, save_graph_def=True,
                             max_recovery_attempts=DEFAULT_MAX_RECOVERY_ATTEMPTS):
    """A ``MonitoredSession`` for training, set up for a chief or a worker.

    The chief initialises or restores the model from ``checkpoint_dir`` and
    gets a ``StepCounterHook`` and a ``SummarySaverHook`` (into
    ``summary_dir``, default ``checkpoint_dir``), a ``CheckpointSaverHook``
    (every ``save_checkpoint_secs`` = 600 s by default, or every
    ``save_checkpoint_steps``; only the seconds if both are given; with
    ``save_graph_def`` it also writes ``graph.pbtxt`` and ``.meta`` files)
    plus ``chief_only_hooks``; a worker waits up to ``max_wait_secs`` for the
    model and gets only ``hooks``. Inside ``run_distribute_coordinator``'s
    ``worker_fn`` the strategy decides instead (``should_checkpoint``,
    ``should_save_summary``, ``is_chief``) and the context makes the session.
    ``max_recovery_attempts`` bounds how many times in a row the session is
    re-created after a preemption error. In a notebook, a ``StopAtStepHook``
    comes with a ``ProgressBarHook`` of the global step.
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
    worker_context = distribute_coordinator_context.get_current_worker_context()
    if worker_context:
        hooks = _hooks.add_notebook_progress(
            hooks, chief_only_hooks if worker_context.is_chief else None)
        return _with_worker_context(
            worker_context, scaffold, checkpoint_dir, hooks, chief_only_hooks,
            save_checkpoint_secs, save_checkpoint_steps, save_summaries_steps,
            save_summaries_secs, config, stop_grace_period_secs,
            log_step_count_steps, max_wait_secs, summary_dir, save_graph_def,
            max_recovery_attempts)
    hooks = _hooks.add_notebook_progress(hooks, chief_only_hooks if is_chief else None)
    if not is_chief:
        session_creator = WorkerSessionCreator(scaffold=scaffold, master=master,
                                               config=config,
                                               max_wait_secs=max_wait_secs)
        return MonitoredSession(session_creator=session_creator, hooks=hooks or [],
                                stop_grace_period_secs=stop_grace_period_secs,
                                max_recovery_attempts=max_recovery_attempts)
    all_hooks = list(chief_only_hooks or [])
    session_creator = ChiefSessionCreator(scaffold=scaffold,
                                          checkpoint_dir=checkpoint_dir,
                                          master=master, config=config)
    _training_hooks(all_hooks, scaffold, checkpoint_dir, summary_dir,
                    save_checkpoint_secs, save_checkpoint_steps, save_summaries_steps,
                    save_summaries_secs, log_step_count_steps, save_graph_def)
    all_hooks.extend(hooks or [])
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
        # Under run_distribute_coordinator a bare MonitoredSession() targets the
        # task's server (as TF), not an in-process session that knows no /job:ps.
        worker_context = distribute_coordinator_context.get_current_worker_context()
        if not session_creator and worker_context:
            session_creator = worker_context.session_creator()
        self._story = None  # the story of its recoveries (recovery events)
        if should_recover:
            self._story = story_for(session_creator, self._hooks)
            self._hooks.append(RecoveryStoryHook(self._story))
        for h in self._hooks:
            h.begin()
        self._coordinated_creator = self._CoordinatedSessionCreator(
            session_creator=session_creator or ChiefSessionCreator(),
            hooks=self._hooks, stop_grace_period_secs=stop_grace_period_secs)
        if should_recover:
            self._sess = _RecoverableSession(self._coordinated_creator,
                                             max_recovery_attempts)
            self._sess._story = self._story
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
        ``step_context.request_stop()`` raises ``StopIteration`` out of
        ``step_fn`` and of this call, which ends a ``with`` block around the
        loop (closing the session); a preemption error inside ``step_fn``
        re-creates the session and runs the whole ``step_fn`` again."""
        try:
            params = list(inspect.signature(step_fn).parameters)
        except (TypeError, ValueError):
            params = None
        if params not in (["step_context"], ["self", "step_context"]):
            raise ValueError("`step_fn` may either have one `step_context` argument, "
                             "or `self` and `step_context` arguments if it's an "
                             f"instance method. Got {params} instead.")
        if self._sess is None:
            raise RuntimeError("Attempted to use a closed MonitoredSession.")
        return self._sess.run_step_fn(step_fn, self._tf_sess(), run_with_hooks=None)

    StepContext = StepContext

    def should_stop(self) -> bool:
        return self._sess is None or self._sess.should_stop()

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
                        logging.warning("%s.end() failed, which may be due to a "
                                     "preemption of a connected worker or parameter "
                                     "server: %s", type(h).__name__, error_text(e))
        finally:
            for h in self._hooks:  # a notebook's progress bar leaves its text
                leave = getattr(h, "_leave_text", None)
                if callable(leave):
                    leave()
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

    Without a ``session_creator`` it creates a chief's session in this
    process, or, inside ``run_distribute_coordinator``'s ``worker_fn``, the
    worker context's (the task's server and session config), as TF does.

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
