"""Array ops, all found here: reshape, transpose, concat/stack/split, slicing,
gather, shape ops, fill/zeros/ones, one_hot, tile, range, where, pad (defined in
``array_ops_join``, ``array_ops_shape``, ``array_ops_creation``,
``array_ops_transform`` and ``array_ops_slicing``), and ``boolean_mask``, built
from them and ``reduce_prod``.

Arguments that are shapes, axes or indices may be Python lists mixing ints and
scalar tensors (``nd.reshape(x, [nd.shape(x)[0], -1])``); they are stacked.
"""

from __future__ import annotations

from nbdist.ops.array_ops_creation import (
    broadcast_to,
    fill,
    one_hot,
    ones,
    ones_like,
    range,
    zeros,
    zeros_like,
)
from nbdist.ops.array_ops_join import (
    concat,
    split,
    stack,
    unstack,
)
from nbdist.ops.array_ops_shape import (
    expand_dims,
    rank,
    reshape,
    set_partial_shape,
    shape,
    size,
    squeeze,
)
from nbdist.ops.array_ops_slicing import (
    gather,
    slice,
    strided_slice,
    where,
    where_v2,
)
from nbdist.ops.array_ops_transform import (
    invert_permutation,
    pad,
    reverse,
    reverse_v2,
    tile,
    transpose,
)
from nbdist.ops.math_ops import reduce_prod
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor


def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    """The elements (or slices) of ``tensor`` where the boolean ``mask`` is true."""
    with op_scope(name, "boolean_mask", [tensor, mask]) as (_g, scope):
        x = convert_to_tensor(tensor, name="tensor")
        m = convert_to_tensor(mask, name="mask")
        k = m.shape.rank
        if k is None:
            raise ValueError(
                "Number of mask dimensions must be specified, even if "
                "some dimensions are None."
            )
        if k == 0:
            raise ValueError("mask cannot be scalar.")
        axis = 0 if axis is None else int(axis)
        xs = x.shape
        if xs.rank is not None:
            xs[axis : axis + k].assert_is_compatible_with(m.shape)
        sx = shape(x)
        leading = reduce_prod(sx[axis : axis + k], [0])
        flat = reshape(x, concat([sx[:axis], [leading], sx[axis + k :]], 0))
        idx = squeeze(where(reshape(m, [-1])), axis=[1])
        out = gather(flat, idx, axis=axis, name=scope)
        if xs.rank is not None:
            set_partial_shape(
                out, xs[:axis].concatenate([None]).concatenate(xs[axis + k :])
            )
        return out


newaxis = None  # ``t[:, nd.newaxis]``

__all__ = [
    "boolean_mask",
    "broadcast_to",
    "concat",
    "expand_dims",
    "fill",
    "gather",
    "invert_permutation",
    "newaxis",
    "one_hot",
    "ones",
    "ones_like",
    "pad",
    "range",
    "rank",
    "reshape",
    "reverse",
    "reverse_v2",
    "shape",
    "size",
    "slice",
    "split",
    "squeeze",
    "stack",
    "strided_slice",
    "tile",
    "transpose",
    "unstack",
    "where",
    "where_v2",
    "zeros",
    "zeros_like",
]
