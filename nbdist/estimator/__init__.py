"""``nd.estimator``: TF 1.15's ``tf.estimator`` on nbdist: ``Estimator`` with a
``model_fn`` returning an ``EstimatorSpec``, ``RunConfig`` read from
``TF_CONFIG``, ``train_and_evaluate`` (local, or one process per task of a
cluster), exporters, warm starts and the session-run hooks.

>>> import nbdist as nd
>>> nd.estimator.ModeKeys.TRAIN, nd.estimator.ModeKeys.PREDICT
('train', 'infer')

Canned estimators and heads (``DNNClassifier``, ``LinearRegressor`` ...) are
looked up by name in ``nbdist.estimator.canned`` and ``nbdist.estimator.head``
on first use, so those packages plug in without a line here.
"""

from __future__ import annotations

import importlib

from nbdist.estimator import export
from nbdist.estimator.model_fn import EstimatorSpec, ModeKeys

# Public name -> module holding it; loaded on first use.
_LAZY = {
    "Estimator": "nbdist.estimator.estimator",
    "RunConfig": "nbdist.estimator.run_config",
    "TrainSpec": "nbdist.estimator.training",
    "EvalSpec": "nbdist.estimator.training",
    "train_and_evaluate": "nbdist.estimator.training",
    "Exporter": "nbdist.estimator.exporter",
    "LatestExporter": "nbdist.estimator.exporter",
    "FinalExporter": "nbdist.estimator.exporter",
    "BestExporter": "nbdist.estimator.exporter",
    "WarmStartSettings": "nbdist.estimator.warm_starting_util",
    "VocabInfo": "nbdist.estimator.warm_starting_util",
    "classifier_parse_example_spec": "nbdist.estimator.parsing_utils",
    "regressor_parse_example_spec": "nbdist.estimator.parsing_utils",
    "add_metrics": "nbdist.estimator.extenders",
    # tf.estimator re-exports these hooks of tf.train.
    **{name: "nbdist.train" for name in (
        "CheckpointSaverHook", "CheckpointSaverListener", "FeedFnHook",
        "FinalOpsHook", "GlobalStepWaiterHook", "LoggingTensorHook",
        "NanLossDuringTrainingError", "NanTensorHook", "ProfilerHook",
        "SecondOrStepTimer", "SessionRunArgs", "SessionRunContext",
        "SessionRunHook", "SessionRunValues", "StepCounterHook", "StopAtStepHook",
        "SummarySaverHook")},
}
_SUBMODULES = ("experimental", "inputs")
# Packages searched, in order, for any other public name (canned estimators, heads).
_PLUG_INS = ("nbdist.estimator.canned", "nbdist.estimator.head")


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    elif not name.startswith("_"):
        value = _from_plug_ins(name)
    else:
        value = None
    if value is None:
        raise AttributeError(f"module 'nbdist.estimator' has no attribute '{name}'")
    globals()[name] = value
    return value


def _from_plug_ins(name):
    for package in _PLUG_INS:
        try:
            module = importlib.import_module(package)
        except ModuleNotFoundError as e:
            if e.name != package:
                raise
            continue
        if hasattr(module, name):
            return getattr(module, name)
    return None


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


__all__ = ["EstimatorSpec", "ModeKeys", "export", *sorted(_LAZY)]
