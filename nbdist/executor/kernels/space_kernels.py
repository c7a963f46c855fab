"""NumPy kernels of ``nbdist.ops.array_ops_space``: space/batch and
space/depth rearrangements and ``ExtractImagePatches``."""

from __future__ import annotations

import itertools

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, ints, op_error
from nbdist.ops import array_ops_space  # noqa: F401  (registers the ops)
from nbdist.ops.array_ops_space import patch_geometry


def _block_args(node, x, block_shape, amounts, what):
    block = ints(block_shape)
    pads = np.asarray(amounts, np.int64).reshape(-1, 2) if np.size(amounts) else (
        np.zeros((0, 2), np.int64))
    m = len(block)
    if x.ndim < m + 1:
        raise op_error(node, f"input rank should be >= {m + 1} instead of {x.ndim}")
    if pads.shape[0] != m:
        raise op_error(node, f"{what} should have shape [{m}, 2] instead of "
                             f"{fmt(pads.shape)}")
    if any(b < 1 for b in block) or (pads < 0).any():
        raise op_error(node, f"block_shape must be positive and {what} "
                             "non-negative")
    return block, pads


@register_kernel("SpaceToBatchND")
def space_to_batch_kernel(node):
    def compute(step, x, block_shape, paddings):
        x = np.asarray(x)
        block, pads = _block_args(node, x, block_shape, paddings, "paddings")
        m = len(block)
        padded = np.pad(x, [(0, 0)] + pads.tolist() + [(0, 0)] * (x.ndim - 1 - m))
        for i, b in enumerate(block):
            if padded.shape[1 + i] % b:
                raise op_error(node, f"padded_shape[{i}]={padded.shape[1 + i]} is "
                                     f"not divisible by block_shape[{i}]={b}")
        batch, rest = padded.shape[0], padded.shape[1 + m:]
        split = [batch]
        for i, b in enumerate(block):
            split += [padded.shape[1 + i] // b, b]
        y = padded.reshape(split + list(rest))
        perm = ([2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
                + list(range(1 + 2 * m, y.ndim)))
        y = y.transpose(perm)
        return y.reshape([batch * int(np.prod(block))]
                         + [padded.shape[1 + i] // b for i, b in enumerate(block)]
                         + list(rest))

    return compute


@register_kernel("BatchToSpaceND")
def batch_to_space_kernel(node):
    def compute(step, x, block_shape, crops):
        x = np.asarray(x)
        block, crop = _block_args(node, x, block_shape, crops, "crops")
        m = len(block)
        prod = int(np.prod(block))
        if x.shape[0] % prod:
            raise op_error(node, f"Input batch dimension ({x.shape[0]}) is not "
                                 f"divisible by product of block sizes ({prod})")
        batch, space, rest = x.shape[0] // prod, x.shape[1:1 + m], x.shape[1 + m:]
        y = x.reshape(list(block) + [batch] + list(space) + list(rest))
        perm = [m]
        for i in range(m):
            perm += [m + 1 + i, i]
        perm += list(range(2 * m + 1, y.ndim))
        y = y.transpose(perm).reshape(
            [batch] + [s * b for s, b in zip(space, block)] + list(rest))
        at = [slice(None)]
        for i, (s, b) in enumerate(zip(space, block)):
            size = s * b - crop[i, 0] - crop[i, 1]
            if size < 0:
                raise op_error(node, f"cropped_shape[{i}]={size} must be "
                                     "non-negative")
            at.append(slice(int(crop[i, 0]), int(crop[i, 0]) + size))
        return np.ascontiguousarray(y[tuple(at)])

    return compute


def _depth_kernel(to_depth: bool):
    def factory(node):
        b = node.attrs["block_size"]

        def compute(step, x):
            x = np.asarray(x)
            if x.ndim != 4:
                raise op_error(node, f"Input rank should be: 4 instead of: "
                                     f"{x.ndim}")
            n, h, w, c = x.shape
            if to_depth:
                if h % b or w % b:
                    raise op_error(node, f"Image width {w} and height {h} should be "
                                         f"divisible by block_size: {b}")
                y = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
                return y.reshape(n, h // b, w // b, b * b * c)
            if c % (b * b):
                raise op_error(node, f"Input depth dimension {c} should be "
                                     f"divisible by: {b * b}")
            y = x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
            return y.reshape(n, h * b, w * b, c // (b * b))

        return compute

    return factory


register_kernel("SpaceToDepth")(_depth_kernel(True))
register_kernel("DepthToSpace")(_depth_kernel(False))


def extract_patches(x, ksizes, strides, rates, padding):
    """The patches of ``x`` (``[N, *spatial, D]``) flattened into the last
    dimension, in kernel-position-major, channel-minor order."""
    spatial = x.shape[1:-1]
    geometry = [patch_geometry(size, k, s, r, padding)
                for size, k, s, r in zip(spatial, ksizes, strides, rates)]
    out_sizes = [g[0] for g in geometry]
    out = np.zeros((x.shape[0], *out_sizes, *ksizes, x.shape[-1]), x.dtype)
    for pos in itertools.product(*[range(k) for k in ksizes]):
        block, ok = x, np.ones(out_sizes, bool)
        for d, (p, (n_out, before)) in enumerate(zip(pos, geometry)):
            at = np.arange(n_out) * strides[d] + p * rates[d] - before
            valid = (at >= 0) & (at < spatial[d])
            block = np.take(block, np.clip(at, 0, spatial[d] - 1), axis=1 + d)
            shape = [1] * len(spatial)
            shape[d] = n_out
            ok = ok & valid.reshape(shape)
        out[(slice(None),) * (1 + len(spatial)) + pos] = np.where(
            ok[None, ..., None], block, 0)
    return out.reshape(x.shape[0], *out_sizes, -1)


def _patches_kernel(rank: int):
    def factory(node):
        a = node.attrs
        ksizes = list(a["ksizes"][1:-1])
        strides = list(a["strides"][1:-1])
        rates = list(a["rates"][1:-1]) if "rates" in a else [1] * rank
        pad = a["padding"].decode() if isinstance(a["padding"], bytes) else (
            a["padding"])

        def compute(step, x):
            x = np.asarray(x)
            if x.ndim != rank + 2:
                raise op_error(node, f"input must be {rank + 2}-dimensional, got "
                                     f"{fmt(x.shape)}")
            return extract_patches(x, ksizes, strides, rates, pad)

        return compute

    return factory


register_kernel("ExtractImagePatches")(_patches_kernel(2))
register_kernel("ExtractVolumePatches")(_patches_kernel(3))
