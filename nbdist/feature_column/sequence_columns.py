"""Sequence columns, as TF 1.15's ``sequence_feature_column.py``: features
with a time dimension (``[batch, time]`` sparse values, one or more per
step) that an RNN reads step by step. ``sequence_numeric_column`` and the
``sequence_categorical_column_with_*`` columns; wrapped in an
``embedding_column`` or ``indicator_column`` they give ``[batch, time,
size]`` tensors and each example's length through ``sequence_input_layer``
(TF's ``tf.contrib.feature_column.sequence_input_layer``). ``input_layer``
and ``linear_model`` refuse them, as TF's do.

>>> import nbdist as nd
>>> fc = nd.feature_column
>>> word = fc.sequence_categorical_column_with_identity("w", 5)
>>> with nd.Graph().as_default():
...     ids = nd.SparseTensor([[0, 0], [0, 1], [1, 0]], [3, 1, 4], [2, 2])
...     x, length = fc.sequence_input_layer({"w": ids}, [fc.indicator_column(word)])
...     with nd.Session() as s:
...         v, n = s.run([x, length])
>>> v.shape, n.tolist()
((2, 2, 5), [2, 1])
"""

from __future__ import annotations

import collections

import nbdist as nd
from nbdist.feature_column.base import (_CategoricalColumn, _FeatureColumn,
                                        _LazyBuilder, as_int_tuple)
from nbdist.feature_column.categorical_columns import (
    categorical_column_with_hash_bucket, categorical_column_with_identity,
    categorical_column_with_vocabulary_file,
    categorical_column_with_vocabulary_list)
from nbdist.framework.sparse_tensor import SparseTensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.parsing_ops import VarLenFeature

TensorSequenceLengthPair = collections.namedtuple(
    "TensorSequenceLengthPair", ("dense_tensor", "sequence_length"))


def _to_rank_three(sp):
    """``[batch, time]`` ids as ``[batch, time, 1]`` (rank 3 stays)."""
    rank = sp.shape.rank
    if rank == 3:
        return sp
    if rank != 2:
        raise ValueError(f"A sequence feature must be [batch, time] or [batch, "
                         f"time, n], got rank {rank}")
    zeros = nd.zeros_like(sp.indices[:, :1])
    return SparseTensor(nd.concat([sp.indices, zeros], 1), sp.values,
                        nd.concat([sp.dense_shape, [1]], 0))


def steps_as_rows(sp):
    """Rank-3 ``sp`` as ``[batch * time, n]``: one row per time step."""
    shape = sp.dense_shape
    rows = sp.indices[:, 0] * shape[1] + sp.indices[:, 1]
    return SparseTensor(nd.stack([rows, sp.indices[:, 2]], 1), sp.values,
                        nd.stack([shape[0] * shape[1], shape[2]]))


def sequence_length_from_sparse_tensor(sp, num_elements=1):
    """Per example, one more than its last time index holding a value
    (divided by ``num_elements`` values per step, rounded up); 0 if none."""
    with nd.name_scope(None, "sequence_length"):
        batch, steps = sp.dense_shape[0], sp.dense_shape[1]
        cells = nd.cast(batch * steps, nd.int32)
        flat = nd.cast(sp.indices[:, 0] * steps + sp.indices[:, 1], nd.int32)
        counts = nd.unsorted_segment_sum(nd.ones_like(flat), flat, cells)
        b = nd.cast(batch, nd.int32)
        ends = nd.tile(nd.expand_dims(nd.range(1, nd.cast(steps, nd.int32) + 1), 0),
                       nd.stack([b, 1]))
        present = nd.greater(nd.reshape(counts, nd.stack([b, -1])), 0)
        length = nd.reduce_max(nd.where(present, ends, nd.zeros_like(ends)), axis=1)
        length = nd.cast(length, nd.float64) / float(num_elements)
        return nd.cast(nd.ceil(length), nd.int64)


class _SequenceDenseColumn(_FeatureColumn):
    """A column giving ``[batch, time] + _variable_shape`` and the lengths."""

    def _get_sequence_dense_tensor(self, inputs, weight_collections=None,
                                   trainable=None):
        raise NotImplementedError


class _SequenceCategoricalColumn(
        _CategoricalColumn,
        collections.namedtuple("_SequenceCategoricalColumn",
                               ("categorical_column",))):
    """A categorical column whose ids are per time step (rank 3)."""

    @property
    def name(self):
        return self.categorical_column.name

    @property
    def _parse_example_spec(self):
        return self.categorical_column._parse_example_spec

    def _transform_feature(self, inputs):
        return self.categorical_column._transform_feature(inputs)

    @property
    def _num_buckets(self):
        return self.categorical_column._num_buckets

    def _get_sparse_tensors(self, inputs, weight_collections=None, trainable=None):
        pair = self.categorical_column._get_sparse_tensors(inputs)
        weights = pair.weight_tensor
        return _CategoricalColumn.IdWeightPair(
            _to_rank_three(pair.id_tensor),
            None if weights is None else _to_rank_three(weights))


class _SequenceNumericColumn(
        _SequenceDenseColumn,
        collections.namedtuple("_SequenceNumericColumn",
                               ("key", "shape", "default_value", "dtype",
                                "normalizer_fn"))):
    """See ``sequence_numeric_column``."""

    @property
    def name(self):
        return self.key

    @property
    def _parse_example_spec(self):
        return {self.key: VarLenFeature(self.dtype)}

    def _transform_feature(self, inputs):
        tensor = inputs.get(self.key)
        if self.normalizer_fn is not None:
            tensor = self.normalizer_fn(tensor)
        return tensor

    @property
    def _variable_shape(self):
        return TensorShape(self.shape)

    def _get_sequence_dense_tensor(self, inputs, weight_collections=None,
                                   trainable=None):
        sp = inputs.get(self)
        if not isinstance(sp, SparseTensor):
            raise ValueError(f"A sequence_numeric_column needs a SparseTensor "
                             f"feature. key: {self.key}")
        dense = nd.sparse_tensor_to_dense(sp, default_value=self.default_value)
        shape = nd.concat([nd.shape(dense)[:1], [-1], self.shape], 0)
        dense = nd.cast(nd.reshape(dense, shape), nd.float32)
        n = self._variable_shape.num_elements() if sp.shape.rank == 2 else 1
        return TensorSequenceLengthPair(dense, sequence_length_from_sparse_tensor(
            sp, num_elements=n))


def sequence_embedding(column, inputs, weights_fn):
    """``[batch, time, dimension]`` embeddings of a sequence column's ids
    (``weights_fn()`` gives the table) and the lengths."""
    pair = column.categorical_column._get_sparse_tensors(inputs)
    ids = pair.id_tensor
    table = weights_fn()
    sp_weights = None if pair.weight_tensor is None else steps_as_rows(
        pair.weight_tensor)
    flat = nd.nn.safe_embedding_lookup_sparse(
        table, steps_as_rows(ids), sparse_weights=sp_weights,
        combiner=column.combiner, name=f"{column.name}_weights",
        max_norm=column.max_norm)
    dense = nd.reshape(flat, nd.stack([nd.cast(ids.dense_shape[0], nd.int32),
                                       nd.cast(ids.dense_shape[1], nd.int32),
                                       column.dimension]))
    return TensorSequenceLengthPair(dense, sequence_length_from_sparse_tensor(ids))


def sequence_indicator(column, inputs):
    """``[batch, time, num_buckets]`` multi-hot ids per step, and lengths."""
    pair = column.categorical_column._get_sparse_tensors(inputs)
    ids = pair.id_tensor
    n = column.categorical_column._num_buckets
    values = nd.cast(ids.values, nd.int64)
    weights = (nd.ones_like(values, dtype=nd.float32) if pair.weight_tensor is None
               else nd.cast(pair.weight_tensor.values, nd.float32))
    keep = nd.reshape(nd.where(nd.greater_equal(values, 0)), [-1])
    shape = ids.dense_shape
    cell = (ids.indices[:, 0] * shape[1] + ids.indices[:, 1]) * n + values
    total = nd.cast(shape[0] * shape[1] * n, nd.int32)
    out = nd.unsorted_segment_sum(nd.gather(weights, keep),
                                  nd.cast(nd.gather(cell, keep), nd.int32), total)
    dense = nd.reshape(out, nd.stack([nd.cast(shape[0], nd.int32),
                                      nd.cast(shape[1], nd.int32), n]))
    return TensorSequenceLengthPair(dense, sequence_length_from_sparse_tensor(ids))


def sequence_input_layer(features, feature_columns, weight_collections=None,
                         trainable=True):
    """``([batch, time, total size], lengths)`` of sequence dense columns
    (``sequence_numeric_column``, and embedding or indicator columns of
    sequence categorical columns), side by side in order of their names."""
    from nbdist.feature_column.layers import (_normalize_feature_columns,
                                              _with_model_collections)

    columns = _normalize_feature_columns(feature_columns)
    for c in columns:
        if not hasattr(c, "_get_sequence_dense_tensor") or (
                hasattr(c, "categorical_column") and not isinstance(
                    c.categorical_column, _SequenceCategoricalColumn)):
            raise ValueError(f"All feature_columns must be of type "
                             f"_SequenceDenseColumn. You can wrap a "
                             f"sequence_categorical_column with an embedding_column "
                             f"or indicator_column. Given (type {type(c)}): {c}")
    collections_ = _with_model_collections(weight_collections)
    with nd.variable_scope(None, default_name="sequence_input_layer",
                           values=list(features.values())):
        builder = _LazyBuilder(features)
        outputs, lengths = [], []
        for column in columns:
            with nd.variable_scope(None, default_name=column._var_scope_name):
                dense, length = column._get_sequence_dense_tensor(
                    builder, weight_collections=collections_, trainable=trainable)
                shape = nd.shape(dense)
                n = column._variable_shape.num_elements()
                outputs.append(nd.reshape(dense, nd.stack([shape[0], shape[1], n])))
                lengths.append(length)
        length = lengths[0]
        if len(lengths) > 1:
            checks = [nd.assert_equal(length, other, message="sequence lengths of "
                                      "the feature columns differ")
                      for other in lengths[1:]]
            with nd.control_dependencies(checks):
                length = nd.identity(length)
        return nd.concat(outputs, -1), length


def sequence_numeric_column(key, shape=(1,), default_value=0.0, dtype=nd.float32,
                            normalizer_fn=None):
    """Real values per time step (``shape`` each), padded with
    ``default_value`` to the longest sequence."""
    shape = as_int_tuple(shape, key)
    dtype = nd.as_dtype(dtype)
    if not (dtype.is_integer or dtype.is_floating):
        raise ValueError(f"dtype must be convertible to float. dtype: {dtype}, key: "
                         f"{key}")
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError(f"normalizer_fn must be a callable. Given: {normalizer_fn}")
    return _SequenceNumericColumn(key, shape, default_value, dtype, normalizer_fn)


def sequence_categorical_column_with_identity(key, num_buckets, default_value=None):
    """``categorical_column_with_identity`` per time step."""
    return _SequenceCategoricalColumn(
        categorical_column_with_identity(key, num_buckets, default_value))


def sequence_categorical_column_with_hash_bucket(key, hash_bucket_size,
                                                 dtype=nd.string):
    """``categorical_column_with_hash_bucket`` per time step."""
    return _SequenceCategoricalColumn(
        categorical_column_with_hash_bucket(key, hash_bucket_size, dtype))


def sequence_categorical_column_with_vocabulary_list(key, vocabulary_list, dtype=None,
                                                     default_value=-1,
                                                     num_oov_buckets=0):
    """``categorical_column_with_vocabulary_list`` per time step."""
    return _SequenceCategoricalColumn(categorical_column_with_vocabulary_list(
        key, vocabulary_list, dtype, default_value, num_oov_buckets))


def sequence_categorical_column_with_vocabulary_file(key, vocabulary_file,
                                                     vocabulary_size=None,
                                                     num_oov_buckets=0,
                                                     default_value=None,
                                                     dtype=nd.string):
    """``categorical_column_with_vocabulary_file`` per time step."""
    return _SequenceCategoricalColumn(categorical_column_with_vocabulary_file(
        key, vocabulary_file, vocabulary_size, num_oov_buckets, default_value,
        dtype))
