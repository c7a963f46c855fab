"""The TF1 optimizers: gradient descent, momentum, Adagrad, Adam, RMSProp.

Each builds one training op per variable (``ApplyGradientDescent`` ...), which
takes the variable and its slots by reference and so runs where they live.
"""

from __future__ import annotations

from nbdist.ops import sparse_training_ops, state_ops, training_ops
from nbdist.framework.ops import Tensor
from nbdist.ops.variables import Variable, constant_initializer, ones_initializer
from nbdist.train.optimizer import Optimizer, group_by_device


class GradientDescentOptimizer(Optimizer):
    """``var -= learning_rate * grad``."""

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._hyper = {"learning_rate": learning_rate}

    def _apply_dense(self, grad, var):
        return training_ops.apply_gradient_descent(
            var, self._get_hyper("learning_rate", var.dtype), grad,
            use_locking=self._use_locking).op

    def _apply_sparse_duplicate_indices(self, grad, var):
        # As TF: a scatter_sub of the scaled rows; repeated rows subtract twice.
        lr = self._get_hyper("learning_rate", var.dtype)
        return state_ops.scatter_sub(var, grad.indices, _mul(grad.values, lr),
                                     use_locking=self._use_locking).op


class MomentumOptimizer(Optimizer):
    """``accum = momentum * accum + grad; var -= learning_rate * accum``."""

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum",
                 use_nesterov=False):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov
        self._hyper = {"learning_rate": learning_rate, "momentum": momentum}

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _apply_dense(self, grad, var):
        mom = self.get_slot(var, "momentum")
        return training_ops.apply_momentum(
            var, mom, self._get_hyper("learning_rate", var.dtype), grad,
            self._get_hyper("momentum", var.dtype), use_locking=self._use_locking,
            use_nesterov=self._use_nesterov).op

    def _apply_sparse(self, grad, var):
        mom = self.get_slot(var, "momentum")
        return sparse_training_ops.sparse_apply_momentum(
            var, mom, self._get_hyper("learning_rate", var.dtype), grad.values,
            grad.indices, self._get_hyper("momentum", var.dtype),
            use_locking=self._use_locking, use_nesterov=self._use_nesterov).op


class AdagradOptimizer(Optimizer):
    """``accum += grad**2; var -= learning_rate * grad / sqrt(accum)``."""

    def __init__(self, learning_rate, initial_accumulator_value=0.1,
                 use_locking=False, name="Adagrad"):
        if initial_accumulator_value <= 0.0:
            raise ValueError("initial_accumulator_value must be positive: "
                             f"{initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._initial_accumulator_value = initial_accumulator_value
        self._hyper = {"learning_rate": learning_rate}

    def _create_slots(self, var_list):
        for v in var_list:
            dtype = v.dtype.base_dtype
            init = constant_initializer(self._initial_accumulator_value, dtype=dtype)
            self._get_or_make_slot_with_initializer(v, init, v.shape, dtype,
                                                    "accumulator", self._name)

    def _apply_dense(self, grad, var):
        acc = self.get_slot(var, "accumulator")
        return training_ops.apply_adagrad(
            var, acc, self._get_hyper("learning_rate", var.dtype), grad,
            use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        acc = self.get_slot(var, "accumulator")
        return sparse_training_ops.sparse_apply_adagrad(
            var, acc, self._get_hyper("learning_rate", var.dtype), grad.values,
            grad.indices, use_locking=self._use_locking).op


class AdamOptimizer(Optimizer):
    """Adam (Kingma and Ba), as TF1: slots ``m`` (``<var>/Adam``) and ``v``
    (``<var>/Adam_1``), and the variables ``beta1_power``/``beta2_power``
    placed with the first variable (by name) and updated after every step."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 use_locking=False, name="Adam"):
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon
        self._hyper = {"learning_rate": learning_rate, "beta1": beta1,
                       "beta2": beta2, "epsilon": epsilon}
        self._updated_beta_graphs: set = set()

    def _get_beta_accumulators(self, graph=None):
        return (self._get_non_slot_variable("beta1_power", graph),
                self._get_non_slot_variable("beta2_power", graph))

    def _create_slots(self, var_list):
        first_var = min(var_list, key=lambda x: x.name)
        self._create_non_slot_variable(self._beta_initial(self._beta1, first_var),
                                       "beta1_power", first_var)
        self._create_non_slot_variable(self._beta_initial(self._beta2, first_var),
                                       "beta2_power", first_var)
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    @staticmethod
    def _beta_initial(beta, first_var):
        if isinstance(beta, (Tensor, Variable)) or callable(beta):
            return beta
        # As TF: a Python float gives a float32 variable.
        return float(beta)

    def _apply_dense(self, grad, var):
        m = self.get_slot(var, "m")
        v = self.get_slot(var, "v")
        beta1_power, beta2_power = self._get_beta_accumulators(var.graph)
        dt = var.dtype.base_dtype

        def as_dtype(x):
            t = x.value() if isinstance(x, Variable) else x
            if t.dtype.base_dtype is not dt:
                from nbdist.train.optimizer import _cast

                t = _cast(t, dt)
            return t

        return training_ops.apply_adam(
            var, m, v, as_dtype(beta1_power), as_dtype(beta2_power),
            self._get_hyper("learning_rate", dt), self._get_hyper("beta1", dt),
            self._get_hyper("beta2", dt), self._get_hyper("epsilon", dt), grad,
            use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        # TF1's sparse Adam: m and v decay densely, the slices' contributions
        # are scatter-added, then var moves by the whole m / sqrt(v).
        from nbdist.ops.control_flow_ops import group
        from nbdist.ops.math_ops_elementwise import sqrt

        dt = var.dtype.base_dtype
        beta1_power, beta2_power = self._get_beta_accumulators(var.graph)
        beta1_power = _as_dtype(beta1_power, dt)
        beta2_power = _as_dtype(beta2_power, dt)
        lr_t, beta1_t, beta2_t, epsilon_t = (
            self._get_hyper(n, dt) for n in ("learning_rate", "beta1", "beta2",
                                             "epsilon"))
        lr = lr_t * sqrt(1 - beta2_power) / (1 - beta1_power)
        g = var.graph
        m = self.get_slot(var, "m")
        m_t = state_ops.assign(m, _mul(m, beta1_t), use_locking=self._use_locking)
        with g.control_dependencies([m_t]):
            m_t = state_ops.scatter_add(m, grad.indices,
                                        _mul(grad.values, 1 - beta1_t),
                                        use_locking=self._use_locking)
        v = self.get_slot(var, "v")
        v_t = state_ops.assign(v, _mul(v, beta2_t), use_locking=self._use_locking)
        with g.control_dependencies([v_t]):
            v_t = state_ops.scatter_add(v, grad.indices,
                                        _mul(grad.values * grad.values, 1 - beta2_t),
                                        use_locking=self._use_locking)
        var_update = state_ops.assign_sub(var, lr * m_t / (sqrt(v_t) + epsilon_t),
                                          use_locking=self._use_locking)
        return group(var_update, m_t, v_t)

    def _finish(self, update_ops, name_scope):
        beta1_power, beta2_power = self._get_beta_accumulators(
            update_ops[0].graph if update_ops else None)
        g = beta1_power.graph
        with g.control_dependencies(update_ops), g.colocate_with(beta1_power.op):
            update_beta1 = beta1_power.assign(
                _mul(beta1_power, self._hyper_for(beta1_power, "beta1")),
                use_locking=self._use_locking)
            update_beta2 = beta2_power.assign(
                _mul(beta2_power, self._hyper_for(beta2_power, "beta2")),
                use_locking=self._use_locking)
        return group_by_device(list(update_ops) + [update_beta1, update_beta2],
                               name=name_scope)

    def _hyper_for(self, var, name):
        dt = var.dtype.base_dtype
        key = (name, dt)
        if key in self._hyper_tensors:
            return self._hyper_tensors[key]
        value = self._hyper[name]
        if isinstance(value, (Tensor, Variable)):
            return self._get_hyper(name, dt)
        from nbdist.framework.constant_op import constant

        return constant(value, dtype=dt, name=name)


class RMSPropOptimizer(Optimizer):
    """RMSProp, as TF1: slots ``rms`` (``<var>/RMSProp``, initialised to ones),
    ``mg`` when centered, and ``momentum``."""

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10,
                 use_locking=False, centered=False, name="RMSProp"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._decay = decay
        self._momentum = momentum
        self._epsilon = epsilon
        self._centered = centered
        self._hyper = {"learning_rate": learning_rate, "decay": decay,
                       "momentum": momentum, "epsilon": epsilon}

    def _create_slots(self, var_list):
        for v in var_list:
            dtype = v.dtype.base_dtype
            self._get_or_make_slot_with_initializer(
                v, ones_initializer(dtype=dtype), v.shape, dtype, "rms", self._name)
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _apply_dense(self, grad, var):
        rms = self.get_slot(var, "rms")
        mom = self.get_slot(var, "momentum")
        dt = var.dtype.base_dtype
        hp = [self._get_hyper(n, dt) for n in ("learning_rate", "decay", "momentum",
                                               "epsilon")]
        if self._centered:
            mg = self.get_slot(var, "mg")
            return training_ops.apply_centered_rms_prop(
                var, mg, rms, mom, *hp, grad, use_locking=self._use_locking).op
        return training_ops.apply_rms_prop(var, rms, mom, *hp, grad,
                                           use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        rms = self.get_slot(var, "rms")
        mom = self.get_slot(var, "momentum")
        dt = var.dtype.base_dtype
        hp = [self._get_hyper(n, dt) for n in ("learning_rate", "decay", "momentum",
                                               "epsilon")]
        if self._centered:
            mg = self.get_slot(var, "mg")
            return sparse_training_ops.sparse_apply_centered_rms_prop(
                var, mg, rms, mom, *hp, grad.values, grad.indices,
                use_locking=self._use_locking).op
        return sparse_training_ops.sparse_apply_rms_prop(
            var, rms, mom, *hp, grad.values, grad.indices,
            use_locking=self._use_locking).op


def _as_dtype(x, dt):
    t = x.value() if isinstance(x, Variable) else x
    if t.dtype.base_dtype is not dt:
        from nbdist.train.optimizer import _cast

        t = _cast(t, dt)
    return t


def _mul(x, y):
    from nbdist.ops import math_ops

    return math_ops.multiply(x, y)


__all__ = [
    "AdagradOptimizer",
    "AdamOptimizer",
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "RMSPropOptimizer",
]
