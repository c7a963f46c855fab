"""Categorical columns: features mapped to integer ids, as TF 1.15 defines
them (``categorical_column_with_hash_bucket`` / ``_vocabulary_list`` /
``_vocabulary_file`` / ``_identity``, ``weighted_categorical_column`` and
``crossed_column``). Each gives a ``SparseTensor`` of ids; a dense feature is
first made sparse, its missing entries (``""`` or ``-1``) dropped.

>>> import nbdist as nd
>>> fc = nd.feature_column
>>> color = fc.categorical_column_with_vocabulary_list("color", ["R", "G", "B"])
>>> with nd.Graph().as_default():
...     ids = color._get_sparse_tensors(
...         fc._LazyBuilder({"color": [["G"], ["B"], ["X"]]})).id_tensor
...     with nd.Session() as s:
...         s.run(nd.tables_initializer())
...         s.run(ids).values.tolist()
[1, 2, -1]
"""

from __future__ import annotations

import collections

import nbdist as nd
from nbdist.feature_column.base import (_CategoricalColumn, _FeatureColumn,
                                        assert_string_or_int,
                                        check_compatible_dtypes,
                                        to_sparse_input_and_drop_ignore_values)
from nbdist.framework.sparse_tensor import SparseTensor
from nbdist.ops.sparse_ops_cross import sparse_cross_hashed
from nbdist.ops.parsing_ops import VarLenFeature


def _check_key(key):
    if not isinstance(key, str):
        raise ValueError(f"key must be a string. Given: {key}")


def _sparse_input(inputs, key):
    sp = to_sparse_input_and_drop_ignore_values(inputs.get(key))
    if not isinstance(sp, SparseTensor):
        raise ValueError("SparseColumn input must be a SparseTensor.")
    return sp


def _with_values(sp, values):
    return SparseTensor(sp.indices, values, sp.dense_shape)


class _BaseCategorical(_CategoricalColumn):
    """A categorical column read from one feature, ``key``."""

    @property
    def name(self):
        return self.key

    def _get_sparse_tensors(self, inputs, weight_collections=None, trainable=None):
        return _CategoricalColumn.IdWeightPair(inputs.get(self), None)


class _HashedCategoricalColumn(
        _BaseCategorical,
        collections.namedtuple("_HashedCategoricalColumn",
                               ("key", "hash_bucket_size", "dtype"))):
    """See ``categorical_column_with_hash_bucket``."""

    @property
    def _parse_example_spec(self):
        return {self.key: VarLenFeature(self.dtype)}

    def _transform_feature(self, inputs):
        sp = _sparse_input(inputs, self.key)
        assert_string_or_int(sp.dtype, prefix=f"column_name: {self.key} input_tensor")
        check_compatible_dtypes(self.key, self.dtype, sp.dtype)
        values = sp.values if self.dtype == nd.string else nd.as_string(sp.values)
        return _with_values(sp, nd.string_to_hash_bucket_fast(
            values, self.hash_bucket_size, name="lookup"))

    @property
    def _num_buckets(self):
        return self.hash_bucket_size


def _lookup_ids(key, sp, column_dtype, make_table, vocab_size, num_oov_buckets):
    """Looks the values of ``sp`` up in the table ``make_table(key_dtype)``;
    values it lacks go to one of ``num_oov_buckets`` ids after the vocabulary
    (the Fingerprint64 of the value, of its decimal text for integers), as
    TF's ``IdTableWithHashBuckets``."""
    check_compatible_dtypes(key, column_dtype, sp.dtype)
    values = sp.values
    key_dtype = column_dtype
    if values.dtype.is_integer:
        key_dtype = nd.int64
        values = nd.cast(values, nd.int64)
    ids = make_table(key_dtype).lookup(values)
    if num_oov_buckets:
        text = values if key_dtype == nd.string else nd.as_string(values)
        oov = nd.string_to_hash_bucket_fast(text, num_oov_buckets) + vocab_size
        ids = nd.where(nd.equal(ids, -1), oov, ids)
    return _with_values(sp, ids)


class _VocabularyListCategoricalColumn(
        _BaseCategorical,
        collections.namedtuple("_VocabularyListCategoricalColumn",
                               ("key", "vocabulary_list", "dtype", "default_value",
                                "num_oov_buckets"))):
    """See ``categorical_column_with_vocabulary_list``."""

    @property
    def _parse_example_spec(self):
        return {self.key: VarLenFeature(self.dtype)}

    def _transform_feature(self, inputs):
        sp = _sparse_input(inputs, self.key)

        def table(key_dtype):
            return nd.lookup.index_table_from_tensor(
                vocabulary_list=tuple(self.vocabulary_list),
                default_value=self.default_value, dtype=key_dtype,
                name=f"{self.key}_lookup")

        return _lookup_ids(self.key, sp, self.dtype, table,
                           len(self.vocabulary_list), self.num_oov_buckets)

    @property
    def _num_buckets(self):
        return len(self.vocabulary_list) + self.num_oov_buckets


class _VocabularyFileCategoricalColumn(
        _BaseCategorical,
        collections.namedtuple("_VocabularyFileCategoricalColumn",
                               ("key", "vocabulary_file", "vocabulary_size",
                                "num_oov_buckets", "dtype", "default_value"))):
    """See ``categorical_column_with_vocabulary_file``."""

    @property
    def _parse_example_spec(self):
        return {self.key: VarLenFeature(self.dtype)}

    def _transform_feature(self, inputs):
        sp = _sparse_input(inputs, self.key)
        default = -1 if self.default_value is None else self.default_value

        def table(key_dtype):
            return nd.lookup.index_table_from_file(
                vocabulary_file=self.vocabulary_file, vocab_size=self.vocabulary_size,
                default_value=default, key_dtype=key_dtype,
                name=f"{self.key}_lookup")

        return _lookup_ids(self.key, sp, self.dtype, table, self.vocabulary_size,
                           self.num_oov_buckets)

    @property
    def _num_buckets(self):
        return self.vocabulary_size + self.num_oov_buckets


class _IdentityCategoricalColumn(
        _BaseCategorical,
        collections.namedtuple("_IdentityCategoricalColumn",
                               ("key", "num_buckets", "default_value"))):
    """See ``categorical_column_with_identity``."""

    @property
    def _parse_example_spec(self):
        return {self.key: VarLenFeature(nd.int64)}

    def _transform_feature(self, inputs):
        sp = _sparse_input(inputs, self.key)
        if not sp.dtype.is_integer:
            raise ValueError(f"Invalid input, not integer. key: {self.key} dtype: "
                             f"{sp.dtype}")
        values = nd.cast(sp.values, nd.int64, name="values")
        buckets = nd.constant(self.num_buckets, nd.int64, name="num_buckets")
        zero = nd.constant(0, nd.int64, name="zero")
        if self.default_value is None:
            # As TF: an id out of range fails the step.
            checks = [
                nd.assert_less(values, buckets, data=(values, buckets),
                               name="assert_less_than_num_buckets"),
                nd.assert_greater_equal(values, zero, data=(values,),
                                        name="assert_greater_or_equal_0")]
            with nd.control_dependencies(checks):
                values = nd.identity(values)
        else:
            bad = nd.logical_or(nd.less(values, zero),
                                nd.greater_equal(values, buckets))
            values = nd.where(bad, nd.fill(nd.shape(values), nd.constant(
                self.default_value, nd.int64)), values)
        return _with_values(sp, values)

    @property
    def _num_buckets(self):
        return self.num_buckets


class _WeightedCategoricalColumn(
        _CategoricalColumn,
        collections.namedtuple("_WeightedCategoricalColumn",
                               ("categorical_column", "weight_feature_key",
                                "dtype"))):
    """See ``weighted_categorical_column``."""

    @property
    def name(self):
        return f"{self.categorical_column.name}_weighted_by_{self.weight_feature_key}"

    @property
    def _parse_example_spec(self):
        config = dict(self.categorical_column._parse_example_spec)
        if self.weight_feature_key in config:
            raise ValueError(f"Parse config {config[self.weight_feature_key]} "
                             f"already exists for {self.weight_feature_key}.")
        config[self.weight_feature_key] = VarLenFeature(self.dtype)
        return config

    @property
    def _num_buckets(self):
        return self.categorical_column._num_buckets

    def _transform_feature(self, inputs):
        weights = inputs.get(self.weight_feature_key)
        if weights is None:
            raise ValueError(f"Missing weights {self.weight_feature_key}.")
        if self.dtype != weights.dtype.base_dtype:
            raise ValueError(f"Bad dtype, expected {self.dtype}, but got "
                             f"{weights.dtype}.")
        if not isinstance(weights, SparseTensor):
            # A dense weight tensor is made sparse: its zeros are missing entries.
            weights = to_sparse_input_and_drop_ignore_values(weights, ignore_value=0.0)
        if not weights.dtype.is_floating:
            weights = _with_values(weights, nd.cast(weights.values, nd.float32))
        return (inputs.get(self.categorical_column), weights)

    def _get_sparse_tensors(self, inputs, weight_collections=None, trainable=None):
        ids, weights = inputs.get(self)
        return _CategoricalColumn.IdWeightPair(ids, weights)


def _collect_leaf_level_keys(cross):
    leaves = []
    for key in cross.keys:
        if isinstance(key, _CrossedColumn):
            leaves.extend(_collect_leaf_level_keys(key))
        else:
            leaves.append(key)
    return leaves


class _CrossedColumn(
        _CategoricalColumn,
        collections.namedtuple("_CrossedColumn",
                               ("keys", "hash_bucket_size", "hash_key"))):
    """See ``crossed_column``."""

    @property
    def name(self):
        names = [k.name if isinstance(k, _FeatureColumn) else k
                 for k in _collect_leaf_level_keys(self)]
        return "_X_".join(sorted(names))

    @property
    def _parse_example_spec(self):
        config = {}
        for key in self.keys:
            if isinstance(key, _FeatureColumn):
                config.update(key._parse_example_spec)
            else:
                config[key] = VarLenFeature(nd.string)
        return config

    def _transform_feature(self, inputs):
        tensors = []
        for key in _collect_leaf_level_keys(self):
            if isinstance(key, str):
                tensors.append(inputs.get(key))
                continue
            ids_and_weights = key._get_sparse_tensors(inputs)
            if ids_and_weights.weight_tensor is not None:
                raise ValueError(f"crossed_column does not support weight_tensor, "
                                 f"but the given column populates weight_tensor. "
                                 f"Given column: {key.name}")
            tensors.append(ids_and_weights.id_tensor)
        return sparse_cross_hashed(tensors, num_buckets=self.hash_bucket_size,
                                   hash_key=self.hash_key)

    @property
    def _num_buckets(self):
        return self.hash_bucket_size

    def _get_sparse_tensors(self, inputs, weight_collections=None, trainable=None):
        return _CategoricalColumn.IdWeightPair(inputs.get(self), None)


def categorical_column_with_hash_bucket(key, hash_bucket_size, dtype=nd.string):
    """Ids ``Fingerprint64(value) % hash_bucket_size`` (an integer value is
    hashed as its decimal text), the same ids as TensorFlow.

    >>> import nbdist as nd
    >>> col = nd.feature_column.categorical_column_with_hash_bucket("w", 100)
    >>> col.name, col._num_buckets
    ('w', 100)
    """
    if hash_bucket_size is None:
        raise ValueError(f"hash_bucket_size must be set. key: {key}")
    if hash_bucket_size < 1:
        raise ValueError(f"hash_bucket_size must be at least 1. hash_bucket_size: "
                         f"{hash_bucket_size}, key: {key}")
    _check_key(key)
    dtype = nd.as_dtype(dtype)
    assert_string_or_int(dtype, prefix=f"column_name: {key}")
    return _HashedCategoricalColumn(key, hash_bucket_size, dtype)


def categorical_column_with_vocabulary_list(key, vocabulary_list, dtype=None,
                                            default_value=-1, num_oov_buckets=0):
    """Id ``i`` for the value ``vocabulary_list[i]``; another value gets
    ``default_value`` (-1: dropped later), or with ``num_oov_buckets`` one of
    that many ids after the vocabulary, by its hash.

    >>> import nbdist as nd
    >>> col = nd.feature_column.categorical_column_with_vocabulary_list(
    ...     "color", ["R", "G"], num_oov_buckets=2)
    >>> col._num_buckets
    4
    """
    if vocabulary_list is None or len(vocabulary_list) < 1:
        raise ValueError(f"vocabulary_list {vocabulary_list} must be non-empty, "
                         f"column_name: {key}")
    if len(set(vocabulary_list)) != len(vocabulary_list):
        raise ValueError(f"Duplicate keys in vocabulary_list {vocabulary_list}, "
                         f"column_name: {key}")
    vocab_dtype = nd.string if isinstance(vocabulary_list[0], (str, bytes)) else (
        nd.int64)
    if any(isinstance(v, (str, bytes)) != (vocab_dtype == nd.string)
           for v in vocabulary_list):
        raise ValueError(f"Invalid vocabulary dtype: mixed types in "
                         f"{vocabulary_list}, column_name: {key}")
    if num_oov_buckets:
        if default_value != -1:
            raise ValueError(f"Can't specify both default_value {default_value} and "
                             f"num_oov_buckets {num_oov_buckets}, column_name: {key}")
        if num_oov_buckets < 0:
            raise ValueError(f"Invalid num_oov_buckets {num_oov_buckets} in {key}.")
    if dtype is not None:
        dtype = nd.as_dtype(dtype)
        if dtype.is_integer != vocab_dtype.is_integer:
            raise ValueError(f"dtype {dtype} and vocabulary dtype {vocab_dtype} do "
                             f"not match, column_name: {key}")
    else:
        dtype = vocab_dtype
    assert_string_or_int(dtype, prefix=f"column_name: {key}")
    _check_key(key)
    return _VocabularyListCategoricalColumn(key, tuple(vocabulary_list), dtype,
                                            default_value, num_oov_buckets)


def categorical_column_with_vocabulary_file(key, vocabulary_file,
                                            vocabulary_size=None, num_oov_buckets=0,
                                            default_value=None, dtype=nd.string):
    """``categorical_column_with_vocabulary_list`` with the vocabulary read
    from ``vocabulary_file`` (one entry a line; line ``i`` is id ``i``); its
    size is counted from the file when not given."""
    if not vocabulary_file:
        raise ValueError(f"Missing vocabulary_file in {key}.")
    if vocabulary_size is None:
        if not nd.gfile.Exists(vocabulary_file):
            raise ValueError(f"vocabulary_file in {key} does not exist.")
        with nd.gfile.GFile(vocabulary_file) as f:
            vocabulary_size = sum(1 for _ in f)
    if vocabulary_size < 1:
        raise ValueError(f"Invalid vocabulary_size in {key}.")
    if num_oov_buckets:
        if default_value is not None:
            raise ValueError(f"Can't specify both default_value {default_value} and "
                             f"num_oov_buckets {num_oov_buckets}, column_name: {key}")
        if num_oov_buckets < 0:
            raise ValueError(f"Invalid num_oov_buckets {num_oov_buckets} in {key}.")
    dtype = nd.as_dtype(dtype)
    assert_string_or_int(dtype, prefix=f"column_name: {key}")
    _check_key(key)
    return _VocabularyFileCategoricalColumn(key, vocabulary_file, vocabulary_size,
                                            0 if num_oov_buckets is None
                                            else num_oov_buckets, dtype,
                                            default_value)


def categorical_column_with_identity(key, num_buckets, default_value=None):
    """The integer feature is its own id, in ``[0, num_buckets)``; a value
    outside gets ``default_value``, or fails the step when that is None."""
    if num_buckets < 1:
        raise ValueError(f"num_buckets {num_buckets} < 1, column_name {key}")
    if default_value is not None and not 0 <= default_value < num_buckets:
        raise ValueError(f"default_value {default_value} not in range [0, "
                         f"{num_buckets}), column_name {key}")
    _check_key(key)
    return _IdentityCategoricalColumn(key, num_buckets, default_value)


def weighted_categorical_column(categorical_column, weight_feature_key,
                                dtype=nd.float32):
    """The ids of ``categorical_column``, each weighted by the value at the
    same index of the feature ``weight_feature_key``."""
    if not isinstance(categorical_column, _CategoricalColumn):
        raise ValueError(f"categorical_column must be of type _CategoricalColumn. "
                         f"Given: {categorical_column}")
    dtype = nd.as_dtype(dtype)
    if dtype not in (nd.int64, nd.float32):
        raise ValueError(f"dtype {dtype} is not convertible to float.")
    return _WeightedCategoricalColumn(categorical_column, weight_feature_key, dtype)


def crossed_column(keys, hash_bucket_size, hash_key=None):
    """The hashed cross of ``keys`` (feature names or categorical columns):
    each combination of a row's values is one id in ``[0, hash_bucket_size)``,
    the id TensorFlow gives it (``sparse.cross_hashed``).

    >>> import nbdist as nd
    >>> nd.feature_column.crossed_column(["b", "a"], 1000).name
    'a_X_b'
    """
    if not hash_bucket_size or hash_bucket_size < 1:
        raise ValueError(f"hash_bucket_size must be > 1. hash_bucket_size: "
                         f"{hash_bucket_size}")
    if not keys or len(keys) < 2:
        raise ValueError(f"keys must be a list with length > 1. Given: {keys}")
    for key in keys:
        if not isinstance(key, (str, _CategoricalColumn)):
            raise ValueError(f"Unsupported key type. All keys must be either string, "
                             f"or categorical column except _HashedCategoricalColumn. "
                             f"Given: {key}")
        if isinstance(key, _HashedCategoricalColumn):
            raise ValueError(f"categorical_column_with_hash_bucket is not supported "
                             f"for crossing. Hashing before crossing will increase "
                             f"probability of collision. Instead, use the feature "
                             f"name as a string. Given: {key}")
    return _CrossedColumn(tuple(keys), hash_bucket_size, hash_key)
