"""Shape utilities over several tensors or checked at run time: ``EnsureShape``
(``ensure_shape``), ``shape_n``, ``parallel_stack``, ``guarantee_const``, and
``Bitcast`` (the same bytes read as another dtype).

>>> import nbdist as nd
>>> x = nd.placeholder_with_default([1.0, 2.0], None)
>>> y = nd.ensure_shape(x, [2])
>>> y.shape.as_list()
[2]
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable, register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape, as_shape
from nbdist.ops import array_ops as A

__all__ = ["bitcast", "ensure_shape", "guarantee_const", "parallel_stack",
           "shape_n"]


def _ensure_shape_infer(c):
    want, have = c.attr("shape"), c.shape(0)
    if not have.is_compatible_with(want):
        raise ValueError(f"Shape of tensor {have} is not compatible with expected "
                         f"shape {want}.")
    return [(c.dtype(0), have.merge_with(want) if want.rank is not None else have)]


register_op("EnsureShape", _ensure_shape_infer,
            attrs={"T": ("type", None), "shape": ("shape", None)}, num_inputs=1)
register_gradient("EnsureShape")(lambda op, grad: [grad])


def ensure_shape(x, shape, name=None):
    """``x``, checked at run time to have a shape compatible with ``shape``
    (None entries match anything), and known to have it while building."""
    with op_scope(name, "EnsureShape", [x]) as (g, scope):
        t = convert_to_tensor(x, name="input")
        return g.create_op("EnsureShape", [t], {"T": t.dtype.base_dtype,
                                                "shape": as_shape(shape)},
                           name=scope).outputs[0]


def shape_n(input, out_type=dtypes.int32, name=None):
    """The shapes of the tensors of the list ``input``."""
    with op_scope(name, "ShapeN", list(input)):
        return [A.shape(t, out_type=out_type) for t in input]


def parallel_stack(values, name="parallel_stack"):
    """``stack(values)`` (TF's version copies the inputs in parallel; the
    result is the same)."""
    return A.stack(values, name=name)


def guarantee_const(input, name=None):
    """``input`` unchanged (TF's promise that it is constant is a hint only)."""
    from nbdist.framework.constant_op import identity

    return identity(input, name=name or "GuaranteeConst")


def _bitcast_infer(c):
    src, dst = c.dtype(0), c.attr("type")
    a, b = np.dtype(src.as_numpy_dtype).itemsize, np.dtype(dst.as_numpy_dtype).itemsize
    s = c.shape(0)
    if s.rank is None or a == b:
        return [(dst, s if a == b else TensorShape(None))]
    if a > b:
        return [(dst, s.concatenate([a // b]))]
    if s.rank == 0 or (s[-1] is not None and s[-1] != b // a):
        raise ValueError(f"Cannot bitcast from {src.name} to {dst.name}: the last "
                         f"dimension of {s} must be {b // a}")
    return [(dst, s[:-1])]


register_op("Bitcast", _bitcast_infer, attrs={"T": ("type", None),
                                              "type": ("type", None)}, num_inputs=1)
NotDifferentiable("Bitcast")


def bitcast(input, type, name=None):
    """The bytes of ``input`` read as ``type``: a larger type takes the last
    dimension's elements together, a smaller one adds a last dimension."""
    with op_scope(name, "Bitcast", [input]) as (g, scope):
        t = convert_to_tensor(input, name="input")
        return g.create_op("Bitcast", [t], {"T": t.dtype.base_dtype,
                                            "type": dtypes.as_dtype(type)},
                           name=scope).outputs[0]
