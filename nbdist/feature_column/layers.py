"""What turns features into a network's input, as TF 1.15's
``feature_column.py``: ``input_layer`` (dense columns side by side,
variables under ``input_layer/<column>/``), ``linear_model`` (one weight
per bucket or element, ``linear_model/<column>/weights`` and
``linear_model/bias_weights``) and ``make_parse_example_spec``.

>>> import nbdist as nd
>>> fc = nd.feature_column
>>> cols = [fc.numeric_column("x"), fc.categorical_column_with_identity("i", 3)]
>>> with nd.Graph().as_default():
...     y = fc.linear_model({"x": [[1.0], [2.0]], "i": [[0], [2]]}, cols)
...     sorted(v.op.name for v in nd.global_variables())
['linear_model/bias_weights', 'linear_model/i/weights', 'linear_model/x/weights']
"""

from __future__ import annotations

import nbdist as nd
from nbdist.feature_column.base import (_CategoricalColumn, _DenseColumn,
                                        _FeatureColumn, _LazyBuilder, sparse_to_rows)


def _normalize_feature_columns(feature_columns):
    if isinstance(feature_columns, _FeatureColumn):
        feature_columns = [feature_columns]
    if isinstance(feature_columns, dict):
        raise ValueError("Expected feature_columns to be iterable, found dict.")
    try:
        feature_columns = list(feature_columns)
    except TypeError:
        raise ValueError(f"Expected feature_columns to be iterable, found "
                         f"{feature_columns}.") from None
    if not feature_columns:
        raise ValueError("feature_columns must not be empty.")
    by_name = {}
    for column in feature_columns:
        if not isinstance(column, _FeatureColumn):
            raise ValueError(f"Items of feature_columns must be a _FeatureColumn. "
                             f"Given (type {type(column)}): {column}.")
        if column.name in by_name:
            raise ValueError(f"Duplicate feature column name found for columns: "
                             f"{by_name[column.name]} and {column}. This usually "
                             f"means that these columns refer to same base feature. "
                             f"Either one must be discarded or a duplicated but "
                             f"renamed item must be inserted in features dict.")
        by_name[column.name] = column
    return sorted(feature_columns, key=lambda c: c.name)


def _with_model_collections(weight_collections):
    collections = list(weight_collections or [])
    for key in (nd.GraphKeys.GLOBAL_VARIABLES, nd.GraphKeys.MODEL_VARIABLES):
        if key not in collections:
            collections.append(key)
    return collections


def _flat_rows(tensor, num_elements):
    return nd.reshape(tensor, nd.stack([nd.shape(tensor)[0], num_elements]))


def _check_static_batch(tensors, columns):
    batch, first = None, None
    for tensor, column in zip(tensors, columns):
        size = tensor.shape[0] if tensor.shape.rank else None
        size = getattr(size, "value", size)
        if size is None:
            continue
        if batch is None:
            batch, first = size, column
        elif size != batch:
            raise ValueError(f"Batch size (first dimension) of each feature must be "
                             f"same. Batch size of columns ({first.name}, "
                             f"{column.name}): ({batch}, {size})")


def input_layer(features, feature_columns, weight_collections=None, trainable=True,
                cols_to_vars=None, cols_to_output_tensors=None):
    """The dense tensor ``[batch, sum of the columns' sizes]`` of
    ``feature_columns`` (dense columns, in order of their names) applied to
    ``features`` (a dict of ``Tensor`` / ``SparseTensor`` by key).

    >>> import nbdist as nd
    >>> fc = nd.feature_column
    >>> with nd.Graph().as_default():
    ...     x = fc.input_layer({"a": [[1.0, 2.0]], "b": [[3.0]]},
    ...                        [fc.numeric_column("b"), fc.numeric_column("a", 2)])
    ...     with nd.Session() as s:
    ...         s.run(x).tolist()
    [[1.0, 2.0, 3.0]]
    """
    columns = _normalize_feature_columns(feature_columns)
    for column in columns:
        if not isinstance(column, _DenseColumn):
            raise ValueError(f"Items of feature_columns must be a _DenseColumn. You "
                             f"can wrap a categorical column with an embedding_column "
                             f"or indicator_column. Given: {column}")
    collections = _with_model_collections(weight_collections)
    with nd.variable_scope(None, default_name="input_layer",
                           values=list(features.values())):
        builder = _LazyBuilder(features)
        outputs = []
        for column in columns:
            with nd.variable_scope(None, default_name=column._var_scope_name):
                tensor = column._get_dense_tensor(
                    builder, weight_collections=collections, trainable=trainable)
                output = _flat_rows(tensor, column._variable_shape.num_elements())
                outputs.append(output)
                if cols_to_vars is not None:
                    cols_to_vars[column] = nd.get_collection(
                        nd.GraphKeys.GLOBAL_VARIABLES,
                        scope=nd.get_variable_scope().name)
                if cols_to_output_tensors is not None:
                    cols_to_output_tensors[column] = output
        _check_static_batch(outputs, columns)
        return nd.concat(outputs, 1)


def _categorical_weighted_sum(column, builder, units, sparse_combiner,
                              collections, trainable):
    pair = column._get_sparse_tensors(builder, weight_collections=collections,
                                      trainable=trainable)
    ids = sparse_to_rows(pair.id_tensor)
    weights = None if pair.weight_tensor is None else sparse_to_rows(
        pair.weight_tensor)
    var = nd.get_variable("weights", shape=(column._num_buckets, units),
                          initializer=nd.zeros_initializer(), trainable=trainable,
                          collections=collections)
    total = nd.nn.safe_embedding_lookup_sparse(var, ids, sparse_weights=weights,
                                               combiner=sparse_combiner,
                                               name="weighted_sum")
    return total, var


def _dense_weighted_sum(column, builder, units, collections, trainable):
    tensor = column._get_dense_tensor(builder, weight_collections=collections,
                                      trainable=trainable)
    n = column._variable_shape.num_elements()
    var = nd.get_variable("weights", shape=(n, units),
                          initializer=nd.zeros_initializer(), trainable=trainable,
                          collections=collections)
    return nd.matmul(_flat_rows(tensor, n), var, name="weighted_sum"), var


def linear_model(features, feature_columns, units=1, sparse_combiner="sum",
                 weight_collections=None, trainable=True, cols_to_vars=None):
    """``sum_c weights_c . column_c(features) + bias_weights``: a categorical
    column adds the rows of its ``weights`` its ids pick (combined by
    ``sparse_combiner``: "sum", "mean" or "sqrtn"), a dense one its values
    times ``weights``. All weights start at zero. ``cols_to_vars`` (a dict)
    receives each column's variables (a partitioned one's shards) and
    ``"bias"``.
    """
    if sparse_combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError(f"sparse_combiner must be one of 'mean', 'sqrtn' or 'sum', "
                         f"got {sparse_combiner}")
    columns = _normalize_feature_columns(feature_columns)
    for column in columns:
        if not isinstance(column, (_DenseColumn, _CategoricalColumn)):
            raise ValueError(f"Items of feature_columns must be either a _DenseColumn "
                             f"or _CategoricalColumn. Given: {column}")
    collections = _with_model_collections(weight_collections)
    with nd.variable_scope(None, default_name="linear_model",
                           values=list(features.values())):
        builder = _LazyBuilder(features)
        sums, outputs_vars = [], {}
        for column in columns:
            with nd.variable_scope(None, default_name=column._var_scope_name):
                # A bucketized column is both: TF weighs its buckets as ids.
                if isinstance(column, _CategoricalColumn):
                    total, var = _categorical_weighted_sum(
                        column, builder, units, sparse_combiner, collections,
                        trainable)
                else:
                    total, var = _dense_weighted_sum(column, builder, units,
                                                     collections, trainable)
                sums.append(total)
                outputs_vars[column] = _parts(var)
        _check_static_batch(sums, columns)
        no_bias = nd.add_n(sums, name="weighted_sum_no_bias")
        bias = nd.get_variable("bias_weights", shape=[units],
                               initializer=nd.zeros_initializer(), trainable=trainable,
                               collections=collections)
        out = nd.nn.bias_add(no_bias, bias, name="weighted_sum")
    if cols_to_vars is not None:
        cols_to_vars.update(outputs_vars)
        cols_to_vars["bias"] = _parts(bias)
    return out


def _parts(var):
    """A variable's shards (itself when it is not partitioned), as TF lists
    them in ``cols_to_vars``."""
    return list(var) if isinstance(var, nd.PartitionedVariable) else [var]


def make_parse_example_spec(feature_columns):
    """The ``parse_example`` features dict that all ``feature_columns`` read
    (``FixedLenFeature`` for numeric columns, ``VarLenFeature`` for
    categorical ones).

    >>> import nbdist as nd
    >>> fc = nd.feature_column
    >>> spec = fc.make_parse_example_spec([fc.numeric_column("x"),
    ...     fc.categorical_column_with_hash_bucket("w", 10)])
    >>> sorted(spec), type(spec["w"]).__name__
    (['w', 'x'], 'VarLenFeature')
    """
    result = {}
    for column in feature_columns:
        if not isinstance(column, _FeatureColumn):
            raise ValueError(f"All feature_columns must be _FeatureColumn instances. "
                             f"Given: {column}")
        for key, value in column._parse_example_spec.items():
            if key in result and value != result[key]:
                raise ValueError(f"feature_columns contain different parse_spec for "
                                 f"key {key}. Given {result[key]} and {value}")
        result.update(column._parse_example_spec)
    return result
