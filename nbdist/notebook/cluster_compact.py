"""A large cluster at a glance (``ClusterView`` beyond ``COMPACT_AT`` tasks):
a grid of small cells, one per task, coloured by state and grouped by job;
and its history grouped across tasks ("32 workers started 00:21:06–07")
instead of a line per task.

>>> from nbdist.notebook.widget_cluster import TaskRow
>>> rows = [TaskRow("worker", i) for i in range(3)]
>>> for i, r in enumerate(rows):
...     r.note("started", 100.0 + 0.2 * i)
>>> rows[1].note("killed", 130.0)
>>> [line for _, line in grouped_history(rows, clock=lambda t: f"{t:.1f}")]
['3 workers started 100.0–100.4', '130.0 killed']
"""

from __future__ import annotations

from nbdist.notebook.live_view import STATE_COLORS, clock, esc

__all__ = ["COMPACT_AT", "compact_grid_html", "grouped_history", "job_counts_text"]

COMPACT_AT = 12  # more tasks than this: the compact grid and grouped history
_GROUP_GAP_S = 5.0  # changes of one kind this close together are one group
_GROUP_MIN = 3  # tasks a change must share to be told as a group
_CELL = 22  # px: one task's cell


def _plural(job: str, n: int) -> str:
    if n == 1:
        return job
    return "ps" if job == "ps" else job + "s"


def _span(times, clock) -> str:
    first, last = clock(min(times)), clock(max(times))
    if first == last:
        return first
    # "00:21:06–07": the shared start of the two times said once.
    common = 0
    while common < len(first) and first[common] == last[common]:
        common += 1
    cut = first.rfind(":", 0, common + 1) + 1 if ":" in first[:common] else 0
    return f"{first}–{last[cut:]}"


def grouped_history(rows, clock=clock) -> list[tuple[str, str]]:
    """(task or "", line) per group of changes: a change that ``_GROUP_MIN``
    or more tasks of one job (or all of a smaller job, two at least) had
    within seconds of each other is one line
    ("32 workers started 00:21:06–07"); the rest are per task, as
    ``ClusterState.history_lines`` has them."""
    job_size: dict[str, int] = {}
    for r in rows:
        job_size[r.job] = job_size.get(r.job, 0) + 1
    changes = sorted((t, r.job, r.name, what) for r in rows for t, what in r.history)
    groups: list[list] = []  # [job, what, [(time, task)]]
    open_groups: dict = {}
    for t, job, task, what in changes:
        g = open_groups.get((job, what))
        if g is None or t - g[2][-1][0] > _GROUP_GAP_S:
            g = open_groups[(job, what)] = [job, what, []]
            groups.append(g)
        g[2].append((t, task))
    out: list[tuple[float, str, str]] = []
    single: dict[str, list] = {}
    for job, what, members in groups:
        tasks = {task for _, task in members}
        if len(tasks) >= min(_GROUP_MIN, max(2, job_size[job])):  # or the whole job
            times = [t for t, _ in members]
            out.append((min(times), "", f"{len(tasks)} {_plural(job, len(tasks))} "
                        f"{what} {_span(times, clock)}"))
        else:
            for t, task in members:
                single.setdefault(task, []).append((t, what))
    for task, items in single.items():
        line = " · ".join(f"{clock(t)} {what}" for t, what in sorted(items)[-8:])
        out.append((min(t for t, _ in items), task, line))
    return [(task, line) for _, task, line in sorted(out)]


def job_counts_text(rows, extra=None) -> list[str]:
    """Per job: "worker  32: 31 running, 1 killed (worker:7)", then
    ``extra[job]`` (its steps/s and CPU) after " · " where given."""
    jobs: dict[str, list] = {}
    for r in rows:
        jobs.setdefault(r.job, []).append(r)
    width = max((len(j) for j in jobs), default=0)
    out = []
    for job, members in jobs.items():
        states: dict[str, list] = {}
        for r in members:
            states.setdefault(r.state, []).append(r.name)
        common = max(states, key=lambda s: len(states[s]))
        parts = []
        for state, names in states.items():
            who = "" if state == common else f" ({', '.join(names[:6])}" + (
                ", …)" if len(names) > 6 else ")")
            parts.append(f"{len(names)} {state}{who}")
        more = f" · {extra[job]}" if extra and job in extra else ""
        out.append(f"  {job.ljust(width)}  {len(members):3d}: {', '.join(parts)}{more}")
    return out


def compact_grid_html(rows) -> str:
    """One small cell per task, coloured by state, a row of cells per job;
    hovering a cell names the task, its address, pid, state and steps."""
    jobs: dict[str, list] = {}
    for r in rows:
        jobs.setdefault(r.job, []).append(r)
    lines = []
    for job, members in jobs.items():
        cells = []
        for r in members:
            color = STATE_COLORS.get(r.state) or (
                "#cf222e" if r.state == "failed" else "#6e7781")
            tip = (f"{r.name} · {r.address or '-'} · pid {r.pid or '-'} · {r.state}"
                   f" · {r.steps} steps" + (f" · restarted {r.restarts}×"
                                             if r.restarts else ""))
            cells.append(
                f"<span class='nbdist-task-cell' data-task='{esc(r.name)}' "
                f"data-state='{esc(r.state)}' title='{esc(tip)}' "
                f"style='display:inline-block;width:{_CELL}px;height:{_CELL - 4}px;"
                f"margin:1px;border-radius:3px;background:{color};color:#fff;"
                f"font-size:9px;line-height:{_CELL - 4}px;text-align:center'>"
                f"{r.index}</span>")
        lines.append(
            f"<div class='nbdist-job' data-job='{esc(job)}' style='margin:2px 0'>"
            f"<b style='display:inline-block;width:64px'>{esc(job)}</b>"
            f"<span style='display:inline-block;max-width:760px;vertical-align:top'>"
            f"{''.join(cells)}</span></div>")
    states = sorted({r.state for r in rows})
    legend = " ".join(
        f"<span class='chip'><span class='dot' style='background:"
        f"{STATE_COLORS.get(s) or '#6e7781'}'></span>{esc(s)}</span>" for s in states)
    return (f"<div class='nbdist-task-grid'>{''.join(lines)}</div>"
            f"<div style='margin:2px 0 4px 0'>{legend}</div>")
