"""The session wrappers a ``MonitoredSession`` is made of, as TF's
``_WrappedSession``, ``_RecoverableSession``, ``_CoordinatedSession`` and
``_HookedSession``: from the outside in, recovery from preemption errors,
the coordinator's threads, and the hooks around each ``run``.
"""

from __future__ import annotations

import threading
import time

from nbdist import errors
from nbdist.proto import config_pb2
from nbdist.train import hooks as _hooks
from nbdist.train import tf_logging as logging

# The errors a session is re-created after.
_PREEMPTION_ERRORS = (errors.AbortedError, errors.UnavailableError)

DEFAULT_MAX_RECOVERY_ATTEMPTS = 20
_INITIAL_BACKOFF_SECS = 0.1
_MAX_BACKOFF_SECS = 2.0
# How long closing waits for the coordinator's threads to stop on their own
# before cancelling the steps they are blocked in.
_THREAD_STOP_WAIT_SECS = 0.5


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


def error_text(e) -> str:
    """``str(e)``, or ``""`` for an error made without a message (TF code raises
    ``AbortedError(None, None, None)``, whose ``str`` fails)."""
    try:
        return str(e)
    except TypeError:
        return ""


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
                logging.warning("An error occurred when attempting to close the session. "
                             "This may be due to a preemption in a connected worker "
                             "or parameter server. Error: %s", error_text(e))
            finally:
                self._sess = None

    def run(self, *args, **kwargs):
        return self._sess.run(*args, **kwargs)

    def run_step_fn(self, step_fn, raw_session, run_with_hooks):
        run_with_hooks = run_with_hooks or self.run
        return step_fn(StepContext(raw_session, run_with_hooks))


class _RecoverableSession(_WrappedSession):
    """Re-creates the session after ``AbortedError``/``UnavailableError``, with
    exponential backoff and at most ``max_recovery_attempts`` failures in a row."""

    def __init__(self, sess_creator, max_recovery_attempts=DEFAULT_MAX_RECOVERY_ATTEMPTS):
        self._sess_creator = sess_creator
        self._max_recovery_attempts = max(0, int(max_recovery_attempts))
        self._failures = 0
        self._recoveries = 0
        self._story = None  # told of each loss (recovery_events.SessionStory)
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
            logging.error("Giving up after %d attempts to recover from preemption "
                       "errors; the last one (%s): %s", self._failures - 1, where,
                          error_text(e))
            raise e
        delay = min(_MAX_BACKOFF_SECS,
                    _INITIAL_BACKOFF_SECS * 2 ** (self._failures - 1))
        logging.warning("%s %s: %s. This may be due to a preemption (a restarted "
                     "worker or parameter server). Creating a new session in %.1f s "
                     "(attempt %d of %d).", type(e).__name__, where,
                     error_text(e).split("\n", 1)[0], delay, self._failures,
                     self._max_recovery_attempts)
        # A deliberate delay: a preempted task needs time to come back (as TF).
        time.sleep(delay)

    def _create_session(self):
        while True:
            try:
                sess = self._sess_creator.create_session()
            except _PREEMPTION_ERRORS as e:
                if self._story is not None:
                    self._story.lost(e, "while a session was being created")
                self._backoff_or_raise(e, "while a session was being created")
                continue
            if self._failures:
                self._recoveries += 1
                logging.info("Recovered: created a new session after %d failed "
                          "attempt(s).", self._failures)
            return sess

    def _recover(self, e, where):
        if self._story is not None:
            self._story.lost(e, where)
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

