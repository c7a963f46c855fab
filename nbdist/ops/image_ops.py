"""Image ops (``ResizeBilinear``, ``ResizeNearestNeighbor``, their gradients,
``DecodePng``, ``EncodePng``) and the ``nd.image`` functions, TF1's names and
defaults: flips, crops, brightness and contrast, standardisation, resizing,
dtype conversion, grayscale.

Resizing follows TF1's legacy pixel mapping (``align_corners=False``,
``half_pixel_centers=False``): output pixel ``i`` samples input position
``i * in / out``. Random ops draw from ``random_uniform`` with nbdist's seed
rules, so ``seed=`` and the graph seed reproduce a sequence as TF.
"""

from __future__ import annotations

import numbers

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape

_FLOATS = (dtypes.float16, dtypes.float32, dtypes.float64)


class ResizeMethod:
    """``nd.image.ResizeMethod.BILINEAR`` etc., TF1's values."""

    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


# -- op definitions --------------------------------------------------------------------
def _images4(c, i=0):
    s = c.shape(i)
    if s.rank is not None and s.rank != 4:
        raise ValueError(f"Shape must be rank 4 but is rank {s.rank} for "
                         f"'{c.name}' (op: '{c.op_type}')")
    return s.with_rank(4)


def _size_pair(c, i):
    if c.dtype(i) is not dtypes.int32:
        raise TypeError(f"{c.op_type}: size must be int32, got {c.dtype(i).name}")
    v = c.constant(i)
    if v is None:
        return None, None
    v = np.ravel(np.asarray(v))
    if v.size != 2:
        raise ValueError(f"{c.op_type}: size must have 2 elements, got {v.size}")
    if np.any(v <= 0):
        raise ValueError(f"{c.op_type}: size must be positive, got {v.tolist()}")
    return int(v[0]), int(v[1])


def _resize_infer(c, out_dtype=None):
    x = _images4(c)
    h, w = _size_pair(c, 1)
    return [(out_dtype or c.dtype(0), TensorShape([x[0], h, w, x[3]]))]


def _resize_bilinear_grad_infer(c):
    g, x = _images4(c, 0), _images4(c, 1)
    if c.dtype(1) not in _FLOATS:
        raise TypeError("ResizeBilinearGrad: original_image must be floating point")
    return [(c.dtype(1), TensorShape([g[0], x[1], x[2], g[3]]))]


def _nearest_grad_infer(c):
    g = _images4(c)
    h, w = _size_pair(c, 1)
    return [(c.dtype(0), TensorShape([g[0], h, w, g[3]]))]


_RESIZE_ATTRS = {"T": ("type", None), "align_corners": ("bool", False),
                 "half_pixel_centers": ("bool", False)}
register_op("ResizeBilinear", lambda c: _resize_infer(c, dtypes.float32),
            attrs=_RESIZE_ATTRS, num_inputs=2)
register_op("ResizeNearestNeighbor", _resize_infer, attrs=_RESIZE_ATTRS, num_inputs=2)
register_op("ResizeBilinearGrad", _resize_bilinear_grad_infer, attrs=_RESIZE_ATTRS,
            num_inputs=2)
register_op("ResizeNearestNeighborGrad", _nearest_grad_infer, attrs=_RESIZE_ATTRS,
            num_inputs=2)


def _decode_png_infer(c):
    if c.dtype(0) is not dtypes.string:
        raise TypeError(f"DecodePng: contents must be a string, got {c.dtype(0).name}")
    if c.shape(0).rank not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {c.shape(0).rank} for "
                         f"'{c.name}' (op: 'DecodePng')")
    ch = c.attr("channels")
    if ch not in (0, 1, 2, 3, 4):
        raise ValueError(f"channels must be 0, 1, 2, 3 or 4, got {ch}")
    if c.attr("dtype") is not dtypes.uint8:
        raise TypeError("DecodePng: dtype must be uint8 (nbdist has no uint16)")
    return [(c.attr("dtype"), TensorShape([None, None, ch or None]))]


def input_rank(c, i, rank, what):
    """Input ``i``'s shape, checked to be of ``rank`` in TF's words."""
    s = c.shape(i)
    if s.rank is not None and s.rank != rank:
        raise ValueError(f"Shape must be rank {rank} but is rank {s.rank} for "
                         f"'{c.name}' (op: '{c.op_type}') ({what})")
    return s.with_rank(rank)


def uint8_image_input(c):
    """An encoder's [height, width, channels] uint8 input."""
    if c.dtype(0) is not dtypes.uint8:
        raise TypeError(f"{c.op_type}: image must be uint8, got {c.dtype(0).name}")
    return input_rank(c, 0, 3, "image")


def _encode_png_infer(c):
    uint8_image_input(c)
    if not -1 <= c.attr("compression") <= 9:
        raise ValueError("compression must be -1 (default) or 0..9")
    return [(dtypes.string, TensorShape([]))]


register_op("DecodePng", _decode_png_infer,
            attrs={"channels": ("int", 0), "dtype": ("type", dtypes.uint8)},
            num_inputs=1)
register_op("EncodePng", _encode_png_infer,
            attrs={"T": ("type", dtypes.uint8), "compression": ("int", -1)},
            num_inputs=1)


# -- helpers -------------------------------------------------------------------------
def _A():
    from nbdist.ops import array_ops

    return array_ops


def _M():
    from nbdist.ops import math_ops

    return math_ops


def _identity(x, name=None):
    from nbdist.framework.constant_op import identity

    return identity(x, name=name)


def _image(image, name="image", min_rank=3):
    image = convert_to_tensor(image, name=name)
    rank = image.shape.rank
    if rank is not None and rank < min_rank:
        raise ValueError(f"'image' (shape {image.shape}) must have at least "
                         f"{min_rank} dimensions.")
    if rank is not None and rank > 4:
        raise ValueError(f"'image' (shape {image.shape}) must have either 3 or 4 "
                         f"dimensions.")
    return image


def _as_batch(image):
    """(4-D images, whether a leading axis was added)."""
    if image.shape.rank == 3:
        return _A().expand_dims(image, 0), True
    if image.shape.rank is None:
        raise ValueError("the image's rank must be known (3 or 4)")
    return image, False


def _hw(image):
    """Static (height, width) of a 3-D or 4-D image, or ValueError."""
    s = image.shape
    h, w = s[s.rank - 3], s[s.rank - 2]
    if h is None or w is None:
        raise ValueError(f"the image's height and width must be known statically, "
                         f"got shape {s}")
    return h, w


# -- flips -----------------------------------------------------------------------------
def flip_left_right(image):
    """The image mirrored horizontally (3-D [H, W, C] or 4-D [N, H, W, C])."""
    image = _image(image)
    with get_default_graph().name_scope("flip_left_right") as scope:
        return _A().reverse(image, [-2], name=scope)


def flip_up_down(image):
    """The image flipped vertically."""
    image = _image(image)
    with get_default_graph().name_scope("flip_up_down") as scope:
        return _A().reverse(image, [-3], name=scope)


def _random_flip(image, axis, seed, scope_name):
    from nbdist.ops.random_ops import random_uniform

    image = _image(image)
    with get_default_graph().name_scope(scope_name) as scope:
        flipped = _A().reverse(image, [axis])
        if image.shape.rank == 4:
            # One coin per image of the batch.
            n = _A().shape(image)[:1]
            mirror = _M().less(random_uniform(n, 0, 1.0, seed=seed), 0.5)
            return _A().where(mirror, flipped, image, name=scope)
        mirror = _M().less(random_uniform([], 0, 1.0, seed=seed), 0.5)
        return _A().where_v2(mirror, flipped, image, name=scope)


def random_flip_left_right(image, seed=None):
    """The image mirrored horizontally with probability 1/2 (per image of a
    batch)."""
    return _random_flip(image, -2, seed, "random_flip_left_right")


def random_flip_up_down(image, seed=None):
    """The image flipped vertically with probability 1/2 (per image of a batch)."""
    return _random_flip(image, -3, seed, "random_flip_up_down")


# -- crops and pads --------------------------------------------------------------------
def random_crop(value, size, seed=None, name=None):
    """A ``size`` slice of ``value`` at a uniformly random offset."""
    from nbdist.ops.random_ops import random_uniform

    with get_default_graph().name_scope(name or "random_crop") as scope:
        value = convert_to_tensor(value, name="value")
        size = convert_to_tensor(size, dtype=dtypes.int32, name="size")
        shape = _A().shape(value)
        static_size = np.asarray(size.op.get_attr("value")) if (
            size.op.type == "Const") else None
        if static_size is not None and value.shape.is_fully_defined():
            if static_size.shape != (value.shape.rank,):
                raise ValueError(f"size {static_size.tolist()} must have one entry "
                                 f"per dimension of value {value.shape}")
            if np.any(static_size > np.asarray(value.shape.as_list())):
                raise ValueError(f"Need value.shape >= size, got "
                                 f"{value.shape.as_list()} and "
                                 f"{static_size.tolist()}")
        limit = _M().add(_M().subtract(shape, size), 1)
        offset = _M().floormod(random_uniform(_A().shape(shape), 0, 2**31 - 1,
                                              dtype=dtypes.int32, seed=seed), limit)
        out = _A().slice(value, offset, size, name=scope)
        if static_size is not None:
            out.set_shape(static_size.tolist())
        return out


def crop_to_bounding_box(image, offset_height, offset_width, target_height,
                         target_width):
    """The [target_height, target_width] box at (offset_height, offset_width)."""
    image = _image(image)
    h, w = _hw(image)
    oh, ow, th, tw = (int(v) for v in (offset_height, offset_width, target_height,
                                       target_width))
    if oh < 0 or ow < 0:
        raise ValueError("offset_height and offset_width must be >= 0.")
    if th <= 0 or tw <= 0:
        raise ValueError("target_height and target_width must be > 0.")
    if oh + th > h or ow + tw > w:
        raise ValueError("height must be >= target + offset.")
    lead = image.shape.rank - 3
    with get_default_graph().name_scope("crop_to_bounding_box") as scope:
        return _A().slice(image, [0] * lead + [oh, ow, 0],
                          [-1] * lead + [th, tw, -1], name=scope)


def pad_to_bounding_box(image, offset_height, offset_width, target_height,
                        target_width):
    """The image zero-padded to [target_height, target_width], its top-left
    corner at (offset_height, offset_width)."""
    image = _image(image)
    h, w = _hw(image)
    oh, ow, th, tw = (int(v) for v in (offset_height, offset_width, target_height,
                                       target_width))
    if oh < 0 or ow < 0:
        raise ValueError("offset_height and offset_width must be >= 0.")
    if th - oh - h < 0 or tw - ow - w < 0:
        raise ValueError("target size must be >= image size + offset.")
    lead = image.shape.rank - 3
    with get_default_graph().name_scope("pad_to_bounding_box") as scope:
        pads = [[0, 0]] * lead + [[oh, th - oh - h], [ow, tw - ow - w], [0, 0]]
        return _A().pad(image, pads, name=scope)


def resize_image_with_crop_or_pad(image, target_height, target_width):
    """Centrally crops and/or zero-pads the image to the target size."""
    image = _image(image)
    h, w = _hw(image)
    th, tw = int(target_height), int(target_width)
    if th <= 0 or tw <= 0:
        raise ValueError("target_height and target_width must be > 0.")
    with get_default_graph().name_scope("resize_image_with_crop_or_pad") as scope:
        top, left = max((h - th) // 2, 0), max((w - tw) // 2, 0)
        ch, cw = min(h, th), min(w, tw)
        lead = image.shape.rank - 3
        cropped = _A().slice(image, [0] * lead + [top, left, 0],
                             [-1] * lead + [ch, cw, -1])
        pt, pl = max((th - h) // 2, 0), max((tw - w) // 2, 0)
        pads = [[0, 0]] * lead + [[pt, th - ch - pt], [pl, tw - cw - pl], [0, 0]]
        return _A().pad(cropped, pads, name=scope)


resize_with_crop_or_pad = resize_image_with_crop_or_pad


def central_crop(image, central_fraction):
    """The central ``central_fraction`` (0, 1] of the image's height and width."""
    image = _image(image)
    if not 0.0 < central_fraction <= 1.0:
        raise ValueError("central_fraction must be within (0, 1]")
    if central_fraction == 1.0:
        return image
    h, w = _hw(image)
    with get_default_graph().name_scope("central_crop") as scope:
        top = int((h - h * central_fraction) / 2)
        left = int((w - w * central_fraction) / 2)
        lead = image.shape.rank - 3
        return _A().slice(image, [0] * lead + [top, left, 0],
                          [-1] * lead + [h - 2 * top, w - 2 * left, -1], name=scope)


# -- dtype conversion ------------------------------------------------------------------
def convert_image_dtype(image, dtype, saturate=False, name=None):
    """Converts between image dtypes, rescaling: floats span [0, 1), integers
    [0, MAX]. Float to integer multiplies by MAX + 0.5 and truncates."""
    M = _M()
    image = convert_to_tensor(image, name="image")
    dtype = dtypes.as_dtype(dtype)
    src = image.dtype.base_dtype
    if not dtype.is_numeric:
        raise AttributeError("dtype must be either floating point or integer")
    if dtype is src:
        return _identity(image, name=name)
    with get_default_graph().name_scope(name or "convert_image") as scope:
        s_int, d_int = src.is_integer, dtype.is_integer
        if s_int and d_int:
            s_max, d_max = int(src.max), int(dtype.max)
            if s_max > d_max:
                scale = (s_max + 1) // (d_max + 1)
                return M.cast(M.floordiv(image, convert_to_tensor(scale, dtype=src)),
                              dtype, name=scope)
            scale = (d_max + 1) // (s_max + 1)
            return M.multiply(M.cast(image, dtype), convert_to_tensor(
                scale, dtype=dtype), name=scope)
        if not s_int and not d_int:
            return M.cast(image, dtype, name=scope)
        if s_int:
            cast = M.cast(image, dtype)
            return M.multiply(cast, convert_to_tensor(1.0 / int(src.max),
                                                      dtype=dtype), name=scope)
        scaled = M.multiply(image, convert_to_tensor(int(dtype.max) + 0.5, dtype=src))
        if saturate:
            scaled = M.minimum(M.maximum(scaled, convert_to_tensor(
                float(dtype.min), dtype=src)), convert_to_tensor(float(dtype.max),
                                                                 dtype=src))
        return M.cast(scaled, dtype, name=scope)


def _float_work(image, fn, name):
    """fn on the image as float32 (integers rescaled), converted back (saturated)."""
    image = _image(image, min_rank=3)
    orig = image.dtype.base_dtype
    with get_default_graph().name_scope(name) as scope:
        flt = image if orig in _FLOATS else convert_image_dtype(image, dtypes.float32)
        out = fn(flt)
        if orig in _FLOATS:
            return _identity(out, name=scope)
        return convert_image_dtype(out, orig, saturate=True, name=scope)


# -- brightness, contrast, standardisation -------------------------------------------
def adjust_brightness(image, delta):
    """image + delta (on the [0, 1) float scale for integer images)."""
    return _float_work(image, lambda x: _M().add(
        x, convert_to_tensor(delta, dtype=x.dtype.base_dtype)), "adjust_brightness")


def adjust_contrast(images, contrast_factor):
    """(x - mean) * contrast_factor + mean, with each channel's mean over the
    image's height and width."""
    def fn(x):
        M = _M()
        mean = M.reduce_mean(x, [-3, -2], keepdims=True)
        factor = convert_to_tensor(contrast_factor, dtype=x.dtype.base_dtype)
        return M.add(M.multiply(M.subtract(x, mean), factor), mean)

    return _float_work(images, fn, "adjust_contrast")


def random_brightness(image, max_delta, seed=None):
    """adjust_brightness by a delta drawn uniformly from [-max_delta, max_delta)."""
    from nbdist.ops.random_ops import random_uniform

    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    delta = random_uniform([], -max_delta, max_delta, seed=seed)
    return adjust_brightness(image, delta)


def random_contrast(image, lower, upper, seed=None):
    """adjust_contrast by a factor drawn uniformly from [lower, upper)."""
    from nbdist.ops.random_ops import random_uniform

    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    factor = random_uniform([], lower, upper, seed=seed)
    return adjust_contrast(image, factor)


def per_image_standardization(image):
    """(x - mean) / max(stddev, 1 / sqrt(num_elements)) per image, as float32
    (integers are cast, not rescaled, as TF1)."""
    M = _M()
    image = _image(image)
    with get_default_graph().name_scope("per_image_standardization") as scope:
        x = M.cast(image, dtypes.float32)
        axes = [-1, -2, -3]
        n = M.cast(M.reduce_prod(_A().shape(image)[-3:]), dtypes.float32)
        mean = M.reduce_mean(x, axes, keepdims=True)
        var = M.reduce_mean(M.square(M.subtract(x, mean)), axes, keepdims=True)
        adjusted = M.maximum(M.sqrt(var), M.rsqrt(n))
        return M.divide(M.subtract(x, mean), adjusted, name=scope)


def rgb_to_grayscale(images, name=None):
    """The luma of [..., 3] RGB images, as [..., 1] of the same dtype."""
    M = _M()
    images = convert_to_tensor(images, name="images")
    if images.shape.rank is not None and images.shape[-1] not in (None, 3):
        raise ValueError(f"the last dimension of images must be 3 (RGB), got "
                         f"{images.shape[-1]}")
    orig = images.dtype.base_dtype
    with get_default_graph().name_scope(name or "rgb_to_grayscale") as scope:
        flt = convert_image_dtype(images, dtypes.float32)
        weights = convert_to_tensor(np.array([0.2989, 0.5870, 0.1140], np.float32))
        gray = M.reduce_sum(M.multiply(flt, weights), -1, keepdims=True)
        return convert_image_dtype(gray, orig, name=scope)


# -- PNG -------------------------------------------------------------------------------
def decode_png(contents, channels=0, dtype=dtypes.uint8, name=None):
    """The [height, width, channels] pixels of a PNG (``channels`` 0: as stored)."""
    contents = convert_to_tensor(contents, dtype=dtypes.string, name="contents")
    return contents.graph.create_op(
        "DecodePng", [contents], {"channels": int(channels),
                                  "dtype": dtypes.as_dtype(dtype)},
        name=name or "DecodePng").outputs[0]


def encode_png(image, compression=-1, name=None):
    """A PNG (scalar string) of a [height, width, channels] uint8 image."""
    image = convert_to_tensor(image, name="image")
    if not isinstance(compression, numbers.Integral):
        raise TypeError("compression must be an int")
    return image.graph.create_op(
        "EncodePng", [image], {"T": image.dtype.base_dtype,
                               "compression": int(compression)},
        name=name or "EncodePng").outputs[0]


__all__ = [
    "ResizeMethod", "adjust_brightness", "adjust_contrast", "central_crop",
    "convert_image_dtype", "crop_to_bounding_box", "decode_png", "encode_png",
    "flip_left_right", "flip_up_down", "pad_to_bounding_box",
    "per_image_standardization", "random_brightness", "random_contrast",
    "random_crop", "random_flip_left_right", "random_flip_up_down",
    "resize_image_with_crop_or_pad", "resize_with_crop_or_pad", "rgb_to_grayscale",
]
