"""Kernels for the string ops. Strings are object arrays of ``bytes``; the
kernels work on whole arrays with ``np.char`` (fixed-width ``S`` arrays) and
``np.frompyfunc`` where no ``np.char`` function fits."""

from __future__ import annotations

import base64
import binascii
import re

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel


def _map(fn, *arrays) -> np.ndarray:
    """``fn`` applied elementwise (broadcasting), as an object array (also for
    0-d and empty inputs)."""
    return np.asarray(np.frompyfunc(fn, len(arrays), 1)(*arrays), dtype=object)


def _objects(x) -> np.ndarray:
    x = np.asarray(x)
    out = np.empty(x.shape, dtype=object)
    out[...] = x if x.dtype == object else x.astype(object)
    return out


def _scalar(x):
    x = np.asarray(x, dtype=object)
    v = x.item() if x.ndim == 0 else x.reshape(-1)[0]
    return v if isinstance(v, bytes) else str(v).encode()


def _sparse_from_lists(token_lists, n):
    """(indices, values, dense_shape) of a ``[n, max_len]`` sparse tensor."""
    lengths = np.fromiter((len(t) for t in token_lists), dtype=np.int64, count=n)
    total = int(lengths.sum())
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    cols = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths,
                                                        lengths)
    values = np.empty(total, dtype=object)
    values[:] = [tok for t in token_lists for tok in t]
    return (np.stack([rows, cols], axis=1).reshape(total, 2), values,
            np.array([n, int(lengths.max(initial=0))], dtype=np.int64))


@register_kernel("StringSplit")
def string_split_kernel(node):
    skip_empty = node.attrs["skip_empty"]

    def compute(step, source, delimiter):
        source = np.asarray(source, dtype=object).reshape(-1)
        delim = _scalar(delimiter)
        if delim == b"":
            split = lambda x: _map(lambda s: [bytes([b]) for b in s], x)
        else:
            # Every character of ``delimiter`` splits: map them all to the first.
            pattern = re.compile(b"[" + re.escape(delim) + b"]")
            split = lambda x: _map(pattern.split, x)
        tokens = split(source) if source.size else []
        if skip_empty:
            tokens = [[t for t in ts if t] for ts in tokens]
        return _sparse_from_lists(list(tokens), source.size)

    return compute


@register_kernel("StringSplitV2")
def string_split_v2_kernel(node):
    maxsplit = node.attrs["maxsplit"]

    def compute(step, source, sep):
        source = np.asarray(source, dtype=object).reshape(-1)
        sep = _scalar(sep) or None
        tokens = _map(lambda s: s.split(sep, maxsplit), source) if source.size else []
        return _sparse_from_lists(list(tokens), source.size)

    return compute


@register_kernel("Substr")
def substr_kernel(node):
    utf8 = node.attrs["unit"] == "UTF8_CHAR"

    def compute(step, value, pos, length):
        value, pos, length = np.broadcast_arrays(np.asarray(value, dtype=object),
                                                 np.asarray(pos), np.asarray(length))
        text = _map(bytes.decode, value) if utf8 else value
        sizes = _map(len, text).astype(np.int64)
        start = np.where(pos < 0, pos + sizes, pos)
        bad = (start < 0) | (start > sizes)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise errors.InvalidArgumentError(
                None, node.name, f"pos {pos.reshape(-1)[i]} out of range for string "
                f"{value.reshape(-1)[i]!r} at index {i}")
        if (length < 0).any():
            raise errors.InvalidArgumentError(None, node.name,
                                              "Substr: len must be >= 0")
        cut = _map(lambda s, a, n: s[a:a + n], text, start, length)
        if utf8:
            cut = _map(str.encode, cut)
        return _objects(cut)

    return compute


@register_kernel("AsString")
def as_string_kernel(node):
    a = node.attrs
    t = a["T"]

    def fmt():
        spec = "%" + ("0" if a["fill"] == "0" else "")
        spec += str(a["width"]) if a["width"] >= 0 else ""
        if t.is_integer:
            return spec + "d"
        if a["precision"] >= 0:
            spec += f".{a['precision']}"
        return spec + ("e" if a["scientific"] else "g" if a["shortest"] else "f")

    form = None if t.name == "bool" else fmt()

    def compute(step, x):
        x = np.asarray(x)
        if form is None:
            return _objects(np.where(x, b"true", b"false"))
        text = np.char.mod(form, x) if x.size else np.zeros(x.shape, "U1")
        return _objects(np.char.encode(text.astype(str), "ascii"))

    return compute


@register_kernel("StringToNumber")
def string_to_number_kernel(node):
    out = node.attrs["out_type"]
    info = np.iinfo(out.as_numpy_dtype) if out.is_integer else None

    def parse(s):
        text = s.decode().strip() if isinstance(s, bytes) else str(s)
        if info is None:
            return float(text)
        v = int(text)
        if not info.min <= v <= info.max:
            raise ValueError("out of range")
        return v

    def compute(step, value):
        value = np.asarray(value, dtype=object)
        try:
            numbers = _map(parse, value) if value.size else np.zeros(value.shape)
        except (ValueError, OverflowError):
            ok = _map(_parses(parse), value).astype(bool)
            bad = value.reshape(-1)[int(np.flatnonzero(~ok.reshape(-1))[0])]
            raise errors.InvalidArgumentError(
                None, node.name, f"StringToNumberOp could not correctly convert "
                f"string: {_text(bad)}") from None
        return np.asarray(numbers).astype(out.as_numpy_dtype)

    return compute


def _parses(parse):
    def ok(s):
        try:
            parse(s)
            return True
        except (ValueError, OverflowError):
            return False

    return ok


def _text(s):
    return s.decode(errors="replace") if isinstance(s, bytes) else str(s)


@register_kernel("StringLength")
def string_length_kernel(node):
    utf8 = node.attrs["unit"] == "UTF8_CHAR"

    def compute(step, value):
        value = np.asarray(value, dtype=object)
        if not value.size:
            return np.zeros(value.shape, np.int32)
        count = (lambda s: len(s.decode())) if utf8 else len
        return _map(count, value).astype(np.int32)

    return compute


@register_kernel("StringJoin")
def string_join_kernel(node):
    sep = node.attrs["separator"].encode()

    def compute(step, *inputs):
        parts = np.broadcast_arrays(*[np.asarray(x, dtype=object) for x in inputs])
        out = parts[0]
        for p in parts[1:]:
            out = out + sep + p  # object arrays of bytes concatenate elementwise
        return _objects(out)

    return compute


@register_kernel("ReduceJoin")
def reduce_join_kernel(node):
    sep = node.attrs["separator"].encode()
    keep = node.attrs["keep_dims"]

    def compute(step, value, axes):
        value = np.asarray(value, dtype=object)
        axes = [int(a) for a in np.asarray(axes).reshape(-1)]
        for a in axes:
            if not -value.ndim <= a < max(value.ndim, 1):
                raise errors.InvalidArgumentError(
                    None, node.name, f"Invalid reduction dimension {a} for input "
                    f"with {value.ndim} dimension(s)")
        axes = sorted({a % value.ndim for a in axes}) if value.ndim else []
        out = value
        for a in reversed(axes):
            moved = np.moveaxis(out, a, 0)
            joined = moved[0] if moved.shape[0] else np.full(moved.shape[1:], b"",
                                                             dtype=object)
            for k in range(1, moved.shape[0]):  # over the axis, not the elements
                joined = joined + sep + moved[k]
            out = np.expand_dims(joined, a) if keep else joined
        return _objects(out)

    return compute


@register_kernel("RegexReplace")
def regex_replace_kernel(node):
    count = 0 if node.attrs["replace_global"] else 1

    def compute(step, value, pattern, rewrite):
        value, pattern, rewrite = np.broadcast_arrays(
            *[np.asarray(x, dtype=object) for x in (value, pattern, rewrite)])
        try:
            out = _map(lambda s, p, r: re.sub(p, r, s, count=count), value, pattern,
                       rewrite)
        except re.error as e:
            raise errors.InvalidArgumentError(
                None, node.name, f"Invalid pattern: {e}") from None
        return _objects(out)

    return compute


@register_kernel("StringStrip")
def string_strip_kernel(node):
    return lambda step, value: _map(bytes.strip, np.asarray(value, dtype=object))


def _case_kernel(node, ascii_fn, text_fn):
    utf8 = node.attrs["encoding"].lower().replace("-", "") == "utf8"

    def convert(s):
        return text_fn(s.decode()).encode() if utf8 else ascii_fn(s)

    return lambda step, value: _map(convert, np.asarray(value, dtype=object))


@register_kernel("StringLower")
def string_lower_kernel(node):
    return _case_kernel(node, bytes.lower, str.lower)


@register_kernel("StringUpper")
def string_upper_kernel(node):
    return _case_kernel(node, bytes.upper, str.upper)


@register_kernel("EncodeBase64")
def encode_base64_kernel(node):
    pad = node.attrs["pad"]

    def encode(s):
        out = base64.urlsafe_b64encode(s)
        return out if pad else out.rstrip(b"=")

    return lambda step, value: _map(encode, np.asarray(value, dtype=object))


@register_kernel("DecodeBase64")
def decode_base64_kernel(node):
    def decode(s):
        s = s.rstrip(b"=")
        return base64.urlsafe_b64decode(s + b"=" * (-len(s) % 4))

    def compute(step, value):
        try:
            return _map(decode, np.asarray(value, dtype=object))
        except (binascii.Error, ValueError) as e:
            raise errors.InvalidArgumentError(
                None, node.name, f"Invalid character found in base64: {e}") from None

    return compute
