"""Sparse training update ops, as TF's ``SparseApply*``: the update of
``training_ops`` applied to the rows ``indices`` of the variable (and of its
slots) only, with ``grad`` holding one row per index.

==========================  =================================================
op                          inputs (refs first)
==========================  =================================================
SparseApplyMomentum         var, accum, lr, grad, indices, momentum
SparseApplyAdagrad          var, accum, lr, grad, indices
SparseApplyRMSProp          var, ms, mom, lr, rho, momentum, epsilon, grad,
                            indices
SparseApplyCenteredRMSProp  var, mg, ms, mom, lr, rho, momentum, epsilon,
                            grad, indices
==========================  =================================================

As TF's kernels, an index named twice is applied twice, in order. Placed with
their variable (ref inputs), so only ``grad`` and ``indices`` travel to the
variable's task. Kernels: ``nbdist/executor/kernels/sparse_training_kernels.py``.
"""

from __future__ import annotations

from nbdist.framework.op_def_registry import register_op

# op type -> (input names, ref input indices, scalar input indices, grad index)
SPARSE_TRAINING_OPS = {
    "SparseApplyMomentum": (("var", "accum", "lr", "grad", "indices", "momentum"),
                            (0, 1), (2, 5), 3),
    "SparseApplyAdagrad": (("var", "accum", "lr", "grad", "indices"), (0, 1), (2,),
                           3),
    "SparseApplyRMSProp": (("var", "ms", "mom", "lr", "rho", "momentum", "epsilon",
                            "grad", "indices"), (0, 1, 2), (3, 4, 5, 6), 7),
    "SparseApplyCenteredRMSProp": (("var", "mg", "ms", "mom", "lr", "rho",
                                    "momentum", "epsilon", "grad", "indices"),
                                   (0, 1, 2, 3), (4, 5, 6, 7), 8),
}

_EXTRA_ATTRS = {
    "SparseApplyMomentum": {"use_nesterov": ("bool", False)},
    "SparseApplyAdagrad": {"update_slots": ("bool", True)},
}


def _make_infer(op_type):
    names, refs, scalars, grad_i = SPARSE_TRAINING_OPS[op_type]
    idx_i = names.index("indices")

    def infer(c):
        for i in refs:
            if not c.input_dtypes[i].is_ref_dtype:
                raise TypeError(f"input '{names[i]}' of {op_type} must be a variable "
                                "reference")
        dt = c.dtype(0)
        for i in range(len(names)):
            if i != idx_i and c.dtype(i) is not dt:
                raise TypeError(f"input '{names[i]}' of {op_type} has dtype "
                                f"{c.dtype(i).name}, expected {dt.name} (the "
                                "variable's dtype)")
        if not c.dtype(idx_i).is_integer:
            raise TypeError(f"indices of {op_type} must be integers, got "
                            f"{c.dtype(idx_i).name}")
        shape = c.shape(0)
        for i in refs[1:]:
            if not shape.is_compatible_with(c.shape(i)):
                raise ValueError(f"'var' and '{names[i]}' of {op_type} do not have "
                                 f"the same shape: {shape} vs {c.shape(i)}")
        for i in scalars:
            if c.shape(i).rank not in (None, 0):
                raise ValueError(f"'{names[i]}' of {op_type} must be a scalar, got "
                                 f"shape {c.shape(i)}")
        if c.shape(idx_i).rank not in (None, 1):
            raise ValueError(f"indices of {op_type} must be a vector, got shape "
                             f"{c.shape(idx_i)}")
        grad = c.shape(grad_i)
        if (shape.rank is not None and grad.rank is not None
                and not shape[1:].is_compatible_with(grad[1:])):
            raise ValueError(f"var and grad of {op_type} do not match in "
                             f"dimensions past the first: {shape} vs {grad}")
        return [(c.input_dtypes[0], shape)]

    return infer


for _op_type in SPARSE_TRAINING_OPS:
    register_op(_op_type, _make_infer(_op_type),
                attrs={"T": ("type", None), "Tindices": ("type", None),
                       "use_locking": ("bool", False),
                       **_EXTRA_ATTRS.get(_op_type, {})},
                num_inputs=len(SPARSE_TRAINING_OPS[_op_type][0]),
                ref_inputs=SPARSE_TRAINING_OPS[_op_type][1], stateful=True)


def _build(op_type, inputs, use_locking, name, **attrs):
    from nbdist.framework.ops import convert_to_tensor
    from nbdist.ops.training_ops import _ref_of

    names, refs, _, _ = SPARSE_TRAINING_OPS[op_type]
    var = _ref_of(inputs[0])
    dtype = var.dtype.base_dtype
    tensors = []
    for i, x in enumerate(inputs):
        if i in refs:
            t = _ref_of(x)
            if not getattr(t, "dtype", None) or not t.dtype.is_ref_dtype:
                raise TypeError(f"input '{names[i]}' of {op_type} must be a "
                                f"variable or variable reference, got {x!r}")
        elif names[i] == "indices":
            t = convert_to_tensor(x, name="indices")
            index_dtype = t.dtype.base_dtype
        else:
            t = convert_to_tensor(x, dtype=dtype, name=names[i])
        tensors.append(t)
    attrs = {"T": dtype, "Tindices": index_dtype, "use_locking": bool(use_locking),
             **attrs}
    return var.graph.create_op(op_type, tensors, attrs,
                               name=name or op_type).outputs[0]


def sparse_apply_momentum(var, accum, lr, grad, indices, momentum,
                          use_locking=False, use_nesterov=False, name=None):
    """For each row i of indices: accum[i] = accum[i] * momentum + grad;
    var[i] -= lr * accum[i] (or Nesterov's form)."""
    return _build("SparseApplyMomentum", [var, accum, lr, grad, indices, momentum],
                  use_locking, name, use_nesterov=bool(use_nesterov))


def sparse_apply_adagrad(var, accum, lr, grad, indices, use_locking=False,
                         update_slots=True, name=None):
    """accum[i] += grad**2; var[i] -= lr * grad / sqrt(accum[i])."""
    return _build("SparseApplyAdagrad", [var, accum, lr, grad, indices], use_locking,
                  name, update_slots=bool(update_slots))


def sparse_apply_rms_prop(var, ms, mom, lr, rho, momentum, epsilon, grad, indices,
                          use_locking=False, name=None):
    return _build("SparseApplyRMSProp", [var, ms, mom, lr, rho, momentum, epsilon,
                                         grad, indices], use_locking, name)


def sparse_apply_centered_rms_prop(var, mg, ms, mom, lr, rho, momentum, epsilon,
                                   grad, indices, use_locking=False, name=None):
    return _build("SparseApplyCenteredRMSProp", [var, mg, ms, mom, lr, rho,
                                                 momentum, epsilon, grad, indices],
                  use_locking, name)


__all__ = [
    "SPARSE_TRAINING_OPS",
    "sparse_apply_adagrad",
    "sparse_apply_centered_rms_prop",
    "sparse_apply_momentum",
    "sparse_apply_rms_prop",
]
