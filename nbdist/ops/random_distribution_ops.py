"""More random ops (TF's ``tf.random``): ``categorical``/``multinomial``,
``gamma``, ``poisson``, and the stateless family (``stateless_uniform``,
``stateless_normal`` ... whose values depend only on their ``seed`` tensor).

Seeded ops repeat their sequence across sessions, as the other random ops
(``random_ops``). The numbers are NumPy's (Philox keyed by the seeds), not
TF's: TF's own Philox kernels and samplers cannot be matched without them, so
a program gets the same distributions and determinism, not the same values.

>>> import nbdist as nd
>>> s1 = nd.random.stateless_uniform([3], seed=[1, 2])
>>> s2 = nd.random.stateless_uniform([3], seed=[1, 2])
>>> with nd.Session() as s:
...     a, b = s.run([s1, s2])
>>> bool((a == b).all())
True
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.op_util import FLOAT, INDEX, op_scope
from nbdist.framework.ops import convert_to_tensor, get_seed
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.random_ops import (
    _float_dtype,
    _get_seeds,
    _shape_input_infer,
    _shape_tensor,
)

_SEED_ATTRS = {"seed": ("int", 0), "seed2": ("int", 0)}


def _multinomial_infer(c):
    if c.dtype(0) not in FLOAT:
        raise TypeError(f"{c.op_type}: logits must be floating point, got "
                        f"{c.dtype(0).name}")
    s = c.shape(0)
    if s.rank is not None and s.rank != 2:
        raise ValueError(f"logits should be a matrix, got shape {s}")
    n = c.constant(1)
    return [(c.attr("output_dtype"),
             TensorShape([s[0] if s.rank else None, None if n is None else int(n)]))]


def _shape_plus(i, out_attr=None):
    """Output ``shape`` (input 0) followed by input ``i``'s shape."""
    def infer(c):
        head = _shape_input_infer(c)
        tail = c.shape(i)
        out = c.attr(out_attr) if out_attr else c.dtype(i)
        if head.rank is None or tail.rank is None:
            return [(out, TensorShape(None))]
        return [(out, TensorShape(head.as_list() + tail.as_list()))]

    return infer


def _stateless_infer(out_attr):
    def infer(c):
        seed = c.shape(1)
        if seed.rank is not None and seed.as_list() not in ([2], [None]):
            raise ValueError(f"seed must have shape [2], not {seed}")
        return [(c.attr(out_attr), _shape_input_infer(c))]

    return infer


def _stateless_multinomial_infer(c):
    return _multinomial_infer(c)


register_op("Multinomial", _multinomial_infer,
            attrs=dict(_SEED_ATTRS, T=("type", None),
                       output_dtype=("type", dtypes.int64)), num_inputs=2,
            stateful=True)
register_op("RandomGamma", _shape_plus(1),
            attrs=dict(_SEED_ATTRS, S=("type", None), T=("type", None)), num_inputs=2,
            stateful=True)
register_op("RandomPoissonV2", _shape_plus(1, "dtype"),
            attrs=dict(_SEED_ATTRS, S=("type", None), R=("type", None),
                       dtype=("type", dtypes.int64)), num_inputs=2, stateful=True)
_STATELESS = {"StatelessRandomUniform": 2, "StatelessRandomNormal": 2,
              "StatelessTruncatedNormal": 2, "StatelessRandomUniformInt": 4,
              "StatelessRandomUniformFullInt": 2, "StatelessRandomGammaV2": 3, "StatelessRandomPoisson": 3,
              "StatelessRandomBinomial": 4, "StatelessParameterizedTruncatedNormal": 6}
for _t, _n in _STATELESS.items():
    register_op(_t, _stateless_infer("dtype"),
                attrs={"dtype": ("type", REQUIRED), "T": ("type", None),
                       "Tseed": ("type", dtypes.int64)}, num_inputs=_n)
register_op("StatelessMultinomial", _stateless_multinomial_infer,
            attrs={"T": ("type", None), "Tseed": ("type", dtypes.int64),
                   "output_dtype": ("type", dtypes.int64)}, num_inputs=3)
for _t in ("Multinomial", "RandomGamma", "RandomPoissonV2", "StatelessMultinomial",
           *_STATELESS):
    NotDifferentiable(_t)


# -- stateful samplers ----------------------------------------------------------------
def multinomial(logits, num_samples, seed=None, name=None, output_dtype=None):
    """``num_samples`` class indices per row of ``logits`` ([batch, classes],
    unnormalized log-probabilities), drawn with replacement."""
    with op_scope(name, "multinomial", [logits]) as (g, scope):
        logits = convert_to_tensor(logits, name="logits")
        n = convert_to_tensor(num_samples, dtype=dtypes.int32, name="num_samples")
        s1, s2 = _get_seeds(seed)
        return g.create_op("Multinomial", [logits, n],
                           {"seed": s1, "seed2": s2, "T": logits.dtype.base_dtype,
                            "output_dtype": dtypes.as_dtype(
                                output_dtype or dtypes.int64)},
                           name=scope).outputs[0]


def categorical(logits, num_samples, dtype=None, seed=None, name=None):
    """``multinomial`` under TF2's name (``dtype``: int32 or int64)."""
    return multinomial(logits, num_samples, seed=seed, name=name or "categorical",
                       output_dtype=dtype)


def random_gamma(shape, alpha, beta=None, dtype=dtypes.float32, seed=None,
                 name=None):
    """Gamma(``alpha``, rate ``beta``) samples of shape ``shape + broadcast(alpha,
    beta).shape``."""
    from nbdist.ops import math_ops_elementwise as E
    from nbdist.ops.array_ops_creation import zeros_like

    dtype = _float_dtype(dtype)
    with op_scope(name, "random_gamma", [shape, alpha, beta]) as (g, scope):
        shape_t = _shape_tensor(shape)
        alpha = convert_to_tensor(alpha, dtype=dtype, name="alpha")
        if beta is not None:
            beta = convert_to_tensor(beta, dtype=dtype, name="beta")
            alpha = E.add(alpha, zeros_like(beta))
        s1, s2 = _get_seeds(seed)
        sample = g.create_op("RandomGamma", [shape_t, alpha],
                             {"seed": s1, "seed2": s2, "S": shape_t.dtype.base_dtype,
                              "T": dtype}).outputs[0]
        if beta is None:
            return sample
        return E.truediv(sample, beta, name=scope)


def random_poisson(lam, shape, dtype=dtypes.float32, seed=None, name=None):
    """Poisson(``lam``) samples of shape ``shape + lam.shape``."""
    with op_scope(name, "random_poisson", [lam, shape]) as (g, scope):
        shape_t = _shape_tensor(shape)
        lam = convert_to_tensor(lam, name="lam")
        s1, s2 = _get_seeds(seed)
        return g.create_op("RandomPoissonV2", [shape_t, lam],
                           {"seed": s1, "seed2": s2, "S": shape_t.dtype.base_dtype,
                            "R": lam.dtype.base_dtype,
                            "dtype": dtypes.as_dtype(dtype)}, name=scope).outputs[0]


def poisson(lam, shape, dtype=dtypes.float32, seed=None, name=None):
    """TF1's ``tf.random.poisson`` (``lam`` first)."""
    return random_poisson(lam, shape, dtype, seed, name)


def gamma(shape, alpha, beta=None, dtype=dtypes.float32, seed=None, name=None):
    """TF1's ``tf.random.gamma``."""
    return random_gamma(shape, alpha, beta, dtype, seed, name)


# -- stateless samplers ---------------------------------------------------------------
def _seed_tensor(seed):
    seed = convert_to_tensor(seed, name="seed")
    if seed.dtype.base_dtype not in INDEX:
        raise TypeError(f"seed must be int32 or int64, got {seed.dtype.name}")
    return seed


def _stateless(op_type, default_name, shape, seed, extra, dtype, name):
    with op_scope(name, default_name, [shape, seed, *extra]) as (g, scope):
        shape_t = _shape_tensor(shape)
        seed = _seed_tensor(seed)
        extra = [convert_to_tensor(x, name=f"arg{i}") for i, x in enumerate(extra)]
        return g.create_op(op_type, [shape_t, seed, *extra],
                           {"dtype": dtype, "T": shape_t.dtype.base_dtype,
                            "Tseed": seed.dtype.base_dtype}, name=scope).outputs[0]


def stateless_random_uniform(shape, seed, minval=0, maxval=None,
                             dtype=dtypes.float32, name=None, alg=None):
    """Uniform values in ``[minval, maxval)`` that depend only on ``seed``
    (a shape-[2] int tensor); ints need ``maxval``."""
    from nbdist.ops import math_ops_elementwise as E

    dtype = dtypes.as_dtype(dtype)
    if dtype.is_integer:
        if minval is None and maxval is None:  # TF: the dtype's whole range
            return _stateless("StatelessRandomUniformFullInt",
                              "stateless_random_uniform", shape, seed, [], dtype,
                              name)
        if maxval is None:
            raise ValueError("Must specify maxval for integer dtype %r" % dtype)
        lo = convert_to_tensor(minval, dtype=dtype)
        hi = convert_to_tensor(maxval, dtype=dtype)
        return _stateless("StatelessRandomUniformInt", "stateless_random_uniform",
                          shape, seed, [lo, hi], dtype, name)
    dtype = _float_dtype(dtype)
    rnd = _stateless("StatelessRandomUniform", "stateless_random_uniform", shape,
                     seed, [], dtype, name)
    maxval = 1 if maxval is None else maxval
    if minval == 0 and maxval == 1:
        return rnd
    lo = convert_to_tensor(minval, dtype=dtype)
    return E.add(E.multiply(rnd, E.subtract(convert_to_tensor(maxval, dtype=dtype),
                                            lo)), lo)


def _scaled(rnd, mean, stddev, dtype):
    from nbdist.ops import math_ops_elementwise as E

    return E.add(E.multiply(rnd, convert_to_tensor(stddev, dtype=dtype)),
                 convert_to_tensor(mean, dtype=dtype))


def stateless_random_normal(shape, seed, mean=0.0, stddev=1.0,
                            dtype=dtypes.float32, name=None, alg=None):
    """Normal values that depend only on ``seed``."""
    dtype = _float_dtype(dtype)
    return _scaled(_stateless("StatelessRandomNormal", "stateless_random_normal",
                              shape, seed, [], dtype, name), mean, stddev, dtype)


def stateless_truncated_normal(shape, seed, mean=0.0, stddev=1.0,
                               dtype=dtypes.float32, name=None, alg=None):
    """Normal values within two standard deviations, from ``seed`` only."""
    dtype = _float_dtype(dtype)
    return _scaled(_stateless("StatelessTruncatedNormal",
                              "stateless_truncated_normal", shape, seed, [], dtype,
                              name), mean, stddev, dtype)


def stateless_random_gamma(shape, seed, alpha, beta=None, dtype=dtypes.float32,
                           name=None):
    """Gamma(``alpha``, rate ``beta``) values from ``seed`` only."""
    from nbdist.ops import math_ops_elementwise as E

    dtype = _float_dtype(dtype)
    alpha = convert_to_tensor(alpha, dtype=dtype, name="alpha")
    out = _stateless("StatelessRandomGammaV2", "stateless_random_gamma", shape, seed,
                     [alpha], dtype, name)
    return out if beta is None else E.truediv(out, convert_to_tensor(beta,
                                                                     dtype=dtype))


def stateless_random_poisson(shape, seed, lam, dtype=dtypes.int32, name=None):
    """Poisson(``lam``) values from ``seed`` only."""
    return _stateless("StatelessRandomPoisson", "stateless_random_poisson", shape,
                      seed, [lam], dtypes.as_dtype(dtype), name)


def stateless_random_binomial(shape, seed, counts, probs, output_dtype=dtypes.int32,
                              name=None):
    """Binomial(``counts``, ``probs``) values from ``seed`` only."""
    probs = convert_to_tensor(probs, name="probs")
    counts = convert_to_tensor(counts, dtype=probs.dtype.base_dtype, name="counts")
    return _stateless("StatelessRandomBinomial", "stateless_random_binomial", shape,
                      seed, [counts, probs], dtypes.as_dtype(output_dtype), name)


def stateless_parameterized_truncated_normal(shape, seed, means=0.0, stddevs=1.0,
                                             minvals=-2.0, maxvals=2.0, name=None):
    """Normal(``means``, ``stddevs``) values truncated to ``[minvals,
    maxvals]``, from ``seed`` only."""
    args = [convert_to_tensor(v, dtype=dtypes.float32)
            for v in (means, stddevs, minvals, maxvals)]
    return _stateless("StatelessParameterizedTruncatedNormal",
                      "stateless_parameterized_truncated_normal", shape, seed, args,
                      dtypes.float32, name)


def stateless_multinomial(logits, num_samples, seed, output_dtype=dtypes.int64,
                          name=None):
    """``multinomial`` whose draws depend only on ``seed``."""
    with op_scope(name, "stateless_multinomial", [logits, seed]) as (g, scope):
        logits = convert_to_tensor(logits, name="logits")
        n = convert_to_tensor(num_samples, dtype=dtypes.int32, name="num_samples")
        seed = _seed_tensor(seed)
        return g.create_op("StatelessMultinomial", [logits, n, seed],
                           {"T": logits.dtype.base_dtype,
                            "Tseed": seed.dtype.base_dtype,
                            "output_dtype": dtypes.as_dtype(output_dtype)},
                           name=scope).outputs[0]


def stateless_categorical(logits, num_samples, seed, dtype=dtypes.int64, name=None):
    """``stateless_multinomial`` under TF2's name."""
    return stateless_multinomial(logits, num_samples, seed, dtype, name)


__all__ = ["categorical", "gamma", "get_seed", "multinomial", "poisson",
           "random_gamma", "random_poisson", "stateless_categorical",
           "stateless_multinomial", "stateless_parameterized_truncated_normal",
           "stateless_random_binomial", "stateless_random_gamma",
           "stateless_random_normal", "stateless_random_poisson",
           "stateless_random_uniform", "stateless_truncated_normal"]


def split(seed, num=2, alg="auto_select"):
    """``num`` new seeds (an ``[num, 2]`` tensor of ``seed``'s dtype) drawn from
    ``seed`` alone, as TF's ``tf.random.split`` (the values are NumPy's).

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.random.split([1, 2], 3)).shape
    (3, 2)
    """
    del alg  # one algorithm: Philox keyed by the seed
    seed = _seed_tensor(seed)
    return stateless_random_uniform([num, 2], seed, minval=None, maxval=None,
                                    dtype=seed.dtype.base_dtype)


def fold_in(seed, data, alg="auto_select"):
    """A new seed from ``seed`` and the integer ``data``: ``[s, data]`` with
    ``s`` drawn from ``seed`` (TF's ``tf.random.fold_in``)."""
    from nbdist.ops.array_ops_join import stack

    del alg
    data = convert_to_tensor(data, name="data")
    drawn = stateless_random_uniform([], seed, minval=None, maxval=None,
                                     dtype=data.dtype.base_dtype)
    return stack([drawn, data])
