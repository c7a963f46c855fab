"""Ops that trade spatial positions for batch entries or channels:
``SpaceToBatchND``/``BatchToSpaceND`` (and TF1's 4-D ``space_to_batch`` /
``batch_to_space``), ``SpaceToDepth``/``DepthToSpace`` (NHWC), and
``ExtractImagePatches``/``ExtractVolumePatches``. Each gradient is the inverse op (for patches, a sum of
the patch gradients back onto the pixels they were read from).

The kernels are in ``nbdist/executor/kernels/space_kernels.py``.

>>> import numpy as np
>>> import nbdist as nd
>>> x = np.arange(4).reshape(1, 2, 2, 1)
>>> with nd.Session() as s:
...     s.run(nd.space_to_depth(x, 2)).tolist()
[[[[0, 1, 2, 3]]]]
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import INDEX, check_type, const_ints, op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops as A
from nbdist.ops.array_ops_join import pack_if_needed

__all__ = [
    "batch_to_space",
    "batch_to_space_nd",
    "depth_to_space",
    "extract_image_patches",
    "extract_volume_patches",
    "required_space_to_batch_paddings",
    "space_to_batch",
    "space_to_batch_nd",
    "space_to_depth",
]


# -- SpaceToBatchND, BatchToSpaceND ------------------------------------------------------
def _block_infer(c, to_batch: bool):
    check_type(c, 1, INDEX, "block_shape")
    check_type(c, 2, INDEX, "paddings" if to_batch else "crops")
    x = c.shape(0)
    block = const_ints(c, 1)
    pads = const_ints(c, 2)
    if x.rank is None or block is None or pads is None:
        return [(c.dtype(0), TensorShape(None if x.rank is None else
                                         [None] * x.rank))]
    m = len(block)
    if x.rank < m + 1:
        raise ValueError(f"input rank should be >= {m + 1} instead of {x.rank}")
    if any(b < 1 for b in block):
        raise ValueError(f"block_shape must be positive, got {block}")
    if len(pads) != 2 * m or any(p < 0 for p in pads):
        raise ValueError(f"{'paddings' if to_batch else 'crops'} must be a "
                         f"non-negative [{m}, 2] matrix, got {pads}")
    dims = x.as_list()
    prod = int(np.prod(block))
    if to_batch:
        batch = None if dims[0] is None else dims[0] * prod
        space = []
        for i, b in enumerate(block):
            d = dims[1 + i]
            if d is None:
                space.append(None)
                continue
            padded = d + pads[2 * i] + pads[2 * i + 1]
            if padded % b:
                raise ValueError(f"padded_shape[{i}]={padded} is not divisible by "
                                 f"block_shape[{i}]={b}")
            space.append(padded // b)
    else:
        if dims[0] is not None and dims[0] % prod:
            raise ValueError(f"Input batch dimension ({dims[0]}) is not divisible by "
                             f"product of block sizes ({prod})")
        batch = None if dims[0] is None else dims[0] // prod
        space = []
        for i, b in enumerate(block):
            d = dims[1 + i]
            size = None if d is None else d * b - pads[2 * i] - pads[2 * i + 1]
            if size is not None and size < 0:
                raise ValueError(f"cropped_shape[{i}]={size} must be non-negative")
            space.append(size)
    return [(c.dtype(0), TensorShape([batch] + space + dims[1 + m:]))]


_BLOCK_ATTRS = {"T": ("type", None), "Tblock_shape": ("type", dtypes.int32),
                "Tpaddings": ("type", dtypes.int32)}
register_op("SpaceToBatchND", lambda c: _block_infer(c, True), attrs=_BLOCK_ATTRS,
            num_inputs=3)
register_op("BatchToSpaceND", lambda c: _block_infer(c, False),
            attrs={"T": ("type", None), "Tblock_shape": ("type", dtypes.int32),
                   "Tcrops": ("type", dtypes.int32)}, num_inputs=3)


def _block_op(op_type, input, block_shape, amounts, name, what):
    with op_scope(name, op_type, [input, block_shape, amounts]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        b = pack_if_needed(block_shape, name="block_shape")
        p = pack_if_needed(amounts, name=what)
        attrs = {"T": x.dtype.base_dtype, "Tblock_shape": b.dtype.base_dtype,
                 ("Tpaddings" if what == "paddings" else "Tcrops"):
                     p.dtype.base_dtype}
        return g.create_op(op_type, [x, b, p], attrs, name=scope).outputs[0]


def space_to_batch_nd(input, block_shape, paddings, name=None):
    """Zero-pads the M spatial dimensions after the batch one by ``paddings``,
    splits each into blocks of ``block_shape`` and moves the block offsets into
    the batch dimension (offsets major, batch minor)."""
    return _block_op("SpaceToBatchND", input, block_shape, paddings, name,
                     "paddings")


def batch_to_space_nd(input, block_shape, crops, name=None):
    """The inverse of :func:`space_to_batch_nd`, then ``crops`` removed from the
    start and end of each spatial dimension.

    >>> import numpy as np
    >>> import nbdist as nd
    >>> x = np.arange(4).reshape(4, 1, 1, 1)
    >>> with nd.Session() as s:
    ...     s.run(nd.batch_to_space_nd(x, [2, 2], [[0, 0], [0, 0]]))[0, :, :, 0].tolist()
    [[0, 1], [2, 3]]
    """
    return _block_op("BatchToSpaceND", input, block_shape, crops, name, "crops")


def space_to_batch(input, paddings, block_size=None, name=None,
                   block_shape=None):
    """TF1's 4-D form: :func:`space_to_batch_nd` with a square block."""
    size = block_shape if block_size is None else block_size
    if size is None:
        raise ValueError("space_to_batch needs block_size")
    return space_to_batch_nd(input, [size, size], paddings, name=name)


def batch_to_space(input, crops, block_size, name=None, block_shape=None):
    """TF1's 4-D form: :func:`batch_to_space_nd` with a square block."""
    size = block_shape if block_size is None else block_size
    return batch_to_space_nd(input, [size, size], crops, name=name)


@register_gradient("SpaceToBatchND")
def _space_to_batch_grad(op, grad):
    return [batch_to_space_nd(grad, op.inputs[1], op.inputs[2]), None, None]


@register_gradient("BatchToSpaceND")
def _batch_to_space_grad(op, grad):
    return [space_to_batch_nd(grad, op.inputs[1], op.inputs[2]), None, None]


def required_space_to_batch_paddings(input_shape, block_shape, base_paddings=None,
                                     name=None):
    """(paddings, crops) that make ``input_shape`` (plus ``base_paddings``)
    divisible by ``block_shape``, for a ``space_to_batch_nd`` and the
    ``batch_to_space_nd`` that undoes it."""
    from nbdist.ops.math_ops_elementwise import floormod

    with op_scope(name, "required_space_to_batch_paddings", [input_shape]):
        shape = convert_to_tensor(input_shape, dtype=dtypes.int32, name="input_shape")
        block = convert_to_tensor(block_shape, dtype=dtypes.int32, name="block_shape")
        m = block.shape[0]
        base = (A.zeros([m, 2], dtypes.int32) if base_paddings is None else
                convert_to_tensor(base_paddings, dtype=dtypes.int32))
        start, end = base[:, 0], base[:, 1]
        full = shape + start + end
        pad_end = end + floormod(block - floormod(full, block), block)
        paddings = A.stack([start, pad_end], axis=1)
        crops = A.stack([A.zeros_like(start), pad_end - end], axis=1)
        return paddings, crops


# -- SpaceToDepth, DepthToSpace ------------------------------------------------------------
def _depth_infer(c, to_depth: bool):
    x = c.shape(0)
    b = c.attr("block_size")
    if b < 2:
        raise ValueError(f"Value for attr 'block_size' of {b} must be at least 2")
    if c.attr("data_format") not in ("NHWC", b"NHWC"):
        raise ValueError("Only data_format NHWC is supported")
    if x.rank is None:
        return [(c.dtype(0), TensorShape([None] * 4))]
    if x.rank != 4:
        raise ValueError(f"Shape must be rank 4 but is rank {x.rank}")
    n, h, w, ch = x.as_list()
    if to_depth:
        for d in (h, w):
            if d is not None and d % b:
                raise ValueError(f"Dimension size must be evenly divisible by {b} "
                                 f"but is {d}")
        return [(c.dtype(0), TensorShape([
            n, None if h is None else h // b, None if w is None else w // b,
            None if ch is None else ch * b * b]))]
    if ch is not None and ch % (b * b):
        raise ValueError(f"Dimension size must be evenly divisible by {b * b} but is "
                         f"{ch}")
    return [(c.dtype(0), TensorShape([
        n, None if h is None else h * b, None if w is None else w * b,
        None if ch is None else ch // (b * b)]))]


_DEPTH_ATTRS = {"T": ("type", None), "block_size": ("int", None),
                "data_format": ("string", "NHWC")}
register_op("SpaceToDepth", lambda c: _depth_infer(c, True), attrs=_DEPTH_ATTRS,
            num_inputs=1)
register_op("DepthToSpace", lambda c: _depth_infer(c, False), attrs=_DEPTH_ATTRS,
            num_inputs=1)


def _depth_op(op_type, input, block_size, name, data_format):
    with op_scope(name, op_type, [input]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        return g.create_op(op_type, [x], {"T": x.dtype.base_dtype,
                                          "block_size": int(block_size),
                                          "data_format": data_format},
                           name=scope).outputs[0]


def space_to_depth(input, block_size, name=None, data_format="NHWC"):
    """Moves each ``block_size`` x ``block_size`` block of pixels into the
    channels (NHWC)."""
    return _depth_op("SpaceToDepth", input, block_size, name, data_format)


def depth_to_space(input, block_size, name=None, data_format="NHWC"):
    """The inverse of :func:`space_to_depth`: channels become blocks of pixels."""
    return _depth_op("DepthToSpace", input, block_size, name, data_format)


@register_gradient("SpaceToDepth")
def _space_to_depth_grad(op, grad):
    return [depth_to_space(grad, op.get_attr("block_size"))]


@register_gradient("DepthToSpace")
def _depth_to_space_grad(op, grad):
    return [space_to_depth(grad, op.get_attr("block_size"))]


# -- ExtractImagePatches -----------------------------------------------------------------------
def patch_geometry(size, k, stride, rate, padding):
    """(output size, padding before) of one spatial dimension."""
    eff = k + (k - 1) * (rate - 1)
    if padding == "VALID":
        return max(0, (size - eff) // stride + 1), 0
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + eff - size)
    return out, total // 2


def _four(c, name):
    v = list(c.attr(name))
    if len(v) != 4 or v[0] != 1 or v[3] != 1:
        raise ValueError(f"{name} must be [1, r, c, 1], got {v}")
    return v[1], v[2]


def _patches_infer(c):
    x = c.shape(0)
    kr, kc = _four(c, "ksizes")
    sr, sc = _four(c, "strides")
    rr, rc = _four(c, "rates")
    pad = c.attr("padding")
    pad = pad.decode() if isinstance(pad, bytes) else pad
    if pad not in ("SAME", "VALID"):
        raise ValueError(f"padding must be SAME or VALID, got {pad}")
    if x.rank is None:
        return [(c.dtype(0), TensorShape([None] * 4))]
    if x.rank != 4:
        raise ValueError(f"Shape must be rank 4 but is rank {x.rank}")
    n, h, w, ch = x.as_list()
    oh = None if h is None else patch_geometry(h, kr, sr, rr, pad)[0]
    ow = None if w is None else patch_geometry(w, kc, sc, rc, pad)[0]
    return [(c.dtype(0), TensorShape([n, oh, ow, None if ch is None else
                                      kr * kc * ch]))]


register_op("ExtractImagePatches", _patches_infer,
            attrs={"T": ("type", None), "ksizes": ("list(int)", None),
                   "strides": ("list(int)", None), "rates": ("list(int)", None),
                   "padding": ("string", None)}, num_inputs=1)


def extract_image_patches(images, ksizes=None, strides=None, rates=None,
                          padding=None, name=None, sizes=None):
    """The ``ksizes`` patches of ``images`` (NHWC), every ``strides`` pixels,
    reading every ``rates``-th pixel, flattened into the channels: output
    ``[N, rows, cols, kr * kc * C]``; ``padding`` is SAME or VALID."""
    ksizes = ksizes if ksizes is not None else sizes
    with op_scope(name, "ExtractImagePatches", [images]) as (g, scope):
        x = convert_to_tensor(images, name="images")
        return g.create_op("ExtractImagePatches", [x],
                           {"T": x.dtype.base_dtype,
                            "ksizes": [int(v) for v in ksizes],
                            "strides": [int(v) for v in strides],
                            "rates": [int(v) for v in rates],
                            "padding": padding}, name=scope).outputs[0]


@register_gradient("ExtractImagePatches")
def _patches_grad(op, grad):
    # Extract patches of an image of pixel numbers (1-based, 0 in the padding):
    # each gradient entry goes back to the pixel it was read from.
    from nbdist.ops.math_ops_elementwise import cast
    from nbdist.ops.nn_ops import unsorted_segment_sum

    x = op.inputs[0]
    shape = A.shape(x)
    n, h, w, ch = shape[0], shape[1], shape[2], shape[3]
    pixels = cast(A.reshape(A.range(1, h * w + 1), A.stack([1, h, w, 1])),
                  dtypes.float64)
    ids = extract_image_patches(pixels, op.get_attr("ksizes"),
                                op.get_attr("strides"), op.get_attr("rates"),
                                op.get_attr("padding"))
    ids = A.reshape(cast(ids, dtypes.int32), [-1])
    per_read = A.reshape(grad, A.stack([n, -1, ch]))
    summed = unsorted_segment_sum(A.transpose(per_read, [1, 0, 2]), ids, h * w + 1)
    image = A.reshape(summed[1:], A.stack([h, w, n, ch]))
    return [A.transpose(image, [2, 0, 1, 3])]


def _volume_patches_infer(c):
    x = c.shape(0)
    ks, st = list(c.attr("ksizes")), list(c.attr("strides"))
    if len(ks) != 5 or len(st) != 5 or ks[0] != 1 or ks[4] != 1:
        raise ValueError(f"ksizes and strides must be [1, p, r, c, 1], got {ks} "
                         f"and {st}")
    pad = c.attr("padding")
    pad = pad.decode() if isinstance(pad, bytes) else pad
    if x.rank is None:
        return [(c.dtype(0), TensorShape([None] * 5))]
    if x.rank != 5:
        raise ValueError(f"Shape must be rank 5 but is rank {x.rank}")
    dims = x.as_list()
    out = [None if d is None else patch_geometry(d, k, s, 1, pad)[0]
           for d, k, s in zip(dims[1:4], ks[1:4], st[1:4])]
    depth = None if dims[4] is None else ks[1] * ks[2] * ks[3] * dims[4]
    return [(c.dtype(0), TensorShape([dims[0]] + out + [depth]))]


register_op("ExtractVolumePatches", _volume_patches_infer,
            attrs={"T": ("type", None), "ksizes": ("list(int)", None),
                   "strides": ("list(int)", None), "padding": ("string", None)},
            num_inputs=1)


def extract_volume_patches(input, ksizes, strides, padding, name=None):
    """The 3-D form of :func:`extract_image_patches` (NDHWC, no rates)."""
    with op_scope(name, "ExtractVolumePatches", [input]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        return g.create_op("ExtractVolumePatches", [x],
                           {"T": x.dtype.base_dtype,
                            "ksizes": [int(v) for v in ksizes],
                            "strides": [int(v) for v in strides],
                            "padding": padding}, name=scope).outputs[0]
