"""Early stopping (TF's ``estimator/early_stopping.py``): training hooks that
stop when the evaluations written to ``eval_dir`` say so. The chief checks the
predicate (every ``run_every_secs`` or ``run_every_steps``) and sets a
``signal_early_stopping/STOP`` variable; the other workers stop when they see it.

>>> import tempfile, nbdist as nd
>>> est = nd.estimator.Estimator(lambda features, labels, mode: None,
...                              model_dir=tempfile.mkdtemp())
>>> hook = nd.estimator.experimental.stop_if_no_decrease_hook(
...     est, "loss", max_steps_without_decrease=100)
>>> isinstance(hook, nd.estimator.SessionRunHook)
True
"""

from __future__ import annotations

import collections
import glob
import logging
import operator
import os

from nbdist.estimator.estimator import Estimator
from nbdist.framework import dtypes
from nbdist.ops.state_ops import assign
from nbdist.ops.variables import AUTO_REUSE, constant_initializer, get_variable
from nbdist.ops.variables import variable_scope
from nbdist.train.hooks import SecondOrStepTimer, SessionRunArgs, SessionRunHook
from nbdist.train.summary_iterator import summary_iterator
from nbdist.train.training_util import get_global_step

__all__ = ["make_early_stopping_hook", "read_eval_metrics", "stop_if_higher_hook",
           "stop_if_lower_hook", "stop_if_no_decrease_hook",
           "stop_if_no_increase_hook"]

_log = logging.getLogger("nbdist.estimator")


def make_early_stopping_hook(estimator, should_stop_fn, run_every_secs=60,
                             run_every_steps=None):
    """A hook that stops training once ``should_stop_fn()`` returns True (checked
    on the chief; the other workers follow through the stop variable)."""
    if not isinstance(estimator, Estimator):
        raise TypeError("`estimator` must have type `tf.estimator.Estimator`. "
                        f"Got: {type(estimator)}")
    if run_every_secs is not None and run_every_steps is not None:
        raise ValueError("Only one of `run_every_secs` and `run_every_steps` must be "
                         "set.")
    if estimator.config.is_chief:
        return _StopOnPredicateHook(should_stop_fn, run_every_secs, run_every_steps)
    return _CheckForStoppingHook()


def read_eval_metrics(eval_dir):
    """{global step: {metric: value}} of the evaluations in ``eval_dir``, by step."""
    by_step = collections.defaultdict(dict)
    for event_file in glob.glob(os.path.join(eval_dir, "events.out.tfevents.*")):
        for event in summary_iterator(event_file):
            if not event.HasField("summary"):
                continue
            metrics = {v.tag: v.simple_value for v in event.summary.value
                       if v.HasField("simple_value")}
            if metrics:
                by_step[event.step].update(metrics)
    return collections.OrderedDict(sorted(by_step.items()))


def _threshold_hook(estimator, metric_name, threshold, higher_is_better, eval_dir,
                    min_steps, run_every_secs, run_every_steps):
    eval_dir = eval_dir or estimator.eval_dir()
    better = operator.gt if higher_is_better else operator.lt

    def crossed():
        for step, metrics in read_eval_metrics(eval_dir).items():
            if step >= min_steps and better(metrics[metric_name], threshold):
                _log.info("At step %s, metric %r has value %s, past the threshold "
                          "(%s) for early stopping.", step, metric_name,
                          metrics[metric_name], threshold)
                return True
        return False

    return make_early_stopping_hook(estimator, crossed, run_every_secs,
                                    run_every_steps)


def _no_improvement_hook(estimator, metric_name, max_steps_without_improvement,
                         higher_is_better, eval_dir, min_steps, run_every_secs,
                         run_every_steps):
    eval_dir = eval_dir or estimator.eval_dir()
    better = operator.gt if higher_is_better else operator.lt

    def stalled():
        best, best_step = None, None
        for step, metrics in read_eval_metrics(eval_dir).items():
            if step < min_steps:
                continue
            if best is None or better(metrics[metric_name], best):
                best, best_step = metrics[metric_name], step
            if step - best_step >= max_steps_without_improvement:
                _log.info("No improvement in metric %r for %s steps, at least the "
                          "%s configured for early stopping.", metric_name,
                          step - best_step, max_steps_without_improvement)
                return True
        return False

    return make_early_stopping_hook(estimator, stalled, run_every_secs,
                                    run_every_steps)


def stop_if_higher_hook(estimator, metric_name, threshold, eval_dir=None,
                        min_steps=0, run_every_secs=60, run_every_steps=None):
    """Stops once an evaluation (at step >= ``min_steps``) has ``metric_name``
    above ``threshold``."""
    return _threshold_hook(estimator, metric_name, threshold, True, eval_dir,
                           min_steps, run_every_secs, run_every_steps)


def stop_if_lower_hook(estimator, metric_name, threshold, eval_dir=None,
                       min_steps=0, run_every_secs=60, run_every_steps=None):
    """Stops once an evaluation has ``metric_name`` below ``threshold``."""
    return _threshold_hook(estimator, metric_name, threshold, False, eval_dir,
                           min_steps, run_every_secs, run_every_steps)


def stop_if_no_increase_hook(estimator, metric_name, max_steps_without_increase,
                             eval_dir=None, min_steps=0, run_every_secs=60,
                             run_every_steps=None):
    """Stops once ``metric_name`` has not risen for that many global steps."""
    return _no_improvement_hook(estimator, metric_name, max_steps_without_increase,
                                True, eval_dir, min_steps, run_every_secs,
                                run_every_steps)


def stop_if_no_decrease_hook(estimator, metric_name, max_steps_without_decrease,
                             eval_dir=None, min_steps=0, run_every_secs=60,
                             run_every_steps=None):
    """Stops once ``metric_name`` has not fallen for that many global steps."""
    return _no_improvement_hook(estimator, metric_name, max_steps_without_decrease,
                                False, eval_dir, min_steps, run_every_secs,
                                run_every_steps)


def _stop_var():
    with variable_scope("signal_early_stopping", reuse=AUTO_REUSE):
        return get_variable("STOP", shape=[], dtype=dtypes.bool,
                            initializer=constant_initializer(False),
                            trainable=False)


class _StopOnPredicateHook(SessionRunHook):
    def __init__(self, should_stop_fn, run_every_secs=60, run_every_steps=None):
        if not callable(should_stop_fn):
            raise TypeError("`should_stop_fn` must be callable.")
        self._should_stop_fn = should_stop_fn
        self._timer = SecondOrStepTimer(every_secs=run_every_secs,
                                        every_steps=run_every_steps)

    def begin(self):
        self._global_step = get_global_step()
        self._stop_op = assign(_stop_var(), True)

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        step = run_values.results
        if self._timer.should_trigger_for_step(step):
            self._timer.update_last_triggered_step(step)
            if self._should_stop_fn():
                _log.info("Requesting early stopping at global step %d", step)
                run_context.session.run(self._stop_op)
                run_context.request_stop()


class _CheckForStoppingHook(SessionRunHook):
    def begin(self):
        self._stop = _stop_var()

    def before_run(self, run_context):
        return SessionRunArgs(self._stop)

    def after_run(self, run_context, run_values):
        if run_values.results:
            _log.info("Early stopping requested, suspending run.")
            run_context.request_stop()
