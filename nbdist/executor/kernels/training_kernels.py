"""Kernels of the training update ops (``ApplyGradientDescent``, ``ApplyAdam`` ...).

Formulas are TF's ``training_ops.cc`` (CPU functors), computed in the
variable's dtype. Each kernel takes the locks of every variable it updates
(in a fixed order, by id, so two updates never deadlock), reads them (an
uninitialised one raises ``FailedPreconditionError`` naming it), and replaces
their values with new arrays: an array a reader already holds never changes.
``ApplyGradientDescent`` and ``ApplyMomentum`` write into the variables' arrays
instead when nothing else refers to them (``VariableResource.claim_in_place``),
with the same operations in the same order, so the values are bit-identical.
"""

from __future__ import annotations

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import ignore_fp_errors
from nbdist.ops.training_ops import TRAINING_OPS  # registers the op definitions


def _shape_str(a) -> str:
    return "[" + ",".join(str(d) for d in np.shape(a)) + "]"


def _register(op_type, make_in_place=None):
    """Registers the kernel of ``op_type`` from ``make_update(attrs)``, which
    returns ``update(*values) -> new values of the refs``; ``make_in_place(attrs)``
    (optional) returns ``update(*values)`` writing them into the refs' arrays."""
    names, refs, scalars = TRAINING_OPS[op_type]
    others = tuple(i for i in range(len(names)) if i not in refs and i not in scalars)
    is_ref = tuple(i in refs for i in range(len(names)))

    def deco(make_update):
        @register_kernel(op_type)
        def factory(node):
            update = make_update(node.attrs)
            in_place = make_in_place(node.attrs) if make_in_place else None

            @ignore_fp_errors  # as TF: inf/nan, no warning
            def compute(step, *args):
                resources = [args[i] for i in refs]
                ordered = (resources if len(resources) == 1 else
                           sorted({id(r): r for r in resources}.values(), key=id))
                acquired = []
                claimed, writable = (), False
                try:
                    for r in ordered:
                        r.lock.acquire()
                        acquired.append(r)
                    # Before the arrays are taken into locals (which count as
                    # references); distinct refs only (one array, one writer).
                    if in_place is not None and len(ordered) == len(resources):
                        claimed = resources
                        writable = all(r.claim_in_place() for r in resources)
                    vals = [a.read_unlocked() if ref else np.asarray(a)
                            for a, ref in zip(args, is_ref)]
                    var = vals[0]
                    for i in scalars:
                        if vals[i].ndim != 0:
                            raise errors.InvalidArgumentError(
                                None, node.name, f"{names[i]} is not a scalar: "
                                f"{_shape_str(vals[i])}")
                    for i in refs[1:] + others:
                        if vals[i].shape != var.shape:
                            raise errors.InvalidArgumentError(
                                None, node.name, f"var and {names[i]} do not have "
                                f"the same shape{_shape_str(var)} "
                                f"{_shape_str(vals[i])} (var is "
                                f"{resources[0].name})")
                    dtype = var.dtype
                    if writable and all(v.dtype == dtype for v in vals):
                        in_place(*vals)
                        return resources[0]
                    new = update(*vals)
                    for r, v in zip(resources, new):
                        r.value = np.asarray(v, dtype=dtype)
                finally:
                    for r in claimed:
                        r.end_in_place()
                    for r in reversed(acquired):
                        r.lock.release()
                return resources[0]

            return compute

        return factory

    return deco


def _gd_in_place(attrs):
    def update(var, alpha, delta):
        np.subtract(var, alpha * delta, out=var)

    return update


@_register("ApplyGradientDescent", _gd_in_place)
def _gd(attrs):
    def update(var, alpha, delta):
        return (var - alpha * delta,)

    return update


def _momentum_in_place(attrs):
    nesterov = attrs["use_nesterov"]

    def update(var, accum, lr, grad, momentum):
        np.multiply(accum, momentum, out=accum)
        np.add(accum, grad, out=accum)
        if nesterov:
            np.subtract(var, grad * lr + accum * momentum * lr, out=var)
        else:
            np.subtract(var, accum * lr, out=var)

    return update


@_register("ApplyMomentum", _momentum_in_place)
def _momentum(attrs):
    nesterov = attrs["use_nesterov"]

    def update(var, accum, lr, grad, momentum):
        accum = accum * momentum + grad
        if nesterov:
            var = var - (grad * lr + accum * momentum * lr)
        else:
            var = var - accum * lr
        return var, accum

    return update


@_register("ApplyAdagrad")
def _adagrad(attrs):
    update_slots = attrs["update_slots"]

    def update(var, accum, lr, grad):
        if update_slots:
            accum = accum + grad * grad
        var = var - grad * lr * (1 / np.sqrt(accum))
        return var, accum

    return update


@_register("ApplyAdam")
def _adam(attrs):
    nesterov = attrs["use_nesterov"]

    def update(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad):
        one = np.ones((), dtype=var.dtype)
        alpha = lr * np.sqrt(one - beta2_power) / (one - beta1_power)
        m = m + (grad - m) * (one - beta1)
        v = v + (grad * grad - v) * (one - beta2)
        if nesterov:
            var = var - ((grad * (one - beta1) + beta1 * m) * alpha) / (
                np.sqrt(v) + epsilon)
        else:
            var = var - (m * alpha) / (np.sqrt(v) + epsilon)
        return var, m, v

    return update


@_register("ApplyRMSProp")
def _rmsprop(attrs):
    def update(var, ms, mom, lr, rho, momentum, epsilon, grad):
        one = np.ones((), dtype=var.dtype)
        ms = ms + (grad * grad - ms) * (one - rho)
        mom = mom * momentum + (grad * lr) / np.sqrt(ms + epsilon)
        return var - mom, ms, mom

    return update


@_register("ApplyCenteredRMSProp")
def _centered_rmsprop(attrs):
    def update(var, mg, ms, mom, lr, rho, momentum, epsilon, grad):
        one = np.ones((), dtype=var.dtype)
        ms = ms + (grad * grad - ms) * (one - rho)
        mg = mg + (grad - mg) * (one - rho)
        denom = (ms - mg * mg) + epsilon
        mom = mom * momentum + (grad * lr) / np.sqrt(denom)
        return var - mom, mg, ms, mom

    return update
