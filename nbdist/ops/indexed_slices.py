"""``IndexedSlices``: a sparse set of rows of a dense tensor, the gradient of
``gather`` and ``embedding_lookup``.

``IndexedSlices(values, indices, dense_shape)`` stands for the tensor of shape
``dense_shape`` whose row ``indices[i]`` is ``values[i]`` (rows named twice
add up) and whose other rows are zero. Optimizers apply such a gradient with
a scatter into the rows it names, on the variable's task, so a step moves the
rows of the batch rather than the whole table. Anything else that needs a
dense tensor converts it (``convert_to_tensor``), with TF's warning when the
result may be large.

>>> import nbdist as nd, numpy as np
>>> table = nd.Variable(np.ones((4, 2), np.float32))
>>> (g,) = nd.gradients(nd.reduce_sum(nd.gather(table, [3, 1, 3])), [table])
>>> isinstance(g, nd.IndexedSlices)
True
>>> with nd.Session() as s:
...     s.run(table.initializer)
...     s.run(nd.convert_to_tensor(g)).tolist()
[[0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]
"""

from __future__ import annotations

import collections
import warnings

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.ops import (
    Tensor,
    _static_value,
    convert_to_tensor,
    register_tensor_conversion_function,
)

# As TF: densifying a gradient of at least this many elements warns.
_LARGE_SPARSE_NUM_ELEMENTS = 100000000


class IndexedSlices:
    """Rows ``values`` at positions ``indices`` of a tensor of ``dense_shape``
    (TF's ``tf.IndexedSlices``)."""

    def __init__(self, values, indices, dense_shape=None):
        self._values = values
        self._indices = indices
        self._dense_shape = dense_shape

    @property
    def values(self) -> Tensor:
        return self._values

    @property
    def indices(self) -> Tensor:
        return self._indices

    @property
    def dense_shape(self):
        return self._dense_shape

    @property
    def name(self) -> str:
        return self._values.name

    @property
    def device(self) -> str:
        return self._values.device

    @property
    def op(self):
        return self._values.op

    @property
    def dtype(self):
        return self._values.dtype

    @property
    def graph(self):
        return self._values.graph

    @property
    def shape(self):
        from nbdist.framework.tensor_shape import TensorShape

        v = None if self._dense_shape is None else _static_value(self._dense_shape)
        if v is not None:
            return TensorShape([int(d) for d in np.ravel(v)])
        return TensorShape([None]).concatenate(self._values.shape[1:])

    def get_shape(self):
        return self.shape

    def __neg__(self):
        from nbdist.ops.math_ops_elementwise import negative

        return IndexedSlices(negative(self._values), self._indices, self._dense_shape)

    def __str__(self):
        shape = ("" if self._dense_shape is None
                 else f", dense_shape={self._dense_shape}")
        return f"IndexedSlices(indices={self._indices}, values={self._values}{shape})"

    __repr__ = __str__

    # -- fetch / feed in a Session (see nbdist/runtime/session.py) --------------
    def _session_fetch_components(self):
        parts = [self._values, self._indices]
        if self._dense_shape is not None:
            parts.append(self._dense_shape)
        return parts

    def _session_fetch_value(self, arrays):
        dense = arrays[2] if len(arrays) > 2 else None
        return IndexedSlicesValue(arrays[0], arrays[1], dense)

    def _session_feed_components(self, value):
        # As TF: an IndexedSlicesValue or a tuple (values, indices[, dense_shape]).
        if isinstance(value, IndexedSlices):
            raise TypeError("The value of a feed cannot be a nd.IndexedSlices object.")
        if not isinstance(value, tuple) or len(value) not in (2, 3):
            raise TypeError(f"An IndexedSlices feed must be an IndexedSlicesValue or "
                            f"a tuple (values, indices[, dense_shape]), got "
                            f"{value!r:.80}")
        return list(zip(self._session_fetch_components(), value))


IndexedSlicesValue = collections.namedtuple(
    "IndexedSlicesValue", ["values", "indices", "dense_shape"])
IndexedSlicesValue.__doc__ = "A fetched ``IndexedSlices``: NumPy arrays."


def _to_dense(value: IndexedSlices, dtype=None, name=None, as_ref=False):
    del as_ref
    if dtype is not None and not dtype.is_compatible_with(value.dtype):
        raise ValueError(f"Tensor conversion requested dtype {dtype.name} for "
                         f"IndexedSlices with dtype {value.dtype.name}")
    if value.dense_shape is None:
        raise ValueError("Tensor conversion requested for IndexedSlices without "
                         f"dense_shape: {value}")
    known = _static_value(value.dense_shape)
    if known is not None:
        num_elements = int(np.prod(known))
        if num_elements >= _LARGE_SPARSE_NUM_ELEMENTS:
            warnings.warn(f"Converting sparse IndexedSlices to a dense Tensor with "
                          f"{num_elements} elements. This may consume a large "
                          "amount of memory.", UserWarning, stacklevel=3)
    elif value.dense_shape.op.type != "VariableShape":
        warnings.warn(f"Converting sparse IndexedSlices({value}) to a dense Tensor "
                      "of unknown shape. This may consume a large amount of memory.",
                      UserWarning, stacklevel=3)
    return to_dense(value, name=name)


def to_dense(value: IndexedSlices, name=None):
    """The dense tensor ``value`` stands for, without the size warning (for
    a gradient flowing into an op, whose output had that size already)."""
    from nbdist.ops.array_ops import gather
    from nbdist.ops.nn_ops import unsorted_segment_sum

    if value.dense_shape is None:
        raise ValueError("Tensor conversion requested for IndexedSlices without "
                         f"dense_shape: {value}")

    rows = gather(value.dense_shape, 0)
    return unsorted_segment_sum(value.values, value.indices, rows, name=name)


register_tensor_conversion_function(IndexedSlices, _to_dense)


def convert_to_tensor_or_indexed_slices(value, dtype=None, name=None):
    """``value`` itself when it is an ``IndexedSlices``, else as a Tensor."""
    if isinstance(value, IndexedSlices):
        if dtype is not None and not dtypes.as_dtype(dtype).is_compatible_with(
                value.dtype):
            raise ValueError(f"Tensor conversion requested dtype {dtype} for "
                             f"IndexedSlices with dtype {value.dtype.name}")
        return value
    return convert_to_tensor(value, dtype=dtype, name=name)


def as_indexed_slices(x) -> IndexedSlices:
    """A dense tensor as the ``IndexedSlices`` of all its rows (TF's
    ``_as_indexed_slices``)."""
    from nbdist.ops.array_ops import range as range_
    from nbdist.ops.array_ops import shape

    if isinstance(x, IndexedSlices):
        return x
    x = convert_to_tensor(x)
    dims = x.shape
    if dims.rank is not None and dims.is_fully_defined():
        from nbdist.framework.constant_op import constant

        dense_shape = constant(dims.as_list(), dtype=dtypes.int32)
        rows = range_(dims[0])
    else:
        dense_shape = shape(x)
        from nbdist.ops.array_ops import gather

        rows = range_(gather(dense_shape, 0))
    return IndexedSlices(x, rows, dense_shape)


def aggregate_indexed_slices(grads: list) -> IndexedSlices:
    """Several gradients (some ``IndexedSlices``) as one: the slices
    concatenated, as TF sums the gradients reaching one tensor."""
    from nbdist.ops.array_ops import concat
    from nbdist.ops.math_ops_elementwise import cast

    slices = [as_indexed_slices(g) for g in grads if g is not None]
    if len(slices) == 1:
        return slices[0]
    index_dtypes = {s.indices.dtype.base_dtype for s in slices}
    indices = [s.indices for s in slices]
    if len(index_dtypes) > 1:
        indices = [cast(i, dtypes.int64) for i in indices]
    dense_shape = next((s.dense_shape for s in slices if s.dense_shape is not None),
                       None)
    return IndexedSlices(concat([s.values for s in slices], 0),
                         concat(indices, 0), dense_shape)


def deduplicate_indexed_slices(values, indices):
    """(summed values, unique indices): the rows named twice added together,
    in order of first appearance (TF's ``_deduplicate_indexed_slices``)."""
    from nbdist.ops.array_ops import shape
    from nbdist.ops.nn_ops import unsorted_segment_sum
    from nbdist.ops.sparse_ops import unique

    unique_indices, positions = unique(indices)
    from nbdist.ops.array_ops import gather

    summed = unsorted_segment_sum(values, positions, gather(shape(unique_indices), 0))
    return summed, unique_indices


def gate(grads):
    """``control_flow_ops.tuple`` over ``grads`` (None, tensors or
    ``IndexedSlices``, whose values and indices are gated)."""
    from nbdist.ops.control_flow_ops import tuple as tuple_

    flat = []
    for g in grads:
        flat.extend([g.values, g.indices] if isinstance(g, IndexedSlices) else [g])
    gated = iter(tuple_(flat))
    out = []
    for g in grads:
        if isinstance(g, IndexedSlices):
            out.append(IndexedSlices(next(gated), next(gated), g.dense_shape))
        else:
            out.append(next(gated))
    return out


__all__ = [
    "IndexedSlices",
    "IndexedSlicesValue",
    "aggregate_indexed_slices",
    "as_indexed_slices",
    "convert_to_tensor_or_indexed_slices",
    "deduplicate_indexed_slices",
]
