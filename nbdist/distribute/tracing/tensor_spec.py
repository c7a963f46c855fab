"""``TensorSpec``: the dtype and (possibly partial) shape of a tensor argument
of an ``nd.function`` or an element of a dataset."""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.constant_op import to_numpy
from nbdist.framework.ops import Tensor
from nbdist.framework.tensor_shape import TensorShape, as_shape

__all__ = ["TensorSpec", "as_array"]


class TensorSpec:
    """The dtype and (possibly partial) shape of a tensor argument or element.

    >>> TensorSpec([None, 3], "float32")
    TensorSpec(shape=(None, 3), dtype=nd.float32, name=None)
    """

    __slots__ = ("_dtype", "_name", "_shape")

    def __init__(self, shape, dtype=dtypes.float32, name=None):
        self._shape = as_shape(shape)
        self._dtype = dtypes.as_dtype(dtype).base_dtype
        self._name = name

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    name = property(lambda self: self._name)

    @classmethod
    def from_tensor(cls, tensor, name=None) -> TensorSpec:
        if isinstance(tensor, Tensor):
            return cls(tensor.shape, tensor.dtype.base_dtype, name)
        arr = as_array(tensor)
        return cls(arr.shape, dtypes.as_dtype(arr.dtype), name)

    def is_compatible_with(self, other) -> bool:
        if not isinstance(other, TensorSpec):
            other = TensorSpec.from_tensor(other)
        return (self._dtype is other.dtype
                and self._shape.is_compatible_with(other.shape))

    def _key(self):
        return ("T", self._dtype.name, _shape_key(self._shape))

    def __eq__(self, other):
        return isinstance(other, TensorSpec) and self._key() == other._key() and (
            self._name == other.name)

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        dims = None if self._shape.rank is None else tuple(self._shape.as_list())
        return f"TensorSpec(shape={dims}, dtype={self._dtype!r}, name={self._name!r})"


def _shape_key(shape: TensorShape):
    return None if shape.rank is None else tuple(shape.as_list())


def as_array(value) -> np.ndarray:
    """``value`` as a NumPy array; text becomes nbdist's string dtype."""
    arr = np.asarray(value)
    if arr.dtype.kind in "SUO":
        return to_numpy(value, dtypes.string)
    return arr

