"""Partitioned variables: the partitioners, ``PartitionedVariable`` and the
slice bookkeeping (``SaveSliceInfo``) the ``Saver`` uses to save shards whole.

A partitioner is ``fn(shape, dtype) -> list`` of the number of shards along
each axis (only one axis may be > 1), exactly as TF1's. ``get_variable(...,
partitioner=fn)`` makes one variable per shard, ``<name>/part_<i>``; under a
``replica_device_setter`` each shard is a variable op, so the shards go round
robin over the ps tasks.

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     with nd.device(nd.train.replica_device_setter(ps_tasks=2)):
...         emb = nd.get_variable("emb", [10, 4],
...                               partitioner=nd.fixed_size_partitioner(3))
>>> [(v.op.name, v.shape.as_list(), v.device) for v in emb]  # doctest: +NORMALIZE_WHITESPACE
[('emb/part_0', [4, 4], '/job:ps/task:0'), ('emb/part_1', [3, 4], '/job:ps/task:1'),
 ('emb/part_2', [3, 4], '/job:ps/task:0')]
"""

from __future__ import annotations

import math

from nbdist.framework import dtypes
from nbdist.framework.constant_op import identity
from nbdist.ops.array_ops_join import concat, split
from nbdist.framework.ops import get_default_graph, register_tensor_conversion_function
from nbdist.framework.tensor_shape import TensorShape, as_shape


# -- partitioners (TF1's, formula for formula) -------------------------------------
def fixed_size_partitioner(num_shards, axis=0):
    """``num_shards`` shards along ``axis`` (fewer if the axis is shorter)."""

    def _partitioner(shape, **unused_args):
        shape = as_shape(shape)
        partitions_list = [1] * len(shape)
        partitions_list[axis] = min(num_shards, shape.dims[axis])
        return partitions_list

    return _partitioner


def variable_axis_size_partitioner(max_shard_bytes, axis=0,
                                   bytes_per_string_element=16, max_shards=None):
    """Shards along ``axis`` so that each holds at most ``max_shard_bytes``
    (at least one slice per shard; at most ``max_shards`` shards)."""
    if max_shard_bytes < 1 or bytes_per_string_element < 1:
        raise ValueError("Both max_shard_bytes and bytes_per_string_element must be "
                         "positive.")
    if max_shards and max_shards < 1:
        raise ValueError("max_shards must be positive.")

    def _partitioner(shape, dtype):
        if not isinstance(shape, TensorShape):
            raise ValueError(f"shape is not a TensorShape: {shape}")  # noqa: TRY004 - TF's
        if not shape.is_fully_defined():
            raise ValueError(f"shape is not fully defined: {shape}")
        if not isinstance(dtype, dtypes.DType):
            raise ValueError(f"dtype is not a DType: {dtype}")  # noqa: TRY004 - TF's
        element_size = (bytes_per_string_element
                        if dtype.base_dtype == dtypes.string else dtype.size)
        partitions = [1] * shape.rank
        bytes_per_slice = (1.0 * (shape.num_elements() / shape.dims[axis])
                           * element_size)
        slices_per_shard = max(1, math.floor(max_shard_bytes / bytes_per_slice))
        axis_shards = math.ceil(1.0 * shape.dims[axis] / slices_per_shard)
        if max_shards:
            axis_shards = min(max_shards, axis_shards)
        partitions[axis] = axis_shards
        return partitions

    return _partitioner


def min_max_variable_partitioner(max_partitions=1, axis=0, min_slice_size=256 << 10,
                                 bytes_per_string_element=16):
    """As many shards along ``axis`` as keep each at least ``min_slice_size``
    bytes, at most ``max_partitions`` (and the axis length)."""

    def _partitioner(shape, dtype):
        shape = as_shape(shape)
        if axis >= len(shape):
            raise ValueError(f"Can not partition variable along axis {axis} when "
                             f"shape is only {shape}")
        bytes_per_element = (bytes_per_string_element
                             if dtype.base_dtype == dtypes.string else dtype.size)
        total_size_bytes = shape.num_elements() * bytes_per_element
        partitions = total_size_bytes / min_slice_size
        partitions_list = [1] * len(shape)
        partitions_list[axis] = max(1, min(shape.dims[axis], max_partitions,
                                           math.ceil(partitions)))
        return partitions_list

    return _partitioner


# -- slices -----------------------------------------------------------------------
def slice_dim_and_num_slices(slicing):
    """(axis, count) of the one partitioned axis; (0, 1) when none is."""
    for slice_dim, num_slices in enumerate(slicing):
        if num_slices > 1:
            break
    else:
        return 0, 1
    for i in range(slice_dim + 1, len(slicing)):
        if slicing[i] != 1:
            raise ValueError(f"Can only slice a variable along one dimension: "
                             f"slicing: {list(slicing)}")
    return slice_dim, num_slices


def iter_slices(full_shape, num_slices, slice_dim):
    """(offset, shape) of each shard: the first ``n % k`` shards get one more."""
    num_slices_with_excess = full_shape[slice_dim] % num_slices
    offset = [0] * len(full_shape)
    min_slice_len = full_shape[slice_dim] // num_slices
    for i in range(num_slices):
        shape = list(full_shape)
        shape[slice_dim] = min_slice_len + int(i < num_slices_with_excess)
        yield offset[:], shape
        offset[slice_dim] += shape[slice_dim]


class SaveSliceInfo:
    """Where a shard sits in its full variable (``full_name``, ``full_shape``,
    ``var_offset``, ``var_shape``): the Saver writes shards as one array."""

    def __init__(self, full_name=None, full_shape=None, var_offset=None,
                 var_shape=None):
        self.full_name = full_name
        self.full_shape = list(full_shape)
        self.var_offset = list(var_offset)
        self.var_shape = list(var_shape)

    @property
    def spec(self) -> str:
        """TF's slice spec: ``"10 4 0,5:0,4"`` (full shape, offset,length per dim)."""
        dims = ":".join(f"{o},{n}" for o, n in zip(self.var_offset, self.var_shape))
        return " ".join(str(d) for d in self.full_shape) + " " + dims

    def to_dict(self) -> dict:
        return {"full_name": self.full_name, "full_shape": self.full_shape,
                "var_offset": self.var_offset, "var_shape": self.var_shape}

    @classmethod
    def from_dict(cls, d) -> SaveSliceInfo:
        return cls(d["full_name"], d["full_shape"], d["var_offset"], d["var_shape"])

    def __eq__(self, other):
        return isinstance(other, SaveSliceInfo) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"SaveSliceInfo({self.full_name!r}, {self.spec!r})"


class PartitionInfo:
    """What an initializer is told about the shard it initialises (TF's
    ``_PartitionInfo``): the full shape and the shard's offset."""

    def __init__(self, full_shape, var_offset):
        self.full_shape = list(full_shape)
        self.var_offset = list(var_offset)

    def single_offset(self, shape):
        dim = self.single_slice_dim(shape)
        return 0 if dim is None else self.var_offset[dim]

    def single_slice_dim(self, shape):
        shape = list(shape)
        for i, (full, n) in enumerate(zip(self.full_shape, shape)):
            if full != n:
                return i
        return None


# -- PartitionedVariable -------------------------------------------------------------
class PartitionedVariable:
    """The shards of one variable, usable as the whole (``as_tensor``
    concatenates them) or shard by shard (iteration, ``nd.nn.embedding_lookup``).

    >>> import nbdist as nd, numpy as np
    >>> with nd.Graph().as_default():
    ...     v = nd.get_variable("v", initializer=np.arange(6.0).reshape(3, 2),
    ...                         partitioner=nd.fixed_size_partitioner(2))
    ...     with nd.Session() as s:
    ...         _ = s.run(nd.global_variables_initializer())
    ...         len(v), s.run(nd.convert_to_tensor(v)).tolist()
    (2, [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    """

    def __init__(self, name, shape, dtype, variable_list, partitions):
        if not isinstance(variable_list, (list, tuple)):
            raise TypeError(f"variable_list is not a list or tuple: {variable_list}")
        if not isinstance(partitions, (list, tuple)):
            raise TypeError(f"partitions is not a list or tuple: {partitions}")
        if not all(p >= 1 for p in partitions):
            raise ValueError(f"partition values must be positive: {partitions}")
        if not variable_list:
            raise ValueError("variable_list may not be empty")
        for v in variable_list:
            if getattr(v, "_save_slice_info", None) is None:
                raise ValueError(f"All variables must have a save_slice_info "
                                 f"available: {v.name}")
        if len(shape) != len(partitions):
            raise ValueError(f"len(shape) != len(partitions): {shape} vs. "
                             f"{partitions}")
        self._variable_list = sorted(
            variable_list, key=lambda v: v._save_slice_info.var_offset)
        self._name = name
        self._shape = as_shape(shape)
        self._dtype = dtypes.as_dtype(dtype)
        self._partitions = list(partitions)
        self._as_tensor = None

    def __iter__(self):
        return iter(self._variable_list)

    def __len__(self):
        axes = self._partition_axes()
        if len(axes) > 1:
            raise ValueError(f"Cannot get a length for {len(axes)} > 1 partitioned "
                             "axes")
        return len(self._variable_list)

    def __getitem__(self, i):
        return self._variable_list[i]

    def _partition_axes(self):
        if all(p == 1 for p in self._partitions):
            return [0]
        return [i for i, p in enumerate(self._partitions) if p > 1]

    def _concat(self):
        g = get_default_graph()
        if len(self._variable_list) == 1:
            with g.name_scope(None):
                return identity(self._variable_list[0], name=self._name)
        with g.name_scope(self._name + "/ConcatPartitions/"):
            whole = concat([v.value() for v in self._variable_list],
                           self._partition_axes()[0])
        with g.name_scope(None):
            return identity(whole, name=self._name)

    def as_tensor(self):
        """The whole value: the shards concatenated (outside any control
        dependencies)."""
        with get_default_graph().control_dependencies(None):
            return self._concat()

    name = property(lambda self: self._name)
    dtype = property(lambda self: self._dtype)
    shape = property(lambda self: self._shape)
    graph = property(lambda self: self._variable_list[0].graph)
    op = property(lambda self: self._variable_list[0].op)

    def get_shape(self) -> TensorShape:
        return self._shape

    def _get_variable_list(self) -> list:
        return list(self._variable_list)

    def _get_partitions(self) -> list:
        return list(self._partitions)

    get_partitions = _get_partitions
    variables = property(_get_variable_list)

    def _apply_assign_fn(self, assign_fn, value):
        axis = self._partition_axes()[0]
        sizes = [v.shape.as_list()[axis] for v in self._variable_list]
        parts = split(value, sizes, axis=axis)
        return [assign_fn(v, p) for v, p in zip(self._variable_list, parts)]

    def assign(self, value, use_locking=False, name=None, read_value=True):
        """Assigns the slices of ``value`` to the shards; returns the list of
        assign ops (TF returns them too)."""
        return self._apply_assign_fn(lambda v, p: v.assign(p), value)

    def assign_add(self, value, use_locking=False, name=None, read_value=True):
        return self._apply_assign_fn(lambda v, p: v.assign_add(p), value)

    def assign_sub(self, value, use_locking=False, name=None, read_value=True):
        return self._apply_assign_fn(lambda v, p: v.assign_sub(p), value)

    def __repr__(self) -> str:
        return (f"<nd.{type(self).__name__} '{self._name}' shape={self._shape} "
                f"partitions={self._partitions}>")


class ShardedVariable(PartitionedVariable):
    """The variable ``ParameterServerStrategy(variable_partitioner=...)`` makes:
    shards along the first axis, ``variables`` in order (TF2's
    ``ShardedVariable``). ``nd.nn.embedding_lookup`` over it should use
    ``partition_strategy="div"``, as TF2's lookup does."""

    def __init__(self, variables, name="ShardedVariable"):
        first = variables[0]
        full = list(first._save_slice_info.full_shape)
        super().__init__(name, full, first.dtype.base_dtype, variables,
                         [len(variables)] + [1] * (len(full) - 1))

    def read_value(self):
        return self.as_tensor()

    def value(self):
        return self.as_tensor()


def _partitioned_conversion(v, dtype=None, name=None, as_ref=False):
    if as_ref:
        raise NotImplementedError(f"PartitionedVariable {v.name} cannot be used as a "
                                  "reference: use its shards")
    t = v.as_tensor()
    if dtype is not None and not dtype.is_compatible_with(t.dtype):
        raise ValueError(f"Incompatible type conversion requested to type "
                         f"'{dtype.name}' for variable of type '{t.dtype.name}'")
    return t


register_tensor_conversion_function(PartitionedVariable, _partitioned_conversion)

__all__ = [
    "PartitionInfo",
    "PartitionedVariable",
    "SaveSliceInfo",
    "ShardedVariable",
    "fixed_size_partitioner",
    "min_max_variable_partitioner",
    "variable_axis_size_partitioner",
]
