"""``classifier_parse_example_spec``/``regressor_parse_example_spec`` (TF 1.15's
``parsing_utils_test.py``): the feature columns' spec plus the label as a
``FixedLenFeature`` of ``[1]`` (int64 for a classifier) or
``[label_dimension]`` (float32 for a regressor), and the weight column's
feature; a label or weight that is also a feature is refused. Needs
``nd.feature_column`` (the feature-column branch)."""

from __future__ import annotations

import pytest

import nbdist as nd

fc = pytest.importorskip("nbdist.feature_column")


def test_classifier_spec_adds_label_and_weight():
    spec = nd.estimator.classifier_parse_example_spec(
        [fc.numeric_column("age", shape=[2])], label_key="y", weight_column="w")
    assert spec == {
        "age": nd.FixedLenFeature((2,), nd.float32),
        "y": nd.FixedLenFeature((1,), nd.int64),
        "w": nd.FixedLenFeature((1,), nd.float32),
    }


def test_regressor_spec_label_dimension_and_errors():
    spec = nd.estimator.regressor_parse_example_spec(
        [fc.numeric_column("x")], label_key="y", label_dimension=3,
        label_default=(0.0, 0.0, 0.0))
    assert spec["y"] == nd.FixedLenFeature((3,), nd.float32, (0.0, 0.0, 0.0))
    with pytest.raises(ValueError, match="label should not be used as feature"):
        nd.estimator.regressor_parse_example_spec([fc.numeric_column("x")], "x")
    with pytest.raises(ValueError, match="weight_column should not be used as "
                                         "feature"):
        nd.estimator.classifier_parse_example_spec([fc.numeric_column("x")], "y",
                                                   weight_column="x")
    with pytest.raises(ValueError, match="weight_column should be an instance of "
                                         "tf.feature_column.numeric_column"):
        nd.estimator.classifier_parse_example_spec(
            [fc.numeric_column("x")], "y",
            weight_column=fc.categorical_column_with_identity("w", 3))
