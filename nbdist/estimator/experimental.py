"""``nd.estimator.experimental`` (TF 1.15's ``tf.estimator.experimental``): the
early-stopping hooks and ``call_logit_fn``."""

from __future__ import annotations

from nbdist.estimator.early_stopping import (
    make_early_stopping_hook,
    stop_if_higher_hook,
    stop_if_lower_hook,
    stop_if_no_decrease_hook,
    stop_if_no_increase_hook,
)
from nbdist.estimator.model_fn import call_logit_fn

__all__ = ["call_logit_fn", "make_early_stopping_hook", "stop_if_higher_hook",
           "stop_if_lower_hook", "stop_if_no_decrease_hook",
           "stop_if_no_increase_hook"]
