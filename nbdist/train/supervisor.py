"""``Supervisor``: TF1's ``tf.train.Supervisor``, the training helper before
``MonitoredTrainingSession``.

The chief initialises the model, or restores it from the latest checkpoint in
``logdir``, and saves a checkpoint every ``save_model_secs`` in a thread;
other tasks wait until the model is ready. ``managed_session`` wraps it all
(here with no checkpoint thread, and one checkpoint saved at the end):

    >>> import tempfile
    >>> import nbdist as nd
    >>> logdir = tempfile.mkdtemp()
    >>> with nd.Graph().as_default():
    ...     step = nd.train.get_or_create_global_step()
    ...     train_op = nd.assign_add(step, 1)
    ...     sv = nd.train.Supervisor(logdir=logdir, save_model_secs=0)
    ...     with sv.managed_session() as sess:
    ...         while not sv.should_stop():
    ...             if sess.run(train_op) >= 3:
    ...                 sv.request_stop()
    ...         _ = sv.saver.save(sess, sv.save_path, global_step=step)
    >>> nd.train.latest_checkpoint(logdir).endswith("model.ckpt-3")
    True

Built from ``SessionManager`` (initialise, restore, or wait) and
``Coordinator`` (stop together). As TF's, a Supervisor finalizes its graph;
passing ``None`` for an op means "none" and leaving ``USE_DEFAULT`` takes it
from the graph's collections or builds it (``summary_op``: ``merge_all()``;
the chief's ``summary_writer``: a ``FileWriter(logdir)``, which also gets the
graph). Unlike TF, the chief writes no ``global_step/sec`` summaries.
"""

from __future__ import annotations

import contextlib
import logging
import os

from nbdist.framework.ops import GraphKeys, get_default_graph
from nbdist.ops.summary_ops import merge_all
from nbdist.ops.variables import (
    global_variables,
    global_variables_initializer,
    report_uninitialized_variables,
)
from nbdist.train.coordinator import Coordinator, LooperThread
from nbdist.train.hooks import _write_graph_pbtxt
from nbdist.train.monitored_session import Scaffold, _get_saver_or_default
from nbdist.train.queue_runner import start_queue_runners
from nbdist.train.session_manager import SessionManager
from nbdist.train.summary_writer import FileWriter
from nbdist.train.training_util import get_global_step

__all__ = ["Supervisor"]

_log = logging.getLogger("nbdist")

_VARIABLE_OPS = ("Variable", "VariableV2", "VarHandleOp")


class Supervisor:
    """Initialises, restores or waits for a model, checkpoints it, and stops
    its threads together (see the module docstring for an example).

    Args (as TF's): ``graph`` (default graph), ``ready_op``,
    ``ready_for_local_init_op``, ``is_chief``, ``init_op``, ``init_feed_dict``,
    ``local_init_op``, ``logdir`` (checkpoints are restored from and, by the
    chief, saved to ``logdir/checkpoint_basename``), ``summary_op``,
    ``saver``, ``global_step``, ``save_summaries_secs``, ``save_model_secs``
    (0: no checkpoint thread), ``recovery_wait_secs``, ``stop_grace_secs``,
    ``checkpoint_basename``, ``session_manager``, ``summary_writer``,
    ``init_fn(sess)``, ``local_init_run_options``.
    """

    USE_DEFAULT = 0

    def __init__(self, graph=None, ready_op=USE_DEFAULT,
                 ready_for_local_init_op=USE_DEFAULT, is_chief=True,
                 init_op=USE_DEFAULT, init_feed_dict=None, local_init_op=USE_DEFAULT,
                 logdir=None, summary_op=USE_DEFAULT, saver=USE_DEFAULT,
                 global_step=USE_DEFAULT, save_summaries_secs=120, save_model_secs=600,
                 recovery_wait_secs=30, stop_grace_secs=120,
                 checkpoint_basename="model.ckpt", session_manager=None,
                 summary_writer=USE_DEFAULT, init_fn=None,
                 local_init_run_options=None):
        self._graph = graph if graph is not None else get_default_graph()
        with self._graph.as_default():
            self._init_ready_op(ready_op, ready_for_local_init_op)
            self._init_op = self._default(init_op, GraphKeys.INIT_OP, "init_op",
                                          global_variables_initializer)
            self._init_feed_dict = init_feed_dict
            self._local_init_op = self._default(local_init_op, GraphKeys.LOCAL_INIT_OP,
                                                "local_init_op",
                                                Scaffold.default_local_init_op)
            self._saver = _get_saver_or_default() if saver is self.USE_DEFAULT else saver
            if self._saver is not None and hasattr(self._saver, "build"):
                self._saver.build()
            self._summary_op = (self._default_summary_op()
                                if summary_op is self.USE_DEFAULT else summary_op)
            self._global_step = (get_global_step(self._graph)
                                 if global_step is self.USE_DEFAULT else global_step)
        self._is_chief = is_chief
        self._coord = Coordinator()
        self._logdir = logdir
        self._save_summaries_secs = save_summaries_secs
        self._save_model_secs = save_model_secs
        self._recovery_wait_secs = recovery_wait_secs
        self._stop_grace_secs = stop_grace_secs
        self._init_fn = init_fn
        # Only the chief writes checkpoints and summaries (as TF).
        self._save_path = (os.path.join(logdir, checkpoint_basename)
                           if is_chief and logdir else None)
        self._summary_writer = None
        if is_chief:
            self._summary_writer = summary_writer
            if summary_writer is self.USE_DEFAULT:
                self._summary_writer = FileWriter(logdir) if logdir else None
        self._graph_added_to_summary = False
        self._session_manager = session_manager or SessionManager(
            local_init_op=self._local_init_op, ready_op=self._ready_op,
            ready_for_local_init_op=self._ready_for_local_init_op,
            graph=self._graph, recovery_wait_secs=recovery_wait_secs,
            local_init_run_options=local_init_run_options)
        self._verify_setup()
        self._graph.finalize()

    # -- defaults ------------------------------------------------------------------
    def _default(self, value, collection_key, arg_name, build):
        if value is not self.USE_DEFAULT:
            return value
        return Scaffold.get_or_default(arg_name, collection_key, build)

    def _init_ready_op(self, ready_op, ready_for_local_init_op):
        self._ready_op = self._default(ready_op, GraphKeys.READY_OP, "ready_op",
                                       report_uninitialized_variables)
        self._ready_for_local_init_op = self._default(
            ready_for_local_init_op, GraphKeys.READY_FOR_LOCAL_INIT_OP,
            "ready_for_local_init_op",
            lambda: report_uninitialized_variables(global_variables()))

    def _default_summary_op(self):
        ops = self._graph.get_collection(GraphKeys.SUMMARY_OP)
        if ops:
            return ops[0]
        op = merge_all()
        if op is not None:
            self._graph.add_to_collection(GraphKeys.SUMMARY_OP, op)
        return op

    def _verify_setup(self):
        # Between-graph replication: a worker's variables must live on a ps.
        if self._is_chief:
            return
        for op in self._graph.get_operations():
            if op.type in _VARIABLE_OPS and not op.device:
                raise ValueError("Supervisor (is_chief=False): when using replicas, "
                                 f"all Variables must have their device set: "
                                 f"{op.name} has none")

    # -- properties ------------------------------------------------------------------
    is_chief = property(lambda self: self._is_chief)
    session_manager = property(lambda self: self._session_manager)
    coord = property(lambda self: self._coord)
    init_op = property(lambda self: self._init_op)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    summary_writer = property(lambda self: self._summary_writer)
    summary_op = property(lambda self: self._summary_op)
    save_summaries_secs = property(lambda self: self._save_summaries_secs)
    global_step = property(lambda self: self._global_step)
    saver = property(lambda self: self._saver)
    save_model_secs = property(lambda self: self._save_model_secs)
    save_path = property(lambda self: self._save_path)

    # -- sessions ------------------------------------------------------------------
    def prepare_or_wait_for_session(self, master="", config=None,
                                    wait_for_checkpoint=False, max_wait_secs=7200,
                                    start_standard_services=True):
        """A session on ``master`` whose model is ready: the chief restores the
        latest checkpoint of ``logdir`` or runs ``init_op`` (then writes
        ``graph.pbtxt`` and starts the checkpoint and summary threads);
        another task waits until the chief has done so (at most
        ``max_wait_secs``). Then the graph's queue runners are started."""
        self._coord.clear_stop()
        reopen = getattr(self._summary_writer, "reopen", None)
        if reopen is not None:
            reopen()
        if self._is_chief:
            sess = self._session_manager.prepare_session(
                master, init_op=self._init_op, saver=self._saver,
                checkpoint_dir=self._logdir, wait_for_checkpoint=wait_for_checkpoint,
                max_wait_secs=max_wait_secs, config=config,
                init_feed_dict=self._init_feed_dict, init_fn=self._init_fn)
            self._write_graph()
            if start_standard_services:
                _log.info("Starting standard services.")
                self.start_standard_services(sess)
        else:
            sess = self._session_manager.wait_for_session(
                master, config=config, max_wait_secs=max_wait_secs)
        if start_standard_services:
            _log.info("Starting queue runners.")
            self.start_queue_runners(sess)
        return sess

    @contextlib.contextmanager
    def managed_session(self, master="", config=None, start_standard_services=True,
                        close_summary_writer=True):
        """A context manager around ``prepare_or_wait_for_session``: an
        exception in the block requests a stop (``OutOfRangeError`` silently,
        others are raised again by ``stop``); on exit the threads are stopped
        and the session closed."""
        sess = None
        try:
            sess = self.prepare_or_wait_for_session(
                master=master, config=config,
                start_standard_services=start_standard_services)
            yield sess
        except Exception as e:  # noqa: BLE001 - handed to the coordinator, as TF
            self.request_stop(e)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                if sess is not None:
                    with contextlib.suppress(Exception):
                        sess.close()

    def _write_graph(self):
        if self._logdir:
            _write_graph_pbtxt(self._graph, self._logdir)
        add_graph = getattr(self._summary_writer, "add_graph", None)
        if add_graph is not None and not self._graph_added_to_summary:
            add_graph(self._graph)
            self._graph_added_to_summary = True

    # -- services ------------------------------------------------------------------
    def start_standard_services(self, sess) -> list:
        """The chief's threads: a checkpoint every ``save_model_secs`` (the
        first at once) and ``summary_op`` every ``save_summaries_secs``."""
        if not self._is_chief:
            raise RuntimeError("Only chief supervisor can start standard services. "
                               "Because only chief supervisors can write events.")
        threads = []
        if self._save_model_secs and self._saver is not None and self._save_path:
            threads.append(LooperThread(self._coord, self._save_model_secs,
                                        target=self._save_checkpoint, args=(sess,)))
        if (self._save_summaries_secs and self._summary_op is not None
                and self._summary_writer is not None):
            threads.append(LooperThread(self._coord, self._save_summaries_secs,
                                        target=self._write_summary, args=(sess,)))
        for t in threads:
            t.start()
        return threads

    def _save_checkpoint(self, sess):
        _log.info("Saving checkpoint to path %s", self._save_path)
        self._saver.save(sess, self._save_path, global_step=self._global_step)

    def _write_summary(self, sess):
        if self._global_step is None:
            summary, step = sess.run(self._summary_op), None
        else:
            summary, step = sess.run([self._summary_op, self._global_step])
        self.summary_computed(sess, summary, step)

    def start_queue_runners(self, sess, queue_runners=None) -> list:
        """Starts the graph's queue runners (or ``queue_runners``) under this
        Supervisor's coordinator; returns their threads."""
        if queue_runners is None:
            return start_queue_runners(sess, coord=self._coord)
        threads = []
        for qr in queue_runners:
            threads.extend(qr.create_threads(sess, coord=self._coord, daemon=True,
                                             start=True))
        return threads

    def loop(self, timer_interval_secs, target, args=None, kwargs=None):
        """Calls ``target(*args, **kwargs)`` every ``timer_interval_secs`` in a
        thread until the Supervisor stops; returns the started thread."""
        return LooperThread.loop(self._coord, timer_interval_secs, target, args=args,
                                 kwargs=kwargs)

    def summary_computed(self, sess, summary, global_step=None):
        """Writes a computed ``summary`` with the ``summary_writer``."""
        if self._summary_writer is None:
            raise RuntimeError("Writing a summary requires a summary writer.")
        if global_step is None and self._global_step is not None:
            global_step = sess.run(self._global_step)
        self._summary_writer.add_summary(summary, global_step)

    # -- stopping --------------------------------------------------------------------
    def request_stop(self, ex=None):
        """Asks the threads (and the training loop, through ``should_stop``) to
        stop; ``ex`` is raised again by ``stop`` unless it is an
        ``OutOfRangeError``."""
        self._coord.request_stop(ex=ex)

    def should_stop(self) -> bool:
        return self._coord.should_stop()

    def stop_on_exception(self):
        """A context manager: an exception inside requests a stop."""
        return self._coord.stop_on_exception()

    def wait_for_stop(self):
        self._coord.wait_for_stop()

    def stop(self, threads=None, close_summary_writer=True,
             ignore_live_threads=False):
        """Requests a stop, joins the threads (at most ``stop_grace_secs``
        after the request) and re-raises an exception passed to
        ``request_stop``."""
        self._coord.request_stop()
        try:
            self._coord.join(threads, stop_grace_period_secs=self._stop_grace_secs,
                             ignore_live_threads=ignore_live_threads)
        finally:
            if close_summary_writer and self._summary_writer is not None:
                close = getattr(self._summary_writer, "close", None)
                if close is not None:
                    close()
                self._graph_added_to_summary = False


Supervisor.Loop = Supervisor.loop
Supervisor.PrepareSession = Supervisor.prepare_or_wait_for_session
Supervisor.StartQueueRunners = Supervisor.start_queue_runners
Supervisor.StartStandardServices = Supervisor.start_standard_services
Supervisor.Stop = Supervisor.stop
Supervisor.RequestStop = Supervisor.request_stop
Supervisor.ShouldStop = Supervisor.should_stop
Supervisor.StopOnException = Supervisor.stop_on_exception
Supervisor.WaitForStop = Supervisor.wait_for_stop
Supervisor.SummaryComputed = Supervisor.summary_computed
