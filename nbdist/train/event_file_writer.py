"""Event files as TensorBoard reads them, as TF's ``EventFileWriter`` and
``EventsWriter``.

A file ``events.out.tfevents.<seconds>.<host>[suffix]`` holds TFRecords: a
little-endian uint64 length, the masked CRC32C of those 8 bytes, the
serialized ``Event``, and the masked CRC32C of the data. Its first record is
``Event(file_version="brain.Event:2")``. A background thread writes events
taken from a bounded queue (``add_event`` blocks while it is full), flushes
every ``flush_secs`` and on ``flush``/``close``; an I/O error in that thread
is raised by the next ``add_event``, ``flush`` or ``close``.
"""

from __future__ import annotations

import collections
import os
import socket
import threading
import time

from nbdist.executor.tf_record import masked_crc32c, tfrecord  # noqa: F401
from nbdist.proto import summary_pb2

FILE_VERSION = "brain.Event:2"


class _QueueClosed(Exception):
    pass


class _CloseableQueue:
    """A bounded FIFO whose ``put`` fails, instead of blocking forever, once
    the consumer has stopped."""

    def __init__(self, maxsize: int):
        self._items: collections.deque = collections.deque()
        self._maxsize = max(1, int(maxsize))
        self._closed = False
        self._cond = threading.Condition()

    def put(self, item):
        with self._cond:
            self._cond.wait_for(
                lambda: self._closed or len(self._items) < self._maxsize
            )
            if self._closed:
                raise _QueueClosed
            self._items.append(item)
            self._cond.notify_all()

    def get(self, timeout: float):
        """The next item, or None after ``timeout`` seconds without one."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._items, timeout=timeout):
                return None
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def close(self) -> list:
        """Stops accepting items; returns those not taken."""
        with self._cond:
            self._closed = True
            left = list(self._items)
            self._items.clear()
            self._cond.notify_all()
            return left


_CLOSE = object()


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


class EventFileWriter:
    """Writes ``Event`` protos to a new event file in ``logdir``."""

    def __init__(self, logdir, max_queue=10, flush_secs=120, filename_suffix=None):
        self._logdir = os.fspath(logdir)
        self._max_queue = max_queue
        self._flush_secs = float(flush_secs)
        self._suffix = filename_suffix or ""
        self._failure: BaseException | None = None
        self._closed = True
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
        self._queue = _CloseableQueue(self._max_queue)
        self._thread = threading.Thread(
            target=self._run, daemon=True, name=f"nbdist-event-writer-{self._path}"
        )
        self._closed = False
        self._thread.start()

    @property
    def path(self) -> str:
        """The event file being written."""
        return self._path

    def add_event(self, event: summary_pb2.Event):
        """Queues ``event`` (serialized now, so later changes to it do not count)."""
        if not self._closed:
            self._put(event.SerializeToString())

    def flush(self):
        """Returns once every event added so far is written to the file."""
        if not self._closed:
            done = threading.Event()
            if self._put(done):
                done.wait()
            self._raise_failure()

    def close(self):
        """Flushes, stops the writer thread and closes the file."""
        if self._closed:
            return
        try:
            self.flush()
            self._put(_CLOSE)
        finally:
            self._closed = True
            self._thread.join()
            self._file.close()
        self._raise_failure()

    def _put(self, item) -> bool:
        try:
            self._queue.put(item)
            return True
        except _QueueClosed:  # the writer thread failed, or another thread closed
            self._raise_failure()
            return False

    def _raise_failure(self):
        if self._failure is not None:
            raise OSError(
                f"writing event file {self._path} failed: {self._failure}"
            ) from self._failure

    def _run(self):
        next_flush = time.monotonic() + self._flush_secs
        try:
            while True:
                item = self._queue.get(max(0.0, next_flush - time.monotonic()))
                if item is _CLOSE:
                    self._file.flush()
                    return
                if isinstance(item, threading.Event):
                    self._file.flush()
                    item.set()
                elif item is not None:
                    self._file.write(tfrecord(item))
                if time.monotonic() >= next_flush:
                    self._file.flush()
                    next_flush = time.monotonic() + self._flush_secs
        except Exception as e:  # noqa: BLE001 - reported to the next caller
            self._failure = e
        finally:
            for item in self._queue.close():
                if isinstance(item, threading.Event):
                    item.set()
