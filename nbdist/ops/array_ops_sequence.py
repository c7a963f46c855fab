"""Sequences, grids and index arithmetic: ``ReverseSequence``, ``Roll``,
``LinSpace``, ``BroadcastArgs`` (``broadcast_dynamic_shape``), ``UnravelIndex``
and ``EditDistance`` as ops, and ``sequence_mask``, ``meshgrid``, ``repeat``,
``random_crop`` and ``broadcast_static_shape`` built from other ops.

The kernels are in ``nbdist/executor/kernels/sequence_kernels.py``.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.sequence_mask([1, 3], 4)).astype(int).tolist()
[[1, 0, 0, 0], [1, 1, 1, 0]]
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable, register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import (
    FLOAT,
    INDEX,
    check_scalar_input,
    check_type,
    const_ints,
    is_tensor_like,
    op_scope,
    vector_len,
)
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.sparse_tensor import SparseTensor
from nbdist.framework.tensor_shape import TensorShape, as_shape
from nbdist.ops import array_ops as A
from nbdist.ops.array_ops_join import pack_if_needed
from nbdist.ops.array_ops_partition import _dims_must_match
from nbdist.ops.math_ops_elementwise import cast, less, negative
from nbdist.ops.math_ops_reduction import reduce_max, reduce_sum

__all__ = [
    "broadcast_dynamic_shape",
    "broadcast_static_shape",
    "edit_distance",
    "lin_space",
    "linspace",
    "meshgrid",
    "random_crop",
    "repeat",
    "reverse_sequence",
    "roll",
    "sequence_mask",
    "unravel_index",
]


# -- ReverseSequence -------------------------------------------------------------------
def _reverse_sequence_infer(c):
    check_type(c, 1, INDEX, "seq_lengths")
    x = c.shape(0)
    n = vector_len(c, 1, "seq_lengths")
    seq, batch = c.attr("seq_dim"), c.attr("batch_dim")
    if seq == batch:
        raise ValueError(f"seq_dim and batch_dim must differ, both are {seq}")
    if x.rank is not None:
        for what, d in (("seq_dim", seq), ("batch_dim", batch)):
            if not 0 <= d < x.rank:
                raise ValueError(f"{what} must be < input rank: {d} vs. {x.rank}")
        _dims_must_match(c, TensorShape([x[batch]]), TensorShape([n]))
    return [(c.dtype(0), x)]


register_op("ReverseSequence", _reverse_sequence_infer,
            attrs={"T": ("type", None), "Tlen": ("type", dtypes.int64),
                   "seq_dim": ("int", None), "batch_dim": ("int", 0)},
            num_inputs=2)


def _axis_or_dim(axis, dim, what):
    if axis is not None and dim is not None and axis != dim:
        raise ValueError(f"Cannot specify both '{what}_axis' and '{what}_dim'")
    return axis if axis is not None else dim


def reverse_sequence(input, seq_lengths, seq_axis=None, batch_axis=None,
                     name=None, seq_dim=None, batch_dim=None):
    """Reverses the first ``seq_lengths[b]`` elements along ``seq_axis`` of each
    batch entry ``b`` (along ``batch_axis``), leaving the rest in place.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.reverse_sequence([[1, 2, 3], [4, 5, 6]], [2, 3], 1, 0)).tolist()
    [[2, 1, 3], [6, 5, 4]]
    """
    seq = _axis_or_dim(seq_axis, seq_dim, "seq")
    batch = _axis_or_dim(batch_axis, batch_dim, "batch") or 0
    if seq is None:
        raise ValueError("reverse_sequence needs seq_axis")
    with op_scope(name, "ReverseSequence", [input, seq_lengths]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        lens = convert_to_tensor(seq_lengths, name="seq_lengths")
        return g.create_op("ReverseSequence", [x, lens],
                           {"T": x.dtype.base_dtype,
                            "Tlen": lens.dtype.base_dtype, "seq_dim": int(seq),
                            "batch_dim": int(batch)}, name=scope).outputs[0]


@register_gradient("ReverseSequence")
def _reverse_sequence_grad(op, grad):
    lens = op.inputs[1]
    return [reverse_sequence(grad, lens, op.get_attr("seq_dim"),
                             op.get_attr("batch_dim")), None]


# -- Roll -----------------------------------------------------------------------------------
def _roll_infer(c):
    check_type(c, 1, INDEX, "shift")
    check_type(c, 2, INDEX, "axis")
    s, a = c.shape(1), c.shape(2)
    if s.rank is not None and a.rank is not None and s.rank != a.rank:
        raise ValueError(f"shift and axis must have the same size, got shapes {s} "
                         f"and {a}")
    if s.rank not in (None, 0, 1):
        raise ValueError(f"shift must be a scalar or a 1-D vector, got shape {s}")
    return [(c.dtype(0), c.shape(0))]


register_op("Roll", _roll_infer, attrs={"T": ("type", None),
                                        "Tshift": ("type", dtypes.int32),
                                        "Taxis": ("type", dtypes.int32)},
            num_inputs=3)


def roll(input, shift, axis, name=None):
    """``input`` with its elements shifted by ``shift`` along ``axis`` (both may
    be lists), wrapping around.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.roll([1, 2, 3, 4], 1, 0)).tolist()
    [4, 1, 2, 3]
    """
    with op_scope(name, "Roll", [input]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        sh = pack_if_needed(shift, name="shift")
        ax = pack_if_needed(axis, name="axis")
        return g.create_op("Roll", [x, sh, ax],
                           {"T": x.dtype.base_dtype, "Tshift": sh.dtype.base_dtype,
                            "Taxis": ax.dtype.base_dtype}, name=scope).outputs[0]


@register_gradient("Roll")
def _roll_grad(op, grad):
    return [roll(grad, negative(op.inputs[1]), op.inputs[2]), None, None]


# -- LinSpace --------------------------------------------------------------------------------
def _linspace_infer(c):
    d = check_type(c, 0, FLOAT, "start")
    if c.dtype(1) is not d:
        raise TypeError(f"LinSpace: stop ({c.dtype(1).name}) must be {d.name} as "
                        "start")
    check_type(c, 2, INDEX, "num")
    for i, what in enumerate(("start", "stop", "num")):
        check_scalar_input(c, i, what)
    num = const_ints(c, 2)
    if num is not None and num[0] <= 0:
        raise ValueError(f"Requires num > 0: {num[0]}")
    return [(d, TensorShape([None if num is None else num[0]]))]


register_op("LinSpace", _linspace_infer,
            attrs={"T": ("type", None), "Tidx": ("type", dtypes.int32)},
            num_inputs=3)


def lin_space(start, stop, num, name=None):
    """``num`` evenly spaced values from ``start`` to ``stop``, both included.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.lin_space(0.0, 1.0, 5)).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    with op_scope(name, "LinSpace", [start, stop, num]) as (g, scope):
        a = convert_to_tensor(start, name="start")
        b = convert_to_tensor(stop, dtype=a.dtype.base_dtype, name="stop")
        n = convert_to_tensor(num, name="num")
        return g.create_op("LinSpace", [a, b, n],
                           {"T": a.dtype.base_dtype, "Tidx": n.dtype.base_dtype},
                           name=scope).outputs[0]


linspace = lin_space


@register_gradient("LinSpace")
def _linspace_grad(op, grad):
    # out[i] = start + i / (num - 1) * (stop - start)
    n = cast(op.inputs[2], grad.dtype.base_dtype)
    steps = A.range(0.0, n, dtype=grad.dtype.base_dtype)
    frac = steps / A.where(n > 1, n - 1, A.ones_like(n))
    to_stop = reduce_sum(grad * frac)
    return [reduce_sum(grad) - to_stop, to_stop, None]


# -- BroadcastArgs, UnravelIndex ---------------------------------------------------------
def _broadcast_args_infer(c):
    d = check_type(c, 0, INDEX, "s0")
    a, b = vector_len(c, 0, "s0"), vector_len(c, 1, "s1")
    n = None if a is None or b is None else max(a, b)
    return [(d, TensorShape([n]))]


register_op("BroadcastArgs", _broadcast_args_infer, attrs={"T": ("type", None)},
            num_inputs=2)
NotDifferentiable("BroadcastArgs")


def broadcast_static_shape(shape_x, shape_y):
    """The ``TensorShape`` both static shapes broadcast to (ValueError when they
    do not broadcast)."""
    from nbdist.framework.tensor_shape import broadcast_shapes

    x, y = as_shape(shape_x), as_shape(shape_y)
    try:
        return broadcast_shapes(x, y)
    except ValueError:
        raise ValueError(
            "Incompatible shapes for broadcasting. Two shapes are compatible if "
            "for each dimension pair they are either equal or one of them is 1. "
            f"Received: {x} and {y}.") from None


def broadcast_dynamic_shape(shape_x, shape_y):
    """The shape (an int vector) both shape vectors broadcast to, at run time.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.broadcast_dynamic_shape([2, 1], [3])).tolist()
    [2, 3]
    """
    with op_scope(None, "BroadcastArgs", [shape_x, shape_y]) as (g, scope):
        x = convert_to_tensor(shape_x, name="s0")
        y = convert_to_tensor(shape_y, dtype=x.dtype.base_dtype, name="s1")
        return g.create_op("BroadcastArgs", [x, y], {"T": x.dtype.base_dtype},
                           name=scope).outputs[0]


def _unravel_infer(c):
    d = check_type(c, 0, INDEX, "indices")
    if c.dtype(1) is not d:
        raise TypeError(f"UnravelIndex: dims ({c.dtype(1).name}) must be {d.name}")
    n = vector_len(c, 1, "dims")
    idx = c.shape(0)
    if idx.rank is None:
        return [(d, TensorShape(None))]
    if idx.rank > 1:
        raise ValueError(f"indices must be a scalar or a vector, got shape {idx}")
    return [(d, TensorShape([n]).concatenate(idx))]


register_op("UnravelIndex", _unravel_infer, attrs={"Tidx": ("type", dtypes.int32)},
            num_inputs=2)
NotDifferentiable("UnravelIndex")


def unravel_index(indices, dims, name=None):
    """The coordinates in an array of shape ``dims`` of the flat ``indices``: a
    ``[len(dims)] + indices.shape`` tensor."""
    with op_scope(name, "UnravelIndex", [indices, dims]) as (g, scope):
        i = convert_to_tensor(indices, name="indices")
        d = convert_to_tensor(dims, dtype=i.dtype.base_dtype, name="dims")
        return g.create_op("UnravelIndex", [i, d], {"Tidx": i.dtype.base_dtype},
                           name=scope).outputs[0]


# -- EditDistance -------------------------------------------------------------------------
def _edit_distance_infer(c):
    if c.dtype(1) is not c.dtype(4):
        raise TypeError(f"edit_distance: hypothesis ({c.dtype(1).name}) and truth "
                        f"({c.dtype(4).name}) must have one dtype")
    shapes = [c.constant(2), c.constant(5)]
    if any(s is None for s in shapes):
        n = vector_len(c, 2, "hypothesis_shape")
        return [(dtypes.float32, TensorShape(None if n is None else [None] * (n - 1)))]
    h, t = (np.ravel(s).astype(int) for s in shapes)
    if h.size != t.size:
        raise ValueError(f"hypothesis and truth must have one rank, got {h.size} and "
                         f"{t.size}")
    return [(dtypes.float32, TensorShape(np.maximum(h, t)[:-1].tolist()))]


register_op("EditDistance", _edit_distance_infer,
            attrs={"T": ("type", None), "normalize": ("bool", True)}, num_inputs=6)
NotDifferentiable("EditDistance")


def edit_distance(hypothesis, truth, normalize=True, name="edit_distance"):
    """The Levenshtein distance between the sequences of two ``SparseTensor`` s
    (the last dimension holds a sequence), divided by the truth's length when
    ``normalize``; a ``float32`` tensor of the other dimensions.

    >>> import nbdist as nd
    >>> h = nd.SparseTensor([[0, 0], [0, 1]], ["a", "b"], [1, 2])
    >>> t = nd.SparseTensor([[0, 0]], ["a"], [1, 1])
    >>> with nd.Session() as s:
    ...     s.run(nd.edit_distance(h, t)).tolist()
    [1.0]
    """
    for what, sp in (("hypothesis", hypothesis), ("truth", truth)):
        if not isinstance(sp, SparseTensor):
            raise TypeError(f"{what} must be a SparseTensor.")
    with op_scope(name, "EditDistance", [hypothesis.values, truth.values]) as (
            g, scope):
        return g.create_op(
            "EditDistance",
            [hypothesis.indices, hypothesis.values, hypothesis.dense_shape,
             truth.indices, truth.values, truth.dense_shape],
            {"T": hypothesis.dtype.base_dtype, "normalize": bool(normalize)},
            name=scope).outputs[0]


# -- built from other ops ---------------------------------------------------------------------
def sequence_mask(lengths, maxlen=None, dtype=dtypes.bool, name=None):
    """``mask[i..., j] = j < lengths[i...]`` for ``j < maxlen`` (the largest
    length when None), as ``dtype``."""
    with op_scope(name, "SequenceMask", [lengths, maxlen]):
        lens = convert_to_tensor(lengths, name="lengths")
        if maxlen is None:
            maxlen = reduce_max(lens)
        m = convert_to_tensor(maxlen, dtype=None if is_tensor_like(maxlen) else
                              lens.dtype.base_dtype, name="maxlen")
        if m.shape.rank not in (None, 0):
            raise ValueError(f"maxlen must be scalar for sequence_mask, got shape "
                             f"{m.shape}")
        positions = A.range(cast(m, lens.dtype.base_dtype))
        mask = less(positions, A.expand_dims(lens, -1))
        dtype = dtypes.as_dtype(dtype)
        return mask if dtype is dtypes.bool else cast(mask, dtype)


def meshgrid(*args, **kwargs):
    """Coordinate grids of the 1-D ``args``: N tensors of one N-d shape, output
    ``i`` varying along ``args[i]``'s axis (``indexing="xy"``, the default, swaps
    the first two axes, as NumPy's ``meshgrid``).

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     [m.tolist() for m in s.run(nd.meshgrid([1, 2, 3], [4, 5]))]
    [[[1, 2, 3], [1, 2, 3]], [[4, 4, 4], [5, 5, 5]]]
    """
    indexing = kwargs.pop("indexing", "xy")
    name = kwargs.pop("name", "meshgrid")
    if kwargs:
        raise TypeError(f"Unsupported keyword arguments: {sorted(kwargs)}")
    if indexing not in ("xy", "ij"):
        raise ValueError("indexing parameter must be either 'xy' or 'ij'")
    with op_scope(name, "meshgrid", list(args)):
        xs = [A.reshape(convert_to_tensor(x), [-1]) for x in args]
        n = len(xs)
        axes = list(range(n))
        if indexing == "xy" and n > 1:
            axes[0], axes[1] = 1, 0
        sizes = [None] * n
        for x, ax in zip(xs, axes):
            sizes[ax] = A.size(x)
        full = A.stack(sizes) if n else []
        return [A.broadcast_to(A.reshape(x, [1] * ax + [-1] + [1] * (n - ax - 1)),
                               full) for x, ax in zip(xs, axes)]


def repeat(input, repeats, axis=None, name=None):
    """Each slice of ``input`` along ``axis`` repeated ``repeats`` times (a
    scalar, or one count per slice); with no axis, of the flattened input.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.repeat([[1, 2], [3, 4]], [1, 2], axis=0)).tolist()
    [[1, 2], [3, 4], [3, 4]]
    """
    with op_scope(name, "Repeat", [input, repeats]):
        x = convert_to_tensor(input, name="input")
        if axis is None:
            x, axis = A.reshape(x, [-1]), 0
        n = A.shape(x)[axis]
        reps = convert_to_tensor(repeats, dtype=dtypes.int32, name="repeats")
        reps = A.broadcast_to(A.reshape(reps, [-1]), A.reshape(n, [1]))
        # Slice k appears reps[k] times: row k of the mask has reps[k] ones.
        mask = sequence_mask(reps, reduce_max(reps))
        rows = A.broadcast_to(A.expand_dims(A.range(n), 1), A.shape(mask))
        return A.gather(x, A.boolean_mask(rows, mask), axis=axis)


def random_crop(value, size, seed=None, name=None):
    """A random slice of ``value`` of shape ``size`` (each offset uniform over
    the positions where the slice fits)."""
    from nbdist.ops.check_ops import Assert
    from nbdist.ops.control_flow_ops import with_dependencies
    from nbdist.ops.math_ops_elementwise import floormod, logical_and
    from nbdist.ops.math_ops_reduction import reduce_all
    from nbdist.ops.random_ops import random_uniform

    with op_scope(name, "random_crop", [value, size]) as (_g, scope):
        v = convert_to_tensor(value, name="value")
        sz = convert_to_tensor(size, dtype=dtypes.int32, name="size")
        shape = A.shape(v)
        fits = reduce_all(logical_and(shape >= sz, sz >= 0))
        check = Assert(fits, ["Need value.shape >= size, got ", shape, sz],
                       summarize=1000)
        shape = with_dependencies([check], shape)
        limit = shape - sz + 1
        offset = floormod(random_uniform(A.shape(shape), dtype=dtypes.int32,
                                         maxval=dtypes.int32.max, seed=seed),
                          limit)
        out = A.slice(v, offset, sz, name=scope)
        if not is_tensor_like(size):
            out.set_shape(np.ravel(size).astype(int).tolist())
        return out
