"""``TypeSpec`` and its value classes: the shape and dtype a tensor-like value
has, as TF describes ``tf.function`` signatures and dataset elements.

Example::

    spec = nd.TensorSpec([None, 3], nd.float32, name="x")
    spec.is_compatible_with(nd.zeros([2, 3]))   # True
"""
from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.ops import _static_value
from nbdist.framework.tensor_shape import TensorShape, as_shape


class TypeSpec:
    """The base of the spec classes: equal when their fields are equal."""

    __slots__ = ()
    _fields: tuple = ()

    def _values(self):
        return tuple(getattr(self, f) for f in self._fields)

    def __eq__(self, other):
        return type(self) is type(other) and self._values() == other._values()

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((type(self).__name__, repr(self)))

    def __repr__(self):
        parts = ", ".join(f"{f}={_show(getattr(self, f))}" for f in self._fields)
        return f"{type(self).__name__}({parts})"

    def is_compatible_with(self, spec_or_value):
        """True when ``spec_or_value`` (a spec or a tensor-like value) has a
        compatible shape and the same dtype."""
        other = spec_or_value if isinstance(spec_or_value, TypeSpec) else (
            type_spec_from_value(spec_or_value))
        return (type(other) is type(self) and other.dtype == self.dtype
                and self.shape.is_compatible_with(other.shape))


def _show(v):
    if isinstance(v, TensorShape):
        return str(tuple(v.as_list())) if v.rank is not None else "None"
    if isinstance(v, dtypes.DType):
        return f"tf.{v.name}"
    return repr(v)


class TensorSpec(TypeSpec):
    """A dense tensor's ``shape``, ``dtype`` and optional ``name``."""

    __slots__ = ("shape", "dtype", "name")
    _fields = ("shape", "dtype", "name")

    def __init__(self, shape, dtype=dtypes.float32, name=None):
        self.shape = as_shape(shape)
        self.dtype = dtypes.as_dtype(dtype)
        self.name = name

    @classmethod
    def from_tensor(cls, tensor, name=None):
        """The spec of ``tensor``: its shape, dtype, and name (its op's)."""
        return cls(tensor.shape, tensor.dtype, name or tensor.op.name)


class SparseTensorSpec(TypeSpec):
    """A ``SparseTensor``'s dense ``shape`` and values ``dtype``."""

    __slots__ = ("shape", "dtype")
    _fields = ("shape", "dtype")

    def __init__(self, shape=None, dtype=dtypes.float32):
        self.shape = as_shape(shape)
        self.dtype = dtypes.as_dtype(dtype)


class IndexedSlicesSpec(TypeSpec):
    """An ``IndexedSlices``' dense ``shape``, values ``dtype`` and index dtypes."""

    __slots__ = ("shape", "dtype", "indices_dtype", "dense_shape_dtype",
                 "indices_shape")
    _fields = __slots__

    def __init__(self, shape=None, dtype=dtypes.float32, indices_dtype=dtypes.int64,
                 dense_shape_dtype=None, indices_shape=None):
        self.shape = as_shape(shape)
        self.dtype = dtypes.as_dtype(dtype)
        self.indices_dtype = dtypes.as_dtype(indices_dtype)
        self.dense_shape_dtype = (None if dense_shape_dtype is None
                                  else dtypes.as_dtype(dense_shape_dtype))
        self.indices_shape = as_shape([None] if indices_shape is None
                                      else indices_shape)


class TensorArraySpec(TypeSpec):
    """A ``TensorArray``'s ``element_shape``, ``dtype``, and whether it may grow
    (``dynamic_size``) and infers element shapes (``infer_shape``)."""

    __slots__ = ("element_shape", "dtype", "dynamic_size", "infer_shape")
    _fields = __slots__

    def __init__(self, element_shape=None, dtype=dtypes.float32, dynamic_size=False,
                 infer_shape=True):
        self.element_shape = as_shape(element_shape)
        self.dtype = dtypes.as_dtype(dtype)
        self.dynamic_size = dynamic_size
        self.infer_shape = infer_shape

    def is_compatible_with(self, spec_or_value):
        other = spec_or_value
        if type(other).__name__ == "TensorArray":
            other = TensorArraySpec.from_value(other)
        return (isinstance(other, TensorArraySpec) and other.dtype == self.dtype
                and self.element_shape.is_compatible_with(other.element_shape)
                and other.dynamic_size == self.dynamic_size)

    @classmethod
    def from_value(cls, value):
        """The spec of a ``TensorArray``."""
        return cls(value.element_shape, value.dtype,
                   getattr(value, "_dynamic_size", False),
                   getattr(value, "_infer_shape", True))


class OptionalSpec(TypeSpec):
    """An optional value (``tf.experimental.Optional``): the spec of the value
    it may hold (``element_spec``, a nest of specs)."""

    __slots__ = ("element_spec",)
    _fields = __slots__

    def __init__(self, element_spec):
        self.element_spec = element_spec

    def is_compatible_with(self, spec_or_value):
        return (isinstance(spec_or_value, OptionalSpec)
                and spec_or_value.element_spec == self.element_spec)


class NoneTensorSpec(TypeSpec):
    """The spec of ``None`` where a structure of tensors has a hole."""

    __slots__ = ()

    def is_compatible_with(self, spec_or_value):
        return spec_or_value is None or isinstance(spec_or_value, NoneTensorSpec)


def type_spec_from_value(value):
    """The spec of a tensor, ``SparseTensor`` or ``IndexedSlices``.

    Raises TypeError for other values, as TF's does for a type it has no spec for.
    """
    kind = type(value).__name__
    if kind == "SparseTensor":
        shape = _static_value(value.dense_shape)
        return SparseTensorSpec(None if shape is None else list(shape),
                                value.values.dtype)
    if kind == "IndexedSlices":
        dense = value.dense_shape
        shape = None if dense is None else _static_value(dense)
        return IndexedSlicesSpec(None if shape is None else list(shape),
                                 value.values.dtype, value.indices.dtype)
    if hasattr(value, "dtype") and hasattr(value, "shape") and hasattr(value, "op"):
        return TensorSpec(value.shape, value.dtype)
    raise TypeError(f"Could not build a TypeSpec for {value!r} of unsupported "
                    f"type {type(value)}.")
