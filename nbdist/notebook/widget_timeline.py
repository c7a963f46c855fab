"""``TimelineView``: a traced step across the cluster, drawn as SVG from the
``RunMetadata.step_stats`` of ``Session.run`` (which gathers every task's ops
of the step): one lane per task, ops as bars coloured by kind, an arrow per
tensor sent from one task to another (labelled with the tensor and its
bytes), a legend and round ticks. Hovering a bar or an arrow shows its op or
tensor, task, start, duration and bytes (an SVG ``<title>``: no JavaScript).
Several steps can be kept (``trace(..., steps=5)``, ``update``) and scrubbed
with a slider in the live widget; the static face shows the current one.
A job of more than 8 tasks (32 workers) is drawn as thin strips, a row of
ops per task under the job's name, and its text as a line per job; lanes
taller than a screen scroll."""

from __future__ import annotations

import collections

from nbdist.notebook.live_view import LiveView, esc, short_task
from nbdist.notebook.timeline_model import (
    KINDS,
    Span,
    Transfer,
    format_bytes,
    member_label,
    nice_ticks,
    spans_from_run_metadata,
    step_origin_us,
    task_key,
    tick_label,
    transfers_from_run_metadata,
)

__all__ = [
    "Span",
    "TimelineView",
    "Transfer",
    "merge_run_metadata",
    "spans_from_run_metadata",
    "trace",
]

_MAX_ROWS = 6  # sub-rows of a lane for ops that overlap in time
_LABELLED_ARROWS = 16  # more arrows than this are labelled on hover only
# Where along its arrow a label may go, and how far up or down from it (px).
_LABEL_AT = (0.75, 0.5, 0.9, 0.3, 0.15, 0.6, 0.4, 0.05)
_LABEL_DY = (0, -12, 12, -24, 24, -36, 36, -48, 48)
# Further off, tried only when every spot above covers a bar or a label.
_LABEL_FAR_DY = (-60, 60, -72, 72, -84, 84, -96, 96, -108, 108)


_STRIP_TASKS = 8  # a job of more tasks draws each as a thin strip, not a lane
_STRIP_H = 9  # px: a strip (32 workers: 320 px)
_SCROLL_PX = 700  # a face taller than this scrolls its lanes


def _job(task: str) -> str:
    return task.rpartition(":")[0] or task


def _end(task: str, strips: dict) -> str:
    """A transfer's end as the text groups it: its task, or its large job."""
    return _job(task) if _job(task) in strips else task


def _ends(tasks: set) -> str:
    """"worker:0", or "31 workers" (several tasks of a job)."""
    if len(tasks) == 1:
        return next(iter(tasks))
    return f"{len(tasks)} {'/'.join(sorted({_job(t) for t in tasks}))}s"


def _fmt_ms(us: int) -> str:
    return f"{us / 1000:.3f} ms"


class TimelineView(LiveView):
    """One step (or the last few) across the tasks of a cluster.

    >>> import nbdist as nd
    >>> g = nd.Graph()
    >>> with g.as_default():
    ...     y = nd.matmul(nd.ones([2, 2]), nd.ones([2, 2]), name="mm")
    ...     with nd.Session() as sess:
    ...         view = nd.notebook.TimelineView.trace(sess, y)
    >>> print(view)  # doctest: +ELLIPSIS
    TimelineView: ... ops on 1 task over ... ms
    ...
    """

    face_class = "nbdist-timeline-view"

    def __init__(self, run_metadata=None, *, title: str = "", keep: int = 20,
                 wire=None):
        self.title = title
        # Tap records (a TrafficView, or a list of runtime.tap_record.TapRecord)
        # whose collective chunks and pulls are drawn over the step they fall in.
        self.wire_source = wire
        self.wire: list[Transfer] = []
        self.keep = max(1, int(keep))
        self.steps: list = []  # RunMetadata of the kept steps, oldest first
        self.current = -1  # index into steps of the step shown
        self.spans: list[Span] = []
        self.transfers: list[Transfer] = []
        self._slider = None
        super().__init__(None, live=False)
        if run_metadata is not None:
            self.update(run_metadata)

    @classmethod
    def trace(cls, session, fetches, feed_dict=None, title: str = "", steps: int = 1,
              keep: int = 20):
        """Runs ``fetches`` ``steps`` times with ``FULL_TRACE`` and returns the
        view of those steps (the last fetched values are in ``view.result``,
        its ``RunMetadata`` in ``view.run_metadata``)."""
        from nbdist.proto.config_pb2 import RunMetadata, RunOptions

        view = cls(title=title, keep=max(keep, steps))
        for _ in range(max(1, int(steps))):
            metadata = RunMetadata()
            view.result = session.run(
                fetches, feed_dict,
                options=RunOptions(trace_level=RunOptions.FULL_TRACE),
                run_metadata=metadata)
            view.update(metadata)
        return view

    def scrubbable(self) -> bool:
        return len(self.steps) > 1  # the slider over the kept steps

    @property
    def run_metadata(self):
        """The ``RunMetadata`` of the step shown (None before any)."""
        return self.steps[self.current] if self.steps else None

    def update(self, run_metadata):
        """Adds a traced step (the oldest beyond ``keep`` goes) and shows it.
        A list of ``RunMetadata`` (one step of each of several sessions, e.g.
        each worker's of an all-reduce step) is drawn as one step."""
        if isinstance(run_metadata, (list, tuple)):
            run_metadata = merge_run_metadata(run_metadata)
        with self._lock:
            self.steps.append(run_metadata)
            del self.steps[: -self.keep]
            self._show(len(self.steps) - 1)
        self._changed()

    def show_step(self, index: int):
        """Shows kept step ``index`` (negative counts from the last)."""
        with self._lock:
            if not self.steps:
                raise IndexError("the view has no steps")
            self._show(range(len(self.steps))[index])
        self._changed()
        return self

    def _show(self, index: int):
        self.current = index
        md = self.steps[index]
        self.spans = spans_from_run_metadata(md)
        self.transfers = transfers_from_run_metadata(md)
        self.wire = self._wire_of(md)

    def _wire_of(self, md) -> list[Transfer]:
        source = self.wire_source
        if source is None:
            return []
        records = source.records() if hasattr(source, "records") else list(source)
        t0 = step_origin_us(md)
        end = t0 + max((s.end_us for s in self.spans), default=0)
        return [Transfer(r.kind, short_task(r.source), short_task(r.destination),
                         r.nbytes, r.start_us - t0, r.end_us - t0, f"{r.kind}:{r.step}")
                for r in records
                if r.kind in ("collective", "PullTensor")
                and r.start_us >= t0 and r.end_us <= end]

    def chrome_trace(self, show_dataflow: bool = True, show_memory: bool = False,
                     graph=None) -> str:
        """The step shown as Chrome-trace JSON (``nd.client.timeline``), for
        ``chrome://tracing`` or https://ui.perfetto.dev."""
        from nbdist.train.timeline import Timeline

        return Timeline(self.run_metadata.step_stats, graph).generate_chrome_trace_format(
            show_dataflow=show_dataflow, show_memory=show_memory)

    # -- drawing -------------------------------------------------------------------------
    def tasks(self) -> list[str]:
        return sorted({s.task for s in self.spans}, key=task_key)

    def duration_us(self) -> int:
        return max((s.end_us for s in self.spans), default=0)

    def _step_note(self) -> str:
        if len(self.steps) <= 1:
            return ""
        return f"step {self.current + 1} of {len(self.steps)}"

    def drawn_transfers(self) -> list[Transfer]:
        """The arrows drawn: tensors sent between two tasks of the step and
        calls the taps saw (collective chunks, pulls) between its tasks."""
        return self._between_lanes(self.transfers) + self._between_lanes(self.wire)

    def _between_lanes(self, transfers) -> list[Transfer]:
        tasks = set(self.tasks())
        return [t for t in transfers if t.source in tasks and t.destination in tasks]

    def _wire_note(self) -> str:
        drawn = self.drawn_transfers()
        n, moved = len(drawn), sum(t.bytes for t in drawn)
        return f"{n} transfer{'s' if n != 1 else ''} ({format_bytes(moved)})"

    def _text(self) -> str:
        tasks = self.tasks()
        n = len(self.spans)
        note = f" ({self._step_note()})" if self._step_note() else ""
        lines = [
            (f"TimelineView: {n} op{'s' if n != 1 else ''} on {len(tasks)} "
            f"task{'s' if len(tasks) != 1 else ''} over "
            f"{self.duration_us() / 1000:.1f} ms"
            + (f", {self._wire_note()}" if len(tasks) > 1 else "") + note)
        ]
        strips = self.strip_jobs()
        for t in tasks:
            if _job(t) not in strips:
                lines.append(f"  {t}: {self._ops_line([t])}")
        for job, n in strips.items():  # a line per large job
            of = [t for t in tasks if _job(t) == job]
            busy = {t: sum(s.end_us - s.start_us for s in self.spans if s.task == t)
                    for t in of}
            most = max(of, key=busy.get)
            lines.append(f"  {job} ×{n}: {self._ops_line(of)}; per task busy "
                         f"{min(busy.values()) / 1000:.1f}–{busy[most] / 1000:.1f} ms "
                         f"(most: {most})")
        if strips:  # the transfers per pair of a task or a large job
            ends = collections.defaultdict(list)
            for tr in self.transfers:
                ends[(_end(tr.source, strips), _end(tr.destination, strips))].append(tr)
            for trs in (ends[k] for k in sorted(ends)):
                src = _ends({t.source for t in trs})
                dst = _ends({t.destination for t in trs})
                lines.append(
                    f"  {src} → {dst}: {len(trs)} tensor{'s' if len(trs) != 1 else ''} "
                    f"({format_bytes(sum(t.bytes for t in trs))}), received "
                    f"{_fmt_ms(min(t.recv_us for t in trs))} to "
                    f"{_fmt_ms(max(t.recv_us for t in trs))}")
        # In a stable order (not by time: concurrent transfers swap places).
        for tr in sorted(self.transfers if not strips else (),
                         key=lambda x: (task_key(x.source), task_key(x.destination),
                                        x.tensor)):
            lines.append(f"  {tr.source} → {tr.destination}: {tr.tensor} "
                         f"({format_bytes(tr.bytes)}) at {_fmt_ms(tr.recv_us)}")
        links = collections.Counter(
            (t.source, t.destination, "chunk" if t.tensor == "collective" else "pull")
            for t in self._between_lanes(self.wire))
        for (src, dst, what), k in sorted(
                links.items(), key=lambda kv: (task_key(kv[0][0]), task_key(kv[0][1]))):
            lines.append(f"  {src} → {dst}: {k} {what}{'s' if k != 1 else ''} "
                         "(seen by the tap)")
        return "\n".join(lines)

    def _ops_line(self, tasks) -> str:
        """'38 ops, busy 43.6 ms: 3 compute, 32 Send/Recv' of these tasks."""
        spans = [s for s in self.spans if s.task in tasks]
        busy = sum(s.end_us - s.start_us for s in spans)
        kinds = [(sum(s.kind == k for s in spans), name) for k, (_, name) in KINDS.items()]
        return (f"{len(spans)} ops, busy {busy / 1000:.1f} ms: "
                + ", ".join(f"{n} {name}" for n, name in kinds if n))

    def _html(self) -> str:
        tasks = self.tasks()
        total = max(self.duration_us(), 1)
        title = f" · {esc(self.title)}" if self.title else ""
        note = f" · {self._step_note()}" if self._step_note() else ""
        wire = f" · {self._wire_note()}" if len(tasks) > 1 else ""
        head = (
            f"<h4>Timeline{title} <span class='muted'>· {len(self.spans)} ops on "
            f"{len(tasks)} task{'s' if len(tasks) != 1 else ''} over "
            f"{total / 1000:.2f} ms{wire}{note}</span></h4>"
        )
        if not self.spans:
            return head
        return head + self._svg(tasks)

    def _svg(self, tasks) -> str:
        ticks, unit = nice_ticks(self.duration_us())
        axis_us = max(ticks[-1], 1)
        label_w, width, lane_h = 90, 680, 20

        def x_of(us: float) -> float:
            return label_w + width * us / axis_us

        rows_of: dict[str, list[list[Span]]] = {}
        for t in tasks:
            rows: list[list[Span]] = []
            for s in (x for x in self.spans if x.task == t):
                for row in rows:
                    if row[-1].end_us <= s.start_us:
                        row.append(s)
                        break
                else:
                    if len(rows) < _MAX_ROWS:
                        rows.append([s])
                    else:  # drawn over the last row rather than growing forever
                        rows[-1].append(s)
            rows_of[t] = rows
        y = 30  # room for arrow labels above the first lane
        lane_mid: dict[str, float] = {}
        parts = []
        bars: list = []  # the op bars' boxes: labels are kept off them
        strips = self.strip_jobs()
        strip_tops: dict[str, float] = {}  # a large job's first strip
        for t in tasks:
            if _job(t) in strips:  # a thin strip: the job's tasks side by side
                if _job(t) not in strip_tops:
                    strip_tops[_job(t)] = y
                parts.append(self._strip(t, y, x_of, label_w + width))
                lane_mid[t] = y + _STRIP_H / 2
                y += _STRIP_H + 1
                continue
            rows = rows_of[t]
            h = max(len(rows) * lane_h + 6, 44)
            lane_mid[t] = y + h / 2
            parts.append(
                f"<g class='nbdist-lane' data-task='{esc(t)}'>"
                f"<rect x='0' y='{y}' width='{label_w + width}' height='{h}' "
                f"fill='#f6f8fa'/><text x='4' y='{y + h / 2 + 4:.0f}' "
                f"font-weight='600' font-size='12'>{esc(t)}</text>")
            for i, row in enumerate(rows):
                for s in row:
                    x = x_of(s.start_us)
                    w = max(1.5, x_of(s.end_us) - x)
                    yy = y + (h - len(rows) * lane_h) / 2 + 2 + i * lane_h
                    color = KINDS[s.kind][0]
                    bars.append((x, yy, w, lane_h - 4))
                    tip = (f"{s.name} ({s.op}) · {s.task} · {s.kind} · start "
                           f"{_fmt_ms(s.start_us)} · duration "
                           f"{_fmt_ms(s.end_us - s.start_us)} · "
                           f"{format_bytes(s.bytes)} out")
                    label = (
                        f"<text class='nbdist-op-label' x='{x + 2:.1f}' "
                        f"y='{yy + 12:.1f}' fill='#fff' "
                        f"font-size='10' pointer-events='none'>{esc(s.op)}</text>"
                        if w > 6.5 * len(s.op) + 4 else "")
                    parts.append(
                        f"<rect class='nbdist-op' data-kind='{s.kind}' "
                        f"x='{x:.1f}' y='{yy:.1f}' width='{w:.1f}' height='{lane_h - 4}' "
                        f"rx='2' fill='{color}'><title>{esc(tip)}</title></rect>"
                        + label)
            parts.append("</g>")
            y += h + 6
        for job, top in strip_tops.items():  # over its strips, left of their names
            parts.append(f"<text x='4' y='{top + 10}' font-weight='600' font-size='12'>"
                         f"{esc(job)}<tspan x='4' dy='14' font-weight='400' "
                         f"font-size='11'>{strips[job]} tasks</tspan></text>")
        if strips:
            y += 5
        arrows = self._arrows(x_of, lane_mid, bars, y, thin=bool(strips))
        axis = [(f"<line x1='{label_w}' y1='{y}' x2='{label_w + width}' y2='{y}' "
                "stroke='#8c959f'/>")]
        for v in ticks:
            x = x_of(v)
            axis.append(
                f"<line x1='{x:.1f}' y1='{y}' x2='{x:.1f}' y2='{y + 4}' "
                f"stroke='#8c959f'/><text x='{x:.1f}' y='{y + 16}' "
                f"text-anchor='middle' font-size='10' fill='#59636e'>"
                f"{tick_label(v, unit)}</text>")
        axis.append(f"<text x='4' y='{y + 16}' font-size='10' fill='#59636e'>"
                    f"time ({unit})</text>")
        legend, lx = [], label_w
        kinds = {s.kind for s in self.spans}
        ly = y + 34
        for kind, (color, name) in KINDS.items():
            if kind not in kinds:
                continue
            legend.append(
                f"<rect x='{lx}' y='{ly - 9}' width='10' height='10' rx='2' "
                f"fill='{color}'/><text x='{lx + 14}' y='{ly}' font-size='11'>"
                f"{esc(name)}</text>")
            lx += 24 + 6.5 * len(name)
        if self.wire:
            lx += 10
            legend.append(
                f"<line x1='{lx}' y1='{ly - 4}' x2='{lx + 22}' y2='{ly - 4}' "
                f"stroke='{KINDS['collective'][0]}' stroke-width='1.5' "
                "stroke-dasharray='4 2'/>"
                f"<text x='{lx + 28}' y='{ly}' font-size='11'>chunk seen by the "
                "tap</text>")
            lx += 150
        if self.transfers:
            legend.append(
                f"<line x1='{lx}' y1='{ly - 4}' x2='{lx + 22}' y2='{ly - 4}' "
                "stroke='#57606a' stroke-width='1.5' "
                f"marker-end='url(#nbdist-arrow-{id(self):x})'/>"
                f"<text x='{lx + 28}' y='{ly}' font-size='11'>tensor sent between "
                "tasks (name · bytes)</text>")
        defs = (f"<defs><marker id='nbdist-arrow-{id(self):x}' viewBox='0 0 10 10' "
                "refX='9' refY='5' markerWidth='7' markerHeight='7' orient='auto'>"
                "<path d='M0,0 L10,5 L0,10 z' fill='#57606a'/></marker></defs>")
        svg = (
            f"<svg class='nbdist-timeline' width='{label_w + width + 150}' "
            f"height='{ly + 10}' viewBox='0 0 {label_w + width + 150} {ly + 10}' "
            "style='max-width:100%;height:auto' "
            "xmlns='http://www.w3.org/2000/svg' font-size='12' "
            f"font-family='system-ui,sans-serif'>{defs}{''.join(parts)}"
            f"{''.join(arrows)}{''.join(axis)}{''.join(legend)}</svg>")
        if ly + 10 <= _SCROLL_PX:
            return svg
        # Lanes beyond a screen (more than ~60 tasks): they scroll, in the
        # widget and in a static render alike (CSS, no JavaScript).
        return (f"<div class='nbdist-lanes-scroll' style='max-height:{_SCROLL_PX}px;"
                f"overflow-y:auto'>{svg}</div>")

    def strip_jobs(self) -> dict[str, int]:
        """The jobs of more than ``_STRIP_TASKS`` tasks (their number of tasks
        each): each of their tasks is drawn as a thin strip, not a lane."""
        jobs = collections.Counter(_job(t) for t in self.tasks())
        return {j: n for j, n in jobs.items() if n > _STRIP_TASKS}

    def _strip(self, task, y, x_of, right) -> str:
        """A task of a large job: its ops as one row of thin bars (overlaps
        drawn over each other; hover for each) and its short name."""
        spans = [s for s in self.spans if s.task == task]
        busy = sum(s.end_us - s.start_us for s in spans)
        parts = [(f"<g class='nbdist-lane nbdist-strip' data-task='{esc(task)}'>"
                  f"<title>{esc(task)}: {len(spans)} ops, busy {_fmt_ms(busy)}"
                  f"</title><rect x='0' y='{y}' width='{right}' "
                  f"height='{_STRIP_H}' fill='#f6f8fa'/>")]
        parts.append(f"<text x='86' y='{y + _STRIP_H - 1.5}' text-anchor='end' "
                     f"font-size='8' fill='#59636e'>{esc(member_label(task))}</text>")
        for s in spans:
            x = x_of(s.start_us)
            parts.append(
                f"<rect class='nbdist-op' data-kind='{s.kind}' x='{x:.1f}' "
                f"y='{y + 1}' width='{max(1.0, x_of(s.end_us) - x):.1f}' "
                f"height='{_STRIP_H - 2}' fill='{KINDS[s.kind][0]}'><title>"
                f"{esc(s.name)} ({esc(s.op)}) · {esc(task)} · start "
                f"{_fmt_ms(s.start_us)} · duration {_fmt_ms(s.end_us - s.start_us)}"
                "</title></rect>")
        return "".join(parts) + "</g>"

    def _arrows(self, x_of, lane_mid, bars=(), bottom=1e9, thin=False) -> list[str]:
        out = []
        labelled = len(self.transfers) + len(self.wire) <= _LABELLED_ARROWS
        # Between thin strips, arrows are faint and thin: the bars stay readable.
        pen = ("stroke-width='0.8' stroke-opacity='0.45'" if thin
               else "stroke-width='1.5'")
        links: dict = {}  # (source, destination): its transfers, one label each
        for tr in self.transfers:
            if tr.source not in lane_mid or tr.destination not in lane_mid:
                continue
            links.setdefault((tr.source, tr.destination), []).append(tr)
            x1, x2 = x_of(tr.send_us), x_of(max(tr.recv_us, tr.send_us))
            y1, y2 = lane_mid[tr.source], lane_mid[tr.destination]
            tip = (f"{tr.tensor}: {tr.source} → {tr.destination} · "
                   f"{format_bytes(tr.bytes)} ({tr.bytes} bytes) · sent "
                   f"{_fmt_ms(tr.send_us)} · received {_fmt_ms(tr.recv_us)}")
            out.append(
                f"<g class='nbdist-transfer' data-bytes='{tr.bytes}' "
                f"data-source='{esc(tr.source)}' data-destination="
                f"'{esc(tr.destination)}'><title>{esc(tip)}</title>"
                f"<line x1='{x1:.1f}' y1='{y1:.1f}' x2='{x2:.1f}' y2='{y2:.1f}' "
                f"stroke='#57606a' {pen} "
                f"marker-end='url(#nbdist-arrow-{id(self):x})'/></g>")
        placed = _Labels(bars, bottom)  # the labels' boxes so far
        if labelled:
            out.extend(self._link_labels(links, x_of, lane_mid, placed))
        for tr in self.wire:
            if tr.source in lane_mid and tr.destination in lane_mid:
                out.append(self._wire_arrow(tr, x_of, lane_mid, labelled, placed))
        return out

    def _link_labels(self, links, x_of, lane_mid, placed) -> list[str]:
        """One label per link (its tensors and bytes, a line each), beside the
        link's last arrow: at the first point along it (and shift up or down)
        where it overlaps no label placed before."""
        out = []
        for (src, dst), transfers in sorted(
                links.items(), key=lambda kv: max(t.recv_us for t in kv[1])):
            last = max(transfers, key=lambda t: t.recv_us)
            x1, x2 = x_of(last.send_us), x_of(max(last.recv_us, last.send_us))
            y1, y2 = lane_mid[src], lane_mid[dst]
            lines = [f"{t.tensor if len(t.tensor) <= 26 else '…' + t.tensor[-25:]} · "
                     f"{format_bytes(t.bytes)}"
                     for t in sorted(transfers, key=lambda t: -t.bytes)[:3]]
            if len(transfers) > 3:
                lines.append(f"+{len(transfers) - 3} more")
            w, h = _CHAR_W * max(map(len, lines)) + 4, 11 * len(lines) + 2
            spot = placed.place(x1, y1, x2, y2, w, h)
            if spot is None:  # no room: the arrows' hover says it
                continue
            lx, top = spot
            spans = "".join(
                f"<tspan x='{lx:.1f}' dy='{0 if i == 0 else 11}'>{esc(line)}</tspan>"
                for i, line in enumerate(lines))
            out.append(f"<text class='nbdist-transfer-label' x='{lx:.1f}' "
                       f"y='{top + 9:.1f}' font-size='10' fill='#24292f' "
                       "stroke='#fff' stroke-width='3' paint-order='stroke'>"
                       f"{spans}</text>")
        return out

    def _wire_arrow(self, tr, x_of, lane_mid, labelled, placed) -> str:
        """A call seen by a task's tap (a collective chunk, a pull): dashed."""
        x1, x2 = x_of(max(tr.send_us, 0)), x_of(max(tr.recv_us, tr.send_us, 0))
        y1, y2 = lane_mid[tr.source], lane_mid[tr.destination]
        color = KINDS["collective"][0] if tr.tensor == "collective" else "#bc4c00"
        what = "collective chunk" if tr.tensor == "collective" else "pulled tensor"
        tip = (f"{what}: {tr.source} → {tr.destination} · {format_bytes(tr.bytes)} "
               f"({tr.bytes} bytes) · {_fmt_ms(tr.send_us)} to "
               f"{_fmt_ms(tr.recv_us)} (from the tap)")
        label = ""
        if labelled:
            text = ("chunk" if tr.tensor == "collective" else "pull") + (
                f" · {format_bytes(tr.bytes)}")
            spot = placed.place(x1, y1, x2, y2, _CHAR_W * len(text) + 4, 13)
            if spot is not None:  # else no room: the hover says it
                lx, top = spot
                label = (f"<text class='nbdist-transfer-label' x='{lx:.1f}' "
                         f"y='{top + 9:.1f}' font-size='10' "
                         f"fill='{color}' stroke='#fff' stroke-width='3' "
                         f"paint-order='stroke'>{esc(text)}</text>")
        return (f"<g class='nbdist-transfer nbdist-wire' data-bytes='{tr.bytes}' "
                f"data-source='{esc(tr.source)}' data-destination="
                f"'{esc(tr.destination)}'><title>{esc(tip)}</title>"
                f"<line x1='{x1:.1f}' y1='{y1:.1f}' x2='{x2:.1f}' y2='{y2:.1f}' "
                f"stroke='{color}' stroke-width='1.5' stroke-dasharray='4 2' "
                f"marker-end='url(#nbdist-arrow-{id(self):x})'/>{label}</g>")

    # -- the live widget: a slider over the kept steps ----------------------------------
    def _build(self):
        import ipywidgets as w

        html = w.HTML(value=self._full_html())
        n = len(self.steps)
        self._slider = w.IntSlider(
            value=max(1, self.current + 1), min=1, max=max(1, n), description="step",
            continuous_update=True, layout=w.Layout(width="420px",
                                                    display="" if n > 1 else "none"))

        def moved(change):
            self.show_step(change["new"] - 1)
            self.refresh()

        self._slider.observe(moved, names="value")
        return w.VBox([self._slider, html])

    def _update(self, widget):
        slider, html = widget.children
        n = len(self.steps)
        if slider.max != max(1, n):
            slider.max = max(1, n)
        slider.layout.display = "" if n > 1 else "none"
        if slider.value != self.current + 1:
            slider.value = self.current + 1
        value = self._full_html()
        if html.value != value:
            html.value = value


_CHAR_W = 6.0  # px per character of a 10 px label (a generous average)


class _Labels:
    """Boxes of the labels placed so far, kept off each other and off the op
    bars (``bars``) and above ``bottom`` (the time axis)."""

    def __init__(self, bars=(), bottom: float = 1e9):
        self.boxes: list = []
        self._bars = list(bars)
        self._bottom = bottom

    @staticmethod
    def _hits(boxes, lx, top, w, h) -> bool:
        return any(lx < bx + bw and bx < lx + w and top < by + bh and by < top + h
                   for bx, by, bw, bh in boxes)

    def place(self, x1, y1, x2, y2, w, h) -> tuple[float, float] | None:
        """Where a ``w`` × ``h`` label of the arrow (x1, y1) → (x2, y2) goes:
        the first point along it (and shifted up or down) that overlaps no
        label and no op bar, looking further off before covering a bar; one
        that covers a bar only when no spot is clear of them; None when every
        spot overlaps a label."""
        def spots(offsets):
            at_dy = [(x1 + at * (x2 - x1) + 5, y1 + at * (y2 - y1) - h / 2 + dy)
                     for at in _LABEL_AT for dy in offsets]
            return [(lx, top) for lx, top in at_dy
                    if 0 <= top and top + h <= self._bottom
                    and not self._hits(self.boxes, lx, top, w, h)]

        def clear(free):
            return [s for s in free if not self._hits(self._bars, *s, w, h)]

        free = spots(_LABEL_DY)
        spot = (clear(free) or clear(spots(_LABEL_FAR_DY)) or free or [None])[0]
        if spot is not None:
            self.boxes.append((spot[0], spot[1], w, h))
        return spot


def merge_run_metadata(run_metadatas):
    """One ``RunMetadata`` with the step stats of all ``run_metadatas`` (steps
    that ran at the same time in several sessions: their times are wall-clock
    microseconds, comparable between the processes of one host)."""
    from nbdist.proto.config_pb2 import RunMetadata

    merged = RunMetadata()
    for md in run_metadatas:
        merged.step_stats.dev_stats.extend(md.step_stats.dev_stats)
    return merged


def trace(session, fetches, feed_dict=None, title: str = "", steps: int = 1
          ) -> TimelineView:
    """``TimelineView.trace``."""
    return TimelineView.trace(session, fetches, feed_dict, title, steps)
