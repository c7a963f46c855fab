"""What every feature column shares: the column kinds (``_FeatureColumn``,
``_DenseColumn``, ``_CategoricalColumn``), the builder that reads and caches
features (``_LazyBuilder``), and the conversion of a dense feature to a
``SparseTensor`` that drops its "missing" entries, as TF 1.15's
``feature_column.py`` defines them.
"""

from __future__ import annotations

import collections

import nbdist as nd
from nbdist.framework.sparse_tensor import SparseTensor, SparseTensorValue


class _FeatureColumn:
    """A feature column: a name, how it parses from ``tf.Example``
    (``_parse_example_spec``) and how it transforms its raw feature."""

    @property
    def name(self):
        raise NotImplementedError

    @property
    def _var_scope_name(self):
        return self.name

    def _transform_feature(self, inputs):
        raise NotImplementedError

    @property
    def _parse_example_spec(self):
        raise NotImplementedError

    # TF 2's public names of the same properties.
    parse_example_spec = property(lambda self: self._parse_example_spec)


class _DenseColumn(_FeatureColumn):
    """A column giving a dense float tensor ``[batch] + _variable_shape``."""

    @property
    def _variable_shape(self):
        raise NotImplementedError

    def _get_dense_tensor(self, inputs, weight_collections=None, trainable=None):
        raise NotImplementedError

    variable_shape = property(lambda self: self._variable_shape)


class _CategoricalColumn(_FeatureColumn):
    """A column giving ids in ``[0, _num_buckets)`` as a ``SparseTensor``
    (and optional weights of the same indices)."""

    IdWeightPair = collections.namedtuple("IdWeightPair", ("id_tensor",
                                                            "weight_tensor"))

    @property
    def _num_buckets(self):
        raise NotImplementedError

    def _get_sparse_tensors(self, inputs, weight_collections=None, trainable=None):
        raise NotImplementedError


def _as_sparse_or_tensor(value):
    if isinstance(value, SparseTensorValue):
        return SparseTensor.from_value(value)
    if isinstance(value, SparseTensor):
        return value
    return nd.convert_to_tensor(value)


def _expand_rank_one(key, tensor):
    """A rank-1 feature becomes a column (``[batch, 1]``), as TF does."""
    rank = tensor.shape.rank
    if rank == 0:
        raise ValueError(f"Feature (key: {key}) cannot have rank 0. Given: {tensor}")
    if rank != 1:
        return tensor
    if isinstance(tensor, SparseTensor):
        zeros = nd.zeros_like(tensor.indices)
        return SparseTensor(nd.concat([tensor.indices, zeros], 1), tensor.values,
                            nd.stack([tensor.dense_shape[0], nd.constant(1, nd.int64)]))
    return nd.expand_dims(tensor, -1)


class _LazyBuilder:
    """Gives each feature (by key) or column's transform (by column) once,
    caching it: a column used twice, or by two columns, is built once.

    >>> import nbdist as nd
    >>> from nbdist.feature_column.base import _LazyBuilder
    >>> with nd.Graph().as_default():
    ...     b = _LazyBuilder({"age": [20.0, 30.0]})
    ...     b.get("age").shape.as_list()
    [2, 1]
    """

    def __init__(self, features):
        self._features = features.copy()
        self._feature_tensors = {}

    def get(self, key):
        if key in self._feature_tensors:
            return self._feature_tensors[key]
        if isinstance(key, str):
            if key not in self._features:
                raise ValueError(f"Feature {key} is not in features dictionary.")
            tensor = _expand_rank_one(key, _as_sparse_or_tensor(self._features[key]))
            self._feature_tensors[key] = tensor
            return tensor
        if not isinstance(key, _FeatureColumn):
            raise TypeError(f'"key" must be either a "str" or "_FeatureColumn". '
                            f"Provided: {key}")
        transformed = key._transform_feature(self)
        if transformed is None:
            raise ValueError(f"Column {key.name} is not supported.")
        self._feature_tensors[key] = transformed
        return transformed


def to_sparse_input_and_drop_ignore_values(input_tensor, ignore_value=None):
    """A dense tensor as a ``SparseTensor`` of its entries other than
    ``ignore_value`` (default: ``""`` for strings, ``-1`` for integers, ``0``
    otherwise); a ``SparseTensor`` is returned as it is."""
    input_tensor = _as_sparse_or_tensor(input_tensor)
    if isinstance(input_tensor, SparseTensor):
        return input_tensor
    dtype = input_tensor.dtype.base_dtype
    if ignore_value is None:
        if dtype == nd.string:
            ignore_value = ""
        elif dtype.is_integer:
            ignore_value = -1  # -1 means a missing feature
        else:
            ignore_value = dtype.as_numpy_dtype()
    with nd.name_scope(None, "to_sparse_input"):
        keep = nd.not_equal(input_tensor, nd.constant(ignore_value, dtype))
        indices = nd.where(keep, name="indices")
        flat = nd.reshape(input_tensor, [-1])
        kept = nd.reshape(nd.where(nd.reshape(keep, [-1])), [-1])
        values = nd.gather(flat, kept, name="values")
        dense_shape = nd.shape(input_tensor, out_type=nd.int64, name="dense_shape")
    return SparseTensor(indices, values, dense_shape)


def assert_string_or_int(dtype, prefix):
    if dtype != nd.string and not dtype.is_integer:
        raise ValueError(f"{prefix} dtype must be string or integer. dtype: {dtype}.")


def check_compatible_dtypes(key, column_dtype, tensor_dtype):
    if column_dtype.is_integer != tensor_dtype.is_integer:
        raise ValueError(f"Column dtype and SparseTensors dtype must be compatible. "
                         f"key: {key}, column dtype: {column_dtype}, tensor dtype: "
                         f"{tensor_dtype}")


def sparse_to_rows(sp):
    """``sp`` as ``[batch, -1]``: a rank-2 ``SparseTensor`` is itself; a higher
    rank one's trailing dimensions are flattened into one (TF's
    ``sparse_reshape(sp, [batch, -1])``)."""
    rank = sp.shape.rank
    if rank == 2:
        return sp
    if rank is None:
        raise ValueError("nbdist's feature columns need SparseTensors of known rank")
    shape = sp.dense_shape
    strides = [nd.reduce_prod(shape[i + 1:]) for i in range(1, rank)]
    col = nd.add_n([sp.indices[:, i] * strides[i - 1] for i in range(1, rank)])
    width = nd.reduce_prod(shape[1:])
    return SparseTensor(nd.stack([sp.indices[:, 0], col], 1), sp.values,
                        nd.stack([shape[0], width]))


def as_int_tuple(shape, key):
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise TypeError(f"shape must be an int or an iterable of ints, got {shape}. "
                        f"key: {key}") from None
    for d in shape:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"shape dimensions must be integer. shape: {shape}, "
                            f"key: {key}")
        if d < 1:
            raise ValueError(f"shape dimensions must be greater than 0. shape: "
                             f"{shape}, key: {key}")
    return shape
