"""Canned estimators and their parts, as TF 1.15's ``tf.estimator``:
``DNNClassifier``/``Regressor``/``Estimator``, ``LinearClassifier``/
``Regressor``/``Estimator``, ``DNNLinearCombinedClassifier``/``Regressor``/
``Estimator``, ``BaselineClassifier``/``Regressor``/``Estimator``; the heads
(``head``), the logit functions (``dnn.dnn_logit_fn_builder``,
``linear.linear_logit_fn_builder``) and the optimizer names
(``optimizers``). ``nd.estimator.<Name>`` finds each class here, and
``nd.estimator.experimental`` the two logit function builders.

The classes load on first use: ``nd.estimator`` looks its other names up
here, and an eager import of the estimators (which import
``nbdist.estimator.estimator``) would run while that module is loading.

>>> import nbdist as nd
>>> nd.estimator.LinearClassifier is nd.estimator.canned.LinearClassifier
True
"""

from __future__ import annotations

import importlib

_MODULES = {
    "baseline": ("BaselineClassifier", "BaselineEstimator", "BaselineRegressor"),
    "dnn": ("DNNClassifier", "DNNEstimator", "DNNRegressor", "dnn_logit_fn_builder"),
    "dnn_linear_combined": ("DNNLinearCombinedClassifier",
                            "DNNLinearCombinedEstimator",
                            "DNNLinearCombinedRegressor"),
    "boosted_trees": ("BoostedTreesClassifier", "BoostedTreesEstimator",
                      "BoostedTreesRegressor"),
    "linear": ("LinearClassifier", "LinearEstimator", "LinearRegressor",
               "linear_logit_fn_builder"),
    "saved_model_estimator": ("SavedModelEstimator",),
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = sorted(_LAZY)
