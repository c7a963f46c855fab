"""The canned estimators' default optimizers are TF 1.15's: ``DNNRegressor``
Adagrad(0.05), ``LinearRegressor`` FTRL(min(0.2, 1/sqrt(columns))), and
``DNNLinearCombinedRegressor`` its own, smaller rates: Adagrad(0.001) for the
DNN part, FTRL(min(0.005, 1/sqrt(columns))) for the linear part (the values
of tensorflow/estimator's ``dnn.py``, ``linear.py`` and
``dnn_linear_combined.py``).

Oracle: one step from a zero bias, on labels so large that the gradient ``g``
dwarfs both optimizers' initial accumulator (0.1): Adagrad moves the bias by
``lr * g / sqrt(0.1 + g**2)`` and FTRL (no l1, l2) to ``-lr * g / sqrt(0.1 +
g**2)``, both ``lr`` to within 1e-6 of it, against the sign of ``g``.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

fc = nd.feature_column
X = np.full((4, 1), 0.1, np.float32)
Y = np.full((4, 1), 1e4, np.float32)  # the SUM loss's gradient on a bias: -8e4
COLS = [fc.numeric_column("x")]
DNN_BIAS = "dnn/logits/bias"
LINEAR_BIAS = "linear/linear_model/bias_weights"


def input_fn():
    return nd.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(4)


@pytest.mark.parametrize("make, expected", [
    (lambda d, c: nd.estimator.DNNRegressor([2], COLS, model_dir=d, config=c),
     {DNN_BIAS: 0.05}),
    (lambda d, c: nd.estimator.LinearRegressor(COLS, model_dir=d, config=c),
     {LINEAR_BIAS: 0.2}),
    (lambda d, c: nd.estimator.DNNLinearCombinedRegressor(
        model_dir=d, config=c, linear_feature_columns=COLS,
        dnn_feature_columns=COLS, dnn_hidden_units=[2]),
     {DNN_BIAS: 0.001, LINEAR_BIAS: 0.005}),
], ids=["dnn", "linear", "dnn_linear_combined"])
def test_one_step_moves_the_bias_by_tfs_default_rate(tmp_path, make, expected):
    est = make(str(tmp_path), nd.estimator.RunConfig(tf_random_seed=1))
    est.train(input_fn, steps=1)
    for name, rate in expected.items():
        assert est.get_variable_value(name) == pytest.approx([rate], rel=1e-5), name
