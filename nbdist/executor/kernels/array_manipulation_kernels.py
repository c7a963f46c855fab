"""NumPy kernels of the array ops of ``nbdist.ops.array_ops``: reshaping,
joining and splitting, slicing and gathering, filling, tiling, padding and
selecting. Bad input raises ``InvalidArgumentError`` naming the node; every result
is a fresh array (or a NumPy scalar), never a view of an input.
"""

from __future__ import annotations

import math

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import (
    axis_of,
    fmt,
    ints,
    numpy_type,
    op_error,
    scalar_int,
)
from nbdist.executor.limits import check_output
from nbdist.ops import array_ops  # noqa: F401  (registers the ops)
from nbdist.ops.array_ops_creation import range_size
from nbdist.ops.array_ops_join import split_sizes
from nbdist.ops.array_ops_slicing import SLICE_MASKS, dense_slice_spec


# -- shapes: Reshape, Transpose, ExpandDims, Squeeze ...--------------------------------
@register_kernel("Reshape")
def reshape_kernel(node):
    def compute(step, x, shape):
        x = np.asarray(x)
        target = ints(shape)
        if np.ndim(shape) > 1:
            raise op_error(node, f"shape must be a vector, got {fmt(np.shape(shape))}")
        unknown = [i for i, d in enumerate(target) if d == -1]
        if len(unknown) > 1:
            raise op_error(
                node,
                f"only one input size may be -1, not both "
                f"{unknown[0]} and {unknown[1]}",
            )
        for i, d in enumerate(target):
            if d < -1:
                raise op_error(node, f"Size {i} must be non-negative, not {d}")
        known = math.prod(d for d in target if d != -1)
        if unknown:
            if known == 0:
                if x.size:
                    raise op_error(
                        node,
                        f"Input to reshape is a tensor with {x.size} "
                        f"values, but the requested shape has 0",
                    )
                raise op_error(
                    node,
                    "Reshape cannot infer the missing input size for "
                    "an empty tensor unless all specified input sizes are "
                    "non-zero",
                )
            if x.size % known:
                raise op_error(
                    node,
                    f"Input to reshape is a tensor with {x.size} "
                    f"values, but the requested shape requires a multiple "
                    f"of {known}",
                )
            target[unknown[0]] = x.size // known
        elif known != x.size:
            raise op_error(
                node,
                f"Input to reshape is a tensor with {x.size} values, "
                f"but the requested shape has {known}",
            )
        return np.array(x, copy=True).reshape(target)

    return compute


@register_kernel("Transpose")
def transpose_kernel(node):
    def compute(step, x, perm):
        x = np.asarray(x)
        p = ints(perm)
        if len(p) != x.ndim:
            raise op_error(
                node,
                f"transpose expects a vector of size {x.ndim}. But "
                f"input(1) is a vector of size {len(p)}",
            )
        if sorted(p) != list(range(x.ndim)):
            raise op_error(node, f"{p} is not a valid permutation")
        return np.transpose(x, p).copy()

    return compute


@register_kernel("InvertPermutation")
def invert_permutation_kernel(node):
    def compute(step, x):
        x = np.asarray(x)
        if x.ndim != 1:
            raise op_error(
                node,
                f"invert_permutation expects a 1D vector, got shape {fmt(x.shape)}",
            )
        if sorted(x.tolist()) != list(range(x.size)):
            raise op_error(
                node, f"{x.tolist()} is not a permutation of 0..{x.size - 1}"
            )
        return np.argsort(x).astype(x.dtype)

    return compute


@register_kernel("ExpandDims")
def expand_dims_kernel(node):
    def compute(step, x, dim):
        x = np.asarray(x)
        d = scalar_int(node, dim, "dim")
        if d < -x.ndim - 1 or d > x.ndim:
            raise op_error(
                node,
                f"Tried to expand dim index {d} for tensor with {x.ndim} dimensions.",
            )
        d = d % (x.ndim + 1)
        return x.reshape(x.shape[:d] + (1,) + x.shape[d:]).copy()

    return compute


@register_kernel("Squeeze")
def squeeze_kernel(node):
    dims = list(node.attrs["squeeze_dims"])

    def compute(step, x):
        x = np.asarray(x)
        if not dims:
            return np.squeeze(x).copy()
        axes = []
        for a in dims:
            k = axis_of(node, a, x.ndim, "squeeze dimension")
            if x.shape[k] != 1:
                raise op_error(
                    node,
                    f"Can not squeeze dim[{k}], expected a dimension "
                    f"of 1, got {x.shape[k]}",
                )
            axes.append(k)
        return np.squeeze(x, axis=tuple(set(axes))).copy()

    return compute


@register_kernel("Shape")
def shape_kernel(node):
    out = node.attrs["out_type"].as_numpy_dtype
    return lambda step, x: np.array(np.shape(x), dtype=out)


@register_kernel("Size")
def size_kernel(node):
    out = node.attrs["out_type"].as_numpy_dtype
    return lambda step, x: out(np.size(x))


@register_kernel("Rank")
def rank_kernel(node):
    return lambda step, x: np.int32(np.ndim(x))


# -- joining and splitting -------------------------------------------------------------
@register_kernel("ConcatV2")
def concat_kernel(node):
    def compute(step, *args):
        arrs = [np.asarray(v) for v in args[:-1]]
        r = arrs[0].ndim
        if r == 0:
            raise op_error(node, "Can't concatenate scalars (use nd.stack instead)")
        a = axis_of(
            node, scalar_int(node, args[-1], "axis"), r, "concatenating dimensions"
        )
        s0 = arrs[0].shape
        for i, v in enumerate(arrs[1:], 1):
            if v.ndim != r:
                raise op_error(
                    node,
                    f"ConcatOp : Ranks of all input tensors should "
                    f"match: shape[0] = {fmt(s0)} vs. shape[{i}] = "
                    f"{fmt(v.shape)}",
                )
            if any(p != q for k, (p, q) in enumerate(zip(s0, v.shape)) if k != a):
                raise op_error(
                    node,
                    f"ConcatOp : Dimensions of inputs should match: "
                    f"shape[0] = {fmt(s0)} vs. shape[{i}] = "
                    f"{fmt(v.shape)}",
                )
        return np.concatenate(arrs, axis=a)

    return compute


@register_kernel("Pack")
def pack_kernel(node):
    axis = node.attrs["axis"]

    def compute(step, *values):
        arrs = [np.asarray(v) for v in values]
        s0 = arrs[0].shape
        for i, v in enumerate(arrs[1:], 1):
            if v.shape != s0:
                raise op_error(
                    node,
                    f"Shapes of all inputs must match: values[0].shape"
                    f" = {fmt(s0)} != values[{i}].shape = {fmt(v.shape)}",
                )
        a = axis_of(node, axis, len(s0) + 1)
        return np.stack(arrs, axis=a)

    return compute


@register_kernel("Unpack")
def unpack_kernel(node):
    num, axis = node.attrs["num"], node.attrs["axis"]

    def compute(step, x):
        x = np.asarray(x)
        if x.ndim == 0:
            raise op_error(node, "Cannot unstack a scalar")
        a = axis_of(node, axis, x.ndim)
        if x.shape[a] != num:
            raise op_error(
                node, f"Input shape axis {a} must equal {num}, got shape {fmt(x.shape)}"
            )
        parts = [np.take(x, i, axis=a) for i in range(num)]
        return parts[0] if num == 1 else parts  # one output: the value itself

    return compute


@register_kernel("Split")
def split_kernel(node):
    n = node.attrs["num_split"]

    def compute(step, axis, x):
        x = np.asarray(x)
        if x.ndim == 0:
            raise op_error(node, "Cannot split a scalar")
        a = axis_of(node, scalar_int(node, axis, "axis"), x.ndim)
        if x.shape[a] % n:
            raise op_error(
                node,
                f"Number of ways to split should evenly divide the "
                f"split dimension, but got split_dim {a} (size = "
                f"{x.shape[a]}) and num_split {n}",
            )
        parts = [p.copy() for p in np.split(x, n, axis=a)]
        return parts[0] if n == 1 else parts

    return compute


@register_kernel("SplitV")
def split_v_kernel(node):
    n = node.attrs["num_split"]

    def compute(step, x, sizes, axis):
        x = np.asarray(x)
        if x.ndim == 0:
            raise op_error(node, "Cannot split a scalar")
        a = axis_of(node, scalar_int(node, axis, "axis"), x.ndim)
        s = ints(sizes)
        if len(s) != n:
            raise op_error(
                node, f"size_splits has {len(s)} entries but num_split is {n}"
            )
        try:
            s = split_sizes(s, x.shape[a])
        except ValueError as e:
            raise op_error(node, str(e)) from None
        cuts = np.cumsum(s)[:-1]
        parts = [p.copy() for p in np.split(x, cuts, axis=a)]
        return parts[0] if n == 1 else parts

    return compute


# -- slicing and gathering -------------------------------------------------------------
@register_kernel("Slice")
def slice_kernel(node):
    def compute(step, x, begin, size):
        x = np.asarray(x)
        b, s = ints(begin), ints(size)
        if len(b) != x.ndim or len(s) != x.ndim:
            raise op_error(
                node,
                f"Expected begin and size arguments to be 1-D tensors "
                f"of size {x.ndim}, but got shapes {fmt(np.shape(begin))} "
                f"and {fmt(np.shape(size))} instead.",
            )
        index = []
        for i, (bi, si, d) in enumerate(zip(b, s, x.shape)):
            if not 0 <= bi <= d:
                raise op_error(node, f"Expected begin[{i}] in [0, {d}], but got {bi}")
            if si == -1:
                si = d - bi
            if not 0 <= si <= d - bi:
                raise op_error(
                    node, f"Expected size[{i}] in [0, {d - bi}], but got {si}"
                )
            index.append(slice(bi, bi + si))
        return x[tuple(index)].copy()

    return compute


@register_kernel("StridedSlice")
def strided_slice_kernel(node):
    masks = {m: node.attrs[m] for m in SLICE_MASKS}
    bm, em = masks["begin_mask"], masks["end_mask"]
    ell, new, shrink = (
        masks["ellipsis_mask"],
        masks["new_axis_mask"],
        masks["shrink_axis_mask"],
    )

    def compute(step, x, begin, end, strides):
        x = np.asarray(x)
        b, e, s = ints(begin), ints(end), ints(strides)
        if not len(b) == len(e) == len(s):
            raise op_error(
                node,
                f"Expected begin, end, and strides to be 1D equal "
                f"size tensors, but got shapes {fmt(np.shape(begin))}, "
                f"{fmt(np.shape(end))}, and {fmt(np.shape(strides))} "
                "instead.",
            )
        try:
            spec = dense_slice_spec(x.ndim, len(b), masks)
        except ValueError as exc:
            raise op_error(node, str(exc)) from None
        for entry in spec:
            if entry[0] == "shrink":
                _, i, k = entry
                d = x.shape[k]
                if s[i] <= 0:
                    raise op_error(node, "only stride 1 allowed on non-range indexing.")
                if not -d <= b[i] < d:
                    raise op_error(
                        node, f"slice index {b[i]} of dimension {k} out of bounds."
                    )
        index = []
        for i in range(len(b)):
            bit = 1 << i
            if ell & bit:
                index.append(Ellipsis)
            elif new & bit:
                index.append(None)
            elif shrink & bit:
                index.append(b[i])
            else:
                if s[i] == 0:
                    raise op_error(node, f"strides[{i}] must be non-zero")
                index.append(
                    slice(None if bm & bit else b[i], None if em & bit else e[i], s[i])
                )
        out = x[tuple(index)]
        return out.copy() if isinstance(out, np.ndarray) else out

    return compute


@register_kernel("GatherV2")
def gather_kernel(node):
    def compute(step, params, indices, axis):
        p, idx = np.asarray(params), np.asarray(indices)
        if p.ndim == 0:
            raise op_error(node, "params must be at least 1 dimensional")
        a = axis_of(node, scalar_int(node, axis, "axis"), p.ndim)
        dim = p.shape[a]
        bad = (idx < 0) | (idx >= dim)
        if np.any(bad):
            pos = tuple(int(i) for i in np.argwhere(bad)[0])
            raise op_error(
                node,
                f"indices[{','.join(map(str, pos))}] = "
                f"{int(idx[pos])} is not in [0, {dim})",
            )
        return np.take(p, idx, axis=a)

    return compute


# -- creating tensors ------------------------------------------------------------------
def _check_dims(node, dims, what="dims"):
    if np.ndim(dims) != 1:
        raise op_error(
            node, f"{what} must be a vector, got shape {fmt(np.shape(dims))}"
        )
    d = ints(dims)
    if any(v < 0 for v in d):
        raise op_error(node, f"{what} must be non-negative, got {d}")
    return d


def _string_len(value) -> int:
    v = np.asarray(value)
    return len(v.reshape(-1)[0]) if v.dtype == object and v.size else 0


@register_kernel("Fill")
def fill_kernel(node):
    np_type = numpy_type(node.attrs["T"])

    def compute(step, dims, value):
        d = _check_dims(node, dims)
        if np.ndim(value) != 0:
            raise op_error(
                node, f"value must be a scalar, got shape {fmt(np.shape(value))}"
            )
        check_output(node, d, np_type, _string_len(value))
        return np.full(d, value, dtype=np_type)

    return compute


@register_kernel("ZerosLike")
def zeros_like_kernel(node):
    def compute(step, x):
        x = np.asarray(x)
        if x.dtype == object:
            return np.full(x.shape, b"", dtype=object)
        return np.zeros_like(x)

    return compute


@register_kernel("OnesLike")
def ones_like_kernel(node):
    return lambda step, x: np.ones_like(np.asarray(x))


@register_kernel("OneHot")
def one_hot_kernel(node):
    axis = node.attrs["axis"]
    np_type = numpy_type(node.attrs["T"])

    def compute(step, indices, depth, on_value, off_value):
        idx = np.asarray(indices)
        n = scalar_int(node, depth, "depth")
        if n < 0:
            raise op_error(node, f"depth must be non-negative, got: {n}")
        if axis != -1 and not 0 <= axis <= idx.ndim:
            raise op_error(
                node,
                f"Expected axis to be -1 or between [0, {idx.ndim}].  "
                f"But received: {axis}",
            )
        check_output(node, idx.shape + (n,), np_type)
        hot = idx[..., None] == np.arange(n)
        out = np.where(hot, on_value, off_value).astype(np_type)
        if axis != -1 and axis != idx.ndim:
            out = np.moveaxis(out, -1, axis).copy()
        return out

    return compute


@register_kernel("Range")
def range_kernel(node):
    np_type = np.dtype(node.attrs["Tidx"].as_numpy_dtype)
    integer = np_type.kind in "iu"

    def compute(step, start, limit, delta):
        for v, what in ((start, "start"), (limit, "limit"), (delta, "delta")):
            if np.ndim(v) != 0:
                raise op_error(
                    node, f"{what} must be a scalar, not shape {fmt(np.shape(v))}"
                )
        s, lim, d = (np.asarray(v).item() for v in (start, limit, delta))
        try:
            n = range_size(s, lim, d, integer)
        except ValueError as e:
            raise op_error(node, str(e)) from None
        check_output(node, (n,), np_type)
        if integer:
            return np.arange(s, s + n * d, d, dtype=np_type)[:n]
        return (s + np.arange(n, dtype=np.float64) * d).astype(np_type)

    return compute


@register_kernel("Tile")
def tile_kernel(node):
    def compute(step, x, multiples):
        x = np.asarray(x)
        m = _check_dims(node, multiples, "multiples")
        if len(m) != x.ndim:
            raise op_error(
                node,
                f"Expected multiples argument to be a vector of length "
                f"{x.ndim} but got length {len(m)}",
            )
        check_output(node, [a * b for a, b in zip(x.shape, m)], x.dtype)
        return np.tile(x, m) if m else x.copy()

    return compute


@register_kernel("BroadcastTo")
def broadcast_to_kernel(node):
    def compute(step, x, shape):
        d = _check_dims(node, shape, "shape")
        check_output(node, d, np.asarray(x).dtype)
        try:
            return np.broadcast_to(x, d).copy()
        except ValueError:
            raise op_error(
                node,
                f"Unable to broadcast tensor of shape "
                f"{fmt(np.shape(x))} to tensor of shape {fmt(d)}",
            ) from None

    return compute


@register_kernel("ReverseV2")
def reverse_kernel(node):
    def compute(step, x, axis):
        x = np.asarray(x)
        axes = []
        for a in ints(axis):
            k = axis_of(node, a, x.ndim)
            if k in axes:
                raise op_error(node, f"axis {k} specified more than once.")
            axes.append(k)
        return np.flip(x, axis=tuple(axes)).copy()

    return compute


def _paddings(node, x, paddings):
    p = np.asarray(paddings)
    if p.ndim != 2 or p.shape[1] != 2 or p.shape[0] != x.ndim:
        raise op_error(
            node, f"paddings must be a matrix of shape [{x.ndim},2], got {fmt(p.shape)}"
        )
    if np.any(p < 0):
        raise op_error(node, f"paddings must be non-negative: {p.tolist()}")
    pads = [(int(a), int(b)) for a, b in p]
    check_output(node, [n + a + b for n, (a, b) in zip(x.shape, pads)], x.dtype)
    return pads


@register_kernel("Pad", "PadV2")
def pad_kernel(node):
    def compute(step, x, paddings, constant_values=None):
        x = np.asarray(x)
        pads = _paddings(node, x, paddings)
        if constant_values is None:
            constant_values = b"" if x.dtype == object else 0
        elif np.ndim(constant_values) != 0:
            raise op_error(node, "constant_values must be a scalar")
        return np.pad(x, pads, mode="constant", constant_values=constant_values)

    return compute


@register_kernel("MirrorPad")
def mirror_pad_kernel(node):
    mode = node.attrs["mode"]
    mode = mode.decode() if isinstance(mode, bytes) else mode
    offset = 1 if mode == "REFLECT" else 0

    def compute(step, x, paddings):
        x = np.asarray(x)
        pads = _paddings(node, x, paddings)
        for k, (a, b) in enumerate(pads):
            limit = x.shape[k] - offset
            if a > limit or b > limit:
                raise op_error(
                    node,
                    f"paddings must be no greater than the dimension "
                    f"size{' minus 1' if offset else ''}: {a}, {b} greater "
                    f"than {limit} (dimension {k})",
                )
        return np.pad(x, pads, mode=mode.lower())

    return compute


# -- selection -------------------------------------------------------------------------
@register_kernel("Select")
def select_kernel(node):
    def compute(step, cond, x, y):
        c, x, y = np.asarray(cond), np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            raise op_error(
                node,
                f"'then' and 'else' must have the same size.  but "
                f"received: {fmt(x.shape)} vs. {fmt(y.shape)}",
            )
        if c.ndim == 0:
            return np.array(x if c else y, copy=True)
        if c.shape == x.shape:
            return np.where(c, x, y)
        if c.ndim == 1 and x.ndim > 1 and c.shape[0] == x.shape[0]:
            return np.where(c.reshape((-1,) + (1,) * (x.ndim - 1)), x, y)
        raise op_error(
            node,
            f"condition must be a scalar, a vector of size "
            f"x.shape[0] or have the shape of x: condition "
            f"{fmt(c.shape)}, x {fmt(x.shape)}",
        )

    return compute


@register_kernel("SelectV2")
def select_v2_kernel(node):
    def compute(step, cond, x, y):
        try:
            return np.asarray(np.where(cond, x, y))
        except ValueError:
            raise op_error(
                node,
                f"condition {fmt(np.shape(cond))}, then "
                f"{fmt(np.shape(x))} and else {fmt(np.shape(y))} must "
                "be broadcastable",
            ) from None

    return compute


@register_kernel("Where")
def where_kernel(node):
    return lambda step, cond: np.argwhere(np.asarray(cond)).astype(np.int64)
