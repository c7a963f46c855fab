"""Kernels for the random ops.

Each node owns a ``np.random.Generator(np.random.Philox(key))`` made when its
graph is registered: the key comes from the (``seed``, ``seed2``) attrs, or from
fresh entropy when both are 0. Every run advances the generator, so two runs
differ while a re-registered graph (a new session) repeats the same sequence.
"""

from __future__ import annotations

import threading

import numpy as np

import nbdist.ops.random_ops  # noqa: F401  (registers the op definitions)
from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.limits import check_output

_MASK64 = 2**64 - 1


def _generator(node) -> np.random.Generator:
    seed, seed2 = int(node.attrs["seed"]), int(node.attrs["seed2"])
    if seed == 0 and seed2 == 0:
        return np.random.Generator(np.random.Philox())
    key = (seed & _MASK64) | ((seed2 & _MASK64) << 64)
    return np.random.Generator(np.random.Philox(key=key))


def _shape(node, shape) -> tuple:
    s = np.asarray(shape)
    if s.ndim != 1:
        raise errors.InvalidArgumentError(
            None, node.name, f"shape must be a vector, got shape {list(s.shape)}")
    dims = tuple(int(d) for d in s)
    if any(d < 0 for d in dims):
        raise errors.InvalidArgumentError(
            None, node.name, f"shape {list(dims)} has a negative dimension")
    return dims


def _float_kernel(draw):
    def factory(node):
        gen = _generator(node)
        lock = threading.Lock()
        np_dtype = np.dtype(node.attrs["dtype"].as_numpy_dtype)
        # NumPy draws float32 and float64 natively; float16 goes through float32.
        draw_dtype = np_dtype if np_dtype in (np.float32, np.float64) else np.float32

        def compute(step, shape):
            dims = _shape(node, shape)
            check_output(node, dims, np_dtype)
            with lock:
                out = draw(gen, dims, draw_dtype)
            return out.astype(np_dtype, copy=False)

        return compute

    return factory


def _normal(gen, dims, dtype):
    return gen.standard_normal(dims, dtype=dtype)


def _uniform(gen, dims, dtype):
    return gen.random(dims, dtype=dtype)


def _truncated(gen, dims, dtype):
    out = gen.standard_normal(dims, dtype=dtype)
    bad = np.abs(out) > 2.0
    while bad.any():
        out[bad] = gen.standard_normal(int(bad.sum()), dtype=dtype)
        bad = np.abs(out) > 2.0
    return out


register_kernel("RandomStandardNormal")(_float_kernel(_normal))
register_kernel("RandomUniform")(_float_kernel(_uniform))
register_kernel("TruncatedNormal")(_float_kernel(_truncated))


@register_kernel("RandomUniformInt")
def random_uniform_int_kernel(node):
    gen = _generator(node)
    lock = threading.Lock()
    np_dtype = np.dtype(node.attrs["Tout"].as_numpy_dtype)

    def compute(step, shape, minval, maxval):
        dims = _shape(node, shape)
        check_output(node, dims, np_dtype)
        lo, hi = int(minval), int(maxval)
        if lo >= hi:
            raise errors.InvalidArgumentError(
                None, node.name, f"Need minval < maxval: {lo} >= {hi}")
        with lock:
            return gen.integers(lo, hi, size=dims, dtype=np_dtype)

    return compute


@register_kernel("RandomShuffle")
def random_shuffle_kernel(node):
    gen = _generator(node)
    lock = threading.Lock()

    def compute(step, value):
        value = np.asarray(value)
        if value.ndim == 0 or value.shape[0] <= 1:
            return np.array(value, copy=True)
        with lock:
            perm = gen.permutation(value.shape[0])
        return value[perm]

    return compute
