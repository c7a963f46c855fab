"""``TrainingView``: live training curves, per worker — the loss against the
step, and steps per second against time — drawn with matplotlib (Agg, to a PNG
inside the widget; no pyplot state is touched).

Where the numbers come from:

* **summaries**: ``logdir=`` is read like TensorBoard reads it: every
  directory under it holding event files (``nd.summary.FileWriter``,
  ``SummarySaverHook``) is one run, named by its path under ``logdir``; the
  scalar ``tag`` (default ``"loss"``, also matching ``"<scope>/loss"``) is the
  loss curve. New records are read as they are flushed.
* **step events**: following a cluster (``cluster=``), each ``step`` event a
  worker (or chief) task publishes counts towards its steps per second.
* **by hand**: ``record(run, step, loss)``, e.g. from a ``%%cluster`` cell.

Steps per second come from the step events when there are any, otherwise from
the wall times of the loss points. The static forms are ``text/plain`` (runs
and point counts) and ``image/png`` (the figure).
"""

from __future__ import annotations

import base64
import collections
import io
import os
import struct
import threading
import time

from nbdist.notebook._live import LiveView, esc, short_task

__all__ = ["TrainingView", "read_scalars"]

_RATE_WINDOW = 8  # steps per steps/s estimate
_COLORS = ("#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#cf222e")


class _EventFileReader:
    """Reads an event file's TFRecords incrementally: a partly written record
    at the end is left for the next read."""

    def __init__(self, path: str):
        self.path = path
        self._offset = 0

    def read(self) -> list:
        from nbdist.proto.summary_pb2 import Event

        events = []
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack_from("<Q", data, pos)
            end = pos + 12 + length + 4
            if end > len(data):
                break
            events.append(Event.FromString(data[pos + 12 : pos + 12 + length]))
            pos = end
        self._offset += pos
        return events


def _matches(tag: str, wanted: str) -> bool:
    return tag == wanted or tag.endswith("/" + wanted)


def read_scalars(logdir: str, tag: str = "loss") -> dict:
    """{run: [(wall_time, step, value)]} of the scalar ``tag`` in the event
    files under ``logdir`` (run: the directory's path under ``logdir``)."""
    view = TrainingView(logdir=logdir, tag=tag, live=False)
    return {run: list(points) for run, points in view.losses.items()}


class TrainingView(LiveView):
    """Per-worker loss and steps/s, live, as matplotlib curves.

    ``logdir`` holds the summaries to plot (one run per directory of event
    files), ``cluster`` (a ``LocalCluster`` or ``Server``) gives the step
    events for steps/s; ``record(run, step, loss)`` adds points by hand.

    >>> view = TrainingView(live=False)
    >>> for step, loss in enumerate([2.0, 1.0, 0.5]):
    ...     view.record("worker:0", step, loss)
    >>> print(view)
    TrainingView: loss of 1 run: worker:0 (3 points)
    """

    kinds = ("step",)
    refresh_s = 0.5  # a matplotlib draw takes tens of ms
    poll_s = 0.5
    # The PNG is the static face: nbval compares text/plain and skips images,
    # and an HTML form would carry the image's bytes.
    _repr_html_ = None

    def __init__(
        self,
        cluster=None,
        *,
        logdir: str | None = None,
        tag: str = "loss",
        title: str = "",
        source=None,
        follower=None,
        target=None,
        live: bool = True,
    ):
        self.logdir = logdir
        self.tag = tag
        self.title = title
        self.losses: dict[str, list] = collections.defaultdict(list)
        self.step_times: dict[str, list] = collections.defaultdict(list)
        self._readers: dict[str, _EventFileReader] = {}
        self._stop_polling = threading.Event()
        super().__init__(
            cluster, source=source, follower=follower, target=target, live=live
        )
        self.poll()
        self._poller = None
        if live and logdir is not None:
            self._poller = threading.Thread(
                target=self._poll_loop, name="nbdist-TrainingView-logdir", daemon=True
            )
            self._poller.start()

    # -- inputs ------------------------------------------------------------------------
    def record(self, run, step: int, loss: float, wall_time: float | None = None):
        """Adds one loss point to the curve of ``run`` (any label)."""
        wall = time.time() if wall_time is None else wall_time
        with self._lock:
            self.losses[str(run)].append((wall, int(step), float(loss)))
        self._changed()

    def poll(self) -> bool:
        """Reads what was flushed to the event files under ``logdir`` since the
        last poll; returns whether there was anything new."""
        if self.logdir is None or not os.path.isdir(self.logdir):
            return False
        new = False
        for directory, _, files in sorted(os.walk(self.logdir)):
            for name in sorted(files):
                if ".tfevents." not in name:
                    continue
                path = os.path.join(directory, name)
                reader = self._readers.get(path)
                if reader is None:
                    reader = self._readers[path] = _EventFileReader(path)
                run = os.path.relpath(directory, self.logdir)
                run = "." if run == os.curdir else run
                for event in reader.read():
                    new |= self._add_event(run, event)
        if new:
            self._changed()
        return new

    def _add_event(self, run: str, event) -> bool:
        if not event.HasField("summary"):
            return False
        added = False
        with self._lock:
            for value in event.summary.value:
                if _matches(value.tag, self.tag) and value.HasField("simple_value"):
                    self.losses[run].append(
                        (event.wall_time, int(event.step), float(value.simple_value))
                    )
                    added = True
        return added

    def _poll_loop(self):
        # Event files give no notice of new records: read them every poll_s.
        while not self._stop_polling.wait(self.poll_s):
            self.poll()

    def _apply(self, event) -> bool:
        task = short_task(event.payload.get("task") or event.task)
        if not task.startswith(("worker:", "chief:")):
            return False
        self.step_times[task].append(event.wall_time_us / 1e6)
        return True

    def sync(self, timeout: float = 10.0) -> bool:
        """Reads everything flushed and every event so far, and redraws."""
        self.poll()
        return super().sync(timeout)

    def close(self):
        self._stop_polling.set()
        super().close()

    # -- derived series ------------------------------------------------------------------
    def steps_per_sec(self) -> dict:
        """{series: ([seconds since start], [steps/s])}: from step events if
        any, else from the loss points' wall times and steps."""
        with self._lock:
            if any(self.step_times.values()):
                series = {
                    k: (ts, list(range(len(ts)))) for k, ts in self.step_times.items()
                }
            else:
                series = {
                    k: ([p[0] for p in pts], [p[1] for p in pts])
                    for k, pts in self.losses.items()
                }
        starts = [ts[0] for ts, _ in series.values() if ts]
        t0 = min(starts) if starts else 0.0
        out = {}
        for name, (ts, steps) in sorted(series.items()):
            xs, ys = [], []
            for i in range(_RATE_WINDOW, len(ts)):
                dt = ts[i] - ts[i - _RATE_WINDOW]
                if dt > 0:
                    xs.append(ts[i] - t0)
                    ys.append((steps[i] - steps[i - _RATE_WINDOW]) / dt)
            out[name] = (xs, ys)
        return out

    # -- drawing ---------------------------------------------------------------------------
    def figure(self):
        """The matplotlib ``Figure`` of the curves (drawn on an Agg canvas)."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(9.0, 3.2), dpi=100, layout="constrained")
        FigureCanvasAgg(fig)
        loss_ax, rate_ax = fig.subplots(1, 2)
        with self._lock:
            losses = {k: list(v) for k, v in sorted(self.losses.items())}
        for i, (run, pts) in enumerate(losses.items()):
            loss_ax.plot(
                [p[1] for p in pts],
                [p[2] for p in pts],
                label=run,
                color=_COLORS[i % len(_COLORS)],
                linewidth=1.4,
            )
        loss_ax.set(title=self.title or self.tag, xlabel="step", ylabel=self.tag)
        for i, (name, (xs, ys)) in enumerate(self.steps_per_sec().items()):
            rate_ax.plot(xs, ys, label=name, color=_COLORS[i % len(_COLORS)])
        rate_ax.set(title="steps/s", xlabel="seconds", ylabel="steps/s")
        rate_ax.set_ylim(bottom=0)
        for ax in (loss_ax, rate_ax):
            ax.grid(True, color="#eaeef2")
            ax.spines[["top", "right"]].set_visible(False)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8, frameon=False)
        return fig

    def png(self) -> bytes:
        """The figure as PNG bytes."""
        buf = io.BytesIO()
        self.figure().savefig(buf, format="png", metadata={"Software": None})
        return buf.getvalue()

    def _text(self) -> str:
        runs = sorted(self.losses.items())
        if not runs:
            return f"TrainingView: no {self.tag} yet"
        parts = [f"{run} ({len(pts)} points)" for run, pts in runs]
        plural = "s" if len(runs) != 1 else ""
        return f"TrainingView: {self.tag} of {len(runs)} run{plural}: " + ", ".join(
            parts
        )

    def _html(self) -> str:
        data = base64.b64encode(self.png()).decode()
        return (
            f"<div>{esc(self._text())}</div>"
            f"<img class='nbdist-training' src='data:image/png;base64,{data}'/>"
        )

    def _build(self):
        import ipywidgets as w

        return w.Image(value=self.png(), format="png")

    def _update(self, widget):
        widget.value = self.png()

    def _static_bundle(self) -> dict:
        return {
            "text/plain": repr(self),
            "image/png": base64.b64encode(self.png()).decode(),
        }
