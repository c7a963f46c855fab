"""The op registry: each op type's inputs, attrs and static shape function.

One ``OpDef`` per op type. ``infer`` maps an ``InferContext`` to the list of
output ``(dtype, TensorShape)``; it runs when an op is built and again when a
``GraphDef`` is imported or registered, so both paths check the same rules.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.tensor_shape import TensorShape

REQUIRED = object()

# Attr kinds, as in TF's OpDef: "type", "shape", "int", "float", "bool",
# "string", "tensor", "list(int)", "list(type)", "list(shape)", "list(string)",
# "list(float)", "func".
ATTR_KINDS = {
    "type", "shape", "int", "float", "bool", "string", "tensor", "func",
    "list(int)", "list(type)", "list(shape)", "list(string)", "list(float)",
}


@dataclass
class OpDef:
    type: str
    infer: Callable[["InferContext"], list]
    attrs: dict = field(default_factory=dict)  # name -> (kind, default|REQUIRED)
    num_inputs: int | None = None  # None: variadic (min_inputs..)
    min_inputs: int = 0
    ref_inputs: tuple = ()  # input indices that take a ref / resource, colocated
    stateful: bool = False
    is_queue_op: bool = False


_REGISTRY: dict[str, OpDef] = {}


def register_op(
    op_type: str,
    infer,
    *,
    attrs: dict | None = None,
    num_inputs: int | None = None,
    min_inputs: int = 0,
    ref_inputs: tuple = (),
    stateful: bool = False,
) -> OpDef:
    for name, (kind, _default) in (attrs or {}).items():
        if kind not in ATTR_KINDS:
            raise ValueError(f"op {op_type}: attr {name} has unknown kind {kind}")
    op_def = OpDef(op_type, infer, dict(attrs or {}), num_inputs, min_inputs,
                   tuple(ref_inputs), stateful)
    _REGISTRY[op_type] = op_def
    return op_def


_library_loaded = False
_library_lock = threading.Lock()


def get_op_def(op_type: str) -> OpDef | None:
    global _library_loaded
    op = _REGISTRY.get(op_type)
    if op is None and not _library_loaded:
        with _library_lock:
            if not _library_loaded:
                from nbdist.framework.op_library import load_all

                load_all()
                _library_loaded = True
        op = _REGISTRY.get(op_type)
    return op


def registered_ops() -> list[str]:
    return sorted(_REGISTRY)


class InferContext:
    """What a shape function sees: input dtypes, shapes, constant values, attrs."""

    __slots__ = ("op_type", "name", "input_dtypes", "input_shapes", "attrs",
                 "_constants")

    def __init__(self, op_type, name, input_dtypes, input_shapes, attrs, constants):
        self.op_type = op_type
        self.name = name
        self.input_dtypes = input_dtypes
        self.input_shapes = input_shapes
        self.attrs = attrs
        self._constants = constants

    def constant(self, i: int):
        """The value of input ``i`` when it is known statically, else None."""
        return self._constants(i) if self._constants is not None else None

    def dtype(self, i: int) -> dtypes.DType:
        return self.input_dtypes[i].base_dtype

    def shape(self, i: int) -> TensorShape:
        return self.input_shapes[i]

    def attr(self, name: str):
        return self.attrs[name]

    def check_same_dtypes(self, indices=None):
        idx = range(len(self.input_dtypes)) if indices is None else indices
        ds = [self.dtype(i) for i in idx]
        if any(d is not ds[0] for d in ds):
            names = ", ".join(d.name for d in ds)
            raise TypeError(f"inputs must have the same dtype, got {names}")
        return ds[0] if ds else None


def check_attr_value(kind: str, value) -> bool:
    """Whether ``value`` (a Python value) is of attr kind ``kind``."""
    if kind == "type":
        return isinstance(value, dtypes.DType)
    if kind == "shape":
        return isinstance(value, TensorShape)
    if kind == "int":
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (float, int, np.floating)) and not isinstance(
            value, bool)
    if kind == "bool":
        return isinstance(value, (bool, np.bool_))
    if kind == "string":
        return isinstance(value, (bytes, str))
    if kind == "tensor":
        return isinstance(value, np.ndarray)
    if kind == "func":
        return isinstance(value, (bytes, str))
    if kind.startswith("list("):
        if not isinstance(value, (list, tuple)):
            return False
        inner = kind[5:-1]
        return all(check_attr_value(inner, v) for v in value)
    return False


def fill_and_check_attrs(op_def: OpDef, attrs: dict, where: str) -> dict:
    """Validates ``attrs`` against ``op_def`` (kinds, required) and fills defaults.

    Attrs starting with ``_`` (``_class`` ...) are free-form, as in TF.
    Raises ValueError naming ``where`` (the node) and the attr.
    """
    out = dict(attrs)
    for name, (kind, default) in op_def.attrs.items():
        if name not in out:
            if default is REQUIRED:
                raise ValueError(f"{where}: missing required attr '{name}' "
                                 f"(a {kind})")
            out[name] = default
        elif not check_attr_value(kind, out[name]):
            raise ValueError(
                f"{where}: attr '{name}' must be a {kind}, got "
                f"{type(out[name]).__name__} {out[name]!r:.80}")
    for name in out:
        if name not in op_def.attrs and not name.startswith("_"):
            raise ValueError(f"{where}: unknown attr '{name}' for op "
                             f"'{op_def.type}'")
    return out


# Shape function helpers -----------------------------------------------------

def unchanged(ctx: InferContext):
    """One output with the first input's dtype and shape."""
    return [(ctx.dtype(0), ctx.shape(0))]


def broadcasting_binary(ctx: InferContext, out_dtype=None):
    from nbdist.framework.tensor_shape import broadcast_shapes

    d = ctx.check_same_dtypes([0, 1])
    return [(out_dtype or d, broadcast_shapes(ctx.shape(0), ctx.shape(1)))]


def shape_from_constant(value) -> TensorShape:
    """A static shape from a constant shape vector (or None: unknown rank)."""
    if value is None:
        return TensorShape(None)
    return TensorShape([None if int(v) < 0 else int(v) for v in np.ravel(value)])
