"""``nd.train.ExponentialMovingAverage`` and ``assign_moving_average``, as TF1's.

``apply(var_list)`` makes, for each variable ``v``, a non-trainable shadow
variable ``v/ExponentialMovingAverage`` (colocated with ``v``, starting at
``v``'s initial value) and returns the op that moves every shadow towards its
variable: ``shadow -= (1 - decay) * (shadow - v)``.

>>> import nbdist as nd
>>> v = nd.Variable(10.0, name="v")
>>> ema = nd.train.ExponentialMovingAverage(0.9)
>>> update = ema.apply([v])
>>> ema.average(v).op.name
'v/ExponentialMovingAverage'
>>> with nd.Session() as s:
...     s.run(nd.global_variables_initializer())
...     _ = s.run(v.assign(0.0))
...     s.run(update)
...     round(float(s.run(ema.average(v))), 5)
9.0
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.ops import math_ops as M
from nbdist.framework.constant_op import constant, identity
from nbdist.ops.control_flow_v2 import cond
from nbdist.ops.control_flow_ops import group
from nbdist.ops.init_ops import zeros_initializer
from nbdist.framework.ops import (
    Tensor,
    control_dependencies,
    convert_to_tensor,
    get_default_graph,
)
from nbdist.ops.state_ops import assign, assign_add, assign_sub
from nbdist.ops.variables import (
    Variable,
    global_variables,
    is_variable_initialized,
    trainable_variables,
)

MOVING_AVERAGE_VARIABLES = "moving_average_variables"


def _slot(primary_op, value, suffix):
    # Outside any control dependencies (TF's init_scope): initialising the
    # shadow must not run the ops the caller's update waits for.
    g = get_default_graph()
    with g.name_scope(None), g.colocate_with(primary_op), \
            g.control_dependencies(None):
        return Variable(value, trainable=False,
                        name=primary_op.name + "/" + suffix)


def _initialized_value(var):
    """TF1's ``initialized_value``: the variable's value once initialised, else
    its initial value (without running its initializer again)."""
    return cond(is_variable_initialized(var), var.read_value,
                lambda: identity(var.initial_value))


def assign_moving_average(variable, value, decay, zero_debias=True, name=None):
    """``variable -= (variable - value) * (1 - decay)``; with ``zero_debias``
    the average is kept in a ``biased`` variable and divided by
    ``1 - decay ** steps`` (so it does not start biased towards 0)."""
    g = get_default_graph()
    with g.name_scope(name or "AssignMovingAvg") as scope, \
            g.colocate_with(variable.op):
        dt = variable.dtype.base_dtype
        decay = M.cast(convert_to_tensor(decay), dt)
        value = convert_to_tensor(value, dtype=dt)
        one = constant(1.0, dt)
        if not zero_debias:
            delta = M.multiply(M.subtract(variable, value), M.subtract(one, decay))
            return assign_sub(variable, delta, name=scope)
        zeros = zeros_initializer()
        shape = variable.shape.as_list()
        biased = _slot(variable.op, lambda: zeros(shape, dt), "biased")
        step = _slot(variable.op, lambda: zeros([], dt), "local_step")
        b_delta = M.multiply(M.subtract(biased, value), M.subtract(one, decay))
        new_biased = assign_sub(biased, b_delta)
        new_step = assign_add(step, one)
        with control_dependencies([new_biased, new_step]):
            debiased = M.divide(new_biased, M.subtract(one, M.pow(decay, new_step)))
            return assign(variable, debiased, name=scope)


class ExponentialMovingAverage:
    """Shadow copies of variables (or tensors) that follow them with
    ``shadow = decay * shadow + (1 - decay) * value`` on each ``apply`` op run.

    With ``num_updates`` (e.g. the global step) the decay is
    ``min(decay, (1 + num_updates) / (10 + num_updates))``; ``zero_debias``
    removes the start-up bias (always on for tensors, whose shadows start at 0).
    """

    def __init__(self, decay, num_updates=None, zero_debias=False,
                 name="ExponentialMovingAverage"):
        self._decay = decay
        self._num_updates = num_updates
        self._zero_debias = zero_debias
        self._name = name
        self._averages: dict = {}

    @property
    def name(self):
        return self._name

    def apply(self, var_list=None):
        """Creates the shadows of ``var_list`` (default: the trainable variables)
        and returns the op updating them all."""
        if var_list is None:
            var_list = trainable_variables()
        g = get_default_graph()
        zero_debias_true = set()
        for var in var_list:
            dt = var.dtype.base_dtype
            if dt not in (dtypes.float16, dtypes.float32, dtypes.float64):
                raise TypeError(f"The variables must be half, float, or double: "
                                f"{var.name}")
            if self._key(var) in self._averages:
                raise ValueError(f"Moving average already computed for: {var.name}")
            if isinstance(var, Variable):
                avg = _slot(var.op, lambda var=var: _initialized_value(var),
                            self._name)
                g.add_to_collection(MOVING_AVERAGE_VARIABLES, var)
            else:
                shape = var.shape.as_list()
                avg = _slot(var.op, lambda shape=shape, dt=dt:
                            zeros_initializer()(shape, dt), self._name)
                zero_debias_true.add(id(avg))  # a tensor's shadow starts at 0
            self._averages[self._key(var)] = avg
        with g.name_scope(self._name) as scope:
            decay = convert_to_tensor(self._decay, name="decay")
            if self._num_updates is not None:
                n = M.cast(self._num_updates, dtypes.float32, name="num_updates")
                decay = M.minimum(decay, M.divide(M.add(1.0, n), M.add(10.0, n)))
            updates = []
            for var in var_list:
                avg = self._averages[self._key(var)]
                debias = self._zero_debias or id(avg) in zero_debias_true
                updates.append(assign_moving_average(avg, var, decay,
                                                     zero_debias=debias))
            return group(*updates, name=scope)

    @staticmethod
    def _key(var):
        return id(var)

    def average(self, var):
        """The shadow variable of ``var`` (None when ``apply`` did not see it)."""
        return self._averages.get(self._key(var))

    def average_name(self, var):
        """``<var's op name>/<this EMA's name>``: the shadow's name in checkpoints."""
        if isinstance(var, (Variable, Tensor)):
            return var.op.name + "/" + self._name
        raise TypeError(f"average_name needs a Variable or Tensor, got {var!r}")

    def variables_to_restore(self, moving_avg_variables=None):
        """A ``Saver`` var_list that restores each variable from its shadow's
        checkpoint name (and the other global variables under their own)."""
        g = get_default_graph()
        if moving_avg_variables is None:
            moving_avg_variables = list(trainable_variables())
            moving_avg_variables += g.get_collection(MOVING_AVERAGE_VARIABLES)
        unique = list({id(v): v for v in moving_avg_variables}.values())
        name_map = {self.average_name(v): v for v in unique}
        names = {v.name for v in unique}
        for v in global_variables():
            if v.name not in names and v.op.name not in name_map:
                name_map[v.op.name] = v
        return name_map


__all__ = ["ExponentialMovingAverage", "assign_moving_average"]
