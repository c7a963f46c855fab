"""Gradients of the image ops that TF differentiates: ``ResizeBicubic``,
``CropAndResize`` (in the image and the boxes; ``ExtractImagePatches``'s is in
``array_ops_space``);
``RGBToHSV``/``HSVToRGB``, ``ResizeArea`` and the codecs have none, as in TF."""

from __future__ import annotations


from nbdist.framework.gradient_registry import register_gradient
from nbdist.ops import array_ops as A
from nbdist.ops import image_box_ops, image_resize_ops  # noqa: F401  (op definitions)


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

