"""``SessionManager``: creates sessions whose model is initialised, restored or
made ready by another task, as TF's ``session_manager.py``.

The chief calls ``prepare_session`` (restore the latest checkpoint, else run
``init_op``/``init_fn``; then ``local_init_op``; then check ``ready_op``).
Other workers call ``wait_for_session``, which retries until the model is
ready. Unlike TF, which sleeps ``recovery_wait_secs`` (30 s) between checks,
the interval starts at 0.1 s and doubles up to ``recovery_wait_secs``, so a
worker started just before its chief does not wait half a minute; and the
``DeadlineExceededError`` raised after ``max_wait_secs`` names what was not
ready.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from nbdist import errors

_log = logging.getLogger("nbdist")

_FIRST_WAIT_SECS = 0.1


def _session(target, graph, config):
    from nbdist.runtime.session import Session

    return Session(target, graph=graph, config=config)


def _safe_close(sess):
    try:
        sess.close()
    except Exception:  # noqa: BLE001 - closing is best effort, as TF
        pass


def _op_name(op):
    return "None" if op is None else getattr(op, "name", str(op))


class SessionManager:
    """Creates sessions that are ready to run the model."""

    def __init__(self, local_init_op=None, ready_op=None, ready_for_local_init_op=None,
                 graph=None, recovery_wait_secs=30, local_init_run_options=None,
                 local_init_feed_dict=None):
        if graph is None:
            from nbdist.framework.ops import get_default_graph

            graph = get_default_graph()
        self._local_init_op = local_init_op
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._graph = graph
        self._recovery_wait_secs = recovery_wait_secs
        self._target = None
        self._local_init_run_options = local_init_run_options
        self._local_init_feed_dict = local_init_feed_dict
        if ready_for_local_init_op is not None and local_init_op is None:
            raise ValueError("If you pass a ready_for_local_init_op you must also pass "
                             f"a local_init_op , ready_for_local_init_op "
                             f"[{ready_for_local_init_op}]")

    # -- checkpoints -------------------------------------------------------------------
    def _restore_checkpoint(self, master, saver=None, checkpoint_dir=None,
                            checkpoint_filename_with_path=None,
                            wait_for_checkpoint=False, max_wait_secs=7200,
                            config=None):
        """A new session, and whether a checkpoint was restored into it."""
        if checkpoint_dir and checkpoint_filename_with_path:
            raise ValueError("Can not provide both checkpoint_dir and "
                             "checkpoint_filename_with_path.")
        self._target = master
        sess = _session(self._target, self._graph, config)
        try:
            if not saver or not (checkpoint_dir or checkpoint_filename_with_path):
                return sess, False
            if checkpoint_filename_with_path:
                _log.info("Restoring parameters from %s", checkpoint_filename_with_path)
                saver.restore(sess, checkpoint_filename_with_path)
                return sess, True
            from nbdist.train.saver import get_checkpoint_state

            wait_time = 0.0
            ckpt = get_checkpoint_state(checkpoint_dir)
            while not ckpt or not ckpt.model_checkpoint_path:
                if wait_for_checkpoint and wait_time < max_wait_secs:
                    _log.info("Waiting for checkpoint to be available.")
                    # A file appearing has no portable event: look again later.
                    time.sleep(self._recovery_wait_secs)
                    wait_time += self._recovery_wait_secs
                    ckpt = get_checkpoint_state(checkpoint_dir)
                else:
                    return sess, False
            _log.info("Restoring parameters from %s", ckpt.model_checkpoint_path)
            saver.restore(sess, ckpt.model_checkpoint_path)
            recover = getattr(saver, "recover_last_checkpoints", None)
            if recover is not None:
                recover(list(ckpt.all_model_checkpoint_paths))
            return sess, True
        except BaseException:
            _safe_close(sess)
            raise

    def prepare_session(self, master, init_op=None, saver=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, wait_for_checkpoint=False,
                        max_wait_secs=7200, config=None, init_feed_dict=None,
                        init_fn=None):
        """A session on ``master`` with the model restored or initialised.

        Restores the latest checkpoint of ``checkpoint_dir`` (or
        ``checkpoint_filename_with_path``) with ``saver`` when there is one;
        otherwise runs ``init_op`` and calls ``init_fn(sess)``. Then runs
        ``local_init_op`` (once ``ready_for_local_init_op`` passes) and checks
        ``ready_op``.

        Raises:
          RuntimeError: if the model cannot be initialised or made ready.
        """
        sess, is_loaded_from_checkpoint = self._restore_checkpoint(
            master, saver, checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
            wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs,
            config=config)
        try:
            if not is_loaded_from_checkpoint:
                if init_op is None and not init_fn and self._local_init_op is None:
                    raise RuntimeError("Model is not initialized and no init_op or "
                                       "init_fn or local_init_op was given")
                if init_op is not None:
                    sess.run(init_op, feed_dict=init_feed_dict)
                if init_fn:
                    init_fn(sess)
            local_init_success, msg = self._try_run_local_init_op(sess)
            if not local_init_success:
                raise RuntimeError(
                    "Init operations did not make model ready for local_init.  "
                    f"Init op: {_op_name(init_op)}, init fn: {init_fn}, error: {msg}")
            is_ready, msg = self._model_ready(sess)
            if not is_ready:
                raise RuntimeError(
                    "Init operations did not make model ready.  Init op: "
                    f"{_op_name(init_op)}, init fn: {init_fn}, local_init_op: "
                    f"{_op_name(self._local_init_op)}, error: {msg}")
        except BaseException:
            _safe_close(sess)
            raise
        return sess

    def recover_session(self, master, saver=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, wait_for_checkpoint=False,
                        max_wait_secs=7200, config=None):
        """A session, and whether it could be restored from a checkpoint and
        made ready."""
        sess, is_loaded_from_checkpoint = self._restore_checkpoint(
            master, saver, checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
            wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs,
            config=config)
        local_init_success, msg = self._try_run_local_init_op(sess)
        if not is_loaded_from_checkpoint:
            return sess, False
        restoring_file = checkpoint_dir or checkpoint_filename_with_path
        if not local_init_success:
            _log.info("Restoring model from %s did not make model ready for local "
                      "init: %s", restoring_file, msg)
            return sess, False
        is_ready, msg = self._model_ready(sess)
        if not is_ready:
            _log.info("Restoring model from %s did not make model ready: %s",
                      restoring_file, msg)
            return sess, False
        _log.info("Restored model from %s", restoring_file)
        return sess, is_loaded_from_checkpoint

    # -- waiting for another task --------------------------------------------------------
    def wait_for_session(self, master, config=None, max_wait_secs=float("Inf")):
        """A session on ``master`` once another task made the model ready.

        Checks every 0.1 s at first, backing off to ``recovery_wait_secs``,
        and logs what it waits for.

        Raises:
          DeadlineExceededError: if the model is not ready after
            ``max_wait_secs``; the message says what was not ready.
        """
        self._target = master
        if max_wait_secs is None:
            max_wait_secs = float("Inf")
        deadline = time.monotonic() + max_wait_secs
        wait = min(_FIRST_WAIT_SECS, self._recovery_wait_secs)
        last_logged = None
        last_log_time = 0.0
        while True:
            sess = _session(self._target, self._graph, config)
            not_ready_msg = None
            not_ready_local_msg = None
            try:
                local_init_success, not_ready_local_msg = \
                    self._try_run_local_init_op(sess)
                if local_init_success:
                    is_ready, not_ready_msg = self._model_ready(sess)
                    if is_ready:
                        return sess
            except BaseException:
                _safe_close(sess)
                raise
            _safe_close(sess)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.DeadlineExceededError(
                    None, None, f"Session was not ready after waiting "
                    f"{max_wait_secs:g} secs. Ready_for_local_init_op:  "
                    f"{not_ready_local_msg}, ready: {not_ready_msg}")
            now = time.monotonic()
            state = (not_ready_local_msg, not_ready_msg)
            if state != last_logged or now - last_log_time >= self._recovery_wait_secs:
                _log.info("Waiting for model to be ready.  Ready_for_local_init_op:  "
                          "%s, ready: %s", not_ready_local_msg, not_ready_msg)
                last_logged, last_log_time = state, now
            # The chief's initialisation pushes nothing to us: ask again, backing off.
            time.sleep(max(0.0, min(wait, remaining)))
            wait = min(wait * 2, self._recovery_wait_secs)

    # -- readiness -----------------------------------------------------------------------
    def _ready(self, op, sess, msg):
        return _ready(op, sess, msg)

    def _model_ready(self, sess):
        return _ready(self._ready_op, sess, "Model not ready")

    def _model_ready_for_local_init(self, sess):
        return _ready(self._ready_for_local_init_op, sess,
                      "Model not ready for local init")

    def _try_run_local_init_op(self, sess):
        """Runs ``local_init_op`` when the model is ready for it.

        Returns (True, None) if it ran or there is none, else (False, why).
        """
        if self._local_init_op is not None:
            is_ready_for_local_init, msg = self._model_ready_for_local_init(sess)
            if is_ready_for_local_init:
                _log.info("Running local_init_op.")
                sess.run(self._local_init_op, feed_dict=self._local_init_feed_dict,
                         options=self._local_init_run_options)
                _log.info("Done running local_init_op.")
                return True, None
            return False, msg
        return True, None


def _ready(op, sess, msg):
    """(True, None) if ``op`` (a ready op) reports nothing uninitialised, else
    (False, "Variables not initialized: a, b")."""
    if op is None:
        return True, None
    try:
        ready_value = sess.run(op)
        if ready_value is None:
            return True, None
        ready_value = np.asarray(ready_value)
        if ready_value.dtype == np.int32 or ready_value.size == 0:
            return True, None
        names = ", ".join(v.decode("utf-8") if isinstance(v, bytes) else str(v)
                          for v in ready_value.ravel())
        return False, "Variables not initialized: " + names
    except errors.FailedPreconditionError as e:
        if "uninitialized" not in str(e):
            _log.warning("%s : error [%s]", msg, e)
            raise
        return False, str(e)


__all__ = ["SessionManager"]
