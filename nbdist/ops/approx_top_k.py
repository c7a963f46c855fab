"""``approx_top_k`` (TF's ``tf.approx_top_k``, the ``ApproxTopK`` op): the
``k`` largest (or smallest) values along one dimension and their indices.

TF's CPU kernel is exact, so is nbdist's: it is ``top_k`` along
``reduction_dimension`` (largest first; for ``is_max_k=False`` smallest first).
``recall_target`` and the other accelerator hints are accepted and checked.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.approx_top_k([[3.0, 1.0, 4.0, 1.0, 5.0]], 2))
ApproxTopK(values=array([[5., 4.]], dtype=float32), indices=array([[4, 2]], dtype=int32))
"""

from __future__ import annotations

import collections

from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.ops import array_ops as A
from nbdist.ops import math_ops as M
from nbdist.ops.nn_norm_ops import top_k

ApproxTopK = collections.namedtuple("ApproxTopK", ["values", "indices"])


def approx_top_k(input, k, reduction_dimension=-1, recall_target=0.95,
                 is_max_k=True, reduction_input_size_override=-1,
                 aggregate_to_topk=True, name=None):
    """(values, indices) of the ``k`` largest (``is_max_k``) or smallest values
    of ``input`` along ``reduction_dimension``."""
    if not 0.0 < recall_target <= 1.0:
        raise ValueError(f"ApproxTopK: recall_target must be in (0, 1], got "
                         f"{recall_target}")
    if int(k) < 0:
        raise ValueError(f"ApproxTopK: k must be non-negative, got {k}")
    del reduction_input_size_override, aggregate_to_topk  # accelerator hints
    with op_scope(name, "ApproxTopK", [input]):
        x = convert_to_tensor(input, name="input")
        rank = x.shape.rank
        if rank is None:
            raise ValueError("ApproxTopK: input must have a known rank")
        dim = reduction_dimension % rank
        perm = list(range(rank))
        perm[dim], perm[-1] = perm[-1], perm[dim]
        moved = A.transpose(x, perm) if dim != rank - 1 else x
        values, indices = top_k(moved if is_max_k else M.negative(moved), int(k))
        if not is_max_k:
            values = M.negative(values)
        if dim != rank - 1:
            values, indices = A.transpose(values, perm), A.transpose(indices, perm)
        return ApproxTopK(values, indices)
