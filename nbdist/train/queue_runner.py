"""``QueueRunner``: threads that run enqueue ops in a loop, as TF's.

Each enqueue op gets a thread that runs it until the queue is closed
(``OutOfRangeError``), the coordinator stops, or an error (reported to the
coordinator). With a coordinator, one more thread runs ``cancel_op`` once a
stop is requested. ``to_proto`` / ``from_proto`` carry a runner as a
``QueueRunnerDef`` (TF's message, with its field numbers).

An enqueue of one reader record through a parse (the TF1 input pipeline)
runs k records per run where ``queue_runner_batched`` can build its vector
form; the records, their order and the errors stay the one-record loop's.
"""

from __future__ import annotations

import logging
import threading
import weakref

from nbdist import errors
from nbdist.framework.default_session import get_default_session
from nbdist.framework.ops import GraphKeys, get_default_graph
from nbdist.proto.queue_runner_pb2 import QueueRunnerDef
from nbdist.train.queue_runner_batched import batched_enqueue

_log = logging.getLogger("nbdist")


class QueueRunner:
    """Holds a queue and the ops that fill it; ``create_threads`` runs them."""

    def __init__(self, queue=None, enqueue_ops=None, close_op=None, cancel_op=None,
                 queue_closed_exception_types=None, queue_runner_def=None,
                 import_scope=None, name=None):
        self._batched = {}  # enqueue op -> its BatchedEnqueue (or None)
        if queue_runner_def is not None:
            if queue or enqueue_ops:
                raise ValueError("queue_runner_def and queue are mutually exclusive.")
            self._init_from_proto(queue_runner_def, import_scope)
        else:
            if not queue or not enqueue_ops:
                raise ValueError("Must provide queue and enqueue_ops.")
            self._queue = queue
            self._enqueue_ops = list(enqueue_ops)
            self._close_op = close_op if close_op is not None else queue.close()
            self._cancel_op = cancel_op if cancel_op is not None else queue.close(
                cancel_pending_enqueues=True)
            if queue_closed_exception_types is None:
                queue_closed_exception_types = (errors.OutOfRangeError,)
            queue_closed_exception_types = tuple(queue_closed_exception_types)
            if not queue_closed_exception_types or not all(
                    isinstance(t, type) and issubclass(t, errors.OpError)
                    for t in queue_closed_exception_types):
                raise TypeError(f"queue_closed_exception_types, when provided, must "
                                f"be a tuple of nd.errors.OpError classes, got "
                                f"{queue_closed_exception_types!r}")
            self._queue_closed_exception_types = queue_closed_exception_types
            for op in self._enqueue_ops:
                if op not in self._batched:
                    self._batched[op] = _batched_or_none(op, queue)
        self._name = name or self._queue.name
        self._lock = threading.Lock()
        self._runs_per_session = weakref.WeakKeyDictionary()
        self._exceptions_raised: list = []

    def _init_from_proto(self, queue_runner_def, import_scope):
        g = get_default_graph()
        pre = (import_scope + "/") if import_scope else ""

        def element(name):
            return g.as_graph_element(pre + name)

        self._queue = element(queue_runner_def.queue_name)
        self._enqueue_ops = [element(n) for n in queue_runner_def.enqueue_op_name]
        self._close_op = element(queue_runner_def.close_op_name)
        self._cancel_op = element(queue_runner_def.cancel_op_name)
        # A runner saved before the field existed meant OUT_OF_RANGE only.
        self._queue_closed_exception_types = tuple(
            errors.exception_type_from_error_code(code)
            for code in queue_runner_def.queue_closed_exception_types) or (
                errors.OutOfRangeError,)

    queue = property(lambda self: self._queue)
    enqueue_ops = property(lambda self: list(self._enqueue_ops))
    close_op = property(lambda self: self._close_op)
    cancel_op = property(lambda self: self._cancel_op)
    queue_closed_exception_types = property(
        lambda self: self._queue_closed_exception_types)
    name = property(lambda self: self._name)

    def to_proto(self, export_scope=None):
        """This runner as a ``QueueRunnerDef`` (op names relative to
        ``export_scope``); None if its queue is outside ``export_scope``."""
        def strip(name):
            return name[len(export_scope) + 1:] if export_scope else name

        if export_scope and not self._queue.name.startswith(export_scope + "/"):
            return None
        return QueueRunnerDef(
            queue_name=strip(self._queue.name),
            enqueue_op_name=[strip(op.name) for op in self._enqueue_ops],
            close_op_name=strip(self._close_op.name),
            cancel_op_name=strip(self._cancel_op.name),
            queue_closed_exception_types=[
                errors.error_code_from_exception_type(t)
                for t in self._queue_closed_exception_types])

    @staticmethod
    def from_proto(queue_runner_def, import_scope=None):
        """The ``QueueRunner`` of ``queue_runner_def``, its ops looked up in the
        default graph (under ``import_scope``)."""
        return QueueRunner(queue_runner_def=queue_runner_def,
                           import_scope=import_scope)

    @property
    def exceptions_raised(self) -> list:
        """Exceptions the threads raised (only when there is no coordinator)."""
        return list(self._exceptions_raised)

    def _run(self, sess, enqueue_op, coord=None):
        decremented = False
        try:
            # As TF: one callable made for the loop (no fetch lookup per run); a
            # session-like object without make_callable is run as it is.
            make = getattr(sess, "make_callable", None)
            batched = self._batched.get(enqueue_op) if make is not None else None
            enqueue = (batched.make_step(sess, self._queue_closed_exception_types)
                       if batched is not None else make(enqueue_op)
                       if make is not None else lambda: sess.run(enqueue_op))
            while True:
                if coord is not None and coord.should_stop():
                    break
                try:
                    enqueue()
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


def _batched_or_none(enqueue_op, queue):
    try:
        return batched_enqueue(enqueue_op, queue)
    # A graph it does not expect keeps the one-record loop; the vector form is
    # an optimisation and must never keep a program from building its runner.
    except (ValueError, TypeError, KeyError, AttributeError, errors.OpError) as e:
        _log.debug("QueueRunner: %s runs one record per run (%s)", enqueue_op.name,
                   e)
        return None


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
    if not hasattr(sess, "run") or not hasattr(sess, "graph"):
        raise TypeError(f"sess must be a `nd.Session` object. Given class: "
                        f"{type(sess)}")
    if type(sess).__name__ in ("MonitoredSession", "SingularMonitoredSession"):
        # A monitored session starts its own queue runners (as TF, ignored).
        return []
    graph = sess.graph or get_default_graph()
    threads = []
    for qr in graph.get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon,
                                         start=start))
    return threads


__all__ = ["QueueRunner", "add_queue_runner", "start_queue_runners"]
