"""Grayscale morphology: the op ``Dilation2D`` and its two gradients, with TF1's
``dilation2d`` and ``erosion2d`` (``-dilation2d(-x, reversed kernel)``).

``out[b, y, x, c] = max over (i, j) of
value[b, y * s + i * r - pad, x * s + j * r - pad, c] + filter[i, j, c]``,
positions outside the image never winning; the gradients go to the winning tap.
"""

from __future__ import annotations

from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops as A
from nbdist.ops import math_ops as M
from nbdist.ops.image_ops import input_rank
from nbdist.ops.nn_conv3d_ops import out_size


def _dilation_infer(c):
    x = input_rank(c, 0, 4, "input")
    f = input_rank(c, 1, 3, "filter")
    s, r = list(c.attr("strides")), list(c.attr("rates"))
    if len(s) != 4 or len(r) != 4 or s[0] != 1 or s[3] != 1 or r[0] != 1 or r[3] != 1:
        raise ValueError("Dilation2D: strides and rates must be [1, h, w, 1]")
    if c.attr("padding") not in ("SAME", "VALID"):
        raise ValueError(f"padding must be SAME or VALID, got {c.attr('padding')}")
    dims = [None if n is None or k is None else
            out_size(n, k, st, rt, c.attr("padding"))
            for n, k, st, rt in zip(list(x)[1:3], list(f)[:2], s[1:3], r[1:3])]
    return [(c.dtype(0), TensorShape([x[0], *dims, x[3]]))]


_ATTRS = {"T": ("type", None), "strides": ("list(int)", REQUIRED),
          "rates": ("list(int)", REQUIRED), "padding": ("string", REQUIRED)}
register_op("Dilation2D", _dilation_infer, attrs=_ATTRS, num_inputs=2)
register_op("Dilation2DBackpropInput", lambda c: [(c.dtype(0), c.shape(0))],
            attrs=_ATTRS, num_inputs=3)
register_op("Dilation2DBackpropFilter", lambda c: [(c.dtype(1), c.shape(1))],
            attrs=_ATTRS, num_inputs=3)


def dilation2d(input, filter=None, strides=None, rates=None,  # noqa: A002
               padding=None, name=None, filters=None, dilations=None):
    """Grayscale dilation of [batch, h, w, depth] by ``filter`` [kh, kw, depth].

    >>> import numpy as np, nbdist as nd
    >>> x = np.array([0, 5, 1, 0], np.float32).reshape(1, 1, 4, 1)
    >>> with nd.Session() as s:
    ...     s.run(nd.nn.dilation2d(x, np.zeros((1, 3, 1), np.float32),
    ...                            [1, 1, 1, 1], [1, 1, 1, 1], "SAME")).ravel().tolist()
    [5.0, 5.0, 5.0, 1.0]
    """
    filter = filters if filter is None else filter  # noqa: A001
    rates = dilations if rates is None else rates
    x = convert_to_tensor(input, name="input")
    f = convert_to_tensor(filter, dtype=x.dtype.base_dtype, name="filter")
    return x.graph.create_op("Dilation2D", [x, f], {
        "T": x.dtype.base_dtype, "strides": [int(v) for v in strides],
        "rates": [int(v) for v in rates], "padding": padding},
        name=name or "dilation2d").outputs[0]


def erosion2d(value, kernel, strides, rates, padding, name=None):
    """Grayscale erosion: ``-dilation2d(-value, kernel reversed in h and w)``."""
    with get_default_graph().name_scope(name or "erosion2d") as scope:
        k = A.reverse(convert_to_tensor(kernel, name="kernel"), [0, 1])
        return M.negative(dilation2d(M.negative(value), k, strides, rates, padding),
                          name=scope)


@register_gradient("Dilation2D")
def _dilation2d_grad(op, grad):
    x, f = op.inputs
    attrs = {k: op.get_attr(k) for k in ("strides", "rates", "padding")}
    attrs["T"] = x.dtype.base_dtype
    return [op.graph.create_op("Dilation2DBackpropInput", [x, f, grad],
                               attrs).outputs[0],
            op.graph.create_op("Dilation2DBackpropFilter", [x, f, grad],
                               attrs).outputs[0]]


__all__ = ["dilation2d", "erosion2d"]
