"""The sorted-string table the ``.index`` file of a TF V2 checkpoint is.

TensorFlow's ``core/lib/io/table_builder.cc`` writes LevelDB's table format
(no compression, no filter block). No maintained PyPI package reads or writes
a lone table file (LevelDB bindings open whole databases), so this module is a
small reader and writer of that format:

- data blocks of entries ``varint32 shared, varint32 unshared, varint32
  value_length, key[shared:], value`` (keys share a prefix with the previous
  key; every 16th entry is a restart point with ``shared = 0``), then the
  restart offsets (``uint32``) and their count;
- after each block a 5-byte trailer: the compression type (0: none) and the
  masked crc32c of the block and that byte;
- an empty meta-index block, then the index block (restart interval 1): for
  each data block a key ``>=`` its last key and ``<`` the next block's first
  key (the shortest such, as LevelDB's bytewise comparator picks it), and the
  block's handle ``varint64 offset, varint64 size``;
- a 48-byte footer: the meta-index and index handles padded to 40 bytes, then
  the magic number ``0xdb4775248b80fb57`` (little-endian).

The writer makes the bytes TensorFlow's writer makes for the same entries.
"""

from __future__ import annotations

import struct

import google_crc32c

__all__ = ["TableError", "mask_crc32c", "read_table", "unmask_crc32c", "write_table"]

MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5
BLOCK_SIZE = 256 * 1024  # TF's table::Options block_size
RESTART_INTERVAL = 16
_NO_COMPRESSION = 0
_MASK_DELTA = 0xA282EAD8


class TableError(ValueError):
    """The bytes are not a well-formed table (bad magic, checksum, entry)."""


def crc32c(data: bytes, crc: int = 0) -> int:
    return google_crc32c.extend(crc, bytes(data))


def mask_crc32c(crc: int) -> int:
    """LevelDB's masked crc (stored crcs are masked: a crc of data holding
    crcs stays informative)."""
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def unmask_crc32c(masked: int) -> int:
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


# -- varints --------------------------------------------------------------------
def put_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def get_varint(data, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise TableError("truncated or overlong varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


# -- writing --------------------------------------------------------------------
def _shortest_separator(start: bytes, limit: bytes) -> bytes:
    n = min(len(start), len(limit))
    i = 0
    while i < n and start[i] == limit[i]:
        i += 1
    if i < n:
        b = start[i]
        if b < 0xFF and b + 1 < limit[i]:
            return start[:i] + bytes([b + 1])
    return start


def _short_successor(key: bytes) -> bytes:
    for i, b in enumerate(key):
        if b != 0xFF:
            return key[:i] + bytes([b + 1])
    return key


class _BlockBuilder:
    def __init__(self, restart_interval):
        self.interval = restart_interval
        self.buf = bytearray()
        self.restarts = [0]
        self.counter = 0
        self.last_key = b""

    def add(self, key: bytes, value: bytes):
        shared = 0
        if self.counter < self.interval:
            n = min(len(key), len(self.last_key))
            while shared < n and key[shared] == self.last_key[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buf))
            self.counter = 0
        self.buf += put_varint(shared) + put_varint(len(key) - shared)
        self.buf += put_varint(len(value)) + key[shared:] + value
        self.last_key = key
        self.counter += 1

    def size_estimate(self) -> int:
        return len(self.buf) + 4 * len(self.restarts) + 4

    def empty(self) -> bool:
        return not self.buf

    def finish(self) -> bytes:
        tail = struct.pack(f"<{len(self.restarts)}I", *self.restarts)
        return bytes(self.buf) + tail + struct.pack("<I", len(self.restarts))


def write_table(entries) -> bytes:
    """The table of ``entries``, (key, value) bytes pairs in strictly
    increasing key order (compared as bytes)."""
    out = bytearray()
    index = _BlockBuilder(1)
    block = _BlockBuilder(RESTART_INTERVAL)
    pending = None  # handle of the last flushed block, awaiting its index key
    last_key = None

    def write_block(builder):
        contents = builder.finish()
        handle = put_varint(len(out)) + put_varint(len(contents))
        trailer = bytes([_NO_COMPRESSION])
        crc = mask_crc32c(crc32c(trailer, crc32c(contents)))
        out.extend(contents + trailer + struct.pack("<I", crc))
        return handle

    for key, value in entries:
        key, value = bytes(key), bytes(value)
        if last_key is not None and key <= last_key:
            raise ValueError(f"table keys must increase: {key!r} after {last_key!r}")
        if pending is not None:
            index.add(_shortest_separator(last_key, key), pending)
            pending = None
        block.add(key, value)
        last_key = key
        if block.size_estimate() >= BLOCK_SIZE:
            pending = write_block(block)
            block = _BlockBuilder(RESTART_INTERVAL)
    if not block.empty():
        pending = write_block(block)
    if pending is not None:
        index.add(_short_successor(last_key), pending)
    meta_handle = write_block(_BlockBuilder(RESTART_INTERVAL))
    index_handle = write_block(index)
    footer = (meta_handle + index_handle).ljust(FOOTER_SIZE - 8, b"\x00")
    out += footer + struct.pack("<Q", MAGIC)
    return bytes(out)


# -- reading --------------------------------------------------------------------
def _read_block(data, handle: bytes, what: str) -> bytes:
    offset, pos = get_varint(handle, 0)
    size, _ = get_varint(handle, pos)
    end = offset + size + BLOCK_TRAILER_SIZE
    if end > len(data):
        raise TableError(f"{what} block [{offset}, {end}) lies past the end")
    contents = bytes(data[offset:offset + size])
    kind = data[offset + size]
    (stored,) = struct.unpack_from("<I", data, offset + size + 1)
    if unmask_crc32c(stored) != crc32c(bytes([kind]), crc32c(contents)):
        raise TableError(f"{what} block at offset {offset}: checksum mismatch")
    if kind != _NO_COMPRESSION:
        raise TableError(f"{what} block at offset {offset}: compression type "
                         f"{kind} is not supported (only uncompressed tables)")
    return contents


def _block_entries(contents: bytes):
    if len(contents) < 4:
        raise TableError("block too short")
    (num_restarts,) = struct.unpack_from("<I", contents, len(contents) - 4)
    limit = len(contents) - 4 - 4 * num_restarts
    if limit < 0:
        raise TableError("bad restart count")
    pos, key = 0, b""
    while pos < limit:
        shared, pos = get_varint(contents, pos)
        unshared, pos = get_varint(contents, pos)
        vlen, pos = get_varint(contents, pos)
        if shared > len(key) or pos + unshared + vlen > limit:
            raise TableError("corrupt block entry")
        key = key[:shared] + contents[pos:pos + unshared]
        pos += unshared
        yield key, contents[pos:pos + vlen]
        pos += vlen


def read_table(data) -> list[tuple[bytes, bytes]]:
    """All (key, value) entries of a table's bytes, in key order; every block's
    checksum is verified (TableError if anything is off)."""
    if len(data) < FOOTER_SIZE:
        raise TableError("file too short to be a table")
    footer = bytes(data[-FOOTER_SIZE:])
    if struct.unpack_from("<Q", footer, FOOTER_SIZE - 8)[0] != MAGIC:
        raise TableError("not a table (bad magic number)")
    _, pos = get_varint(footer, 0)
    _, pos = get_varint(footer, pos)
    index_handle = footer[pos:]
    entries = []
    for _, handle in _block_entries(_read_block(data, index_handle, "index")):
        entries.extend(_block_entries(_read_block(data, handle, "data")))
    return entries
