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

Curves that tell the truth: the x-axis is the summaries' step (``x="step"``:
the global step, which asynchronous and synchronous runs share, or, with
``steps="local"``, each worker's own count of its steps; the axis says which),
the examples seen (``x="examples"``, the step times ``examples_per_step`` of the run: a
synchronous step of N replicas consumes N batches) or the wall time
(``x="wall"``, seconds since the first point of any run); the live widget has
buttons for the three. A run is drawn as separate segments where it was idle
(no point for longer than ``gap_s``, default five times its median interval
and at least 0.5 s) or went back to an earlier step (restored from a
checkpoint), and so is each worker's steps/s: no line is drawn across a gap.
Each run is labelled at its end.
"""

from __future__ import annotations

import base64
import collections
import io
import itertools
import math
import os
import struct
import threading
import time

from nbdist.notebook.live_view import LiveView, esc, short_task

__all__ = ["X_AXES", "TrainingView", "read_scalars", "segments"]

X_AXES = ("step", "examples", "wall")
STEPS = ("global", "local")
_X_LABELS = {"step": "global step", "examples": "examples", "wall": "seconds"}
_STEP_LABELS = {"global": "global step", "local": "each worker's own step"}
_MIN_GAP_S = 0.5
_GAP_INTERVALS = 5  # an idle gap: this many median intervals with no point

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


def segments(points, gap_s: float | None = None) -> list[list]:
    """``points`` ((wall time, step, value), in the order written) split where
    no point came for longer than ``gap_s`` (default: five times the median
    interval, at least 0.5 s) or the step went back."""
    if not points:
        return []
    if gap_s is None:
        gap_s = idle_gap([p[0] for p in points])
    out = [[points[0]]]
    for prev, p in itertools.pairwise(points):
        if p[0] - prev[0] > gap_s or p[1] < prev[1]:
            out.append([])
        out[-1].append(p)
    return out


def idle_gap(times) -> float:
    """The pause after which a series of wall ``times`` is idle: five times
    its median interval, at least 0.5 s."""
    dts = sorted(b - a for a, b in itertools.pairwise(times) if b > a)
    median = dts[len(dts) // 2] if dts else 0.0
    return max(_MIN_GAP_S, _GAP_INTERVALS * median)


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
        x: str = "step",
        steps: str = "global",
        examples_per_step=None,
        gap_s: float | None = None,
        source=None,
        follower=None,
        target=None,
        live: bool = True,
    ):
        self.logdir = logdir
        self.tag = tag
        self.title = title
        self.examples_per_step = examples_per_step
        if steps not in STEPS:
            raise ValueError(
                f"TrainingView: steps must be one of {STEPS} (what the summaries' "
                f"step counts), got {steps!r}")
        self.steps = steps
        self.gap_s = gap_s
        self.x = x  # checked by the property
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

    # -- the x-axis --------------------------------------------------------------
    @property
    def x(self) -> str:
        """What the loss curves are drawn against: "step", "examples" or "wall"."""
        return self._x

    @x.setter
    def x(self, value: str):
        if value not in X_AXES:
            raise ValueError(f"TrainingView: x must be one of {X_AXES}, got {value!r}")
        if value == "examples" and self.examples_per_step is None:
            raise ValueError(
                "TrainingView: x='examples' needs examples_per_step (an int, or "
                "{run: int}: the examples one global step of that run consumes)"
            )
        self._x = value
        if getattr(self, "_throttle", None) is not None:
            self._changed()

    def _examples_per_step(self, run: str) -> int:
        per = self.examples_per_step
        if isinstance(per, dict):
            if run not in per:
                raise ValueError(f"TrainingView: examples_per_step has no run {run!r}")
            return int(per[run])
        return int(per)

    def curves(self, x: str | None = None) -> dict:
        """{run: [(xs, losses), ...]}: the loss curve of each run against ``x``
        (default ``self.x``), one pair per segment (split at idle gaps)."""
        x = self.x if x is None else x
        if x not in X_AXES:
            raise ValueError(f"TrainingView: x must be one of {X_AXES}, got {x!r}")
        with self._lock:
            losses = {k: list(v) for k, v in sorted(self.losses.items()) if v}
        starts = [p[0] for pts in losses.values() for p in pts]
        t0 = min(starts) if starts else 0.0
        out = {}
        for run, pts in losses.items():
            per = self._examples_per_step(run) if x == "examples" else 1
            out[run] = [
                (
                    [p[0] - t0 if x == "wall" else p[1] * per for p in seg],
                    [p[2] for p in seg],
                )
                for seg in segments(pts, self.gap_s)
            ]
        return out

    # -- derived series ------------------------------------------------------------------
    def steps_per_sec(self) -> dict:
        """{series: ([seconds since start], [steps/s])}: from step events if
        any, else from the loss points' wall times and steps. An idle gap
        (as in ``segments``) breaks a series: a NaN between its parts, which
        matplotlib draws as no line."""
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
            gap = self.gap_s if self.gap_s is not None else idle_gap(ts)
            xs, ys, start = [], [], 0
            for i in range(len(ts)):
                if i and ts[i] - ts[i - 1] > gap:  # idle: a new part
                    start = i
                    if xs and not math.isnan(xs[-1]):
                        xs.append(float("nan"))
                        ys.append(float("nan"))
                if i - start < _RATE_WINDOW:
                    continue
                dt = ts[i] - ts[i - _RATE_WINDOW]
                if dt > 0:
                    xs.append(ts[i] - t0)
                    ys.append((steps[i] - steps[i - _RATE_WINDOW]) / dt)
            out[name] = (xs, ys)
        return out

    def x_label(self) -> str:
        """What the loss curves' x-axis is: "global step", "each worker's own
        step", "examples" or "seconds"."""
        return _STEP_LABELS[self.steps] if self.x == "step" else _X_LABELS[self.x]

    # -- drawing ---------------------------------------------------------------------------
    def figure(self):
        """The matplotlib ``Figure`` of the curves (drawn on an Agg canvas)."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(9.0, 3.2), dpi=100, layout="constrained")
        FigureCanvasAgg(fig)
        loss_ax, rate_ax = fig.subplots(1, 2)
        ends = []
        curves = self.curves()
        # Beyond a few runs (32 workers' curves) a legend or a label per run
        # fills the figure: the runs are drawn thin, counted in the titles.
        many = len(curves) > _MANY_RUNS
        for i, (run, segs) in enumerate(curves.items()):
            color = _COLORS[i % len(_COLORS)]
            for j, (xs, ys) in enumerate(segs):
                loss_ax.plot(
                    xs,
                    ys,
                    label=run if j == 0 else None,
                    color=color,
                    linewidth=0.7 if many else 1.4,
                    alpha=0.6 if many else 1.0,
                    marker="o" if len(xs) == 1 else None,
                    markersize=3,
                )
            xs, ys = segs[-1]
            ends.append((run, xs[-1], ys[-1], color))
        runs = f" · {len(curves)} runs" if many else ""
        if not many:
            _label_ends(loss_ax, ends)
        loss_ax.set(
            title=(self.title or self.tag) + runs, xlabel=self.x_label(),
            ylabel=self.tag)
        for i, (name, (xs, ys)) in enumerate(self.steps_per_sec().items()):
            rate_ax.plot(xs, ys, label=name, color=_COLORS[i % len(_COLORS)],
                         linewidth=0.7 if many else 1.5)
        rate_ax.set(title="steps/s" + runs, xlabel="seconds", ylabel="steps/s")
        rate_ax.set_ylim(bottom=0)
        for ax in (loss_ax, rate_ax):
            ax.grid(True, color="#eaeef2")
            ax.spines[["top", "right"]].set_visible(False)
            if ax.get_legend_handles_labels()[0] and not many:
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

        options = [a for a in X_AXES if a != "examples" or self.examples_per_step]
        choose = w.ToggleButtons(
            options=[(_STEP_LABELS[self.steps] if a == "step" else _X_LABELS[a], a)
                     for a in options],
            value=self.x,
            style={"button_width": "90px"},
        )
        choose.add_class("nbdist-training-x")
        image = w.Image(value=self.png(), format="png")

        def chosen(change):
            self.x = change["new"]
            self.refresh()

        choose.observe(chosen, names="value")
        box = w.VBox([choose, image])
        box.add_class("nbdist-training-view")
        self._image = image
        return box

    def _update(self, widget):
        self._image.value = self.png()

    def _static_bundle(self) -> dict:
        return {
            "text/plain": repr(self),
            "image/png": base64.b64encode(self.png()).decode(),
        }


_LABEL_PT = 8  # font size of the end labels, points
_MANY_RUNS = 8  # more runs than this: no legend, no end labels


def _label_ends(ax, ends):
    """Labels each run at its last point, moved up or down (with a leader
    line) so that no two labels overlap: labels whose runs end near the same
    x are stacked at least a line apart, as near their points as they fit."""
    if not ends:
        return
    fig = ax.figure
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo, hi + 0.22 * (hi - lo))  # room for the labels inside the axes
    # The layout first (not a whole draw): labels are placed in its pixels.
    engine = fig.get_layout_engine()
    if engine is not None:
        engine.execute(fig)
    bottom, top = ax.transAxes.transform([(0, 0), (0, 1)])[:, 1]
    to_px = ax.transData.transform
    px_per_pt = fig.dpi / 72.0
    line_px = 1.3 * _LABEL_PT * px_per_pt
    items = []
    for run, x, y, color in ends:
        px, py = to_px((x, y))
        width = 0.62 * _LABEL_PT * px_per_pt * len(run) + 4 * px_per_pt
        items.append([py, px, run, x, y, color, width])
    items.sort(key=lambda it: -it[0])  # top first (display y grows upwards)
    placed: list = []  # (left, right, label y)
    for it in items:
        py, px, _, _, _, _, width = it
        left, right = px, px + width
        # The free slot nearest its point: a line below, above, two below...
        for k in range(2 * len(placed) + 1):
            target = py + (-1) ** k * ((k + 1) // 2) * line_px
            inside = bottom + line_px / 2 <= target <= top - line_px / 2
            if (inside or k == 2 * len(placed)) and not any(
                    lo < right and left < hi and abs(ly - target) < line_px
                    for lo, hi, ly in placed):
                break
        placed.append((left, right, target))
        it[0] = target
    for label_py, px, run, x, y, color, _ in items:
        dy = (label_py - to_px((x, y))[1]) / px_per_pt
        ax.annotate(
            run,
            (x, y),
            xytext=(4, dy),
            textcoords="offset points",
            fontsize=_LABEL_PT,
            color=color,
            va="center",
            arrowprops=(dict(arrowstyle="-", color=color, lw=0.6, alpha=0.6)
                        if abs(dy) > 1 else None),
        ).set_in_layout(False)
