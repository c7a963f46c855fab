"""Segment reductions: ``segment_sum/mean/max/min/prod`` (sorted ids, one per row
of ``data``), ``unsorted_segment_max/min/prod`` (any ids, ``num_segments``
rows out; ``unsorted_segment_sum`` is ``nn_ops``' op), the composites
``unsorted_segment_mean``/``unsorted_segment_sqrt_n`` and
``sparse_segment_sum/mean/sqrt_n``. Gradients: ``segment_grad``.

Empty segments are 0 in the sorted ops; in the unsorted ones they are the
reduction's identity (0, 1, the dtype's lowest or highest value), as TF.

>>> import nbdist as nd
>>> y = nd.segment_sum([[1, 2], [3, 4], [5, 6]], [0, 0, 1])
>>> with nd.Session() as s:
...     s.run(y).tolist()
[[4, 6], [5, 6]]
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import INDEX, NUMERIC, check_type, op_scope
from nbdist.framework.constant_op import identity
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops as A
from nbdist.ops import math_ops as M
from nbdist.ops.nn_ops import _segment_sum_infer, unsorted_segment_sum

_ATTRS = {"T": ("type", None), "Tindices": ("type", None)}
SORTED_OPS = {"SegmentSum": "segment_sum", "SegmentMean": "segment_mean",
              "SegmentMax": "segment_max", "SegmentMin": "segment_min",
              "SegmentProd": "segment_prod"}
UNSORTED_OPS = {"UnsortedSegmentMax": "unsorted_segment_max",
                "UnsortedSegmentMin": "unsorted_segment_min",
                "UnsortedSegmentProd": "unsorted_segment_prod"}


def _sorted_infer(c):
    check_type(c, 0, NUMERIC, "data")
    check_type(c, 1, INDEX, "segment_ids")
    data, ids = c.shape(0), c.shape(1)
    if ids.rank is not None and ids.rank != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {ids.rank} "
                         f"(input 'segment_ids')")
    data = data.with_rank_at_least(1)
    if data.rank is not None and ids.rank is not None and (
            not data[:1].is_compatible_with(ids)):
        raise ValueError(f"Dimensions must be equal, but are {data[0]} and "
                         f"{ids[0]}")
    value = c.constant(1)
    rows = None
    if value is not None:
        value = np.asarray(value)
        rows = int(value[-1]) + 1 if value.size else 0
    if data.rank is None:
        return [(c.dtype(0), TensorShape(None))]
    return [(c.dtype(0), TensorShape([rows]).concatenate(data[1:]))]


def _unsorted_infer(c):
    check_type(c, 0, NUMERIC, "data")
    check_type(c, 1, INDEX, "segment_ids")
    n = c.constant(2)
    if n is not None and int(np.asarray(n)) < 0:
        raise ValueError(f"Dimension size, given by scalar input 2, must be "
                         f"non-negative but is {int(np.asarray(n))}")
    return _segment_sum_infer(c)


for _t in SORTED_OPS:
    register_op(_t, _sorted_infer, attrs=_ATTRS, num_inputs=2)
for _t in UNSORTED_OPS:
    register_op(_t, _unsorted_infer,
                attrs=dict(_ATTRS, Tnumsegments=("type", dtypes.int32)),
                num_inputs=3)


def _segment_op(op_type, data, segment_ids, name, num_segments=None):
    inputs = [data, segment_ids] + ([] if num_segments is None else [num_segments])
    with op_scope(name, op_type, inputs) as (g, scope):
        data = convert_to_tensor(data, name="data")
        ids = convert_to_tensor(segment_ids, name="segment_ids")
        attrs = {"T": data.dtype.base_dtype, "Tindices": ids.dtype.base_dtype}
        ins = [data, ids]
        if num_segments is not None:
            n = convert_to_tensor(num_segments, name="num_segments")
            attrs["Tnumsegments"] = n.dtype.base_dtype
            ins.append(n)
        return g.create_op(op_type, ins, attrs, name=scope).outputs[0]


def segment_sum(data, segment_ids, name=None):
    """``out[i] = sum(data[j] for j with segment_ids[j] == i)``; ``segment_ids``
    is sorted, one per row of ``data``, and ``out`` has ``segment_ids[-1] + 1``
    rows."""
    return _segment_op("SegmentSum", data, segment_ids, name)


def segment_mean(data, segment_ids, name=None):
    """The mean of each segment (see :func:`segment_sum`); integer means round
    toward zero."""
    return _segment_op("SegmentMean", data, segment_ids, name)


def segment_max(data, segment_ids, name=None):
    """The maximum of each segment (see :func:`segment_sum`); 0 for an empty one."""
    return _segment_op("SegmentMax", data, segment_ids, name)


def segment_min(data, segment_ids, name=None):
    """The minimum of each segment (see :func:`segment_sum`); 0 for an empty one."""
    return _segment_op("SegmentMin", data, segment_ids, name)


def segment_prod(data, segment_ids, name=None):
    """The product of each segment (see :func:`segment_sum`); 1 for an empty one."""
    return _segment_op("SegmentProd", data, segment_ids, name)


def unsorted_segment_max(data, segment_ids, num_segments, name=None):
    """``out[i] = max(data[j...] for j... with segment_ids[j...] == i)`` for i in
    ``range(num_segments)``: ``segment_ids`` (any order, a prefix of data's
    shape) out of range are an error, negative ones are dropped, and an empty
    segment is the dtype's lowest value."""
    return _segment_op("UnsortedSegmentMax", data, segment_ids, name, num_segments)


def unsorted_segment_min(data, segment_ids, num_segments, name=None):
    """As :func:`unsorted_segment_max`, with the minimum (the highest value for
    an empty segment)."""
    return _segment_op("UnsortedSegmentMin", data, segment_ids, name, num_segments)


def unsorted_segment_prod(data, segment_ids, num_segments, name=None):
    """As :func:`unsorted_segment_max`, with the product (1 for an empty one)."""
    return _segment_op("UnsortedSegmentProd", data, segment_ids, name, num_segments)


def _segment_sizes(data, segment_ids, num_segments):
    """How many rows each segment has (at least 1), shaped to broadcast against
    a ``[num_segments, ...]`` result."""
    ids = convert_to_tensor(segment_ids)
    ones = A.ones(A.shape(ids), dtype=data.dtype.base_dtype)
    n = unsorted_segment_sum(ones, ids, num_segments)
    extra = data.shape.rank - ids.shape.rank if (
        data.shape.rank is not None and ids.shape.rank is not None) else None
    if extra is None:
        extra_t = M.subtract(A.rank(data), A.rank(ids))
        shape = A.concat([A.shape(n), A.ones(A.expand_dims(extra_t, 0),
                                             dtype=dtypes.int32)], 0)
    else:
        shape = A.concat([A.shape(n), A.ones([extra], dtype=dtypes.int32)], 0)
    n = A.reshape(n, shape)
    return M.maximum(n, convert_to_tensor(1, dtype=data.dtype.base_dtype))


def unsorted_segment_mean(data, segment_ids, num_segments, name=None):
    """The mean of each segment (see :func:`unsorted_segment_max`); 0 for an empty
    one. Integers are divided as :func:`nd.truediv` divides them."""
    with op_scope(name, "UnsortedSegmentMean", [data, segment_ids]) as (_g, scope):
        data = convert_to_tensor(data, name="data")
        total = unsorted_segment_sum(data, segment_ids, num_segments)
        return M.truediv(total, _segment_sizes(data, segment_ids, num_segments),
                         name=scope)


def unsorted_segment_sqrt_n(data, segment_ids, num_segments, name=None):
    """Each segment's sum divided by the square root of its size (0 for an empty
    one)."""
    with op_scope(name, "UnsortedSegmentSqrtN", [data, segment_ids]) as (_g, scope):
        data = convert_to_tensor(data, name="data")
        total = unsorted_segment_sum(data, segment_ids, num_segments)
        n = _segment_sizes(data, segment_ids, num_segments)
        return M.truediv(total, M.sqrt(n), name=scope)


def _sparse_segment(data, indices, segment_ids, num_segments, name, default, scale):
    with op_scope(name, default, [data, indices, segment_ids]) as (_g, scope):
        data = convert_to_tensor(data, name="data")
        rows = A.gather(data, indices)
        if num_segments is None:
            total = segment_sum(rows, segment_ids)
            n = A.shape(total)[0]
        else:
            total = unsorted_segment_sum(rows, segment_ids, num_segments)
            n = num_segments
        if scale is None:
            return identity(total, name=scope)
        return M.truediv(total, scale(_segment_sizes(rows, segment_ids, n)),
                         name=scope)


def sparse_segment_sum(data, indices, segment_ids, name=None, num_segments=None,
                       sparse_gradient=False):
    """:func:`segment_sum` of ``gather(data, indices)``: ``segment_ids`` sorted
    unless ``num_segments`` is given. ``data``'s gradient is ``IndexedSlices``
    (``gather``'s) whatever ``sparse_gradient`` says; it converts to a dense
    tensor where one is needed."""
    del sparse_gradient
    return _sparse_segment(data, indices, segment_ids, num_segments, name,
                           "SparseSegmentSum", None)


def sparse_segment_mean(data, indices, segment_ids, name=None, num_segments=None,
                        sparse_gradient=False):
    """As :func:`sparse_segment_sum`, divided by each segment's size."""
    del sparse_gradient
    return _sparse_segment(data, indices, segment_ids, num_segments, name,
                           "SparseSegmentMean", lambda n: n)


def sparse_segment_sqrt_n(data, indices, segment_ids, name=None,
                          num_segments=None, sparse_gradient=False):
    """As :func:`sparse_segment_sum`, divided by the square root of each segment's
    size."""
    del sparse_gradient
    return _sparse_segment(data, indices, segment_ids, num_segments, name,
                           "SparseSegmentSqrtN", M.sqrt)


__all__ = [
    "segment_max", "segment_mean", "segment_min", "segment_prod", "segment_sum",
    "sparse_segment_mean", "sparse_segment_sqrt_n", "sparse_segment_sum",
    "unsorted_segment_max", "unsorted_segment_mean", "unsorted_segment_min",
    "unsorted_segment_prod", "unsorted_segment_sqrt_n", "unsorted_segment_sum",
]
