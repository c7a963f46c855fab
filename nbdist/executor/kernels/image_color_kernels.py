"""Kernels of ``RGBToHSV`` and ``HSVToRGB`` (TF's formulas, elementwise)."""

from __future__ import annotations

import numpy as np

import nbdist.ops.image_color_ops  # noqa: F401  (registers the op definitions)
from nbdist import errors
from nbdist.executor.kernel import register_kernel


def _check(node, x):
    if x.ndim < 1 or x.shape[-1] != 3:
        raise errors.InvalidArgumentError(
            None, node.name, f"input must have 3 channels but input only has "
            f"{x.shape[-1] if x.ndim else 0} channels.")


@register_kernel("RGBToHSV")
def rgb_to_hsv_kernel(node):
    def compute(step, x):
        _check(node, x)
        r, g, b = x[..., 0], x[..., 1], x[..., 2]
        v = np.max(x, -1)
        rng = v - np.min(x, -1)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.where(v > 0, rng / np.where(v > 0, v, 1), 0)
            safe = np.where(rng > 0, rng, 1)
            h = np.where(v == r, (g - b) / safe,
                         np.where(v == g, (b - r) / safe + 2, (r - g) / safe + 4))
        h = np.where(rng > 0, h / 6.0, 0)
        h = np.where(h < 0, h + 1, h)
        return np.stack([h, s, v], -1).astype(x.dtype)

    return compute


@register_kernel("HSVToRGB")
def hsv_to_rgb_kernel(node):
    def compute(step, x):
        _check(node, x)
        h, s, v = x[..., 0], x[..., 1], x[..., 2]
        dh = h * 6
        dr = np.clip(np.abs(dh - 3) - 1, 0, 1)
        dg = np.clip(2 - np.abs(dh - 2), 0, 1)
        db = np.clip(2 - np.abs(dh - 4), 0, 1)
        base = 1 - s
        out = np.stack([(base + s * d) * v for d in (dr, dg, db)], -1)
        return out.astype(x.dtype)

    return compute
