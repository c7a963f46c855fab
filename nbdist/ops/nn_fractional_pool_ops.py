"""Fractional pooling (``FractionalMaxPool``, ``FractionalAvgPool`` and their
gradients) with TF1's ``fractional_max_pool`` / ``fractional_avg_pool``: each
spatial axis of length n is cut into ``floor(n / ratio)`` regions whose sizes are
``n // out`` or one more, in a random order (seeded as nbdist's random ops), and
each region is pooled. ``overlapping`` regions also take their right boundary.
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.array_ops import shape
from nbdist.ops.image_ops import input_rank
from nbdist.ops.random_ops import _get_seeds


def _fractional_infer(c):
    x = input_rank(c, 0, 4, "value")
    ratio = list(c.attr("pooling_ratio"))
    if len(ratio) != 4 or ratio[0] != 1.0 or ratio[3] != 1.0 or min(ratio) < 1.0:
        raise ValueError(f"pooling_ratio must be [1.0, rows >= 1, cols >= 1, 1.0], "
                         f"got {ratio}")
    dims = [None if n is None else int(n / r) for n, r in zip(list(x)[1:3],
                                                              ratio[1:3])]
    return [(c.dtype(0), TensorShape([x[0], *dims, x[3]])),
            (dtypes.int64, TensorShape([None if dims[0] is None else dims[0] + 1])),
            (dtypes.int64, TensorShape([None if dims[1] is None else dims[1] + 1]))]


_ATTRS = {"pooling_ratio": ("list(float)", [1.0, 1.0, 1.0, 1.0]),
          "pseudo_random": ("bool", False), "overlapping": ("bool", False),
          "deterministic": ("bool", False), "seed": ("int", 0), "seed2": ("int", 0),
          "T": ("type", dtypes.float32)}
register_op("FractionalMaxPool", _fractional_infer, attrs=_ATTRS, num_inputs=1,
            stateful=True)
register_op("FractionalAvgPool", _fractional_infer, attrs=_ATTRS, num_inputs=1,
            stateful=True)
register_op("FractionalMaxPoolGrad", lambda c: [(c.dtype(0), c.shape(0))],
            attrs={"overlapping": ("bool", False), "T": ("type", dtypes.float32)},
            num_inputs=5)
register_op("FractionalAvgPoolGrad", lambda c: [(c.dtype(1), TensorShape(None))],
            attrs={"overlapping": ("bool", False), "T": ("type", dtypes.float32)},
            num_inputs=4)


def _fractional(op_type, value, pooling_ratio, pseudo_random, overlapping,
                deterministic, seed, seed2, name):
    x = convert_to_tensor(value, name="value")
    s1, s2 = (int(seed), int(seed2)) if (seed or seed2) else _get_seeds(None)
    op = x.graph.create_op(op_type, [x], {
        "pooling_ratio": [float(r) for r in pooling_ratio],
        "pseudo_random": bool(pseudo_random), "overlapping": bool(overlapping),
        "deterministic": bool(deterministic), "seed": s1, "seed2": s2,
        "T": x.dtype.base_dtype}, name=name or op_type)
    return tuple(op.outputs)


def fractional_max_pool(value, pooling_ratio, pseudo_random=False,
                        overlapping=False, deterministic=False, seed=0, seed2=0,
                        name=None):
    """(output, row_pooling_sequence, col_pooling_sequence): max pooling over
    random regions shrinking height and width by ``pooling_ratio[1:3]``."""
    return _fractional("FractionalMaxPool", value, pooling_ratio, pseudo_random,
                       overlapping, deterministic, seed, seed2, name)


def fractional_avg_pool(value, pooling_ratio, pseudo_random=False,
                        overlapping=False, deterministic=False, seed=0, seed2=0,
                        name=None):
    """As ``fractional_max_pool``, averaging each region."""
    return _fractional("FractionalAvgPool", value, pooling_ratio, pseudo_random,
                       overlapping, deterministic, seed, seed2, name)


@register_gradient("FractionalMaxPool")
def _fractional_max_pool_grad(op, grad, *unused):
    x, y, rows, cols = op.inputs[0], op.outputs[0], op.outputs[1], op.outputs[2]
    return [op.graph.create_op(
        "FractionalMaxPoolGrad", [x, y, grad, rows, cols],
        {"overlapping": op.get_attr("overlapping"),
         "T": x.dtype.base_dtype}).outputs[0]]


@register_gradient("FractionalAvgPool")
def _fractional_avg_pool_grad(op, grad, *unused):
    x = op.inputs[0]
    out = op.graph.create_op(
        "FractionalAvgPoolGrad", [shape(x, out_type=dtypes.int64), grad,
                                  op.outputs[1], op.outputs[2]],
        {"overlapping": op.get_attr("overlapping"),
         "T": x.dtype.base_dtype}).outputs[0]
    out.set_shape(x.shape)
    return [out]


__all__ = ["fractional_avg_pool", "fractional_max_pool"]
