"""Conversion between NumPy values and ``TensorProto`` / ``TensorShapeProto``.

Numeric tensors travel in ``tensor_content`` as raw little-endian row-major
bytes; strings travel in ``string_val`` as bytes. ``make_ndarray`` also reads
the typed ``*_val`` fields, where a single value fills the whole shape (as in
TensorFlow). Decoded numeric arrays are views over the proto's bytes (no copy)
and are therefore read-only; call ``.copy()`` before writing to them.
"""

from __future__ import annotations

import math

import numpy as np

from nbdist.proto import tensor_pb2, tensor_shape_pb2, types_pb2

__all__ = [
    "as_value_array",
    "dtype_enum_from_numpy",
    "make_ndarray",
    "make_tensor_proto",
    "materialized_nbytes",
    "numpy_dtype_from_enum",
    "shape_from_proto",
    "shape_to_proto",
]

_REF_OFFSET = 100

# DataType enum -> NumPy dtype (strings are object arrays holding bytes).
_ENUM_TO_NUMPY: dict[int, np.dtype] = {
    types_pb2.DT_FLOAT: np.dtype(np.float32),
    types_pb2.DT_DOUBLE: np.dtype(np.float64),
    types_pb2.DT_HALF: np.dtype(np.float16),
    types_pb2.DT_INT8: np.dtype(np.int8),
    types_pb2.DT_INT16: np.dtype(np.int16),
    types_pb2.DT_INT32: np.dtype(np.int32),
    types_pb2.DT_INT64: np.dtype(np.int64),
    types_pb2.DT_UINT8: np.dtype(np.uint8),
    types_pb2.DT_BOOL: np.dtype(np.bool_),
    types_pb2.DT_STRING: np.dtype(object),
    types_pb2.DT_UINT16: np.dtype(np.uint16),
    types_pb2.DT_UINT32: np.dtype(np.uint32),
    types_pb2.DT_UINT64: np.dtype(np.uint64),
    types_pb2.DT_COMPLEX64: np.dtype(np.complex64),
    types_pb2.DT_COMPLEX128: np.dtype(np.complex128),
}

# (kind, itemsize) -> DataType enum, for numeric NumPy dtypes of any byte order.
_KIND_SIZE_TO_ENUM: dict[tuple[str, int], int] = {
    (dt.kind, dt.itemsize): enum
    for enum, dt in _ENUM_TO_NUMPY.items()
    if enum != types_pb2.DT_STRING
}

_SUPPORTED = ("float16, float32, float64, int8, int16, int32, int64, uint8, uint16, "
              "uint32, uint64, complex64, complex128, bool, string")

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _enum_name(enum: int) -> str:
    try:
        return types_pb2.DataType.Name(enum)
    except ValueError:
        return str(enum)


def dtype_enum_from_numpy(np_dtype) -> int:
    """Return the ``DataType`` enum for a NumPy dtype (str/bytes/object: string).

    Raises ValueError for dtypes nbdist does not support (e.g. complex).
    """
    try:
        dt = np.dtype(np_dtype)
    except TypeError as exc:
        raise ValueError(f"not a NumPy dtype: {np_dtype!r}") from exc
    if dt.kind in "OSU":
        return types_pb2.DT_STRING
    enum = _KIND_SIZE_TO_ENUM.get((dt.kind, dt.itemsize))
    if enum is None or dt.fields is not None:
        raise ValueError(f"unsupported dtype {dt}; nbdist supports {_SUPPORTED}")
    return enum


def numpy_dtype_from_enum(enum: int) -> np.dtype:
    """Return the NumPy dtype for a ``DataType`` enum (ref types map to base).

    ``DT_STRING`` maps to ``object`` (arrays holding ``bytes``). Raises
    ValueError for DT_INVALID, DT_RESOURCE and unknown values.
    """
    enum = int(enum)
    if enum > _REF_OFFSET:
        enum -= _REF_OFFSET
    dt = _ENUM_TO_NUMPY.get(enum)
    if dt is None:
        raise ValueError(
            f"DataType {_enum_name(int(enum))} has no NumPy equivalent; "
            f"nbdist supports {_SUPPORTED}"
        )
    return dt


def _as_enum(dtype) -> int:
    """Normalise a dtype argument (enum, DType-like or NumPy-like) to an enum."""
    if hasattr(dtype, "as_datatype_enum"):
        enum = int(dtype.as_datatype_enum)
    elif isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        enum = int(dtype)
    else:
        return dtype_enum_from_numpy(dtype)
    if enum > _REF_OFFSET:
        enum -= _REF_OFFSET
    numpy_dtype_from_enum(enum)  # validates
    return enum


# ---------------------------------------------------------------------------
# Shapes


def shape_to_proto(shape) -> tensor_shape_pb2.TensorShapeProto:
    """Return a ``TensorShapeProto``: None is unknown rank, None/-1 dims unknown.

    Accepts None, an int (rank 1), a sequence of ints/None, or a TensorShape.
    """
    proto = tensor_shape_pb2.TensorShapeProto()
    if (
        shape is not None
        and hasattr(shape, "dims")
        and not isinstance(shape, np.ndarray)
    ):
        shape = shape.dims  # a TensorShape: None or list of int/None
    if shape is None:
        proto.unknown_rank = True
        return proto
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    for d in shape:
        if d is None:
            size = -1
        else:
            size = int(d)
            if size < -1:
                raise ValueError(f"dimension {d} in shape {shape!r} must be >= 0")
        proto.dim.add(size=size)
    return proto


def shape_from_proto(proto) -> tuple[int | None, ...] | None:
    """Return a shape tuple (None dims unknown), or None for unknown rank."""
    if proto.unknown_rank:
        return None
    out = []
    for d in proto.dim:
        if d.size == -1:
            out.append(None)
        elif d.size < 0:
            raise ValueError(f"invalid dimension size {d.size} in TensorShapeProto")
        else:
            out.append(int(d.size))
    return tuple(out)


def _full_shape(proto) -> tuple[int, ...]:
    shape = shape_from_proto(proto)
    if shape is None or any(d is None for d in shape):
        raise ValueError(f"a tensor value needs a fully defined shape, got {shape!r}")
    return shape


# ---------------------------------------------------------------------------
# Encoding


def _check_strings(obj: np.ndarray) -> None:
    for v in obj.flat:
        if not isinstance(v, (bytes, str)):
            raise ValueError(  # noqa: TRY004 (an unsupported dtype, as TF)
                f"unsupported value {v!r:.60} of type {type(v).__name__}: a "
                "tensor holds numbers or bools, or strings (only str/bytes)"
            )


def _strings_array(values) -> np.ndarray:
    """Return an object array of str/bytes from nested Python values."""
    if isinstance(values, np.ndarray):
        if values.dtype.kind in "SU":
            return values.astype(object)
        arr = values
    else:
        arr = np.empty((), dtype=object) if isinstance(values, (str, bytes)) else None
        if arr is not None:
            arr[()] = values
        else:
            try:
                arr = np.asarray(values, dtype=object)
            except ValueError as exc:
                raise ValueError(f"values are not rectangular: {exc}") from exc
    _check_strings(arr)
    return arr


def _types(arr: np.ndarray) -> str:
    return ", ".join(sorted({type(v).__name__ for v in arr.flat}))


def _infer_python(values) -> np.ndarray:
    """Convert Python values to an array with TF's defaults (float32, int32)."""
    if isinstance(values, (str, bytes)):
        return _strings_array(values)
    try:
        arr = np.asarray(values)
    except ValueError as exc:
        raise ValueError(
            f"values are not a rectangular nested list of numbers or strings: {exc}"
        ) from exc
    except OverflowError as exc:
        raise ValueError(f"integer value out of range: {exc}") from exc
    if arr.dtype.kind in "SU":
        return _strings_array(values)
    if arr.dtype.kind == "O":
        if any(isinstance(v, (str, bytes)) for v in arr.flat):
            return _strings_array(values)
        for v in arr.flat:
            if isinstance(v, int) and not isinstance(v, bool):
                if not -(2**63) <= v < 2**63:
                    raise ValueError(f"integer {v} does not fit in int64")
            elif not isinstance(v, (bool, float, np.number, np.bool_)):
                _check_strings(np.asarray([v], dtype=object))
        raise ValueError(f"cannot make a tensor from values of types {_types(arr)}")
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype == np.int64 and (
        arr.size == 0 or (_INT32_MIN <= arr.min() and arr.max() <= _INT32_MAX)
    ):
        arr = arr.astype(np.int32)
    return arr


def _convert_python(values, target: np.dtype) -> np.ndarray:
    """Convert Python values to ``target``, rejecting incompatible values."""
    if target.kind == "O":
        if not isinstance(values, (str, bytes)):
            try:
                probe = np.asarray(values, dtype=object)
            except ValueError as exc:
                raise ValueError(f"values are not rectangular: {exc}") from exc
            if probe.size == 0:
                return probe
        try:
            return _strings_array(values)
        except ValueError as exc:
            raise TypeError(f"expected string values, got {values!r:.80}") from exc
    try:
        src = np.asarray(values)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"values cannot form a {target} tensor: {exc}") from exc
    if src.size == 0:
        return src.astype(target)
    ok = {"f": "biuf", "i": "biu", "u": "biu", "b": "b", "c": "biufc"}[target.kind]
    if src.dtype.kind not in ok:
        raise TypeError(
            f"expected {target} values, got {values!r:.80} of dtype {src.dtype}"
        )
    out = src.astype(target)
    if target.kind in "iu" and not np.array_equal(out.astype(src.dtype), src):
        raise TypeError(f"value out of range for {target}: {values!r:.80}")
    return out


def _to_array(values, enum: int | None) -> np.ndarray:
    if isinstance(values, (np.ndarray, np.generic)):
        arr = np.asarray(values)
        if arr.dtype.kind == "O":
            _check_strings(arr)
        elif arr.dtype.kind not in "SU":
            dtype_enum_from_numpy(arr.dtype)  # validates (e.g. rejects complex)
        if enum is None:
            return _strings_array(arr) if arr.dtype.kind in "SUO" else arr
        target = numpy_dtype_from_enum(enum)
        if (target.kind == "O") != (arr.dtype.kind in "SUO"):
            raise TypeError(
                f"cannot convert an array of dtype {arr.dtype} to {_enum_name(enum)}"
            )
        return _strings_array(arr) if target.kind == "O" else arr.astype(target)
    if enum is None:
        return _infer_python(values)
    return _convert_python(values, numpy_dtype_from_enum(enum))


def _encode_string(v) -> bytes:
    return v.encode("utf-8") if isinstance(v, str) else bytes(v)


def _append_single(proto: tensor_pb2.TensorProto, arr: np.ndarray) -> None:
    """Store the one element of ``arr`` in the typed ``*_val`` field."""
    v = arr.reshape(()).item() if arr.dtype.kind != "O" else arr.reshape(())[()]
    enum = proto.dtype
    if enum == types_pb2.DT_STRING:
        proto.string_val.append(_encode_string(v))
    elif enum == types_pb2.DT_FLOAT:
        proto.float_val.append(v)
    elif enum == types_pb2.DT_DOUBLE:
        proto.double_val.append(v)
    elif enum == types_pb2.DT_HALF:
        proto.half_val.append(int(arr.reshape(()).astype(np.float16).view(np.uint16)))
    elif enum == types_pb2.DT_INT64:
        proto.int64_val.append(v)
    elif enum == types_pb2.DT_BOOL:
        proto.bool_val.append(v)
    elif enum in (types_pb2.DT_COMPLEX64, types_pb2.DT_COMPLEX128):
        field = (proto.scomplex_val if enum == types_pb2.DT_COMPLEX64
                 else proto.dcomplex_val)
        field.extend([v.real, v.imag])
    elif enum == types_pb2.DT_UINT32:
        proto.uint32_val.append(v)
    elif enum == types_pb2.DT_UINT64:
        proto.uint64_val.append(v)
    else:
        proto.int_val.append(v)


def _concrete_shape(shape) -> tuple[int, ...]:
    if hasattr(shape, "as_list"):
        shape = shape.as_list()
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    dims = tuple(shape)
    if any(d is None or int(d) < 0 for d in dims):
        raise ValueError(f"shape {dims} must be fully defined, with dims >= 0")
    return tuple(int(d) for d in dims)


def as_value_array(value) -> np.ndarray:
    """A tensor value as an array without copying: ``bytes``/``str`` as a 0-d
    object array (NumPy would make them fixed-width strings)."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bytes, str)):
        arr = np.empty((), dtype=object)
        arr[()] = value
        return arr
    return np.asarray(value)


def make_tensor_proto(values, dtype=None, shape=None) -> tensor_pb2.TensorProto:
    """Return a ``TensorProto`` holding ``values``.

    ``dtype`` may be a DataType enum, an ``nd.DType`` or a NumPy dtype; without
    it, NumPy arrays keep their dtype and Python values follow TensorFlow
    (float -> float32, int -> int32 or int64 if too large, bool, str/bytes ->
    string). With ``shape``, the values must have that many elements or exactly
    one, which fills the shape. Raises ValueError for unsupported dtypes and
    TypeError for values incompatible with an explicit ``dtype``.
    """
    if isinstance(values, tensor_pb2.TensorProto):
        return values
    enum = None if dtype is None else _as_enum(dtype)
    arr = _to_array(values, enum)
    if enum is None:
        enum = dtype_enum_from_numpy(arr.dtype)

    proto = tensor_pb2.TensorProto(dtype=enum)
    broadcast = False
    if shape is not None:
        shape = _concrete_shape(shape)
        n = math.prod(shape)
        if arr.size == n:
            arr = arr.reshape(shape)
        elif arr.size == 1:
            broadcast = True
        else:
            raise ValueError(
                f"{arr.size} values given for shape {shape}, which takes {n}"
                " (or exactly 1 to fill it)"
            )
    else:
        shape = arr.shape
    proto.tensor_shape.CopyFrom(shape_to_proto(shape))

    if broadcast:
        _append_single(proto, arr)
    elif enum == types_pb2.DT_STRING:
        proto.string_val.extend(_encode_string(v) for v in arr.flat)
    else:
        le = arr.dtype.newbyteorder("<")
        proto.tensor_content = np.ascontiguousarray(arr, dtype=le).tobytes()
    return proto


# ---------------------------------------------------------------------------
# Size before materialising

# What one string element costs as an array element, besides its bytes: a
# Python bytes object and the pointer to it.
STRING_ELEMENT_BYTES = 40


def materialized_nbytes(proto: tensor_pb2.TensorProto) -> int:
    """Bytes the value of ``proto`` takes once made an array, from its shape and
    dtype alone (nothing is allocated or iterated): a single typed value may
    fill a shape of any size. A string element counts ``STRING_ELEMENT_BYTES``
    plus its length (the last value repeats to fill the shape). A proto that
    ``make_ndarray`` would reject (bad dtype, unknown shape) counts 0.
    """
    try:
        shape = shape_from_proto(proto.tensor_shape)
        dt = numpy_dtype_from_enum(proto.dtype)
    except ValueError:
        return 0
    if shape is None or any(d is None for d in shape):
        return 0
    n = math.prod(shape)
    if dt.kind != "O":
        return n * dt.itemsize
    given = len(proto.string_val)
    fill = len(proto.string_val[-1]) if given else 0
    # ByteSize bounds the given strings' lengths without visiting them.
    return n * STRING_ELEMENT_BYTES + proto.ByteSize() + max(0, n - given) * fill


# ---------------------------------------------------------------------------
# Decoding


def _typed_values(proto, enum: int) -> np.ndarray:
    if enum == types_pb2.DT_FLOAT:
        return np.asarray(proto.float_val, dtype=np.float32)
    if enum == types_pb2.DT_DOUBLE:
        return np.asarray(proto.double_val, dtype=np.float64)
    if enum == types_pb2.DT_HALF:
        return (
            np.asarray(proto.half_val, dtype=np.int32)
            .astype(np.uint16)
            .view(np.float16)
        )
    if enum == types_pb2.DT_INT64:
        return np.asarray(proto.int64_val, dtype=np.int64)
    if enum == types_pb2.DT_BOOL:
        return np.asarray(proto.bool_val, dtype=np.bool_)
    if enum == types_pb2.DT_STRING:
        out = np.empty(len(proto.string_val), dtype=object)
        out[:] = list(proto.string_val)
        return out
    if enum == types_pb2.DT_COMPLEX64:
        return np.asarray(proto.scomplex_val, dtype=np.float32).view(np.complex64)
    if enum == types_pb2.DT_COMPLEX128:
        return np.asarray(proto.dcomplex_val, dtype=np.float64).view(np.complex128)
    if enum == types_pb2.DT_UINT32:
        return np.asarray(proto.uint32_val, dtype=np.uint32)
    if enum == types_pb2.DT_UINT64:
        return np.asarray(proto.uint64_val, dtype=np.uint64)
    target = numpy_dtype_from_enum(enum)
    vals = np.asarray(proto.int_val, dtype=np.int64)
    if vals.size and (
        vals.min() < np.iinfo(target).min or vals.max() > np.iinfo(target).max
    ):
        raise ValueError(f"int_val out of range for {_enum_name(enum)}")
    return vals.astype(target)


def make_ndarray(proto: tensor_pb2.TensorProto) -> np.ndarray:
    """Return the value of a ``TensorProto`` as a NumPy array.

    Numeric ``tensor_content`` is decoded with ``np.frombuffer`` without a
    copy, so the result is read-only. Typed ``*_val`` fields follow
    TensorFlow: no values give zeros (b"" for strings), fewer values than
    elements are padded with the last one (a single value fills the shape);
    those results may also be read-only. String tensors come back as object
    arrays holding ``bytes``.
    """
    enum = int(proto.dtype)
    np_dtype = numpy_dtype_from_enum(enum)
    if enum > _REF_OFFSET:
        enum -= _REF_OFFSET
    shape = _full_shape(proto.tensor_shape)
    n = math.prod(shape)

    if proto.tensor_content:
        if enum == types_pb2.DT_STRING:
            raise ValueError("string tensors must use string_val, not tensor_content")
        le = np_dtype.newbyteorder("<")
        if len(proto.tensor_content) != n * le.itemsize:
            raise ValueError(
                f"tensor_content has {len(proto.tensor_content)} bytes; "
                f"{_enum_name(enum)} of shape {shape} needs {n * le.itemsize}"
            )
        if enum == types_pb2.DT_BOOL:
            raw = np.frombuffer(proto.tensor_content, dtype=np.uint8)
            if raw.size and raw.max() > 1:
                raise ValueError("bool tensor_content holds bytes other than 0 and 1")
        return np.frombuffer(proto.tensor_content, dtype=le).reshape(shape)

    vals = _typed_values(proto, enum)
    if vals.size == n:
        return vals.reshape(shape)
    if vals.size > n:
        raise ValueError(
            f"{vals.size} values in TensorProto for shape {shape} ({n} elements)"
        )
    if vals.size == 0:
        fill = np.array(b"", dtype=object) if enum == types_pb2.DT_STRING else None
        if fill is None:
            fill = np.zeros((), dtype=np_dtype)
        return np.broadcast_to(fill, shape)
    if vals.size == 1:
        return np.broadcast_to(vals.reshape(()), shape)
    pad = np.broadcast_to(vals[-1:], (n - vals.size,))
    return np.concatenate([vals, pad]).reshape(shape)
