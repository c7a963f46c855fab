"""``nd.image``: TF1's ``tf.image`` functions on NumPy kernels.

>>> import nbdist as nd
>>> img = nd.constant([[[0.0], [1.0]]])          # 1 x 2 pixels, 1 channel
>>> with nd.Session() as s:
...     s.run(nd.image.flip_left_right(img)).ravel().tolist()
[1.0, 0.0]
"""

from __future__ import annotations

from nbdist.ops.image_ops import (
    ResizeMethod,
    adjust_brightness,
    adjust_contrast,
    central_crop,
    convert_image_dtype,
    crop_to_bounding_box,
    decode_png,
    encode_png,
    flip_left_right,
    flip_up_down,
    pad_to_bounding_box,
    per_image_standardization,
    random_brightness,
    random_contrast,
    random_crop,
    random_flip_left_right,
    random_flip_up_down,
    resize,
    resize_bilinear,
    resize_image_with_crop_or_pad,
    resize_images,
    resize_nearest_neighbor,
    rgb_to_grayscale,
)

__all__ = [
    "ResizeMethod",
    "adjust_brightness",
    "adjust_contrast",
    "central_crop",
    "convert_image_dtype",
    "crop_to_bounding_box",
    "decode_png",
    "encode_png",
    "flip_left_right",
    "flip_up_down",
    "pad_to_bounding_box",
    "per_image_standardization",
    "random_brightness",
    "random_contrast",
    "random_crop",
    "random_flip_left_right",
    "random_flip_up_down",
    "resize",
    "resize_bilinear",
    "resize_image_with_crop_or_pad",
    "resize_images",
    "resize_nearest_neighbor",
    "rgb_to_grayscale",
]
