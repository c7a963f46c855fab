"""Kernels for the readers (a ``ReaderResource`` per reader in the task's
``ResourceMgr``), ``ReadFile`` / ``WriteFile`` and the file datasets
(``TFRecordDataset``, ``TextLineDataset``).

A reader holds the file it is working on as a Python iterator of
``(key, value)`` records; each file is read whole when it is started.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from nbdist import errors
from nbdist.executor import tf_record
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.dataset_kernels import DatasetValue
from nbdist.executor.kernels.kernel_util import unshared_resources


# -- the records of one file, per reader kind -------------------------------------
def tfrecord_records(path, compression):
    for offset, record in tf_record.read_records(path, compression, offsets=True):
        yield f"{path}:{offset}".encode(), record


def text_lines(path, skip):
    """The lines of ``path`` without ``\\n`` (or ``\\r\\n``), numbered from 1."""
    for number, line in enumerate(tf_record.read_lines(path), 1):
        if number > skip:
            yield f"{path}:{number}".encode(), line


def read_whole(path: str) -> bytes:
    """The bytes of the file ``path`` by open, fstat, read and close: each system
    call lets the GIL go and waits to take it back from the threads beside it
    (the training step, other readers), and ``open(path).read()`` makes about
    ten of them. Errors as TF's: a missing file is a ``NotFoundError``, a
    directory a ``FailedPreconditionError``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        raise errors.NotFoundError(None, None, f"{path}; No such file or "
                                   "directory") from None
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size) if size else b""
        while len(data) < size or not size:  # a short read; a size fstat lacks
            more = os.read(fd, 1 << 20)
            if not more:
                break
            data += more
    except IsADirectoryError:
        raise errors.FailedPreconditionError(None, None,
                                             f"{path}; Is a directory") from None
    finally:
        os.close(fd)
    return data


def _whole_file(path):
    yield path.encode(), read_whole(path)


def _identity(work):
    yield work.encode(), work.encode()


def _fixed_length(path, a):
    data = tf_record.decompress(tf_record.read_file(path), a["encoding"], path)
    body = data[a["header_bytes"]:len(data) - a["footer_bytes"]]
    size = a["record_bytes"]
    hop = a["hop_bytes"] or size
    starts = range(0, max(len(body) - size, -1) + 1, hop)
    for number, start in enumerate(starts):
        yield f"{path}:{number}".encode(), body[start:start + size]


_SOURCES = {
    "TFRecordReaderV2": lambda path, a: tfrecord_records(path, a["compression_type"]),
    "TextLineReaderV2": lambda path, a: text_lines(path, a["skip_header_lines"]),
    "WholeFileReaderV2": lambda path, a: _whole_file(path),
    "IdentityReaderV2": lambda path, a: _identity(path),
    "FixedLengthRecordReaderV2": _fixed_length,
}


# no existence check: an identity reader's work is no file; a whole file is
# opened at once, which says NotFound by itself
_NO_EXISTS_CHECK = ("IdentityReaderV2", "WholeFileReaderV2")


class ReaderResource:
    """A reader's state: the work (file) in progress and its counters."""

    def __init__(self, name, kind, attrs):
        self.name, self.kind = name, kind
        self._source = _SOURCES[kind]
        self._attrs = attrs
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.records = None        # iterator over the current work's records
        self.num_records_produced = 0
        self.num_work_units_completed = 0

    dropped = False  # by its ResourceMgr (a reset container): looked up anew

    def close_for_cleanup(self):
        self.dropped = True
        self.records = None

    def _next_work(self, step, node, queue):
        if getattr(queue, "dtypes", None) is None or queue.dtypes[0].name != "string":
            raise errors.InvalidArgumentError(
                None, node, f"Reader '{self.name}' needs a queue of filenames "
                "(strings)")
        ((work, *_),) = queue.dequeue(step, node, 1)
        if isinstance(work, np.ndarray):
            if work.ndim:
                raise errors.InvalidArgumentError(
                    None, node, f"Reader '{self.name}' needs scalar filenames, got "
                    f"shape {list(work.shape)}")
            work = work.item()
        work = work.decode() if isinstance(work, bytes) else str(work)
        if not work:
            raise errors.InvalidArgumentError(None, node,
                                              "Reader got an empty filename")
        if self.kind not in _NO_EXISTS_CHECK and not os.path.exists(work):
            raise errors.NotFoundError(None, node, f"{work}; No such file or "
                                       "directory")
        self.records = self._source(work, self._attrs)

    def _next_record(self, node):
        """The next record of the work in progress; None at its end (the work
        is then completed)."""
        try:
            return next(self.records)
        except StopIteration:
            self.records = None
            self.num_work_units_completed += 1
            return None
        except errors.OpError as e:
            self.records = None
            raise type(e)(None, node, e.message) from None

    def _read_whole_file(self, step, node, queue):
        """A ``WholeFileReader``'s record, one per work unit: the filename is
        dequeued under the lock and the file read outside it, so runner
        threads sharing the reader do not wait on each other's file I/O (each
        of its system calls gives the interpreter away). The work unit is
        completed with its record, as TF counts it; a failed read completes
        nothing."""
        with self.lock:
            self._next_work(step, node, queue)
            records, self.records = self.records, None
        try:
            record = next(records)
        except errors.OpError as e:
            raise type(e)(None, node, e.message) from None
        with self.lock:
            self.num_records_produced += 1
            self.num_work_units_completed += 1
        return record

    def read(self, step, node, queue, n):
        """Up to ``n`` records, all from one work unit (fewer at its end)."""
        if self.kind == "WholeFileReaderV2":
            key, value = self._read_whole_file(step, node, queue)
            return [key], [value]
        keys, values = [], []
        with self.lock:
            while len(keys) < n:
                if self.records is None:
                    if keys:
                        break
                    self._next_work(step, node, queue)
                record = self._next_record(node)
                if record is not None:
                    keys.append(record[0])
                    values.append(record[1])
            self.num_records_produced += len(keys)
        return keys, values

    def read_one(self, step, node, queue):
        """The next ``(key, value)``, as ``read(..., 1)`` gives it (no lists)."""
        if self.kind == "WholeFileReaderV2":
            return self._read_whole_file(step, node, queue)
        with self.lock:
            while True:
                if self.records is None:
                    self._next_work(step, node, queue)
                record = self._next_record(node)
                if record is not None:
                    self.num_records_produced += 1
                    return record


def _strings(items):
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _reader_kernel(node):
    a = node.attrs
    name = a["shared_name"] or node.name
    rm = unshared_resources(node, a["shared_name"])

    held = [None]  # the reader of the last run: no lookup while it lives

    def compute(step):
        r = held[0]
        if r is None or r.dropped:
            r = held[0] = rm.lookup_or_create(
                a["container"], "reader", name,
                lambda: ReaderResource(name, node.op, a))
        return r

    return compute


for _kind in _SOURCES:
    register_kernel(_kind)(_reader_kernel)


@register_kernel("ReaderReadV2")
def reader_read_kernel(node):
    def compute(step, reader, queue):
        key, value = reader.read_one(step, node.name, queue)
        return np.array(key, dtype=object), np.array(value, dtype=object)

    return compute


@register_kernel("ReaderReadUpToV2")
def reader_read_up_to_kernel(node):
    def compute(step, reader, queue, n):
        n = int(n)
        if n <= 0:
            raise errors.InvalidArgumentError(
                None, node.name, f"num_records must be > 0, got {n}")
        keys, values = reader.read(step, node.name, queue, n)
        return _strings(keys), _strings(values)

    return compute


@register_kernel("ReaderNumRecordsProducedV2")
def num_records_produced_kernel(node):
    return lambda step, reader: np.int64(reader.num_records_produced)


@register_kernel("ReaderNumWorkUnitsCompletedV2")
def num_work_units_completed_kernel(node):
    return lambda step, reader: np.int64(reader.num_work_units_completed)


@register_kernel("ReaderResetV2")
def reader_reset_kernel(node):
    def compute(step, reader):
        with reader.lock:
            reader.reset()

    return compute


@register_kernel("ReadFile")
def read_file_kernel(node):
    def compute(step, filename):
        path = filename.item() if isinstance(filename, np.ndarray) else filename
        path = path.decode() if isinstance(path, bytes) else str(path)
        try:
            return np.array(read_whole(path), dtype=object)
        except errors.OpError as e:
            raise type(e)(None, node.name, e.message) from None

    return compute


@register_kernel("WriteFile")
def write_file_kernel(node):
    def compute(step, filename, contents):
        path = filename.item() if isinstance(filename, np.ndarray) else filename
        path = path.decode() if isinstance(path, bytes) else str(path)
        data = contents.item() if isinstance(contents, np.ndarray) else contents
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else bytes(data))

    return compute


# -- file datasets ------------------------------------------------------------------
def _filenames(value):
    return [f.decode() if isinstance(f, bytes) else str(f)
            for f in np.asarray(value, dtype=object).reshape(-1)]


class _FileRecords(DatasetValue):
    pure_reads = True  # a map above may read ahead (dataset_kernels)

    def __init__(self, files, records):
        self.files, self.records = files, records

    def iterate(self, ctx):
        for path in self.files:
            for _key, value in self.records(path):
                yield (np.array(value, dtype=object),)


@register_kernel("TFRecordDataset")
def tfrecord_dataset_kernel(node):
    def compute(step, filenames, compression, buffer_size):
        comp = compression.item() if isinstance(compression, np.ndarray) \
            else compression
        comp = tf_record.compression_type_string(comp)
        return _FileRecords(_filenames(filenames),
                            lambda path: tfrecord_records(path, comp))

    return compute


@register_kernel("TextLineDataset")
def text_line_dataset_kernel(node):
    def compute(step, filenames, compression, buffer_size):
        comp = compression.item() if isinstance(compression, np.ndarray) \
            else compression
        comp = tf_record.compression_type_string(comp)

        def lines(path):
            for line in tf_record.read_lines(path, comp):
                yield None, line

        return _FileRecords(_filenames(filenames), lines)

    return compute


@register_kernel("FixedLengthRecordDatasetV2")
def fixed_length_record_dataset_kernel(node):
    def compute(step, filenames, header, record, footer, buffer_size, compression):
        header, record, footer = int(header), int(record), int(footer)
        if record <= 0:
            raise errors.InvalidArgumentError(
                None, node.name, f"record_bytes must be greater than zero, got "
                f"{record}")
        comp = compression.item() if isinstance(compression, np.ndarray) \
            else compression
        comp = tf_record.compression_type_string(comp)

        def records(path):
            data = tf_record.decompress(tf_record.read_file(path), comp, path)
            body = len(data) - header - footer
            if body < 0 or body % record:
                raise errors.InvalidArgumentError(
                    None, node.name, f"Excluding the header ({header} bytes) and "
                    f"footer ({footer} bytes), input file \"{path}\" has body "
                    f"length {body} bytes, which is not an exact multiple of the "
                    f"record length ({record} bytes).")
            for start in range(header, header + body, record):
                yield None, data[start:start + record]

        return _FileRecords(_filenames(filenames), records)

    return compute
