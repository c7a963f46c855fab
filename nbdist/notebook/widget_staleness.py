"""``StalenessView``: how stale the gradients of asynchronous training were.

A gradient computed from the parameters at global step ``c`` and applied when
the global step was ``a`` is ``a - c`` updates stale (0: nobody updated the
parameters meanwhile). In between-graph asynchronous training each worker
gets both numbers from its own step: read the global step with the
parameters, and increment it after the update (``assign_add`` returns the
value it produced)::

    computed_at = nd.identity(global_step.read_value())
    with nd.control_dependencies([computed_at]):
        grads = opt.compute_gradients(loss)
    with nd.control_dependencies([opt.apply_gradients(grads)]):
        applied_at = global_step.assign_add(1) - 1
    ...
    _, c, a = sess.run([applied_at.op, computed_at, applied_at])
    view.add(task, c, a)

The view draws the histogram of staleness per worker as HTML/SVG (its face
without JavaScript) and text.

>>> view = StalenessView()
>>> view.extend("worker:0", [(0, 0), (1, 2), (3, 4)])
>>> view.add("worker:1", 2, 5)
>>> view.histogram()
{0: {'worker:0': 1}, 1: {'worker:0': 2}, 3: {'worker:1': 1}}
>>> print(view)
StalenessView: 4 gradients, mean staleness 1.25 updates
  staleness  worker:0  worker:1
  0          1         0
  1          2         0
  3          0         1
"""

from __future__ import annotations

import collections
import threading
from typing import NamedTuple

from nbdist.notebook.live_view import STYLE, esc, inline_styles

__all__ = ["StalenessView"]

_ROWS_DRAWN = 8  # more workers than this: a heat strip each, not a histogram
_NAMED = 3  # the stalest workers named in text and legend when there are many
_COLORS = ("#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#cf222e")


class WorkerStaleness(NamedTuple):
    worker: str
    gradients: int
    mean: float
    most: int


def _task_key(name: str):
    job, _, index = name.rpartition(":")
    return (job, int(index) if index.isdigit() else 0)


class StalenessView:
    """A histogram of asynchronous gradients' staleness (applied at minus
    computed at, in global steps), per worker. ``records`` is ``{worker:
    [(computed_at, applied_at), ...]}``. Of more than 8 workers, the face
    is a heat strip per worker with its mean, and the stalest few named."""

    def __init__(self, records: dict | None = None, title: str = ""):
        self.title = title
        self._lock = threading.Lock()
        self._pairs: dict[str, list[tuple[int, int]]] = {}
        for worker, pairs in (records or {}).items():
            self.extend(worker, pairs)

    def add(self, worker: str, computed_at, applied_at) -> None:
        """One gradient of ``worker``, computed at global step ``computed_at``
        and applied at ``applied_at``."""
        with self._lock:
            self._pairs.setdefault(worker, []).append(
                (int(computed_at), int(applied_at)))

    def extend(self, worker: str, pairs) -> None:
        for c, a in pairs:
            self.add(worker, c, a)

    @property
    def workers(self) -> list[str]:
        return sorted(self._pairs, key=_task_key)

    def staleness(self, worker: str | None = None) -> list[int]:
        """Every gradient's staleness (of one worker, or of all)."""
        with self._lock:
            chosen = [worker] if worker is not None else list(self._pairs)
            return [a - c for w in chosen for c, a in self._pairs.get(w, ())]

    def histogram(self) -> dict[int, dict[str, int]]:
        """{staleness: {worker: gradients}}, for the values that occur."""
        out: dict[int, collections.Counter] = {}
        for w in self.workers:
            for s in self.staleness(w):
                out.setdefault(s, collections.Counter())[w] += 1
        return {s: dict(out[s]) for s in sorted(out)}

    def _summary(self) -> str:
        all_ = self.staleness()
        if not all_:
            return "no gradient yet"
        return (f"{len(all_)} gradients, mean staleness "
                f"{sum(all_) / len(all_):.2f} updates")

    def _rows(self):
        hist = self.histogram()
        if not hist:
            return [], []
        workers = self.workers
        rows = [(s, [hist.get(s, {}).get(w, 0) for w in workers])
                for s in range(min(hist), max(hist) + 1)]
        return workers, rows

    def __repr__(self) -> str:
        head = f"StalenessView: {self._summary()}"
        if self.title:
            head = f"StalenessView ({self.title}): {self._summary()}"
        workers, rows = self._rows()
        if not rows:
            return head
        if self.compact():  # every worker together, and the stalest named
            hist = collections.Counter(self.staleness())
            lines = [head, "  staleness  gradients (all workers)"]
            lines += [f"  {s:<9}  {hist[s]}" for s in sorted(hist)]
            lines.append(f"  stalest of {len(workers)} workers: " + ", ".join(
                f"{w} mean {m:.2f} (most {most})"
                for w, _, m, most in self.means()[:_NAMED]))
            return "\n".join(lines)
        rows = [(s, c) for s, c in rows if any(c)]  # the values that occur
        table = [["staleness", *workers]] + [[str(s), *map(str, c)] for s, c in rows]
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        lines = [head] + ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths))
                          .rstrip() for r in table]
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))

    def compact(self) -> bool:
        """Whether the face is a heat strip per worker (more than
        ``_ROWS_DRAWN`` workers) rather than a histogram each."""
        return len(self._pairs) > _ROWS_DRAWN

    def means(self) -> list[WorkerStaleness]:
        """Each worker's gradients, mean and most staleness, the stalest mean
        first."""
        out = []
        for w in self.workers:
            st = self.staleness(w)
            if st:
                out.append(WorkerStaleness(w, len(st), sum(st) / len(st), max(st)))
        return sorted(out, key=lambda r: (-r.mean, _task_key(r.worker)))

    def _strips_svg(self) -> str:
        """A heat strip per worker on one staleness axis: each cell the share
        of that worker's gradients that were so stale (darker: more), the
        worker's mean at the right."""
        workers, rows = self._rows()
        if not rows:
            return ""
        lo, hi = rows[0][0], rows[-1][0]
        left, plot_w, row_h, top = 70, 520, 10, 4
        cell_w = plot_w / (hi - lo + 1)
        totals = [sum(c[i] for _, c in rows) or 1 for i in range(len(workers))]
        darkest = max(c[i] / totals[i] for _, c in rows for i in range(len(workers)))
        parts = []
        for i, w in enumerate(workers):
            y0 = top + i * row_h
            total = sum(c[i] for _, c in rows)
            st = self.staleness(w)
            mean = sum(st) / len(st) if st else 0.0
            parts.append(
                f"<g class='nbdist-staleness-strip' data-task='{esc(w)}'>"
                f"<text x='{left - 4}' y='{y0 + row_h - 1.5}' text-anchor='end' "
                f"font-size='9'>{esc(w)}</text>"
                f"<rect x='{left}' y='{y0}' width='{plot_w}' height='{row_h - 1}' "
                "fill='#f6f8fa'/>"
                f"<text x='{left + plot_w + 6}' y='{y0 + row_h - 1.5}' font-size='9' "
                f"fill='#59636e'>mean {mean:.2f}</text>")
            for s_, counts in rows:
                n = counts[i]
                if n:
                    parts.append(
                        f"<rect x='{left + (s_ - lo) * cell_w:.1f}' y='{y0}' "
                        f"width='{max(cell_w - 1, 1.5):.1f}' height='{row_h - 1}' "
                        f"fill='#0969da' fill-opacity='"
                        f"{0.1 + 0.9 * n / total / darkest:.2f}'>"
                        f"<title>{esc(w)}: {n} of {total} gradients {s_} "
                        f"update{'s' if s_ != 1 else ''} stale</title></rect>")
            parts.append("</g>")
        axis_y = top + len(workers) * row_h + 10
        span = hi - lo + 1
        for t in sorted({lo, hi, *range(lo, hi + 1, max(1, span // 6))}):
            parts.append(f"<text x='{left + (t - lo + 0.5) * cell_w:.1f}' "
                         f"y='{axis_y}' font-size='10' text-anchor='middle' "
                         f"fill='#57606a'>{t}</text>")
        parts.append(f"<text x='{left}' y='{axis_y + 14}' font-size='10' "
                     "fill='#57606a'>staleness: updates applied between a "
                     "gradient's compute and its apply (darker: more of the "
                     "worker's gradients)</text>")
        return (f"<svg class='nbdist-staleness' width='{left + plot_w + 70}' "
                f"height='{axis_y + 20}' "
                f"xmlns='http://www.w3.org/2000/svg'>{''.join(parts)}</svg>")

    def _svg(self) -> str:
        """One row per worker (small multiples on one staleness axis), each
        bar the share of that worker's gradients: a straggler's few, very
        stale gradients show beside the many fresh ones of the others."""
        workers, rows = self._rows()
        if not rows:
            return ""
        lo, hi = rows[0][0], rows[-1][0]
        span = hi - lo + 1
        left, plot_w, row_h, gap, top = 64, 560, 46, 10, 4
        bar_w = plot_w / span
        parts = []
        for i, w in enumerate(workers):
            color = _COLORS[i % len(_COLORS)]
            y0 = top + i * (row_h + gap)
            total = sum(c[i] for _, c in rows) or 1
            parts.append(f"<text x='0' y='{y0 + row_h / 2 + 4:.1f}' font-size='11' "
                         f"fill='{color}'>{esc(w)}</text>")
            parts.append(f"<line x1='{left}' y1='{y0 + row_h}' x2='{left + plot_w}' "
                         f"y2='{y0 + row_h}' stroke='#d0d7de'/>")
            for s_, counts in rows:
                n = counts[i]
                if not n:
                    continue
                h = max(row_h * n / total, 2.0)
                x = left + (s_ - lo) * bar_w
                parts.append(
                    f"<rect x='{x:.1f}' y='{y0 + row_h - h:.1f}' "
                    f"width='{max(bar_w - 1, 1.5):.1f}' height='{h:.1f}' "
                    f"fill='{color}'><title>{esc(w)}: {n} of {total} gradients "
                    f"{s_} update{'s' if s_ != 1 else ''} stale</title></rect>")
        axis_y = top + len(workers) * (row_h + gap)
        ticks = sorted({lo, hi, *range(lo, hi + 1, max(1, span // 6))})
        for t in ticks:
            x = left + (t - lo + 0.5) * bar_w
            parts.append(f"<text x='{x:.1f}' y='{axis_y + 4}' font-size='10' "
                         f"text-anchor='middle' fill='#57606a'>{t}</text>")
        parts.append(f"<text x='{left}' y='{axis_y + 18}' font-size='10' "
                     "fill='#57606a'>staleness: updates applied between a "
                     "gradient's compute and its apply (bar: share of the "
                     "worker's gradients)</text>")
        return (f"<svg class='nbdist-staleness' width='{left + plot_w + 8}' "
                f"height='{axis_y + 24}' "
                f"xmlns='http://www.w3.org/2000/svg'>{''.join(parts)}</svg>")

    def _repr_html_(self) -> str:
        workers, _ = self._rows()
        if self.compact():  # the stalest few named; every mean is in its strip
            stalest = self.means()[:_NAMED]
            legend = "<span class='muted'>stalest:</span> " + " ".join(
                f"<span class='chip'>{esc(w)}: mean {m:.2f}, most {most}</span>"
                for w, _, m, most in stalest)
            title = f" · {esc(self.title)}" if self.title else ""
            body = (f"<h4>Staleness{title} <span class='muted'>· "
                    f"{esc(self._summary())}</span></h4>{self._strips_svg()}"
                    f"<div>{legend}</div>")
            return (f'{STYLE}<div class="nbdist nbdist-staleness-view">'
                    f"{inline_styles(body)}</div>")
        legend = " ".join(
            f"<span class='chip' style='border-color:{_COLORS[i % len(_COLORS)]};"
            f"color:{_COLORS[i % len(_COLORS)]}'>{esc(w)}: mean "
            f"{sum(self.staleness(w)) / max(len(self.staleness(w)), 1):.2f}</span>"
            for i, w in enumerate(workers))
        title = f" · {esc(self.title)}" if self.title else ""
        body = (f"<h4>Staleness{title} <span class='muted'>· "
                f"{esc(self._summary())}</span></h4>{self._svg()}<div>{legend}</div>")
        return f'{STYLE}<div class="nbdist nbdist-staleness-view">' \
               f"{inline_styles(body)}</div>"
