"""Data types (``nd.float32`` ...), with TensorFlow's enum numbers and ref types."""

from __future__ import annotations

import numpy as np

from nbdist.framework.tensor_shape import dimensions_to_ints

_REF_OFFSET = 100


class DType:
    """A tensor element type. ``nd.float32.as_numpy_dtype is np.float32``."""

    __slots__ = ("_enum", "_name", "_np")

    def __init__(self, enum: int, name: str, np_type):
        self._enum = enum
        self._name = name
        self._np = np_type

    @property
    def as_datatype_enum(self) -> int:
        return self._enum

    @property
    def name(self) -> str:
        return self._name

    @property
    def as_numpy_dtype(self):
        return self._np

    @property
    def is_ref_dtype(self) -> bool:
        return self._enum > _REF_OFFSET

    @property
    def base_dtype(self) -> DType:
        return _BY_ENUM[self._enum - _REF_OFFSET] if self.is_ref_dtype else self

    @property
    def _as_ref(self) -> DType:
        return self if self.is_ref_dtype else _BY_ENUM[self._enum + _REF_OFFSET]

    @property
    def is_floating(self) -> bool:
        return self.base_dtype in (float16, float32, float64)

    @property
    def is_integer(self) -> bool:
        return self.base_dtype in (int8, int16, int32, int64, uint8, uint16, uint32,
                                   uint64)

    @property
    def is_unsigned(self) -> bool:
        return self.base_dtype in (uint8, uint16, uint32, uint64)

    @property
    def is_complex(self) -> bool:
        return self.base_dtype in (complex64, complex128)

    @property
    def real_dtype(self) -> DType:
        """float32 for complex64, float64 for complex128, else the dtype itself."""
        return {complex64: float32, complex128: float64}.get(self.base_dtype,
                                                              self.base_dtype)

    @property
    def is_bool(self) -> bool:
        return self.base_dtype is bool

    @property
    def is_numeric(self) -> bool:
        return self.is_floating or self.is_integer or self.is_complex

    @property
    def size(self) -> int:
        if self.base_dtype in (string, resource, variant):
            return 1
        return np.dtype(self.base_dtype._np).itemsize

    @property
    def min(self):
        b = self.base_dtype
        if b.is_complex or not b.is_numeric:
            raise TypeError(f"Cannot find minimum value of {b!r}.")
        return np.finfo(b._np).min if b.is_floating else np.iinfo(b._np).min

    @property
    def max(self):
        b = self.base_dtype
        if b.is_complex or not b.is_numeric:
            raise TypeError(f"Cannot find maximum value of {b!r}.")
        return np.finfo(b._np).max if b.is_floating else np.iinfo(b._np).max

    def is_compatible_with(self, other) -> bool:
        return self.base_dtype is as_dtype(other).base_dtype

    def __repr__(self) -> str:
        return f"nd.{self._name}"

    def __reduce__(self):
        return (as_dtype, (self._name,))


float16 = DType(19, "float16", np.float16)
half = float16
float32 = DType(1, "float32", np.float32)
float64 = DType(2, "float64", np.float64)
double = float64
int32 = DType(3, "int32", np.int32)
uint8 = DType(4, "uint8", np.uint8)
int16 = DType(5, "int16", np.int16)
int8 = DType(6, "int8", np.int8)
string = DType(7, "string", np.object_)
int64 = DType(9, "int64", np.int64)
bool = DType(10, "bool", np.bool_)  # noqa: A001 - TF's name
resource = DType(20, "resource", np.object_)
complex64 = DType(8, "complex64", np.complex64)
uint16 = DType(17, "uint16", np.uint16)
complex128 = DType(18, "complex128", np.complex128)
uint32 = DType(22, "uint32", np.uint32)
uint64 = DType(23, "uint64", np.uint64)
# TF's opaque C++ values (datasets, optionals, tensor lists); nbdist holds them
# as Python objects, like resources.
variant = DType(21, "variant", np.object_)

_BASE = [float16, float32, float64, int32, uint8, int16, int8, string, int64, bool,
         resource, complex64, uint16, complex128, uint32, uint64, variant]
_BY_ENUM: dict[int, DType] = {d._enum: d for d in _BASE}
for _d in _BASE:
    _ref = DType(_d._enum + _REF_OFFSET, _d._name + "_ref", _d._np)
    _BY_ENUM[_ref._enum] = _ref
_BY_NAME = {d._name: d for d in _BY_ENUM.values()}
_BY_NAME.update({"half": float16, "double": float64, "float": float32})
_BY_NP = {np.dtype(d._np): d for d in _BASE if d not in (string, resource, variant)}


def as_dtype(type_value) -> DType:
    """Converts a DType, NumPy dtype, enum number or name to a ``DType``."""
    if isinstance(type_value, DType):
        return type_value
    if isinstance(type_value, str):
        if type_value in _BY_NAME:
            return _BY_NAME[type_value]
        raise TypeError(f"Cannot convert {type_value!r} to a dtype: unknown name")
    if isinstance(type_value, (int, np.integer)) and not isinstance(
        type_value, (type(True), np.bool_)
    ):
        if int(type_value) in _BY_ENUM:
            return _BY_ENUM[int(type_value)]
        raise TypeError(f"Cannot convert {type_value!r} to a dtype: unknown enum")
    if type_value in (bytes, str, np.bytes_, np.str_, object, np.object_):
        return string
    try:
        npd = np.dtype(type_value)
    except TypeError as e:
        raise TypeError(f"Cannot convert {type_value!r} to a dtype") from e
    if npd in _BY_NP:
        return _BY_NP[npd]
    if npd.kind in "SUO":
        return string
    raise TypeError(f"Cannot convert {type_value!r} to a dtype: {npd} is not supported")


def infer_dtype(value) -> DType:
    """The dtype TF gives a Python value: floats -> float32, ints -> int32."""
    if isinstance(value, (type(True), np.bool_)):
        return bool
    if isinstance(value, (bytes, str)):
        return string
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        return as_dtype(value.dtype)
    if isinstance(value, int):
        return int32 if -(2**31) <= value < 2**31 else int64
    if isinstance(value, float):
        return float32
    arr = np.asarray(dimensions_to_ints(value))
    if arr.dtype.kind == "f":
        return float32
    if arr.dtype.kind in "iu":
        if arr.size and (arr.min() < -(2**31) or arr.max() >= 2**31):
            return int64
        return int32
    return as_dtype(arr.dtype)
