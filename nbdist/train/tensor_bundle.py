"""TensorFlow's V2 checkpoint format ("tensor bundle"), read and written.

A checkpoint with prefix ``P`` in this format is:

``P.index``
    A table (``table_format``) mapping ``""`` to a ``BundleHeaderProto``
    (``num_shards``, little-endian, version ``producer: 1``) and each tensor
    name, in byte order, to a ``BundleEntryProto``: dtype, shape, shard id,
    byte offset and size in that shard, and the masked crc32c of those bytes
    (``nbdist/proto/tensor_bundle.proto``).
``P.data-00000-of-00001`` (``P.data-NNNNN-of-MMMMM`` per shard)
    The tensors' bytes one after another, no padding: numeric and bool
    tensors as their little-endian C-order bytes; a string tensor as the
    varint64 length of each element, the masked crc32c of those lengths (each
    taken as a uint32), then the elements' bytes. A string entry's crc covers
    the lengths (as uint32s), the length crc and the bytes.

A partitioned variable TF saved is an entry of its full name with the full
shape and a ``slices`` list and no bytes of its own; each slice's bytes are
an entry of the key TF's ``EncodeTensorNameSlice`` makes (OrderedCode:
``0``, the escaped name, the rank, then per dimension the signed start and
length, -1 for a whole dimension). Reading puts the slices together.

nbdist writes one shard, and the same bytes TensorFlow writes for the same
tensors. A partitioned variable is written whole under its full name.
"""

from __future__ import annotations

import os
import struct

import numpy as np

from nbdist import errors
from nbdist.framework import dtypes
from nbdist.proto import tensor_bundle_pb2, tensor_shape_pb2
from nbdist.train.file_io import atomic_write
from nbdist.train.table_format import (
    TableError,
    crc32c,
    get_varint,
    mask_crc32c,
    put_varint,
    read_table,
    unmask_crc32c,
    write_table,
)

__all__ = ["INDEX_SUFFIX", "BundleReader", "data_filename", "slice_key",
           "write_bundle"]

INDEX_SUFFIX = ".index"
_HEADER_KEY = b""
_BUNDLE_VERSION = 1  # TF's kTensorBundleVersion


def data_filename(prefix: str, shard_id: int = 0, num_shards: int = 1) -> str:
    return f"{prefix}.data-{shard_id:05d}-of-{num_shards:05d}"


# -- encoding -------------------------------------------------------------------
def _string_bytes(arr) -> tuple[bytes, int]:
    items = [v.encode() if isinstance(v, str) else bytes(v) for v in arr.ravel()]
    lengths = b"".join(put_varint(len(b)) for b in items)
    crc = 0
    for b in items:
        width = "<I" if len(b) <= 0xFFFFFFFF else "<Q"
        crc = crc32c(struct.pack(width, len(b)), crc)
    length_crc = struct.pack("<I", mask_crc32c(crc))
    crc = crc32c(length_crc, crc)
    body = b"".join(items)
    return lengths + length_crc + body, crc32c(body, crc)


def _encode(value):
    """(dtype enum, shape, bytes, unmasked crc) of one tensor."""
    arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind in "SU":
        data, crc = _string_bytes(arr)
        return dtypes.string.as_datatype_enum, arr.shape, data, crc
    dtype = dtypes.as_dtype(arr.dtype)
    data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
    return dtype.as_datatype_enum, arr.shape, data, crc32c(data)


def _shape_proto(shape):
    return tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=int(d)) for d in shape])


def write_bundle(prefix: str, arrays) -> None:
    """Writes ``arrays`` (an iterable of (name, ndarray)) as a V2 checkpoint
    with prefix ``prefix``: the data file, then the index, each atomically."""
    data = bytearray()
    entries = []
    for name, value in sorted(arrays, key=lambda kv: kv[0].encode()):
        enum, shape, raw, crc = _encode(value)
        entry = tensor_bundle_pb2.BundleEntryProto(
            dtype=enum, shape=_shape_proto(shape), offset=len(data), size=len(raw),
            crc32c=mask_crc32c(crc))
        data += raw
        entries.append((name.encode(), entry.SerializeToString()))
    header = tensor_bundle_pb2.BundleHeaderProto(num_shards=1)
    header.version.producer = _BUNDLE_VERSION
    table = write_table([(_HEADER_KEY, header.SerializeToString()), *entries])
    atomic_write(data_filename(prefix), lambda f: f.write(bytes(data)))
    atomic_write(prefix + INDEX_SUFFIX, lambda f: f.write(table))


# -- TF's keys of tensor slices (core/lib/strings/ordered_code.cc) ---------------
_SIGNED_HEADER = {1: (0x80, 0), 2: (0xC0, 0), 3: (0xE0, 0), 4: (0xF0, 0),
                  5: (0xF8, 0), 6: (0xFC, 0), 7: (0xFE, 0), 8: (0xFF, 0),
                  9: (0xFF, 0x80), 10: (0xFF, 0xC0)}


def _ordered_num(value: int) -> bytes:
    raw = value.to_bytes(8, "big").lstrip(b"\x00")
    return bytes([len(raw)]) + raw


def _ordered_signed(value: int) -> bytes:
    x = ~value if value < 0 else value
    length = (x.bit_length() + 7) // 7
    buf = bytearray(value.to_bytes(10, "big", signed=True)[10 - length:])
    buf[0] ^= _SIGNED_HEADER[length][0]
    if length > 1:
        buf[1] ^= _SIGNED_HEADER[length][1]
    return bytes(buf)


def _ordered_string(s: bytes) -> bytes:
    escaped = b"".join(b"\x00\xff" if c == 0 else b"\xff\x00" if c == 0xFF
                       else bytes([c]) for c in s)
    return escaped + b"\x00\x01"


def slice_key(name: str, extents) -> bytes:
    """TF's key of the slice ``extents`` ((start, length or -1) per dim)."""
    key = _ordered_num(0) + _ordered_string(name.encode()) + _ordered_num(len(extents))
    for start, length in extents:
        key += _ordered_signed(start) + _ordered_signed(length)
    return key


# -- reading --------------------------------------------------------------------
class BundleReader:
    """The tensors of the V2 checkpoint ``prefix`` (its index is read at once,
    the data files when a tensor is asked for).

    Raises ``DataLossError`` for a corrupt index, ``NotFoundError`` when it
    is missing.
    """

    def __init__(self, prefix: str):
        self.prefix = prefix
        index = prefix + INDEX_SUFFIX
        try:
            with open(index, "rb") as f:
                table = read_table(f.read())
        except FileNotFoundError:
            raise errors.NotFoundError(
                None, None, f"Failed to find any matching files for {prefix}"
            ) from None
        except TableError as e:
            raise errors.DataLossError(
                None, None, f"Unable to read checkpoint index {index}: {e}") from None
        if not table or table[0][0] != _HEADER_KEY:
            raise errors.DataLossError(None, None,
                                       f"{index}: no bundle header entry")
        header = tensor_bundle_pb2.BundleHeaderProto.FromString(table[0][1])
        if header.endianness != tensor_bundle_pb2.BundleHeaderProto.LITTLE:
            raise errors.UnimplementedError(
                None, None, f"{index}: big-endian checkpoints are not supported")
        self.num_shards = max(1, header.num_shards)
        self.entries: dict[str, tensor_bundle_pb2.BundleEntryProto] = {}
        self._slices: dict[bytes, tensor_bundle_pb2.BundleEntryProto] = {}
        for key, value in table[1:]:
            entry = tensor_bundle_pb2.BundleEntryProto.FromString(value)
            if key[:1] == b"\x00":  # the key of a slice; see the module doc
                self._slices[key] = entry
                continue
            try:
                self.entries[key.decode()] = entry
            except UnicodeDecodeError:
                raise errors.DataLossError(
                    None, None, f"{index}: tensor name {key!r} is not UTF-8"
                ) from None
        self._data: dict[int, bytes] = {}

    def has_tensor(self, name: str) -> bool:
        return name in self.entries

    def shape(self, name: str) -> list[int]:
        return [d.size for d in self.entries[name].shape.dim]

    def dtype(self, name: str) -> dtypes.DType:
        enum = self.entries[name].dtype
        try:
            return dtypes.as_dtype(int(enum))
        except TypeError:
            raise errors.UnimplementedError(
                None, None, f"Checkpoint {self.prefix}: tensor {name} has dtype "
                f"enum {enum}, which nbdist does not support") from None

    def _shard(self, shard_id: int) -> bytes:
        if shard_id not in self._data:
            path = data_filename(self.prefix, shard_id, self.num_shards)
            try:
                with open(path, "rb") as f:
                    self._data[shard_id] = f.read()
            except OSError as e:
                raise errors.DataLossError(
                    None, None, f"Unable to read checkpoint data file {path}: {e}"
                ) from None
        return self._data[shard_id]

    def get_tensor(self, name: str) -> np.ndarray:
        entry = self.entries.get(name)
        if entry is None:
            raise errors.NotFoundError(
                None, None, f"Key {name} not found in checkpoint {self.prefix}")
        if entry.slices:
            return self._get_sliced(name, entry)
        return self._read_entry(name, entry, self.dtype(name), self.shape(name))

    def _get_sliced(self, name, entry):
        dtype = self.dtype(name)
        shape = self.shape(name)
        whole = np.empty(shape, dtype=dtype.as_numpy_dtype)
        covered = 0
        for piece in entry.slices:
            extents = [(e.start, e.length if e.HasField("length") else -1)
                       for e in piece.extent]
            region = tuple(slice(s, None if n < 0 else s + n) for s, n in extents)
            part = self._slices.get(slice_key(name, extents))
            if part is None:
                raise errors.DataLossError(
                    None, None, f"Checkpoint {self.prefix}: slice {extents} of "
                    f"{name} is missing")
            want = list(whole[region].shape)
            whole[region] = self._read_entry(name, part, dtype, want)
            covered += int(np.prod(want, dtype=np.int64))
        if covered != whole.size:
            raise errors.DataLossError(
                None, None, f"Checkpoint {self.prefix}: the slices of {name} do not "
                f"cover its shape {shape}")
        return whole

    def _read_entry(self, name, entry, dtype, shape):
        raw = self._shard(entry.shard_id)[entry.offset:entry.offset + entry.size]
        where = f"Checkpoint {self.prefix}: tensor {name}"
        if len(raw) != entry.size:
            raise errors.DataLossError(None, None, f"{where} lies past the end of "
                                       "its data file")
        if dtype is dtypes.string:
            value, crc = self._decode_strings(raw, shape, where)
        else:
            npd = np.dtype(dtype.as_numpy_dtype).newbyteorder("<")
            if len(raw) != npd.itemsize * int(np.prod(shape, dtype=np.int64)):
                raise errors.DataLossError(None, None, f"{where}: {len(raw)} bytes "
                                           f"do not make a {dtype.name} {shape}")
            value = np.frombuffer(raw, dtype=npd).astype(
                dtype.as_numpy_dtype).reshape(shape)
            crc = crc32c(raw)
        if crc != unmask_crc32c(entry.crc32c):
            raise errors.DataLossError(None, None, f"{where}: checksum mismatch "
                                       "(the data file is corrupt)")
        return value

    @staticmethod
    def _decode_strings(raw: bytes, shape, where):
        count = int(np.prod(shape, dtype=np.int64))
        pos, lengths, crc = 0, [], 0
        try:
            for _ in range(count):
                n, pos = get_varint(raw, pos)
                lengths.append(n)
                crc = crc32c(struct.pack("<I" if n <= 0xFFFFFFFF else "<Q", n), crc)
        except TableError:
            raise errors.DataLossError(None, None, f"{where}: corrupt string "
                                       "lengths") from None
        stored = raw[pos:pos + 4]
        if len(stored) != 4 or unmask_crc32c(struct.unpack("<I", stored)[0]) != crc:
            raise errors.DataLossError(None, None, f"{where}: string lengths "
                                       "checksum mismatch")
        crc = crc32c(stored, crc)
        pos += 4
        out = np.empty(count, dtype=object)
        for i, n in enumerate(lengths):
            out[i] = bytes(raw[pos:pos + n])
            pos += n
        crc = crc32c(raw[pos - sum(lengths):pos], crc)
        return out.reshape(shape), crc

    def files(self) -> list[str]:
        return [self.prefix + INDEX_SUFFIX] + [
            data_filename(self.prefix, i, self.num_shards)
            for i in range(self.num_shards)]


def bundle_exists(prefix: str) -> bool:
    return os.path.isfile(prefix + INDEX_SUFFIX)
