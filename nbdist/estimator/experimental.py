"""``nd.estimator.experimental`` (TF 1.15's ``tf.estimator.experimental``): the
early-stopping hooks, ``InMemoryEvaluatorHook``,
``make_stop_at_checkpoint_step_hook`` and ``call_logit_fn``."""

from __future__ import annotations

from nbdist.estimator.hooks import (
    InMemoryEvaluatorHook,
    make_stop_at_checkpoint_step_hook,
)
from nbdist.estimator.early_stopping import (
    make_early_stopping_hook,
    stop_if_higher_hook,
    stop_if_lower_hook,
    stop_if_no_decrease_hook,
    stop_if_no_increase_hook,
)
from nbdist.estimator.model_fn import call_logit_fn

__all__ = ["InMemoryEvaluatorHook", "call_logit_fn", "make_early_stopping_hook",
           "make_stop_at_checkpoint_step_hook", "stop_if_higher_hook",
           "stop_if_lower_hook", "stop_if_no_decrease_hook",
           "stop_if_no_increase_hook"]


def __getattr__(name):
    # The canned estimators' experimental names (dnn_logit_fn_builder ...) come
    # from their package, found by name as nd.estimator finds DNNClassifier.
    from nbdist.estimator import _from_plug_ins

    value = None if name.startswith("_") else _from_plug_ins(name)
    if value is None:
        raise AttributeError(
            f"module 'nbdist.estimator.experimental' has no attribute '{name}'")
    return value
