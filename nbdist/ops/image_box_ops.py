"""Boxes and windows in ``nd.image``: the ops ``CropAndResize`` (and its two
gradients), ``DrawBoundingBoxesV2``, ``SampleDistortedBoundingBoxV2``,
``ExtractGlimpse``, with TF1's functions (``extract_image_patches`` runs
``array_ops_space``'s op).

Boxes are ``[y_min, x_min, y_max, x_max]`` in coordinates normalised to the
image (0 the first pixel's centre, 1 the last's), as TF.
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.image_ops import input_rank
from nbdist.ops.random_ops import _get_seeds
from nbdist.ops import array_ops_space

_FLOATS = (dtypes.float16, dtypes.float32, dtypes.float64)


def _pair(c, i):
    v = c.constant(i)
    if v is None:
        return None, None
    v = np.ravel(v)
    if v.size != 2 or np.any(v <= 0):
        raise ValueError(f"{c.op_type}: crop_size must be two positive values, got "
                         f"{v.tolist()}")
    return int(v[0]), int(v[1])


def _crop_and_resize_infer(c):
    x = input_rank(c, 0, 4, "image")
    b = input_rank(c, 1, 2, "boxes")
    input_rank(c, 2, 1, "box_ind")
    if b[1] not in (None, 4):
        raise ValueError(f"Dimension must be 4 but is {b[1]} for '{c.name}' "
                         f"(op: 'CropAndResize') (boxes)")
    if c.attr("method") not in ("bilinear", "nearest"):
        raise ValueError("method must be 'bilinear' or 'nearest'")
    h, w = _pair(c, 3)
    return [(dtypes.float32, TensorShape([b[0], h, w, x[3]]))]


def _grad_image_infer(c):
    g = input_rank(c, 0, 4, "grads")
    v = c.constant(3)
    n, h, w = (None,) * 3 if v is None else (int(d) for d in np.ravel(v)[:3])
    return [(c.attr("T"), TensorShape([n, h, w, g[3]]))]


def _grad_boxes_infer(c):
    return [(dtypes.float32, c.shape(2))]


register_op("CropAndResize", _crop_and_resize_infer,
            attrs={"T": ("type", dtypes.float32), "method": ("string", "bilinear"),
                   "extrapolation_value": ("float", 0.0)}, num_inputs=4)
register_op("CropAndResizeGradImage", _grad_image_infer,
            attrs={"T": ("type", dtypes.float32), "method": ("string", "bilinear")},
            num_inputs=4)
register_op("CropAndResizeGradBoxes", _grad_boxes_infer,
            attrs={"T": ("type", dtypes.float32), "method": ("string", "bilinear")},
            num_inputs=4)


def _draw_infer(c):
    s = input_rank(c, 0, 4, "images")
    input_rank(c, 1, 3, "boxes")
    if c.dtype(0) not in _FLOATS:
        raise TypeError(f"DrawBoundingBoxes: images must be float, got "
                        f"{c.dtype(0).name}")
    if s[3] not in (None, 1, 3, 4):
        raise ValueError(f"Channel depth should be either 1 (GRY), 3 (RGB), or 4 "
                         f"(RGBA), got {s[3]}")
    return [(c.dtype(0), s)]


register_op("DrawBoundingBoxesV2", _draw_infer,
            attrs={"T": ("type", dtypes.float32)}, num_inputs=3)


def _sample_infer(c):
    input_rank(c, 0, 1, "image_size")
    input_rank(c, 1, 3, "bounding_boxes")
    for name in ("aspect_ratio_range", "area_range"):
        r = c.attr(name)
        if len(r) != 2 or r[0] <= 0 or r[1] < r[0]:
            raise ValueError(f"{name} must be 2 positive values, low <= high, got "
                             f"{list(r)}")
    if c.attr("max_attempts") <= 0:
        raise ValueError("max_attempts must be positive")
    dt = c.dtype(0)
    return [(dt, TensorShape([3])), (dt, TensorShape([3])),
            (dtypes.float32, TensorShape([1, 1, 4]))]


register_op("SampleDistortedBoundingBoxV2", _sample_infer,
            attrs={"T": ("type", dtypes.int32), "seed": ("int", 0),
                   "seed2": ("int", 0), "aspect_ratio_range": ("list(float)",
                                                               [0.75, 1.33]),
                   "area_range": ("list(float)", [0.05, 1.0]),
                   "max_attempts": ("int", 100),
                   "use_image_if_no_bounding_boxes": ("bool", False)},
            num_inputs=3, stateful=True)


def _glimpse_infer(c):
    x = input_rank(c, 0, 4, "input")
    o = input_rank(c, 2, 2, "offsets")
    h, w = _pair(c, 1)
    if c.attr("noise") not in ("", "uniform", "gaussian", "zero"):
        raise ValueError("noise must be 'uniform', 'gaussian' or 'zero'")
    return [(dtypes.float32, TensorShape([x[0] if x[0] is not None else o[0], h, w,
                                          x[3]]))]


register_op("ExtractGlimpse", _glimpse_infer,
            attrs={"centered": ("bool", True), "normalized": ("bool", True),
                   "uniform_noise": ("bool", True), "noise": ("string", "uniform")},
            num_inputs=3, stateful=True)


# -- functions -------------------------------------------------------------------------
def crop_and_resize(image, boxes, box_ind=None, crop_size=None, method="bilinear",
                    extrapolation_value=0, name=None, box_indices=None):
    """[num_boxes, crop_h, crop_w, depth] float32 crops of ``image``[box_ind[i]]
    at ``boxes[i]``, resampled (``bilinear`` or ``nearest``); samples outside the
    image take ``extrapolation_value``. Differentiable in image and boxes.

    >>> import numpy as np, nbdist as nd
    >>> img = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    >>> with nd.Session() as s:
    ...     s.run(nd.image.crop_and_resize(img, [[0, 0, 1, 1]], [0], [2, 2])
    ...           ).ravel().tolist()
    [0.0, 3.0, 12.0, 15.0]
    """
    if box_indices is not None:
        if box_ind is not None:
            raise ValueError("Cannot specify both 'box_indices' and 'box_ind'")
        box_ind = box_indices
    if box_ind is None or crop_size is None:
        raise ValueError("crop_and_resize needs box_ind (box_indices) and crop_size")
    image = convert_to_tensor(image, name="image")
    ins = [image, convert_to_tensor(boxes, dtype=dtypes.float32, name="boxes"),
           convert_to_tensor(box_ind, dtype=dtypes.int32, name="box_ind"),
           convert_to_tensor(crop_size, dtype=dtypes.int32, name="crop_size")]
    with get_default_graph().name_scope(name or "crop_and_resize") as scope:
        return image.graph.create_op(
            "CropAndResize", ins,
            {"T": image.dtype.base_dtype, "method": method,
             "extrapolation_value": float(extrapolation_value)}, name=scope).outputs[0]


def draw_bounding_boxes(images, boxes, name=None, colors=None):
    """``images`` (float, [batch, h, w, 1|3|4]) with one-pixel box outlines drawn,
    box ``i`` in ``colors[i % len(colors)]`` (RGBA rows; TF's ten colours by
    default)."""
    images = convert_to_tensor(images, name="images")
    boxes = convert_to_tensor(boxes, dtype=dtypes.float32, name="boxes")
    colors = convert_to_tensor(np.zeros((0, 4), np.float32) if colors is None
                               else colors, dtype=dtypes.float32, name="colors")
    with get_default_graph().name_scope(name or "draw_bounding_boxes") as scope:
        return images.graph.create_op(
            "DrawBoundingBoxesV2", [images, boxes, colors],
            {"T": images.dtype.base_dtype}, name=scope).outputs[0]


def sample_distorted_bounding_box(image_size, bounding_boxes, seed=None, seed2=None,
                                  min_object_covered=0.1, aspect_ratio_range=None,
                                  area_range=None, max_attempts=None,
                                  use_image_if_no_bounding_boxes=None, name=None):
    """A random crop for augmentation: (begin, size, bboxes) for ``slice``, the
    crop covering at least ``min_object_covered`` of one of ``bounding_boxes``
    ([batch, n, 4] normalised), its aspect ratio and area share within the
    ranges; after ``max_attempts`` failures the whole image."""
    image_size = convert_to_tensor(image_size, name="image_size")
    boxes = convert_to_tensor(bounding_boxes, dtype=dtypes.float32,
                              name="bounding_boxes")
    covered = convert_to_tensor(min_object_covered, dtype=dtypes.float32,
                                name="min_object_covered")
    if seed2 is not None:
        s1, s2 = int(seed or 0), int(seed2)
    else:
        s1, s2 = _get_seeds(seed)
    attrs = {"T": image_size.dtype.base_dtype, "seed": s1, "seed2": s2,
             "aspect_ratio_range": [float(v) for v in (aspect_ratio_range or
                                                       (0.75, 1.33))],
             "area_range": [float(v) for v in (area_range or (0.05, 1.0))],
             "max_attempts": int(max_attempts or 100),
             "use_image_if_no_bounding_boxes": bool(use_image_if_no_bounding_boxes)}
    with get_default_graph().name_scope(name or "sample_distorted_bounding_box"):
        op = image_size.graph.create_op("SampleDistortedBoundingBoxV2",
                                        [image_size, boxes, covered], attrs,
                                        name="SampleDistortedBoundingBoxV2")
        return tuple(op.outputs)


def extract_glimpse(input, size, offsets, centered=True, normalized=True,  # noqa: A002
                    uniform_noise=True, name=None):
    """[batch, size[0], size[1], depth] windows of ``input`` around ``offsets``
    ([batch, 2] as (y, x)); ``centered``: offsets in [-1, 1] from the centre,
    ``normalized``: as fractions of the image. Pixels outside the image are
    noise drawn uniformly between the image's min and max (``uniform_noise``),
    else zeros."""
    x = convert_to_tensor(input, dtype=dtypes.float32, name="input")
    ins = [x, convert_to_tensor(size, dtype=dtypes.int32, name="size"),
           convert_to_tensor(offsets, dtype=dtypes.float32, name="offsets")]
    attrs = {"centered": bool(centered), "normalized": bool(normalized),
             "uniform_noise": bool(uniform_noise),
             "noise": "uniform" if uniform_noise else "zero"}
    with get_default_graph().name_scope(name or "extract_glimpse") as scope:
        return x.graph.create_op("ExtractGlimpse", ins, attrs, name=scope).outputs[0]


def extract_image_patches(images, ksizes=None, strides=None, rates=None,
                          padding=None, name=None, sizes=None):
    """[batch, rows, cols, k_rows * k_cols * depth]: each output pixel holds the
    ``ksizes`` patch (taps ``rates`` apart) at its position, flattened in
    (row, col, depth) order; SAME pads with zeros. The op is
    ``array_ops_space``'s (one ``ExtractImagePatches`` in nbdist)."""
    ksizes = sizes if ksizes is None else ksizes
    if ksizes is None or strides is None or rates is None or padding is None:
        raise ValueError("extract_image_patches needs ksizes, strides, rates and "
                         "padding")
    return array_ops_space.extract_image_patches(images, ksizes, strides, rates,
                                                 padding, name=name)


def extract_patches(images, sizes, strides, rates, padding, name=None):
    """extract_image_patches with TF2's argument name ``sizes``."""
    return extract_image_patches(images, sizes, strides, rates, padding, name=name)


__all__ = [
    "crop_and_resize", "draw_bounding_boxes", "extract_glimpse",
    "extract_image_patches", "extract_patches", "sample_distorted_bounding_box",
]
