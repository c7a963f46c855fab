"""``make_stop_at_checkpoint_step_hook`` (TF's ``estimator/hooks/hooks.py``):
stop a worker only once the chief's checkpoint holds the last step, so that no
worker quits while the final model is still unsaved."""

from __future__ import annotations

import time

from nbdist.estimator.estimator import _global_step_in_checkpoint
from nbdist.train.hooks import SessionRunArgs, SessionRunHook, StopAtStepHook
from nbdist.train.training_util import get_global_step

__all__ = ["make_stop_at_checkpoint_step_hook"]


class _StopAtCheckpointStepHook(SessionRunHook):
    """Requests a stop once the latest checkpoint in ``model_dir`` is at
    ``last_step`` or later; checks the files after each step from the last one
    on, at most every ``wait_after_file_check_secs``."""

    def __init__(self, model_dir, last_step, wait_after_file_check_secs=30):
        if last_step is None:
            raise ValueError("last_step must be specified.")
        if model_dir is None:
            raise ValueError("model_dir must be specified.")
        self._model_dir = model_dir
        self._last_step = last_step
        self._wait_after_file_check_secs = wait_after_file_check_secs

    def begin(self):
        self._global_step = get_global_step()
        if self._global_step is None:
            raise RuntimeError(
                "Global step should be created to use StopAtCheckpointStepHook.")

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        if run_values.results + 1 < self._last_step:
            return
        if _global_step_in_checkpoint(self._model_dir) >= self._last_step:
            run_context.request_stop()
        else:
            # The chief writes the checkpoint; many workers reading the same
            # files each step would load the filesystem, so TF waits between.
            time.sleep(self._wait_after_file_check_secs)


def make_stop_at_checkpoint_step_hook(estimator, last_step,
                                      wait_after_file_check_secs=30):
    """The chief's ``StopAtStepHook(last_step=...)``; for other workers, a hook
    that stops once the chief's checkpoint has reached ``last_step``.

    >>> import nbdist as nd
    >>> est = nd.estimator.Estimator(lambda features: None, "/tmp/stop_doc")
    >>> hook = nd.estimator.experimental.make_stop_at_checkpoint_step_hook(est, 10)
    >>> type(hook).__name__
    'StopAtStepHook'
    """
    if estimator.config.is_chief:
        return StopAtStepHook(last_step=last_step)
    return _StopAtCheckpointStepHook(estimator.model_dir, last_step,
                                     wait_after_file_check_secs)
