"""Kernels of ``nbdist.ops.unicode_string_ops``: TF's two string hashes
(``Hash64``: MurmurHash64A seeded 0xDECAFCAFFE; SipHash-2-4) written out in
Python, the Unicode ops on Python's codecs, ``StringFormat`` as TF summarizes a
tensor."""

from __future__ import annotations

import re
import struct

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import op_error
from nbdist.executor.kernels.string_kernels import _map, _objects, _scalar
from nbdist.ops import unicode_string_ops  # noqa: F401  (registers the ops)

_M64 = (1 << 64) - 1


def tf_hash64(data: bytes, seed: int = 0xDECAFCAFFE) -> int:
    """TF's legacy ``Hash64`` (MurmurHash64A) of ``data``."""
    m, r = 0xC6A4A7935BD1E995, 47
    n = len(data)
    h = (seed ^ (n * m)) & _M64
    full = n - n % 8
    for (k,) in struct.iter_unpack("<Q", data[:full]):
        k = (k * m) & _M64
        k ^= k >> r
        k = (k * m) & _M64
        h ^= k
        h = (h * m) & _M64
    tail = data[full:]
    if tail:
        for i in range(len(tail) - 1, -1, -1):
            h ^= tail[i] << (8 * i)
        h = (h * m) & _M64
    h ^= h >> r
    h = (h * m) & _M64
    return h ^ (h >> r)


def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & _M64


def siphash24(k0: int, k1: int, data: bytes) -> int:
    """SipHash-2-4 of ``data`` with the 128-bit key (``k0``, ``k1``)."""
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D,
         k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rounds(n):
        for _ in range(n):
            v[0] = (v[0] + v[1]) & _M64
            v[1] = _rotl(v[1], 13) ^ v[0]
            v[0] = _rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & _M64
            v[3] = _rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & _M64
            v[3] = _rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & _M64
            v[1] = _rotl(v[1], 17) ^ v[2]
            v[2] = _rotl(v[2], 32)

    n = len(data)
    full = n - n % 8
    for (m,) in struct.iter_unpack("<Q", data[:full]):
        v[3] ^= m
        rounds(2)
        v[0] ^= m
    last = int.from_bytes(data[full:] + bytes(8 - (n - full)), "little") | (
        (n & 0xFF) << 56)
    v[3] ^= last
    rounds(2)
    v[0] ^= last
    v[2] ^= 0xFF
    rounds(4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def _as_bytes(s) -> bytes:
    return s if isinstance(s, bytes) else str(s).encode()


def _bucket_kernel(hash_fn):
    def factory(node):
        n = int(node.attrs["num_buckets"])
        key = node.attrs.get("key")

        def compute(step, x):
            x = np.asarray(x, dtype=object)
            flat = [hash_fn(_as_bytes(s), key) % n for s in x.reshape(-1)]
            return np.asarray(flat, dtype=np.int64).reshape(x.shape)

        return compute

    return factory


register_kernel("StringToHashBucket")(_bucket_kernel(lambda s, _: tf_hash64(s)))
register_kernel("StringToHashBucketStrong")(
    _bucket_kernel(lambda s, key: siphash24(key[0] & _M64, key[1] & _M64, s)))


@register_kernel("RegexFullMatch")
def regex_full_match_kernel(node):
    def compute(step, x, pattern):
        try:
            p = re.compile(_scalar(pattern))
        except re.error as e:
            raise op_error(node, f"Invalid pattern: {_scalar(pattern)!r}, error: "
                                 f"{e}") from None
        return np.asarray(_map(lambda s: p.fullmatch(_as_bytes(s)) is not None,
                               _objects(x)), dtype=bool)

    return compute


def _number(v) -> str:
    if isinstance(v, (np.floating, float)):
        # TF's StrCat: the fewest digits (6, or 15 for doubles) that round-trip.
        short, full = (6, 9) if np.asarray(v).dtype == np.float32 else (15, 17)
        s = f"{v:.{short}g}"
        return s if type(v)(s) == v else f"{v:.{full}g}"
    if isinstance(v, (bytes, np.bytes_)):
        return v.decode("utf-8", "replace")
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    return str(v)


def summarize(a: np.ndarray, n: int) -> str:
    """``a`` as TF's ``SummarizeValue`` prints it: ``[1 2 ... 9 10]``."""
    if a.ndim == 0:
        v = a.item() if a.dtype == object else a[()]
        return f'"{_number(v)}"' if isinstance(v, bytes) else _number(v)

    def rec(x, depth):
        if x.ndim == 1:
            # Strings are quoted, as TF prints them.
            items = [f'"{_number(v)}"' if isinstance(v, bytes) else _number(v)
                     for v in x]
            if n >= 0 and len(items) > 2 * n:
                items = items[:n] + ["..."] + items[-n:]
            return "[" + " ".join(items) + "]"
        rows = [rec(x[i], depth + 1) for i in range(x.shape[0])]
        if n >= 0 and len(rows) > 2 * n:
            rows = rows[:n] + ["..."] + rows[-n:]
        return "[" + ("\n" + " " * (depth + 1)).join(rows) + "]"

    return rec(a, 0)


@register_kernel("StringFormat")
def string_format_kernel(node):
    template, placeholder = node.attrs["template"], node.attrs["placeholder"]
    n = int(node.attrs["summarize"])

    def compute(step, *inputs):
        parts = template.split(placeholder)
        out = parts[0]
        for x, rest in zip(inputs, parts[1:]):
            out += summarize(np.asarray(x), n) + rest
        return np.asarray(out.encode(), dtype=object)

    return compute


_CODEC = {"UTF-8": "utf-8", "UTF-16-BE": "utf-16-be", "UTF-32-BE": "utf-32-be"}


def _codepoints(node, s: bytes, encoding: str) -> list[int]:
    if encoding == "BYTE":
        return list(s)
    errors = node.attrs["errors"]
    try:
        text = s.decode(_CODEC[encoding], "strict" if errors == "strict" else
                        "replace" if errors == "replace" else "ignore")
    except UnicodeDecodeError as e:
        raise op_error(node, f"Invalid formatting on input string: {e}") from None
    points = [ord(c) for c in text]
    if errors == "replace":
        repl = node.attrs["replacement_char"]
        points = [repl if p == 0xFFFD else p for p in points]
        if node.attrs["replace_control_characters"]:
            points = [repl if p < 0x20 or 0x7F <= p < 0xA0 else p for p in points]
    return points


def _encode(node, points, encoding: str) -> bytes:
    repl = node.attrs["replacement_char"]
    chars = []
    for p in points:
        if 0 <= p <= 0x10FFFF and not 0xD800 <= p <= 0xDFFF:
            chars.append(chr(p))
        elif node.attrs["errors"] == "strict":
            raise op_error(node, f"Invalid code point {p}")
        elif node.attrs["errors"] == "replace":
            chars.append(chr(repl))
    return "".join(chars).encode(_CODEC[encoding])


@register_kernel("UnicodeTranscode")
def unicode_transcode_kernel(node):
    src, dst = node.attrs["input_encoding"], node.attrs["output_encoding"]

    def compute(step, x):
        return _map(lambda s: _encode(node, _codepoints(node, _as_bytes(s), src), dst),
                    _objects(x))

    return compute


@register_kernel("UnicodeEncodeDense")
def unicode_encode_kernel(node):
    dst = node.attrs["output_encoding"]

    def compute(step, x):
        x = np.asarray(x)
        out = np.empty(x.shape[:-1], dtype=object)
        for idx in np.ndindex(*out.shape):
            out[idx] = _encode(node, [int(p) for p in x[idx] if p >= 0], dst)
        return out

    return compute


@register_kernel("UnicodeDecodeSparse")
def unicode_decode_kernel(node):
    src, chars = node.attrs["input_encoding"], node.attrs["output"] == "chars"
    codec = _CODEC.get(src)

    def compute(step, x):
        x = np.asarray(x, dtype=object)
        rows, values, offsets = [], [], []
        for idx in np.ndindex(*x.shape):
            s = _as_bytes(x[idx])
            points = _codepoints(node, s, src)
            if src == "BYTE":
                pieces = [bytes([b]) for b in s]
            else:
                pieces = [chr(p).encode(codec) for p in points]
            starts = np.cumsum([0] + [len(p) for p in pieces[:-1]]).tolist()
            for j, (p, piece, start) in enumerate(zip(points, pieces, starts)):
                rows.append(list(idx) + [j])
                values.append(piece if chars else p)
                offsets.append(start)
        width = max((r[-1] + 1 for r in rows), default=0)
        vals = np.empty(len(values), dtype=object) if chars else np.asarray(
            values, dtype=np.int32)
        if chars:
            vals[:] = values
        return (np.asarray(rows, dtype=np.int64).reshape(len(rows), x.ndim + 1),
                vals, np.asarray(list(x.shape) + [width], dtype=np.int64),
                np.asarray(offsets, dtype=np.int64))

    return compute


@register_kernel("StringNGramsDense")
def string_ngrams_kernel(node):
    a = node.attrs
    sep = a["separator"].encode()

    def grams(row):
        out = []
        for w in a["ngram_widths"]:
            pad = (w - 1 if a["pad_width"] < 0 else min(a["pad_width"], w - 1)) if (
                a["left_pad"] or a["right_pad"] or a["pad_width"]) else 0
            items = [a["left_pad"].encode()] * pad + row + [
                a["right_pad"].encode()] * pad
            n = len(items) - w + 1
            if n <= 0 and a["preserve_short_sequences"] and row:
                out.append(sep.join(items))
            out.extend(sep.join(items[i:i + w]) for i in range(max(n, 0)))
        return out

    def compute(step, x):
        x = np.asarray(x, dtype=object)
        per_row = {idx: grams([_as_bytes(s) for s in x[idx]])
                   for idx in np.ndindex(*x.shape[:-1])}
        width = max((len(g) for g in per_row.values()), default=0)
        if any(len(g) != width for g in per_row.values()):
            raise op_error(node, "rows give different numbers of ngrams")
        out = np.empty(x.shape[:-1] + (width,), dtype=object)
        for idx, g in per_row.items():
            out[idx] = np.array(g + [None], dtype=object)[:-1] if g else out[idx]
        return out

    return compute


@register_kernel("UnsortedSegmentJoin")
def unsorted_segment_join_kernel(node):
    sep = node.attrs["separator"].encode()

    def compute(step, x, ids, num_segments):
        x, ids = np.asarray(x, dtype=object), np.asarray(ids)
        n = int(num_segments)
        if x.shape[:ids.ndim] != ids.shape:
            raise op_error(node, "segment_ids.shape must be a prefix of "
                                 "inputs.shape")
        if ids.size and (ids.max() >= n):
            raise op_error(node, f"segment_ids[{int(np.argmax(ids >= n))}] = "
                                 f"{int(ids.max())} is out of range [0, {n})")
        tail = x.shape[ids.ndim:]
        flat = x.reshape((-1,) + tail)
        out = np.empty((n,) + tail, dtype=object)
        for t in np.ndindex(*tail):
            parts: list[list[bytes]] = [[] for _ in range(n)]
            for i, seg in enumerate(ids.reshape(-1)):
                if seg >= 0:
                    parts[seg].append(_as_bytes(flat[(i,) + t]))
            for s in range(n):
                out[(s,) + t] = sep.join(parts[s])
        return out

    return compute
