"""``ProfilerHook``: traces a step every N steps or seconds and writes it as a
Chrome trace, as TF's ``basic_session_run_hooks.ProfilerHook``.

>>> import glob, tempfile
>>> import nbdist as nd
>>> d = tempfile.mkdtemp()
>>> with nd.Graph().as_default():
...     step = nd.train.get_or_create_global_step().assign_add(1)
...     hooks = [nd.train.ProfilerHook(save_steps=2, output_dir=d),
...              nd.train.StopAtStepHook(last_step=4)]
...     with nd.train.MonitoredSession(hooks=hooks) as sess:
...         while not sess.should_stop():
...             _ = sess.run(step)
>>> sorted(p.rsplit("/", 1)[1] for p in glob.glob(d + "/timeline-*.json"))
['timeline-2.json', 'timeline-4.json']
"""

from __future__ import annotations

import os

from nbdist.proto import config_pb2
from nbdist.train import tf_logging as logging
from nbdist.train.hooks import (
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunHook,
    _global_step_read,
)
from nbdist.train.summary_writer import FileWriterCache
from nbdist.train.timeline import Timeline


class ProfilerHook(SessionRunHook):
    """Every ``save_steps`` steps or ``save_secs`` seconds (exactly one),
    runs a step with ``RunOptions(trace_level=FULL_TRACE)`` and writes its
    timeline to ``output_dir/timeline-<global step>.json`` (Chrome trace
    format: open it in ``chrome://tracing`` or Perfetto). The run metadata
    also goes to the directory's event file (``step_<N>``) for TensorBoard.
    """

    def __init__(self, save_steps=None, save_secs=None, output_dir="",
                 show_dataflow=True, show_memory=False):
        self._output_dir = output_dir
        self._output_file = os.path.join(output_dir, "timeline-{}.json")
        self._file_writer = None
        self._show_dataflow = show_dataflow
        self._show_memory = show_memory
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self):
        self._next_step = None
        self._global_step_tensor = _global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use ProfilerHook.")
        # Made here, not in __init__: the cached writer records the built graph.
        self._file_writer = FileWriterCache.get(self._output_dir)

    def before_run(self, run_context):
        self._request_summary = (self._next_step is not None and
                                 self._timer.should_trigger_for_step(self._next_step))
        options = (config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE)
                   if self._request_summary else None)
        return SessionRunArgs({"global_step": self._global_step_tensor},
                              options=options)

    def after_run(self, run_context, run_values):
        stale_global_step = int(run_values.results["global_step"])
        if self._next_step is None:
            # The first run only starts the clock.
            self._timer.update_last_triggered_step(stale_global_step)
        global_step = stale_global_step + 1
        if self._request_summary:
            global_step = int(run_context.session.run(self._global_step_tensor))
            self._timer.update_last_triggered_step(global_step)
            self._save(global_step, self._output_file.format(global_step),
                       run_values.run_metadata.step_stats,
                       getattr(run_context.session, "graph", None))
            self._file_writer.add_run_metadata(run_values.run_metadata,
                                               f"step_{global_step}")
        self._next_step = global_step + 1

    def end(self, session):
        self._file_writer.flush()

    def _save(self, step, save_path, step_stats, graph):
        logging.info("Saving timeline for %d into '%s'.", step, save_path)
        trace = Timeline(step_stats, graph).generate_chrome_trace_format(
            show_dataflow=self._show_dataflow, show_memory=self._show_memory)
        if os.path.dirname(save_path):
            os.makedirs(os.path.dirname(save_path), exist_ok=True)
        with open(save_path, "w") as f:
            f.write(trace)


__all__ = ["ProfilerHook"]
