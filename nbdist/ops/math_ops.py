"""Math ops: ``MatMul``, and the element-wise ops (``math_ops_elementwise``) and
reductions (``math_ops_reduction``) re-exported, so ``nd.add`` ... ``nd.reduce_sum``
are all found here. Importing this module installs the arithmetic operators of
``Tensor`` (``x + y``, ``x @ w``, ``x[1:, None]`` ...).
"""

from __future__ import annotations

from nbdist.ops.array_ops_slicing import slice_helper
from nbdist.ops.math_ops_elementwise import (
    abs,
    add,
    add_n,
    cast,
    ceil,
    cos,
    div,
    divide,
    equal,
    exp,
    floor,
    floor_div,
    floordiv,
    floormod,
    greater,
    greater_equal,
    is_finite,
    is_inf,
    is_nan,
    less,
    less_equal,
    log,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    mod,
    multiply,
    neg,
    negative,
    not_equal,
    pow,
    real_div,  # noqa: F401  (not in nd.*)
    realdiv,
    reciprocal,
    round,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sqrt,
    square,
    squared_difference,
    subtract,
    tanh,
    to_double,
    to_float,
    to_int32,
    to_int64,
    truediv,
)
from nbdist.ops.math_ops_reduction import (
    argmax,
    argmin,
    count_nonzero,
    reduce_all,
    reduce_any,
    reduce_logsumexp,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
)
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import FLOAT, INDEX, check_type, convert_pair, op_scope
from nbdist.framework.ops import Tensor
from nbdist.framework.tensor_shape import TensorShape, broadcast_shapes


def _matmul_infer(c):
    d = c.check_same_dtypes([0, 1])
    check_type(c, 0, FLOAT + INDEX, "a")
    a, b = c.shape(0), c.shape(1)
    for s, arg in ((a, "a"), (b, "b")):
        if s.rank is not None and s.rank != 2:
            raise ValueError(
                f"Shape must be rank 2 but is rank {s.rank} (input '{arg}')"
            )
    a, b = a.with_rank(2), b.with_rank(2)
    m, k1 = (a[1], a[0]) if c.attr("transpose_a") else (a[0], a[1])
    k2, n = (b[1], b[0]) if c.attr("transpose_b") else (b[0], b[1])
    if k1 is not None and k2 is not None and k1 != k2:
        raise ValueError(f"Dimensions must be equal, but are {k1} and {k2}")
    return [(d, TensorShape([m, n]))]


register_op(
    "MatMul",
    _matmul_infer,
    attrs={
        "transpose_a": ("bool", False),
        "transpose_b": ("bool", False),
        "T": ("type", None),
    },
    num_inputs=2,
)


def _batch_matmul_infer(c):
    d = c.check_same_dtypes([0, 1])
    check_type(c, 0, FLOAT + INDEX, "x")
    x, y = c.shape(0), c.shape(1)
    x, y = x.with_rank_at_least(2), y.with_rank_at_least(2)
    if x.rank is None or y.rank is None:
        return [(d, TensorShape(None))]
    m, k1 = (x[-1], x[-2]) if c.attr("adj_x") else (x[-2], x[-1])
    k2, n = (y[-1], y[-2]) if c.attr("adj_y") else (y[-2], y[-1])
    if k1 is not None and k2 is not None and k1 != k2:
        raise ValueError(f"Dimensions must be equal, but are {k1} and {k2}")
    batch = broadcast_shapes(x[:-2], y[:-2])
    return [(d, batch.concatenate([m, n]))]


for _t in ("BatchMatMul", "BatchMatMulV2"):
    register_op(
        _t,
        _batch_matmul_infer,
        attrs={"adj_x": ("bool", False), "adj_y": ("bool", False), "T": ("type", None)},
        num_inputs=2,
    )


# -- wrappers --------------------------------------------------------------------------
def matmul(
    a,
    b,
    transpose_a=False,
    transpose_b=False,
    adjoint_a=False,
    adjoint_b=False,
    a_is_sparse=False,
    b_is_sparse=False,
    name=None,
):
    """Matrix product of rank-2 tensors; batched (``BatchMatMul``) for rank > 2."""
    transpose_a = bool(transpose_a or adjoint_a)
    transpose_b = bool(transpose_b or adjoint_b)
    with op_scope(name, "MatMul", [a, b]) as (g, scope):
        a, b = convert_pair(a, b, "a", "b")
        ra, rb = a.shape.rank, b.shape.rank
        if (ra is not None and ra > 2) or (rb is not None and rb > 2):
            return g.create_op(
                "BatchMatMul",
                [a, b],
                {"adj_x": transpose_a, "adj_y": transpose_b, "T": a.dtype.base_dtype},
                name=scope,
            ).outputs[0]
        return g.create_op(
            "MatMul",
            [a, b],
            {
                "transpose_a": transpose_a,
                "transpose_b": transpose_b,
                "T": a.dtype.base_dtype,
            },
            name=scope,
        ).outputs[0]


__all__ = [
    "abs",
    "add",
    "add_n",
    "argmax",
    "argmin",
    "cast",
    "ceil",
    "cos",
    "count_nonzero",
    "div",
    "divide",
    "equal",
    "exp",
    "floor",
    "floor_div",
    "floordiv",
    "floormod",
    "greater",
    "greater_equal",
    "is_finite",
    "is_inf",
    "is_nan",
    "less",
    "less_equal",
    "log",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "matmul",
    "maximum",
    "minimum",
    "mod",
    "multiply",
    "neg",
    "negative",
    "not_equal",
    "pow",
    "realdiv",
    "reciprocal",
    "reduce_all",
    "reduce_any",
    "reduce_logsumexp",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_prod",
    "reduce_sum",
    "round",
    "rsqrt",
    "sigmoid",
    "sign",
    "sin",
    "sqrt",
    "square",
    "squared_difference",
    "subtract",
    "tanh",
    "to_double",
    "to_float",
    "to_int32",
    "to_int64",
    "truediv",
]


# -- operator overloading on Tensor ----------------------------------------------------
def _binary_operator(fn, op_name):
    def forward(self, other):
        with op_scope(None, op_name, [self, other]) as (_g, scope):
            x, y = convert_pair(self, other)
            return fn(x, y, name=scope)

    def reverse(self, other):
        with op_scope(None, op_name, [self, other]) as (_g, scope):
            x, y = convert_pair(other, self)
            return fn(x, y, name=scope)

    forward.__name__ = f"__{op_name}__"
    reverse.__name__ = f"__r{op_name}__"
    return forward, reverse


def _install_tensor_operators():
    table = [
        ("add", add),
        ("sub", subtract),
        ("mul", multiply),
        ("truediv", truediv),
        ("floordiv", floordiv),
        ("mod", floormod),
        ("pow", pow),
        ("matmul", matmul),
        ("and", logical_and),
        ("or", logical_or),
        ("xor", logical_xor),
    ]
    scope_names = {"and": "and", "or": "or", "xor": "xor"}
    for op_name, fn in table:
        fwd, rev = _binary_operator(fn, scope_names.get(op_name, op_name))
        setattr(Tensor, f"__{op_name}__", fwd)
        setattr(Tensor, f"__r{op_name}__", rev)
    Tensor.__lt__ = lambda self, other: less(self, other)
    Tensor.__le__ = lambda self, other: less_equal(self, other)
    Tensor.__gt__ = lambda self, other: greater(self, other)
    Tensor.__ge__ = lambda self, other: greater_equal(self, other)
    Tensor.__neg__ = lambda self: negative(self)
    Tensor.__abs__ = lambda self: abs(self)
    Tensor.__invert__ = lambda self: logical_not(self)
    Tensor.__getitem__ = slice_helper


_install_tensor_operators()


def _reinstall_variable_operators():
    # Variable forwards every operator Tensor has to its value, but it looked at
    # Tensor when nbdist.ops.variables was imported, which may have been before
    # this module. (If it is imported later, it sees the operators itself.)
    import sys

    mod = sys.modules.get("nbdist.ops.variables")
    if mod is not None and hasattr(mod, "_install_variable_operators"):
        mod._install_variable_operators()


_reinstall_variable_operators()
