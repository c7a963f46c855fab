"""``nd.dtypes``: TF's ``tf.dtypes`` — the ``DType`` objects, ``as_dtype``,
``cast``, ``saturate_cast``, ``complex`` and ``as_string``.

>>> import nbdist as nd
>>> nd.dtypes.as_dtype("float32") is nd.dtypes.float32
True
>>> with nd.Session() as s:
...     s.run(nd.dtypes.saturate_cast([-3.0, 300.0], nd.uint8)).tolist()
[0, 255]
"""

from __future__ import annotations

import numpy as np

from nbdist.framework.dtypes import (
    DType,
    as_dtype,
    bool,  # noqa: A004 - TF's name
    complex64,
    complex128,
    double,
    float16,
    float32,
    float64,
    half,
    int8,
    int16,
    int32,
    int64,
    resource,
    string,
    uint8,
    uint16,
    uint32,
    uint64,
)
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.ops.complex_ops import complex  # noqa: A004 - TF's name
from nbdist.ops.math_ops_elementwise import cast
from nbdist.ops.string_ops import as_string


def _limits(dtype: DType):
    np_type = np.dtype(dtype.as_numpy_dtype)
    info = np.finfo(np_type) if np_type.kind in "fc" else np.iinfo(np_type)
    return info.min, info.max


def saturate_cast(value, dtype, name=None):
    """``value`` cast to ``dtype``, clamped first to ``dtype``'s range so that
    out-of-range values become its min/max instead of wrapping."""
    from nbdist.ops.clip_ops import clip_by_value

    dtype = as_dtype(dtype)
    with op_scope(name, "saturate_cast", [value]) as (g, scope):
        value = convert_to_tensor(value, name="value")
        src = value.dtype.base_dtype
        if src.is_complex and not dtype.is_complex:
            from nbdist.ops.complex_ops import real

            value = real(value)
            src = value.dtype.base_dtype
        if src not in (bool, string) and dtype not in (bool, string):
            lo_in, hi_in = _limits(src)
            lo_out, hi_out = _limits(dtype)
            # Clamp only where the target's range is narrower than the source's.
            lo = max(float(lo_in), float(lo_out))
            hi = min(float(hi_in), float(hi_out))
            if lo > float(lo_in) or hi < float(hi_in):
                value = clip_by_value(value, np.asarray(lo).astype(src.as_numpy_dtype),
                                      np.asarray(hi).astype(src.as_numpy_dtype))
        return cast(value, dtype, name=scope)


__all__ = ["DType", "as_dtype", "as_string", "bool", "cast", "complex", "complex128",
           "complex64", "double", "float16", "float32", "float64", "half", "int16",
           "int32", "int64", "int8", "resource", "saturate_cast", "string",
           "uint16", "uint32", "uint64", "uint8"]
