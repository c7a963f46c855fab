"""``SparseTensor``: a tensor given by the coordinates and values of its
non-zero entries, as three dense tensors (TF's ``tf.SparseTensor``).

``indices`` (int64, ``[N, rank]``) are the coordinates of the ``N`` entries,
``values`` (``[N]``) their values and ``dense_shape`` (int64, ``[rank]``)
the shape of the dense tensor it stands for. A ``Session`` fetches a
``SparseTensor`` as a ``SparseTensorValue`` and feeds a ``sparse_placeholder``
from one (or from a tuple ``(indices, values, dense_shape)``).

>>> import nbdist as nd
>>> sp = nd.SparseTensor(indices=[[0, 0], [1, 2]], values=[1.0, 2.0],
...                      dense_shape=[3, 4])
>>> with nd.Session() as s:
...     s.run(nd.sparse.to_dense(sp)).tolist()[:2]
[[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0]]
"""

from __future__ import annotations

import collections

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.ops import Tensor, _static_value, convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape


class SparseTensor:
    """The sparse tensor of ``dense_shape`` with ``values`` at ``indices``."""

    @classmethod
    def from_value(cls, value):
        if isinstance(value, SparseTensor):
            return value
        if not isinstance(value, SparseTensorValue):
            raise TypeError(f"Neither a SparseTensor nor SparseTensorValue: {value}")
        return cls(value.indices, value.values, value.dense_shape)

    def __init__(self, indices, values, dense_shape):
        from nbdist.framework.ops import _graph_of

        g = _graph_of([indices, values, dense_shape])
        with g.as_default(), g.name_scope(None if isinstance(values, Tensor)
                                          else "SparseTensor"):
            indices = convert_to_tensor(indices, name="indices", dtype=dtypes.int64)
            values = convert_to_tensor(values, name="values")
            dense_shape = convert_to_tensor(dense_shape, name="dense_shape",
                                            dtype=dtypes.int64)
        if indices.shape.rank not in (None, 2):
            raise ValueError(f"SparseTensor indices must be a matrix, got shape "
                             f"{indices.shape}")
        if values.shape.rank not in (None, 1):
            raise ValueError(f"SparseTensor values must be a vector, got shape "
                             f"{values.shape}")
        if dense_shape.shape.rank not in (None, 1):
            raise ValueError(f"SparseTensor dense_shape must be a vector, got shape "
                             f"{dense_shape.shape}")
        n_ind = indices.shape[0] if indices.shape.rank == 2 else None
        n_val = values.shape[0] if values.shape.rank == 1 else None
        if n_ind is not None and n_val is not None and n_ind != n_val:
            raise ValueError(f"SparseTensor has {n_ind} indices but {n_val} values")
        self._indices = indices
        self._values = values
        self._dense_shape = dense_shape

    @property
    def indices(self) -> Tensor:
        return self._indices

    @property
    def values(self) -> Tensor:
        return self._values

    @property
    def dense_shape(self) -> Tensor:
        return self._dense_shape

    @property
    def dtype(self):
        return self._values.dtype

    @property
    def op(self):
        return self._values.op

    @property
    def graph(self):
        return self._indices.graph

    @property
    def shape(self) -> TensorShape:
        """The static shape of the dense tensor (``dense_shape``'s value when
        known while building)."""
        v = _static_value(self._dense_shape)
        if v is not None:
            return TensorShape([int(d) for d in np.ravel(v)])
        rank = self._dense_shape.shape[0] if self._dense_shape.shape.rank else None
        if rank is None and self._indices.shape.rank == 2:
            rank = self._indices.shape[1]
        return TensorShape(None if rank is None else [None] * rank)

    def get_shape(self) -> TensorShape:
        return self.shape

    def eval(self, feed_dict=None, session=None):
        """The ``SparseTensorValue`` of this tensor in ``session`` (default: the
        default session)."""
        from nbdist.framework.default_session import run_with_default_session

        return run_with_default_session(self, feed_dict, session)

    def consumers(self):
        return self._values.consumers()

    def __str__(self):
        return (f"SparseTensor(indices={self._indices}, values={self._values}, "
                f"dense_shape={self._dense_shape})")

    __repr__ = __str__

    # -- fetch / feed in a Session (see nbdist/runtime/session.py) --------------
    def _session_fetch_components(self):
        return [self._indices, self._values, self._dense_shape]

    def _session_fetch_value(self, arrays):
        return SparseTensorValue(*arrays)

    def _session_feed_components(self, value):
        if isinstance(value, SparseTensor):
            raise TypeError("The value of a feed cannot be a nd.SparseTensor object.")
        if not isinstance(value, tuple) or len(value) != 3:
            raise TypeError(f"A SparseTensor feed must be a SparseTensorValue or a "
                            f"tuple (indices, values, dense_shape), got {value!r:.80}")
        if not isinstance(value, SparseTensorValue):
            value = SparseTensorValue(*value)
        return [(self._indices, value.indices), (self._values, value.values),
                (self._dense_shape, value.dense_shape)]


class SparseTensorValue(collections.namedtuple(
        "SparseTensorValue", ["indices", "values", "dense_shape"])):
    """A fetched ``SparseTensor`` (NumPy arrays), or a value to feed one."""

    __slots__ = ()


def is_sparse(x) -> bool:
    return isinstance(x, (SparseTensor, SparseTensorValue))


def convert_to_tensor_or_sparse_tensor(value, dtype=None, name=None):
    if isinstance(value, SparseTensorValue):
        value = SparseTensor.from_value(value)
    if isinstance(value, SparseTensor):
        if dtype is not None and not dtypes.as_dtype(dtype).is_compatible_with(
                value.dtype):
            raise ValueError(f"Sparse dtype: requested = {dtype}, actual = "
                             f"{value.dtype.name}")
        return value
    return convert_to_tensor(value, dtype=dtype, name=name)


def sparse_placeholder(dtype, shape=None, name=None):
    """A ``SparseTensor`` that must be fed (a ``SparseTensorValue`` or a tuple
    ``(indices, values, dense_shape)``); ``shape`` fixes its dense shape.

    >>> import nbdist as nd, numpy as np
    >>> sp = nd.sparse_placeholder(nd.float32, shape=[2, 3])
    >>> with nd.Session() as s:
    ...     s.run(nd.sparse.reduce_sum(sp),
    ...           {sp: ([[0, 1], [1, 2]], [1.5, 2.0], [2, 3])}).item()
    3.5
    """
    from nbdist.framework.constant_op import placeholder

    dtype = dtypes.as_dtype(dtype)
    shape_name = None if name is None else name + "/shape"
    rank = None
    dense_shape = None
    if shape is not None:
        if isinstance(shape, Tensor):
            rank = shape.shape[0] if shape.shape.rank else None
            dense_shape = convert_to_tensor(shape, dtype=dtypes.int64)
        else:
            dims = TensorShape(shape)
            rank = dims.rank
            if dims.rank is not None and dims.is_fully_defined():
                dense_shape = convert_to_tensor(np.asarray(dims.as_list(), np.int64),
                                                name=shape_name)
    if dense_shape is None:
        dense_shape = placeholder(dtypes.int64, shape=[rank], name=shape_name)
    values = placeholder(dtype, shape=[None],
                         name=None if name is None else name + "/values")
    indices = placeholder(dtypes.int64, shape=[None, rank],
                          name=None if name is None else name + "/indices")
    return SparseTensor(indices, values, dense_shape)


__all__ = [
    "SparseTensor",
    "SparseTensorValue",
    "convert_to_tensor_or_sparse_tensor",
    "is_sparse",
    "sparse_placeholder",
]
