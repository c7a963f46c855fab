"""TFRecord files, as TF's ``tf_record.py`` / ``record_writer.cc`` write them.

A record is a little-endian uint64 length, the masked CRC32C of those 8
bytes, the data, and the masked CRC32C of the data. A file is records one
after another, the whole stream optionally ZLIB- or GZIP-compressed. Event
files (``train/event_file_writer.py``) and the TFRecord readers, writers and
datasets share this module.

>>> import os, tempfile
>>> from nbdist.executor import tf_record
>>> path = os.path.join(tempfile.mkdtemp(), "r.tfrecord")
>>> with tf_record.TFRecordWriter(path, "GZIP") as w:
...     w.write(b"a"); w.write(b"bc")
>>> list(tf_record.tf_record_iterator(path, "GZIP"))
[b'a', b'bc']
"""

from __future__ import annotations

import gzip
import struct
import zlib

import google_crc32c

from nbdist import errors


class TFRecordCompressionType:
    """The compression of a TFRecord file (TF's enum values)."""

    NONE = 0
    ZLIB = 1
    GZIP = 2


_NAMES = {TFRecordCompressionType.NONE: "", TFRecordCompressionType.ZLIB: "ZLIB",
          TFRecordCompressionType.GZIP: "GZIP"}


class TFRecordOptions:
    """How a TFRecord file is compressed: ``TFRecordOptions("GZIP")``,
    ``TFRecordOptions(TFRecordCompressionType.ZLIB)`` or ``None``/``""``."""

    compression_type_map = {v: k for k, v in _NAMES.items()}

    def __init__(self, compression_type=None, compression_level=None):
        self.compression_type = compression_type_string(compression_type)
        self.compression_level = compression_level

    @classmethod
    def get_compression_type_string(cls, options) -> str:
        """"", "ZLIB" or "GZIP" for ``options`` (a ``TFRecordOptions``, an enum
        value, a string or None)."""
        return compression_type_string(options)

    def __repr__(self):
        return f"TFRecordOptions(compression_type={self.compression_type!r})"


def compression_type_string(options) -> str:
    if options is None:
        return ""
    if isinstance(options, TFRecordOptions):
        return options.compression_type
    if isinstance(options, int) and not isinstance(options, bool):
        if options not in _NAMES:
            raise ValueError(f"Unknown TFRecord compression type {options}")
        return _NAMES[options]
    if isinstance(options, bytes):
        options = options.decode()
    if isinstance(options, str):
        name = options.upper() if options.upper() in ("ZLIB", "GZIP") else options
        if name not in ("", "ZLIB", "GZIP"):
            raise ValueError(f"Unknown TFRecord compression type {options!r}: "
                             "expected '', 'ZLIB' or 'GZIP'")
        return name
    raise TypeError(f"compression_type must be a TFRecordOptions, a "
                    f"TFRecordCompressionType or a string, got {options!r}")


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC32C rotated right by 15 bits plus a constant."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(data: bytes) -> bytes:
    """``data`` framed as one TFRecord."""
    header = struct.pack("<Q", len(data))
    return b"".join((header, struct.pack("<I", masked_crc32c(header)), data,
                     struct.pack("<I", masked_crc32c(data))))


def decompress(raw: bytes, compression: str, where: str) -> bytes:
    """The bytes of a whole file, uncompressed (``DataLossError`` if bad)."""
    try:
        if compression == "GZIP":
            return gzip.decompress(raw)
        if compression == "ZLIB":
            return zlib.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise errors.DataLossError(None, None, f"{where}: bad {compression} "
                                   f"data: {e}") from None
    return raw


def iter_records(data: bytes, where: str = "", offsets: bool = False):
    """The records of an uncompressed TFRecord stream (with ``offsets``:
    ``(offset, record)`` pairs); a bad checksum or a cut record raises
    ``DataLossError``, as TF's reader does."""
    view = memoryview(data)
    pos, n = 0, len(data)
    while pos < n:
        if n - pos < 12:
            raise errors.DataLossError(None, None, f"truncated record at {pos}' "
                                       f"failed with Read less bytes than requested"
                                       f"{' in ' + where if where else ''}")
        header = bytes(view[pos:pos + 8])
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", view[pos + 8:pos + 12])
        if crc != masked_crc32c(header):
            raise errors.DataLossError(None, None, f"corrupted record at {pos}"
                                       f"{' in ' + where if where else ''}")
        end = pos + 12 + length + 4
        if end > n:
            raise errors.DataLossError(None, None, f"truncated record at {pos}' "
                                       f"failed with Read less bytes than requested"
                                       f"{' in ' + where if where else ''}")
        record = bytes(view[pos + 12:pos + 12 + length])
        (crc,) = struct.unpack("<I", view[end - 4:end])
        if crc != masked_crc32c(record):
            raise errors.DataLossError(None, None, f"corrupted record at {pos}"
                                       f"{' in ' + where if where else ''}")
        yield (pos, record) if offsets else record
        pos = end


def read_file(path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{path}; No such file or "
                                   "directory") from None


def tf_record_iterator(path, options=None):
    """The records of the TFRecord file ``path`` (a generator of bytes)."""
    compression = compression_type_string(options)
    path = path.decode() if isinstance(path, bytes) else str(path)
    data = decompress(read_file(path), compression, path)
    yield from iter_records(data, path)


class TFRecordWriter:
    """Writes records to a TFRecord file (``write``, ``flush``, ``close``; a
    context manager)."""

    def __init__(self, path, options=None):
        self._path = path.decode() if isinstance(path, bytes) else str(path)
        compression = compression_type_string(options)
        level = getattr(options, "compression_level", None)
        level = 6 if level is None or level < 0 else level
        try:
            raw = open(self._path, "wb")
        except FileNotFoundError:
            raise errors.NotFoundError(None, None, f"{self._path}; No such file or "
                                       "directory") from None
        self._raw = raw
        if compression == "GZIP":
            self._file = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=level,
                                       mtime=0)
        elif compression == "ZLIB":
            self._file = _ZlibFile(raw, level)
        else:
            self._file = raw

    def write(self, record):
        """Appends ``record`` (bytes, or str as UTF-8)."""
        if self._file is None:
            raise errors.FailedPreconditionError(None, None,
                                                 "TFRecordWriter is closed.")
        if isinstance(record, str):
            record = record.encode()
        self._file.write(tfrecord(bytes(record)))

    def flush(self):
        if self._file is not None:
            self._file.flush()
            if self._file is not self._raw:
                self._raw.flush()

    def close(self):
        if self._file is not None:
            self._file.close()
            if self._file is not self._raw:
                self._raw.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _ZlibFile:
    """A write-only file that zlib-compresses what it is given."""

    def __init__(self, raw, level):
        self._raw = raw
        self._z = zlib.compressobj(level)
        self.closed = False

    def write(self, data):
        self._raw.write(self._z.compress(data))
        return len(data)

    def flush(self):
        self._raw.write(self._z.flush(zlib.Z_SYNC_FLUSH))

    def close(self):
        if not self.closed:
            self._raw.write(self._z.flush())
            self.closed = True
