"""Gradients of the image ops that TF differentiates: ``ResizeBicubic``,
``CropAndResize`` (in the image and the boxes) and ``ExtractImagePatches``;
``RGBToHSV``/``HSVToRGB``, ``ResizeArea`` and the codecs have none, as in TF."""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.ops import convert_to_tensor
from nbdist.ops import array_ops as A
from nbdist.ops import image_box_ops, image_resize_ops  # noqa: F401  (op definitions)
from nbdist.ops.image_box_ops import extract_image_patches
from nbdist.ops.math_ops import cast
from nbdist.ops.nn_ops import unsorted_segment_sum


@register_gradient("ResizeBicubic")
def _resize_bicubic_grad(op, grad):
    x = op.inputs[0]
    if not x.dtype.is_floating:
        return [None, None]
    attrs = {k: op.get_attr(k) for k in ("align_corners", "half_pixel_centers")}
    return [op.graph.create_op("ResizeBicubicGrad", [grad, x],
                               dict(attrs, T=x.dtype.base_dtype),
                               name="ResizeBicubicGrad").outputs[0], None]


@register_gradient("CropAndResize")
def _crop_and_resize_grad(op, grad):
    image, boxes, box_ind, _ = op.inputs
    grad_image = None
    if image.dtype.is_floating:
        grad_image = op.graph.create_op(
            "CropAndResizeGradImage", [grad, boxes, box_ind, A.shape(image)],
            {"T": image.dtype.base_dtype, "method": op.get_attr("method")},
            name="CropAndResizeGradImage").outputs[0]
    # As TF: the boxes' gradient is the bilinear one whatever the method.
    grad_boxes = op.graph.create_op(
        "CropAndResizeGradBoxes", [grad, image, boxes, box_ind],
        {"T": image.dtype.base_dtype, "method": "bilinear"},
        name="CropAndResizeGradBoxes").outputs[0]
    return [grad_image, grad_boxes, None, None]


@register_gradient("ExtractImagePatches")
def _extract_image_patches_grad(op, grad):
    # Patches of pixel numbers (1-based, 0 for padding) say where each patch
    # entry came from; the gradient sums the entries per pixel.
    x = op.inputs[0]
    _, h, w, d = x.shape.as_list()
    if None in (h, w, d):
        raise ValueError("ExtractImagePatches' gradient needs the image's height, "
                         "width and depth known statically")
    numbers = np.arange(1, h * w + 1, dtype=np.float32).reshape(1, h, w, 1)
    where = extract_image_patches(convert_to_tensor(numbers), op.get_attr("ksizes"),
                                  op.get_attr("strides"), op.get_attr("rates"),
                                  op.get_attr("padding"))
    ids = A.reshape(cast(where, dtypes.int32), [-1])                 # [oh * ow * kr * kc]
    n = A.shape(grad)[0]
    g = A.reshape(grad, A.stack([n, -1, d]))             # [n, oh*ow*kr*kc, d]
    summed = unsorted_segment_sum(A.transpose(g, [1, 0, 2]), ids, h * w + 1)
    per_pixel = A.reshape(summed[1:], A.stack([h, w, n, d]))
    return [A.transpose(per_pixel, [2, 0, 1, 3])]

