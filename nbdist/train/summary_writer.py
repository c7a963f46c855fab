"""``FileWriter`` and ``FileWriterCache``, as ``tf.compat.v1.summary``'s: summaries,
graphs and session logs as ``Event`` records of a TensorBoard event file."""

from __future__ import annotations

import threading
import time
import warnings
from typing import ClassVar

import numpy as np

from nbdist.framework.ops import Graph, get_default_graph
from nbdist.proto import graph_pb2, summary_pb2
from nbdist.train.event_file_writer import (
    EventFileWriter,
    serialized_summary_event,
)


class FileWriter:
    """Writes ``Summary`` protos and events to an event file in ``logdir``, for
    TensorBoard (``tensorboard --logdir LOGDIR``).

    Events wait in a queue of ``max_queue``, written to the file when it is
    full, every ``flush_secs`` seconds (by a background thread) and on
    ``flush()``/``close()``; a fetched summary is written as the bytes it is.
    ``graph`` (an ``nd.Graph``) is written first for TensorBoard's graph tab.
    A ``FileWriter`` is a context manager (closing it).

    >>> import tempfile
    >>> import nbdist as nd
    >>> with nd.Graph().as_default() as g:
    ...     loss = nd.placeholder(nd.float32, [])
    ...     summary = nd.summary.scalar("loss", loss)
    ...     with nd.Session() as sess, nd.summary.FileWriter(
    ...             tempfile.mkdtemp(), graph=g) as writer:
    ...         for step in range(3):
    ...             writer.add_summary(sess.run(summary, {loss: 1.0 / (step + 1)}),
    ...                                global_step=step)
    """

    def __init__(
        self, logdir, graph=None, max_queue=10, flush_secs=120, filename_suffix=None
    ):
        self.event_writer = EventFileWriter(
            logdir, max_queue, flush_secs, filename_suffix
        )
        self._closed = False
        # TF keeps a value's SummaryMetadata only the first time its tag is seen.
        self._seen_summary_tags: set[str] = set()
        if graph is not None:
            self.add_graph(graph)

    def get_logdir(self) -> str:
        """The directory the event file is in."""
        return self.event_writer.get_logdir()

    def add_summary(self, summary, global_step=None):
        """Writes ``summary`` (a ``Summary`` or its serialized bytes, as a summary
        op's value from ``Session.run``) at ``global_step``."""
        if isinstance(summary, (bytes, np.ndarray)):
            # A fetched summary: written as it is unless a value's metadata has
            # to go (it is parsed only to check that, and that it is a Summary).
            data = summary if isinstance(summary, bytes) else summary.item()
            if not isinstance(data, bytes):
                raise TypeError(
                    "add_summary expects a Summary proto or its serialized "
                    f"bytes (a summary op's value), got an array of {data!r}"
                )
            parsed = summary_pb2.Summary.FromString(data)
            if not self._strip_seen_metadata(parsed):
                self._add_serialized_summary(data, global_step)
                return
        elif isinstance(summary, summary_pb2.Summary):
            parsed = summary_pb2.Summary.FromString(summary.SerializeToString())
            self._strip_seen_metadata(parsed)
        else:
            raise TypeError(
                "add_summary expects a Summary proto or its serialized "
                f"bytes (a summary op's value), got "
                f"{type(summary).__name__}"
            )
        self._add_serialized_summary(parsed.SerializeToString(), global_step)

    def _strip_seen_metadata(self, summary) -> bool:
        """As TF: a value keeps its ``SummaryMetadata`` only the first time its
        tag is seen. Whether ``summary`` changed."""
        changed = False
        for value in summary.value:
            if not value.HasField("metadata"):
                continue
            if value.tag in self._seen_summary_tags:
                value.ClearField("metadata")
                changed = True
            else:
                self._seen_summary_tags.add(value.tag)
        return changed

    def _add_serialized_summary(self, data: bytes, step):
        if self._closed:
            self._warn_closed(stacklevel=4)
            return
        self.event_writer.add_serialized_event(
            serialized_summary_event(data, time.time(), step)
        )

    def add_session_log(self, session_log, global_step=None):
        """Writes a ``SessionLog`` (e.g. ``SessionLog(status=SessionLog.START)``,
        which tells TensorBoard to drop later-step events of a restarted run)."""
        self._add_event(summary_pb2.Event(session_log=session_log), global_step)

    def add_graph(self, graph, global_step=None):
        """Writes ``graph`` (an ``nd.Graph`` or a ``GraphDef``) for TensorBoard's
        graph tab."""
        if isinstance(graph, Graph):
            graph_def = graph.as_graph_def(add_shapes=True)
        elif isinstance(graph, graph_pb2.GraphDef):
            graph_def = graph
        else:
            raise TypeError(
                "The passed graph must be an instance of `Graph` or a "
                f"`GraphDef`, got {type(graph).__name__}"
            )
        self._add_event(
            summary_pb2.Event(graph_def=graph_def.SerializeToString()), global_step
        )

    def add_meta_graph(self, meta_graph_def, global_step=None):
        """Writes a ``MetaGraphDef`` (e.g. from ``nd.train.export_meta_graph``)."""
        self._add_event(
            summary_pb2.Event(meta_graph_def=meta_graph_def.SerializeToString()),
            global_step,
        )

    def add_run_metadata(self, run_metadata, tag, global_step=None):
        """Writes ``run_metadata`` (a ``RunMetadata``, e.g. of a traced run) under
        ``tag``, for TensorBoard's graph tab (compute time and memory)."""
        if not isinstance(tag, str):
            raise TypeError(f"tag must be a str, got {type(tag).__name__}")
        tagged = summary_pb2.TaggedRunMetadata(
            tag=tag, run_metadata=run_metadata.SerializeToString())
        self._add_event(summary_pb2.Event(tagged_run_metadata=tagged), global_step)

    def add_event(self, event):
        """Writes ``event``, an ``Event`` proto, as it is."""
        if self._closed:
            self._warn_closed(stacklevel=3)
            return
        self.event_writer.add_event(event)

    @staticmethod
    def _warn_closed(stacklevel):
        warnings.warn(
            "Attempting to use a closed FileWriter. The operation will "
            "be a noop unless the FileWriter is explicitly reopened.",
            stacklevel=stacklevel,
        )

    def _add_event(self, event, step):
        event.wall_time = time.time()
        if step is not None:
            event.step = int(step)
        self.add_event(event)

    def flush(self):
        """Returns once everything added so far is in the file."""
        self.event_writer.flush()

    def close(self):
        """Flushes and closes the event file."""
        self.event_writer.close()
        self._closed = True

    def reopen(self):
        """After ``close``: writes on to a new event file in the same directory."""
        self.event_writer.reopen()
        self._closed = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class FileWriterCache:
    """One ``FileWriter`` per directory, shared by hooks in this process (TF's
    ``SummaryWriterCache``).

    >>> import tempfile
    >>> import nbdist as nd
    >>> d = tempfile.mkdtemp()
    >>> nd.summary.FileWriterCache.get(d) is nd.summary.FileWriterCache.get(d)
    True
    >>> nd.summary.FileWriterCache.clear()
    """

    _cache: ClassVar[dict[str, FileWriter]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @staticmethod
    def get(logdir) -> FileWriter:
        """The writer for ``logdir``, made (with the default graph) on first use."""
        with FileWriterCache._lock:
            writer = FileWriterCache._cache.get(logdir)
            if writer is None:
                writer = FileWriter(logdir, graph=get_default_graph())
                FileWriterCache._cache[logdir] = writer
            return writer

    @staticmethod
    def clear():
        """Closes and forgets every cached writer."""
        with FileWriterCache._lock:
            writers = list(FileWriterCache._cache.values())
            FileWriterCache._cache.clear()
        for writer in writers:
            writer.close()
