"""Dense columns: features given to a network as floats, as TF 1.15 defines
them (``numeric_column``, ``bucketized_column``, ``embedding_column``,
``shared_embedding_columns``, ``indicator_column``).

An embedding column's table is ``embedding_weights`` under the column's
variable scope (``input_layer/<column>_embedding/embedding_weights``), made
with ``get_variable`` so a device function (``replica_device_setter``) puts it
on a parameter server; its gradient is an ``IndexedSlices`` of the rows the
batch used, applied sparsely there.

>>> import nbdist as nd
>>> fc = nd.feature_column
>>> age = fc.bucketized_column(fc.numeric_column("age"), [18, 65])
>>> with nd.Graph().as_default():
...     dense = fc.input_layer({"age": [[10.0], [30.0], [70.0]]}, [age])
...     with nd.Session() as s:
...         s.run(dense).tolist()
[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
"""

from __future__ import annotations

import collections
import math

import numpy as np

import nbdist as nd
from nbdist.feature_column.base import (_CategoricalColumn, _DenseColumn,
                                        as_int_tuple, sparse_to_rows)
from nbdist.feature_column.categorical_columns import _WeightedCategoricalColumn
from nbdist.feature_column.sequence_columns import (_SequenceCategoricalColumn,
                                                    sequence_embedding,
                                                    sequence_indicator)
from nbdist.framework.sparse_tensor import SparseTensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.bucketize_ops import bucketize
from nbdist.ops.parsing_ops import FixedLenFeature


class _NumericColumn(
        _DenseColumn,
        collections.namedtuple("_NumericColumn", ("key", "shape", "default_value",
                                                  "dtype", "normalizer_fn"))):
    """See ``numeric_column``."""

    @property
    def name(self):
        return self.key

    @property
    def _parse_example_spec(self):
        return {self.key: FixedLenFeature(self.shape, self.dtype, self.default_value)}

    def _transform_feature(self, inputs):
        tensor = inputs.get(self.key)
        if isinstance(tensor, SparseTensor):
            raise ValueError(f"The corresponding Tensor of numerical column must be a "
                             f"Tensor. SparseTensor is not supported. key: {self.key}")
        if self.normalizer_fn is not None:
            tensor = self.normalizer_fn(tensor)
        return nd.cast(tensor, nd.float32)

    @property
    def _variable_shape(self):
        return TensorShape(self.shape)

    def _get_dense_tensor(self, inputs, weight_collections=None, trainable=None):
        return inputs.get(self)


class _BucketizedColumn(
        _DenseColumn, _CategoricalColumn,
        collections.namedtuple("_BucketizedColumn", ("source_column", "boundaries"))):
    """See ``bucketized_column``."""

    @property
    def name(self):
        return f"{self.source_column.name}_bucketized"

    @property
    def _parse_example_spec(self):
        return self.source_column._parse_example_spec

    def _transform_feature(self, inputs):
        return bucketize(inputs.get(self.source_column), self.boundaries)

    @property
    def _variable_shape(self):
        buckets = len(self.boundaries) + 1
        return TensorShape(tuple(self.source_column.shape) + (buckets,))

    def _get_dense_tensor(self, inputs, weight_collections=None, trainable=None):
        return nd.one_hot(inputs.get(self), depth=len(self.boundaries) + 1,
                          on_value=1.0, off_value=0.0)

    @property
    def _num_buckets(self):
        return (len(self.boundaries) + 1) * self.source_column.shape[0]

    def _get_sparse_tensors(self, inputs, weight_collections=None, trainable=None):
        # Dimension d of the source takes ids [d * k, (d + 1) * k), k buckets.
        buckets = inputs.get(self)
        batch = nd.shape(buckets)[0]
        dim = self.source_column.shape[0]
        rows = nd.reshape(nd.tile(nd.expand_dims(nd.range(0, batch), 1), [1, dim]),
                          (-1,))
        cols = nd.tile(nd.range(0, dim), [batch])
        ids = nd.reshape(buckets, (-1,)) + (len(self.boundaries) + 1) * cols
        indices = nd.cast(nd.transpose(nd.stack((rows, cols))), nd.int64)
        shape = nd.cast(nd.stack([batch, dim]), nd.int64)
        return _CategoricalColumn.IdWeightPair(SparseTensor(indices, ids, shape), None)


def _embedding_lookup(column, inputs, weight_collections, trainable, weights):
    pair = column.categorical_column._get_sparse_tensors(
        inputs, weight_collections=weight_collections, trainable=trainable)
    if weights is None:
        weights = nd.get_variable(
            "embedding_weights",
            shape=(column.categorical_column._num_buckets, column.dimension),
            dtype=nd.float32, initializer=column.initializer,
            trainable=column.trainable and trainable is not False,
            collections=weight_collections)
    if column.ckpt_to_load_from is not None:
        to_restore = weights
        if isinstance(to_restore, nd.PartitionedVariable):
            to_restore = list(to_restore)
        nd.train.init_from_checkpoint(column.ckpt_to_load_from,
                                      {column.tensor_name_in_ckpt: to_restore})
    ids = sparse_to_rows(pair.id_tensor)
    sp_weights = None if pair.weight_tensor is None else sparse_to_rows(
        pair.weight_tensor)
    dense = nd.nn.safe_embedding_lookup_sparse(
        weights, ids, sparse_weights=sp_weights, combiner=column.combiner,
        name=f"{column.name}_weights", max_norm=column.max_norm)
    return dense, weights


class _EmbeddingBase(_DenseColumn):
    """An embedding of ``categorical_column``: a ``dimension``-vector."""

    @property
    def _parse_example_spec(self):
        return self.categorical_column._parse_example_spec

    def _transform_feature(self, inputs):
        return inputs.get(self.categorical_column)

    @property
    def _variable_shape(self):
        return TensorShape([self.dimension])


class _EmbeddingColumn(
        _EmbeddingBase,
        collections.namedtuple("_EmbeddingColumn", (
            "categorical_column", "dimension", "combiner", "initializer",
            "ckpt_to_load_from", "tensor_name_in_ckpt", "max_norm", "trainable"))):
    """See ``embedding_column``."""

    @property
    def name(self):
        return f"{self.categorical_column.name}_embedding"

    def _get_dense_tensor(self, inputs, weight_collections=None, trainable=None):
        _not_sequence(self, "input_layer")
        return _embedding_lookup(self, inputs, weight_collections, trainable,
                                 None)[0]

    def _get_sequence_dense_tensor(self, inputs, weight_collections=None,
                                   trainable=None):
        def table():
            return nd.get_variable(
                "embedding_weights",
                shape=(self.categorical_column._num_buckets, self.dimension),
                dtype=nd.float32, initializer=self.initializer,
                trainable=self.trainable and trainable is not False,
                collections=weight_collections)

        return sequence_embedding(self, inputs, table)


class _SharedEmbeddingColumn(
        _EmbeddingBase,
        collections.namedtuple("_SharedEmbeddingColumn", (
            "categorical_column", "dimension", "combiner", "initializer",
            "shared_embedding_collection_name", "ckpt_to_load_from",
            "tensor_name_in_ckpt", "max_norm", "trainable"))):
    """See ``shared_embedding_columns``: the table is made by the first of
    the columns built and found by the others in the graph collection
    ``shared_embedding_collection_name``."""

    @property
    def name(self):
        return f"{self.categorical_column.name}_shared_embedding"

    @property
    def _var_scope_name(self):
        return self.shared_embedding_collection_name

    def _get_dense_tensor(self, inputs, weight_collections=None, trainable=None):
        shape = (self.categorical_column._num_buckets, self.dimension)
        shared = nd.get_collection(self.shared_embedding_collection_name)
        weights = None
        if shared:
            if len(shared) > 1:
                raise ValueError(f"Collection {self.shared_embedding_collection_name} "
                                 f"can only contain one variable. Suggested fix A: "
                                 f"Choose a unique name for this collection. "
                                 f"Suggested fix B: Do not add any variables to this "
                                 f"collection. The feature_column library already "
                                 f"adds a variable under the hood.")
            weights = shared[0]
            if weights.shape.as_list() != list(shape):
                raise ValueError(f"Shared embedding collection "
                                 f"{self.shared_embedding_collection_name} contains "
                                 f"variable {weights.name} of unexpected shape "
                                 f"{weights.shape}. Expected shape is {shape}. "
                                 f"Suggested fix A: Choose a unique name for this "
                                 f"collection. Suggested fix B: Do not add any "
                                 f"variables to this collection. The feature_column "
                                 f"library already adds a variable under the hood.")
        dense, weights = _embedding_lookup(self, inputs, weight_collections,
                                           trainable, weights)
        if not shared:
            nd.add_to_collection(self.shared_embedding_collection_name, weights)
        return dense


class _IndicatorColumn(
        _DenseColumn,
        collections.namedtuple("_IndicatorColumn", ("categorical_column",))):
    """See ``indicator_column``."""

    @property
    def name(self):
        return f"{self.categorical_column.name}_indicator"

    @property
    def _parse_example_spec(self):
        return self.categorical_column._parse_example_spec

    def _get_sequence_dense_tensor(self, inputs, weight_collections=None,
                                   trainable=None):
        return sequence_indicator(self, inputs)

    def _transform_feature(self, inputs):
        _not_sequence(self, "input_layer")
        # Multi-hot: row r, column i sums the weights (1 without) of id i in r.
        pair = self.categorical_column._get_sparse_tensors(inputs)
        ids = sparse_to_rows(pair.id_tensor)
        n = self._variable_shape[-1]
        values = nd.cast(ids.values, nd.int64)
        if pair.weight_tensor is None:
            weights = nd.ones_like(values, dtype=nd.float32)
        else:
            weights = nd.cast(pair.weight_tensor.values, nd.float32)
        keep = nd.reshape(nd.where(nd.greater_equal(values, 0)), [-1])
        batch = ids.dense_shape[0]
        flat = nd.gather(ids.indices[:, 0] * n + values, keep)
        total = nd.cast(batch * n, nd.int32)
        out = nd.unsorted_segment_sum(nd.gather(weights, keep),
                                      nd.cast(flat, nd.int32), total)
        return nd.reshape(out, nd.stack([nd.cast(batch, nd.int32), n]))

    @property
    def _variable_shape(self):
        return TensorShape([1, self.categorical_column._num_buckets])

    def _get_dense_tensor(self, inputs, weight_collections=None, trainable=None):
        return inputs.get(self)


def _not_sequence(column, where):
    if isinstance(column.categorical_column, _SequenceCategoricalColumn):
        kind = "embedding_column" if "embedding" in column.name else (
            "indicator_column")
        raise ValueError(f"In {kind}: {column.name}. categorical_column must not be "
                         f"of type _SequenceCategoricalColumn. Suggested fix A: If "
                         f"you wish to use {where}, use a non-sequence "
                         f"categorical_column_with_*. Suggested fix B: If you wish "
                         f"to create sequence input, use sequence_input_layer "
                         f"instead of {where}. Given (type "
                         f"{type(column.categorical_column)}): "
                         f"{column.categorical_column}")


def _default_value(shape, default_value, dtype, key):
    if default_value is None:
        return None
    try:
        arr = np.asarray(default_value, dtype=dtype.as_numpy_dtype)
    except (TypeError, ValueError):
        raise TypeError(f"default_value must be compatible with dtype. "
                        f"default_value: {default_value}, dtype: {dtype}, key: "
                        f"{key}") from None
    if arr.ndim == 0:
        arr = np.full(shape, arr)
    if arr.shape != tuple(shape):
        raise ValueError(f"The shape of default_value must be equal to given shape. "
                         f"default_value: {default_value}, shape: {shape}, key: {key}")
    return tuple(arr.tolist()) if arr.ndim == 1 else tuple(
        tuple(np.asarray(row).tolist()) for row in arr)


def numeric_column(key, shape=(1,), default_value=None, dtype=nd.float32,
                   normalizer_fn=None):
    """A real-valued feature of ``shape`` per example, given as float32
    (after ``normalizer_fn``).

    >>> import nbdist as nd
    >>> col = nd.feature_column.numeric_column("price", shape=(2,))
    >>> col._variable_shape.as_list()
    [2]
    """
    shape = as_int_tuple(shape, key)
    dtype = nd.as_dtype(dtype)
    if not (dtype.is_integer or dtype.is_floating):
        raise ValueError(f"dtype must be convertible to float. dtype: {dtype}, key: "
                         f"{key}")
    default_value = _default_value(shape, default_value, dtype, key)
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError(f"normalizer_fn must be a callable. Given: {normalizer_fn}")
    if not isinstance(key, str):
        raise ValueError(f"key must be a string. Given: {key}")
    return _NumericColumn(key, shape, default_value, dtype, normalizer_fn)


def bucketized_column(source_column, boundaries):
    """The bucket of a one-dimensional numeric column's value among the sorted
    ``boundaries``: ``(-inf, b0), [b0, b1), ..., [bn, inf)``; dense as a one-hot
    vector, categorical as the bucket id."""
    if not isinstance(source_column, _NumericColumn):
        raise ValueError(f"source_column must be a column generated with "
                         f"numeric_column(). Given: {source_column}")
    if len(source_column.shape) > 1:
        raise ValueError(f"source_column must be one-dimensional column. Given: "
                         f"{source_column}")
    if not boundaries or not isinstance(boundaries, (list, tuple)):
        raise ValueError("boundaries must be a sorted list.")
    for lo, hi in zip(boundaries, boundaries[1:]):
        if lo >= hi:
            raise ValueError("boundaries must be a sorted list.")
    return _BucketizedColumn(source_column, tuple(boundaries))


def _check_embedding_args(dimension, ckpt_to_load_from, tensor_name_in_ckpt,
                          initializer, what):
    if dimension is None or dimension < 1:
        raise ValueError(f"Invalid dimension {dimension}.")
    if (ckpt_to_load_from is None) != (tensor_name_in_ckpt is None):
        raise ValueError("Must specify both `ckpt_to_load_from` and "
                         "`tensor_name_in_ckpt` or none of them.")
    if initializer is not None and not callable(initializer):
        raise ValueError(f"initializer must be callable if specified. {what}")
    if initializer is None:
        return nd.truncated_normal_initializer(mean=0.0,
                                               stddev=1 / math.sqrt(dimension))
    return initializer


def embedding_column(categorical_column, dimension, combiner="mean", initializer=None,
                     ckpt_to_load_from=None, tensor_name_in_ckpt=None, max_norm=None,
                     trainable=True):
    """The ids of ``categorical_column`` as a learned ``dimension``-vector, the
    ``combiner`` ("mean", "sqrtn" or "sum") of their rows of the table
    ``embedding_weights`` (initialised by ``initializer``, default a truncated
    normal of stddev ``1/sqrt(dimension)``, or from ``ckpt_to_load_from``).

    >>> import nbdist as nd
    >>> fc = nd.feature_column
    >>> col = fc.embedding_column(fc.categorical_column_with_identity("i", 10), 4)
    >>> col.name, col._variable_shape.as_list()
    ('i_embedding', [4])
    """
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError("combiner must be one of 'mean', 'sqrtn' or 'sum'")
    initializer = _check_embedding_args(
        dimension, ckpt_to_load_from, tensor_name_in_ckpt, initializer,
        f"Embedding of column_name: {getattr(categorical_column, 'name', '')}")
    if not isinstance(categorical_column, _CategoricalColumn):
        raise ValueError(f"categorical_column must be a _CategoricalColumn. Given: "
                         f"{categorical_column}")
    return _EmbeddingColumn(categorical_column, dimension, combiner, initializer,
                            ckpt_to_load_from, tensor_name_in_ckpt, max_norm,
                            trainable)


def shared_embedding_columns(categorical_columns, dimension, combiner="mean",
                             initializer=None, shared_embedding_collection_name=None,
                             ckpt_to_load_from=None, tensor_name_in_ckpt=None,
                             max_norm=None, trainable=True):
    """One ``embedding_column`` per categorical column, all reading one table
    (under the scope ``shared_embedding_collection_name``, default the
    columns' sorted names joined by ``_`` and ``_shared_embedding``)."""
    initializer = _check_embedding_args(dimension, ckpt_to_load_from,
                                        tensor_name_in_ckpt, initializer, "")
    columns = sorted(categorical_columns, key=lambda c: c.name)
    c0 = columns[0]
    if not isinstance(c0, _CategoricalColumn):
        raise ValueError(f"All categorical_columns must be subclasses of "
                         f"_CategoricalColumn. Given: {c0}, of type: {type(c0)}")
    num_buckets = c0._num_buckets
    if isinstance(c0, _WeightedCategoricalColumn):
        c0 = c0.categorical_column
    for c in columns[1:]:
        if isinstance(c, _WeightedCategoricalColumn):
            c = c.categorical_column
        if not isinstance(c, type(c0)):
            raise ValueError(f"To use shared_embedding_column, all "
                             f"categorical_columns must have the same type, or be "
                             f"weighted_categorical_column of the same type. Given "
                             f"column: {c0} of type: {type(c0)} does not match given "
                             f"column: {c} of type: {type(c)}")
        if num_buckets != c._num_buckets:
            raise ValueError(f"To use shared_embedding_column, all "
                             f"categorical_columns must have the same number of "
                             f"buckets. Given column: {c0} with buckets: "
                             f"{num_buckets} does  not match column: {c} with "
                             f"buckets: {c._num_buckets}")
    if not shared_embedding_collection_name:
        shared_embedding_collection_name = "_".join(c.name for c in columns)
        shared_embedding_collection_name += "_shared_embedding"
    return [_SharedEmbeddingColumn(c, dimension, combiner, initializer,
                                   shared_embedding_collection_name,
                                   ckpt_to_load_from, tensor_name_in_ckpt, max_norm,
                                   trainable)
            for c in categorical_columns]


def indicator_column(categorical_column):
    """The ids of ``categorical_column`` as a multi-hot vector of its
    ``_num_buckets`` (the weights summed, for a weighted column)."""
    if not isinstance(categorical_column, _CategoricalColumn):
        raise ValueError(f"Unsupported input type. Input must be a "
                         f"_CategoricalColumn. Given: {categorical_column}")
    return _IndicatorColumn(categorical_column)
