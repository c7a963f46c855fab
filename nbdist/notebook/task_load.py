"""Each task's load in ``ClusterView``: steps/s and CPU, from its heartbeats.

Every task's heartbeat carries its ``steps_served`` and its process's CPU
seconds (``time.process_time()`` in the task: a task reports its own CPU, so a
task on another host is measured there). The view reads them with the tasks'
states (``task_states()``, as the ClusterCoordinator's watcher does) and
``TaskLoad`` turns two heartbeats into rates: steps/s is the change of
``steps_served`` over the time between them, CPU % the change of the CPU
seconds (100 % = one core busy). A peer that does not send CPU seconds (older
than the field) shows "–", as does a task not running.

>>> load = TaskLoad()
>>> load.add(100.0, 0, 1.0)      # the first heartbeat: nothing to compare yet
False
>>> load.add(101.0, 20, 1.5)     # one second later: 20 steps, 0.5 s of CPU
True
>>> load.steps_text(), load.cpu_text()
('20', '50%')
>>> load.add(102.0, 30, None)    # a peer that does not say its CPU time
True
>>> load.steps_text(), load.cpu_text()
('15', '–')
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from nbdist.notebook.live_view import esc
from nbdist.runtime.coordination import LocalCoordinationClient

__all__ = ["TaskLoad", "heartbeat_reader", "load_cells_html", "load_figures_html",
           "load_strip_html",
           "load_strip_text", "spark_html"]

UNKNOWN = "–"
_WINDOW_S = 2.0  # rates over about the last two seconds of heartbeats
_HISTORY = 20  # a sparkline has 20 to 39 points; older ones merged two by two
# A CPU sparkline is scaled to its largest value (its shape shows; the number
# says how busy), but never below 10 %: an idle task's bars stay low.
_CPU_FLOOR = 10.0
_STEPS_COLOR = "#0969da"
_CPU_COLOR = "#8250df"


@dataclass
class TaskLoad:
    """A task's last heartbeats and the rates between them, with a bounded
    history of the rates (a sparkline over the task's whole run)."""

    incarnation: int = 0
    steps_per_s: float | None = None
    cpu_pct: float | None = None
    history: list = field(default_factory=list)  # (steps/s, CPU % or None)
    _samples: collections.deque = field(default_factory=collections.deque)
    _stride: int = 1  # rates per history point (doubles when history is full)
    _pending: list = field(default_factory=list)

    def add(self, wall: float, steps: int, cpu: float | None,
            incarnation: int = 0) -> bool:
        """A heartbeat seen at ``wall`` (seconds); returns whether the rates
        changed. A new incarnation (the task restarted) starts its counters
        again: rates are taken only between heartbeats of one process."""
        samples = self._samples
        if incarnation != self.incarnation or (samples and steps < samples[-1][1]):
            samples.clear()
            self.incarnation = incarnation
            self.steps_per_s = self.cpu_pct = None
        if samples and wall <= samples[-1][0]:
            return False  # no heartbeat since the last look
        samples.append((wall, steps, cpu))
        while len(samples) > 2 and wall - samples[1][0] >= _WINDOW_S:
            samples.popleft()
        if len(samples) < 2:
            return False
        t0, s0, _ = samples[0]
        self.steps_per_s = max(0.0, (steps - s0) / (wall - t0))
        # CPU from the oldest heartbeat that told it (registering tells none).
        told = [(t, c) for t, _, c in list(samples)[:-1] if c is not None]
        self.cpu_pct = (None if cpu is None or not told
                        else max(0.0, 100.0 * (cpu - told[0][1]) / (wall - told[0][0])))
        self._remember(self.steps_per_s, self.cpu_pct)
        return True

    def _remember(self, steps, cpu):
        self._pending.append((steps, cpu))
        if len(self._pending) < self._stride:
            return
        cpus = [c for _, c in self._pending if c is not None]
        self.history.append((sum(s for s, _ in self._pending) / len(self._pending),
                             sum(cpus) / len(cpus) if cpus else None))
        self._pending = []
        if len(self.history) >= 2 * _HISTORY:
            self.history = [_mean2(a, b) for a, b in zip(self.history[::2],
                                                          self.history[1::2])]
            self._stride *= 2

    def steps_text(self, running: bool = True) -> str:
        return _number(self.steps_per_s) if running else UNKNOWN

    def cpu_text(self, running: bool = True) -> str:
        if not running or self.cpu_pct is None:
            return UNKNOWN
        return _percent(self.cpu_pct)


def _mean2(a, b):
    cpus = [c for c in (a[1], b[1]) if c is not None]
    return ((a[0] + b[0]) / 2, sum(cpus) / len(cpus) if cpus else None)


def _number(x: float | None) -> str:
    if x is None:
        return UNKNOWN
    return f"{x:.1f}" if x < 10 else f"{x:.0f}"


def heartbeat_reader(source):
    """``task_states(tasks=None, timeout_s=None)`` of an event source (the
    coordination service's client, or an in-process service's source), or None
    when it has none."""
    service = getattr(source, "service", None)  # ServiceEventSource
    if service is not None:
        source = LocalCoordinationClient(service)
    return getattr(source, "task_states", None)


def spark_html(values, color: str, top: float | None = None, height: int = 14) -> str:
    """A sparkline: a bar (a 2 px stroke, 3 px apart) per value, in one svg
    path (a static render draws it without script; a few bytes a bar); None
    values leave a gap, 0 a 1 px stub.

    >>> spark_html([2, None, 4], "red")  # doctest: +NORMALIZE_WHITESPACE
    "<svg width='9' height='14' style='vertical-align:middle;margin-left:4px'>\
<path d='M1 14v-7M7 14v-14' stroke='red' stroke-width='2'/></svg>"
    """
    known = [v for v in values if v is not None]
    top = top or max(known, default=0) or 1.0
    bars = "".join(
        f"M{3 * i + 1} {height}v-{max(1, round(height * min(v, top) / top))}"
        for i, v in enumerate(values) if v is not None)
    return (f"<svg width='{3 * len(values)}' height='{height}' "
            f"style='vertical-align:middle;margin-left:4px'>"
            f"<path d='{bars}' stroke='{color}' stroke-width='2'/></svg>")


def load_figures_html(load: TaskLoad, running: bool) -> tuple[str, str]:
    """steps/s and CPU, each a number and its sparkline over the task's run."""
    steps = [s for s, _ in load.history]
    cpus = [c for _, c in load.history]
    cpu_top = max(_CPU_FLOOR, max((c for c in cpus if c is not None), default=0))
    return (f"{esc(load.steps_text(running))}{spark_html(steps, _STEPS_COLOR)}",
            f"{esc(load.cpu_text(running))}{spark_html(cpus, _CPU_COLOR, cpu_top)}")


def load_cells_html(load: TaskLoad, running: bool) -> str:
    """Two table cells, steps/s and CPU. Their class marks them as measured (a
    notebook's committed face and a fresh run's differ there by design)."""
    steps, cpu = load_figures_html(load, running)
    return (f"<td class='nbdist-task-load' data-load='steps'>{steps}</td>"
            f"<td class='nbdist-task-load' data-load='cpu'>{cpu}</td>")


def _job_loads(rows, running):
    """(job, its rows, {task: steps/s}, {task: CPU %}) per job, of tasks
    running and measured."""
    jobs: dict[str, list] = {}
    for r in rows:
        jobs.setdefault(r.job, []).append(r)
    for job, members in jobs.items():
        live = [r for r in members if running(r)]
        steps = {r.name: r.load.steps_per_s for r in live
                 if r.load.steps_per_s is not None}
        cpus = {r.name: r.load.cpu_pct for r in live if r.load.cpu_pct is not None}
        yield job, members, steps, cpus


def _percent(x: float) -> str:
    return f"{x:.0f}%"


def load_strip_html(rows, running) -> str:
    """Many tasks: per job, a bar per task for its steps/s and one for its CPU
    (now), and the spread in words: the slowest and the busiest task named."""
    lines = []
    for job, members, steps, cpus in _job_loads(rows, running):
        cpu_top = max(_CPU_FLOOR, max(cpus.values(), default=0))
        lines.append(
            f"<div class='nbdist-load-job' data-job='{esc(job)}' style='margin:2px 0'>"
            f"<b style='display:inline-block;width:64px'>{esc(job)}</b>steps/s "
            f"<span class='nbdist-task-load'>"
            f"{spark_html([steps.get(r.name) for r in members], _STEPS_COLOR)} "
            f"{esc(_spread(steps, _number, 'slowest', min))}</span> · CPU "
            f"<span class='nbdist-task-load'>"
            f"{spark_html([cpus.get(r.name) for r in members], _CPU_COLOR, cpu_top)} "
            f"{esc(_spread(cpus, _percent, 'busiest', max))}</span></div>")
    return f"<div class='nbdist-load-strip'>{''.join(lines)}</div>"


def load_strip_text(rows, running) -> dict[str, str]:
    """The compact strip in words, per job: "steps/s 3.1–11 (slowest
    worker:7) · CPU 12–97% (busiest ps:0)" ("–": nothing measured)."""
    return {job: f"steps/s {_spread(steps, _number, 'slowest', min)}"
                 f" · CPU {_spread(cpus, _percent, 'busiest', max)}"
            for job, _, steps, cpus in _job_loads(rows, running)}


def _spread(values: dict, fmt, word: str, pick) -> str:
    """ "3.1–11 (slowest worker:7)", "12–97% (busiest ps:0)", or "–" when
    nothing is known."""
    if not values:
        return UNKNOWN
    lo, hi = fmt(min(values.values())), fmt(max(values.values()))
    who = pick(values, key=values.get)
    span = lo if lo == hi else f"{lo.rstrip('%')}–{hi}"
    return f"{span} ({word} {who})" if len(values) > 1 else span
