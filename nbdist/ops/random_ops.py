"""Random ops: ``random_normal``, ``random_uniform``, ``truncated_normal``,
``random_shuffle``.

Seeds follow TF's rule (``ops.get_seed``): the graph-level seed and the op seed
give the op's (``seed``, ``seed2``) attrs. With neither set both are 0 and the
kernel draws fresh entropy; otherwise a re-created session (or a graph built
the same way) reproduces the same sequence, and every run advances it.
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import (
    REQUIRED,
    register_op,
    shape_from_constant,
    unchanged,
)
from nbdist.framework.ops import Tensor, convert_to_tensor, get_default_graph, get_seed
from nbdist.framework.tensor_shape import TensorShape, as_shape, dimensions_to_ints

__all__ = ["random_normal", "random_uniform", "truncated_normal", "random_shuffle"]

_MAXINT32 = 2**31 - 1
_FLOATS = (dtypes.float16, dtypes.float32, dtypes.float64)
_SHAPE_TYPES = (dtypes.int32, dtypes.int64)


def _shape_input_infer(c, i=0):
    if c.dtype(i) not in _SHAPE_TYPES:
        raise TypeError(f"shape must be int32 or int64, got {c.dtype(i).name}")
    sh = c.shape(i)
    if sh.rank is not None and sh.rank != 1:
        raise ValueError(f"shape must be a vector, got rank {sh.rank}")
    value = c.constant(i)
    if value is not None:
        if np.any(np.asarray(value) < 0):
            raise ValueError(f"shape {np.asarray(value).tolist()} has a negative "
                             "dimension")
        return shape_from_constant(value)
    if sh.rank == 1 and sh[0] is not None:
        return TensorShape([None] * sh[0])
    return TensorShape(None)


def _random_float_infer(c):
    dt = c.attr("dtype")
    if dt not in _FLOATS:
        raise TypeError(f"dtype must be a floating point type, got {dt.name}")
    return [(dt, _shape_input_infer(c))]


def _random_int_infer(c):
    out = c.attr("Tout")
    if out not in _SHAPE_TYPES:
        raise TypeError(f"Tout must be int32 or int64, got {out.name}")
    for i, what in ((1, "minval"), (2, "maxval")):
        if c.dtype(i) is not out:
            raise TypeError(f"{what} must be {out.name}, got {c.dtype(i).name}")
        if c.shape(i).rank not in (None, 0):
            raise ValueError(f"{what} must be a scalar, got shape {c.shape(i)}")
    return [(out, _shape_input_infer(c))]


_SEED_ATTRS = {"seed": ("int", 0), "seed2": ("int", 0)}
for _t in ("RandomStandardNormal", "RandomUniform", "TruncatedNormal"):
    register_op(_t, _random_float_infer,
                attrs=dict(_SEED_ATTRS, dtype=("type", REQUIRED),
                           T=("type", dtypes.int32)),
                num_inputs=1, stateful=True)
register_op("RandomUniformInt", _random_int_infer,
            attrs=dict(_SEED_ATTRS, Tout=("type", REQUIRED), T=("type", dtypes.int32)),
            num_inputs=3, stateful=True)


register_op("RandomShuffle", unchanged,
            attrs=dict(_SEED_ATTRS, T=("type", None)), num_inputs=1, stateful=True)


# -- helpers -------------------------------------------------------------------------
def _get_seeds(op_seed):
    """TF's ``random_seed.get_seed``; (0, 0) is avoided as it means "random"."""
    seed, seed2 = get_seed(op_seed)
    if seed is None:
        return 0, 0
    seed, seed2 = int(seed), int(seed2)
    if (seed, seed2) == (0, 0):
        return 0, _MAXINT32
    return seed, seed2


def _shape_tensor(shape) -> Tensor:
    """A 1-D int32 (int64 when needed) tensor from a list, TensorShape or Tensor."""
    if isinstance(shape, Tensor) or hasattr(shape, "_as_graph_element"):
        t = convert_to_tensor(shape)
        if t.dtype.base_dtype not in _SHAPE_TYPES:
            raise TypeError(f"shape must be int32 or int64, got {t.dtype.name}")
        return t
    if isinstance(shape, TensorShape):
        dims = as_shape(shape).as_list()
        if any(d is None for d in dims):
            raise ValueError(f"shape {shape} must be fully defined")
        shape = dims
    arr = np.asarray(dimensions_to_ints(shape))
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.size == 0:
        arr = arr.astype(np.int32)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"shape must be a list of ints, got {shape!r:.60}")
    dt = dtypes.int64 if arr.size and arr.max() > _MAXINT32 else dtypes.int32
    return convert_to_tensor(arr.astype(dt.as_numpy_dtype), name="shape")


def _float_dtype(dtype) -> dtypes.DType:
    dt = dtypes.as_dtype(dtype).base_dtype
    if dt not in _FLOATS:
        raise ValueError(f"Invalid dtype {dt.name}: a floating point type is needed")
    return dt


def _random(g, op_type, inputs, attrs, name):
    """Builds a random op; a shape given as ``nd.shape(x)`` gives x's static shape."""
    out = g.create_op(op_type, inputs, attrs, name=name).outputs[0]
    shape_t = inputs[0]
    if shape_t.op.type == "Shape":
        try:
            out.set_shape(shape_t.op.inputs[0].shape)
        except ValueError:
            pass  # the run-time shape decides
    return out


def _scale_shift(rnd, scale, shift, name):
    from nbdist.ops import math_ops

    return math_ops.add(math_ops.multiply(rnd, scale), shift, name=name)


def _normal(op_type, default_name, shape, mean, stddev, dtype, seed, name):
    dtype = _float_dtype(dtype)
    g = get_default_graph()
    with g.name_scope(name or default_name) as scope:
        shape_t = _shape_tensor(shape)
        mean_t = convert_to_tensor(mean, dtype=dtype, name="mean")
        stddev_t = convert_to_tensor(stddev, dtype=dtype, name="stddev")
        s1, s2 = _get_seeds(seed)
        rnd = _random(g, op_type, [shape_t],
                      {"dtype": dtype, "seed": s1, "seed2": s2,
                       "T": shape_t.dtype.base_dtype}, op_type)
        return _scale_shift(rnd, stddev_t, mean_t, scope)


# -- wrappers --------------------------------------------------------------------------
def random_normal(shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None,
                  name=None):
    """Samples from N(mean, stddev**2): ``nd.random_normal([2, 3], seed=1)``."""
    return _normal("RandomStandardNormal", "random_normal", shape, mean, stddev,
                   dtype, seed, name)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None,
                     name=None):
    """N(mean, stddev**2) with samples beyond two stddevs drawn again."""
    return _normal("TruncatedNormal", "truncated_normal", shape, mean, stddev,
                   dtype, seed, name)


def random_uniform(shape, minval=0, maxval=None, dtype=dtypes.float32, seed=None,
                   name=None):
    """Uniform samples in [minval, maxval); integer dtypes need ``maxval``."""
    dtype = dtypes.as_dtype(dtype).base_dtype
    if dtype not in _FLOATS + _SHAPE_TYPES:
        raise ValueError(f"Invalid dtype {dtype.name} for random_uniform")
    if maxval is None:
        if dtype.is_integer:
            raise ValueError(f"Must specify maxval for integer dtype {dtype.name}")
        maxval = 1
    g = get_default_graph()
    with g.name_scope(name or "random_uniform") as scope:
        shape_t = _shape_tensor(shape)
        min_t = convert_to_tensor(minval, dtype=dtype, name="min")
        max_t = convert_to_tensor(maxval, dtype=dtype, name="max")
        s1, s2 = _get_seeds(seed)
        if dtype.is_integer:
            return _random(g, "RandomUniformInt", [shape_t, min_t, max_t],
                           {"Tout": dtype, "seed": s1, "seed2": s2,
                            "T": shape_t.dtype.base_dtype}, scope)
        from nbdist.ops import math_ops

        rnd = _random(g, "RandomUniform", [shape_t],
                      {"dtype": dtype, "seed": s1, "seed2": s2,
                       "T": shape_t.dtype.base_dtype}, "RandomUniform")
        return _scale_shift(rnd, math_ops.subtract(max_t, min_t), min_t, scope)


def random_shuffle(value, seed=None, name=None):
    """Shuffles ``value`` along its first dimension."""
    value = convert_to_tensor(value, name="value")
    s1, s2 = _get_seeds(seed)
    return value.graph.create_op(
        "RandomShuffle", [value], {"seed": s1, "seed2": s2,
                                   "T": value.dtype.base_dtype},
        name=name or "RandomShuffle").outputs[0]
