"""``nd.sparse``: the sparse tensor API under TF2's names (``tf.sparse``).

>>> import nbdist as nd
>>> sp = nd.sparse.SparseTensor([[0, 1]], [5.0], [2, 2])
>>> with nd.Session() as s:
...     s.run(nd.sparse.to_dense(sp)).tolist()
[[0.0, 5.0], [0.0, 0.0]]
"""

from __future__ import annotations

from nbdist.framework.sparse_tensor import (
    SparseTensor,
    SparseTensorValue,
    sparse_placeholder,
)
from nbdist.ops.accumulator_ops import SparseConditionalAccumulator
from nbdist.ops.sparse_ops import (
    sparse_concat,
    sparse_reduce_sum,
    sparse_tensor_dense_matmul,
    sparse_tensor_to_dense,
)
from nbdist.ops.sparse_ops_cross import (
    sparse_bincount as bincount,
    sparse_cross as cross,
    sparse_cross_hashed as cross_hashed,
)
from nbdist.ops.sparse_ops_derived import (
    expand_dims,
    eye,
    from_dense,
    sparse_mask as mask,
    sparse_merge as merge,
    sparse_reset_shape as reset_shape,
    sparse_retain as retain,
    sparse_to_indicator as to_indicator,
    sparse_transpose as transpose,
)
from nbdist.ops.segment_ops import (
    sparse_segment_mean as segment_mean,
    sparse_segment_sqrt_n as segment_sqrt_n,
    sparse_segment_sum as segment_sum,
)
from nbdist.ops.sparse_ops_transform import (
    sparse_add as add,
    sparse_fill_empty_rows as fill_empty_rows,
    sparse_maximum as maximum,
    sparse_minimum as minimum,
    sparse_reduce_max as reduce_max,
    sparse_reduce_max_sparse as reduce_max_sparse,
    sparse_reduce_sum_sparse as reduce_sum_sparse,
    sparse_reorder as reorder,
    sparse_reshape as reshape,
    sparse_slice as slice,  # noqa: A004 - TF's name
    sparse_softmax as softmax,
    sparse_split as split,
)

to_dense = sparse_tensor_to_dense
reduce_sum = sparse_reduce_sum
sparse_dense_matmul = sparse_tensor_dense_matmul
matmul = sparse_tensor_dense_matmul
placeholder = sparse_placeholder


def concat(axis, sp_inputs, expand_nonconcat_dims=False, name=None):
    """``sparse_concat`` with TF2's argument order."""
    return sparse_concat(axis, sp_inputs, name=name,
                         expand_nonconcat_dim=expand_nonconcat_dims)


__all__ = [
    "SparseConditionalAccumulator", "SparseTensor", "SparseTensorValue", "add",
    "bincount", "cross", "cross_hashed",
    "concat", "expand_dims", "eye", "fill_empty_rows", "from_dense", "mask",
    "matmul", "maximum", "merge", "minimum", "placeholder", "reduce_max",
    "reduce_max_sparse", "reduce_sum", "reduce_sum_sparse", "reorder",
    "reset_shape", "reshape", "retain", "segment_mean", "segment_sqrt_n",
    "segment_sum", "slice", "softmax", "sparse_dense_matmul", "split", "to_dense",
    "to_indicator", "transpose",
]
