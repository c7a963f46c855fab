"""Ops that move, repeat or pad elements: ``Transpose``, ``InvertPermutation``,
``Tile``, ``ReverseV2`` and ``Pad``/``PadV2``/``MirrorPad``.
"""

from __future__ import annotations

import builtins

import numpy as np

from nbdist.framework import dtypes
from nbdist.ops.array_ops_creation import range as _range
from nbdist.ops.array_ops_join import pack_if_needed
from nbdist.ops.array_ops_shape import rank
from nbdist.ops.math_ops_elementwise import subtract
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.op_util import (
    INDEX,
    check_axis,
    check_type,
    const_ints,
    is_tensor_like,
    op_scope,
    vector_len,
)
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape


# -- Transpose, InvertPermutation ------------------------------------------------------
def _transpose_infer(c):
    check_type(c, 1, INDEX, "perm")
    shape = c.shape(0)
    n = vector_len(c, 1, "perm")
    perm = const_ints(c, 1)
    if shape.rank is not None and n is not None and n != shape.rank:
        raise ValueError(
            f"Dimension must be {shape.rank} but is {n} (perm of a rank "
            f"{shape.rank} tensor)"
        )
    if perm is None:
        rank = shape.rank if shape.rank is not None else n
        return [(c.dtype(0), TensorShape(None if rank is None else [None] * rank))]
    if sorted(perm) != list(builtins.range(len(perm))):
        raise ValueError(f"{perm} is not a valid permutation")
    if shape.rank is None:
        return [(c.dtype(0), TensorShape([None] * len(perm)))]
    return [(c.dtype(0), TensorShape([shape[p] for p in perm]))]


register_op(
    "Transpose",
    _transpose_infer,
    attrs={"T": ("type", None), "Tperm": ("type", dtypes.int32)},
    num_inputs=2,
)


def _invert_permutation_infer(c):
    d = check_type(c, 0, INDEX)
    vector_len(c, 0, "x")
    return [(d, c.shape(0))]


register_op(
    "InvertPermutation",
    _invert_permutation_infer,
    attrs={"T": ("type", dtypes.int32)},
    num_inputs=1,
)


# -- Tile, ReverseV2, Pad -------------------------------------------------------------
def _tile_infer(c):
    check_type(c, 1, INDEX, "multiples")
    shape = c.shape(0)
    n = vector_len(c, 1, "multiples")
    if shape.rank is not None and n is not None and n != shape.rank:
        raise ValueError(
            f"Expected multiples argument to be a vector of length "
            f"{shape.rank} but got length {n}"
        )
    rank = shape.rank if shape.rank is not None else n
    if rank is None:
        return [(c.dtype(0), TensorShape(None))]
    mult = const_ints(c, 1)
    dims = shape.dims if shape.rank is not None else [None] * rank
    if mult is None:
        return [(c.dtype(0), TensorShape([None] * rank))]
    if any(m < 0 for m in mult):
        raise ValueError(f"Expected multiples to be non-negative, got {mult}")
    return [
        (
            c.dtype(0),
            TensorShape([None if d is None else d * m for d, m in zip(dims, mult)]),
        )
    ]


register_op(
    "Tile",
    _tile_infer,
    attrs={"T": ("type", None), "Tmultiples": ("type", dtypes.int32)},
    num_inputs=2,
)


def _reverse_infer(c):
    check_type(c, 1, INDEX, "axis")
    vector_len(c, 1, "axis")
    axes, shape = const_ints(c, 1), c.shape(0)
    if axes is not None and shape.rank is not None:
        seen = set()
        for a in axes:
            k = check_axis(a, shape.rank)
            if k in seen:
                raise ValueError(f"axis {a} specified more than once")
            seen.add(k)
    return [(c.dtype(0), shape)]


register_op(
    "ReverseV2",
    _reverse_infer,
    attrs={"T": ("type", None), "Tidx": ("type", dtypes.int32)},
    num_inputs=2,
)


def _pad_infer(c):
    check_type(c, 1, INDEX, "paddings")
    if c.op_type == "PadV2":
        c.check_same_dtypes([0, 2])
        if c.shape(2).rank not in (None, 0):
            raise ValueError(f"constant_values must be a scalar, got {c.shape(2)}")
    if c.op_type == "MirrorPad" and c.attr("mode") not in ("REFLECT", "SYMMETRIC"):
        raise ValueError(f"mode must be REFLECT or SYMMETRIC, got {c.attr('mode')!r}")
    shape, ps = c.shape(0), c.shape(1)
    if ps.rank is not None and (ps.rank != 2 or ps[1] not in (None, 2)):
        raise ValueError(f"paddings must be a matrix with 2 columns, got {ps}")
    rows = ps[0] if ps.rank is not None else None
    if shape.rank is not None and rows is not None and rows != shape.rank:
        raise ValueError(
            f"The first dimension of paddings must be the rank of "
            f"inputs ({shape.rank}), got {rows}"
        )
    rank = shape.rank if shape.rank is not None else rows
    if rank is None:
        return [(c.dtype(0), TensorShape(None))]
    pads = const_ints(c, 1)
    dims = shape.dims if shape.rank is not None else [None] * rank
    if pads is None:
        return [(c.dtype(0), TensorShape([None] * rank))]
    if any(p < 0 for p in pads):
        raise ValueError(f"paddings must be non-negative, got {pads}")
    return [
        (
            c.dtype(0),
            TensorShape(
                [
                    None if d is None else d + pads[2 * i] + pads[2 * i + 1]
                    for i, d in enumerate(dims)
                ]
            ),
        )
    ]


register_op(
    "Pad",
    _pad_infer,
    attrs={"T": ("type", None), "Tpaddings": ("type", dtypes.int32)},
    num_inputs=2,
)
register_op(
    "PadV2",
    _pad_infer,
    attrs={"T": ("type", None), "Tpaddings": ("type", dtypes.int32)},
    num_inputs=3,
)
register_op(
    "MirrorPad",
    _pad_infer,
    attrs={
        "T": ("type", None),
        "Tpaddings": ("type", dtypes.int32),
        "mode": ("string", REQUIRED),
    },
    num_inputs=2,
)


# -- wrappers --------------------------------------------------------------------------
def transpose(a, perm=None, name="transpose", conjugate=False):
    """Permutes the dimensions; ``perm`` defaults to reversing them."""
    with op_scope(name, "transpose", [a]) as (g, scope):
        x = convert_to_tensor(a, name="a")
        if perm is None:
            r = x.shape.rank
            if r is not None:
                perm = convert_to_tensor(
                    np.arange(r - 1, -1, -1, dtype=np.int32), name="perm"
                )
            else:
                rk = rank(x)
                perm = subtract(subtract(rk, 1), _range(0, rk, 1))
        else:
            perm = pack_if_needed(perm, name="perm")
        if conjugate and x.dtype.is_complex:
            # TF's ConjugateTranspose: the conjugates, transposed.
            x = g.create_op("Conj", [x], {"T": x.dtype.base_dtype},
                            name="conj").outputs[0]
        return g.create_op(
            "Transpose",
            [x, perm],
            {"T": x.dtype.base_dtype, "Tperm": perm.dtype.base_dtype},
            name=scope,
        ).outputs[0]


def invert_permutation(x, name=None):
    with op_scope(name, "InvertPermutation", [x]) as (g, scope):
        x = convert_to_tensor(x, name="x")
        return g.create_op(
            "InvertPermutation", [x], {"T": x.dtype.base_dtype}, name=scope
        ).outputs[0]


def tile(input, multiples, name=None):  # noqa: A002
    """Repeats ``input`` ``multiples[i]`` times along dimension i."""
    with op_scope(name, "Tile", [input]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        m = pack_if_needed(multiples, name="multiples")
        return g.create_op(
            "Tile",
            [x, m],
            {"T": x.dtype.base_dtype, "Tmultiples": m.dtype.base_dtype},
            name=scope,
        ).outputs[0]


def reverse(tensor, axis, name=None):
    """``tensor`` with the dimensions in ``axis`` reversed."""
    with op_scope(name, "ReverseV2", [tensor]) as (g, scope):
        x = convert_to_tensor(tensor, name="tensor")
        a = pack_if_needed(axis, name="axis")
        return g.create_op(
            "ReverseV2",
            [x, a],
            {"T": x.dtype.base_dtype, "Tidx": a.dtype.base_dtype},
            name=scope,
        ).outputs[0]


reverse_v2 = reverse


def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
    """Pads with ``paddings[i] = [before, after]`` per dimension; ``mode`` is
    CONSTANT, REFLECT or SYMMETRIC (as ``np.pad``'s reflect/symmetric)."""
    mode = mode.upper()
    with op_scope(name, "Pad", [tensor]) as (g, scope):
        x = convert_to_tensor(tensor, name="tensor")
        p = pack_if_needed(paddings, name="paddings")
        attrs = {"T": x.dtype.base_dtype, "Tpaddings": p.dtype.base_dtype}
        if mode == "CONSTANT":
            if not is_tensor_like(constant_values) and np.all(
                np.asarray(constant_values) == 0
            ):
                return g.create_op("Pad", [x, p], attrs, name=scope).outputs[0]
            cv = convert_to_tensor(
                constant_values, dtype=x.dtype.base_dtype, name="constant_values"
            )
            return g.create_op("PadV2", [x, p, cv], attrs, name=scope).outputs[0]
        if mode not in ("REFLECT", "SYMMETRIC"):
            raise ValueError(f"Unknown padding mode: {mode}")
        attrs["mode"] = mode
        return g.create_op("MirrorPad", [x, p], attrs, name=scope).outputs[0]
