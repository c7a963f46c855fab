"""``add_metrics`` (TF's ``estimator/extenders.py``): an ``Estimator`` whose
evaluations also report the metrics of a ``metric_fn``."""

from __future__ import annotations

from nbdist.estimator.estimator import Estimator
from nbdist.estimator.model_fn import ModeKeys, fn_args

__all__ = ["add_metrics"]

_VALID_METRIC_FN_ARGS = {"features", "labels", "predictions", "config"}


def add_metrics(estimator, metric_fn):
    """A new ``Estimator`` (same ``model_dir`` and config) whose ``EVAL`` spec
    adds ``metric_fn(features, labels, predictions, config)``'s metric dict (any
    subset of those arguments), replacing metrics of the same name.

    >>> import nbdist as nd
    >>> est = nd.estimator.Estimator(lambda features, labels, mode: None,
    ...                              model_dir="/tmp/add_metrics_doc")
    >>> nd.estimator.add_metrics(est, lambda predictions, weights: {})
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: metric_fn (...) has following not expected args: ['weights']
    """
    unexpected = sorted(set(fn_args(metric_fn)) - _VALID_METRIC_FN_ARGS)
    if unexpected:
        raise ValueError(f"metric_fn ({metric_fn}) has following not expected args: "
                         f"{unexpected}")

    def new_model_fn(features, labels, mode, config):
        spec = estimator.model_fn(features, labels, mode, config)
        if mode != ModeKeys.EVAL:
            return spec
        available = {"features": features, "labels": labels,
                     "predictions": spec.predictions, "config": config}
        args = fn_args(metric_fn)
        new_metrics = metric_fn(**{k: v for k, v in available.items() if k in args})
        return spec._replace(eval_metric_ops={**spec.eval_metric_ops, **new_metrics})

    return Estimator(new_model_fn, model_dir=estimator.model_dir,
                     config=estimator.config,
                     warm_start_from=estimator._warm_start_settings)
