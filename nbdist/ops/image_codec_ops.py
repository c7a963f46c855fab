"""Image codecs of ``nd.image`` beside PNG: JPEG (``DecodeJpeg``, ``EncodeJpeg``,
``EncodeJpegVariableQuality``, ``DecodeAndCropJpeg``, ``ExtractJpegShape``), GIF,
BMP, WebP, and ``DecodeImage`` which sniffs the format. Kernels use Pillow
(libjpeg-turbo, as TF), so JPEG pixels agree with TF's to within rounding of
the decoder's IDCT.
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.image_ops import (
    _M,
    _identity,
    _image,
    convert_image_dtype,
    uint8_image_input,
)

_JPEG_DECODE_ATTRS = {
    "channels": ("int", 0), "ratio": ("int", 1), "fancy_upscaling": ("bool", True),
    "try_recover_truncated": ("bool", False), "acceptable_fraction": ("float", 1.0),
    "dct_method": ("string", ""),
}
_JPEG_ENCODE_ATTRS = {
    "format": ("string", ""), "quality": ("int", 95), "progressive": ("bool", False),
    "optimize_size": ("bool", False), "chroma_downsampling": ("bool", True),
    "density_unit": ("string", "in"), "x_density": ("int", 300),
    "y_density": ("int", 300), "xmp_metadata": ("string", ""),
}


def _scalar_string(c, i=0):
    if c.dtype(i) is not dtypes.string:
        raise TypeError(f"{c.op_type}: contents must be a string, got "
                        f"{c.dtype(i).name}")
    if c.shape(i).rank not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {c.shape(i).rank} for "
                         f"'{c.name}' (op: '{c.op_type}')")


def _channels(c, allowed=(0, 1, 3)):
    ch = c.attr("channels")
    if ch not in allowed:
        raise ValueError(f"{c.op_type}: channels must be one of {list(allowed)}, got "
                         f"{ch}")
    return ch or None


def _decode_jpeg_infer(c):
    _scalar_string(c)
    if c.attr("ratio") not in (1, 2, 4, 8):
        raise ValueError(f"ratio must be 1, 2, 4 or 8, got {c.attr('ratio')}")
    return [(dtypes.uint8, TensorShape([None, None, _channels(c)]))]


def _decode_and_crop_infer(c):
    _scalar_string(c)
    crop = c.constant(1)
    h = w = None
    if crop is not None:
        crop = np.ravel(crop)
        if crop.size != 4:
            raise ValueError("crop_window must have 4 elements: [y, x, height, "
                             "width]")
        h, w = int(crop[2]), int(crop[3])
    return [(dtypes.uint8, TensorShape([h, w, _channels(c)]))]


def _encode_jpeg_infer(c):
    uint8_image_input(c)
    fmt = c.attr("format") if "format" in c.attrs else ""
    if fmt not in ("", "grayscale", "rgb"):
        raise ValueError(f"format must be '', 'grayscale' or 'rgb', got {fmt!r}")
    return [(dtypes.string, TensorShape([]))]


def _extract_shape_infer(c):
    _scalar_string(c)
    if c.attr("output_type") not in (dtypes.int32, dtypes.int64):
        raise TypeError("ExtractJpegShape: output_type must be int32 or int64")
    return [(c.attr("output_type"), TensorShape([3]))]


def _decode_gif_infer(c):
    _scalar_string(c)
    return [(dtypes.uint8, TensorShape([None, None, None, 3]))]


def _decode_bmp_infer(c):
    _scalar_string(c)
    return [(dtypes.uint8, TensorShape([None, None, _channels(c, (0, 1, 3, 4))]))]


def _decode_image_infer(c):
    _scalar_string(c)
    ch = _channels(c, (0, 1, 3, 4))
    dt = c.attr("dtype")
    if dt not in (dtypes.uint8, dtypes.float16, dtypes.float32, dtypes.float64):
        raise TypeError("DecodeImage: dtype must be uint8 or a float type "
                        "(nbdist has no uint16)")
    shape = TensorShape(None) if c.attr("expand_animations") else TensorShape(
        [None, None, ch])
    return [(dt, shape)]


register_op("DecodeJpeg", _decode_jpeg_infer, attrs=_JPEG_DECODE_ATTRS, num_inputs=1)
register_op("DecodeAndCropJpeg", _decode_and_crop_infer, attrs=_JPEG_DECODE_ATTRS,
            num_inputs=2)
register_op("EncodeJpeg", _encode_jpeg_infer, attrs=_JPEG_ENCODE_ATTRS, num_inputs=1)
register_op("EncodeJpegVariableQuality", _encode_jpeg_infer, num_inputs=2)
register_op("ExtractJpegShape", _extract_shape_infer,
            attrs={"output_type": ("type", dtypes.int32)}, num_inputs=1)
register_op("DecodeGif", _decode_gif_infer, num_inputs=1)
register_op("DecodeBmp", _decode_bmp_infer, attrs={"channels": ("int", 0)},
            num_inputs=1)
register_op("DecodeWebP", _decode_bmp_infer,
            attrs={"channels": ("int", 0), "dtype": ("type", dtypes.uint8)},
            num_inputs=1)
register_op("DecodeImage", _decode_image_infer,
            attrs={"channels": ("int", 0), "dtype": ("type", dtypes.uint8),
                   "expand_animations": ("bool", True)}, num_inputs=1)


def _op(op_type, inputs, attrs, name):
    g = inputs[0].graph
    return g.create_op(op_type, inputs, attrs, name=name or op_type).outputs[0]


def _contents(contents):
    return convert_to_tensor(contents, dtype=dtypes.string, name="contents")


def decode_jpeg(contents, channels=0, ratio=1, fancy_upscaling=True,
                try_recover_truncated=False, acceptable_fraction=1, dct_method="",
                name=None):
    """The [height, width, channels] uint8 pixels of a JPEG (``channels`` 0: as
    stored, 1 gray, 3 RGB); ``ratio`` 2, 4 or 8 downscales while decoding.

    >>> import numpy as np, nbdist as nd
    >>> img = np.full((4, 6, 3), 128, np.uint8)
    >>> with nd.Session() as s:
    ...     s.run(nd.image.decode_jpeg(nd.image.encode_jpeg(img))).shape
    (4, 6, 3)
    """
    attrs = {"channels": int(channels), "ratio": int(ratio),
             "fancy_upscaling": bool(fancy_upscaling),
             "try_recover_truncated": bool(try_recover_truncated),
             "acceptable_fraction": float(acceptable_fraction),
             "dct_method": str(dct_method)}
    return _op("DecodeJpeg", [_contents(contents)], attrs, name)


def decode_and_crop_jpeg(contents, crop_window, channels=0, ratio=1,
                         fancy_upscaling=True, try_recover_truncated=False,
                         acceptable_fraction=1, dct_method="", name=None):
    """decode_jpeg then the crop ``crop_window`` = [y, x, height, width]."""
    attrs = {"channels": int(channels), "ratio": int(ratio),
             "fancy_upscaling": bool(fancy_upscaling),
             "try_recover_truncated": bool(try_recover_truncated),
             "acceptable_fraction": float(acceptable_fraction),
             "dct_method": str(dct_method)}
    window = convert_to_tensor(crop_window, dtype=dtypes.int32, name="crop_window")
    return _op("DecodeAndCropJpeg", [_contents(contents), window], attrs, name)


def encode_jpeg(image, format="", quality=95, progressive=False,  # noqa: A002
                optimize_size=False, chroma_downsampling=True, density_unit="in",
                x_density=300, y_density=300, xmp_metadata="", name=None):
    """A JPEG (scalar string) of a [height, width, 1 or 3] uint8 image."""
    if not 0 <= int(quality) <= 100:
        raise ValueError(f"quality must be in [0, 100], got {quality}")
    if density_unit not in ("in", "cm"):
        raise ValueError(f"density_unit must be 'in' or 'cm', got {density_unit!r}")
    attrs = {"format": format, "quality": int(quality),
             "progressive": bool(progressive), "optimize_size": bool(optimize_size),
             "chroma_downsampling": bool(chroma_downsampling),
             "density_unit": density_unit, "x_density": int(x_density),
             "y_density": int(y_density), "xmp_metadata": str(xmp_metadata)}
    image = convert_to_tensor(image, name="image")
    return _op("EncodeJpeg", [image], attrs, name)


def extract_jpeg_shape(contents, output_type=dtypes.int32, name=None):
    """[height, width, channels] of a JPEG, read from its header."""
    return _op("ExtractJpegShape", [_contents(contents)],
               {"output_type": dtypes.as_dtype(output_type)}, name)


def is_jpeg(contents, name=None):
    """Whether the bytes start with JPEG's marker ``\\xff\\xd8\\xff`` (a bool)."""
    from nbdist.ops.string_ops import substr

    with get_default_graph().name_scope(name or "is_jpeg") as scope:
        head = substr(_contents(contents), 0, 3)
        return _M().equal(head, b"\xff\xd8\xff", name=scope)


def decode_gif(contents, name=None):
    """[num_frames, height, width, 3] uint8 frames of a GIF, each frame drawn
    over the previous one as a viewer shows it."""
    return _op("DecodeGif", [_contents(contents)], {}, name)


def decode_bmp(contents, channels=0, name=None):
    """[height, width, channels] uint8 pixels of a BMP."""
    return _op("DecodeBmp", [_contents(contents)], {"channels": int(channels)}, name)


def decode_webp(contents, channels=0, dtype=dtypes.uint8, name=None):
    """[height, width, channels] uint8 pixels of a (still) WebP."""
    return _op("DecodeWebP", [_contents(contents)],
               {"channels": int(channels), "dtype": dtypes.as_dtype(dtype)}, name)


def decode_image(contents, channels=None, dtype=dtypes.uint8, name=None,
                 expand_animations=True):
    """Decodes a BMP, GIF, JPEG, PNG or WebP, whichever the bytes are: 3-D
    [height, width, channels], or 4-D [frames, ...] for a GIF when
    ``expand_animations``. A float ``dtype`` rescales to [0, 1] as
    ``convert_image_dtype``."""
    dtype = dtypes.as_dtype(dtype)
    attrs = {"channels": int(channels or 0), "dtype": dtypes.uint8,
             "expand_animations": bool(expand_animations)}
    with get_default_graph().name_scope(name or "decode_image") as scope:
        out = _op("DecodeImage", [_contents(contents)], attrs, None)
        if dtype is dtypes.uint8:
            return _identity(out, name=scope)
        return convert_image_dtype(out, dtype, name=scope)


def _jpeg_roundtrip(image, quality, name):
    image = _image(image)
    if image.shape.rank != 3:
        raise ValueError("adjust_jpeg_quality takes a 3-D image [height, width, "
                         "channels]")
    orig = image.dtype.base_dtype
    with get_default_graph().name_scope(name) as scope:
        u8 = convert_image_dtype(image, dtypes.uint8, saturate=True)
        q = convert_to_tensor(quality, dtype=dtypes.int32, name="jpeg_quality")
        enc = image.graph.create_op("EncodeJpegVariableQuality", [u8, q], {},
                                    name="EncodeJpegVariableQuality").outputs[0]
        dec = decode_jpeg(enc, channels=0)
        dec.set_shape(image.shape)
        return convert_image_dtype(dec, orig, saturate=True, name=scope)


def adjust_jpeg_quality(image, jpeg_quality, dct_method="", name=None):
    """The image encoded as JPEG at ``jpeg_quality`` (0..100) and decoded again,
    in its own dtype."""
    return _jpeg_roundtrip(image, jpeg_quality, name or "adjust_jpeg_quality")


def random_jpeg_quality(image, min_jpeg_quality, max_jpeg_quality, seed=None):
    """adjust_jpeg_quality at a quality drawn uniformly from [min, max)."""
    from nbdist.ops.random_ops import random_uniform

    if not (0 <= min_jpeg_quality <= 100 and 0 <= max_jpeg_quality <= 100):
        raise ValueError("jpeg encoding range must be between 0 and 100.")
    if min_jpeg_quality >= max_jpeg_quality:
        raise ValueError("`min_jpeg_quality` must be less than `max_jpeg_quality`.")
    q = random_uniform([], min_jpeg_quality, max_jpeg_quality, dtype=dtypes.int32,
                       seed=seed)
    return _jpeg_roundtrip(image, q, "random_jpeg_quality")


__all__ = [
    "adjust_jpeg_quality", "decode_and_crop_jpeg", "decode_bmp", "decode_gif",
    "decode_image", "decode_jpeg", "decode_webp", "encode_jpeg",
    "extract_jpeg_shape", "is_jpeg", "random_jpeg_quality",
]
