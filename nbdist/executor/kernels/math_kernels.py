"""NumPy kernels of the math and clip ops (``nbdist.ops.math_ops``,
``clip_ops``): element-wise ops, ``AddN``, ``Cast``, ``MatMul``, the reductions and
``ClipByValue``.

Element-wise kernels run under ``np.errstate(all="ignore")``: as in TF, 1/0 is
inf and log(-1) NaN without a warning. Integer division by zero and other bad
input raise ``InvalidArgumentError`` naming the node. Every result is a fresh
array (or a NumPy scalar), never a view of an input.
"""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import (
    axis_of,
    fmt,
    ignore_fp_errors,
    ints,
    numpy_type,
    op_error,
    scalar_int,
)
from nbdist.ops import clip_ops, math_ops  # noqa: F401  (registers the ops)
from nbdist.framework import dtypes


# -- element-wise ---------------------------------------------------------------------
def _sigmoid(x):
    # 1 / (1 + e^-x) in place: a tenth of logaddexp's cost (an LSTM's gates run
    # it on every step). Where e^-x overflows (x < -88 in float32) the result is
    # 0, as TF's; errors are ignored by the kernel.
    x = np.asarray(x)
    if x.dtype.kind not in "fc":
        return np.exp(-np.logaddexp(0, -x))
    if x.dtype == np.float16:  # e^-x overflows float16 from x < -11
        return _sigmoid(x.astype(np.float32)).astype(np.float16)
    e = np.exp(-x)
    if not isinstance(e, np.ndarray):  # a rank-0 input gives a NumPy scalar
        return np.reciprocal(e + 1)
    e += 1
    return np.reciprocal(e, out=e)


_UNARY = {
    "Neg": np.negative,
    "Square": np.square,
    "Sqrt": np.sqrt,
    "Rsqrt": lambda x: np.reciprocal(np.sqrt(x)),
    "Exp": np.exp,
    "Log": np.log,
    "Abs": np.abs,
    "Sign": np.sign,
    "Reciprocal": np.reciprocal,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.round,
    "Tanh": np.tanh,
    "Sigmoid": _sigmoid,
    "Sin": np.sin,
    "Cos": np.cos,
    "IsNan": np.isnan,
    "IsInf": np.isinf,
    "IsFinite": np.isfinite,
    "LogicalNot": np.logical_not,
}


def _unary_factory(fn):
    def factory(node):
        @ignore_fp_errors
        def compute(step, x):
            return fn(x)

        return compute

    return factory


for _t, _fn in _UNARY.items():
    register_kernel(_t)(_unary_factory(_fn))

_BINARY = {
    "Sub": np.subtract,
    "Mul": np.multiply,
    "RealDiv": np.true_divide,
    "Maximum": np.maximum,
    "Minimum": np.minimum,
    "SquaredDifference": lambda x, y: np.square(np.subtract(x, y)),
    "Equal": np.equal,
    "NotEqual": np.not_equal,
    "Less": np.less,
    "LessEqual": np.less_equal,
    "Greater": np.greater,
    "GreaterEqual": np.greater_equal,
    "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or,
}
_BOOL_OUT = {"Equal", "NotEqual"}


def _binary_factory(op_type, fn):
    def factory(node):
        bool_out = op_type in _BOOL_OUT

        @ignore_fp_errors
        def compute(step, x, y):
            try:
                out = fn(x, y)
            except ValueError as e:
                raise op_error(
                    node,
                    f"Incompatible shapes: {fmt(np.shape(x))} vs. "
                    f"{fmt(np.shape(y))} ({e})",
                ) from None
            if bool_out and getattr(out, "dtype", None) != np.bool_:
                out = np.asarray(out, dtype=np.bool_)
            return out

        return compute

    return factory


for _t, _fn in _BINARY.items():
    register_kernel(_t)(_binary_factory(_t, _fn))


@register_kernel("Add")
def add_kernel(node):
    is_string = node.attrs.get("T") is dtypes.string

    @ignore_fp_errors
    def compute(step, x, y):
        try:
            out = np.add(x, y)
        except ValueError as e:
            raise op_error(
                node,
                f"Incompatible shapes: {fmt(np.shape(x))} vs. {fmt(np.shape(y))} ({e})",
            ) from None
        if is_string and not isinstance(out, np.ndarray):
            out = np.asarray(out, dtype=object)
        return out

    return compute


def _int_division(fn):
    def factory(node):
        @ignore_fp_errors
        def compute(step, x, y):
            y_arr = np.asarray(y)
            if y_arr.dtype.kind in "iu" and not y_arr.all():
                raise op_error(node, "Integer division by zero")
            try:
                return fn(x, y)
            except ValueError as e:
                raise op_error(
                    node,
                    f"Incompatible shapes: {fmt(np.shape(x))} vs. "
                    f"{fmt(np.shape(y))} ({e})",
                ) from None

        return compute

    return factory


register_kernel("FloorDiv")(_int_division(np.floor_divide))
register_kernel("FloorMod")(_int_division(np.mod))


@register_kernel("Pow")
def pow_kernel(node):
    @ignore_fp_errors
    def compute(step, x, y):
        y_arr = np.asarray(y)
        if y_arr.dtype.kind in "iu" and np.any(y_arr < 0):
            raise op_error(node, "Integers to negative integer powers are not allowed")
        return np.power(x, y)

    return compute


@register_kernel("AddN")
def add_n_kernel(node):
    @ignore_fp_errors
    def compute(step, *xs):
        first = np.shape(xs[0])
        for i, x in enumerate(xs[1:], 1):
            if np.shape(x) != first:
                raise op_error(
                    node,
                    f"Inputs to operation AddN must have the same "
                    f"size and shape.  Input 0: {fmt(first)} != input "
                    f"{i}: {fmt(np.shape(x))}",
                )
        if len(xs) == 1:
            return np.array(xs[0], copy=True)
        out = np.add(xs[0], xs[1])
        for x in xs[2:]:
            out = np.add(out, x)
        return out

    return compute


@register_kernel("Cast")
def cast_kernel(node):
    dst = numpy_type(node.attrs["DstT"])

    @ignore_fp_errors
    def compute(step, x):
        x = np.asarray(x)
        if x.dtype.kind == "c" and dst.kind != "c":
            x = x.real  # TF's cast of a complex value keeps its real part
        return x.astype(dst)

    return compute


@register_kernel("MatMul")
def matmul_kernel(node):
    ta, tb = node.attrs["transpose_a"], node.attrs["transpose_b"]

    @ignore_fp_errors
    def compute(step, a, b):
        a, b = np.asarray(a), np.asarray(b)
        for i, m in enumerate((a, b)):
            if m.ndim != 2:
                raise op_error(
                    node,
                    f"In[{i}] is not a matrix. Instead it has shape {fmt(m.shape)}",
                )
        x = a.T if ta else a
        y = b.T if tb else b
        if x.shape[1] != y.shape[0]:
            raise op_error(
                node,
                f"Matrix size-incompatible: In[0]: {fmt(a.shape)}, "
                f"In[1]: {fmt(b.shape)}",
            )
        return np.matmul(x, y)

    return compute


@register_kernel("BatchMatMul", "BatchMatMulV2")
def batch_matmul_kernel(node):
    adj_x, adj_y = node.attrs["adj_x"], node.attrs["adj_y"]

    def compute(step, x, y):
        x, y = np.asarray(x), np.asarray(y)
        if x.ndim < 2 or y.ndim < 2:
            raise op_error(
                node,
                f"inputs must be at least rank 2, got "
                f"{fmt(x.shape)} and {fmt(y.shape)}",
            )
        a = np.swapaxes(x, -1, -2) if adj_x else x
        b = np.swapaxes(y, -1, -2) if adj_y else y
        if a.shape[-1] != b.shape[-2]:
            raise op_error(
                node,
                f"Matrix size-incompatible: In[0]: {fmt(x.shape)}, "
                f"In[1]: {fmt(y.shape)}",
            )
        try:
            with np.errstate(all="ignore"):
                return np.matmul(a, b)
        except ValueError:
            raise op_error(
                node,
                f"Incompatible batch dimensions: {fmt(x.shape)} vs. {fmt(y.shape)}",
            ) from None

    return compute


# -- reductions ------------------------------------------------------------------------
def _reduction_axes(node, x, axes) -> tuple:
    rank = x.ndim
    out = []
    for a in ints(axes):
        if a < -rank or a >= rank:
            raise op_error(
                node,
                f"Invalid reduction dimension ({a} for input with {rank} dimension(s)",
            )
        a %= rank
        if a in out:
            raise op_error(
                node,
                f"Invalid reduction arguments: Axes contains duplicate dimension: {a}",
            )
        out.append(a)
    return tuple(out)


def _accumulator(np_type):
    return np.float32 if np_type == np.float16 else np_type


def _reduction(kind):
    def factory(node):
        keep = node.attrs["keep_dims"]
        t = node.attrs.get("T")
        np_type = np.dtype(t.as_numpy_dtype) if t is not None else None

        @ignore_fp_errors
        def compute(step, x, axes):
            x = np.asarray(x)
            ax = _reduction_axes(node, x, axes)
            dt = np_type or x.dtype
            # ufunc.reduce: np.sum / np.prod without their Python wrappers
            if kind == "Sum":
                out = np.add.reduce(x, axis=ax, keepdims=keep, dtype=_accumulator(dt))
            elif kind == "Prod":
                out = np.multiply.reduce(x, axis=ax, keepdims=keep,
                                         dtype=_accumulator(dt))
            elif kind == "Mean":
                s = np.add.reduce(x, axis=ax, keepdims=keep, dtype=_accumulator(dt))
                n = int(np.prod([x.shape[a] for a in ax], dtype=np.int64))
                if dt.kind in "iu":
                    if n == 0:
                        out = s
                    else:
                        q = np.abs(s) // n
                        out = np.where(np.asarray(s) < 0, -q, q)
                else:
                    out = np.true_divide(s, n)
            elif kind in ("Max", "Min"):
                if dt.kind == "f":
                    init = -np.inf if kind == "Max" else np.inf
                else:
                    info = np.iinfo(dt)
                    init = info.min if kind == "Max" else info.max
                fn = np.max if kind == "Max" else np.min
                out = fn(x, axis=ax, keepdims=keep, initial=init)
            elif kind == "All":
                return np.all(x, axis=ax, keepdims=keep)
            else:
                return np.any(x, axis=ax, keepdims=keep)
            out = np.asarray(out).astype(dt, copy=False)
            return out if out.ndim else out[()]

        return compute

    return factory


for _t in ("Sum", "Mean", "Max", "Min", "Prod", "All", "Any"):
    register_kernel(_t)(_reduction(_t))


def _arg_reduce(fn):
    def factory(node):
        out_type = node.attrs["output_type"].as_numpy_dtype

        def compute(step, x, dim):
            x = np.asarray(x)
            if x.ndim == 0:
                raise op_error(
                    node, "Expected dimension in the range [0, 0) for a scalar input"
                )
            a = axis_of(node, scalar_int(node, dim, "dimension"), x.ndim, "dimension")
            if x.shape[a] == 0:
                raise op_error(
                    node, f"Reduction axis {a} is empty in shape {fmt(x.shape)}"
                )
            return np.asarray(fn(x, axis=a)).astype(out_type)

        return compute

    return factory


register_kernel("ArgMax")(_arg_reduce(np.argmax))
register_kernel("ArgMin")(_arg_reduce(np.argmin))


@register_kernel("ClipByValue")
def clip_by_value_kernel(node):
    @ignore_fp_errors
    def compute(step, t, lo, hi):
        out = np.minimum(np.maximum(t, lo), hi)
        if np.shape(out) != np.shape(t):
            raise op_error(
                node,
                f"clip_value_min {fmt(np.shape(lo))} and "
                f"clip_value_max {fmt(np.shape(hi))} must be scalars or "
                f"have the shape of t {fmt(np.shape(t))}",
            )
        return out

    return compute
