"""``nd.feature_column``: TF 1.15's feature columns (``tf.feature_column``),
the way canned estimators and wide-and-deep programs describe their inputs.

A column says how one raw feature (a dense ``Tensor`` or a ``SparseTensor``
from ``parse_example``) becomes model input: numbers (``numeric_column``,
``bucketized_column``), ids (``categorical_column_with_*``,
``crossed_column``, ``weighted_categorical_column``) and dense vectors of ids
(``embedding_column``, ``shared_embedding_columns``, ``indicator_column``).
``input_layer`` and ``linear_model`` build the network's input from them
(``sequence_*`` columns and ``sequence_input_layer``, from TF's contrib, give
an RNN's ``[batch, time, size]`` input),
with TensorFlow's variable names, so a TF 1.15 checkpoint restores. Hash
and cross ids are TensorFlow's (Farmhash Fingerprint64).

>>> import nbdist as nd
>>> fc = nd.feature_column
>>> color = fc.categorical_column_with_vocabulary_list("color", ["R", "G", "B"])
>>> with nd.Graph().as_default():
...     x = fc.input_layer({"color": [["G"], ["B"]], "size": [[1.5], [2.5]]},
...                        [fc.indicator_column(color), fc.numeric_column("size")])
...     with nd.Session() as s:
...         s.run(nd.tables_initializer())
...         s.run(x).tolist()
[[0.0, 1.0, 0.0, 1.5], [0.0, 0.0, 1.0, 2.5]]
"""

from __future__ import annotations

from nbdist.feature_column.base import (_CategoricalColumn, _DenseColumn,
                                        _FeatureColumn, _LazyBuilder)
from nbdist.feature_column.categorical_columns import (
    categorical_column_with_hash_bucket, categorical_column_with_identity,
    categorical_column_with_vocabulary_file,
    categorical_column_with_vocabulary_list, crossed_column,
    weighted_categorical_column)
from nbdist.feature_column.dense_columns import (bucketized_column, embedding_column,
                                                 indicator_column, numeric_column,
                                                 shared_embedding_columns)
from nbdist.feature_column.layers import (input_layer, linear_model,
                                          make_parse_example_spec)
from nbdist.feature_column.sequence_columns import (
    sequence_categorical_column_with_hash_bucket,
    sequence_categorical_column_with_identity,
    sequence_categorical_column_with_vocabulary_file,
    sequence_categorical_column_with_vocabulary_list, sequence_input_layer,
    sequence_numeric_column)

__all__ = [
    "bucketized_column",
    "categorical_column_with_hash_bucket",
    "categorical_column_with_identity",
    "categorical_column_with_vocabulary_file",
    "categorical_column_with_vocabulary_list",
    "crossed_column",
    "embedding_column",
    "indicator_column",
    "input_layer",
    "linear_model",
    "make_parse_example_spec",
    "numeric_column",
    "sequence_categorical_column_with_hash_bucket",
    "sequence_categorical_column_with_identity",
    "sequence_categorical_column_with_vocabulary_file",
    "sequence_categorical_column_with_vocabulary_list",
    "sequence_input_layer",
    "sequence_numeric_column",
    "shared_embedding_columns",
    "weighted_categorical_column",
]
