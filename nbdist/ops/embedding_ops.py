"""``embedding_lookup``: rows of a (possibly partitioned) embedding table.

Over several shards (a list, or a ``PartitionedVariable``) each id is assigned
to one shard (``"mod"``: ``id % n``; ``"div"``: contiguous ranges, the first
``total % n`` shards one row longer), each shard gathers its rows where it
lives (colocated with the shard, so only the rows asked for cross the wire),
and the results are put back in the order of ``ids``. TF does the assignment
with ``DynamicPartition`` and the reassembly with ``DynamicStitch``; nbdist
uses ``Where`` + ``Gather`` and one ``UnsortedSegmentSum`` (each position is in
exactly one shard, so the sum is the stitch). The gradient for each shard is
an ``IndexedSlices`` of the rows the shard served, so an optimizer updates
just those rows, on the shard's task.

>>> import nbdist as nd, numpy as np
>>> table = np.arange(10.0).reshape(5, 2)
>>> shards = [nd.constant(table[0::2]), nd.constant(table[1::2])]  # "mod"
>>> with nd.Session() as s:
...     s.run(nd.nn.embedding_lookup(shards, [4, 1, 0])).tolist()
[[8.0, 9.0], [2.0, 3.0], [0.0, 1.0]]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.constant_op import constant, identity
from nbdist.ops.array_ops import concat, gather, reshape, shape, size, where
from nbdist.ops.clip_ops import clip_by_norm
from nbdist.ops.math_ops_elementwise import (
    cast,
    equal,
    floordiv,
    floormod,
    less,
    maximum,
    subtract,
)
from nbdist.ops.nn_ops import unsorted_segment_sum
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.ops.partitioned_variables import PartitionedVariable


def _clip(params, ids, max_norm):
    # Each embedding (the trailing dims past those of ids) scaled to max_norm.
    if max_norm is None:
        return params
    ids_rank, params_rank = ids.shape.rank, params.shape.rank
    if ids_rank is None or params_rank is None:
        raise ValueError("embedding_lookup with max_norm needs ids and params of "
                         f"known rank, got {ids.shape} and {params.shape}")
    return clip_by_norm(params, max_norm, axes=list(range(ids_rank, params_rank)))


def _assign_div(flat_ids, params, g):
    """(shard, id within the shard) of each id for the "div" strategy."""
    n = len(params)
    dims = [p.shape[0] for p in params]
    if all(d is not None for d in dims):
        total = constant(sum(dims), dtype=flat_ids.dtype)
    else:
        sizes = []
        for p in params:
            with g.colocate_with(p.op):
                sizes.append(cast(gather(shape(p), 0), flat_ids.dtype))
        total = sizes[0]
        for s in sizes[1:]:
            total = total + s
    ids_per_partition = floordiv(total, n)
    extras = floormod(total, n)
    assignments = maximum(floordiv(flat_ids, ids_per_partition + 1),
                          floordiv(subtract(flat_ids, extras), ids_per_partition))
    new_ids = where(less(assignments, extras),
                    floormod(flat_ids, ids_per_partition + 1),
                    floormod(subtract(flat_ids, extras), ids_per_partition))
    return assignments, new_ids


def embedding_lookup(params, ids, partition_strategy="mod", name=None,
                     validate_indices=True, max_norm=None):
    """The rows of ``params`` at ``ids``: ``params`` is a tensor, a variable, a
    list of shards (of the same trailing shape) or a ``PartitionedVariable``.

    ``partition_strategy`` ("mod" or "div") says which shard holds which id
    (TF1's meaning); ``max_norm`` clips each embedding's L2 norm.
    """
    del validate_indices
    if params is None:
        raise ValueError("embedding_lookup: params must be specified")
    if isinstance(params, PartitionedVariable):
        params = list(params)
    elif not isinstance(params, (list, tuple)):
        params = [params]
    params = list(params)
    if not params:
        raise ValueError("embedding_lookup: need at least one param")
    if partition_strategy not in ("mod", "div"):
        raise ValueError(f"embedding_lookup: unrecognized partition strategy: "
                         f"{partition_strategy!r} (expected 'mod' or 'div')")
    g = get_default_graph()
    with g.name_scope(name or "embedding_lookup") as scope:
        params = [convert_to_tensor(p, name="params") for p in params]
        ids = convert_to_tensor(ids, name="ids")
        if not ids.dtype.is_integer:
            raise TypeError(f"embedding_lookup: ids must be integers, got "
                            f"{ids.dtype.name}")
        if len(params) == 1:
            with g.colocate_with(params[0].op):
                result = _clip(gather(params[0], ids, name=scope), ids, max_norm)
            return identity(result)
        n = len(params)
        flat_ids = reshape(ids, [-1])
        if partition_strategy == "mod":
            assignments = floormod(flat_ids, n)
            new_ids = floordiv(flat_ids, n)
        else:
            assignments = _assign_div(flat_ids, params, g)
            assignments, new_ids = assignments
        assignments = cast(assignments, dtypes.int32)
        positions, rows = [], []
        for p, shard in enumerate(params):
            where_p = reshape(where(equal(assignments, p)), [-1])
            positions.append(where_p)
            ids_p = gather(new_ids, where_p)
            with g.colocate_with(shard.op):
                rows.append(gather(shard, ids_p))
        element_shape = params[0].shape[1:]
        for shard in params[1:]:
            element_shape = element_shape.merge_with(shard.shape[1:])
        stitched = unsorted_segment_sum(concat(rows, 0), concat(positions, 0),
                                        size(flat_ids))
        if element_shape.is_fully_defined():
            element_dims = constant(element_shape.as_list(), dtype=dtypes.int32)
        else:
            with g.colocate_with(params[0].op):
                element_dims = shape(params[0])[1:]
        ret = reshape(stitched, concat([shape(ids), element_dims], 0))
        ret.set_shape(ids.shape.concatenate(element_shape))
        return identity(_clip(ret, ids, max_norm), name=scope)


__all__ = ["embedding_lookup"]
