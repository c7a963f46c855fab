"""Kernels of the JPEG, GIF, BMP, WebP codecs and ``DecodeImage`` (Pillow)."""

from __future__ import annotations

import io

import numpy as np

import nbdist.ops.image_codec_ops  # noqa: F401  (registers the op definitions)
from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.image_kernels import decode_png_kernel

_MODES = {1: "L", 3: "RGB", 4: "RGBA"}
_SNIFF = (("JPEG", b"\xff\xd8\xff"), ("PNG", b"\x89PNG"), ("GIF", b"GIF8"),
          ("BMP", b"BM"))


def _invalid(node, msg):
    return errors.InvalidArgumentError(None, node.name, msg)


def _bytes(contents):
    data = contents.item() if isinstance(contents, np.ndarray) else contents
    return bytes(data)


def _open(node, data, fmt, what):
    from PIL import Image

    try:
        img = Image.open(io.BytesIO(data))
        if fmt and img.format != fmt:
            raise ValueError(f"not {fmt} but {img.format}")
        img.load()
    except Exception as e:  # Pillow raises many kinds for bad data
        raise _invalid(node, f"Invalid {what} data or crop window, data size "
                       f"{len(data)}: {e}") from None
    return img


def _pixels(img, channels):
    """[h, w, c] uint8 of a Pillow image; ``channels`` 0 keeps gray gray."""
    if channels:
        img = img.convert(_MODES[channels])
    elif img.mode not in ("L", "RGB", "RGBA"):
        img = img.convert("RGBA" if "transparency" in img.info or img.mode == "LA"
                          else "RGB")
    arr = np.asarray(img)
    return np.ascontiguousarray(arr[..., None] if arr.ndim == 2 else arr)


def _decode_jpeg(node, data, crop=None):
    img = _open(node, data, "JPEG", "JPEG")
    ratio = node.attrs["ratio"]
    if ratio > 1:
        img = img.reduce(ratio)
    channels = node.attrs["channels"]
    if img.mode == "CMYK" and not channels:
        channels = 3
    arr = _pixels(img, channels)
    if crop is not None:
        y, x, h, w = (int(v) for v in np.ravel(crop))
        if y < 0 or x < 0 or h <= 0 or w <= 0 or y + h > arr.shape[0] or \
                x + w > arr.shape[1]:
            raise _invalid(node, f"Invalid JPEG data or crop window: crop "
                           f"[{y}, {x}, {h}, {w}] of a {arr.shape[0]}x"
                           f"{arr.shape[1]} image")
        arr = np.ascontiguousarray(arr[y:y + h, x:x + w])
    return arr


@register_kernel("DecodeJpeg")
def decode_jpeg_kernel(node):
    return lambda step, contents: _decode_jpeg(node, _bytes(contents))


@register_kernel("DecodeAndCropJpeg")
def decode_and_crop_jpeg_kernel(node):
    return lambda step, contents, crop: _decode_jpeg(node, _bytes(contents), crop)


def _encode_jpeg(node, image, quality):
    from PIL import Image

    if image.ndim != 3 or image.shape[2] not in (1, 3):
        raise _invalid(node, f"image must be 3-dimensional with 1 or 3 channels, "
                       f"got {list(image.shape)}")
    fmt = node.attrs.get("format", "")
    if fmt == "grayscale" and image.shape[2] != 1 or fmt == "rgb" and \
            image.shape[2] != 3:
        raise _invalid(node, f"format '{fmt}' does not match {image.shape[2]} "
                       f"channels")
    img = Image.fromarray(np.ascontiguousarray(
        image[..., 0] if image.shape[2] == 1 else image))
    a = node.attrs
    buf = io.BytesIO()
    dpi = (a.get("x_density", 300), a.get("y_density", 300))
    img.save(buf, format="JPEG", quality=int(min(max(quality, 0), 100)),
             progressive=a.get("progressive", False),
             optimize=a.get("optimize_size", False),
             subsampling=2 if a.get("chroma_downsampling", True) else 0, dpi=dpi)
    return np.asarray(buf.getvalue(), dtype=object)


@register_kernel("EncodeJpeg")
def encode_jpeg_kernel(node):
    return lambda step, image: _encode_jpeg(node, image, node.attrs["quality"])


@register_kernel("EncodeJpegVariableQuality")
def encode_jpeg_variable_quality_kernel(node):
    def compute(step, image, quality):
        q = int(np.asarray(quality))
        if not 0 <= q <= 100:
            raise _invalid(node, f"quality must be in [0,100], got {q}")
        return _encode_jpeg(node, image, q)

    return compute


@register_kernel("ExtractJpegShape")
def extract_jpeg_shape_kernel(node):
    dt = node.attrs["output_type"].as_numpy_dtype

    def compute(step, contents):
        from PIL import Image

        data = _bytes(contents)
        try:
            img = Image.open(io.BytesIO(data))     # reads the header only
            if img.format != "JPEG":
                raise ValueError(f"not JPEG but {img.format}")
        except Exception as e:  # Pillow raises many kinds for bad data
            raise _invalid(node, f"Invalid JPEG data, size {len(data)}: {e}"
                           ) from None
        c = {"L": 1, "RGB": 3, "CMYK": 4}.get(img.mode, len(img.getbands()))
        return np.array([img.height, img.width, c], dt)

    return compute


def _gif_frames(node, data):
    from PIL import ImageSequence

    img = _open(node, data, "GIF", "GIF")
    frames = [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(img)]
    return np.ascontiguousarray(np.stack(frames))


@register_kernel("DecodeGif")
def decode_gif_kernel(node):
    return lambda step, contents: _gif_frames(node, _bytes(contents))


def _decode_still(node, data, fmt):
    img = _open(node, data, fmt, fmt)
    return _pixels(img, node.attrs["channels"])


@register_kernel("DecodeBmp")
def decode_bmp_kernel(node):
    return lambda step, contents: _decode_still(node, _bytes(contents), "BMP")


@register_kernel("DecodeWebP")
def decode_webp_kernel(node):
    return lambda step, contents: _decode_still(node, _bytes(contents), "WEBP")


@register_kernel("DecodeImage")
def decode_image_kernel(node):
    channels = node.attrs["channels"]
    png = decode_png_kernel(node)

    def compute(step, contents):
        data = _bytes(contents)
        fmt = next((f for f, magic in _SNIFF if data.startswith(magic)), None)
        if fmt is None and data[8:12] == b"WEBP":
            fmt = "WEBP"
        if fmt is None:
            raise _invalid(node, "Unknown image file format. One of JPEG, PNG, GIF, "
                           "BMP required.")
        if fmt == "GIF":
            if channels not in (0, 3):
                raise _invalid(node, f"channels must be 0 or 3 for GIF, got "
                               f"{channels}")
            frames = _gif_frames(node, data)
            return frames if node.attrs["expand_animations"] else frames[0]
        if fmt == "PNG":
            return png(step, contents)
        if fmt == "JPEG":
            if channels == 4:
                raise _invalid(node, "channels must be 0, 1 or 3 for JPEG")
            return _pixels(_open(node, data, "JPEG", "JPEG"), channels or 0)
        return _decode_still(node, data, fmt)

    return compute
