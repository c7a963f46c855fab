"""``nd.distribute.experimental.partitioners``: TF2's partitioner classes, each
``partitioner(shape, dtype, axis=0)`` returning the number of shards per axis.

They also serve as TF1's ``get_variable(partitioner=...)``:

>>> import nbdist as nd
>>> P = nd.distribute.experimental.partitioners
>>> P.FixedShardsPartitioner(3)(nd.TensorShape([10, 4]), nd.float32)
[3, 1]
>>> P.MaxSizePartitioner(max_shard_bytes=16)(nd.TensorShape([10, 4]), nd.float32)
[10, 1]
"""

from __future__ import annotations

from nbdist.ops.partitioned_variables import (min_max_variable_partitioner,
                                              variable_axis_size_partitioner)
from nbdist.framework.tensor_shape import as_shape

__all__ = ["FixedShardsPartitioner", "MaxSizePartitioner", "MinSizePartitioner",
           "Partitioner"]


class Partitioner:
    """Base class: ``__call__(shape, dtype, axis=0)`` -> shards per axis."""

    def __call__(self, shape, dtype, axis=0):
        raise NotImplementedError


class FixedShardsPartitioner(Partitioner):
    """``num_shards`` shards along ``axis`` (fewer when the axis is shorter)."""

    def __init__(self, num_shards):
        self._num_shards = num_shards

    def __call__(self, shape, dtype, axis=0):
        del dtype
        dims = as_shape(shape).as_list()
        result = [1] * len(dims)
        result[axis] = min(self._num_shards, dims[axis])
        return result


def _positive(name, value, sep=":"):
    if value < 1:
        raise ValueError(f"Argument `{name}` must be positive. Received{sep} {value}")


class MinSizePartitioner(Partitioner):
    """As many shards as keep each at least ``min_shard_bytes``, at most
    ``max_shards``."""

    def __init__(self, min_shard_bytes=256 << 10, max_shards=1, bytes_per_string=16):
        _positive("min_shard_bytes", min_shard_bytes)
        _positive("max_shards", max_shards)
        _positive("bytes_per_string", bytes_per_string)
        self._min_shard_bytes = min_shard_bytes
        self._max_shards = max_shards
        self._bytes_per_string = bytes_per_string

    def __call__(self, shape, dtype, axis=0):
        return min_max_variable_partitioner(
            max_partitions=self._max_shards, axis=axis,
            min_slice_size=self._min_shard_bytes,
            bytes_per_string_element=self._bytes_per_string)(shape=shape, dtype=dtype)


class MaxSizePartitioner(Partitioner):
    """As few shards as keep each at most ``max_shard_bytes`` (at most
    ``max_shards`` when given)."""

    def __init__(self, max_shard_bytes, max_shards=None, bytes_per_string=16):
        _positive("max_shard_bytes", max_shard_bytes, sep="")
        if max_shards is not None:
            _positive("max_shards", max_shards)
        _positive("bytes_per_string", bytes_per_string)
        self._max_shard_bytes = max_shard_bytes
        self._max_shards = max_shards
        self._bytes_per_string = bytes_per_string

    def __call__(self, shape, dtype, axis=0):
        return variable_axis_size_partitioner(
            max_shard_bytes=self._max_shard_bytes, max_shards=self._max_shards,
            bytes_per_string_element=self._bytes_per_string,
            axis=axis)(shape=shape, dtype=dtype)
