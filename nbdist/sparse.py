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
from nbdist.ops.segment_ops import (
    sparse_segment_mean as segment_mean,
)
from nbdist.ops.segment_ops import (
    sparse_segment_sqrt_n as segment_sqrt_n,
)
from nbdist.ops.segment_ops import (
    sparse_segment_sum as segment_sum,
)
from nbdist.ops.sparse_ops import (
    sparse_concat,
    sparse_reduce_sum,
    sparse_tensor_dense_matmul,
    sparse_tensor_to_dense,
)
from nbdist.ops.sparse_ops_cross import (
    sparse_bincount as bincount,
)
from nbdist.ops.sparse_ops_cross import (
    sparse_cross as cross,
)
from nbdist.ops.sparse_ops_cross import (
    sparse_cross_hashed as cross_hashed,
)
from nbdist.ops.sparse_ops_derived import (
    expand_dims,
    eye,
    from_dense,
)
from nbdist.ops.sparse_ops_derived import (
    sparse_mask as mask,
)
from nbdist.ops.sparse_ops_derived import (
    sparse_merge as merge,
)
from nbdist.ops.sparse_ops_derived import (
    sparse_reset_shape as reset_shape,
)
from nbdist.ops.sparse_ops_derived import (
    sparse_retain as retain,
)
from nbdist.ops.sparse_ops_derived import (
    sparse_to_indicator as to_indicator,
)
from nbdist.ops.sparse_ops_derived import (
    sparse_transpose as transpose,
)
from nbdist.ops.sparse_ops_transform import (
    sparse_add as add,
)
from nbdist.ops.sparse_ops_transform import (
    sparse_fill_empty_rows as fill_empty_rows,
)
from nbdist.ops.sparse_ops_transform import (
    sparse_maximum as maximum,
)
from nbdist.ops.sparse_ops_transform import (
    sparse_minimum as minimum,
)
from nbdist.ops.sparse_ops_transform import (
    sparse_reduce_max as reduce_max,
)
from nbdist.ops.sparse_ops_transform import (
    sparse_reduce_max_sparse as reduce_max_sparse,
)
from nbdist.ops.sparse_ops_transform import (
    sparse_reduce_sum_sparse as reduce_sum_sparse,
)
from nbdist.ops.sparse_ops_transform import (
    sparse_reorder as reorder,
)
from nbdist.ops.sparse_ops_transform import (
    sparse_reshape as reshape,
)
from nbdist.ops.sparse_ops_transform import (
    sparse_slice as slice,
)
from nbdist.ops.sparse_ops_transform import (
    sparse_softmax as softmax,
)
from nbdist.ops.sparse_ops_transform import (
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
    "SparseConditionalAccumulator",
    "SparseTensor",
    "SparseTensorValue",
    "add",
    "bincount",
    "concat",
    "cross",
    "cross_hashed",
    "expand_dims",
    "eye",
    "fill_empty_rows",
    "from_dense",
    "mask",
    "matmul",
    "maximum",
    "merge",
    "minimum",
    "placeholder",
    "reduce_max",
    "reduce_max_sparse",
    "reduce_sum",
    "reduce_sum_sparse",
    "reorder",
    "reset_shape",
    "reshape",
    "retain",
    "segment_mean",
    "segment_sqrt_n",
    "segment_sum",
    "slice",
    "softmax",
    "sparse_dense_matmul",
    "split",
    "to_dense",
    "to_indicator",
    "transpose",
]
