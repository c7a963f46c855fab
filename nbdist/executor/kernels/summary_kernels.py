"""Kernels of the summary ops: each returns a serialized ``Summary`` (a scalar
string), as TF's ``summary_op.cc``, ``summary_image_op.cc`` and
``summary_tensor_op.cc``. Histograms use TF's default buckets
(``histogram.cc``); images are PNG-encoded with Pillow.
"""

from __future__ import annotations

import io
import struct
import sys

import numpy as np
from google.protobuf.message import DecodeError
from PIL import Image

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, op_error
from nbdist.ops import summary_ops  # noqa: F401  (registers the op definitions)
from nbdist.framework.tensor_util import make_tensor_proto
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


class _BucketTable:
    """A table from the top 16 bits of a float64 (sign, exponent and 4 mantissa
    bits) to the count of bucket limits <= the least value with those bits.
    Such a cell spans under 7% in value and limits grow by 10%, so at most one
    limit falls inside it: one comparison finishes the count, exactly as TF's
    ``upper_bound`` (binary search) finds it, at a fraction of the cost."""

    _table: np.ndarray | None = None
    _padded = np.append(_BUCKET_LIMITS, np.inf)

    @classmethod
    def indices(cls, x: np.ndarray) -> np.ndarray:
        """For float64 ``x``: the count of limits <= each value."""
        if cls._table is None:
            cls._table = cls._build()
        base = cls._table[x.view(np.uint64) >> 48]
        return base + (cls._padded[base] <= x)

    @staticmethod
    def _build() -> np.ndarray:
        keys = np.arange(1 << 16, dtype=np.uint64) << np.uint64(48)
        first = keys.view(np.float64)
        last = (keys | np.uint64((1 << 48) - 1)).view(np.float64)
        lo, hi = np.minimum(first, last), np.maximum(first, last)
        base = np.searchsorted(_BUCKET_LIMITS, lo, side="right")
        inside = np.searchsorted(_BUCKET_LIMITS, hi, side="right") - base
        finite = np.isfinite(lo) & np.isfinite(hi)
        if inside[finite].max() > 1:  # would need a finer table
            raise AssertionError("histogram bucket table: a cell spans two limits")
        return base.astype(np.int32)


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL_VARINTS[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL_VARINTS = [bytes((n,)) for n in range(0x80)]


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (of a number below 16)."""
    return _SMALL_VARINTS[number << 3 | 2] + _varint(len(payload)) + payload


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _bytes(value) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def _scalar_string(node, value, what: str):
    a = np.asarray(value)
    if a.shape != ():
        raise op_error(node, f"{what} must be scalar, got shape {fmt(a.shape)}")
    return a.item()


def _serialized(summary: summary_pb2.Summary | bytes) -> np.ndarray:
    if not isinstance(summary, bytes):
        summary = summary.SerializeToString()
    out = np.empty((), dtype=object)
    out[()] = summary
    return out


# Serialized prefixes by tag, as a kernel writes the same few tags every step:
# the ``tag`` field of a ``Summary.Value``, and a whole scalar value up to its
# 4 float bytes. Bounded, as tags can come from tensors.
_TAG_FIELDS: dict[bytes | str, bytes] = {}
_SCALAR_HEADS: dict[bytes | str, bytes] = {}


def _tag_field(tag) -> bytes:
    field = _TAG_FIELDS.get(tag)
    if field is None:
        field = _field(1, _text(tag).encode("utf-8"))
        if len(_TAG_FIELDS) < 4096:
            _TAG_FIELDS[tag] = field
    return field


def _scalar_head(tag) -> bytes:
    """``Summary.value`` (field 1) holding ``tag`` and the key of simple_value
    (field 2, fixed32): only the value's 4 bytes follow."""
    head = _SCALAR_HEADS.get(tag)
    if head is None:
        value_head = _tag_field(tag) + b"\x15"
        head = b"\x0a" + _varint(len(value_head) + 4) + value_head
        if len(_SCALAR_HEADS) < 4096:
            _SCALAR_HEADS[tag] = head
    return head


def bucket_indices(x: np.ndarray) -> np.ndarray:
    """For finite float64 ``x``: the count of default bucket limits <= each
    value (TF's ``upper_bound``)."""
    return _BucketTable.indices(np.ascontiguousarray(x, dtype=np.float64))


_HISTOGRAM_HEAD = struct.Struct("<BdBdBdBdBd")
_F32 = struct.Struct("<f")


def histogram_bytes(values: np.ndarray) -> bytes | None:
    """The serialized ``HistogramProto`` of ``values``, as TF's
    ``Histogram::EncodeToProto`` over the default buckets: each run of empty
    buckets becomes one entry (its last limit). None if a value is not finite.
    """
    x = np.ascontiguousarray(values, dtype=np.float64).ravel()
    with np.errstate(over="ignore", invalid="ignore"):  # as TF's doubles
        total, squares = np.add.reduce(x), np.dot(x, x)
    if not (np.isfinite(total) and np.isfinite(squares)) and not np.isfinite(x).all():
        return None
    n_limits = len(_BUCKET_LIMITS)
    counts = np.bincount(_BucketTable.indices(x), minlength=n_limits + 1)
    # As TF's C++ (where it indexes past the end), DBL_MAX counts in the last.
    counts[-2] += counts[-1]
    counts = counts[:-1]
    filled = counts != 0
    keep = filled.copy()
    keep[:-1] |= filled[1:]
    keep[-1] = True
    if x.size:
        lo, hi = np.minimum.reduce(x), np.maximum.reduce(x)
    else:
        lo, hi = _DBL_MAX, -_DBL_MAX
    limits = _BUCKET_LIMITS[keep].tobytes()
    return b"".join((
        _HISTOGRAM_HEAD.pack(
            0x09, lo, 0x11, hi, 0x19, x.size, 0x21, total, 0x29, squares
        ),
        _field(6, limits),
        _field(7, counts[keep].astype(np.float64).tobytes()),
    ))


def histogram_proto(values: np.ndarray) -> summary_pb2.HistogramProto:
    """``histogram_bytes`` parsed: TF's histogram of finite ``values``."""
    return summary_pb2.HistogramProto.FromString(histogram_bytes(values))


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
        # simple_value is a float: each value as 4 little-endian bytes.
        if tags.ndim == 0:
            try:
                floats = _F32.pack(values.item())
            except (OverflowError, TypeError):  # beyond float32, or not a float
                floats = None
            if floats is not None:
                return _serialized(_scalar_head(tags.item()) + floats)
        with np.errstate(over="ignore"):
            floats = values.astype("<f4").tobytes()
        parts = [
            _scalar_head(tag) + floats[4 * i : 4 * i + 4]
            for i, tag in enumerate(tags.ravel().tolist())
        ]
        return _serialized(b"".join(parts))

    return compute


@register_kernel("HistogramSummary")
def histogram_summary_kernel(node):
    def compute(step, tag, values):
        tag = _scalar_string(node, tag, "tag")
        histogram = histogram_bytes(values)
        if histogram is None:
            raise op_error(node, f"Nan in summary histogram for: {_text(tag)}")
        return _serialized(_field(1, _tag_field(tag) + _field(5, histogram)))

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
        # A Summary is its repeated ``value`` field alone, so the concatenation
        # of serialized summaries is their merge; it is parsed once, only to
        # check it and its tags.
        parts = []
        for t in inputs:  # each usually a scalar string: one serialized Summary
            if type(t) is np.ndarray and t.ndim == 0:
                parts.append(_bytes(t.item()))
            else:
                parts.extend(_bytes(x) for x in np.asarray(t).ravel().tolist())
        try:
            merged = b"".join(parts)
            values = summary_pb2.Summary.FromString(merged).value
        except (DecodeError, TypeError) as e:
            raise op_error(node, "Could not parse one of the summary inputs") from e
        named = [v.tag for v in values if v.tag]
        if len(set(named)) != len(named):
            seen: set[str] = set()
            duplicate = next(t for t in named if t in seen or seen.add(t))
            raise op_error(node, f"Duplicate tag {duplicate} found in summary inputs")
        return _serialized(merged)

    return compute
