"""Learning-rate schedules of TF1's ``tf.train``: each returns a scalar tensor of
``learning_rate``'s dtype that follows ``global_step`` (any tensor or variable)
when evaluated.

>>> import nbdist as nd
>>> step = nd.Variable(20, dtype=nd.int64)
>>> lr = nd.train.exponential_decay(0.1, step, 10, 0.5, staircase=True)
>>> with nd.Session() as s:
...     s.run(step.initializer)
...     round(float(s.run(lr)), 6)
0.025
"""

from __future__ import annotations

import math

from nbdist.ops import math_ops as M
from nbdist.framework.constant_op import constant
from nbdist.ops.array_ops_slicing import where
from nbdist.ops.random_ops import random_normal
from nbdist.framework.ops import convert_to_tensor, get_default_graph


def _prepare(name, learning_rate, global_step, *numbers):
    if global_step is None:
        raise ValueError(f"global_step is required for {name}.")
    lr = convert_to_tensor(learning_rate, name="learning_rate")
    dt = lr.dtype.base_dtype
    step = M.cast(global_step, dt)
    return (lr, dt, step) + tuple(M.cast(convert_to_tensor(n), dt) for n in numbers)


def _scoped(default):
    def wrap(fn):
        def inner(*args, name=None, **kwargs):
            with get_default_graph().name_scope(name or default):
                return fn(*args, **kwargs)

        inner.__name__ = fn.__name__
        inner.__doc__ = fn.__doc__
        return inner

    return wrap


def _progress(step, decay_steps, staircase):
    p = M.divide(step, decay_steps)
    return M.floor(p) if staircase else p


@_scoped("ExponentialDecay")
def exponential_decay(learning_rate, global_step, decay_steps, decay_rate,
                      staircase=False):
    """``learning_rate * decay_rate ** (global_step / decay_steps)`` (the
    exponent floored with ``staircase``)."""
    lr, _, step, ds, rate = _prepare("exponential_decay", learning_rate,
                                     global_step, decay_steps, decay_rate)
    return M.multiply(lr, M.pow(rate, _progress(step, ds, staircase)))


@_scoped("NaturalExpDecay")
def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate,
                      staircase=False):
    """``learning_rate * exp(-decay_rate * global_step / decay_steps)``."""
    lr, _, step, ds, rate = _prepare("natural_exp_decay", learning_rate,
                                     global_step, decay_steps, decay_rate)
    return M.multiply(lr, M.exp(M.negative(M.multiply(
        rate, _progress(step, ds, staircase)))))


@_scoped("InverseTimeDecay")
def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate,
                       staircase=False):
    """``learning_rate / (1 + decay_rate * global_step / decay_steps)``."""
    lr, dt, step, ds, rate = _prepare("inverse_time_decay", learning_rate,
                                      global_step, decay_steps, decay_rate)
    denom = M.add(constant(1.0, dt), M.multiply(rate, _progress(step, ds,
                                                                staircase)))
    return M.divide(lr, denom)


@_scoped("PolynomialDecay")
def polynomial_decay(learning_rate, global_step, decay_steps,
                     end_learning_rate=0.0001, power=1.0, cycle=False):
    """From ``learning_rate`` to ``end_learning_rate`` over ``decay_steps`` as
    ``(1 - step / decay_steps) ** power``; then constant, or with ``cycle``
    restarting with ``decay_steps`` stretched to the next multiple."""
    lr, dt, step, ds, end, pw = _prepare("polynomial_decay", learning_rate,
                                         global_step, decay_steps,
                                         end_learning_rate, power)
    if cycle:
        mult = M.ceil(M.divide(step, ds))
        mult = where(M.equal(step, constant(0.0, dt)), constant(1.0, dt), mult)
        ds = M.multiply(ds, mult)
    else:
        step = M.minimum(step, ds)
    frac = M.subtract(constant(1.0, dt), M.divide(step, ds))
    return M.add(M.multiply(M.subtract(lr, end), M.pow(frac, pw)), end)


@_scoped("CosineDecay")
def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0):
    """``learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * t)) + alpha)`` with
    ``t = min(step, decay_steps) / decay_steps``."""
    lr, dt, step, ds, a = _prepare("cosine_decay", learning_rate, global_step,
                                   decay_steps, alpha)
    t = M.divide(M.minimum(step, ds), ds)
    cos = M.multiply(constant(0.5, dt), M.add(constant(1.0, dt), M.cos(
        M.multiply(constant(math.pi, dt), t))))
    return M.multiply(lr, M.add(M.multiply(M.subtract(constant(1.0, dt), a), cos),
                                a))


@_scoped("LinearCosineDecay")
def linear_cosine_decay(learning_rate, global_step, decay_steps, num_periods=0.5,
                        alpha=0.0, beta=0.001):
    """``learning_rate * ((alpha + linear) * cosine + beta)`` as TF."""
    return _linear_cosine(*_prepare("linear_cosine_decay", learning_rate,
                                    global_step, decay_steps, num_periods, alpha,
                                    beta))


def _linear_cosine(lr, dt, step, ds, periods, a, b, noise=None):
    """``lr * ((a + linear + noise(step)) * cosine + b)``, step capped at ds."""
    step = M.minimum(step, ds)
    linear = M.divide(M.subtract(ds, step), ds)
    if noise is not None:
        linear = M.add(linear, noise(step))
    frac = M.multiply(M.multiply(constant(2.0, dt), periods), M.divide(step, ds))
    cos = M.multiply(constant(0.5, dt), M.add(constant(1.0, dt), M.cos(
        M.multiply(constant(math.pi, dt), frac))))
    return M.multiply(lr, M.add(M.multiply(M.add(a, linear), cos), b))


@_scoped("NoisyLinearCosineDecay")
def noisy_linear_cosine_decay(learning_rate, global_step, decay_steps,
                              initial_variance=1.0, variance_decay=0.55,
                              num_periods=0.5, alpha=0.0, beta=0.001):
    """``linear_cosine_decay`` with Gaussian noise added to its linear part,
    drawn anew at each evaluation, of variance ``initial_variance / (1 +
    global_step) ** variance_decay`` (Bello et al., 2017), as TF."""
    lr, dt, step, ds, periods, a, b, var0, vdecay = _prepare(
        "noisy_linear_cosine_decay", learning_rate, global_step, decay_steps,
        num_periods, alpha, beta, initial_variance, variance_decay)

    def noise(capped_step):
        variance = M.divide(var0, M.pow(M.add(constant(1.0, dt), capped_step),
                                        vdecay))
        return M.multiply(random_normal([], dtype=dt), M.sqrt(variance))

    return _linear_cosine(lr, dt, step, ds, periods, a, b, noise)


@_scoped("SGDRDecay")
def cosine_decay_restarts(learning_rate, global_step, first_decay_steps, t_mul=2.0,
                          m_mul=1.0, alpha=0.0):
    """Cosine decay with warm restarts (SGDR): periods of ``first_decay_steps``
    growing by ``t_mul``, each restart's rate scaled by ``m_mul``."""
    lr, dt, step, first, tm, mm, a = _prepare(
        "cosine_decay_restarts", learning_rate, global_step, first_decay_steps,
        t_mul, m_mul, alpha)
    one = constant(1.0, dt)
    done = M.divide(step, first)
    if float(t_mul) == 1.0:
        restart = M.floor(done)
        done = M.subtract(done, restart)
    else:
        restart = M.floor(M.divide(M.log(M.subtract(one, M.multiply(
            done, M.subtract(one, tm)))), M.log(tm)))
        sum_r = M.divide(M.subtract(one, M.pow(tm, restart)), M.subtract(one, tm))
        done = M.divide(M.subtract(done, sum_r), M.pow(tm, restart))
    cos = M.multiply(M.multiply(constant(0.5, dt), M.pow(mm, restart)), M.add(
        one, M.cos(M.multiply(constant(math.pi, dt), done))))
    return M.multiply(lr, M.add(M.multiply(M.subtract(one, a), cos), a))


@_scoped("PiecewiseConstant")
def piecewise_constant(x, boundaries, values):
    """``values[0]`` while ``x <= boundaries[0]``, ``values[i]`` while
    ``boundaries[i-1] < x <= boundaries[i]``, ``values[-1]`` after."""
    if len(boundaries) != len(values) - 1:
        raise ValueError("The length of boundaries should be 1 less than the length "
                         "of values")
    x = convert_to_tensor(x)
    vals = [convert_to_tensor(v) for v in values]
    vdt = vals[0].dtype.base_dtype
    for v in vals[1:]:
        if v.dtype.base_dtype != vdt:
            raise ValueError(f"Values must have elements all with the same dtype "
                             f"({vdt.name} vs {v.dtype.base_dtype.name}).")
    bounds = []
    for b in boundaries:
        b = convert_to_tensor(b)
        if b.dtype.base_dtype != x.dtype.base_dtype:
            if x.dtype.base_dtype.is_integer and b.dtype.base_dtype.is_integer:
                b = M.cast(b, x.dtype.base_dtype)
            else:
                raise ValueError(f"Boundaries ({b.dtype.base_dtype.name}) must have "
                                 f"the same dtype as x ({x.dtype.base_dtype.name}).")
        bounds.append(b)
    result = vals[-1]
    for b, v in zip(reversed(bounds), reversed(vals[:-1])):
        result = where(M.less_equal(x, b), v, result)
    return result


__all__ = ["cosine_decay", "cosine_decay_restarts", "exponential_decay",
           "inverse_time_decay", "linear_cosine_decay", "natural_exp_decay",
           "noisy_linear_cosine_decay", "piecewise_constant", "polynomial_decay"]
