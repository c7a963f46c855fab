"""Kernels of the summary ops: each returns a serialized ``Summary`` (a scalar
string), as TF's ``summary_op.cc``, ``summary_image_op.cc`` and
``summary_tensor_op.cc``. Histograms use TF's default buckets
(``histogram.cc``); images are PNG-encoded with Pillow.
"""

from __future__ import annotations

import io
import sys

import numpy as np
from google.protobuf.message import DecodeError
from PIL import Image

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, op_error
from nbdist.graph import summary_ops  # noqa: F401  (registers the op definitions)
from nbdist.graph.tensor_util import make_tensor_proto
from nbdist.proto import summary_pb2

_DBL_MAX = sys.float_info.max


def _default_bucket_limits() -> np.ndarray:
    # TF's InitDefaultBucketsInner: limits growing by 10% from 1e-12 to 1e20,
    # mirrored below zero, with -DBL_MAX, 0 and DBL_MAX as the edges.
    positive = []
    v = 1.0e-12
    while v < 1.0e20:
        positive.append(v)
        v *= 1.1
    positive.append(_DBL_MAX)
    return np.array([-x for x in reversed(positive)] + [0.0] + positive)


_BUCKET_LIMITS = _default_bucket_limits()


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _bytes(value) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def _scalar_string(node, value, what: str):
    a = np.asarray(value)
    if a.shape != ():
        raise op_error(node, f"{what} must be scalar, got shape {fmt(a.shape)}")
    return a.item()


def _serialized(summary: summary_pb2.Summary) -> np.ndarray:
    return np.array(summary.SerializeToString(), dtype=object)


def histogram_proto(values: np.ndarray) -> summary_pb2.HistogramProto:
    """TF's ``Histogram::EncodeToProto`` of finite ``values`` over the default
    buckets: each run of empty buckets becomes one entry (its last limit)."""
    x = np.asarray(values, dtype=np.float64).ravel()
    index = np.minimum(
        np.searchsorted(_BUCKET_LIMITS, x, side="right"), len(_BUCKET_LIMITS) - 1
    )
    counts = np.bincount(index, minlength=len(_BUCKET_LIMITS)).astype(np.float64)
    filled = counts > 0
    keep = filled | np.append(filled[1:], True)
    return summary_pb2.HistogramProto(
        min=float(x.min()) if x.size else _DBL_MAX,
        max=float(x.max()) if x.size else -_DBL_MAX,
        num=float(x.size),
        sum=float(x.sum()),
        sum_squares=float(np.dot(x, x)),
        bucket_limit=_BUCKET_LIMITS[keep].tolist(),
        bucket=counts[keep].tolist(),
    )


@register_kernel("ScalarSummary")
def scalar_summary_kernel(node):
    def compute(step, tags, values):
        tags, values = np.asarray(tags), np.asarray(values)
        if tags.shape != values.shape:
            raise op_error(
                node,
                "tags and values are not the same shape: "
                f"{fmt(tags.shape)} != {fmt(values.shape)}",
            )
        summary = summary_pb2.Summary()
        for tag, value in zip(tags.flat, values.flat):
            summary.value.add(tag=_text(tag), simple_value=float(value))
        return _serialized(summary)

    return compute


@register_kernel("HistogramSummary")
def histogram_summary_kernel(node):
    def compute(step, tag, values):
        tag = _text(_scalar_string(node, tag, "tag"))
        values = np.asarray(values)
        if not np.all(np.isfinite(values)):
            raise op_error(node, f"Nan in summary histogram for: {tag}")
        summary = summary_pb2.Summary()
        summary.value.add(tag=tag, histo=histogram_proto(values))
        return _serialized(summary)

    return compute


def _float_image_to_uint8(image: np.ndarray, bad_color: np.ndarray) -> np.ndarray:
    """TF's ``NormalizeFloatImage``: all values >= 0 scale by 255/max, else centre
    on 128 and scale by 127/max(|v|); pixels with a non-finite channel get
    ``bad_color``. As in TF, min, max and scale are float32 and the affine map
    runs in the image's own dtype."""
    finite = np.all(np.isfinite(image), axis=-1)
    good = image[finite].astype(np.float32)
    lo = good.min() if good.size else np.float32(np.inf)
    hi = good.max() if good.size else np.float32(-np.inf)
    if lo < 0:
        max_val = max(abs(lo), abs(hi))
        scale = np.float32(0.0) if max_val < 1e-6 else np.float32(127.0) / max_val
        offset = 128.0
    else:
        scale = np.float32(0.0) if hi < 1e-6 else np.float32(255.0) / hi
        offset = 0.0
    t = image.dtype.type
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = image * t(scale) + t(offset)
    out = np.clip(np.where(finite[..., None], scaled, 0), 0, 255).astype(np.uint8)
    out[~finite] = bad_color[: image.shape[-1]]
    return out


def png_bytes(image: np.ndarray) -> bytes:
    """``image`` (uint8, height x width x 1, 3 or 4 channels) as PNG bytes."""
    pixels = image[:, :, 0] if image.shape[-1] == 1 else image
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(buffer, format="PNG")
    return buffer.getvalue()


@register_kernel("ImageSummary")
def image_summary_kernel(node):
    max_images = int(node.attrs["max_images"])
    bad_color = np.asarray(node.attrs["bad_color"], dtype=np.uint8).ravel()

    def compute(step, tag, tensor):
        tag = _text(_scalar_string(node, tag, "tag"))
        t = np.asarray(tensor)
        if t.ndim != 4 or t.shape[3] not in (1, 3, 4):
            raise op_error(
                node, f"Tensor must be 4-D with last dim 1, 3, or 4, not {fmt(t.shape)}"
            )
        if t.shape[1] * t.shape[2] >= 1 << 29:
            raise op_error(node, f"Tensor too large for summary {fmt(t.shape)}")
        if t.dtype != np.uint8 and bad_color.size < t.shape[3]:
            raise op_error(
                node,
                f"expected depth <= bad_color.size, got depth = {t.shape[3]}, "
                f"bad_color.size = {bad_color.size}",
            )
        n = min(max_images, t.shape[0])
        summary = summary_pb2.Summary()
        for i in range(n):
            image = (
                t[i] if t.dtype == np.uint8 else _float_image_to_uint8(t[i], bad_color)
            )
            # As TF: the tag follows max_images, not how many images there are.
            value = summary.value.add(
                tag=f"{tag}/image/{i}" if max_images > 1 else f"{tag}/image"
            )
            value.image.height, value.image.width = image.shape[0], image.shape[1]
            value.image.colorspace = image.shape[2]
            value.image.encoded_image_string = png_bytes(image)
        return _serialized(summary)

    return compute


@register_kernel("TensorSummaryV2")
def tensor_summary_kernel(node):
    def compute(step, tag, tensor, serialized_summary_metadata):
        value = summary_pb2.Summary.Value(tag=_text(_scalar_string(node, tag, "tag")))
        metadata = _bytes(
            _scalar_string(
                node, serialized_summary_metadata, "serialized_summary_metadata"
            )
        )
        if metadata:
            try:
                value.metadata.ParseFromString(metadata)
            except DecodeError as e:
                raise op_error(node, f"Could not parse summary metadata: {e}") from e
        value.tensor.CopyFrom(make_tensor_proto(np.asarray(tensor)))
        return _serialized(summary_pb2.Summary(value=[value]))

    return compute


@register_kernel("MergeSummary")
def merge_summary_kernel(node):
    def compute(step, *inputs):
        merged, tags = summary_pb2.Summary(), set()
        for t in inputs:
            for serialized in np.asarray(t).flat:
                part = summary_pb2.Summary()
                try:
                    part.ParseFromString(_bytes(serialized))
                except (DecodeError, TypeError) as e:
                    raise op_error(
                        node, "Could not parse one of the summary inputs"
                    ) from e
                for value in part.value:
                    if value.tag and value.tag in tags:
                        raise op_error(
                            node, f"Duplicate tag {value.tag} found in summary inputs"
                        )
                    tags.add(value.tag)
                    merged.value.append(value)
        return _serialized(merged)

    return compute
