"""``TrafficView``: the calls and tensors between the tasks of a cluster, from
their taps (``runtime.tap``), live while training runs: a sequence diagram of
the last few steps (one lifeline per task, one arrow per call: RunGraph,
tensor exchanges, pulls of parked tensors, collective chunks, step aborts,
arrivals at the coordination service's barriers and their release; the
tokens of ``SyncReplicasOptimizer`` show as the RunGraph and tensors of the
queue ops that carry them) and a task × task matrix of bytes and calls per second.

Where the taps are:

* servers of this process (``nd.Server``): ``TrafficView(servers=[ps, w0, w1])``
  subscribes to each server's tap directly;
* a ``LocalCluster``: its tasks publish their taps' records as ``"tap"``
  events when started with ``NBDIST_TAP_EVENTS=1`` in the environment (what
  ``%cluster start`` does unless ``--traffic off``;
  ``TrafficView.record_new_clusters(on)`` sets it for clusters started later
  from this process), and the view follows the cluster's event stream.

Memory is bounded: the view keeps the last ``keep`` records.
"""

from __future__ import annotations

import collections
import os
import time

from nbdist.notebook.live_view import LiveView, esc, short_task
from nbdist.notebook.timeline_model import (
    format_bytes,
    nice_ticks,
    task_key,
    tick_label,
)
from nbdist.notebook.traffic_heatmap import HEATMAP_AT, heatmap_svg
from nbdist.runtime.tap_record import (
    ENV_TAP_EVENTS,
    TAP_EVENT_KIND,
    TapRecord,
    TapRecorder,
    records_from_payload,
)

_TEXT_LINKS = 12  # links listed in the text of a cluster too large for all

__all__ = ["TrafficView"]

CALL_COLORS = {
    "RunGraph": "#0969da",
    "RecvTensor": "#cf222e",
    "PullTensor": "#bc4c00",
    "collective": "#bf3989",
    "AbortStep": "#6e7781",
    "Barrier": "#9a6700",
    "Barrier release": "#9a6700",
}
# Calls whose step is not a Session.run's (a collective's execution, a
# barrier's round): steps are counted from the others.
_UNSTEPPED = ("collective", "AbortStep", "Barrier", "Barrier release")
_OTHER_COLOR = "#1a7f37"
_MAX_ARROWS = 80  # drawn in the diagram; the matrix counts every record


class TrafficView(LiveView):
    """Calls and bytes between tasks over the last ``steps`` steps (every
    record kept when None), or the last ``seconds``. Following a cluster's
    events, the view starts from now (``history=True``: from the records
    the event log still has).

    >>> import nbdist as nd
    >>> from nbdist.runtime.tap import TapEvent
    >>> view = nd.notebook.TrafficView(steps=1)
    >>> view.add(TapEvent("RecvTensor", "/job:ps/replica:0/task:0",
    ...                   "/job:worker/replica:0/task:0", 7, 48, 1.0, 1.002))
    >>> print(view)  # doctest: +ELLIPSIS
    TrafficView: 1 call, 48 B between 2 tasks in 1 step over 2.0 ms
      ps:0 → worker:0: 1 calls, 48 B (23 KB/s, 500 calls/s)
    """

    kinds = (TAP_EVENT_KIND, "barrier_arrival", "barrier_passed")
    face_class = "nbdist-traffic-view"
    refresh_s = 0.25

    def __init__(self, cluster=None, *, servers=None, steps: int | None = 3,
                 seconds: float | None = None, keep: int = 8192, title: str = "",
                 history: bool = False, **kwargs):
        self.steps = None if steps is None else max(1, int(steps))
        # Without history, records of calls that started before now are left
        # out (the catch-up of the event log brings them, late ones too).
        self._since_us = 0 if history else int(time.time() * 1e6)
        self.added = 0  # records received
        self.seconds = seconds
        self.title = title
        self._records: collections.deque = collections.deque(maxlen=max(16, keep))
        self._recorder = None
        taps = [s.tap for s in servers or ()]
        if cluster is not None and not taps and hasattr(cluster, "tap"):
            taps = [cluster.tap]  # an in-process server: its own tap
        if taps:
            super().__init__(None, live=True, **{**kwargs, "source": None})
            self.cluster = cluster  # freeze_views(cluster) freezes the view
            self._recorder = TapRecorder(taps, maxlen=1, on_record=self._add_record)
        elif cluster is not None or kwargs:
            super().__init__(cluster, **kwargs)
        else:
            super().__init__(None, live=False)

    @staticmethod
    def record_new_clusters(on: bool = True) -> None:
        """Makes ``LocalCluster`` tasks started from now on in this process
        publish their taps, or not (``NBDIST_TAP_EVENTS=1`` or ``0`` in their
        environment; ``%cluster start`` records unless told ``0``)."""
        os.environ[ENV_TAP_EVENTS] = "1" if on else "0"

    # -- state ----------------------------------------------------------------------------
    def _add_record(self, record: TapRecord) -> None:
        with self._lock:
            self._records.append(record)
            self.added += 1
            self._state_changed.notify_all()
        self._changed()

    def add(self, event) -> None:
        """Adds one ``TapEvent`` (times from ``time.monotonic``) or
        ``TapRecord`` by hand."""
        if not isinstance(event, TapRecord):
            event = TapRecord(event.kind, event.source, event.destination,
                              int(event.step), int(event.nbytes),
                              int(event.start * 1e6), int(event.end * 1e6))
        self._add_record(event)

    def _leader(self) -> str:
        """The task hosting the coordination service (barriers go there)."""
        leader = getattr(self, "_leader_task", None)
        if leader is None:
            from nbdist.runtime.coordination import leader_task

            spec = getattr(self.cluster, "cluster_spec", None)
            try:
                leader = leader_task(spec) if spec is not None else None
            except Exception:  # noqa: BLE001 - a spec of another shape
                leader = None
            leader = self._leader_task = leader or "coordination"
        return leader

    def _barrier_records(self, event) -> list[TapRecord]:
        """A barrier arrival as a call to the coordination service; its
        passing as a release of every participant."""
        payload = event.payload if isinstance(event.payload, dict) else {}
        at = int(event.wall_time_us)
        round_ = payload.get("round", 0)
        step = round_ if isinstance(round_, int) else 0
        if event.kind == "barrier_arrival":
            return [TapRecord("Barrier", event.task, self._leader(), step, 0, at, at)]
        participants = payload.get("participants", [])
        return [TapRecord("Barrier release", self._leader(), t, step, 0, at, at)
                for t in participants if isinstance(t, str)]

    def _apply(self, event) -> bool:
        if event.kind.startswith("barrier_"):
            records = self._barrier_records(event)
        else:
            records = records_from_payload(event.payload)
        records = [r for r in records if r.start_us >= self._since_us]
        self._records.extend(records)
        self.added += len(records)
        return bool(records)

    def wait_for_steps(self, steps: int | None = None, timeout: float = 20.0,
                       quiet_s: float = 0.5) -> bool:
        """Waits until the window holds ``steps`` steps (default: the view's)
        and no record came for ``quiet_s`` (tasks publish in batches), at most
        ``timeout`` seconds; then draws. Whether it got there."""
        want = steps or self.steps or 1
        deadline = time.monotonic() + timeout
        ok = False
        with self._lock:
            while True:
                seen = self.added
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._state_changed.wait(min(quiet_s, left))
                if self.added == seen and self.steps_in(self.window()) >= want:
                    ok = True
                    break
        self.refresh()
        return ok

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
        self._changed()

    def close(self):
        if self._recorder is not None:
            self._recorder.close()
        return super().close()

    def records(self) -> list[TapRecord]:
        """Every record kept, oldest first."""
        with self._lock:
            return sorted(self._records, key=lambda r: r.start_us)

    def window(self) -> list[TapRecord]:
        """The records of the last ``steps`` steps (by the step ids of
        RunGraph and tensor exchanges; of collective executions when there are
        none), or of the last ``seconds`` when set."""
        records = self.records()
        if not records:
            return []
        if self.seconds is not None:
            since = records[-1].end_us - int(self.seconds * 1e6)
            return [r for r in records if r.end_us >= since]
        if self.steps is None:
            return records
        stepped = [r for r in records if r.kind not in _UNSTEPPED]
        basis = stepped or records
        first: dict[int, int] = {}
        for r in basis:
            first.setdefault(r.step, r.start_us)
        recent = sorted(first.values())[-self.steps:]
        since = recent[0]
        return [r for r in records if r.start_us >= since]

    def steps_in(self, records) -> int:
        stepped = {r.step for r in records if r.kind not in _UNSTEPPED}
        return len(stepped) or len({r.step for r in records})

    def matrix(self, records=None) -> dict:
        """{(source, destination): (calls, bytes)} of ``records`` (the window)."""
        out: dict = {}
        for r in self.window() if records is None else records:
            key = (short_task(r.source), short_task(r.destination))
            calls, nbytes = out.get(key, (0, 0))
            out[key] = (calls + 1, nbytes + r.nbytes)
        return out

    @staticmethod
    def span_us(records) -> int:
        if not records:
            return 0
        return max(r.end_us for r in records) - min(r.start_us for r in records)

    # -- faces ----------------------------------------------------------------------------
    def _summary(self, records) -> str:
        tasks = {short_task(t) for r in records for t in (r.source, r.destination)}
        n, nbytes = len(records), sum(r.nbytes for r in records)
        steps = self.steps_in(records)
        stepped = any(r.kind not in _UNSTEPPED for r in records)
        what = ("step" if stepped or not records else "collective execution"
                if any(r.kind == "collective" for r in records) else "round")
        scope = (f"the last {self.seconds:g} s" if self.seconds is not None
                 else f"{steps} {what}{'s' if steps != 1 else ''}")
        return (f"{n} call{'s' if n != 1 else ''}, {format_bytes(nbytes)} between "
                f"{len(tasks)} task{'s' if len(tasks) != 1 else ''} in {scope} over "
                f"{self.span_us(records) / 1000:.1f} ms")

    def _text(self) -> str:
        records = self.window()
        lines = [f"TrafficView: {self._summary(records)}"]
        secs = max(self.span_us(records), 1) / 1e6
        links = sorted(self.matrix(records).items(),
                       key=lambda kv: (task_key(kv[0][0]), task_key(kv[0][1])))
        if len(self._tasks(records)) > HEATMAP_AT:  # the busiest links only
            busiest = sorted(links, key=lambda kv: -kv[1][1])[:_TEXT_LINKS]
            links = [kv for kv in links if kv in busiest]
        for (src, dst), (calls, nbytes) in links:
            lines.append(f"  {src} → {dst}: {calls} calls, {format_bytes(nbytes)} "
                         f"({format_bytes(int(nbytes / secs))}/s, "
                         f"{calls / secs:.0f} calls/s)")
        more = len(self.matrix(records)) - len(links)
        if more:
            lines.append(f"  … {more} more links (the {_TEXT_LINKS} busiest shown)")
        return "\n".join(lines)

    def _html(self) -> str:
        records = self.window()
        title = f" · {esc(self.title)}" if self.title else ""
        head = (f"<h4>Traffic{title} <span class='muted'>· "
                f"{esc(self._summary(records))}</span></h4>")
        if not records:
            return head + (
                "<div class='muted'>no calls between tasks yet (the tasks of "
                "<code>%cluster start</code> publish theirs unless started "
                "<code>--traffic off</code>)</div>")
        tasks = self._tasks(records)
        if len(tasks) > HEATMAP_AT:  # too many lifelines and cells to read
            secs = max(self.span_us(records), 1) / 1e6
            return (head + "<div class='muted'>bytes per second between each "
                    f"pair of the {len(tasks)} tasks (hover a square for its "
                    "calls)</div>" + heatmap_svg(tasks, self.matrix(records), secs))
        return (head + "<div style='display:flex;gap:24px;align-items:flex-start;"
                "flex-wrap:wrap'>" + self._sequence_svg(records)
                + self._matrix_html(records) + "</div>")

    def _tasks(self, records) -> list[str]:
        return sorted({short_task(t) for r in records
                       for t in (r.source, r.destination)}, key=task_key)

    def _matrix_html(self, records) -> str:
        tasks = self._tasks(records)
        matrix = self.matrix(records)
        secs = max(self.span_us(records), 1) / 1e6
        top = max((b for _, b in matrix.values()), default=0) or 1
        rows = ["<tr><th>from ╲ to</th>"
                + "".join(f"<th>{esc(t)}</th>" for t in tasks) + "</tr>"]
        for src in tasks:
            cells = [f"<th>{esc(src)}</th>"]
            for dst in tasks:
                calls, nbytes = matrix.get((src, dst), (0, 0))
                if not calls:
                    cells.append("<td class='muted'>·</td>")
                    continue
                shade = int(245 - 75 * nbytes / top)
                cells.append(
                    f"<td class='nbdist-link' data-bytes='{nbytes}' data-calls="
                    f"'{calls}' style='background:rgb({shade - 20},{shade},255);"
                    "padding:4px 8px'>"
                    f"<b>{format_bytes(int(nbytes / secs))}/s</b><br>"
                    f"{calls / secs:.0f} calls/s<br><span class='muted'>"
                    f"{calls} · {format_bytes(nbytes)}</span></td>")
            rows.append("<tr>" + "".join(cells) + "</tr>")
        return ("<div><div class='muted'>bytes and calls per second "
                "(and in the window)</div><table class='nbdist-traffic-matrix'>"
                + "".join(rows) + "</table></div>")

    def _sequence_svg(self, records) -> str:
        tasks = self._tasks(records)
        shown = records[-_MAX_ARROWS:]
        t0 = shown[0].start_us
        total = max(max(r.end_us for r in shown) - t0, 1)
        ticks, unit = nice_ticks(total, most=6)
        axis_us = max(ticks[-1], 1)
        col_w, left, top, height = 150, 60, 34, max(260, min(560, 9 * len(shown)))
        x_of = {t: left + col_w * (i + 0.5) for i, t in enumerate(tasks)}

        def y_of(us):
            return top + height * (us - t0) / axis_us

        parts = []
        for t, x in x_of.items():
            parts.append(
                f"<g class='nbdist-lifeline' data-task='{esc(t)}'><rect x='{x - 42}' "
                f"y='4' width='84' height='22' rx='4' fill='#f6f8fa' stroke='#d0d7de'/>"
                f"<text x='{x}' y='19' text-anchor='middle' font-weight='600'>"
                f"{esc(t)}</text><line x1='{x}' y1='{top - 6}' x2='{x}' "
                f"y2='{top + height}' stroke='#8c959f' stroke-dasharray='4 3'/></g>")
        for v in ticks:
            y = y_of(t0 + v)
            parts.append(f"<text x='{left - 6}' y='{y + 3:.1f}' text-anchor='end' "
                         f"font-size='10' fill='#59636e'>{tick_label(v, unit)}</text>")
        parts.append(f"<text x='4' y='{top - 10}' font-size='10' fill='#59636e'>"
                     f"{unit}</text>")
        for k, r in enumerate(shown):
            src, dst = short_task(r.source), short_task(r.destination)
            color = CALL_COLORS.get(r.kind, _OTHER_COLOR)
            marker = f"url(#nbdist-seq-{color[1:]}-{id(self):x})"
            x1, x2 = x_of[src], x_of[dst]
            y1, y2 = y_of(r.start_us), y_of(max(r.end_us, r.start_us))
            tip = (f"{r.kind} {src} → {dst} · step {r.step} · "
                   f"{format_bytes(r.nbytes)} ({r.nbytes} bytes) · start "
                   f"{(r.start_us - t0) / 1000:.3f} ms · duration "
                   f"{(r.end_us - r.start_us) / 1000:.3f} ms")
            if src == dst:
                shape = (f"<path d='M{x1},{y1:.1f} h24 V{y2 + 4:.1f} h-22' fill='none' "
                         f"stroke='{color}' stroke-width='1.5' "
                         f"marker-end='{marker}'/>")
                lx, ly = x1 + 28, y1 + 4
            else:
                shape = (f"<line x1='{x1}' y1='{y1:.1f}' x2='{x2}' y2='{y2:.1f}' "
                         f"stroke='{color}' stroke-width='1.5' "
                         f"marker-end='{marker}'/>")
                at = 0.3 if k % 2 else 0.7  # neighbours' labels apart
                lx, ly = x1 + (x2 - x1) * at, y1 + (y2 - y1) * at - 3
            label = (f"<text x='{lx:.1f}' y='{ly:.1f}' text-anchor='middle' "
                     f"font-size='9' fill='{color}' stroke='#fff' stroke-width='3' "
                     f"paint-order='stroke'>{esc(r.kind)} {format_bytes(r.nbytes)}"
                     "</text>" if len(shown) <= 40 or k % 3 == 0 else "")
            parts.append(f"<g class='nbdist-call' data-kind='{esc(r.kind)}' "
                         f"data-bytes='{r.nbytes}'><title>{esc(tip)}</title>"
                         f"{shape}{label}</g>")
        kinds = [k for k in CALL_COLORS if any(r.kind == k for r in shown)]
        kinds += sorted({r.kind for r in shown} - set(CALL_COLORS))
        ly, lx = top + height + 22, left
        for kind in kinds:
            parts.append(
                f"<line x1='{lx}' y1='{ly - 4}' x2='{lx + 18}' y2='{ly - 4}' "
                f"stroke='{CALL_COLORS.get(kind, _OTHER_COLOR)}' stroke-width='2'/>"
                f"<text x='{lx + 22}' y='{ly}' font-size='11'>{esc(kind)}</text>")
            lx += 40 + 7 * len(kind)
        note = (f"<text x='{left}' y='{ly + 18}' font-size='10' fill='#59636e'>"
                f"the last {len(shown)} of {len(records)} calls</text>"
                if len(shown) < len(records) else "")
        width = max(left + col_w * len(tasks) + 20, lx + 10)
        defs = "<defs>" + "".join(
            f"<marker id='nbdist-seq-{c[1:]}-{id(self):x}' viewBox='0 0 10 10' refX='9' refY='5' "
            "markerWidth='6' markerHeight='6' orient='auto'><path d='M0,0 L10,5 "
            f"L0,10 z' fill='{c}'/></marker>"
            for c in (*CALL_COLORS.values(), _OTHER_COLOR)) + "</defs>"
        return (f"<svg class='nbdist-traffic' width='{width}' height='{ly + 26}' "
                f"viewBox='0 0 {width} {ly + 26}' style='max-width:100%;height:auto' "
                "xmlns='http://www.w3.org/2000/svg' font-size='11' "
                f"font-family='system-ui,sans-serif'>{defs}{''.join(parts)}{note}</svg>")
