"""Session-run hooks, as TF's ``session_run_hook.py`` and
``basic_session_run_hooks.py``.

A ``MonitoredSession`` calls, for each hook: ``begin()`` once (the graph can
still change), ``after_create_session(session, coord)`` after every session
creation (again after a recovery), ``before_run(run_context)`` and
``after_run(run_context, run_values)`` around every ``run``, and
``end(session)`` when closing without an exception.

Messages go through ``nd.compat.v1.logging`` (``nbdist.train.tf_logging``),
with TF's wording.
"""

from __future__ import annotations

import collections
import os
import sys
import time

import numpy as np

from nbdist import errors
from nbdist.framework.ops import GraphKeys, Tensor, get_default_graph
from nbdist.proto import summary_pb2
from nbdist.train import tf_logging as logging
from nbdist.train.meta_graph import export_meta_graph
from nbdist.train.summary_writer import FileWriterCache


# -- session_run_hook ------------------------------------------------------------------
class SessionRunHook:
    """Base class of hooks; every method does nothing by default."""

    def begin(self):
        """Called once before the session is created; may add ops to the graph."""

    def after_create_session(self, session, coord):
        """Called when a session has been created (and re-created on recovery)."""

    def before_run(self, run_context):
        """Returns None or a ``SessionRunArgs`` to add to the coming ``run``."""
        return

    def after_run(self, run_context, run_values):
        """Called after each ``run`` with the values the hook asked for."""

    def end(self, session):
        """Called at the end of the session (not after an exception)."""


class SessionRunArgs(collections.namedtuple("SessionRunArgs",
                                            ["fetches", "feed_dict", "options"])):
    """What a hook adds to a ``run``: fetches, feeds and ``RunOptions``."""

    def __new__(cls, fetches, feed_dict=None, options=None):
        return super().__new__(cls, fetches, feed_dict, options)


class SessionRunContext:
    """The ``run`` a hook sees: ``original_args``, ``session``, ``request_stop``."""

    def __init__(self, original_args, session):
        self._original_args = original_args
        self._session = session
        self._stop_requested = False

    original_args = property(lambda self: self._original_args)
    session = property(lambda self: self._session)
    stop_requested = property(lambda self: self._stop_requested)

    def request_stop(self):
        """Makes ``should_stop()`` of the monitored session return True."""
        self._stop_requested = True


SessionRunValues = collections.namedtuple("SessionRunValues",
                                          ["results", "options", "run_metadata"])
SessionRunValues.__doc__ = "What a hook gets back: ``results`` of its fetches."


# -- helpers -----------------------------------------------------------------------------
def _global_step_read(graph=None):
    """A tensor reading the global step, or None when there is no global step."""
    from nbdist.train import training_util

    gs = training_util.get_global_step(graph)
    if gs is None:
        return None
    if isinstance(gs, Tensor):
        return gs
    return gs.value()


def _global_step_name(graph=None) -> str:
    from nbdist.train import training_util

    gs = training_util.get_global_step(graph)
    return gs.op.name if gs is not None else "global_step"


def _as_graph_element(obj):
    """``obj`` (a tensor, op or name) as an element of the default graph."""
    graph = get_default_graph()
    if not isinstance(obj, str):
        if not hasattr(obj, "graph") or obj.graph is not graph:
            raise ValueError(f"Passed {obj} should have graph attribute that is "
                             f"equal to current graph {graph}.")
        return obj
    if ":" in obj:
        return graph.as_graph_element(obj)
    element = graph.as_graph_element(obj + ":0")
    try:
        graph.as_graph_element(obj + ":1")
    except (KeyError, ValueError):
        pass
    else:
        raise ValueError(f"Name {obj} is ambiguous, as this `Operation` has multiple "
                         "outputs (at least 2).")
    return element


class SecondOrStepTimer:
    """Triggers at most every ``every_secs`` seconds or ``every_steps`` steps."""

    def __init__(self, every_secs=None, every_steps=None):
        self.reset()
        self._every_secs = every_secs
        self._every_steps = every_steps
        if self._every_secs is None and self._every_steps is None:
            raise ValueError("Either every_secs or every_steps should be provided.")
        if self._every_secs is not None and self._every_steps is not None:
            raise ValueError("Can not provide both every_secs and every_steps.")

    def reset(self):
        self._last_triggered_step = None
        self._last_triggered_time = None

    def should_trigger_for_step(self, step) -> bool:
        if self._last_triggered_step is None:
            return True
        if self._last_triggered_step == step:
            return False
        if self._every_secs is not None:
            if time.time() >= self._last_triggered_time + self._every_secs:
                return True
        if self._every_steps is not None:
            if step >= self._last_triggered_step + self._every_steps:
                return True
        return False

    def update_last_triggered_step(self, step):
        """Records a trigger at ``step``; returns (elapsed secs, elapsed steps)
        since the previous one, or (None, None) the first time."""
        current_time = time.time()
        if self._last_triggered_time is None:
            elapsed_secs = elapsed_steps = None
        else:
            elapsed_secs = current_time - self._last_triggered_time
            elapsed_steps = step - self._last_triggered_step
        self._last_triggered_time = current_time
        self._last_triggered_step = step
        return elapsed_secs, elapsed_steps

    def last_triggered_step(self):
        return self._last_triggered_step


class NeverTriggerTimer(SecondOrStepTimer):
    """A timer that never triggers."""

    def __init__(self):
        self.reset()

    def should_trigger_for_step(self, step):
        return False

    def update_last_triggered_step(self, step):
        return None, None


# -- the hooks ---------------------------------------------------------------------------
class LoggingTensorHook(SessionRunHook):
    """Logs the values of ``tensors`` every N local steps, every N seconds, or
    at the end."""

    def __init__(self, tensors, every_n_iter=None, every_n_secs=None, at_end=False,
                 formatter=None):
        only_log_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_log_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError("either at_end and/or exactly one of every_n_iter and "
                             "every_n_secs must be provided.")
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        if not isinstance(tensors, dict):
            self._tag_order = list(tensors)
            tensors = {item: item for item in tensors}
        else:
            self._tag_order = sorted(tensors.keys())
        self._tensors = tensors
        self._formatter = formatter
        self._timer = (NeverTriggerTimer() if only_log_at_end else
                       SecondOrStepTimer(every_secs=every_n_secs,
                                         every_steps=every_n_iter))
        self._log_at_end = at_end

    def begin(self):
        self._timer.reset()
        self._iter_count = 0
        self._current_tensors = {tag: _as_graph_element(t)
                                 for tag, t in self._tensors.items()}

    def before_run(self, run_context):
        self._should_trigger = self._timer.should_trigger_for_step(self._iter_count)
        if self._should_trigger:
            return SessionRunArgs(self._current_tensors)
        return None

    def _log_tensors(self, tensor_values):
        elapsed_secs, _ = self._timer.update_last_triggered_step(self._iter_count)
        with np.printoptions(suppress=True):
            if self._formatter:
                logging.info(self._formatter(tensor_values))
            else:
                stats = ", ".join(f"{tag} = {tensor_values[tag]}"
                                  for tag in self._tag_order)
                if elapsed_secs is not None:
                    logging.info("%s (%.3f sec)", stats, elapsed_secs)
                else:
                    logging.info("%s", stats)

    def after_run(self, run_context, run_values):
        if self._should_trigger:
            self._log_tensors(run_values.results)
        self._iter_count += 1

    def end(self, session):
        if self._log_at_end:
            self._log_tensors(session.run(self._current_tensors))


class StopAtStepHook(SessionRunHook):
    """Requests a stop once the global step reaches ``last_step`` (or
    ``num_steps`` more than at session creation)."""

    def __init__(self, num_steps=None, last_step=None):
        if num_steps is None and last_step is None:
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and last_step is not None:
            raise ValueError("Only one of num_steps or last_step can be specified.")
        self._num_steps = num_steps
        self._last_step = last_step

    def begin(self):
        self._global_step_tensor = _global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use StopAtStepHook.")

    def after_create_session(self, session, coord):
        if self._last_step is None:
            global_step = int(session.run(self._global_step_tensor))
            self._last_step = global_step + self._num_steps

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        global_step = int(run_values.results) + 1
        if global_step >= self._last_step:
            # The value fetched may predate this run's increment: re-read it.
            step = int(run_context.session.run(self._global_step_tensor))
            if step >= self._last_step:
                run_context.request_stop()


class ProgressBarHook(SessionRunHook):
    """A ``tqdm`` progress bar of the global step, up to ``last_step`` (or
    ``num_steps`` more than at session creation; open-ended if neither).

    ``tqdm.auto`` picks the bar: a widget in a notebook, text on a terminal;
    when stderr is neither (a pipe, a file, CI) nothing is printed. The bar
    moves every ``every_n_steps`` global steps, and with other workers' steps
    too, since it follows the shared global step. In a notebook,
    ``MonitoredTrainingSession`` adds one by itself next to a ``StopAtStepHook``.

    >>> import nbdist as nd
    >>> gs = nd.train.get_or_create_global_step()
    >>> train_op = nd.assign_add(gs, 1)
    >>> hooks = [nd.train.StopAtStepHook(last_step=5),
    ...          nd.train.ProgressBarHook(last_step=5, desc="train")]
    >>> with nd.train.MonitoredTrainingSession(hooks=hooks) as sess:
    ...     while not sess.should_stop():
    ...         _ = sess.run(train_op)
    """

    def __init__(self, last_step=None, every_n_steps=1, desc="training",
                 num_steps=None):
        if last_step is not None and num_steps is not None:
            raise ValueError("ProgressBarHook: give last_step or num_steps, not both")
        if not isinstance(every_n_steps, int) or every_n_steps < 1:
            raise ValueError("ProgressBarHook: every_n_steps must be an int >= 1, "
                             f"got {every_n_steps!r}")
        self._last_step = last_step
        self._num_steps = num_steps
        self._every_n_steps = every_n_steps
        self._desc = desc
        self._bar = None
        self._handle = None  # the notebook output the bar is shown in
        self._outages: list = []  # [task, "recovering" | what was redone]

    def begin(self):
        self._global_step_tensor = _global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use ProgressBarHook.")

    def after_create_session(self, session, coord):
        step = int(session.run(self._global_step_tensor))
        if self._bar is None:  # a recovered session keeps its bar
            from tqdm.auto import tqdm

            total = self._last_step
            if total is None and self._num_steps is not None:
                total = step + self._num_steps
            self._step = min(step, total or step)
            kwargs = {}
            widget = _notebook_tqdm(tqdm)
            if widget:  # shown below under a display id, replaced at the end
                kwargs["display"] = False
            self._bar = tqdm(total=total, initial=self._step, desc=self._desc,
                             unit="step", disable=None, **kwargs)
            if widget and not self._bar.disable:
                from IPython.display import display

                self._handle = display(self._bar.container, display_id=True)
        self._show(step)

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        # The value fetched predates this run's increment.
        step = int(run_values.results) + 1
        total = self._bar.total
        if step - self._step >= self._every_n_steps or (total and step >= total):
            self._show(step)

    def end(self, session):
        self._show(int(session.run(self._global_step_tensor)))
        self._bar.close()
        self._leave_text()

    def on_recovery(self, event: dict):
        """A recovery event of its session (``recovery_events``): the bar shows
        the outage while it lasts ("ps:0 lost — recovering") and what it cost
        once over, up to the end."""
        if self._bar is None:
            return
        phase, task = event.get("phase"), event.get("task") or "a task"
        if phase == "lost":
            self._outages.append([task, "recovering"])
        elif not self._outages:
            return
        elif phase == "restored":
            self._outages[-1][0] = task if event.get("task") else self._outages[-1][0]
            self._outages[-1][1] = f"restored step {event.get('step')}"
        elif phase == "redone":
            self._outages[-1][1] = (f"restored, {event.get('count')} "
                                    f"{event.get('unit', 'steps')} redone")
        self._bar.set_postfix_str(self._outage_text(), refresh=True)

    def _outage_text(self) -> str:
        task, what = self._outages[-1]
        sep = " — " if what == "recovering" else ", "
        more = f" ({len(self._outages)} outages)" if len(self._outages) > 1 else ""
        return f"{task} lost{sep}{what}{more}"

    def _leave_text(self):
        """In a notebook: the widget goes, its text stays (saved notebooks then
        show the bar without JavaScript, and no widget model is missing when
        one is reopened)."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        try:
            self._bar.close()  # ended by an error: closed here (red), not in end()
            handle.update({"text/plain": str(self._bar)}, raw=True)
            self._bar.container.close()
        except Exception:  # noqa: BLE001, S110 - the kernel is going away
            pass

    def _show(self, step):
        # Counted here: a disabled tqdm counts nothing.
        step = min(step, self._bar.total) if self._bar.total else step
        if step > self._step:
            self._bar.update(step - self._step)
            self._step = step


def _notebook_tqdm(tqdm) -> bool:
    """Whether ``tqdm`` (``tqdm.auto``'s) is the notebook widget bar."""
    notebook = sys.modules.get("tqdm.notebook")  # imported by tqdm.auto in a kernel
    return notebook is not None and issubclass(tqdm, notebook.tqdm_notebook)


def add_notebook_progress(hooks, other_hooks=None) -> list:
    """``hooks`` plus a ``ProgressBarHook`` when we run in a notebook, one of
    ``hooks``/``other_hooks`` is a ``StopAtStepHook`` and none is a bar."""
    hooks = list(hooks or [])
    every = hooks + list(other_hooks or [])
    stops = [h for h in every if isinstance(h, StopAtStepHook)]
    if not stops or any(isinstance(h, ProgressBarHook) for h in every):
        return hooks
    from tqdm.auto import tqdm

    notebook = sys.modules.get("tqdm.notebook")  # imported by tqdm.auto in a kernel
    if notebook is None or not issubclass(tqdm, notebook.tqdm_notebook):
        return hooks  # a terminal or a script: ProgressBarHook is opt-in there
    stop = stops[0]
    hooks.append(ProgressBarHook(last_step=stop._last_step, num_steps=stop._num_steps))
    return hooks


class CheckpointSaverListener:
    """Called around the saves of a ``CheckpointSaverHook``; ``after_save``
    returning True requests a stop."""

    def begin(self):
        pass

    def before_save(self, session, global_step_value):
        pass

    def after_save(self, session, global_step_value):
        pass

    def end(self, session, global_step_value):
        pass


class CheckpointSaverHook(SessionRunHook):
    """Saves a checkpoint at session creation, every ``save_secs`` seconds or
    ``save_steps`` steps, and at the end. Also writes ``graph.pbtxt``."""

    def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, saver=None,
                 checkpoint_basename="model.ckpt", scaffold=None, listeners=None,
                 save_graph_def=True):
        logging.info("Create CheckpointSaverHook.")
        if saver is not None and scaffold is not None:
            raise ValueError("You cannot provide both saver and scaffold.")
        self._saver = saver
        self._checkpoint_dir = checkpoint_dir
        self._save_path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._listeners = listeners or []
        self._steps_per_run = 1
        self._save_graph_def = save_graph_def

    def _set_steps_per_run(self, steps_per_run):
        self._steps_per_run = steps_per_run

    def begin(self):
        self._global_step_tensor = _global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use "
                               "CheckpointSaverHook.")
        self._summary_writer = FileWriterCache.get(self._checkpoint_dir)
        for listener in self._listeners:
            listener.begin()

    def after_create_session(self, session, coord):
        global_step = int(session.run(self._global_step_tensor))
        if self._save_graph_def:
            # Here, not in begin(): other hooks may still add ops in theirs.
            graph = getattr(session, "graph", None) or get_default_graph()
            _write_graph_pbtxt(graph, self._checkpoint_dir)
            saver_def = getattr(self._get_saver(), "saver_def", None)
            graph_def = graph.as_graph_def(add_shapes=True)
            self._summary_writer.add_graph(graph_def)
            self._summary_writer.add_meta_graph(export_meta_graph(
                graph_def=graph_def, saver_def=saver_def, graph=graph))
        # The checkpoint saved here is the state at step "global_step".
        self._save(session, global_step)
        self._timer.update_last_triggered_step(global_step)

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        stale_global_step = int(run_values.results)
        if self._timer.should_trigger_for_step(stale_global_step +
                                               self._steps_per_run):
            global_step = int(run_context.session.run(self._global_step_tensor))
            if self._timer.should_trigger_for_step(global_step):
                self._timer.update_last_triggered_step(global_step)
                if self._save(run_context.session, global_step):
                    run_context.request_stop()

    def end(self, session):
        last_step = int(session.run(self._global_step_tensor))
        if last_step != self._timer.last_triggered_step():
            self._save(session, last_step)
        for listener in self._listeners:
            listener.end(session, last_step)
        # The cached writer's thread is a daemon: flush so nothing is lost at exit.
        self._summary_writer.flush()

    def _save(self, session, step) -> bool:
        logging.info("Saving checkpoints for %d into %s.", step, self._save_path)
        for listener in self._listeners:
            listener.before_save(session, step)
        self._get_saver().save(session, self._save_path, global_step=step,
                               write_meta_graph=self._save_graph_def)
        self._summary_writer.add_session_log(summary_pb2.SessionLog(
            status=summary_pb2.SessionLog.CHECKPOINT, checkpoint_path=self._save_path),
            step)
        should_stop = False
        for listener in self._listeners:
            if listener.after_save(session, step):
                logging.info("A CheckpointSaverListener requested that training be "
                          "stopped. listener: %s", listener)
                should_stop = True
        return should_stop

    def _get_saver(self):
        if self._saver is not None:
            return self._saver
        if self._scaffold is not None:
            return self._scaffold.saver
        savers = get_default_graph().get_collection(GraphKeys.SAVERS)
        if not savers:
            raise RuntimeError(f"No items in collection {GraphKeys.SAVERS}. Please add "
                               "a saver to the collection or provide a saver or "
                               "scaffold.")
        if len(savers) > 1:
            raise RuntimeError(f"More than one item in collection {GraphKeys.SAVERS}. "
                               "Please indicate which one to use by passing it to "
                               "the constructor.")
        self._saver = savers[0]
        return savers[0]


def _write_graph_pbtxt(graph, directory):
    """Writes ``graph.pbtxt`` into ``directory`` atomically (text GraphDef)."""
    from google.protobuf import text_format

    os.makedirs(directory, exist_ok=True)
    text = text_format.MessageToString(graph.as_graph_def(add_shapes=True))
    path = os.path.join(directory, "graph.pbtxt")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class StepCounterHook(SessionRunHook):
    """Logs ``global_step/sec`` every N steps or seconds; warns when the global
    step stops moving."""

    def __init__(self, every_n_steps=100, every_n_secs=None, output_dir=None,
                 summary_writer=None):
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should "
                             "be provided.")
        self._timer = SecondOrStepTimer(every_steps=every_n_steps,
                                        every_secs=every_n_secs)
        self._output_dir = output_dir
        self._summary_writer = summary_writer
        self._last_global_step = None
        self._steps_per_run = 1

    def _set_steps_per_run(self, steps_per_run):
        self._steps_per_run = steps_per_run

    def begin(self):
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = FileWriterCache.get(self._output_dir)
        self._global_step_tensor = _global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use StepCounterHook.")
        self._summary_tag = _global_step_name() + "/sec"

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def end(self, session):
        if self._summary_writer is not None and hasattr(self._summary_writer, "flush"):
            self._summary_writer.flush()

    def _log_and_record(self, elapsed_steps, elapsed_time, global_step):
        steps_per_sec = elapsed_steps / elapsed_time if elapsed_time else float("inf")
        if self._summary_writer is not None:
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(
                tag=self._summary_tag, simple_value=steps_per_sec)])
            self._summary_writer.add_summary(summary, global_step)
        logging.info("%s: %g", self._summary_tag, steps_per_sec)

    def after_run(self, run_context, run_values):
        stale_global_step = int(run_values.results)
        if self._timer.should_trigger_for_step(stale_global_step +
                                               self._steps_per_run):
            global_step = int(run_context.session.run(self._global_step_tensor))
            if self._timer.should_trigger_for_step(global_step):
                elapsed_time, elapsed_steps = self._timer.update_last_triggered_step(
                    global_step)
                if elapsed_time is not None:
                    self._log_and_record(elapsed_steps, elapsed_time, global_step)
        # Some optimizers (SyncReplicasOptimizer on a worker) do not move the
        # global step on every run: warn only the first 5 times (as TF).
        if stale_global_step == self._last_global_step:
            logging.log_first_n(
                logging.WARN,
                "It seems that global step (tf.train.get_global_step) has not "
                "been increased. Current value (could be stable): %s vs previous "
                "value: %s. You could increase the global step by passing "
                "tf.train.get_global_step() to Optimizer.apply_gradients or "
                "Optimizer.minimize.", 5, stale_global_step, self._last_global_step)
        self._last_global_step = stale_global_step


class NanLossDuringTrainingError(RuntimeError):
    def __str__(self):
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Stops training (raising ``NanLossDuringTrainingError``, or only
    requesting a stop) when ``loss_tensor`` is NaN."""

    def __init__(self, loss_tensor, fail_on_nan_loss=True):
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss_tensor)

    def after_run(self, run_context, run_values):
        if np.any(np.isnan(run_values.results)):
            failure_message = "Model diverged with loss = NaN."
            if self._fail_on_nan_loss:
                logging.error(failure_message)
                raise NanLossDuringTrainingError
            logging.warning(failure_message)
            run_context.request_stop()


class GlobalStepWaiterHook(SessionRunHook):
    """Delays the first run until the global step reaches ``wait_until_step``."""

    def __init__(self, wait_until_step):
        self._wait_until_step = wait_until_step

    def begin(self):
        self._worker_is_started = False
        self._global_step_tensor = _global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use "
                               "GlobalStepWaiterHook.")

    def before_run(self, run_context):
        if self._worker_is_started:
            return
        if self._wait_until_step <= 0:
            self._worker_is_started = True
            return
        logging.info("Waiting for global step %d before starting training.",
                  self._wait_until_step)
        last_logged_step = 0
        while True:
            current_step = int(run_context.session.run(self._global_step_tensor))
            if current_step >= self._wait_until_step:
                self._worker_is_started = True
                return
            if current_step - last_logged_step > 1000:
                logging.info("Waiting for global step %d before starting training. "
                          "Current step is %d.", self._wait_until_step, current_step)
                last_logged_step = current_step
            # Nothing pushes a variable's new value: read it again (as TF does).
            time.sleep(0.5)


class FinalOpsHook(SessionRunHook):
    """Runs ``final_ops`` at the end; their values are ``final_ops_values``."""

    def __init__(self, final_ops, final_ops_feed_dict=None):
        self._final_ops = final_ops
        self._final_ops_feed_dict = final_ops_feed_dict
        self._final_ops_values = None

    @property
    def final_ops_values(self):
        return self._final_ops_values

    def end(self, session):
        if self._final_ops is None:
            return
        try:
            self._final_ops_values = session.run(self._final_ops,
                                                 feed_dict=self._final_ops_feed_dict)
        except (errors.OutOfRangeError, StopIteration):
            logging.warning(
                "An OutOfRangeError or StopIteration exception is raised by the "
                "code in FinalOpsHook. This typically means the Ops running by the "
                "FinalOpsHook have a dependency back to some input source, which "
                "should not happen. The final ops should only read variables, not "
                "take another batch from an input. Please fix that.")
            raise


class FeedFnHook(SessionRunHook):
    """Feeds ``feed_fn()`` into every run."""

    def __init__(self, feed_fn):
        self.feed_fn = feed_fn

    def before_run(self, run_context):
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


__all__ = [
    "CheckpointSaverHook", "CheckpointSaverListener", "FeedFnHook", "FinalOpsHook",
    "GlobalStepWaiterHook", "LoggingTensorHook", "NanLossDuringTrainingError",
    "NanTensorHook", "NeverTriggerTimer", "ProgressBarHook", "SecondOrStepTimer",
    "SessionRunArgs",
    "SessionRunContext", "SessionRunHook", "SessionRunValues", "StepCounterHook",
    "StopAtStepHook",
]
