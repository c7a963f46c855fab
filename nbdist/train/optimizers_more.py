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
from nbdist.ops.array_ops import gather
from nbdist.ops.state_ops import assign, scatter_update
from nbdist.ops.variables import constant_initializer
from nbdist.train.optimizer import Optimizer


def _read(v):
    return v.value() if hasattr(v, "value") else v


def _assign_all(pairs, name=None):
    news = [new for _, new in pairs]
    with control_dependencies(news):
        return group(*[assign(ref, new) for ref, new in pairs], name=name)


def _filled_slot(opt, var, value, slot_name, op_name):
    """A slot of ``var``'s shape and dtype, every entry ``value``."""
    dt = var.dtype.base_dtype
    init = constant_initializer(value, dtype=dt)
    return opt._get_or_make_slot_with_initializer(var, init, var.shape, dt,
                                                  slot_name, op_name)


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
            _filled_slot(self, v, self._initial_accumulator_value, "accumulator",
                         self._name)

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
            _filled_slot(self, v, self._initial_accumulator_value, "accum",
                         self._accum_name or self._name)
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


class AdagradDAOptimizer(Optimizer):
    """Adagrad Dual Averaging (Duchi et al., 2011) as TF1's: slots
    ``gradient_accumulator`` (sum of gradients, from zeros) and
    ``gradient_squared_accumulator`` (from
    ``initial_gradient_squared_accumulator_value``). Each step sets the
    variable from the sums alone, with ``t = global_step + 1``::

        var = -lr * sign(acc) * max(|acc| - l1 * t, 0) / (l2 * t * lr + sqrt(sq))

    (``acc`` itself in place of the ``sign``/``max`` term when ``l1`` is 0).
    ``global_step`` is required; pass it to ``minimize`` too so it advances.

    >>> import nbdist as nd
    >>> step = nd.train.get_or_create_global_step()
    >>> x = nd.Variable([1.0, 2.0])
    >>> opt = nd.train.AdagradDAOptimizer(3.0, global_step=step)
    >>> train = opt.minimize(nd.reduce_sum(0.5 * x * x), global_step=step)
    >>> with nd.Session() as s:
    ...     s.run(nd.global_variables_initializer()); s.run(train)
    ...     [round(float(v), 4) for v in s.run(x)]
    [-2.8604, -2.9632]
    """

    def __init__(self, learning_rate, global_step,
                 initial_gradient_squared_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0,
                 use_locking=False, name="AdagradDA"):
        if initial_gradient_squared_accumulator_value <= 0.0:
            raise ValueError("initial_gradient_squared_accumulator_value must be "
                             f"positive: {initial_gradient_squared_accumulator_value}")
        super().__init__(use_locking, name)
        self._initial_value = initial_gradient_squared_accumulator_value
        self._global_step = global_step
        self._hyper = {"learning_rate": learning_rate,
                       "l1": l1_regularization_strength,
                       "l2": l2_regularization_strength}

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "gradient_accumulator", self._name)
            _filled_slot(self, v, self._initial_value, "gradient_squared_accumulator",
                         self._name)

    def _new_values(self, var, acc, sq):
        """The variable from the updated sums ``acc`` and ``sq``."""
        dt = var.dtype.base_dtype
        lr, l1, l2 = (self._get_hyper(k, dt) for k in ("learning_rate", "l1", "l2"))
        t = M.add(M.cast(_read(self._global_step), dt), constant(1.0, dt))
        l1_acc = M.multiply(M.sign(acc), M.maximum(
            M.subtract(M.abs(acc), M.multiply(l1, t)), constant(0.0, dt)))
        num = where(M.greater(l1, constant(0.0, dt)), l1_acc, acc)
        den = M.add(M.multiply(M.multiply(l2, t), lr), M.sqrt(sq))
        return M.negative(M.divide(M.multiply(lr, num), den))

    def _apply_dense(self, grad, var):
        acc = self.get_slot(var, "gradient_accumulator")
        sq = self.get_slot(var, "gradient_squared_accumulator")
        new_acc = M.add(_read(acc), grad)
        new_sq = M.add(_read(sq), M.square(grad))
        return _assign_all([(var, self._new_values(var, new_acc, new_sq)),
                            (acc, new_acc), (sq, new_sq)])

    def _apply_sparse(self, grad, var):
        # Only the rows of ``grad.indices`` move, as TF's SparseApplyAdagradDA.
        acc = self.get_slot(var, "gradient_accumulator")
        sq = self.get_slot(var, "gradient_squared_accumulator")
        idx = grad.indices
        new_acc = M.add(gather(_read(acc), idx), grad.values)
        new_sq = M.add(gather(_read(sq), idx), M.square(grad.values))
        new_var = self._new_values(var, new_acc, new_sq)
        with control_dependencies([new_var]):
            return group(scatter_update(var, idx, new_var),
                         scatter_update(acc, idx, new_acc),
                         scatter_update(sq, idx, new_sq))


__all__ = ["AdadeltaOptimizer", "AdagradDAOptimizer", "FtrlOptimizer", "ProximalAdagradOptimizer",
           "ProximalGradientDescentOptimizer"]
