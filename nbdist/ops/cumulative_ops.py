"""Scans along an axis: ``cumsum``, ``cumprod`` and ``cumulative_logsumexp``,
each ``exclusive`` (the i-th output leaves out the i-th input) and/or
``reverse`` (from the end), with their gradients.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.cumsum([1, 2, 3], exclusive=True, reverse=True)).tolist()
[5, 3, 0]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import (
    COMPLEX,
    FLOAT,
    INDEX,
    NUMERIC,
    check_type,
    op_scope,
)
from nbdist.framework.ops import convert_to_tensor
from nbdist.ops import array_ops as A
from nbdist.ops import math_ops as M

_ATTRS = {"exclusive": ("bool", False), "reverse": ("bool", False),
          "T": ("type", None), "Tidx": ("type", dtypes.int32)}
_ALLOWED = {"Cumsum": NUMERIC + COMPLEX, "Cumprod": NUMERIC + COMPLEX,
            "CumulativeLogsumexp": FLOAT}


def _scan_infer(c):
    d = check_type(c, 0, _ALLOWED[c.op_type])
    check_type(c, 1, INDEX, "axis")
    return [(d, c.shape(0))]


for _t in _ALLOWED:
    register_op(_t, _scan_infer, attrs=_ATTRS, num_inputs=2)


def _scan(op_type, x, axis, exclusive, reverse, name, default_name):
    with op_scope(name, default_name, [x]) as (g, scope):
        x = convert_to_tensor(x, name="x")
        axis = convert_to_tensor(axis, name="axis")
        return g.create_op(
            op_type, [x, axis],
            {"exclusive": bool(exclusive), "reverse": bool(reverse),
             "T": x.dtype.base_dtype, "Tidx": axis.dtype.base_dtype},
            name=scope).outputs[0]


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """The running sum along ``axis``: ``cumsum([a, b, c])`` is ``[a, a + b,
    a + b + c]``; ``exclusive=True`` gives ``[0, a, a + b]``, ``reverse=True``
    sums from the end."""
    return _scan("Cumsum", x, axis, exclusive, reverse, name, "Cumsum")


def cumprod(x, axis=0, exclusive=False, reverse=False, name=None):
    """The running product along ``axis`` (``exclusive`` starts from 1)."""
    return _scan("Cumprod", x, axis, exclusive, reverse, name, "Cumprod")


def cumulative_logsumexp(x, axis=0, exclusive=False, reverse=False, name=None):
    """``log(cumsum(exp(x)))`` without overflow (``exclusive`` starts from
    -inf)."""
    return _scan("CumulativeLogsumexp", x, axis, exclusive, reverse, name,
                 "CumulativeLogsumexp")


def _attrs(op):
    return op.get_attr("exclusive"), op.get_attr("reverse")


@register_gradient("Cumsum")
def _cumsum_grad(op, grad):
    exclusive, reverse = _attrs(op)
    return [cumsum(grad, op.inputs[1], exclusive, not reverse), None]


@register_gradient("Cumprod")
def _cumprod_grad(op, grad):
    # d out_i / d x_k = out_i / x_k for the k that out_i multiplies (as TF, this
    # divides by x: an input of 0 gets a NaN or inf gradient).
    x, axis = op.inputs
    exclusive, reverse = _attrs(op)
    total = cumsum(M.multiply(op.outputs[0], grad), axis, exclusive, not reverse)
    return [M.realdiv(total, x), None]


@register_gradient("CumulativeLogsumexp")
def _cumulative_logsumexp_grad(op, grad):
    # d out_i / d x_k = exp(x_k - out_i): the gradient is exp(x_k) times a reverse
    # scan of grad_i * exp(-out_i), kept in log space with grad's sign split off.
    x, axis = op.inputs
    out = op.outputs[0]
    exclusive, reverse = _attrs(op)
    zero = A.zeros_like(grad)
    neg_inf = M.log(zero)  # -inf, of grad's dtype

    def part(g):
        log_g = A.where(M.greater(g, zero), M.log(A.where(
            M.greater(g, zero), g, A.ones_like(g))), neg_inf)
        scan = cumulative_logsumexp(M.subtract(log_g, out), axis, exclusive,
                                    not reverse)
        return M.exp(M.add(scan, x))

    return [M.subtract(part(grad), part(M.negative(grad))), None]


__all__ = ["cumprod", "cumsum"]
