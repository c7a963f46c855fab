"""Event files as TensorBoard reads them, as TF's ``EventFileWriter`` and
``EventsWriter``.

A file ``events.out.tfevents.<seconds>.<host>[suffix]`` holds TFRecords: a
little-endian uint64 length, the masked CRC32C of those 8 bytes, the
serialized ``Event``, and the masked CRC32C of the data. Its first record is
``Event(file_version="brain.Event:2")``.

Events wait in a queue of up to ``max_queue`` (serialized, so a later change
to an ``Event`` does not count); the ``add_event`` that fills it writes the
queue to the file in one ``write``, with no thread hand-off per event (a
Python thread woken per event costs a GIL switch each). A background thread
writes and flushes what waits every ``flush_secs``; ``flush`` and ``close``
do so at once, and so does the interpreter's exit for a writer left open.
Nothing is fsync'ed per event: ``close`` syncs the file once, as TF's
``EventsWriter`` does when it closes. An I/O error in the background thread
is raised by the next ``add_event``, ``flush`` or ``close``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import struct
import threading
import time
import weakref

from nbdist.executor.tf_record import masked_crc32c, tfrecord  # noqa: F401
from nbdist.proto import summary_pb2

FILE_VERSION = "brain.Event:2"
# Bytes that may wait in the queue before it is written even if not full
# (image summaries are large).
_MAX_QUEUED_BYTES = 1 << 20
_F64 = struct.Struct("<d")


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= 0xFFFFFFFFFFFFFFFF  # int64: negatives as their 10-byte two's complement
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def serialized_summary_event(
    summary: bytes, wall_time: float, step: int | None
) -> bytes:
    """``Event(wall_time=..., step=..., summary=<summary>)`` serialized, from
    the serialized ``Summary`` as it is (no parse and re-serialisation)."""
    parts = [b"\x09", _F64.pack(wall_time)]
    if step is not None:
        parts += [b"\x10", _varint(int(step))]
    parts += [b"\x2a", _varint(len(summary)), summary]
    return b"".join(parts)


def _event_file_path(logdir: str, now: float, suffix: str) -> str:
    # TF's name; if a writer of this second already took it, add the pid and a
    # counter (as TensorBoard's own writer does) rather than clobber that file.
    host = socket.gethostname()
    path = os.path.join(logdir, f"events.out.tfevents.{int(now):010d}.{host}{suffix}")
    n = 0
    while os.path.exists(path):
        n += 1
        path = os.path.join(
            logdir,
            f"events.out.tfevents.{int(now):010d}.{host}.{os.getpid()}.{n}{suffix}",
        )
    return path


# Writers open now: their queued events are written when the interpreter exits.
_OPEN_WRITERS: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _flush_open_writers():
    for writer in list(_OPEN_WRITERS):
        with contextlib.suppress(Exception):  # exiting: nowhere to report to
            writer.flush()


class EventFileWriter:
    """Writes ``Event`` protos to a new event file in ``logdir``."""

    def __init__(self, logdir, max_queue=10, flush_secs=120, filename_suffix=None):
        self._logdir = os.fspath(logdir)
        self._max_queue = max(1, int(max_queue))
        self._flush_secs = float(flush_secs)
        self._suffix = filename_suffix or ""
        self._failure: BaseException | None = None
        self._closed = True
        # Guards the queue and the file: events reach the file in the order
        # they were added, whichever thread adds or writes them.
        self._lock = threading.Lock()
        self.reopen()

    def get_logdir(self) -> str:
        return self._logdir

    def reopen(self):
        """After ``close``: starts a new event file (no-op while open)."""
        if not self._closed:
            return
        os.makedirs(self._logdir, exist_ok=True)
        now = time.time()
        self._path = _event_file_path(self._logdir, now, self._suffix)
        self._file = open(self._path, "xb")  # noqa: SIM115 - open until close()
        first = summary_pb2.Event(wall_time=now, file_version=FILE_VERSION)
        self._file.write(tfrecord(first.SerializeToString()))
        self._file.flush()
        self._failure = None
        self._queue: list[bytes] = []
        self._queued_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, daemon=True, name=f"nbdist-event-writer-{self._path}"
        )
        self._closed = False
        self._thread.start()
        _OPEN_WRITERS.add(self)

    @property
    def path(self) -> str:
        """The event file being written."""
        return self._path

    def add_event(self, event: summary_pb2.Event):
        """Queues ``event`` (serialized now, so later changes to it do not count)."""
        self.add_serialized_event(event.SerializeToString())

    def add_serialized_event(self, data: bytes):
        """Queues a serialized ``Event``; writes the queue once it is full."""
        if self._closed:
            return
        self._raise_failure()
        with self._lock:
            if self._closed:
                return
            self._queue.append(data)
            self._queued_bytes += len(data)
            if (
                len(self._queue) >= self._max_queue
                or self._queued_bytes >= _MAX_QUEUED_BYTES
            ):
                self._write_queue()

    def flush(self):
        """Returns once every event added so far is in the file (the OS's)."""
        if not self._closed:
            self._raise_failure()
            with self._lock:
                self._write_queue()

    def close(self):
        """Writes what waits, stops the background thread, syncs and closes the
        file."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _OPEN_WRITERS.discard(self)
        self._stop.set()
        self._thread.join()
        try:
            with self._lock:
                if self._failure is None:
                    self._write_queue()
                    os.fsync(self._file.fileno())
        finally:
            self._file.close()
        self._raise_failure()

    def _write_queue(self):
        # Called with self._lock held.
        if self._queue:
            records = b"".join([tfrecord(data) for data in self._queue])
            self._queue.clear()
            self._queued_bytes = 0
            try:
                self._file.write(records)
                self._file.flush()
            except OSError as e:
                self._failure = e
                self._raise_failure()

    def _raise_failure(self):
        if self._failure is not None:
            raise OSError(
                f"writing event file {self._path} failed: {self._failure}"
            ) from self._failure

    def _run(self):
        while not self._stop.wait(max(self._flush_secs, 0.01)):
            with self._lock:
                try:
                    self._write_queue()
                except Exception as e:  # noqa: BLE001 - reported to the next caller
                    self._failure = e
                    return
