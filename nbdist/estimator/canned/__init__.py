"""Canned estimators and their parts, as TF 1.15's ``tf.estimator``:
``DNNClassifier``/``Regressor``/``Estimator``, ``LinearClassifier``/
``Regressor``/``Estimator``, ``DNNLinearCombinedClassifier``/``Regressor``/
``Estimator``, ``BaselineClassifier``/``Regressor``; the heads
(``head``), the logit functions (``dnn.dnn_logit_fn_builder``,
``linear.linear_logit_fn_builder``) and the optimizer names
(``optimizers``). ``nd.estimator.<Name>`` finds each class here.

>>> import nbdist as nd
>>> nd.estimator.LinearClassifier is nd.estimator.canned.LinearClassifier
True
"""

from __future__ import annotations

from nbdist.estimator.canned.baseline import (BaselineClassifier, BaselineEstimator,
                                              BaselineRegressor)
from nbdist.estimator.canned.dnn import DNNClassifier, DNNEstimator, DNNRegressor
from nbdist.estimator.canned.dnn_linear_combined import (
    DNNLinearCombinedClassifier, DNNLinearCombinedEstimator,
    DNNLinearCombinedRegressor)
from nbdist.estimator.canned.linear import (LinearClassifier, LinearEstimator,
                                            LinearRegressor)

__all__ = [
    "BaselineClassifier",
    "BaselineEstimator",
    "BaselineRegressor",
    "DNNClassifier",
    "DNNEstimator",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedEstimator",
    "DNNLinearCombinedRegressor",
    "DNNRegressor",
    "LinearClassifier",
    "LinearEstimator",
    "LinearRegressor",
]
