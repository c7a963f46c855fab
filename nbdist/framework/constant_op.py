"""Core value ops: constants, placeholders, identity."""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import REQUIRED, register_op, unchanged
from nbdist.framework.ops import (
    convert_to_tensor,
    get_default_graph,
    register_constant_function,
)
from nbdist.framework.tensor_shape import TensorShape, as_shape, dimensions_to_ints

register_op("Const", lambda c: [(c.attr("dtype"), TensorShape(c.attr("value").shape))],
            attrs={"value": ("tensor", REQUIRED), "dtype": ("type", REQUIRED)},
            num_inputs=0)
register_op("Placeholder", lambda c: [(c.attr("dtype"), c.attr("shape"))],
            attrs={"dtype": ("type", REQUIRED), "shape": ("shape", TensorShape(None))},
            num_inputs=0)


def _placeholder_with_default_infer(c):
    if not c.shape(0).is_compatible_with(c.attr("shape")):
        raise ValueError(f"default shape {c.shape(0)} is not compatible with "
                         f"{c.attr('shape')}")
    return [(c.dtype(0), c.attr("shape"))]


register_op("PlaceholderWithDefault", _placeholder_with_default_infer,
            attrs={"dtype": ("type", REQUIRED), "shape": ("shape", REQUIRED)},
            num_inputs=1)
register_op("Identity", unchanged, attrs={"T": ("type", None)}, num_inputs=1)
register_op("StopGradient", unchanged, num_inputs=1)


def to_numpy(value, dtype: dtypes.DType | None = None) -> np.ndarray:
    """A Python value as an array of ``dtype`` (TF's rules when dtype is None)."""
    if dtype is None:
        dtype = dtypes.infer_dtype(value)
    if dtype.base_dtype is dtypes.string:
        arr = np.asarray(value, dtype=object)
        flat = [v.encode() if isinstance(v, str) else v for v in arr.ravel()]
        if not all(isinstance(v, (bytes, np.bytes_)) for v in flat):
            raise TypeError(f"Expected string values, got {value!r:.60}")
        out = np.empty(arr.shape, dtype=object)
        out.ravel()[:] = [bytes(v) for v in flat]
        return out
    arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind in "SU":
        raise TypeError(f"Expected {dtype.name}, got {value!r:.60} of type "
                        f"'{type(value).__name__}' instead.")
    target = np.dtype(dtype.as_numpy_dtype)
    if arr.dtype.kind == "f" and target.kind in "iub":
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise TypeError(f"Expected {dtype.name}, got {value!r:.60} with "
                            "fractional values.")
    if arr.dtype.kind in "iu" and target.kind in "iu" and arr.size:
        info = np.iinfo(target)
        if arr.min() < info.min or arr.max() > info.max:
            raise ValueError(f"Value {value!r:.60} out of range for {dtype.name}")
    return np.asarray(arr, dtype=target)


def constant(value, dtype=None, shape=None, name="Const", verify_shape=False):
    """A constant tensor: ``nd.constant([[1., 2.]])``, ``nd.constant("hi")``.

    Python floats become float32 and ints int32, as in TF.
    """
    dtype = dtypes.as_dtype(dtype) if dtype is not None else None
    value = dimensions_to_ints(value)
    arr = to_numpy(value, dtype)
    if shape is not None:
        shape = tuple(as_shape(shape).as_list())
        if arr.shape != shape:
            if verify_shape:
                raise TypeError(f"Expected Tensor's shape: {shape}, got {arr.shape}.")
            if arr.size == 1:
                arr = np.full(shape, arr.reshape(()), dtype=arr.dtype)
            elif arr.size == int(np.prod(shape)):
                arr = arr.reshape(shape)
            else:
                raise TypeError(f"Eager execution of tf.constant with unsupported "
                                f"shape. Tensor {value!r:.60} (converted from "
                                f"{arr.shape}) has {arr.size} elements, but got "
                                f"`shape` {shape} with {int(np.prod(shape))} "
                                "elements).")
    dt = dtype or dtypes.as_dtype(arr.dtype) if arr.dtype != object else (
        dtype or dtypes.string)
    g = get_default_graph()
    op = g.create_op("Const", [], {"value": arr, "dtype": dt}, name=name)
    return op.outputs[0]


register_constant_function(constant)


def placeholder(dtype, shape=None, name=None):
    """A tensor that must be fed: ``x = nd.placeholder(nd.float32, [None, 784])``."""
    dtype = dtypes.as_dtype(dtype)
    op = get_default_graph().create_op(
        "Placeholder", [], {"dtype": dtype, "shape": as_shape(shape)},
        name=name or "Placeholder")
    return op.outputs[0]


def placeholder_with_default(input, shape, name=None):  # noqa: A002 - TF's name
    """A tensor that is ``input`` unless fed."""
    t = convert_to_tensor(input)
    op = get_default_graph().create_op(
        "PlaceholderWithDefault", [t], {"dtype": t.dtype, "shape": as_shape(shape)},
        name=name or "PlaceholderWithDefault")
    return op.outputs[0]


def identity(input, name=None):  # noqa: A002
    """Returns a tensor with the same value; reading a variable's ref snapshots it."""
    t = convert_to_tensor(input)
    g = t.graph
    op = g.create_op("Identity", [t], {"T": t.dtype.base_dtype},
                     name=name or "Identity")
    out = op.outputs[0]
    if t.dtype.is_ref_dtype:
        out._dtype = t.dtype.base_dtype
    return out


def stop_gradient(input, name=None):  # noqa: A002
    t = convert_to_tensor(input)
    return t.graph.create_op("StopGradient", [t], name=name or "StopGradient").outputs[0]
