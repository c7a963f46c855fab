"""The ``tf.Example`` parsing spec of a canned estimator's training data (TF's
``canned/parsing_utils.py``): the feature columns' spec plus the label (and
weight) feature. The feature columns come from ``nd.feature_column``, imported
when these functions are called."""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.ops.parsing_ops import FixedLenFeature

__all__ = ["classifier_parse_example_spec", "regressor_parse_example_spec"]


def classifier_parse_example_spec(feature_columns, label_key, label_dtype=dtypes.int64,
                                  label_default=None, weight_column=None):
    """``feature_columns``' parsing spec with ``label_key`` a ``[1]`` feature of
    ``label_dtype`` (and ``weight_column``'s feature, a name or numeric column).

    >>> import nbdist as nd
    >>> spec = nd.estimator.classifier_parse_example_spec(
    ...     [nd.feature_column.numeric_column("age")], label_key="y")
    >>> sorted(spec), spec["y"].shape, spec["y"].dtype.name
    (['age', 'y'], (1,), 'int64')
    """
    return _with_label_and_weight(
        feature_columns, label_key,
        FixedLenFeature((1,), label_dtype, label_default), weight_column)


def regressor_parse_example_spec(feature_columns, label_key, label_dtype=dtypes.float32,
                                 label_default=None, label_dimension=1,
                                 weight_column=None):
    """As ``classifier_parse_example_spec``, the label a ``[label_dimension]``
    float feature."""
    return _with_label_and_weight(
        feature_columns, label_key,
        FixedLenFeature((label_dimension,), label_dtype, label_default),
        weight_column)


def _with_label_and_weight(feature_columns, label_key, label_spec, weight_column):
    from nbdist import feature_column as fc

    parsing_spec = fc.make_parse_example_spec(feature_columns)
    if label_key in parsing_spec:
        raise ValueError("label should not be used as feature. "
                         f"label_key: {label_key}, features: {parsing_spec.keys()}")
    parsing_spec[label_key] = label_spec
    if weight_column is None:
        return parsing_spec
    if isinstance(weight_column, str):
        weight_column = fc.numeric_column(weight_column)
    # The numeric column's class, whatever module of nd.feature_column holds it.
    if not isinstance(weight_column, type(fc.numeric_column("weight"))):
        raise ValueError("weight_column should be an instance of "
                         "tf.feature_column.numeric_column. Given type: "
                         f"{type(weight_column)} value: {weight_column}")
    if weight_column.key in parsing_spec:
        raise ValueError("weight_column should not be used as feature. "
                         f"weight_column: {weight_column.key}, features: "
                         f"{parsing_spec.keys()}")
    parsing_spec.update(weight_column.parse_example_spec)
    return parsing_spec
