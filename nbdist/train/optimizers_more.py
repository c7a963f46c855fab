"""More TF1 optimizers: FTRL-Proximal, proximal gradient descent, proximal
Adagrad and Adadelta, with TF's slot names and its ``training_ops.cc``
formulas (dense updates).

Each update is built from graph ops: the new values of the variable and its
slots are computed from their current values, then all assigned (the assigns
wait for every new value), so one update reads consistent old values.
"""

from __future__ import annotations

from nbdist.ops import math_ops as M
from nbdist.framework.constant_op import constant
from nbdist.ops.array_ops_slicing import where
from nbdist.ops.control_flow_ops import group
from nbdist.framework.ops import control_dependencies
from nbdist.ops.state_ops import assign
from nbdist.ops.variables import constant_initializer
from nbdist.train.optimizer import Optimizer


def _read(v):
    return v.value() if hasattr(v, "value") else v


def _assign_all(pairs, name=None):
    news = [new for _, new in pairs]
    with control_dependencies(news):
        return group(*[assign(ref, new) for ref, new in pairs], name=name)


def _shrink(prox, lr, l1, l2):
    """TF's proximal step: sign(prox) * max(|prox| - lr*l1, 0) / (1 + lr*l2)."""
    dt = prox.dtype.base_dtype
    mag = M.maximum(M.subtract(M.abs(prox), M.multiply(lr, l1)), constant(0.0, dt))
    return M.divide(M.multiply(M.sign(prox), mag),
                    M.add(constant(1.0, dt), M.multiply(lr, l2)))


class ProximalGradientDescentOptimizer(Optimizer):
    """Gradient descent followed by the proximal (soft-threshold) step of the
    l1/l2 regularisers: ``prox = var - lr * grad``, then ``_shrink``."""

    def __init__(self, learning_rate, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, use_locking=False,
                 name="ProximalGradientDescent"):
        super().__init__(use_locking, name)
        self._hyper = {"learning_rate": learning_rate,
                       "l1": l1_regularization_strength,
                       "l2": l2_regularization_strength}

    def _apply_dense(self, grad, var):
        dt = var.dtype
        lr = self._get_hyper("learning_rate", dt)
        prox = M.subtract(_read(var), M.multiply(lr, grad))
        new = _shrink(prox, lr, self._get_hyper("l1", dt), self._get_hyper("l2", dt))
        return _assign_all([(var, new)])


class ProximalAdagradOptimizer(Optimizer):
    """Adagrad's per-coordinate rate ``lr / sqrt(accum)`` with the proximal
    l1/l2 step; slot ``accumulator`` starts at ``initial_accumulator_value``."""

    def __init__(self, learning_rate, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="ProximalAdagrad"):
        if initial_accumulator_value <= 0.0:
            raise ValueError(f"initial_accumulator_value must be positive: "
                             f"{initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._initial_accumulator_value = initial_accumulator_value
        self._hyper = {"learning_rate": learning_rate,
                       "l1": l1_regularization_strength,
                       "l2": l2_regularization_strength}

    def _create_slots(self, var_list):
        for v in var_list:
            dt = v.dtype.base_dtype
            init = constant_initializer(self._initial_accumulator_value, dtype=dt)
            self._get_or_make_slot_with_initializer(v, init, v.shape, dt,
                                                    "accumulator", self._name)

    def _apply_dense(self, grad, var):
        dt = var.dtype
        acc = self.get_slot(var, "accumulator")
        new_acc = M.add(_read(acc), M.square(grad))
        lr = M.multiply(self._get_hyper("learning_rate", dt), M.rsqrt(new_acc))
        prox = M.subtract(_read(var), M.multiply(lr, grad))
        new = _shrink(prox, lr, self._get_hyper("l1", dt), self._get_hyper("l2", dt))
        return _assign_all([(var, new), (acc, new_acc)])


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal (McMahan et al., 2013) as TF1's ``FtrlOptimizer``: slots
    ``accum`` (from ``initial_accumulator_value``) and ``linear`` (zeros)."""

    def __init__(self, learning_rate, learning_rate_power=-0.5,
                 initial_accumulator_value=0.1, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, use_locking=False, name="Ftrl",
                 accum_name=None, linear_name=None,
                 l2_shrinkage_regularization_strength=0.0):
        if initial_accumulator_value < 0.0:
            raise ValueError(f"initial_accumulator_value {initial_accumulator_value} "
                             "needs to be positive or zero")
        if learning_rate_power > 0.0:
            raise ValueError(f"learning_rate_power {learning_rate_power} needs to be "
                             "negative or zero")
        for what, v in (("l1_regularization_strength", l1_regularization_strength),
                        ("l2_regularization_strength", l2_regularization_strength),
                        ("l2_shrinkage_regularization_strength",
                         l2_shrinkage_regularization_strength)):
            if v < 0.0:
                raise ValueError(f"{what} {v} needs to be positive or zero")
        super().__init__(use_locking, name)
        self._initial_accumulator_value = initial_accumulator_value
        self._accum_name, self._linear_name = accum_name, linear_name
        self._hyper = {"learning_rate": learning_rate,
                       "lr_power": learning_rate_power,
                       "l1": l1_regularization_strength,
                       "l2": l2_regularization_strength,
                       "l2_shrinkage": l2_shrinkage_regularization_strength}

    def _create_slots(self, var_list):
        for v in var_list:
            dt = v.dtype.base_dtype
            init = constant_initializer(self._initial_accumulator_value, dtype=dt)
            self._get_or_make_slot_with_initializer(
                v, init, v.shape, dt, "accum", self._accum_name or self._name)
            self._zeros_slot(v, "linear", self._linear_name or self._name)

    def _apply_dense(self, grad, var):
        dt = var.dtype
        h = {k: self._get_hyper(k, dt) for k in self._hyper}
        accum, linear = self.get_slot(var, "accum"), self.get_slot(var, "linear")
        v, a, lin = _read(var), _read(accum), _read(linear)
        two = constant(2.0, dt.base_dtype)
        shrunk_grad = M.add(grad, M.multiply(M.multiply(two, h["l2_shrinkage"]), v))
        new_a = M.add(a, M.square(grad))
        neg_power = M.negative(h["lr_power"])
        sigma = M.divide(M.subtract(M.pow(new_a, neg_power), M.pow(a, neg_power)),
                         h["learning_rate"])
        new_lin = M.subtract(M.add(lin, shrunk_grad), M.multiply(sigma, v))
        quadratic = M.add(M.divide(M.pow(new_a, neg_power), h["learning_rate"]),
                          M.multiply(two, h["l2"]))
        shrink = M.divide(M.subtract(M.multiply(M.sign(new_lin), h["l1"]), new_lin),
                          quadratic)
        new_v = where(M.greater(M.abs(new_lin), h["l1"]), shrink,
                      M.multiply(new_lin, constant(0.0, dt.base_dtype)))
        return _assign_all([(var, new_v), (accum, new_a), (linear, new_lin)])


class AdadeltaOptimizer(Optimizer):
    """Adadelta (Zeiler, 2012): slots ``accum`` and ``accum_update``."""

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-8,
                 use_locking=False, name="Adadelta"):
        super().__init__(use_locking, name)
        self._hyper = {"learning_rate": learning_rate, "rho": rho,
                       "epsilon": epsilon}

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "accum", self._name)
            self._zeros_slot(v, "accum_update", self._name)

    def _apply_dense(self, grad, var):
        dt = var.dtype
        lr, rho, eps = (self._get_hyper(k, dt) for k in ("learning_rate", "rho",
                                                          "epsilon"))
        one = constant(1.0, dt.base_dtype)
        accum, accum_u = self.get_slot(var, "accum"), self.get_slot(var, "accum_update")
        new_acc = M.add(M.multiply(rho, _read(accum)),
                        M.multiply(M.subtract(one, rho), M.square(grad)))
        au = _read(accum_u)
        update = M.multiply(M.divide(M.sqrt(M.add(au, eps)),
                                     M.sqrt(M.add(new_acc, eps))), grad)
        new_au = M.add(M.multiply(rho, au),
                       M.multiply(M.subtract(one, rho), M.square(update)))
        new_v = M.subtract(_read(var), M.multiply(lr, update))
        return _assign_all([(var, new_v), (accum, new_acc), (accum_u, new_au)])


__all__ = ["AdadeltaOptimizer", "FtrlOptimizer", "ProximalAdagradOptimizer",
           "ProximalGradientDescentOptimizer"]
