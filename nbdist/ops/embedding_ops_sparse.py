"""``embedding_lookup_sparse`` and ``safe_embedding_lookup_sparse``: one
combined embedding per row of a ``SparseTensor`` of ids (TF1's functions).

Row ``r`` of the result combines the embeddings of the ids in row ``r`` of
``sp_ids``, weighted by ``sp_weights`` (1 when None): ``"sum"``, ``"mean"``
(divided by the sum of the weights) or ``"sqrtn"`` (by the root of the sum of
their squares). The distinct ids are looked up once (``embedding_lookup``, so
a partitioned table works, each shard serving its rows), and the gradient for
the table is an ``IndexedSlices`` of those rows.

>>> import nbdist as nd, numpy as np
>>> table = nd.constant(np.arange(6.0).reshape(3, 2))
>>> ids = nd.SparseTensor([[0, 0], [0, 1], [1, 0]], [0, 2, 1], [2, 2])
>>> with nd.Session() as s:
...     s.run(nd.nn.embedding_lookup_sparse(table, ids, None)).tolist()
[[2.0, 3.0], [2.0, 3.0]]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.ops.array_ops import (
    concat,
    expand_dims,
    gather,
    ones_like,
    reshape,
    shape,
    where,
)
from nbdist.ops.embedding_ops import embedding_lookup
from nbdist.ops.math_ops_elementwise import (
    cast,
    equal,
    greater,
    greater_equal,
    logical_and,
    sqrt,
    truediv,
)
from nbdist.ops.math_ops_reduction import reduce_max
from nbdist.ops.nn_ops import unsorted_segment_sum
from nbdist.framework.ops import get_default_graph
from nbdist.ops.sparse_ops import unique
from nbdist.framework.sparse_tensor import SparseTensor

_COMBINERS = ("mean", "sqrtn", "sum")


def _check(sp_ids, sp_weights, combiner, what):
    if combiner not in _COMBINERS:
        raise ValueError("combiner must be one of 'mean', 'sqrtn' or 'sum'")
    if not isinstance(sp_ids, SparseTensor):
        raise TypeError(f"{what}: sp_ids must be SparseTensor, got {sp_ids!r:.80}")
    if sp_weights is not None and not isinstance(sp_weights, SparseTensor):
        raise TypeError(f"{what}: sp_weights must be either None or SparseTensor")


def _as_params(params):
    from nbdist.ops.partitioned_variables import PartitionedVariable

    if isinstance(params, PartitionedVariable):
        return list(params)
    return list(params) if isinstance(params, (list, tuple)) else [params]


def _combine(params, segment_ids, ids, weights, num_rows, combiner,
             partition_strategy, max_norm, empty_is_zero):
    """The combined embeddings, one per segment in ``[0, num_rows)``."""
    unique_ids, idx = unique(ids)
    emb = embedding_lookup(params, unique_ids, partition_strategy=partition_strategy,
                           max_norm=max_norm)
    emb = gather(emb, idx)
    if weights is None:
        weights = cast(ones_like(ids), emb.dtype.base_dtype)
    else:
        weights = cast(weights, emb.dtype.base_dtype)
    rank = emb.shape.rank
    if rank is None:
        raise ValueError("embedding_lookup_sparse needs params of known rank")
    bcast = reshape(weights, concat([shape(weights), [1] * (rank - 1)], 0))
    summed = unsorted_segment_sum(emb * bcast, segment_ids, num_rows)
    if combiner == "sum":
        return summed
    w = bcast if combiner == "mean" else bcast * bcast
    total = unsorted_segment_sum(w, segment_ids, num_rows)
    if combiner == "sqrtn":
        total = sqrt(total)
    if empty_is_zero:
        # A row with no entries (or weights summing to 0) combines to zeros.
        total = where(equal(total, 0), ones_like(total), total)
    return truediv(summed, total)


def embedding_lookup_sparse(params, sp_ids, sp_weights, partition_strategy="mod",
                            name=None, combiner="mean", max_norm=None):
    """The combined embedding of each row of the int ``SparseTensor``
    ``sp_ids`` (``[batch, ?]``) from the table
    ``params`` (a tensor, variable, list of shards or ``PartitionedVariable``).

    With weights, ``sp_weights`` has the indices of ``sp_ids``. The result
    has ``max(row with an id) + 1`` rows, as TF's ``segment_sum``.
    """
    if combiner is None:
        combiner = "mean"
    _check(sp_ids, sp_weights, combiner, "embedding_lookup_sparse")
    params = _as_params(params)
    g = get_default_graph()
    with g.name_scope(name or "embedding_lookup_sparse"):
        segment_ids = cast(sp_ids.indices[:, 0], dtypes.int32)
        num_rows = reduce_max(segment_ids) + 1
        weights = None if sp_weights is None else sp_weights.values
        return _combine(params, segment_ids, sp_ids.values, weights, num_rows,
                        combiner, partition_strategy, max_norm,
                        empty_is_zero=True)


def safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights=None,
                                 combiner="mean", default_id=None, name=None,
                                 partition_strategy="div", max_norm=None):
    """``embedding_lookup_sparse`` that tolerates bad input: ids < 0 (and
    entries of weight <= 0) are dropped, and a row left empty gets the
    embedding of ``default_id`` (zeros when None). ``sparse_ids`` is
    ``[batch, ?]``; the result has one row per batch row."""
    if combiner is None:
        combiner = "mean"
    _check(sparse_ids, sparse_weights, combiner, "safe_embedding_lookup_sparse")
    params = _as_params(embedding_weights)
    if not params:
        raise ValueError("Missing embedding_weights")
    rank = sparse_ids.shape.rank
    if rank not in (None, 2):
        raise NotImplementedError("safe_embedding_lookup_sparse supports sparse_ids "
                                  f"of rank 2 (got rank {rank})")
    g = get_default_graph()
    with g.name_scope(name or "embedding_lookup"):
        ids = sparse_ids.values
        keep = greater_equal(ids, 0)
        weights = None
        if sparse_weights is not None:
            keep = logical_and(keep, greater(sparse_weights.values, 0))
        kept = reshape(where(keep), [-1])
        ids = gather(ids, kept)
        if sparse_weights is not None:
            weights = gather(sparse_weights.values, kept)
        segment_ids = cast(gather(sparse_ids.indices[:, 0], kept), dtypes.int32)
        num_rows = cast(sparse_ids.dense_shape[0], dtypes.int32)
        result = _combine(params, segment_ids, ids, weights, num_rows, combiner,
                          partition_strategy, max_norm, empty_is_zero=True)
        counts = unsorted_segment_sum(ones_like(segment_ids), segment_ids, num_rows)
        empty = cast(expand_dims(equal(counts, 0), 1), result.dtype.base_dtype)
        if default_id is None:
            return result * (1 - empty)
        fallback = embedding_lookup(params, [default_id],
                                    partition_strategy=partition_strategy,
                                    max_norm=max_norm)
        return result * (1 - empty) + empty * fallback


__all__ = ["embedding_lookup_sparse", "safe_embedding_lookup_sparse"]
