"""``SummarySaverHook``, as TF's (``basic_session_run_hooks.py``): runs the
summary op every N steps or seconds and writes its value to an event file."""

from __future__ import annotations

from nbdist.proto import summary_pb2
from nbdist.train.hooks import (
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunHook,
    _global_step_read,
)
from nbdist.train.summary_writer import FileWriterCache


class SummarySaverHook(SessionRunHook):
    """Saves summaries every ``save_steps`` steps or ``save_secs`` seconds.

    The summary comes from ``summary_op`` (a tensor or a list of them) or from
    ``scaffold.summary_op`` (exactly one of the two); it is written with
    ``summary_writer``, or the cached ``FileWriter`` of ``output_dir``, at the
    global step (which must exist). The first run also writes
    ``SessionLog(START)``.

    >>> import tempfile
    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     step = nd.train.get_or_create_global_step()
    ...     train = nd.assign_add(step, 1)
    ...     hook = SummarySaverHook(save_steps=2, output_dir=tempfile.mkdtemp(),
    ...                             summary_op=nd.summary.scalar("s", step))
    ...     with nd.train.MonitoredSession(hooks=[hook]) as sess:
    ...         for _ in range(3):
    ...             _ = sess.run(train)
    >>> nd.summary.FileWriterCache.clear()
    """

    def __init__(
        self,
        save_steps=None,
        save_secs=None,
        output_dir=None,
        summary_writer=None,
        scaffold=None,
        summary_op=None,
    ):
        if (scaffold is None) == (summary_op is None):
            raise ValueError("Exactly one of scaffold or summary_op must be provided.")
        self._summary_op = summary_op
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self):
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = FileWriterCache.get(self._output_dir)
        self._next_step = None
        self._global_step_tensor = _global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use SummarySaverHook.")

    def before_run(self, run_context):
        self._request_summary = (
            self._next_step is None
            or self._timer.should_trigger_for_step(self._next_step)
        )
        requests = {"global_step": self._global_step_tensor}
        if self._request_summary:
            summary_ops = self._get_summary_op()
            if summary_ops is not None:
                requests["summary"] = summary_ops
        return SessionRunArgs(requests)

    def after_run(self, run_context, run_values):
        if not self._summary_writer:
            return
        global_step = int(run_values.results["global_step"]) + 1
        if self._next_step is None or self._request_summary:
            global_step = int(run_context.session.run(self._global_step_tensor))
        if self._next_step is None:
            self._summary_writer.add_session_log(
                summary_pb2.SessionLog(status=summary_pb2.SessionLog.START), global_step
            )
        if self._request_summary:
            self._timer.update_last_triggered_step(global_step)
            for summary in run_values.results.get("summary", ()):
                self._summary_writer.add_summary(summary, global_step)
        self._next_step = global_step + 1

    def end(self, session=None):
        if self._summary_writer:
            self._summary_writer.flush()

    def _get_summary_op(self):
        summary_op = (
            self._summary_op
            if self._summary_op is not None
            else self._scaffold.summary_op
        )
        if summary_op is None:
            return None
        return summary_op if isinstance(summary_op, list) else [summary_op]
