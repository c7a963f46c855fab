"""The Estimator's own hooks (TF's ``estimator/hooks/hooks.py``):
``InMemoryEvaluatorHook`` evaluates the model being trained every N steps in
the training process, without checkpoints; ``make_stop_at_checkpoint_step_hook``
stops a worker only once the chief's checkpoint holds the last step, so that no
worker quits while the final model is still unsaved."""

from __future__ import annotations

import os
import time

from nbdist.estimator.estimator import _check_hooks_type, _global_step_in_checkpoint
from nbdist.framework import ops
from nbdist.framework.constant_op import placeholder
from nbdist.framework.ops import GraphKeys
from nbdist.ops.control_flow_ops import group
from nbdist.ops.state_ops import assign
from nbdist.train.hooks import (
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunHook,
    StopAtStepHook,
)
from nbdist.train.scaffold import Scaffold
from nbdist.train.training_util import get_global_step

__all__ = ["InMemoryEvaluatorHook", "make_stop_at_checkpoint_step_hook"]


class InMemoryEvaluatorHook(SessionRunHook):
    """Evaluates ``estimator``'s model on ``input_fn`` every ``every_n_iter``
    training steps and at the end, with the training session's current variable
    values (copied by name into an evaluation graph); the metrics go to the
    eval directory (``eval`` or ``eval_<name>``) as ``evaluate`` writes them.
    One process only (no ps, one worker).

    >>> import nbdist as nd
    >>> est = nd.estimator.Estimator(lambda features: None, "/tmp/in_memory_doc")
    >>> nd.estimator.experimental.InMemoryEvaluatorHook(est, None, every_n_iter=0)
    Traceback (most recent call last):
    ...
    ValueError: invalid every_n_iter=0.
    """

    def __init__(self, estimator, input_fn, steps=None, hooks=None, name=None,
                 every_n_iter=100):
        if every_n_iter is None or every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        config = estimator.config
        if config.num_ps_replicas > 0 or config.num_worker_replicas > 1:
            raise ValueError(
                "InMemoryEvaluator supports only single machine (aka Local) setting.")
        self._estimator = estimator
        self._input_fn = input_fn
        self._eval_dir = os.path.join(estimator.model_dir,
                                      "eval_" + name if name else "eval")
        self._hooks = (_check_hooks_type(hooks) +
                       estimator._convert_eval_steps_to_hooks(steps))
        self._every_n_iter = every_n_iter

    def begin(self):
        self._timer = SecondOrStepTimer(every_steps=self._every_n_iter)
        self._iter_count = 0
        self._graph = ops.Graph()
        with self._graph.as_default():
            (self._scaffold, self._update_op, self._eval_dict,
             self._all_hooks) = self._estimator._evaluate_build_graph(
                self._input_fn, self._hooks, checkpoint_path=None)
            if self._scaffold.saver is not None:
                raise ValueError("InMemoryEvaluator does not support custom saver")
            if self._scaffold.init_fn is not None:
                raise ValueError("InMemoryEvaluator does not support custom init_fn")
            self._eval_vars = {v.name: v for v in
                               ops.get_collection(GraphKeys.GLOBAL_VARIABLES)}
            self._placeholders = {name: placeholder(v.dtype.base_dtype)
                                  for name, v in self._eval_vars.items()}

    def after_create_session(self, session, coord):
        del coord
        train_vars = {v.name: v for v in ops.get_collection(GraphKeys.GLOBAL_VARIABLES)}
        names = sorted(set(self._placeholders) & set(train_vars))
        self._train_vars = {name: train_vars[name] for name in names}
        with self._graph.as_default():
            self._feed_op = group(*[assign(self._eval_vars[n], self._placeholders[n])
                                    for n in names])
        self._evaluate(session)

    def _evaluate(self, train_session):
        values = train_session.run(self._train_vars)
        feed = {self._placeholders[n]: value for n, value in values.items()}

        def feed_variables(scaffold, session):
            del scaffold
            session.run(self._feed_op, feed_dict=feed)

        scaffold = Scaffold(init_fn=feed_variables, copy_from_scaffold=self._scaffold)
        with self._graph.as_default():
            self._estimator._evaluate_run(None, scaffold, self._update_op,
                                          self._eval_dict, self._all_hooks,
                                          self._eval_dir)
        self._timer.update_last_triggered_step(self._iter_count)

    def after_run(self, run_context, run_values):
        del run_values
        self._iter_count += 1
        if self._timer.should_trigger_for_step(self._iter_count):
            self._evaluate(run_context.session)

    def end(self, session):
        self._evaluate(session)


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
