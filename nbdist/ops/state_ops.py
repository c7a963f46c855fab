"""Variable ops: ``VariableV2`` (a ref), ``Assign``/``AssignAdd``/``AssignSub``,
``CountUpTo``."""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.tensor_shape import TensorShape, broadcast_shapes


def _variable_infer(c):
    return [(c.attr("dtype")._as_ref, c.attr("shape"))]


register_op("VariableV2", _variable_infer,
            attrs={"shape": ("shape", REQUIRED), "dtype": ("type", REQUIRED),
                   "container": ("string", ""), "shared_name": ("string", "")},
            num_inputs=0, stateful=True)


def _assign_infer(c):
    if not c.input_dtypes[0].is_ref_dtype:
        raise TypeError("input 'ref' of Assign must be a variable reference")
    if c.dtype(0) is not c.dtype(1):
        raise TypeError(f"value of dtype {c.dtype(1).name} cannot be assigned to a "
                        f"variable of dtype {c.dtype(0).name}")
    shape = c.shape(0)
    if c.attrs.get("validate_shape", True):
        if not shape.is_compatible_with(c.shape(1)):
            raise ValueError(f"Shapes must be equal: variable {shape}, value "
                             f"{c.shape(1)}")
        shape = shape.merge_with(c.shape(1))
    else:
        shape = c.shape(1)
    return [(c.input_dtypes[0], shape)]


def _count_up_to_infer(c):
    if not c.input_dtypes[0].is_ref_dtype:
        raise TypeError("input 'ref' of CountUpTo must be a variable reference")
    if c.dtype(0) not in (dtypes.int32, dtypes.int64):
        raise TypeError(f"CountUpTo needs an int32 or int64 variable, got "
                        f"{c.dtype(0).name}")
    if c.shape(0).rank not in (None, 0):
        raise ValueError(f"CountUpTo needs a scalar variable, got shape {c.shape(0)}")
    return [(c.dtype(0), TensorShape([]))]


register_op("CountUpTo", _count_up_to_infer,
            attrs={"limit": ("int", REQUIRED), "T": ("type", None)}, num_inputs=1,
            ref_inputs=(0,), stateful=True)


def _assign_update_infer(c):
    if not c.input_dtypes[0].is_ref_dtype:
        raise TypeError(f"input 'ref' of {c.op_type} must be a variable reference")
    if c.dtype(0) is not c.dtype(1):
        raise TypeError(f"value of dtype {c.dtype(1).name} cannot update a "
                        f"variable of dtype {c.dtype(0).name}")
    out = broadcast_shapes(c.shape(0), c.shape(1))
    if out.is_fully_defined() and c.shape(0).is_fully_defined() and (
            out != c.shape(0)):
        raise ValueError(f"update of shape {c.shape(1)} does not fit variable "
                         f"{c.shape(0)}")
    return [(c.input_dtypes[0], c.shape(0))]


_ASSIGN_ATTRS = {"T": ("type", None), "use_locking": ("bool", True),
                 "validate_shape": ("bool", True)}
register_op("Assign", _assign_infer, attrs=_ASSIGN_ATTRS, num_inputs=2,
            ref_inputs=(0,), stateful=True)
for _t in ("AssignAdd", "AssignSub"):
    register_op(_t, _assign_update_infer,
                attrs={"T": ("type", None), "use_locking": ("bool", False)},
                num_inputs=2, ref_inputs=(0,), stateful=True)


def _is_init_infer(c):
    if not c.input_dtypes[0].is_ref_dtype:
        raise TypeError("IsVariableInitialized needs a variable reference")
    return [(dtypes.bool, TensorShape([]))]


register_op("IsVariableInitialized", _is_init_infer, attrs={"dtype": ("type", None)},
            num_inputs=1, ref_inputs=(0,), stateful=True)


def _scatter_infer(c):
    if not c.input_dtypes[0].is_ref_dtype:
        raise TypeError(f"{c.op_type} needs a variable reference")
    return [(c.input_dtypes[0], c.shape(0))]


for _t in ("ScatterAdd", "ScatterSub", "ScatterUpdate"):
    register_op(_t, _scatter_infer, attrs={"T": ("type", None),
                                           "Tindices": ("type", None),
                                           "use_locking": ("bool", False)},
                num_inputs=3, ref_inputs=(0,), stateful=True)


def _as_ref(ref):
    # TF accepts a Variable wherever a ref is expected.
    return ref._ref() if hasattr(ref, "_ref") else ref


def _build(op_type, ref, value, name, **attrs):
    from nbdist.framework.ops import convert_to_tensor

    ref = _as_ref(ref)
    value = convert_to_tensor(value, dtype=ref.dtype.base_dtype)
    g = ref.graph
    attrs["T"] = ref.dtype.base_dtype
    return g.create_op(op_type, [ref, value], attrs, name=name or op_type).outputs[0]


def assign(ref, value, validate_shape=None, use_locking=None, name=None):
    attrs = {}
    if validate_shape is not None:
        attrs["validate_shape"] = bool(validate_shape)
    if use_locking is not None:
        attrs["use_locking"] = bool(use_locking)
    return _build("Assign", ref, value, name, **attrs)


def assign_add(ref, value, use_locking=None, name=None):
    return _build("AssignAdd", ref, value, name)


def assign_sub(ref, value, use_locking=None, name=None):
    return _build("AssignSub", ref, value, name)


def scatter_add(ref, indices, updates, use_locking=False, name=None):
    return _scatter("ScatterAdd", ref, indices, updates, name)


def scatter_sub(ref, indices, updates, use_locking=False, name=None):
    return _scatter("ScatterSub", ref, indices, updates, name)


def scatter_update(ref, indices, updates, use_locking=True, name=None):
    return _scatter("ScatterUpdate", ref, indices, updates, name)


def _scatter(op_type, ref, indices, updates, name):
    from nbdist.framework.ops import convert_to_tensor

    ref = _as_ref(ref)
    indices = convert_to_tensor(indices)
    updates = convert_to_tensor(updates, dtype=ref.dtype.base_dtype)
    return ref.graph.create_op(
        op_type, [ref, indices, updates],
        {"T": ref.dtype.base_dtype, "Tindices": indices.dtype}, name=name or op_type
    ).outputs[0]


def count_up_to(ref, limit, name=None):
    """Increments the integer variable ``ref`` and returns its value before the
    increment; ``OutOfRangeError`` once it has reached ``limit``."""
    ref = _as_ref(ref)
    return ref.graph.create_op(
        "CountUpTo", [ref], {"limit": int(limit), "T": ref.dtype.base_dtype},
        name=name or "CountUpTo").outputs[0]


def is_variable_initialized(ref, name=None):
    if hasattr(ref, "_variable"):
        ref = ref._variable
    return ref.graph.create_op("IsVariableInitialized", [ref],
                               {"dtype": ref.dtype.base_dtype},
                               name=name or "IsVariableInitialized").outputs[0]
