"""Kernels of ``nbdist.ops.random_distribution_ops``. Stateful ops keep a
Philox generator per node (``random_kernels._generator``); stateless ones key a
fresh one by their ``seed`` input on every run, so equal seeds give equal
values."""

from __future__ import annotations

import threading

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.random_kernels import _MASK64, _generator, _shape
from nbdist.executor.limits import check_output
from nbdist.ops import random_distribution_ops  # noqa: F401  (registers the ops)


def _categorical(node, gen, logits, num_samples, out_dtype):
    logits = np.asarray(logits, np.float64)
    n = int(num_samples)
    if logits.ndim != 2:
        raise errors.InvalidArgumentError(None, node.name,
                                          "logits should be a matrix, got shape "
                                          f"{list(logits.shape)}")
    if n < 0:
        raise errors.InvalidArgumentError(None, node.name,
                                          "num_samples should be nonnegative.")
    if logits.shape[1] == 0 and logits.shape[0] and n:
        raise errors.InvalidArgumentError(None, node.name,
                                          "num_classes should be positive")
    out = np.empty((logits.shape[0], n), dtype=out_dtype)
    for i, row in enumerate(logits):
        finite = np.where(np.isfinite(row), row, -np.inf)
        p = np.exp(finite - finite.max()) if np.isfinite(finite).any() else None
        if p is None:  # all -inf: TF gives num_classes (an out-of-range index)
            out[i] = logits.shape[1]
            continue
        cdf = np.cumsum(p / p.sum())
        out[i] = np.minimum(np.searchsorted(cdf, gen.random(n), side="right"),
                            logits.shape[1] - 1)
    return out


def _stateful(draw):
    def factory(node):
        gen, lock = _generator(node), threading.Lock()

        def compute(step, *inputs):
            with lock:
                return draw(node, gen, *inputs)

        return compute

    return factory


def _gamma(node, gen, shape, alpha):
    alpha = np.asarray(alpha)
    dims = _shape(node, shape) + alpha.shape
    check_output(node, dims, alpha.dtype)
    return gen.standard_gamma(np.broadcast_to(alpha, dims)).astype(alpha.dtype)


def _poisson(node, gen, shape, lam):
    lam = np.asarray(lam)
    dims = _shape(node, shape) + lam.shape
    out_dtype = np.dtype(node.attrs["dtype"].as_numpy_dtype)
    check_output(node, dims, out_dtype)
    return gen.poisson(np.broadcast_to(lam, dims)).astype(out_dtype)


register_kernel("Multinomial")(_stateful(
    lambda node, gen, logits, n: _categorical(
        node, gen, logits, n, node.attrs["output_dtype"].as_numpy_dtype)))
register_kernel("RandomGamma")(_stateful(_gamma))
register_kernel("RandomPoissonV2")(_stateful(_poisson))


def _seeded(node, seed) -> np.random.Generator:
    s = np.asarray(seed).reshape(-1)
    if s.shape != (2,):
        raise errors.InvalidArgumentError(None, node.name,
                                          f"seed must have shape [2], not "
                                          f"{list(np.shape(seed))}")
    key = (int(s[0]) & _MASK64) | ((int(s[1]) & _MASK64) << 64)
    return np.random.Generator(np.random.Philox(key=key))


def _truncated(gen, dims, lo=-2.0, hi=2.0, mean=0.0, std=1.0):
    # scipy.stats on first use: importing it costs a second that every
    # session's first run paid while loading the kernels.
    from scipy import stats

    a, b = (np.asarray(lo) - mean) / std, (np.asarray(hi) - mean) / std
    return stats.truncnorm.rvs(a, b, loc=mean, scale=std, size=dims,
                               random_state=gen)


def _full_int(gen, dims):
    # 64 random bits per value; the caller's astype keeps the low bits.
    return gen.integers(0, 2**64, size=dims, dtype=np.uint64, endpoint=False)


_STATELESS_DRAWS = {
    "StatelessRandomUniform": lambda g, d: g.random(d),
    "StatelessRandomNormal": lambda g, d: g.standard_normal(d),
    "StatelessTruncatedNormal": lambda g, d: _truncated(g, d),
    "StatelessRandomUniformInt": lambda g, d, lo, hi: g.integers(int(lo), int(hi),
                                                                 size=d),
    "StatelessRandomUniformFullInt": lambda g, d: _full_int(g, d),
    "StatelessRandomGammaV2": lambda g, d, a: g.standard_gamma(
        np.broadcast_to(a, d)),
    "StatelessRandomPoisson": lambda g, d, lam: g.poisson(np.broadcast_to(lam, d)),
    "StatelessRandomBinomial": lambda g, d, n, p: g.binomial(
        np.broadcast_to(np.asarray(n, np.int64), d), np.broadcast_to(p, d)),
    "StatelessParameterizedTruncatedNormal": lambda g, d, m, s, lo, hi: _truncated(
        g, d, np.broadcast_to(lo, d), np.broadcast_to(hi, d), np.broadcast_to(m, d),
        np.broadcast_to(s, d)),
}


def _stateless_factory(op_type):
    draw = _STATELESS_DRAWS[op_type]

    def factory(node):
        out_dtype = np.dtype(node.attrs["dtype"].as_numpy_dtype)

        def compute(step, shape, seed, *params):
            dims = _shape(node, shape)
            check_output(node, dims, out_dtype)
            if op_type == "StatelessRandomUniformInt" and int(params[0]) >= int(
                    params[1]):
                raise errors.InvalidArgumentError(
                    None, node.name, f"Need minval < maxval: {int(params[0])} >= "
                                     f"{int(params[1])}")
            return np.asarray(draw(_seeded(node, seed), dims, *params)).astype(
                out_dtype)

        return compute

    return factory


for _t in _STATELESS_DRAWS:
    register_kernel(_t)(_stateless_factory(_t))


@register_kernel("StatelessMultinomial")
def stateless_multinomial_kernel(node):
    out_dtype = node.attrs["output_dtype"].as_numpy_dtype

    def compute(step, logits, num_samples, seed):
        return _categorical(node, _seeded(node, seed), logits, num_samples, out_dtype)

    return compute
