"""The gradient table: op type -> gradient function, or None for an op that is
not differentiable.

``@register_gradient("Mul")`` and ``NotDifferentiable("Shape")`` fill it. The
gradient modules (``math_grad``, ``array_grad``, ``nn_grad``) fill it when
imported, and ``nbdist.ops.gradients`` imports them all, so the table is
complete wherever ``nd.gradients`` can be called.
"""

from __future__ import annotations

from nbdist.framework.ops import Operation

_GRADIENTS: dict[str, object] = {}


class RegisterGradient:
    """Decorator: ``@RegisterGradient("Add") def _add_grad(op, grad): ...``."""

    def __init__(self, op_type: str):
        if not isinstance(op_type, str):
            raise TypeError("op_type must be a string")
        self._op_type = op_type

    def __call__(self, fn):
        if self._op_type in _GRADIENTS:
            raise KeyError(f"Registering two gradient with name '{self._op_type}'!")
        _GRADIENTS[self._op_type] = fn
        return fn


def register_gradient(op_type: str):
    """``@register_gradient("Mul") def _mul_grad(op, grad): return [gx, gy]``."""
    return RegisterGradient(op_type)


def NotDifferentiable(op_type: str):  # TF's name
    """Declares that ``op_type`` has no gradient: its inputs get None."""
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a string")
    if op_type in _GRADIENTS:
        raise KeyError(f"Registering two gradient with name '{op_type}'!")
    _GRADIENTS[op_type] = None


no_gradient = NotDifferentiable


def get_gradient_function(op):
    """The gradient function of ``op`` (an Operation or an op type name).

    Returns None for a NotDifferentiable op; raises LookupError when none is
    registered. An op's ``_gradient_op_type`` attr overrides its type, as TF's
    ``gradient_override_map`` does.
    """
    if isinstance(op, Operation):
        override = op._attrs.get("_gradient_op_type")
        op_type = (
            override.decode() if isinstance(override, bytes) else (override or op.type)
        )
    else:
        op_type = op
    if op_type not in _GRADIENTS:
        raise LookupError(f"No gradient defined for operation type '{op_type}'")
    return _GRADIENTS[op_type]
