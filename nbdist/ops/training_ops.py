"""Training update ops, as TF's ``training_ops``: each takes the variable (and its
slots) by reference, updates them in place of the variable's value, and
outputs the variable's ref.

======================  ======================================================
op                      inputs (refs first)
======================  ======================================================
ApplyGradientDescent    var, alpha, delta
ApplyMomentum           var, accum, lr, grad, momentum  (attr use_nesterov)
ApplyAdagrad            var, accum, lr, grad            (attr update_slots)
ApplyAdam               var, m, v, beta1_power, beta2_power, lr, beta1, beta2,
                        epsilon, grad                   (attr use_nesterov)
ApplyRMSProp            var, ms, mom, lr, rho, momentum, epsilon, grad
ApplyCenteredRMSProp    var, mg, ms, mom, lr, rho, momentum, epsilon, grad
======================  ======================================================

The kernels (``nbdist/executor/kernels/training_kernels.py``) follow TF's
``training_ops.cc`` formulas. As every op with ``ref_inputs``, these ops are
placed with their variable: the update runs where the variable lives.
"""

from __future__ import annotations

from nbdist.framework.op_def_registry import register_op

# op type -> (input names, indices of the ref inputs, indices of scalar inputs)
TRAINING_OPS = {
    "ApplyGradientDescent": (("var", "alpha", "delta"), (0,), (1,)),
    "ApplyMomentum": (("var", "accum", "lr", "grad", "momentum"), (0, 1), (2, 4)),
    "ApplyAdagrad": (("var", "accum", "lr", "grad"), (0, 1), (2,)),
    "ApplyAdam": (("var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1",
                   "beta2", "epsilon", "grad"), (0, 1, 2), (3, 4, 5, 6, 7, 8)),
    "ApplyRMSProp": (("var", "ms", "mom", "lr", "rho", "momentum", "epsilon",
                      "grad"), (0, 1, 2), (3, 4, 5, 6)),
    "ApplyCenteredRMSProp": (("var", "mg", "ms", "mom", "lr", "rho", "momentum",
                              "epsilon", "grad"), (0, 1, 2, 3), (4, 5, 6, 7)),
}

_EXTRA_ATTRS = {
    "ApplyMomentum": {"use_nesterov": ("bool", False)},
    "ApplyAdagrad": {"update_slots": ("bool", True)},
    "ApplyAdam": {"use_nesterov": ("bool", False)},
}


def _make_infer(op_type):
    names, refs, scalars = TRAINING_OPS[op_type]

    def infer(c):
        for i in refs:
            if not c.input_dtypes[i].is_ref_dtype:
                raise TypeError(f"input '{names[i]}' of {op_type} must be a variable "
                                "reference")
        dt = c.dtype(0)
        for i in range(len(names)):
            if c.dtype(i) is not dt:
                raise TypeError(f"input '{names[i]}' of {op_type} has dtype "
                                f"{c.dtype(i).name}, expected {dt.name} (the "
                                "variable's dtype)")
        if not dt.is_floating:
            raise TypeError(f"{op_type} needs a floating point variable, got "
                            f"{dt.name}")
        shape = c.shape(0)
        for i in range(1, len(names)):
            if i in scalars:
                if c.shape(i).rank not in (None, 0):
                    raise ValueError(f"'{names[i]}' of {op_type} must be a scalar, "
                                     f"got shape {c.shape(i)}")
                continue
            if not shape.is_compatible_with(c.shape(i)):
                raise ValueError(f"'var' and '{names[i]}' of {op_type} do not have "
                                 f"the same shape: {shape} vs {c.shape(i)}")
            shape = shape.merge_with(c.shape(i))
        return [(c.input_dtypes[0], shape)]

    return infer


for _op_type, (_names, _refs, _scalars) in TRAINING_OPS.items():
    register_op(_op_type, _make_infer(_op_type),
                attrs={"T": ("type", None), "use_locking": ("bool", False),
                       **_EXTRA_ATTRS.get(_op_type, {})},
                num_inputs=len(_names), ref_inputs=_refs, stateful=True)


def _ref_of(x):
    """The ref tensor of a Variable (or a ref tensor itself)."""
    if hasattr(x, "_ref"):
        return x._ref()
    return x


def _build(op_type, inputs, use_locking, name, **attrs):
    from nbdist.framework.ops import convert_to_tensor

    names, refs, _ = TRAINING_OPS[op_type]
    var = _ref_of(inputs[0])
    dtype = var.dtype.base_dtype
    tensors = []
    for i, x in enumerate(inputs):
        if i in refs:
            t = _ref_of(x)
            if not getattr(t, "dtype", None) or not t.dtype.is_ref_dtype:
                raise TypeError(f"input '{names[i]}' of {op_type} must be a "
                                f"variable or variable reference, got {x!r}")
        else:
            t = convert_to_tensor(x, dtype=dtype, name=names[i])
        tensors.append(t)
    attrs = {"T": dtype, "use_locking": bool(use_locking), **attrs}
    return var.graph.create_op(op_type, tensors, attrs,
                               name=name or op_type).outputs[0]


def apply_gradient_descent(var, alpha, delta, use_locking=False, name=None):
    """var -= alpha * delta."""
    return _build("ApplyGradientDescent", [var, alpha, delta], use_locking, name)


def apply_momentum(var, accum, lr, grad, momentum, use_locking=False,
                   use_nesterov=False, name=None):
    """accum = accum * momentum + grad; var -= lr * accum (or Nesterov's form)."""
    return _build("ApplyMomentum", [var, accum, lr, grad, momentum], use_locking,
                  name, use_nesterov=bool(use_nesterov))


def apply_adagrad(var, accum, lr, grad, use_locking=False, update_slots=True,
                  name=None):
    """accum += grad**2; var -= lr * grad / sqrt(accum)."""
    return _build("ApplyAdagrad", [var, accum, lr, grad], use_locking, name,
                  update_slots=bool(update_slots))


def apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
               use_locking=False, use_nesterov=False, name=None):
    """The Adam update (Kingma and Ba, section 2, with TF's epsilon-hat)."""
    return _build("ApplyAdam", [var, m, v, beta1_power, beta2_power, lr, beta1,
                                beta2, epsilon, grad], use_locking, name,
                  use_nesterov=bool(use_nesterov))


def apply_rms_prop(var, ms, mom, lr, rho, momentum, epsilon, grad,
                   use_locking=False, name=None):
    return _build("ApplyRMSProp", [var, ms, mom, lr, rho, momentum, epsilon, grad],
                  use_locking, name)


def apply_centered_rms_prop(var, mg, ms, mom, lr, rho, momentum, epsilon, grad,
                            use_locking=False, name=None):
    return _build("ApplyCenteredRMSProp", [var, mg, ms, mom, lr, rho, momentum,
                                           epsilon, grad], use_locking, name)


__all__ = [
    "TRAINING_OPS",
    "apply_adagrad",
    "apply_adam",
    "apply_centered_rms_prop",
    "apply_gradient_descent",
    "apply_momentum",
    "apply_rms_prop",
]
