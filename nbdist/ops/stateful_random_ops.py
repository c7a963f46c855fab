"""TF's stateful random ``Generator`` (``tf.random.Generator``), in a graph.

A ``Generator``'s state is an int64 variable (``random_generator/StateVar``,
in ``GLOBAL_VARIABLES`` so the initializer and a ``Saver`` see it): for
Philox, ``[counter_lo, counter_hi, key]``. Each draw op (``normal``,
``uniform``, ``truncated_normal``, ``binomial`` ...) reads the state, draws
from NumPy's ``np.random.Philox`` bit generator at that key and counter, and
writes the counter back advanced past the blocks it used, in one locked step:
every run of a draw op gives new numbers, and two generators made from the
same seed give the same sequence. The numbers are NumPy's, not TF's (TF's
Philox kernels cannot be matched bit for bit); the state layout and the API
are TF's. ``THREEFRY`` is accepted and draws through the same Philox bit
generator (NumPy has no ThreeFry), keyed by its two-word state.

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     g = nd.random.Generator.from_seed(1234)
...     x = g.normal([3])
...     with nd.Session() as s:
...         s.run(nd.global_variables_initializer())
...         a, b = s.run(x), s.run(x)
>>> bool((a != b).all())
True

``split(n)`` gives ``n`` generators whose streams are independent of each
other and of their parent: in a graph, each child's key is drawn (stateless)
from the parent's initial state and the split's number, so it needs no
ordering between the variables' initializers. (TF's ``split`` advances the
parent's state instead, which it supports only eagerly.)
"""

from __future__ import annotations

import enum
import weakref

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph, name_scope
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.random_ops import _float_dtype, _shape_input_infer, _shape_tensor

__all__ = ["Algorithm", "Generator", "create_rng_state", "get_global_generator",
           "set_global_generator"]


class Algorithm(enum.Enum):
    """TF's RNG algorithms (``tf.random.Algorithm``)."""

    PHILOX = 1
    THREEFRY = 2
    AUTO_SELECT = 3


_STATE_SIZE = {Algorithm.PHILOX: 3, Algorithm.THREEFRY: 2, Algorithm.AUTO_SELECT: 3}
_ALG_NAMES = {"philox": Algorithm.PHILOX, "threefry": Algorithm.THREEFRY,
              "auto_select": Algorithm.AUTO_SELECT}


def _convert_alg(alg) -> Algorithm:
    if alg is None:
        return Algorithm.PHILOX
    if isinstance(alg, Algorithm):
        return alg
    if isinstance(alg, str) and alg.lower() in _ALG_NAMES:
        return _ALG_NAMES[alg.lower()]
    if isinstance(alg, (int, np.integer)) and int(alg) in (1, 2, 3):
        return Algorithm(int(alg))
    raise ValueError(f"Argument `alg` got unsupported value {alg}. Supported values "
                     "are Algorithm.PHILOX, Algorithm.THREEFRY and "
                     "Algorithm.AUTO_SELECT (or their names)")


def create_rng_state(seed, alg):
    """The initial state (an int64 NumPy vector) of algorithm ``alg`` for
    ``seed``: an integer is split into 64-bit words, lowest first, padded with
    zeros (TF's layout: ``create_rng_state(1234, "philox")`` is
    ``[1234, 0, 0]``); a sequence of ints is taken as the words.

    >>> import nbdist as nd
    >>> nd.random.create_rng_state(1234, "philox").tolist()
    [1234, 0, 0]
    """
    size = _STATE_SIZE[_convert_alg(alg)]
    if isinstance(seed, (int, np.integer)):
        seed = int(seed) % 2 ** (64 * size)
        words = [(seed >> (64 * i)) & (2**64 - 1) for i in range(size)]
    else:
        words = [int(w) & (2**64 - 1) for w in np.asarray(seed).reshape(-1)]
        if len(words) > size:
            raise ValueError(f"seed has {len(words)} words; algorithm {alg} has "
                             f"a state of {size}")
        words += [0] * (size - len(words))
    return np.array(words, dtype=np.uint64).view(np.int64)


# -- ops ---------------------------------------------------------------------------------
def _state_infer(c):
    if not c.input_dtypes[0].is_ref_dtype or c.dtype(0) is not dtypes.int64:
        raise TypeError(f"{c.op_type} needs the generator's int64 state variable as "
                        "input 0")
    if c.dtype(1) is not dtypes.int64:
        raise TypeError(f"{c.op_type}: algorithm must be int64")


def _draw_infer(c):
    _state_infer(c)
    return [(c.attr("dtype"), _shape_input_infer(c, 2))]


_DRAW_OPS = {"StatefulStandardNormalV2": 3, "StatefulUniform": 3,
             "StatefulTruncatedNormal": 3, "StatefulUniformFullInt": 3,
             "StatefulUniformInt": 5, "StatefulRandomBinomial": 5}
for _t, _n in _DRAW_OPS.items():
    register_op(_t, _draw_infer, attrs={"dtype": ("type", REQUIRED),
                                        "shape_dtype": ("type", dtypes.int64)},
                num_inputs=_n, ref_inputs=(0,), stateful=True)
    NotDifferentiable(_t)


def _skip_infer(c):
    _state_infer(c)
    return [(dtypes.int64, TensorShape([None]))]


# RngReadAndSkip(state, alg, delta): the state before, the counter moved by delta.
register_op("RngReadAndSkip", _skip_infer, num_inputs=3, ref_inputs=(0,),
            stateful=True)
NotDifferentiable("RngReadAndSkip")


# -- Generator ---------------------------------------------------------------------------
class Generator:
    """A random-number generator whose state is a variable (see the module
    docstring). Build one with ``from_seed``, ``from_state``,
    ``from_key_counter`` or ``from_non_deterministic_state``, or
    ``Generator(copy_from=other)``.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     g1 = nd.random.Generator.from_seed(7)
    ...     g2 = nd.random.Generator.from_seed(7)
    ...     u1, u2 = g1.uniform([2]), g2.uniform([2])
    ...     with nd.Session() as s:
    ...         s.run(nd.global_variables_initializer())
    ...         a, b = s.run([u1, u2])
    >>> bool((a == b).all())
    True
    """

    def __init__(self, copy_from=None, state=None, alg=None):
        from nbdist.ops.variables import Variable

        if copy_from is not None:
            if state is not None or alg is not None:
                raise ValueError("When `copy_from` is given, `state` and `alg` must "
                                 "be None")
            state, alg = copy_from._initial_state, copy_from._alg
        if state is None:
            raise ValueError("Generator needs a `state` (or use from_seed, "
                             "from_non_deterministic_state ...)")
        self._alg = _convert_alg(alg)
        self._split_count = 0
        with name_scope("random_generator"):
            self._initial_state = convert_to_tensor(state, dtype=dtypes.int64,
                                                    name="initial_state")
            size = _STATE_SIZE[self._alg]
            if self._initial_state.shape.rank not in (None, 1) or (
                    self._initial_state.shape.rank == 1
                    and self._initial_state.shape[0] not in (None, size)):
                raise ValueError(f"state must be an int64 vector of size {size} for "
                                 f"{self._alg}, got shape "
                                 f"{self._initial_state.shape}")
            self._state_var = Variable(self._initial_state, trainable=False,
                                       name="StateVar", dtype=dtypes.int64)

    @classmethod
    def from_state(cls, state, alg):
        """A generator starting at ``state`` (a vector of the algorithm's size)."""
        return cls(state=state, alg=alg)

    @classmethod
    def from_seed(cls, seed, alg=None):
        """A generator whose state is ``create_rng_state(seed, alg)``."""
        alg = _convert_alg(alg)
        return cls(state=create_rng_state(seed, alg), alg=alg)

    @classmethod
    def from_non_deterministic_state(cls, alg=None):
        """A generator seeded from the OS's entropy when the graph is built."""
        alg = _convert_alg(alg)
        entropy = np.random.SeedSequence().generate_state(_STATE_SIZE[alg],
                                                          np.uint64)
        return cls(state=entropy.view(np.int64), alg=alg)

    @classmethod
    def from_key_counter(cls, key, counter, alg):
        """A generator at ``counter`` (1 or 2 words) under ``key`` (a scalar)."""
        state = np.concatenate([np.asarray(counter, np.int64).reshape(-1),
                                np.asarray(key, np.int64).reshape(-1)])
        return cls(state=state, alg=alg)

    # -- state ---------------------------------------------------------------------
    @property
    def state(self):
        """The state variable."""
        return self._state_var

    @property
    def algorithm(self) -> int:
        """The algorithm's number (``Algorithm.PHILOX.value`` ...)."""
        return self._alg.value

    @property
    def key(self):
        """The key: the last word of the state."""
        return self._state_var.value()[-1]

    def reset(self, state):
        """An op that sets the state to ``state``."""
        return self._state_var.assign(convert_to_tensor(state, dtype=dtypes.int64))

    def reset_from_seed(self, seed):
        """An op that sets the state to ``create_rng_state(seed, alg)``."""
        return self.reset(create_rng_state(seed, self._alg))

    def reset_from_key_counter(self, key, counter):
        """An op that sets the state to ``counter`` then ``key``."""
        return self.reset(np.concatenate([np.asarray(counter, np.int64).reshape(-1),
                                          np.asarray(key, np.int64).reshape(-1)]))

    def skip(self, delta):
        """An op that moves the counter ``delta`` Philox blocks (4 values each)
        on, and outputs the state before."""
        return self._op("RngReadAndSkip", [convert_to_tensor(delta, dtypes.int64)],
                        None, "skip")

    # -- draws ---------------------------------------------------------------------
    def _op(self, op_type, inputs, attrs, name):
        g = get_default_graph()
        alg = convert_to_tensor(self._alg.value, dtype=dtypes.int64, name="alg")
        with g.colocate_with(self._state_var.op):
            return g.create_op(op_type, [self._state_var._variable, alg, *inputs],
                               attrs or {}, name=name or op_type).outputs[0]

    def _draw(self, op_type, shape, dtype, extra=(), name=None):
        shape_t = _shape_tensor(shape)
        return self._op(op_type, [shape_t, *extra],
                        {"dtype": dtype, "shape_dtype": shape_t.dtype.base_dtype},
                        name)

    def normal(self, shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, name=None):
        """Normal values of ``shape``."""
        from nbdist.ops.random_distribution_ops import _scaled

        dtype = _float_dtype(dtype)
        with name_scope(name or "stateful_normal"):
            rnd = self._draw("StatefulStandardNormalV2", shape, dtype)
            return _scaled(rnd, mean, stddev, dtype)

    def truncated_normal(self, shape, mean=0.0, stddev=1.0, dtype=dtypes.float32,
                         name=None):
        """Normal values within two standard deviations of ``mean``."""
        from nbdist.ops.random_distribution_ops import _scaled

        dtype = _float_dtype(dtype)
        with name_scope(name or "stateful_truncated_normal"):
            rnd = self._draw("StatefulTruncatedNormal", shape, dtype)
            return _scaled(rnd, mean, stddev, dtype)

    def uniform(self, shape, minval=0, maxval=None, dtype=dtypes.float32,
                name=None):
        """Uniform values in ``[minval, maxval)``; integer dtypes need ``maxval``
        unless both bounds are None (then the dtype's full range)."""
        from nbdist.ops import math_ops_elementwise as E

        dtype = dtypes.as_dtype(dtype)
        with name_scope(name or "stateful_uniform"):
            if dtype.is_integer:
                if minval is None and maxval is None:
                    return self.uniform_full_int(shape, dtype)
                if maxval is None:
                    raise ValueError(f"Must specify maxval for integer dtype {dtype}")
                lo = convert_to_tensor(minval, dtype=dtype, name="min")
                hi = convert_to_tensor(maxval, dtype=dtype, name="max")
                return self._draw("StatefulUniformInt", shape, dtype, (lo, hi))
            dtype = _float_dtype(dtype)
            rnd = self._draw("StatefulUniform", shape, dtype)
            maxval = 1 if maxval is None else maxval
            if minval == 0 and maxval == 1:
                return rnd
            lo = convert_to_tensor(minval, dtype=dtype, name="min")
            hi = convert_to_tensor(maxval, dtype=dtype, name="max")
            return E.add(E.multiply(rnd, E.subtract(hi, lo)), lo)

    def uniform_full_int(self, shape, dtype=dtypes.uint64, name=None):
        """Integers over the whole range of ``dtype``."""
        return self._draw("StatefulUniformFullInt", shape, dtypes.as_dtype(dtype),
                          name=name)

    def binomial(self, shape, counts, probs, dtype=dtypes.int32, name=None):
        """Binomial(``counts``, ``probs``) values of ``shape`` (broadcast)."""
        probs = convert_to_tensor(probs, name="probs")
        counts = convert_to_tensor(counts, dtype=probs.dtype.base_dtype,
                                   name="counts")
        return self._draw("StatefulRandomBinomial", shape, dtypes.as_dtype(dtype),
                          (counts, probs), name)

    def make_seeds(self, count=1):
        """``count`` seeds for the stateless ops: an int64 ``[2, count]`` tensor."""
        from nbdist.ops.array_ops import zeros_like
        from nbdist.ops.array_ops_join import stack

        keys = self.uniform_full_int([count], dtypes.int64)
        return stack([keys, zeros_like(keys)])

    def split(self, count=1):
        """``count`` new generators, independent of this one and of each other
        (see the module docstring)."""
        from nbdist.ops.array_ops_join import concat, stack
        from nbdist.ops.bitwise_ops import bitwise_xor
        from nbdist.ops.random_distribution_ops import stateless_random_uniform

        self._split_count += 1
        init = self._initial_state
        with name_scope("split"):
            # A seed only this split of this generator's initial state has.
            tag = np.int64(-(2**62) + self._split_count)
            seed = stack([init[-1], bitwise_xor(init[0], tag)])
            keys = stateless_random_uniform([count], seed, minval=None, maxval=None,
                                            dtype=dtypes.int64)
        zeros = np.zeros([_STATE_SIZE[self._alg] - 1], np.int64)
        return [Generator(state=concat([zeros, keys[i:i + 1]], 0), alg=self._alg)
                for i in range(count)]


_GLOBAL = weakref.WeakKeyDictionary()


def get_global_generator() -> Generator:
    """The default graph's global generator, made from non-deterministic state
    the first time it is asked for (``set_global_generator`` replaces it)."""
    g = get_default_graph()
    if g not in _GLOBAL:
        _GLOBAL[g] = Generator.from_non_deterministic_state()
    return _GLOBAL[g]


def set_global_generator(generator: Generator) -> None:
    """Makes ``generator`` the default graph's global generator."""
    if not isinstance(generator, Generator):
        raise TypeError(f"set_global_generator needs a Generator, got "
                        f"{type(generator).__name__}")
    _GLOBAL[get_default_graph()] = generator
