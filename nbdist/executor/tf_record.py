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


_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


def tfrecord(data: bytes) -> bytes:
    """``data`` framed as one TFRecord."""
    header = _U64.pack(len(data))
    return b"".join((header, _U32.pack(masked_crc32c(header)), data,
                     _U32.pack(masked_crc32c(data))))


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


class _ZlibReader:
    """Reads a zlib stream as its uncompressed bytes, a chunk at a time."""

    def __init__(self, raw):
        self._raw = raw
        self._z = zlib.decompressobj()
        self._buf = b""

    def read(self, n: int) -> bytes:
        while len(self._buf) < n and not self._z.eof:
            chunk = self._raw.read(_CHUNK)
            if not chunk:
                if not self._z.eof:
                    raise EOFError("the compressed stream ends early")
                break
            self._buf += self._z.decompress(chunk)
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def close(self):
        self._raw.close()


class _GzipReader:
    """A gzip stream's uncompressed bytes; closing it closes the file."""

    def __init__(self, raw):
        self._raw = raw
        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")

    def read(self, n: int) -> bytes:
        return self._gz.read(n)

    def close(self):
        self._gz.close()
        self._raw.close()


_CHUNK = 1 << 20


def open_uncompressed(path: str, compression: str = ""):
    """``path`` opened for reading its uncompressed bytes (``read(n)``,
    ``close()``); ``NotFoundError`` when it does not exist."""
    try:
        raw = open(path, "rb")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise errors.NotFoundError(None, None, f"{path}; No such file or "
                                   "directory") from None
    if compression == "GZIP":
        return _GzipReader(raw)
    if compression == "ZLIB":
        return _ZlibReader(raw)
    return raw


def _read(f, n: int, where: str, compression: str) -> bytes:
    try:
        return f.read(n)
    except (OSError, EOFError, zlib.error) as e:
        raise errors.DataLossError(None, None, f"{where}: bad {compression} "
                                   f"data: {e}") from None


def read_records(path: str, compression: str = "", offsets: bool = False):
    """The records of the TFRecord file ``path``, read as they are needed (with
    ``offsets``: ``(offset in the uncompressed stream, record)`` pairs). A bad
    checksum or a record cut short is a ``DataLossError``, as in TF's
    reader; a file ending inside a record's 12-byte header ends the records,
    also as in TF."""
    f = open_uncompressed(path, compression)
    try:
        pos = 0
        while True:
            head = _read(f, 12, path, compression)
            if len(head) < 12:
                return
            header = head[:8]
            (length,) = struct.unpack("<Q", header)
            (crc,) = struct.unpack("<I", head[8:])
            if crc != masked_crc32c(header):
                raise errors.DataLossError(None, None, f"corrupted record at {pos} "
                                           f"in {path}")
            body = _read(f, length + 4, path, compression)
            if len(body) < length + 4:
                raise errors.DataLossError(None, None, f"truncated record at {pos}' "
                                           f"failed with Read less bytes than "
                                           f"requested in {path}")
            record = body[:length]
            (crc,) = struct.unpack("<I", body[length:])
            if crc != masked_crc32c(record):
                raise errors.DataLossError(None, None, f"corrupted record at {pos} "
                                           f"in {path}")
            yield (pos, record) if offsets else record
            pos += 16 + length
    finally:
        f.close()


def read_lines(path: str, compression: str = ""):
    """The lines of the text file ``path`` without ``\\n`` (or ``\\r\\n``), read
    as they are needed; a last line without a newline counts."""
    f = open_uncompressed(path, compression)
    try:
        rest = b""
        while True:
            chunk = _read(f, _CHUNK, path, compression)
            if not chunk:
                break
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                yield line[:-1] if line.endswith(b"\r") else line
        if rest:
            yield rest[:-1] if rest.endswith(b"\r") else rest
    finally:
        f.close()


def read_file(path) -> bytes:
    with open_uncompressed(path) as f:
        return f.read()


def tf_record_iterator(path, options=None):
    """The records of the TFRecord file ``path`` (a generator of bytes, reading
    the file as it goes)."""
    compression = compression_type_string(options)
    path = path.decode() if isinstance(path, bytes) else str(path)
    yield from read_records(path, compression)


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
