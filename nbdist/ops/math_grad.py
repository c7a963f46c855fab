"""Gradients of the math ops (element-wise, reductions, ``MatMul``, ``Cast``...).

Broadcasting binary ops sum each incoming gradient back to its input's shape
(``sum_to``): statically when the shapes tell which axes were broadcast, else
at run time through ``BroadcastGradientArgs``.
"""

from __future__ import annotations

import numpy as np

from nbdist.framework.gradient_registry import NotDifferentiable, register_gradient
from nbdist.framework.ops import Tensor, _static_value, convert_to_tensor


def _m():
    from nbdist.ops import math_ops

    return math_ops


def _a():
    from nbdist.ops import array_ops

    return array_ops


# -- shape helpers shared by the gradient modules -------------------------------------
def static_ints(t: Tensor):
    """``t``'s value as a list of ints when known while building, else None."""
    v = _static_value(t)
    if v is None:
        return None
    return [int(i) for i in np.ravel(v)]


def shape_of(x: Tensor):
    """``x``'s shape: a Python list when fully known, else a ``Shape`` tensor."""
    if x.shape.is_fully_defined():
        return x.shape.as_list()
    return _a().shape(x)


def _padded_dim(t: Tensor, i: int, n: int):
    lead = n - t.shape.rank
    return 1 if i < lead else t.shape[i - lead]


def sum_to(grad, x: Tensor, others=()):
    """``grad`` (shaped like ``x`` broadcast with ``others``) summed to x's shape."""
    if grad is None:
        return None
    M, A = _m(), _a()
    gs, xs = grad.shape, x.shape
    if xs.is_fully_defined() and gs.is_fully_defined() and xs == gs:
        return grad
    ranks_known = gs.rank is not None and xs.rank is not None and all(
        o.shape.rank is not None for o in others)
    if ranks_known and gs.rank >= xs.rank:
        n, lead = gs.rank, gs.rank - xs.rank
        axes, static = [], True
        for i in range(n):
            if i < lead:
                axes.append(i)
                continue
            xi, gi = xs[i - lead], gs[i]
            if xi == 1:
                if gi != 1:
                    axes.append(i)
            elif xi is not None or gi == 1:
                continue
            elif others and all(_padded_dim(o, i, n) == 1 for o in others):
                continue
            else:
                static = False
                break
        if static:
            out = grad
            if axes:
                out = M.reduce_sum(out, axes)
            if any(i >= lead for i in axes):
                out = A.reshape(out, shape_of(x))
            return out
    from nbdist.ops.nn_ops import broadcast_gradient_args

    sx = A.shape(x)
    rx, _ = broadcast_gradient_args(sx, A.shape(grad))
    return A.reshape(M.reduce_sum(grad, rx), sx)


def _binary_grads(op, gx, gy):
    x, y = op.inputs[0], op.inputs[1]
    return [sum_to(gx, x, [y]), sum_to(gy, y, [x])]


# -- element-wise binary ---------------------------------------------------------------
@register_gradient("AddN")
def _add_n_grad(op, grad):
    return [grad] * len(op.inputs)


@register_gradient("Add")
def _add_grad(op, grad):
    return _binary_grads(op, grad, grad)


@register_gradient("Sub")
def _sub_grad(op, grad):
    return _binary_grads(op, grad, _m().negative(grad))


@register_gradient("Mul")
def _mul_grad(op, grad):
    M = _m()
    x, y = op.inputs
    return _binary_grads(op, M.multiply(grad, y), M.multiply(x, grad))


@register_gradient("RealDiv")
def _real_div_grad(op, grad):
    M = _m()
    x, y = op.inputs
    gx = M.realdiv(grad, y)
    gy = M.multiply(grad, M.realdiv(M.realdiv(M.negative(x), y), y))
    return _binary_grads(op, gx, gy)


@register_gradient("Pow")
def _pow_grad(op, grad):
    M, A = _m(), _a()
    x, y = op.inputs
    z = op.outputs[0]
    one = convert_to_tensor(1, dtype=y.dtype.base_dtype)
    gx = M.multiply(M.multiply(grad, y), M.pow(x, M.subtract(y, one)))
    mask = M.greater(x, 0)
    safe_x = A.where(mask, x, A.ones_like(x))
    log_x = A.where(mask, M.log(safe_x), A.zeros_like(x))
    gy = M.multiply(M.multiply(grad, z), log_x)
    return _binary_grads(op, gx, gy)


def _min_max_grad(op, grad, selector):
    A = _a()
    x, y = op.inputs
    mask = selector(x, y)  # shaped like grad: x broadcast with y
    zeros = A.zeros_like(grad)
    gx = A.where(mask, grad, zeros)
    gy = A.where(mask, zeros, grad)
    return _binary_grads(op, gx, gy)


@register_gradient("Maximum")
def _maximum_grad(op, grad):
    return _min_max_grad(op, grad, _m().greater_equal)


@register_gradient("Minimum")
def _minimum_grad(op, grad):
    return _min_max_grad(op, grad, _m().less_equal)


@register_gradient("SquaredDifference")
def _squared_difference_grad(op, grad):
    M = _m()
    x, y = op.inputs
    g = M.multiply(M.multiply(grad, 2), M.subtract(x, y))
    return [sum_to(g, x, [y]), M.negative(sum_to(g, y, [x]))]


@register_gradient("FloorMod")
def _floor_mod_grad(op, grad):
    M = _m()
    x, y = op.inputs
    gy = M.multiply(grad, M.negative(M.floordiv(x, y)))
    return _binary_grads(op, grad, gy)


NotDifferentiable("FloorDiv")


# -- element-wise unary ----------------------------------------------------------------
@register_gradient("Neg")
def _neg_grad(op, grad):
    return [_m().negative(grad)]


@register_gradient("Square")
def _square_grad(op, grad):
    M = _m()
    return [M.multiply(grad, M.multiply(op.inputs[0], 2))]


@register_gradient("Sqrt")
def _sqrt_grad(op, grad):
    M = _m()
    return [M.realdiv(M.multiply(grad, 0.5), op.outputs[0])]


@register_gradient("Rsqrt")
def _rsqrt_grad(op, grad):
    M = _m()
    y = op.outputs[0]
    return [M.multiply(grad, M.multiply(M.multiply(y, M.square(y)), -0.5))]


@register_gradient("Exp")
def _exp_grad(op, grad):
    return [_m().multiply(grad, op.outputs[0])]


@register_gradient("Log")
def _log_grad(op, grad):
    M = _m()
    return [M.multiply(grad, M.reciprocal(op.inputs[0]))]


@register_gradient("Abs")
def _abs_grad(op, grad):
    M = _m()
    return [M.multiply(grad, M.sign(op.inputs[0]))]


@register_gradient("Reciprocal")
def _reciprocal_grad(op, grad):
    M = _m()
    y = op.outputs[0]
    return [M.negative(M.multiply(grad, M.square(y)))]


@register_gradient("Tanh")
def _tanh_grad(op, grad):
    M = _m()
    y = op.outputs[0]
    one = convert_to_tensor(1, dtype=y.dtype.base_dtype)
    return [M.multiply(grad, M.subtract(one, M.square(y)))]


@register_gradient("Sigmoid")
def _sigmoid_grad(op, grad):
    M = _m()
    y = op.outputs[0]
    one = convert_to_tensor(1, dtype=y.dtype.base_dtype)
    return [M.multiply(grad, M.multiply(y, M.subtract(one, y)))]


@register_gradient("Sin")
def _sin_grad(op, grad):
    M = _m()
    return [M.multiply(grad, M.cos(op.inputs[0]))]


@register_gradient("Cos")
def _cos_grad(op, grad):
    M = _m()
    return [M.negative(M.multiply(grad, M.sin(op.inputs[0])))]


@register_gradient("Sign")
def _sign_grad(op, grad):
    return [_a().zeros_like(op.inputs[0])]


for _t in ("Floor", "Ceil", "Round", "Equal", "NotEqual", "Less", "LessEqual",
           "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot",
           "IsNan", "IsInf", "IsFinite", "ArgMax", "ArgMin", "All", "Any"):
    NotDifferentiable(_t)


# -- matrix products -------------------------------------------------------------------
@register_gradient("MatMul")
def _matmul_grad(op, grad):
    M = _m()
    a, b = op.inputs
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    if not ta and not tb:
        ga = M.matmul(grad, b, transpose_b=True)
        gb = M.matmul(a, grad, transpose_a=True)
    elif not ta and tb:
        ga = M.matmul(grad, b)
        gb = M.matmul(grad, a, transpose_a=True)
    elif ta and not tb:
        ga = M.matmul(b, grad, transpose_b=True)
        gb = M.matmul(a, grad)
    else:
        ga = M.matmul(b, grad, transpose_a=True, transpose_b=True)
        gb = M.matmul(grad, a, transpose_a=True, transpose_b=True)
    return [ga, gb]


def _batch_matmul_grad(op, grad):
    M = _m()
    x, y = op.inputs
    ax, ay = op.get_attr("adj_x"), op.get_attr("adj_y")
    if not ax and not ay:
        gx = M.matmul(grad, y, transpose_b=True)
        gy = M.matmul(x, grad, transpose_a=True)
    elif not ax and ay:
        gx = M.matmul(grad, y)
        gy = M.matmul(grad, x, transpose_a=True)
    elif ax and not ay:
        gx = M.matmul(y, grad, transpose_b=True)
        gy = M.matmul(x, grad)
    else:
        gx = M.matmul(y, grad, transpose_a=True, transpose_b=True)
        gy = M.matmul(grad, x, transpose_a=True, transpose_b=True)
    return [sum_to(gx, x), sum_to(gy, y)]


register_gradient("BatchMatMul")(_batch_matmul_grad)
register_gradient("BatchMatMulV2")(_batch_matmul_grad)


# -- reductions ------------------------------------------------------------------------
def reduction_axes(x: Tensor, axes: Tensor):
    """The reduced axes as sorted non-negative ints, or None when not static."""
    rank = x.shape.rank
    values = static_ints(axes)
    if rank is None or values is None:
        return None
    if any(not -rank <= a < rank for a in values):
        return None
    return sorted({a % rank for a in values})


def _kept_shape(x: Tensor, axes_t: Tensor, axes):
    """The shape of the reduction with keep_dims: a list (one -1 at most) or a
    tensor."""
    if axes is not None:
        dims = [1 if i in axes else (-1 if d is None else d)
                for i, d in enumerate(x.shape.as_list() if x.shape.is_fully_defined()
                                      else x.shape.dims)]
        if dims.count(-1) <= 1:
            return dims
    from nbdist.ops.nn_ops import reduced_shape

    return reduced_shape(_a().shape(x), axes_t)


def broadcast_reduction_grad(op, grad):
    """The gradient of a reduction (op inputs: input, axes) tiled to x's shape."""
    M, A = _m(), _a()
    x, axes_t = op.inputs[0], op.inputs[1]
    axes = reduction_axes(x, axes_t)
    keep = op.get_attr("keep_dims")
    if axes is not None and x.shape.is_fully_defined():
        dims = x.shape.as_list()
        kept = [1 if i in axes else d for i, d in enumerate(dims)]
        if not keep and grad.shape != kept:
            grad = A.reshape(grad, kept)
        multiples = [d if i in axes else 1 for i, d in enumerate(dims)]
        if any(m != 1 for m in multiples):
            grad = A.tile(grad, multiples)
        return grad
    kept = _kept_shape(x, axes_t, axes)
    if not keep:
        grad = A.reshape(grad, kept)
    input_shape = A.shape(x)
    kept_t = kept if isinstance(kept, Tensor) else A.shape(grad)
    multiples = M.floordiv(input_shape, M.maximum(kept_t, 1))
    return A.tile(grad, multiples)


@register_gradient("Sum")
def _sum_grad(op, grad):
    return [broadcast_reduction_grad(op, grad), None]


@register_gradient("Mean")
def _mean_grad(op, grad):
    M, A = _m(), _a()
    x, y = op.inputs[0], op.outputs[0]
    sum_grad = broadcast_reduction_grad(op, grad)
    axes = reduction_axes(x, op.inputs[1])
    dt = sum_grad.dtype.base_dtype
    if axes is not None and all(x.shape[i] is not None for i in axes):
        factor = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
        return [M.realdiv(sum_grad, convert_to_tensor(max(factor, 1), dtype=dt)),
                None]
    in_size = M.reduce_prod(A.shape(x))
    out_size = M.reduce_prod(A.shape(y))
    factor = M.floordiv(in_size, M.maximum(out_size, 1))
    return [M.realdiv(sum_grad, M.cast(factor, dt)), None]


@register_gradient("Prod")
def _prod_grad(op, grad):
    from nbdist.ops.nn_ops import reduce_prod_others

    M = _m()
    x, axes_t = op.inputs
    others = reduce_prod_others(x, axes_t)
    return [M.multiply(broadcast_reduction_grad(op, grad), others), None]


def _min_or_max_grad(op, grad):
    M, A = _m(), _a()
    x, axes_t = op.inputs
    y = op.outputs[0]
    if not op.get_attr("keep_dims"):
        kept = _kept_shape(x, axes_t, reduction_axes(x, axes_t))
        y = A.reshape(y, kept)
        grad = A.reshape(grad, kept)
    indicators = M.cast(M.equal(y, x), grad.dtype.base_dtype)
    num_selected = M.reduce_sum(indicators, axes_t, keepdims=True)
    return [M.multiply(M.realdiv(indicators, num_selected), grad), None]


register_gradient("Max")(_min_or_max_grad)
register_gradient("Min")(_min_or_max_grad)


# -- casts -----------------------------------------------------------------------------
@register_gradient("Cast")
def _cast_grad(op, grad):
    src = op.inputs[0].dtype.base_dtype
    dst = op.get_attr("DstT")
    if src.is_floating and dst.is_floating:
        return [_m().cast(grad, src)]
    return [None]


__all__ = ["sum_to", "shape_of", "static_ints", "reduction_axes",
           "broadcast_reduction_grad"]
