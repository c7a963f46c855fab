"""Bitwise ops on integer tensors (TF's ``tf.bitwise``): ``bitwise_and``,
``bitwise_or``, ``bitwise_xor`` (broadcasting), ``invert``, ``left_shift`` and
``right_shift`` (arithmetic for signed types, as C++). None has a gradient.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.bitwise.bitwise_and([12, 10], [10, 6])).tolist()
[8, 2]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import INTEGER
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.ops.math_ops_elementwise import (
    _binary,
    _binary_infer,
    _unary,
    _unary_infer,
)

BITWISE_TYPES = INTEGER + (dtypes.uint16, dtypes.uint32, dtypes.uint64)
BINARY_BITWISE_OPS = ("BitwiseAnd", "BitwiseOr", "BitwiseXor", "LeftShift",
                      "RightShift")

for _t in BINARY_BITWISE_OPS:
    register_op(_t, _binary_infer(BITWISE_TYPES), attrs={"T": ("type", None)},
                num_inputs=2)
    NotDifferentiable(_t)
register_op("Invert", _unary_infer(BITWISE_TYPES), attrs={"T": ("type", None)},
            num_inputs=1)
NotDifferentiable("Invert")


def bitwise_and(x, y, name=None):
    """``x & y`` element-wise (integer tensors of one dtype, broadcasting)."""
    return _binary("BitwiseAnd", x, y, name)


def bitwise_or(x, y, name=None):
    """``x | y`` element-wise."""
    return _binary("BitwiseOr", x, y, name)


def bitwise_xor(x, y, name=None):
    """``x ^ y`` element-wise."""
    return _binary("BitwiseXor", x, y, name)


def invert(x, name=None):
    """``~x``: every bit flipped (``invert(0) == -1`` for signed, ``255`` for
    uint8)."""
    return _unary("Invert", x, name)


def left_shift(x, y, name=None):
    """``x << y``; a shift outside ``[0, bits)`` is clamped into it, as TF's
    kernel does."""
    return _binary("LeftShift", x, y, name)


def right_shift(x, y, name=None):
    """``x >> y`` (sign-extending for signed types); shifts clamped as
    ``left_shift``."""
    return _binary("RightShift", x, y, name)


__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift",
           "right_shift"]
