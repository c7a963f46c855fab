"""Resizing in ``nd.image``: the ops ``ResizeBicubic`` (and its gradient) and
``ResizeArea`` beside ``image_ops``' bilinear and nearest-neighbour ones, and the
functions ``resize_images`` (every ``ResizeMethod``), ``resize_bilinear``,
``resize_nearest_neighbor``, ``resize_bicubic``, ``resize_area`` and
``resize_image_with_pad``.

Pixel mapping as TF1: legacy (output pixel ``i`` samples ``i * in / out``),
``align_corners`` or ``half_pixel_centers``. Legacy bicubic uses Keys' kernel with
``a = -0.75`` and clamped taps; half-pixel bicubic ``a = -0.5`` with taps outside
the image dropped and the rest renormalised, as TF's kernels.
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import Tensor, convert_to_tensor, get_default_graph
from nbdist.ops.image_ops import (
    _RESIZE_ATTRS,
    ResizeMethod,
    _A,
    _as_batch,
    _hw,
    _identity,
    _image,
    _resize_bilinear_grad_infer,
    _resize_infer,
    pad_to_bounding_box,
)

register_op("ResizeBicubic", lambda c: _resize_infer(c, dtypes.float32),
            attrs=_RESIZE_ATTRS, num_inputs=2)
register_op("ResizeBicubicGrad", _resize_bilinear_grad_infer, attrs=_RESIZE_ATTRS,
            num_inputs=2)
register_op("ResizeArea", lambda c: _resize_infer(c, dtypes.float32),
            attrs={"T": ("type", None), "align_corners": ("bool", False)},
            num_inputs=2)


def _resize_op(op_type, images, size, attrs, name):
    images = convert_to_tensor(images, name="images")
    size = size if isinstance(size, Tensor) else convert_to_tensor(
        np.asarray(size, np.int32), name="size")
    return images.graph.create_op(
        op_type, [images, size], dict(attrs, T=images.dtype.base_dtype),
        name=name or op_type).outputs[0]


def _attrs(align_corners, half_pixel_centers):
    if align_corners and half_pixel_centers:
        raise ValueError("If half_pixel_centers is True, align_corners must be "
                         "False.")
    return {"align_corners": bool(align_corners),
            "half_pixel_centers": bool(half_pixel_centers)}


def resize_bilinear(images, size, align_corners=False, name=None,
                    half_pixel_centers=False):
    """Bilinear resize of 4-D ``images`` to ``size`` [height, width] (float32).

    >>> import nbdist as nd
    >>> img = nd.constant([[[[0.0], [2.0]]]])        # 1 x 1 x 2 x 1
    >>> with nd.Session() as s:
    ...     s.run(nd.image.resize_bilinear(img, [1, 4])).ravel().tolist()
    [0.0, 1.0, 2.0, 2.0]
    """
    return _resize_op("ResizeBilinear", images, size,
                      _attrs(align_corners, half_pixel_centers), name)


def resize_nearest_neighbor(images, size, align_corners=False, name=None,
                            half_pixel_centers=False):
    """Nearest-neighbour resize of 4-D ``images`` (the input's dtype)."""
    return _resize_op("ResizeNearestNeighbor", images, size,
                      _attrs(align_corners, half_pixel_centers), name)


def resize_bicubic(images, size, align_corners=False, name=None,
                   half_pixel_centers=False):
    """Bicubic resize of 4-D ``images`` (float32), TF's Keys kernel."""
    return _resize_op("ResizeBicubic", images, size,
                      _attrs(align_corners, half_pixel_centers), name)


def resize_area(images, size, align_corners=False, name=None):
    """Area-averaging resize of 4-D ``images`` (float32): each output pixel is
    the mean of the input it covers, partial pixels weighted by their share."""
    return _resize_op("ResizeArea", images, size,
                      {"align_corners": bool(align_corners)}, name)


_METHODS = {
    ResizeMethod.BILINEAR: resize_bilinear, "bilinear": resize_bilinear,
    ResizeMethod.NEAREST_NEIGHBOR: resize_nearest_neighbor,
    "nearest": resize_nearest_neighbor, ResizeMethod.BICUBIC: resize_bicubic,
    "bicubic": resize_bicubic, ResizeMethod.AREA: resize_area, "area": resize_area,
}


def resize_images(images, size, method=ResizeMethod.BILINEAR, align_corners=False,
                  preserve_aspect_ratio=False, name=None):
    """Resizes 3-D or 4-D ``images`` to ``size`` = [new_height, new_width].

    ``NEAREST_NEIGHBOR`` keeps the dtype; the other methods return float32. A
    constant size equal to the image's returns the image unchanged, as TF1.
    """
    images = _image(images, "images")
    fn = _METHODS.get(method)
    if fn is None:
        raise ValueError(f"Resize method is not implemented: {method}")
    with get_default_graph().name_scope(name or "resize") as scope:
        batch, squeeze = _as_batch(images)
        if isinstance(size, Tensor):
            if preserve_aspect_ratio:
                raise ValueError("preserve_aspect_ratio needs a constant size")
            new = size
        else:
            new = [int(v) for v in size]
            if len(new) != 2:
                raise ValueError("'size' must be a 1-D Tensor of 2 elements: "
                                 "new_height, new_width")
            if preserve_aspect_ratio:
                h, w = _hw(batch)
                scale = min(new[0] / h, new[1] / w)
                new = [max(int(round(h * scale)), 1), max(int(round(w * scale)), 1)]
            if [batch.shape[1], batch.shape[2]] == new:
                return _identity(images, name=scope)   # as TF: no op, any dtype
        out = fn(batch, new, align_corners=align_corners)
        if squeeze:
            return _A().squeeze(out, [0], name=scope)
        return _identity(out, name=scope)


resize = resize_images


def resize_image_with_pad(image, target_height, target_width,
                          method=ResizeMethod.BILINEAR, align_corners=False):
    """Resizes keeping the aspect ratio until the image fits, then zero-pads it
    centrally to [target_height, target_width]."""
    image = _image(image)
    h, w = _hw(image)
    th, tw = int(target_height), int(target_width)
    if th <= 0 or tw <= 0:
        raise ValueError("target_height and target_width must be > 0.")
    # float32 arithmetic as TF, whose rounding decides the sizes at the edges.
    f32 = np.float32
    ratio = max(f32(w) / f32(tw), f32(h) / f32(th))
    fh, fw = f32(h) / ratio, f32(w) / ratio
    rh, rw = int(np.floor(fh)), int(np.floor(fw))
    ph = max(0, int(np.floor((f32(th) - fh) / f32(2))))
    pw = max(0, int(np.floor((f32(tw) - fw) / f32(2))))
    resized = resize_images(image, [rh, rw], method, align_corners=align_corners)
    return pad_to_bounding_box(resized, ph, pw, th, tw)


__all__ = [
    "resize", "resize_area", "resize_bicubic", "resize_bilinear",
    "resize_image_with_pad", "resize_images", "resize_nearest_neighbor",
]
