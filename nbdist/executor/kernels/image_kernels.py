"""Kernels for the image ops: resizing (and its gradients), PNG decode/encode.

Resizing is separable: bilinear is ``A_h @ image @ A_w^T`` per channel, with
interpolation matrices of two nonzeros a row, so the forward pass and the
gradient are two ``tensordot`` calls each. Nearest neighbour gathers rows and
columns. Pixel mapping follows TF: legacy (``i * in / out``), ``align_corners``
(``i * (in - 1) / (out - 1)``) or ``half_pixel_centers``.
"""

from __future__ import annotations

import io

import numpy as np

import nbdist.ops.image_ops  # noqa: F401  (registers the op definitions)
import nbdist.ops.image_resize_ops  # noqa: F401
from nbdist import errors
from nbdist.executor.kernel import register_kernel


def _invalid(node, msg):
    return errors.InvalidArgumentError(None, node.name, msg)


def _scale(n_in, n_out, align):
    if align and n_out > 1:
        return (n_in - 1) / (n_out - 1)
    return n_in / n_out


def _source(node, n_in, n_out):
    """Input coordinate of each output pixel (float)."""
    scale = _scale(n_in, n_out, node.attrs["align_corners"])
    out = np.arange(n_out, dtype=np.float64)
    if node.attrs["half_pixel_centers"]:
        return (out + 0.5) * scale - 0.5
    return out * scale


def bilinear_matrix(node, n_in, n_out):
    """[n_out, n_in]: row i holds output pixel i's two interpolation weights."""
    src = _source(node, n_in, n_out)
    lo_f = np.floor(src)
    lerp = src - lo_f
    lo = np.clip(lo_f, 0, n_in - 1).astype(np.int64)
    hi = np.clip(np.ceil(src), 0, n_in - 1).astype(np.int64)
    m = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    np.add.at(m, (rows, lo), 1 - lerp)
    np.add.at(m, (rows, hi), lerp)
    return m


def nearest_index(node, n_in, n_out):
    scale = _scale(n_in, n_out, node.attrs["align_corners"])
    out = np.arange(n_out, dtype=np.float64)
    if node.attrs["half_pixel_centers"]:
        src = np.floor((out + 0.5) * scale)
    elif node.attrs["align_corners"]:
        src = np.floor(out * scale + 0.5)      # TF rounds half away from zero
    else:
        src = np.floor(out * scale)
    return np.minimum(src, n_in - 1).astype(np.int64)


def _size(node, size):
    size = np.asarray(size).ravel()
    if size.size != 2 or np.any(size <= 0):
        raise _invalid(node, f"size must be 2 positive values, got {size.tolist()}")
    return int(size[0]), int(size[1])


def _check_images(node, x):
    if x.ndim != 4:
        raise _invalid(node, f"input must be 4-dimensional: {list(x.shape)}")
    if x.shape[1] == 0 or x.shape[2] == 0:
        raise _invalid(node, f"input image must be of non-zero size, got "
                       f"{list(x.shape)}")


def _apply(mh, mw, x, dtype):
    """out[n, i, j, c] = sum mh[i, h] * mw[j, w] * x[n, h, w, c]."""
    t = np.tensordot(mh.astype(dtype), x.astype(dtype, copy=False), ([1], [1]))
    t = np.tensordot(mw.astype(dtype), t, ([1], [2]))     # [j, i, n, c]
    return np.ascontiguousarray(t.transpose(2, 1, 0, 3))


@register_kernel("ResizeBilinear")
def resize_bilinear_kernel(node):
    def compute(step, x, size):
        _check_images(node, x)
        oh, ow = _size(node, size)
        mh = bilinear_matrix(node, x.shape[1], oh)
        mw = bilinear_matrix(node, x.shape[2], ow)
        return _apply(mh, mw, x, np.float32)

    return compute


def _matrix_resize_grad(matrix_fn, node, grads, original):
    """The adjoint of a separable resize: the transposed matrices."""
    _check_images(node, original)
    mh = matrix_fn(node, original.shape[1], grads.shape[1])
    mw = matrix_fn(node, original.shape[2], grads.shape[2])
    return _apply(mh.T, mw.T, grads, original.dtype)


@register_kernel("ResizeBilinearGrad")
def resize_bilinear_grad_kernel(node):
    return lambda step, g, original: _matrix_resize_grad(bilinear_matrix, node, g,
                                                         original)


@register_kernel("ResizeNearestNeighbor")
def resize_nearest_kernel(node):
    def compute(step, x, size):
        _check_images(node, x)
        oh, ow = _size(node, size)
        rows = nearest_index(node, x.shape[1], oh)
        cols = nearest_index(node, x.shape[2], ow)
        return np.ascontiguousarray(x[:, rows][:, :, cols])

    return compute


@register_kernel("ResizeNearestNeighborGrad")
def resize_nearest_grad_kernel(node):
    def compute(step, grads, size):
        h, w = _size(node, size)
        rows = nearest_index(node, h, grads.shape[1])
        cols = nearest_index(node, w, grads.shape[2])
        mh = np.zeros((grads.shape[1], h))
        mh[np.arange(grads.shape[1]), rows] = 1
        mw = np.zeros((grads.shape[2], w))
        mw[np.arange(grads.shape[2]), cols] = 1
        return _apply(mh.T, mw.T, grads, grads.dtype)

    return compute


def _keys(x, a):
    """Keys' cubic convolution kernel at distances ``x`` (any shape)."""
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def bicubic_matrix(node, n_in, n_out):
    """[n_out, n_in] bicubic weights: four taps around each source position."""
    half = node.attrs["half_pixel_centers"]
    src = _source(node, n_in, n_out)
    base = np.floor(src)
    t = src - base
    t = np.round(t * 1024) / 1024         # TF reads the kernel from a 1024-entry table
    a = -0.5 if half else -0.75
    m = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    taps = [base + k for k in (-1, 0, 1, 2)]
    weights = [_keys(d, a) for d in (1 + t, t, 1 - t, 2 - t)]
    if half:
        inside = [(i >= 0) & (i < n_in) for i in taps]
        total = sum(w * ok for w, ok in zip(weights, inside))
        weights = [w * ok / total for w, ok in zip(weights, inside)]
    for i, w in zip(taps, weights):
        np.add.at(m, (rows, np.clip(i, 0, n_in - 1).astype(np.int64)), w)
    return m


def area_matrix(node, n_in, n_out):
    """[n_out, n_in]: the share of each input pixel in each output pixel."""
    scale = _scale(n_in, n_out, node.attrs["align_corners"])
    lo = np.arange(n_out) * scale
    hi = lo + scale
    edges = np.arange(n_in)
    overlap = np.minimum(edges[None, :] + 1, hi[:, None]) - np.maximum(
        edges[None, :], lo[:, None])
    m = np.clip(overlap, 0, None) / scale
    # Windows reaching past the last pixel (align_corners) count it again, as TF
    # clamps the index.
    spill = np.clip(hi - n_in, 0, None) / scale
    m[:, -1] += spill
    return m


def _matrix_resize(matrix_fn, node, x, size):
    _check_images(node, x)
    oh, ow = _size(node, size)
    return _apply(matrix_fn(node, x.shape[1], oh), matrix_fn(node, x.shape[2], ow),
                  x, np.float32)


@register_kernel("ResizeBicubic")
def resize_bicubic_kernel(node):
    return lambda step, x, size: _matrix_resize(bicubic_matrix, node, x, size)


@register_kernel("ResizeArea")
def resize_area_kernel(node):
    return lambda step, x, size: _matrix_resize(area_matrix, node, x, size)


@register_kernel("ResizeBicubicGrad")
def resize_bicubic_grad_kernel(node):
    return lambda step, g, original: _matrix_resize_grad(bicubic_matrix, node, g,
                                                         original)


# -- PNG -------------------------------------------------------------------------------
_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


@register_kernel("DecodePng")
def decode_png_kernel(node):
    channels = node.attrs["channels"]

    def compute(step, contents):
        from PIL import Image

        data = contents.item() if isinstance(contents, np.ndarray) else contents
        try:
            img = Image.open(io.BytesIO(bytes(data)))
            if img.format != "PNG":
                raise ValueError(f"not a PNG but {img.format}")
            img.load()
        except Exception as e:  # Pillow raises many kinds for bad data
            raise _invalid(node, f"Invalid PNG data, size {len(data)}: {e}") from None
        if img.mode.startswith("I"):
            # 16-bit PNG: scaled to 8 bits (nbdist has no uint16).
            img = Image.fromarray((np.asarray(img).astype(np.uint32) // 257).astype(
                np.uint8))
        if img.mode == "1":
            img = img.convert("L")              # 1-bit gray: one 0/255 channel
        if channels:
            img = img.convert(_MODES[channels])
        elif img.mode not in _MODES.values():
            img = img.convert("RGBA" if "transparency" in img.info else "RGB")
        arr = np.asarray(img)
        arr = arr[..., None] if arr.ndim == 2 else arr
        return np.ascontiguousarray(arr)

    return compute


@register_kernel("EncodePng")
def encode_png_kernel(node):
    level = node.attrs["compression"]

    def compute(step, image):
        from PIL import Image

        if image.ndim != 3 or image.shape[2] not in (1, 2, 3, 4):
            raise _invalid(node, f"image must be [height, width, 1..4 channels], got "
                           f"{list(image.shape)}")
        c = image.shape[2]
        img = Image.fromarray(np.ascontiguousarray(image[..., 0] if c == 1 else image))
        buf = io.BytesIO()
        img.save(buf, format="PNG", compress_level=6 if level < 0 else level)
        return np.asarray(buf.getvalue(), dtype=object)

    return compute
