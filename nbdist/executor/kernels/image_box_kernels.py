"""Kernels of the box and window ops: ``CropAndResize`` and its gradients,
``DrawBoundingBoxesV2``, ``SampleDistortedBoundingBoxV2``, ``ExtractGlimpse``
(``ExtractImagePatches``' kernel is in ``space_kernels``)."""

from __future__ import annotations

import threading

import numpy as np

import nbdist.ops.image_box_ops  # noqa: F401  (registers the op definitions)
from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.random_kernels import _generator


def _invalid(node, msg):
    return errors.InvalidArgumentError(None, node.name, msg)


# -- crop_and_resize -------------------------------------------------------------------
def _sample_points(lo, hi, n_in, n_out):
    """Source coordinates of ``n_out`` samples from ``lo`` to ``hi`` (normalised)
    and d(coordinate)/d(lo), d/d(hi)."""
    if n_out > 1:
        frac = np.arange(n_out) / (n_out - 1)
        pos = lo * (n_in - 1) + frac * (hi - lo) * (n_in - 1)
        return pos, (1 - frac) * (n_in - 1), frac * (n_in - 1)
    half = np.full(1, 0.5 * (n_in - 1))
    return np.full(1, 0.5 * (lo + hi) * (n_in - 1)), half, half


def _check_crop(node, image_shape, boxes, box_ind):
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise _invalid(node, f"boxes must be 2-D [num_boxes, 4], got "
                       f"{list(boxes.shape)}")
    if box_ind.shape != (boxes.shape[0],):
        raise _invalid(node, "box_index has incompatible shape")
    if np.any((box_ind < 0) | (box_ind >= image_shape[0])):
        raise _invalid(node, "box_index has values outside [0, batch_size)")
    if image_shape[1] <= 0 or image_shape[2] <= 0:
        raise _invalid(node, "image dimensions must be positive")


class _Taps:
    """Bilinear or nearest taps of one box along one axis."""

    def __init__(self, lo, hi, n_in, n_out, nearest):
        self.pos, self.dlo, self.dhi = _sample_points(lo, hi, n_in, n_out)
        self.valid = (self.pos >= 0) & (self.pos <= n_in - 1)
        p = np.clip(self.pos, 0, n_in - 1)
        if nearest:
            # std::round: halves away from zero (positions here are >= 0).
            self.a = self.b = np.floor(p + 0.5).astype(np.int64)
            self.lerp = np.zeros_like(p)
        else:
            self.a = np.floor(p).astype(np.int64)
            self.b = np.ceil(p).astype(np.int64)
            self.lerp = p - self.a


@register_kernel("CropAndResize")
def crop_and_resize_kernel(node):
    nearest = node.attrs["method"] == "nearest"
    fill = np.float32(node.attrs["extrapolation_value"])

    def compute(step, image, boxes, box_ind, crop_size):
        if image.ndim != 4:
            raise _invalid(node, f"input image must be 4-D, got {list(image.shape)}")
        _check_crop(node, image.shape, boxes, box_ind)
        ch, cw = (int(v) for v in np.ravel(crop_size))
        if ch <= 0 or cw <= 0:
            raise _invalid(node, "crop dimensions must be positive")
        n, h, w = boxes.shape[0], image.shape[1], image.shape[2]
        out = np.empty((n, ch, cw, image.shape[3]), np.float32)
        for k in range(n):
            y1, x1, y2, x2 = (float(v) for v in boxes[k])
            ty = _Taps(y1, y2, h, ch, nearest)
            tx = _Taps(x1, x2, w, cw, nearest)
            img = image[box_ind[k]].astype(np.float32)
            top = img[ty.a]
            bot = img[ty.b]
            ly, lx = ty.lerp[:, None, None], tx.lerp[None, :, None]
            t = top[:, tx.a] + (top[:, tx.b] - top[:, tx.a]) * lx
            b = bot[:, tx.a] + (bot[:, tx.b] - bot[:, tx.a]) * lx
            crop = t + (b - t) * ly
            crop[~ty.valid] = fill
            crop[:, ~tx.valid] = fill
            out[k] = crop
        return out

    return compute


@register_kernel("CropAndResizeGradImage")
def crop_and_resize_grad_image_kernel(node):
    nearest = node.attrs["method"] == "nearest"
    dt = node.attrs["T"].as_numpy_dtype

    def compute(step, grads, boxes, box_ind, image_size):
        shape = [int(v) for v in np.ravel(image_size)]
        _check_crop(node, shape, boxes, box_ind)
        out = np.zeros(shape, np.float64)
        h, w = shape[1], shape[2]
        ch, cw = grads.shape[1], grads.shape[2]
        for k in range(boxes.shape[0]):
            y1, x1, y2, x2 = (float(v) for v in boxes[k])
            ty, tx = _Taps(y1, y2, h, ch, nearest), _Taps(x1, x2, w, cw, nearest)
            g = grads[k].astype(np.float64) * (ty.valid[:, None, None] &
                                               tx.valid[None, :, None])
            ly, lx = ty.lerp[:, None, None], tx.lerp[None, :, None]
            img = out[box_ind[k]]
            for rows, wy in ((ty.a, 1 - ly), (ty.b, ly)):
                for cols, wx in ((tx.a, 1 - lx), (tx.b, lx)):
                    np.add.at(img, (rows[:, None], cols[None, :]), g * wy * wx)
        return out.astype(dt)

    return compute


@register_kernel("CropAndResizeGradBoxes")
def crop_and_resize_grad_boxes_kernel(node):
    def compute(step, grads, image, boxes, box_ind):
        _check_crop(node, image.shape, boxes, box_ind)
        h, w = image.shape[1], image.shape[2]
        ch, cw = grads.shape[1], grads.shape[2]
        out = np.zeros((boxes.shape[0], 4), np.float32)
        for k in range(boxes.shape[0]):
            y1, x1, y2, x2 = (float(v) for v in boxes[k])
            ty, tx = _Taps(y1, y2, h, ch, False), _Taps(x1, x2, w, cw, False)
            img = image[box_ind[k]].astype(np.float64)
            g = grads[k].astype(np.float64) * (ty.valid[:, None, None] &
                                               tx.valid[None, :, None])
            top, bot = img[ty.a], img[ty.b]
            tl, tr = top[:, tx.a], top[:, tx.b]
            bl, br = bot[:, tx.a], bot[:, tx.b]
            lx, ly = tx.lerp[None, :, None], ty.lerp[:, None, None]
            d_dy = (bl + (br - bl) * lx) - (tl + (tr - tl) * lx)   # d crop / d y
            d_dx = (1 - ly) * (tr - tl) + ly * (br - bl)           # d crop / d x
            gy = (g * d_dy).sum(axis=(1, 2))
            gx = (g * d_dx).sum(axis=(0, 2))
            out[k] = [gy @ ty.dlo, gx @ tx.dlo, gy @ ty.dhi, gx @ tx.dhi]
        return out

    return compute


# -- draw_bounding_boxes ---------------------------------------------------------------
_DEFAULT_COLORS = np.array([
    [1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1], [0.5, 0, 0.5, 1],
    [0.5, 0.5, 0, 1], [0.5, 0, 0, 1], [0, 0, 0.5, 1], [0, 1, 1, 1], [1, 0, 1, 1],
], np.float32)


@register_kernel("DrawBoundingBoxesV2")
def draw_bounding_boxes_kernel(node):
    def compute(step, images, boxes, colors):
        if images.ndim != 4 or images.shape[3] not in (1, 3, 4):
            raise _invalid(node, "Channel depth should be either 1 (GRY), 3 (RGB), "
                           "or 4 (RGBA)")
        if boxes.ndim != 3 or boxes.shape[0] != images.shape[0] or \
                boxes.shape[2] != 4:
            raise _invalid(node, "boxes must be 3-D [batch, num_boxes, 4]")
        table = colors if colors.size else _DEFAULT_COLORS
        if table.ndim != 2 or table.shape[1] < images.shape[3]:
            raise _invalid(node, "colors must be 2-D [num_colors, 4]")
        out = images.copy()
        _, h, w, depth = images.shape
        for b in range(boxes.shape[0]):
            for i, box in enumerate(boxes[b]):
                color = table[i % len(table), :depth]
                # C++'s truncation toward zero, as TF.
                r0, r1 = int(np.float32(box[0]) * (h - 1)), int(np.float32(box[2]) *
                                                                 (h - 1))
                c0, c1 = int(np.float32(box[1]) * (w - 1)), int(np.float32(box[3]) *
                                                                 (w - 1))
                if r0 > r1 or c0 > c1 or r0 >= h or r1 < 0 or c0 >= w or c1 < 0:
                    continue
                rr = slice(max(r0, 0), min(r1, h - 1) + 1)
                cc = slice(max(c0, 0), min(c1, w - 1) + 1)
                if r0 >= 0:
                    out[b, r0, cc] = color
                if r1 < h:
                    out[b, r1, cc] = color
                if c0 >= 0:
                    out[b, rr, c0] = color
                if c1 < w:
                    out[b, rr, c1] = color
        return out

    return compute


# -- sample_distorted_bounding_box -----------------------------------------------------
def _random_crop(gen, w, h, min_area, max_area, ratio):
    """(x, y, cw, ch) of a crop with aspect ``ratio`` and area in range, or None."""
    height = int(np.rint(np.sqrt(min_area / ratio)))
    max_height = int(np.rint(np.sqrt(max_area / ratio)))
    if np.rint(max_height * ratio) > w:
        max_height = int((w + 0.5 - 1e-7) / ratio)
    max_height = min(max_height, h)
    height = min(height, max_height)
    if height < max_height:
        height += int(gen.integers(0, max_height - height + 1))
    width = int(np.rint(height * ratio))
    area = width * height
    if area < min_area:
        height += 1
        width = int(np.rint(height * ratio))
    elif area > max_area:
        height -= 1
        width = int(np.rint(height * ratio))
    area = width * height
    if not (min_area <= area <= max_area) or width > w or height > h or \
            width <= 0 or height <= 0:
        return None
    y = int(gen.integers(0, h - height + 1)) if h > height else 0
    x = int(gen.integers(0, w - width + 1)) if w > width else 0
    return x, y, width, height


def _covers(crop, boxes, min_covered):
    x, y, cw, ch = crop
    for ymin, xmin, ymax, xmax in boxes:
        iy = max(0.0, min(y + ch, ymax) - max(y, ymin))
        ix = max(0.0, min(x + cw, xmax) - max(x, xmin))
        area = (ymax - ymin) * (xmax - xmin)
        if area > 0 and iy * ix / area >= min_covered:
            return True
    return False


@register_kernel("SampleDistortedBoundingBoxV2")
def sample_distorted_bounding_box_kernel(node):
    gen = _generator(node)
    lock = threading.Lock()
    a = node.attrs
    lo_ratio, hi_ratio = a["aspect_ratio_range"]
    lo_area, hi_area = a["area_range"]

    def compute(step, image_size, boxes, min_covered):
        size = np.ravel(image_size)
        if size.size != 3 or size[0] <= 0 or size[1] <= 0:
            raise _invalid(node, f"image_size must contain 3 elements, height and "
                           f"width positive, got {size.tolist()}")
        h, w = int(size[0]), int(size[1])
        b = np.asarray(boxes, np.float64).reshape(-1, 4)
        if np.any((b < 0) | (b > 1)):
            raise _invalid(node, "All bounding box coordinates must be in [0.0, "
                           "1.0]")
        if np.any(b[:, 0] >= b[:, 2]) or np.any(b[:, 1] >= b[:, 3]):
            raise _invalid(node, "All bounding boxes must have ymin < ymax and "
                           "xmin < xmax")
        if b.size == 0:
            if not a["use_image_if_no_bounding_boxes"]:
                raise _invalid(node, "No bounding boxes provided as input. One must "
                               "enable use_image_if_no_bounding_boxes if you wish "
                               "to not provide any bounding boxes.")
            b = np.array([[0.0, 0.0, 1.0, 1.0]])
        pixel_boxes = b * [h, w, h, w]
        crop = None
        with lock:
            for _ in range(a["max_attempts"]):
                ratio = gen.uniform(lo_ratio, hi_ratio)
                cand = _random_crop(gen, w, h, lo_area * w * h, hi_area * w * h,
                                    ratio)
                if cand is not None and _covers(cand, pixel_boxes,
                                                float(min_covered)):
                    crop = cand
                    break
        x, y, cw, ch = crop or (0, 0, w, h)
        dt = image_size.dtype
        return (np.array([y, x, 0], dt), np.array([ch, cw, -1], dt),
                np.array([[[y / h, x / w, (y + ch) / h, (x + cw) / w]]], np.float32))

    return compute


# -- extract_glimpse -------------------------------------------------------------------
@register_kernel("ExtractGlimpse")
def extract_glimpse_kernel(node):
    gen = _generator_unseeded()
    lock = threading.Lock()
    a = node.attrs

    def compute(step, images, size, offsets):
        gh, gw = (int(v) for v in np.ravel(size))
        n, h, w, d = images.shape
        if offsets.shape != (n, 2):
            raise _invalid(node, f"offsets must be [batch, 2], got "
                           f"{list(offsets.shape)}")
        out = np.zeros((n, gh, gw, d), np.float32)
        for i in range(n):
            y, x = (np.float32(v) for v in offsets[i])
            if a["normalized"]:
                x, y = x * np.float32(w), y * np.float32(h)
            if a["centered"]:
                x, y = x / 2 + np.float32(w / 2.0), y / 2 + np.float32(h / 2.0)
            x, y = int(x - np.float32(gw / 2.0)), int(y - np.float32(gh / 2.0))
            img = images[i]
            if a["noise"] == "uniform":
                with lock:
                    r = gen.random((gh, gw, d), dtype=np.float32)
                out[i] = img.min() + (img.max() - img.min()) * r
            elif a["noise"] == "gaussian":
                with lock:
                    r = gen.standard_normal((gh, gw, d), dtype=np.float32)
                out[i] = img.mean((0, 1)) + img.std((0, 1)) * r
            ys = slice(max(y, 0), min(y + gh, h))
            xs = slice(max(x, 0), min(x + gw, w))
            if ys.start < ys.stop and xs.start < xs.stop:
                out[i, ys.start - y:ys.stop - y, xs.start - x:xs.stop - x] = img[ys, xs]
        return out

    return compute


def _generator_unseeded():
    return np.random.Generator(np.random.Philox())
