"""Kernels of ``nbdist.ops.stateful_random_ops``: each draw reads the generator's
state variable, draws from ``np.random.Philox`` at its key and counter, and
writes the counter back past the blocks it used, under the variable's lock."""

from __future__ import annotations

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.random_distribution_kernels import (
    _full_int,
    _truncated,
)
from nbdist.executor.kernels.random_kernels import _shape
from nbdist.executor.limits import check_output
from nbdist.ops import stateful_random_ops  # noqa: F401  (registers the ops)

_SIZES = {1: 3, 2: 2, 3: 3}  # algorithm -> words of state


def _bit_generator(node, state, alg) -> np.random.Philox:
    size = _SIZES.get(int(alg))
    if size is None:
        raise errors.InvalidArgumentError(None, node.name,
                                          f"Unsupported algorithm id: {int(alg)}")
    words = np.asarray(state).reshape(-1)
    if words.shape != (size,):
        raise errors.InvalidArgumentError(
            None, node.name, f"The size of the state must be at least {size}; got "
            f"{words.shape[0]}")
    words = words.view(np.uint64)
    counter = [int(w) for w in words[:-1]] + [0] * (5 - size)
    return np.random.Philox(counter=counter, key=[int(words[-1]), 0])


def _advance(var, alg, bitgen: np.random.Philox):
    """Stores the bit generator's counter (the blocks used are behind it)."""
    counter = bitgen.state["state"]["counter"]
    size = _SIZES[int(alg)]
    key = np.asarray(var.read_unlocked()).reshape(-1)[-1:]
    var.value = np.concatenate([counter[:size - 1].view(np.int64), key])


_DRAWS = {
    "StatefulStandardNormalV2": lambda g, d: g.standard_normal(d),
    "StatefulUniform": lambda g, d: g.random(d),
    "StatefulTruncatedNormal": lambda g, d: _truncated(g, d),
    "StatefulUniformFullInt": lambda g, d: _full_int(g, d),
    "StatefulUniformInt": lambda g, d, lo, hi: g.integers(int(lo), int(hi), size=d),
    "StatefulRandomBinomial": lambda g, d, n, p: g.binomial(
        np.broadcast_to(np.asarray(n, np.int64), d), np.broadcast_to(p, d)),
}


def _draw_factory(op_type):
    draw = _DRAWS[op_type]

    def factory(node):
        out_dtype = np.dtype(node.attrs["dtype"].as_numpy_dtype)

        def compute(step, var, alg, shape, *params):
            dims = _shape(node, shape)
            check_output(node, dims, out_dtype)
            if op_type == "StatefulUniformInt" and int(params[0]) >= int(params[1]):
                raise errors.InvalidArgumentError(
                    None, node.name, f"Need minval < maxval: {int(params[0])} >= "
                                     f"{int(params[1])}")
            with var.lock:
                bitgen = _bit_generator(node, var.read_unlocked(), alg)
                values = draw(np.random.Generator(bitgen), dims, *params)
                _advance(var, alg, bitgen)
            return np.asarray(values).astype(out_dtype)

        return compute

    return factory


for _t in _DRAWS:
    register_kernel(_t)(_draw_factory(_t))


@register_kernel("RngReadAndSkip")
def rng_read_and_skip_kernel(node):
    def compute(step, var, alg, delta):
        with var.lock:
            before = np.array(var.read_unlocked(), copy=True)
            bitgen = _bit_generator(node, before, alg)
            bitgen.advance(int(delta) & (2**256 - 1))
            _advance(var, alg, bitgen)
        return before

    return compute
