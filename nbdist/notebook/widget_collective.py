"""``CollectiveView``: a real all-reduce replayed step by step around the ring.

Every chunk a member of an all-reduce receives is a ``ChunkEvent`` of the
collective runtime (``runtime.collective``): which phase (reduce-scatter,
all-gather, or a direct exchange), which ring step and pipelined piece, from
which task to which, how many bytes, when it was sent and when it was reduced
into the receiver's result. A traced ``Session.run`` carries them in its
``RunMetadata`` (op type ``CollectiveChunk``), so each worker's session can
bring its own back; the view merges them and draws each step of the ring with
the bytes and the measured bandwidth of every link.

>>> from nbdist.runtime.collective import ChunkEvent
>>> a, b = "/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"
>>> view = CollectiveView([
...     ChunkEvent(1, 1, 0, "reduce-scatter", 0, 0, a, b, 2 << 20, 0.0, 0.002),
...     ChunkEvent(1, 1, 0, "reduce-scatter", 0, 0, b, a, 2 << 20, 0.0, 0.002),
...     ChunkEvent(1, 1, 0, "all-gather", 0, 0, a, b, 2 << 20, 0.002, 0.004),
...     ChunkEvent(1, 1, 0, "all-gather", 0, 0, b, a, 2 << 20, 0.002, 0.004)])
>>> print(view)  # doctest: +NORMALIZE_WHITESPACE
CollectiveView: all-reduce over 2 tasks: 4 chunks moved 8.0 MiB in 2 steps (ring), 4.0 ms
  reduce-scatter step 1: worker:0 → worker:1 2.0 MiB (1000 MiB/s), worker:1 → worker:0 2.0 MiB (1000 MiB/s)
  all-gather step 1: worker:0 → worker:1 2.0 MiB (1000 MiB/s), worker:1 → worker:0 2.0 MiB (1000 MiB/s)
>>> view.bytes_received(a)
4194304
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from nbdist.notebook.live_view import LiveView, esc, short_task
from nbdist.notebook.timeline_model import member_label

__all__ = ["Chunk", "CollectiveView", "Round", "chunks_from_run_metadata"]

_CHUNK_OP = "CollectiveChunk"  # runtime.collective.CHUNK_OP
_CHUNK_NAME = re.compile(
    r"^(?P<node>.*) \[(?P<phase>reduce-scatter|all-gather|direct) (?P<step>\d+) "
    r"piece (?P<piece>\d+)\] (?P<src>\S+) -> (?P<dst>\S+)$")
_PHASES = ("direct", "reduce-scatter", "all-gather")
_COLORS = {"reduce-scatter": "#bc4c00", "all-gather": "#0969da", "direct": "#1a7f37"}
_MIB = 1 << 20


@dataclass(frozen=True)
class Chunk:
    """One chunk as its receiver consumed it (times in seconds, wall clock)."""

    phase: str
    step: int
    piece: int
    source: str
    destination: str
    nbytes: int
    start: float
    end: float


@dataclass(frozen=True)
class Link:
    """What one link (``source`` → ``destination``) carried in one round."""

    source: str
    destination: str
    nbytes: int
    chunks: int
    seconds: float  # from the first chunk's send to the last one's reduction

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    @property
    def mib_per_s(self) -> float:
        """Bandwidth in MiB/s: the unit of the sizes shown beside it."""
        return self.nbytes / _MIB / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Round:
    """One step of the algorithm: every link's chunks of ``phase`` step ``step``
    (all pipelined pieces together)."""

    phase: str
    step: int
    links: tuple[Link, ...]

    @property
    def label(self) -> str:
        return "direct exchange" if self.phase == "direct" else (
            f"{self.phase} step {self.step + 1}")

    @property
    def nbytes(self) -> int:
        return sum(link.nbytes for link in self.links)


def chunks_from_run_metadata(run_metadata) -> list[Chunk]:
    """The all-reduce chunks of a traced step (every device's ``CollectiveChunk``
    node stats)."""
    out = []
    for dev in run_metadata.step_stats.dev_stats:
        for n in dev.node_stats:
            if n.op_type != _CHUNK_OP:
                continue
            m = _CHUNK_NAME.match(n.node_name)
            if m is None:
                continue
            start = n.all_start_micros / 1e6
            out.append(Chunk(
                m["phase"], int(m["step"]), int(m["piece"]), m["src"], m["dst"],
                sum(o.tensor_description.allocated_bytes for o in n.output),
                start, start + n.all_end_rel_micros / 1e6))
    return out


def _chunks_of(source) -> list[Chunk]:
    """Chunks of a ``RunMetadata``, a ``ChunkEvent``/``Chunk``, a view, or a list or
    dict (e.g. ``nd.notebook.last_cell_results()``) of those."""
    if source is None:
        return []
    if isinstance(source, CollectiveView):
        return list(source.chunks)
    if isinstance(source, Chunk):
        return [source]
    if hasattr(source, "step_stats"):
        return chunks_from_run_metadata(source)
    if hasattr(source, "phase") and hasattr(source, "destination"):  # ChunkEvent
        return [Chunk(source.phase, source.step, source.piece, source.source,
                      source.destination, source.nbytes, source.start, source.end)]
    if isinstance(source, dict):
        source = list(source.values())
    if isinstance(source, (list, tuple)):
        return [c for s in source for c in _chunks_of(s)]
    raise TypeError(f"CollectiveView shows RunMetadata, ChunkEvents or views, not "
                    f"{type(source).__name__}")


def _task_key(task: str):
    job = re.search(r"/job:([^/]+)", task)
    index = re.search(r"/task:(\d+)", task)
    return (job[1] if job else task, int(index[1]) if index else 0)


_MEMBER_R = 17  # px: a member's circle
_RINGS_DRAWN = 8  # more steps than this: a heat map of links × steps instead
_SLOWEST = 5  # links named in a summarised face (the rest counted)
_LABELLED_MEMBERS = 8  # a ring of more members labels its links on hover only


@dataclass(frozen=True)
class PhaseSummary:
    """One phase of an all-reduce: its steps, chunks, bytes and time, and the
    slowest, median and fastest bandwidth of a link in one of its steps."""

    phase: str
    steps: int
    chunks: int
    nbytes: int
    seconds: float
    low_mib_per_s: float
    median_mib_per_s: float
    high_mib_per_s: float

    def line(self) -> str:
        return (f"{self.phase}: {self.steps} step{'s' if self.steps != 1 else ''}, "
                f"{self.chunks} chunks, {_size(self.nbytes)} in "
                f"{self.seconds * 1000:.1f} ms; a link's step "
                f"{self.low_mib_per_s:.0f}–{self.high_mib_per_s:.0f} MiB/s "
                f"(median {self.median_mib_per_s:.0f})")


def _size(nbytes: float) -> str:
    if nbytes >= _MIB:
        return f"{nbytes / _MIB:.1f} MiB"
    if nbytes >= 1024:
        return f"{nbytes / 1024:.1f} KiB"
    return f"{int(nbytes)} B"


class CollectiveView(LiveView):
    """An all-reduce replayed as its steps around the ring.

    ``source``: the ``RunMetadata`` of traced runs (one per worker: each
    worker's step records the chunks it received), ``ChunkEvent``s
    (``CollectiveExecutor.subscribe_chunks``), or a dict or list of those (such
    as ``nd.notebook.last_cell_results()`` of a ``%%cluster`` cell whose tasks
    each return ``CollectiveView.trace(sess, total)``).

    Up to 8 steps (a ring of up to 5 members) the face draws a ring per step;
    beyond, a heat map of every link's bandwidth in every step, a row per
    phase and the slowest links (a ring of 32 takes 62 steps). The slider of
    the live widget shows one step's ring at any size.
    """

    face_class = "nbdist-collective"

    def __init__(self, source=None, *, title: str = ""):
        self.title = title
        self.chunks: list[Chunk] = []
        super().__init__(None, live=False)
        if source is not None:
            self.update(source)

    @classmethod
    def trace(cls, session, fetches, feed_dict=None, title: str = ""):
        """Runs ``fetches`` once with ``FULL_TRACE`` and returns the view of the
        chunks this task received (``view.result``: the fetched values)."""
        from nbdist.proto.config_pb2 import RunMetadata, RunOptions

        metadata = RunMetadata()
        result = session.run(fetches, feed_dict,
                             options=RunOptions(trace_level=RunOptions.FULL_TRACE),
                             run_metadata=metadata)
        view = cls(metadata, title=title)
        view.result = result
        view.run_metadata = metadata
        return view

    def update(self, source):
        """Shows these chunks instead."""
        chunks = sorted(set(_chunks_of(source)), key=lambda c: (
            _PHASES.index(c.phase), c.step, c.piece, _task_key(c.destination)))
        with self._lock:
            self.chunks = chunks
        self._changed()

    # -- the model -----------------------------------------------------------------------
    @property
    def tasks(self) -> list[str]:
        """The members, in rank (ring) order."""
        return sorted({c.source for c in self.chunks}
                      | {c.destination for c in self.chunks}, key=_task_key)

    @property
    def algorithm(self) -> str:
        return "direct" if any(c.phase == "direct" for c in self.chunks) else "ring"

    def rounds(self) -> list[Round]:
        """The steps in order: reduce-scatter 1..N-1, then all-gather 1..N-1 (or
        the one direct exchange), each with every link's bytes and bandwidth."""
        groups: dict[tuple[str, int], dict[tuple[str, str], list[Chunk]]] = {}
        for c in self.chunks:
            groups.setdefault((c.phase, c.step), {}).setdefault(
                (c.source, c.destination), []).append(c)
        out = []
        for (phase, step) in sorted(groups, key=lambda k: (_PHASES.index(k[0]), k[1])):
            links = []
            for (src, dst), cs in sorted(groups[(phase, step)].items(),
                                         key=lambda kv: _task_key(kv[0][0])):
                links.append(Link(src, dst, sum(c.nbytes for c in cs), len(cs),
                                  max(c.end for c in cs) - min(c.start for c in cs)))
            out.append(Round(phase, step, tuple(links)))
        return out

    def links(self) -> list[Link]:
        """Every link over the whole all-reduce."""
        by: dict[tuple[str, str], list[Chunk]] = {}
        for c in self.chunks:
            by.setdefault((c.source, c.destination), []).append(c)
        return [Link(s, d, sum(c.nbytes for c in cs), len(cs),
                     max(c.end for c in cs) - min(c.start for c in cs))
                for (s, d), cs in sorted(by.items(), key=lambda kv: _task_key(kv[0][0]))]

    def busy_links(self) -> list[Link]:
        """Every link over the whole all-reduce, its ``seconds`` the sum of its
        time in each step (not the idle time between its steps): slowest
        first."""
        by: dict[tuple[str, str], list[Link]] = {}
        for rnd in self.rounds():
            for x in rnd.links:
                by.setdefault((x.source, x.destination), []).append(x)
        return sorted((Link(s, d, sum(x.nbytes for x in xs), sum(x.chunks for x in xs),
                            sum(x.seconds for x in xs)) for (s, d), xs in by.items()),
                      key=lambda x: (x.mib_per_s, _task_key(x.source)))

    def bytes_received(self, task: str) -> int:
        return sum(c.nbytes for c in self.chunks if c.destination == task)

    def duration(self) -> float:
        if not self.chunks:
            return 0.0
        return max(c.end for c in self.chunks) - min(c.start for c in self.chunks)

    def segment(self, chunk: Chunk) -> int | None:
        """Which of the N segments of its piece a ring chunk carries (as the
        receiver, rank r, gets segment r-k-1 at reduce-scatter step k and r-k
        at all-gather step k); None for a direct one."""
        tasks = self.tasks
        if chunk.phase == "direct" or chunk.destination not in tasks:
            return None
        n, r = len(tasks), tasks.index(chunk.destination)
        shift = 1 if chunk.phase == "reduce-scatter" else 0
        return (r - chunk.step - shift) % n

    # -- drawing -------------------------------------------------------------------------
    def scrubbable(self) -> bool:
        return len(self.rounds()) >= 2  # the slider and play over the steps

    def _summary(self) -> str:
        total = sum(c.nbytes for c in self.chunks)
        rounds = self.rounds()
        return (f"all-reduce over {len(self.tasks)} tasks: {len(self.chunks)} "
                f"chunks moved {_size(total)} in {len(rounds)} "
                f"step{'s' if len(rounds) != 1 else ''} ({self.algorithm}), "
                f"{self.duration() * 1000:.1f} ms")

    def compact(self) -> bool:
        """Whether the face summarises the steps (more than ``_RINGS_DRAWN``:
        a ring of 32 members takes 62) instead of drawing a ring per step."""
        return len(self.rounds()) > _RINGS_DRAWN

    def phases(self) -> list[PhaseSummary]:
        """Each phase's steps, bytes, time and its links' bandwidths."""
        out = []
        for phase in _PHASES:
            rounds = [r for r in self.rounds() if r.phase == phase]
            if not rounds:
                continue
            chunks = [c for c in self.chunks if c.phase == phase]
            rates = sorted(x.mib_per_s for r in rounds for x in r.links)
            out.append(PhaseSummary(
                phase, len(rounds), len(chunks), sum(c.nbytes for c in chunks),
                max(c.end for c in chunks) - min(c.start for c in chunks),
                rates[0], rates[len(rates) // 2], rates[-1]))
        return out

    def _text(self) -> str:
        if not self.chunks:
            return "CollectiveView: no all-reduce chunks (trace a step that runs one)"
        lines = [f"CollectiveView: {self._summary()}"]
        if self.compact():
            lines += [f"  {p.line()}" for p in self.phases()]
            slow = self.busy_links()[:_SLOWEST]
            lines.append("  slowest links (bytes ÷ time in their steps): " + ", ".join(
                f"{short_task(x.source)} → {short_task(x.destination)} "
                f"{_size(x.nbytes)} ({x.mib_per_s:.0f} MiB/s)" for x in slow))
            return "\n".join(lines)
        for rnd in self.rounds():
            lines.append(f"  {rnd.label}: " + ", ".join(
                f"{short_task(x.source)} → {short_task(x.destination)} "
                f"{_size(x.nbytes)} ({x.mib_per_s:.0f} MiB/s)" for x in rnd.links))
        return "\n".join(lines)

    def _ring_svg(self, rnd: Round | None, size: int = 130) -> str:
        """The ring with ``rnd``'s links as labelled arrows, bowed outwards
        (labels outside the ring; a → b and b → a apart)."""
        tasks = self.tasks
        n = len(tasks)
        size = max(size, 13 * n)  # the members' circles apart (32: 416 px)
        labelled = n <= _LABELLED_MEMBERS  # else each link's hover says it
        pad_x, pad_y = 60, 34  # room for the labels outside the ring
        cx, cy = size / 2 + pad_x, size / 2 + pad_y
        radius = size / 2 - 8
        pos = {t: (cx + radius * math.sin(2 * math.pi * i / n),
                   cy - radius * math.cos(2 * math.pi * i / n))
               for i, t in enumerate(tasks)}
        ring = (f"<circle cx='{cx}' cy='{cy}' r='{radius:.1f}' fill='none' "
                "stroke='#d0d7de' stroke-dasharray='3 3'/>")
        parts = [ring]
        color = _COLORS.get(rnd.phase, "#59636e") if rnd else "#59636e"
        marker = f"nbdist-arrow-{rnd.phase if rnd else 'none'}"
        parts.append(
            f"<defs><marker id='{marker}' viewBox='0 0 10 10' refX='9' refY='5' "
            "markerWidth='7' markerHeight='7' orient='auto-start-reverse'>"
            f"<path d='M0,0 L10,5 L0,10 z' fill='{color}'/></marker></defs>")
        for link in rnd.links if rnd else ():
            (x1, y1), (x2, y2) = pos[link.source], pos[link.destination]
            mx0, my0 = (x1 + x2) / 2, (y1 + y2) / 2
            # Outwards: away from the centre (for two members, to either side).
            ox, oy = mx0 - cx, my0 - cy
            if math.hypot(ox, oy) < 1:
                dx, dy = x2 - x1, y2 - y1
                ox, oy = dy, -dx
            norm = math.hypot(ox, oy) or 1.0
            ox, oy = ox / norm, oy / norm
            bow = 0.35 * radius
            mx, my = mx0 + ox * bow, my0 + oy * bow
            # Ends just off the members' circles, towards the bend.
            def off(x, y, mx=mx, my=my):
                dx, dy = mx - x, my - y
                d = math.hypot(dx, dy) or 1.0
                return x + dx / d * 19, y + dy / d * 19
            sx, sy = off(x1, y1)
            ex, ey = off(x2, y2)
            lx, ly = mx0 + ox * (bow * 0.55 + 12), my0 + oy * (bow * 0.55 + 12)
            anchor = "middle" if abs(ox) < 0.3 else ("start" if ox > 0 else "end")
            ly += 12 if oy > 0.3 else (-6 if oy < -0.3 else -2)
            label = (f"{_size(link.nbytes)} · "
                     f"<tspan x='{lx:.1f}' dy='11'>{link.mib_per_s:.0f} MiB/s</tspan>")
            parts.append(
                f"<g class='nbdist-link' data-src='{esc(link.source)}' "
                f"data-dst='{esc(link.destination)}' data-bytes='{link.nbytes}'>"
                f"<path d='M{sx:.1f},{sy:.1f} Q{mx:.1f},{my:.1f} {ex:.1f},{ey:.1f}' "
                f"fill='none' stroke='{color}' stroke-width='2.5' "
                f"marker-end='url(#{marker})'><title>{esc(link.source)} → "
                f"{esc(link.destination)}: {link.nbytes} bytes in {link.chunks} "
                f"chunk{'s' if link.chunks != 1 else ''}, "
                f"{link.seconds * 1000:.2f} ms</title></path>"
                + (f"<text x='{lx:.1f}' y='{ly:.1f}' text-anchor='{anchor}' "
                   f"font-size='10' fill='{color}'>{label}</text>" if labelled else "")
                + "</g>")
        for t in tasks:
            x, y = pos[t]
            # Inside its circle: the short name (w0, ps1); the full one on hover.
            parts.append(
                f"<g class='nbdist-member' data-task='{esc(short_task(t))}'>"
                f"<title>{esc(short_task(t))}</title>"
                f"<circle cx='{x:.1f}' cy='{y:.1f}' r='{_MEMBER_R}' "
                "fill='#f6f8fa' stroke='#59636e'/>"
                f"<text x='{x:.1f}' y='{y + 4:.1f}' text-anchor='middle' "
                f"font-size='10' font-weight='600'>{esc(member_label(t))}</text></g>")
        title = esc(rnd.label) if rnd else ""
        width, height = size + 2 * pad_x, size + 2 * pad_y
        return (f"<svg class='nbdist-ring' width='{width}' height='{height + 16}' "
                "xmlns='http://www.w3.org/2000/svg' font-family='system-ui,sans-serif'>"
                f"<text x='{cx}' y='14' text-anchor='middle' font-size='12' "
                f"font-weight='600' fill='{color}'>{title}</text>"
                f"<g transform='translate(0,16)'>{''.join(parts)}</g></svg>")

    def _html(self) -> str:
        title = f" · {esc(self.title)}" if self.title else ""
        if not self.chunks:
            return (f"<h4>All-reduce{title} <span class='muted'>· no chunks "
                    "recorded</span></h4>")
        head = (f"<h4>All-reduce{title} <span class='muted'>· "
                f"{esc(self._summary())}</span></h4>")
        if self.compact():
            return head + self._compact_html()
        rings = "".join(f"<div style='display:inline-block;vertical-align:top'>"
                        f"{self._ring_svg(r)}</div>" for r in self.rounds())
        rows = "".join(
            f"<tr><td>{esc(short_task(x.source))} → {esc(short_task(x.destination))}"
            f"</td><td>{_size(x.nbytes)}</td><td>{x.chunks}</td>"
            f"<td>{x.mib_per_s:.0f} MiB/s</td></tr>" for x in self.links())
        legend = " ".join(
            f"<span class='chip'><span class='dot' style='background:{c}'></span>"
            f"{p}</span>" for p, c in _COLORS.items()
            if any(ch.phase == p for ch in self.chunks))
        table = ("<table><tr><th>link</th><th>bytes</th><th>chunks</th>"
                 f"<th>bandwidth</th></tr>{rows}</table>")
        return f"{head}<div>{rings}</div><div>{legend}</div>{table}"

    def _compact_html(self) -> str:
        """Many steps: a heat map of every link's bandwidth in every step, a
        row per phase and the slowest links (the rest counted)."""
        phases = "".join(
            f"<tr class='nbdist-phase' data-phase='{p.phase}'><td><span class='dot' "
            f"style='background:{_COLORS[p.phase]}'></span>{p.phase}</td>"
            f"<td>{p.steps} steps</td><td>{p.chunks} chunks</td>"
            f"<td>{_size(p.nbytes)}</td><td>{p.seconds * 1000:.1f} ms</td>"
            f"<td>{p.low_mib_per_s:.0f}–{p.high_mib_per_s:.0f} MiB/s (median "
            f"{p.median_mib_per_s:.0f})</td></tr>" for p in self.phases())
        links = self.busy_links()
        slow = "".join(
            f"<tr class='nbdist-slow-link'><td>{esc(short_task(x.source))} → "
            f"{esc(short_task(x.destination))}</td><td>{_size(x.nbytes)}</td>"
            f"<td>{x.chunks}</td><td>{x.mib_per_s:.0f} MiB/s</td></tr>"
            for x in links[:_SLOWEST])
        rest = links[_SLOWEST:]
        more = (f"<div class='muted'>and {len(rest)} more links, "
                f"{rest[0].mib_per_s:.0f}–{rest[-1].mib_per_s:.0f} MiB/s</div>"
                if rest else "")
        return (f"<table><tr><th>phase</th><th colspan='5'>a link's step: "
                f"slowest–fastest</th></tr>{phases}</table>{self._heat_svg()}"
                "<table><tr><th>slowest links</th><th>bytes</th><th>chunks</th>"
                f"<th>bytes ÷ time in its steps</th></tr>{slow}</table>{more}")

    def _heat_svg(self) -> str:
        """Links (rows, in ring order) × steps (columns): each cell a link's
        bandwidth in that step, darker the faster (hover: bytes and time)."""
        rounds, links = self.rounds(), self.links()
        label_w, top = 78, 18
        cell_w = max(4.0, min(14.0, 640 / len(rounds)))
        cell_h = max(4.0, min(14.0, 300 / max(len(links), 1)))
        row = {(x.source, x.destination): i for i, x in enumerate(links)}
        fastest = max((x.mib_per_s for r in rounds for x in r.links), default=0) or 1
        parts = []
        x0 = label_w
        for phase in _PHASES:  # a band over each phase's columns
            k = sum(r.phase == phase for r in rounds)
            if k:
                parts.append(f"<text x='{x0 + 1}' y='12' font-size='10' "
                             f"fill='{_COLORS[phase]}'>{phase}</text>")
                x0 += k * cell_w
        for j, rnd in enumerate(rounds):
            color = _COLORS[rnd.phase]
            for x in rnd.links:
                i = row[(x.source, x.destination)]
                shade = 0.15 + 0.85 * x.mib_per_s / fastest
                parts.append(
                    f"<rect class='nbdist-heat-step' x='{label_w + j * cell_w:.1f}' "
                    f"y='{top + i * cell_h:.1f}' width='{max(cell_w - 1, 1):.1f}' "
                    f"height='{max(cell_h - 1, 1):.1f}' fill='{color}' "
                    f"fill-opacity='{shade:.2f}'><title>{esc(rnd.label)}: "
                    f"{esc(short_task(x.source))} → {esc(short_task(x.destination))} "
                    f"{_size(x.nbytes)} in {x.seconds * 1000:.2f} ms "
                    f"({x.mib_per_s:.0f} MiB/s)</title></rect>")
        every = max(1, round(9 / cell_h))  # a readable label every few rows
        for x, i in row.items():
            if i % every == 0:
                parts.append(
                    f"<text x='{label_w - 4}' y='{top + i * cell_h + cell_h - 1.5:.1f}'"
                    f" text-anchor='end' font-size='{min(10, cell_h):.0f}'>"
                    f"{esc(member_label(x[0]))} → {esc(member_label(x[1]))}</text>")
        bottom = top + len(links) * cell_h
        parts.append(f"<text x='{label_w}' y='{bottom + 14:.1f}' font-size='10' "
                     f"fill='#59636e'>step 1 … {len(rounds)} (columns), a link per "
                     f"row; darker: faster (the fastest {fastest:.0f} MiB/s)</text>")
        width = label_w + len(rounds) * cell_w + 8
        return (f"<svg class='nbdist-ring-steps' width='{max(width, 520):.0f}' "
                f"height='{bottom + 22:.0f}' xmlns='http://www.w3.org/2000/svg' "
                f"font-family='system-ui,sans-serif'>{''.join(parts)}</svg>")

    # -- the widget: one step at a time --------------------------------------------------
    def _build(self):
        import ipywidgets as w

        rounds = self.rounds()
        picture = w.HTML(value=self._full_html())
        if len(rounds) < 2:
            return picture
        play = w.Play(min=0, max=len(rounds), step=1, interval=900, value=len(rounds))
        slider = w.IntSlider(min=0, max=len(rounds), value=len(rounds),
                             description="step", readout=False)
        w.jslink((play, "value"), (slider, "value"))
        label = w.Label(value="all steps")

        def show(change):
            k = change["new"]
            if k >= len(rounds):
                label.value = "all steps"
                picture.value = self._full_html()
            else:
                label.value = f"{k + 1}/{len(rounds)}: {rounds[k].label}"
                picture.value = self._ring_svg(rounds[k], 260)

        slider.observe(show, names="value")
        return w.VBox([w.HBox([play, slider, label]), picture])

    def _update(self, widget):
        pass  # the replay's picture follows its slider
