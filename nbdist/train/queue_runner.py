"""``QueueRunner``: threads that run enqueue ops in a loop, as TF's.

Each enqueue op gets a thread that runs it until the queue is closed
(``OutOfRangeError``), the coordinator stops, or an error (reported to the
coordinator). With a coordinator, one more thread runs ``cancel_op`` once a
stop is requested.
"""

from __future__ import annotations

import logging
import threading
import weakref

from nbdist import errors
from nbdist.graph.default_session import get_default_session
from nbdist.graph.ops import GraphKeys, get_default_graph

_log = logging.getLogger("nbdist")


class QueueRunner:
    """Holds a queue and the ops that fill it; ``create_threads`` runs them."""

    def __init__(self, queue=None, enqueue_ops=None, close_op=None, cancel_op=None,
                 queue_closed_exception_types=None, name=None):
        if not queue or not enqueue_ops:
            raise ValueError("Must provide queue and enqueue_ops.")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = cancel_op if cancel_op is not None else queue.close(
            cancel_pending_enqueues=True)
        if queue_closed_exception_types is None:
            queue_closed_exception_types = (errors.OutOfRangeError,)
        self._queue_closed_exception_types = tuple(queue_closed_exception_types)
        self._name = name or queue.name
        self._lock = threading.Lock()
        self._runs_per_session = weakref.WeakKeyDictionary()
        self._exceptions_raised: list = []

    queue = property(lambda self: self._queue)
    enqueue_ops = property(lambda self: list(self._enqueue_ops))
    close_op = property(lambda self: self._close_op)
    cancel_op = property(lambda self: self._cancel_op)
    queue_closed_exception_types = property(
        lambda self: self._queue_closed_exception_types)
    name = property(lambda self: self._name)

    @property
    def exceptions_raised(self) -> list:
        """Exceptions the threads raised (only when there is no coordinator)."""
        return list(self._exceptions_raised)

    def _run(self, sess, enqueue_op, coord=None):
        decremented = False
        try:
            while True:
                if coord is not None and coord.should_stop():
                    break
                try:
                    sess.run(enqueue_op)
                except self._queue_closed_exception_types:
                    with self._lock:
                        self._runs_per_session[sess] -= 1
                        decremented = True
                        if self._runs_per_session[sess] == 0:
                            try:
                                sess.run(self._close_op)
                            except Exception as e:  # noqa: BLE001 - as TF
                                _log.debug("Ignored exception: %s", e)
                        return
        except Exception as e:
            if coord is not None:
                try:
                    coord.request_stop(e)
                except Exception:  # noqa: BLE001 - the coordinator was joined
                    _log.debug("QueueRunner error after the coordinator was joined: "
                               "%s", e)
            else:
                _log.error("Exception in QueueRunner: %s", e)
                with self._lock:
                    self._exceptions_raised.append(e)
                raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs_per_session[sess] -= 1

    def _close_on_stop(self, sess, cancel_op, coord):
        coord.wait_for_stop()
        try:
            sess.run(cancel_op)
        except Exception as e:  # noqa: BLE001 - as TF: ignored
            _log.debug("Ignored exception: %s", e)

    def create_threads(self, sess, coord=None, daemon=False, start=False) -> list:
        """Threads running the enqueue ops in ``sess`` (none if they already run
        there); registered with ``coord`` and started when asked."""
        with self._lock:
            if self._runs_per_session.get(sess, 0) > 0:
                return []
            self._runs_per_session[sess] = len(self._enqueue_ops)
            self._exceptions_raised = []
        threads = [threading.Thread(target=self._run, args=(sess, op, coord),
                                    name=f"QueueRunnerThread-{self._name}-{op.name}")
                   for op in self._enqueue_ops]
        if coord is not None:
            threads.append(threading.Thread(
                target=self._close_on_stop, args=(sess, self._cancel_op, coord),
                name=f"QueueRunnerThread-{self._name}-close_on_stop"))
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if daemon:
                t.daemon = True
            if start:
                t.start()
        return threads


def add_queue_runner(qr, collection=GraphKeys.QUEUE_RUNNERS):
    """Adds ``qr`` to the graph's ``collection`` (default ``QUEUE_RUNNERS``)."""
    get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(sess=None, coord=None, daemon=True, start=True,
                        collection=GraphKeys.QUEUE_RUNNERS) -> list:
    """Starts the queue runners of ``collection`` in ``sess`` (default session)."""
    if sess is None:
        sess = get_default_session()
        if sess is None:
            raise ValueError("Cannot start queue runners: No default session is "
                             "registered. Use `with sess.as_default()` or pass an "
                             "explicit session to nd.train.start_queue_runners(sess=sess)")
    graph = getattr(sess, "graph", None) or get_default_graph()
    threads = []
    for qr in graph.get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon,
                                         start=start))
    return threads


__all__ = ["QueueRunner", "add_queue_runner", "start_queue_runners"]
