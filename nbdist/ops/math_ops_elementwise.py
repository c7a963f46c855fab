"""Element-wise math ops: arithmetic, comparisons, logical ops, ``Cast`` and
``AddN``, with their shape functions and Python wrappers (``nd.add``, ``nd.cast``...).

Binary ops broadcast like NumPy and need inputs of one dtype; a Python value
next to a tensor converts to the tensor's dtype (so ``x * 2`` works for a
float32 ``x``).
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.constant_op import identity
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.op_util import (
    ALL_VALUES,
    COMPLEX,
    FLOAT,
    NUMERIC,
    check_type,
    convert_pair,
    op_scope,
)
from nbdist.framework.ops import Tensor, convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape, broadcast_shapes


def _binary_infer(allowed, out_dtype=None):
    def infer(c):
        d = c.check_same_dtypes([0, 1])
        check_type(c, 0, allowed)
        return [(out_dtype or d, broadcast_shapes(c.shape(0), c.shape(1)))]

    return infer


def _unary_infer(allowed, out_dtype=None):
    def infer(c):
        d = check_type(c, 0, allowed)
        return [(out_dtype or d, c.shape(0))]

    return infer


_T = {"T": ("type", None)}

BINARY_OPS = {
    "Add": NUMERIC + COMPLEX + (dtypes.string,),
    "Sub": NUMERIC + COMPLEX,
    "Mul": NUMERIC + COMPLEX,
    "RealDiv": FLOAT + COMPLEX,
    "FloorDiv": NUMERIC,
    "FloorMod": NUMERIC,
    "Pow": NUMERIC,
    "Maximum": NUMERIC,
    "Minimum": NUMERIC,
    "SquaredDifference": NUMERIC,
}
COMPARISON_OPS = {
    "Equal": ALL_VALUES,
    "NotEqual": ALL_VALUES,
    "Less": NUMERIC,
    "LessEqual": NUMERIC,
    "Greater": NUMERIC,
    "GreaterEqual": NUMERIC,
}
UNARY_OPS = {
    "Neg": NUMERIC + COMPLEX,
    "Square": NUMERIC + COMPLEX,
    "Abs": NUMERIC,
    "Sign": NUMERIC,
    "Round": NUMERIC,
    "Sqrt": FLOAT,
    "Rsqrt": FLOAT,
    "Exp": FLOAT,
    "Log": FLOAT,
    "Reciprocal": FLOAT,
    "Floor": FLOAT,
    "Ceil": FLOAT,
    "Tanh": FLOAT,
    "Sigmoid": FLOAT,
    "Sin": FLOAT,
    "Cos": FLOAT,
}
PREDICATE_OPS = ("IsNan", "IsInf", "IsFinite")

for _t, _allowed in BINARY_OPS.items():
    register_op(_t, _binary_infer(_allowed), attrs=_T, num_inputs=2)
for _t, _allowed in COMPARISON_OPS.items():
    register_op(_t, _binary_infer(_allowed, dtypes.bool), attrs=_T, num_inputs=2)
for _t in ("LogicalAnd", "LogicalOr"):
    register_op(_t, _binary_infer((dtypes.bool,)), num_inputs=2)
for _t, _allowed in UNARY_OPS.items():
    register_op(_t, _unary_infer(_allowed), attrs=_T, num_inputs=1)
for _t in PREDICATE_OPS:
    register_op(_t, _unary_infer(FLOAT, dtypes.bool), attrs=_T, num_inputs=1)
register_op("LogicalNot", _unary_infer((dtypes.bool,)), num_inputs=1)


def _add_n_infer(c):
    n = len(c.input_dtypes)
    if c.attr("N") is not None and c.attr("N") != n:
        raise ValueError(f"attr N = {c.attr('N')} but got {n} inputs")
    d = c.check_same_dtypes()
    check_type(c, 0, NUMERIC + COMPLEX, "inputs")
    shape = TensorShape(None)
    for i in range(n):
        if not shape.is_compatible_with(c.shape(i)):
            raise ValueError(
                f"Shapes must be equal rank, and all dimensions equal: "
                f"{shape} and {c.shape(i)} (input {i})"
            )
        shape = shape.merge_with(c.shape(i))
    return [(d, shape)]


register_op(
    "AddN", _add_n_infer, attrs={"N": ("int", None), "T": ("type", None)}, min_inputs=1
)


def _cast_infer(c):
    src, dst = c.dtype(0), c.attr("DstT")
    if (src is dtypes.string) != (dst is dtypes.string) or dtypes.resource in (
        src,
        dst,
    ):
        raise TypeError(f"Cast {src.name} to {dst.name} is not supported")
    return [(dst, c.shape(0))]


register_op(
    "Cast",
    _cast_infer,
    attrs={
        "SrcT": ("type", None),
        "DstT": ("type", REQUIRED),
        "Truncate": ("bool", False),
    },
    num_inputs=1,
)


# -- wrapper helpers ----------------------------------------------------------------
def _binary(op_type, x, y, name, default_name=None):
    with op_scope(name, default_name or op_type, [x, y]) as (g, scope):
        x, y = convert_pair(x, y)
        attrs = (
            {} if op_type in ("LogicalAnd", "LogicalOr") else {"T": x.dtype.base_dtype}
        )
        return g.create_op(op_type, [x, y], attrs, name=scope).outputs[0]


def _unary(op_type, x, name, default_name=None):
    with op_scope(name, default_name or op_type, [x]) as (g, scope):
        x = convert_to_tensor(x, name="x")
        attrs = {} if op_type == "LogicalNot" else {"T": x.dtype.base_dtype}
        return g.create_op(op_type, [x], attrs, name=scope).outputs[0]


# -- element-wise wrappers -------------------------------------------------------------
def add(x, y, name=None):
    """``x + y`` element-wise, with broadcasting (strings concatenate)."""
    return _binary("Add", x, y, name)


def subtract(x, y, name=None):
    return _binary("Sub", x, y, name)


def multiply(x, y, name=None):
    return _binary("Mul", x, y, name)


def maximum(x, y, name=None):
    return _binary("Maximum", x, y, name)


def minimum(x, y, name=None):
    return _binary("Minimum", x, y, name)


def squared_difference(x, y, name=None):
    """``(x - y) ** 2`` element-wise."""
    return _binary("SquaredDifference", x, y, name)


def pow(x, y, name=None):  # noqa: A001 - TF's name
    """``x ** y`` element-wise (integers to negative powers fail at run time)."""
    return _binary("Pow", x, y, name)


def floordiv(x, y, name=None):
    """``x // y``: floor division, also for floats (``FloorDiv``)."""
    return _binary("FloorDiv", x, y, name, "floordiv")


floor_div = floordiv


def floormod(x, y, name=None):
    """``x % y`` with the sign of ``y``, as Python and ``np.mod``."""
    return _binary("FloorMod", x, y, name)


mod = floormod

# TF's true-division casts: small ints to float32, wide ones to float64.
_TRUEDIV_CAST = {
    dtypes.int8: dtypes.float32,
    dtypes.uint8: dtypes.float32,
    dtypes.int16: dtypes.float32,
    dtypes.int32: dtypes.float64,
    dtypes.int64: dtypes.float64,
    dtypes.float16: None,
    dtypes.float32: None,
    dtypes.float64: None,
    dtypes.complex64: None,
    dtypes.complex128: None,
}


def _truediv(x, y, name, default_name):
    with op_scope(name, default_name, [x, y]) as (g, scope):
        x, y = convert_pair(x, y)
        xd, yd = x.dtype.base_dtype, y.dtype.base_dtype
        if xd is not yd:
            raise TypeError(
                f"x and y must have the same dtype, got {xd.name} != {yd.name}"
            )
        if xd not in _TRUEDIV_CAST:
            raise TypeError(f"Invalid dtype {xd.name} in __truediv__")
        target = _TRUEDIV_CAST[xd]
        if target is not None:
            x, y = cast(x, target), cast(y, target)
        return g.create_op(
            "RealDiv", [x, y], {"T": x.dtype.base_dtype}, name=scope
        ).outputs[0]


def truediv(x, y, name=None):
    """``x / y``; integers are cast to floats first (int32/int64 to float64)."""
    return _truediv(x, y, name, "truediv")


def divide(x, y, name=None):
    """``x / y`` (true division, as :func:`truediv`)."""
    return _truediv(x, y, name, "truediv")


def realdiv(x, y, name=None):
    return _binary("RealDiv", x, y, name)


real_div = realdiv


def div(x, y, name=None):
    """Python 2 division: floor division for integers, true division for floats."""
    with op_scope(name, "div", [x, y]) as (g, scope):
        x, y = convert_pair(x, y)
        op_type = "RealDiv" if x.dtype.base_dtype in FLOAT + COMPLEX else "FloorDiv"
        return g.create_op(
            op_type, [x, y], {"T": x.dtype.base_dtype}, name=scope
        ).outputs[0]


def negative(x, name=None):
    return _unary("Neg", x, name)


neg = negative


def square(x, name=None):
    return _unary("Square", x, name)


def sqrt(x, name=None):
    return _unary("Sqrt", x, name)


def rsqrt(x, name=None):
    """``1 / sqrt(x)``."""
    return _unary("Rsqrt", x, name)


def exp(x, name=None):
    return _unary("Exp", x, name)


def log(x, name=None):
    """The natural logarithm."""
    return _unary("Log", x, name)


def abs(x, name=None):  # noqa: A001 - TF's name
    return _unary("Abs", x, name)


def sign(x, name=None):
    return _unary("Sign", x, name)


def reciprocal(x, name=None):
    return _unary("Reciprocal", x, name)


def floor(x, name=None):
    return _unary("Floor", x, name)


def ceil(x, name=None):
    return _unary("Ceil", x, name)


def round(x, name=None):  # noqa: A001 - TF's name
    """Rounds half to even ("banker's rounding"), as TF and ``np.round``."""
    return _unary("Round", x, name)


def sin(x, name=None):
    return _unary("Sin", x, name)


def cos(x, name=None):
    return _unary("Cos", x, name)


def tanh(x, name=None):
    return _unary("Tanh", x, name)


def sigmoid(x, name=None):
    """``1 / (1 + exp(-x))``."""
    return _unary("Sigmoid", x, name)


def is_nan(x, name=None):
    return _unary("IsNan", x, name)


def is_inf(x, name=None):
    return _unary("IsInf", x, name)


def is_finite(x, name=None):
    return _unary("IsFinite", x, name)


def equal(x, y, name=None):
    return _binary("Equal", x, y, name)


def not_equal(x, y, name=None):
    return _binary("NotEqual", x, y, name)


def less(x, y, name=None):
    return _binary("Less", x, y, name)


def less_equal(x, y, name=None):
    return _binary("LessEqual", x, y, name)


def greater(x, y, name=None):
    return _binary("Greater", x, y, name)


def greater_equal(x, y, name=None):
    return _binary("GreaterEqual", x, y, name)


def logical_and(x, y, name=None):
    return _binary("LogicalAnd", x, y, name)


def logical_or(x, y, name=None):
    return _binary("LogicalOr", x, y, name)


def logical_not(x, name=None):
    return _unary("LogicalNot", x, name)


def logical_xor(x, y, name="LogicalXor"):
    """``(x | y) & ~(x & y)``, built from the logical ops as TF does."""
    with op_scope(name, "LogicalXor", [x, y]) as (_g, scope):
        x, y = convert_pair(x, y)
        return logical_and(logical_or(x, y), logical_not(logical_and(x, y)), name=scope)


def cast(x, dtype, name=None):
    """``x`` as ``dtype`` (float to int truncates toward zero); ``x`` itself when
    it already has that dtype."""
    base = dtypes.as_dtype(dtype).base_dtype
    if isinstance(x, Tensor) and x.dtype.base_dtype is base:
        return x
    with op_scope(name, "Cast", [x]) as (g, scope):
        x = convert_to_tensor(x, name="x")
        if x.dtype.base_dtype is base:
            return x
        return g.create_op(
            "Cast", [x], {"SrcT": x.dtype.base_dtype, "DstT": base}, name=scope
        ).outputs[0]


def to_float(x, name="ToFloat"):
    return cast(x, dtypes.float32, name=name)


def to_double(x, name="ToDouble"):
    return cast(x, dtypes.float64, name=name)


def to_int32(x, name="ToInt32"):
    return cast(x, dtypes.int32, name=name)


def to_int64(x, name="ToInt64"):
    return cast(x, dtypes.int64, name=name)


def add_n(inputs, name=None):
    """The element-wise sum of a list of tensors of one shape and dtype."""
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise ValueError(
            "inputs must be a non-empty list of tensors of the same shape and type."
        )
    with op_scope(name, "AddN", inputs) as (g, scope):
        ts = [convert_to_tensor(t) for t in inputs]
        if len(ts) == 1:
            return identity(ts[0], name=scope)
        return g.create_op(
            "AddN", ts, {"N": len(ts), "T": ts[0].dtype.base_dtype}, name=scope
        ).outputs[0]
