"""``nd.sparse``: the sparse tensor API under TF2's names (``tf.sparse``).

>>> import nbdist as nd
>>> sp = nd.sparse.SparseTensor([[0, 1]], [5.0], [2, 2])
>>> with nd.Session() as s:
...     s.run(nd.sparse.to_dense(sp)).tolist()
[[0.0, 5.0], [0.0, 0.0]]
"""

from __future__ import annotations

from nbdist.ops.sparse_ops import (
    sparse_concat,
    sparse_reduce_sum,
    sparse_tensor_dense_matmul,
    sparse_tensor_to_dense,
)
from nbdist.framework.sparse_tensor import (
    SparseTensor,
    SparseTensorValue,
    sparse_placeholder,
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
    "SparseTensor",
    "SparseTensorValue",
    "concat",
    "matmul",
    "placeholder",
    "reduce_sum",
    "sparse_dense_matmul",
    "to_dense",
]
