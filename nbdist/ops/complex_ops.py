"""Complex-number ops: ``nd.complex``, ``nd.real``, ``nd.imag``, ``nd.conj``,
``nd.angle`` and ``nd.abs`` of a complex tensor (``ComplexAbs``), with TF's
dtypes: float32 parts make complex64, float64 parts complex128.

>>> import nbdist as nd
>>> z = nd.complex(nd.constant([3.0, 0.0]), nd.constant([4.0, -2.0]))
>>> z.dtype, nd.abs(z).dtype
(nd.complex64, nd.float32)
>>> with nd.Session() as s:
...     [v.tolist() for v in s.run([nd.abs(z), nd.real(z), nd.imag(nd.conj(z))])]
[[5.0, 2.0], [3.0, 0.0], [-4.0, 2.0]]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import register_gradient
from nbdist.ops.math_ops_elementwise import abs as _real_abs
from nbdist.ops.math_ops_elementwise import cast
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import check_type, op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import broadcast_shapes

__all__ = ["abs", "angle", "complex", "conj", "imag", "real"]

_PARTS = (dtypes.float32, dtypes.float64)
_COMPLEX = (dtypes.complex64, dtypes.complex128)
_COMPLEX_OF = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}


def _complex_infer(c):
    d = c.check_same_dtypes([0, 1])
    check_type(c, 0, _PARTS, "real")
    return [(_COMPLEX_OF[d], broadcast_shapes(c.shape(0), c.shape(1)))]


def _to_real_infer(c):
    d = check_type(c, 0, _COMPLEX, "input")
    return [(d.real_dtype, c.shape(0))]


def _conj_infer(c):
    return [(check_type(c, 0, _COMPLEX, "input"), c.shape(0))]


_TYPES = {"T": ("type", None), "Tout": ("type", None)}
register_op("Complex", _complex_infer, attrs=_TYPES, num_inputs=2)
for _t in ("Real", "Imag", "Angle", "ComplexAbs"):
    register_op(_t, _to_real_infer, attrs=_TYPES, num_inputs=1)
register_op("Conj", _conj_infer, attrs={"T": ("type", None)}, num_inputs=1)


def complex(real, imag, name=None):  # noqa: A001 - TF's name
    """``real + 1j * imag`` element-wise (broadcasting); both float32 (gives
    complex64) or both float64 (complex128)."""
    with op_scope(name, "Complex", [real, imag]) as (g, scope):
        re = convert_to_tensor(real, name="real")
        im = convert_to_tensor(imag, name="imag", preferred_dtype=re.dtype.base_dtype)
        rd, idt = re.dtype.base_dtype, im.dtype.base_dtype
        if rd is not idt or rd not in _PARTS:
            raise TypeError(f"The `real` and `imag` components have incorrect types: "
                            f"{rd.name} {idt.name}. They must be consistent, and one "
                            "of [nd.float32, nd.float64]")
        return g.create_op("Complex", [re, im], {"T": rd, "Tout": _COMPLEX_OF[rd]},
                           name=scope).outputs[0]


def _to_real(op_type, x, name, default_name):
    with op_scope(name, default_name, [x]) as (g, scope):
        d = x.dtype.base_dtype
        return g.create_op(op_type, [x], {"T": d, "Tout": d.real_dtype},
                           name=scope).outputs[0]


def real(input, name=None):  # noqa: A002 - TF's name
    """The real part of a complex tensor; a real tensor as it is."""
    x = convert_to_tensor(input, name="input")
    if not x.dtype.is_complex:
        return x
    return _to_real("Real", x, name, "Real")


def imag(input, name=None):  # noqa: A002
    """The imaginary part of a complex tensor; zeros for a real one."""
    x = convert_to_tensor(input, name="input")
    if not x.dtype.is_complex:
        from nbdist.ops.array_ops_creation import zeros_like

        return zeros_like(x, name=name)
    return _to_real("Imag", x, name, "Imag")


def angle(input, name=None):  # noqa: A002
    """The argument of each element (``atan2(imag, real)``), in the real dtype."""
    x = convert_to_tensor(input, name="input")
    if not x.dtype.is_complex:
        x = cast(x, _COMPLEX_OF.get(x.dtype.base_dtype, dtypes.complex64))
    return _to_real("Angle", x, name, "Angle")


def conj(x, name=None):
    """The complex conjugate; a real tensor as it is."""
    x = convert_to_tensor(x, name="x")
    if not x.dtype.is_complex:
        return x
    with op_scope(name, "Conj", [x]) as (g, scope):
        return g.create_op("Conj", [x], {"T": x.dtype.base_dtype},
                           name=scope).outputs[0]


def abs(x, name=None):  # noqa: A001 - TF's name
    """``|x|``; for complex ``x`` its modulus, in the real dtype (``ComplexAbs``)."""
    x = convert_to_tensor(x, name="x")
    if not x.dtype.is_complex:
        return _real_abs(x, name=name)
    return _to_real("ComplexAbs", x, name, "ComplexAbs")


# -- gradients (TF's, for the ops that are linear in their inputs) -------------------
@register_gradient("Real")
def _real_grad(op, grad):
    return [complex(grad, 0.0 * grad)]


@register_gradient("Imag")
def _imag_grad(op, grad):
    return [complex(0.0 * grad, grad)]


@register_gradient("Conj")
def _conj_grad(op, grad):
    return [conj(grad)]


@register_gradient("Complex")
def _complex_grad(op, grad):
    from nbdist.ops.math_grad import sum_to

    x, y = op.inputs
    return [sum_to(real(grad), x, [y]), sum_to(imag(grad), y, [x])]
