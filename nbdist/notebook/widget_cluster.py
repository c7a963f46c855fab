"""``ClusterView``: the tasks of a cluster, live — address, pid, state, steps
served, steps/s and CPU — with kill and restart buttons (the code of
``%cluster kill/restart``).

State comes from two places: the processes of a ``LocalCluster`` (polled, so a
SIGKILL shows at once) and the coordination service's events (``task_state``:
connected, silent, back after a restart; ``step``: one more step served).
Each task's changes (started, killed, failed by heartbeat, restarted, with
times) are kept as its history, drawn under the table. Each task's steps/s
and CPU come from its heartbeats (``task_load``), read with the tasks' states
every ``load_poll_s``.
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, field

from nbdist.cluster.base import as_cluster
from nbdist.notebook import control
from nbdist.notebook.cluster_compact import (
    COMPACT_AT,
    compact_grid_html,
    grouped_history,
    job_counts_text,
)
from nbdist.notebook.events import cluster_gone
from nbdist.notebook.live_view import STATE_COLORS, LiveView, clock, esc, short_task
from nbdist.notebook.task_load import (
    TaskLoad,
    heartbeat_reader,
    load_cells_html,
    load_figures_html,
    load_strip_html,
    load_strip_text,
)
from nbdist.notebook.widget_story import FailureStory

__all__ = ["ClusterView"]

_JOB_ORDER = {"chief": 0, "worker": 1, "ps": 2, "evaluator": 3}
_HISTORY_SHOWN = 8  # entries per task in the text and html forms
# Failures drawn under the tasks, at most (the view fits one screen at 32 tasks).
_STORY_SHOWN = 4

# What a task's state becoming X is called in its history.
_PROCESS_NOTES = {
    "killed": "killed",
    "exited": "exited",
    "stopped": "stopped",
    "failed": "failed",
}
_SERVICE_NOTES = {"DISCONNECTED": "failed by heartbeat", "ERROR": "error"}


@dataclass
class TaskRow:
    job: str
    index: int
    address: str = ""
    pid: int | None = None
    process: str = "unknown"  # from the process: starting, running, killed, ...
    service: str = ""  # from the coordination service: CONNECTED, DISCONNECTED, ...
    steps: int = 0
    restarts: int = 0
    reason: str = ""  # why it ended, as its cluster says (SLURM: the node's Reason)
    history: list = field(default_factory=list)  # (wall time, what happened)
    load: TaskLoad = field(default_factory=TaskLoad)  # steps/s and CPU

    @property
    def name(self) -> str:
        return f"{self.job}:{self.index}"

    def note(self, what: str, when: float | None = None):
        if not self.history or self.history[-1][1] != what:
            self.history.append((time.time() if when is None else when, what))

    @property
    def state(self) -> str:
        if self.process in ("killed", "exited", "stopped", "failed", "starting"):
            return self.process
        if self.service == "DISCONNECTED":
            return "unresponsive"
        if self.service == "ERROR":
            return "error"
        if self.process == "running" or self.service == "CONNECTED":
            return "running"
        return "unknown"


class ClusterState:
    """Rows of a cluster's tasks, changed only by ``apply(event)`` and
    ``update_processes(tasks)``."""

    def __init__(self, spec=None):
        self.rows: dict[str, TaskRow] = {}
        self.story = FailureStory()  # kill -> detected -> ... -> redone
        if spec is not None:
            for job in spec.jobs:
                for i in spec.task_indices(job):
                    self.rows[f"{job}:{i}"] = TaskRow(job, i, spec.task_address(job, i))

    def row(self, task: str) -> TaskRow | None:
        name = short_task(task)
        row = self.rows.get(name)
        if row is None and ":" in name:
            job, index = name.rsplit(":", 1)
            if index.isdigit():
                row = self.rows[name] = TaskRow(job, int(index))
        return row

    def apply(self, event) -> bool:
        p = event.payload
        if event.kind == "recovery":
            self.story.sync_history(self.rows.values())
            return self.story.apply(event)
        if event.kind == "task_state":
            row = self.row(event.task)
            if row is None:
                return False
            pid = int(p.get("pid") or 0)
            when = (event.wall_time_us or 0) / 1e6 or None
            if row.process != "unknown":
                # A LocalCluster's processes are watched (update_processes): they
                # say which pid runs and when it restarted.
                if pid and row.pid and pid != row.pid:
                    return False  # about a process that is gone
                self._service(row, p.get("state", ""), when)
                return True
            if p.get("address"):
                row.address = p["address"]
            if pid:
                row.pid = pid
            if p.get("restarted"):
                row.restarts += 1
                row.steps = 0
                row.note("restarted", when)
            self._service(row, p.get("state", ""), when)
            return True
        if event.kind == "step":
            row = self.row(p.get("task") or event.task)
            if row is None:
                return False
            row.steps += 1
            return True
        return False

    @staticmethod
    def _service(row: TaskRow, state: str, when: float | None):
        old, row.service = row.service, state
        if state == old or row.process in _PROCESS_NOTES:
            return
        if state in _SERVICE_NOTES:
            row.note(_SERVICE_NOTES[state], when)
        elif state == "CONNECTED" and old in _SERVICE_NOTES:
            row.note("back", when)
        elif state == "CONNECTED" and not row.history:
            row.note("started", when)

    def update_processes(self, tasks) -> bool:
        changed = False
        for t in tasks:
            row = self.row(f"{t.job}:{t.index}")
            new = (t.address, t.pid, t.state)
            reason = getattr(t, "reason", "")  # a SlurmCluster's task says why
            if (row.address, row.pid, row.process) != new:
                if row.pid is not None and t.pid != row.pid:
                    row.service = ""  # a new process: the service has not seen it yet
                    row.restarts += 1
                    row.steps = 0
                    row.note("restarted", getattr(t, "started_at", None))
                elif t.state == "running" and not row.history:
                    row.note("started")
                elif t.state in _PROCESS_NOTES:
                    what = _PROCESS_NOTES[t.state]
                    row.note(f"{what}: {reason}" if reason else what)
                row.address, row.pid, row.process = new
                changed = True
            if row.reason != reason:
                row.reason = reason
                changed = True
        # The failure story learns of kills and restarts as the rows do.
        noted = self.story.note_processes(tasks)
        noted |= self.story.sync_history(self.rows.values())
        return changed or noted

    def apply_heartbeats(self, records) -> bool:
        """Takes the tasks' last heartbeats (``task_states()`` records:
        ``steps_served``, ``cpu_seconds``, ``last_heartbeat_wall``); returns
        whether a task's steps/s or CPU changed."""
        changed = False
        for rec in records:
            row = self.rows.get(short_task(rec.task))  # rows come from events
            if row is not None and rec.last_heartbeat_wall:
                changed |= row.load.add(rec.last_heartbeat_wall, rec.steps_served,
                                        rec.cpu_seconds,
                                        rec.incarnation)
        return changed

    def sorted_rows(self) -> list[TaskRow]:
        return sorted(
            self.rows.values(), key=lambda r: (_JOB_ORDER.get(r.job, 9), r.job, r.index)
        )

    def summary(self) -> str:
        rows = self.sorted_rows()
        counts: dict[str, int] = {}
        for r in rows:
            counts[r.state] = counts.get(r.state, 0) + 1
        parts = ", ".join(f"{n} {s}" for s, n in counts.items())
        return f"{len(rows)} task{'s' if len(rows) != 1 else ''}: {parts}"

    def history_lines(self) -> list[tuple[str, str]]:
        """(task, "17:02:01 started · 17:02:05 killed · ...") per task with a
        history, the last few changes of each."""
        out = []
        for r in self.sorted_rows():
            if r.history:
                shown = [
                    f"{clock(t)} {what}" for t, what in r.history[-_HISTORY_SHOWN:]
                ]
                more = "… " if len(r.history) > _HISTORY_SHOWN else ""
                out.append((r.name, more + " · ".join(shown)))
        return out


def _state_html(state: str, reason: str = "") -> str:
    color = STATE_COLORS.get(state) or ("#cf222e" if state == "failed" else "#6e7781")
    why = f" <span class='muted reason'>{esc(reason)}</span>" if reason else ""
    return f'<span class="dot" style="background:{color}"></span>{esc(state)}{why}'


class ClusterView(LiveView):
    """The tasks of a cluster, live.

    ``cluster`` is a ``LocalCluster`` (processes, with kill and restart
    buttons), an in-process ``Server`` or a ``ClusterSpec``.

    >>> import nbdist as nd
    >>> view = nd.notebook.ClusterView(nd.ClusterSpec({"worker": ["localhost:2223"]}),
    ...                                live=False)
    >>> print(view)
    ClusterView: 1 task: 1 unknown
      task      address         pid  state    steps  steps/s  CPU
      worker:0  localhost:2223  -    unknown  0      –        –

    While a cluster runs, steps/s and CPU (100 % is one core) are each task's
    over its last two seconds, from its heartbeats; "–": not running, or a
    peer that does not report its CPU time.
    """

    kinds = ("task_state", "step", "recovery")
    face_class = "nbdist-cluster-view"  # the static face, as the widget
    poll_s = 0.25
    load_poll_s = 0.5  # the tasks' heartbeats (steps/s, CPU) read this often

    def __init__(
        self, cluster, *, source=None, follower=None, target=None, live: bool = True
    ):
        spec = getattr(cluster, "cluster_spec", cluster)
        self._state = ClusterState(spec)
        self.message = ""
        self.snapshot_at: float | None = None
        self._poll_stop = threading.Event()
        self._load_polled = 0.0
        super().__init__(
            cluster, source=source, follower=follower, target=target, live=live
        )
        self._heartbeats = heartbeat_reader(
            self.follower.source if self.follower is not None else None)
        self._poll()
        if live and (self._pollable() or self._heartbeats is not None):
            self._poller = threading.Thread(
                target=self._poll_loop, daemon=True, name="nbdist-ClusterView-poll"
            )
            self._poller.start()

    # -- state ----------------------------------------------------------------------
    @property
    def state(self) -> ClusterState:
        return self._state

    def _apply(self, event) -> bool:
        return self._state.apply(event)

    def _pollable(self) -> bool:
        return as_cluster(self.cluster) is not None

    def _processes(self):
        c = as_cluster(self.cluster)  # a ClusterSpec has no processes to show
        return c.tasks if c is not None else []

    def _poll(self) -> bool:
        try:
            tasks = self._processes()
        except Exception:  # noqa: BLE001 - a cluster being torn down
            return False
        records = self._poll_heartbeats()
        with self._lock:
            changed = self._state.update_processes(tasks)
            changed |= self._state.apply_heartbeats(records)
            if changed:
                self._state_changed.notify_all()
        if changed:
            self._changed()
        return changed

    def _poll_heartbeats(self) -> list:
        """The tasks' last heartbeats, at most every ``load_poll_s`` ([] in
        between, or when the service does not answer)."""
        now = time.monotonic()
        if (self._heartbeats is None or self._closed
                or now - self._load_polled < self.load_poll_s):
            return []
        self._load_polled = now
        try:
            return self._heartbeats(timeout_s=1.0)
        except Exception:  # noqa: BLE001 - the service restarting or gone
            return []

    def _poll_loop(self):
        gone_since = None
        while not self._poll_stop.wait(self.poll_s):
            self._poll()
            if gone_since is None and cluster_gone(self.cluster):
                gone_since = time.monotonic()
            if gone_since is not None:
                # Shut down: draw the tasks until every one has stopped.
                with self._lock:
                    live = [
                        r
                        for r in self._state.rows.values()
                        if r.process in ("running", "starting")
                    ]
                if not live or time.monotonic() - gone_since > 15:
                    self.freeze()  # the last state stays in its outputs
                    return

    def close(self):
        self._poll_stop.set()
        self._poll()
        super().close()

    def snapshot(self) -> ClusterView:
        """The state and history now, as a static view (what ``%cluster
        status`` shows): its text says "status at 17:02:03" and it never
        changes, while this view stays live."""
        self._poll()
        snap = ClusterView(self.cluster, live=False)
        with self._lock:
            snap._state = copy.deepcopy(self._state)
            snap.message = self.message
        snap.snapshot_at = time.time()
        snap._closed = True
        return snap

    def face(self) -> str:
        if self.snapshot_at is not None:
            return f"status at {clock(self.snapshot_at)}"
        return super().face()

    def _can_act(self, row: TaskRow | None = None) -> tuple[bool, bool]:
        """Whether the kill and the restart button of ``row`` can do anything:
        only on a live view of a running LocalCluster this notebook started;
        kill only on a task that runs."""
        c = as_cluster(self.cluster)
        owned = c is not None and c.owned and c.restarts_tasks
        if not owned or self._closed or cluster_gone(self.cluster):
            return False, False
        alive = row is not None and row.state in ("running", "starting", "unresponsive")
        return alive, True

    def wait_for(self, predicate, timeout: float = 10.0) -> bool:
        """Waits until ``predicate(state)`` holds; returns whether it did."""
        end = time.monotonic() + timeout
        while True:
            self._poll()
            with self._lock:
                if predicate(self._state):
                    return True
                left = end - time.monotonic()
                if left <= 0:
                    return False
                # An event wakes us at once; a process's exit is seen only by
                # polling the cluster, so look again after poll_s.
                self._state_changed.wait(min(left, self.poll_s))

    # -- actions (the buttons) ------------------------------------------------------------
    def kill(self, task: str) -> str:
        """SIGKILLs ``task`` ("worker:1"), as ``%cluster kill`` does."""
        line = control.kill(self.cluster, task)
        self._poll()
        self._say(line)
        return line

    def restart(self, task: str) -> str:
        """Restarts ``task`` ("worker:1"), as ``%cluster restart`` does."""
        line = control.restart(self.cluster, task)
        self._poll()
        self._say(line)
        return line

    def slow(self, task: str, delay="20ms", peer: str | None = None) -> str:
        """Slows ``task`` (or its link to ``peer``), as ``%cluster slow`` does."""
        from nbdist.notebook import fault_control

        line = fault_control.slow(self.cluster, task, delay, peer)
        self._note_fault([task] + ([peer] if peer else []), line)
        return line

    def partition(self, task: str, peer: str) -> str:
        """Cuts the link ``task`` ↔ ``peer``, as ``%cluster partition`` does."""
        from nbdist.notebook import fault_control

        line = fault_control.partition(self.cluster, task, peer)
        self._note_fault([task, peer], line)
        return line

    def heal(self) -> str:
        """Removes every injected fault, as ``%cluster heal`` does."""
        from nbdist.notebook import fault_control

        healed = list(fault_control.active_faults(self.cluster))
        line = fault_control.heal(self.cluster)
        self._note_fault(healed, "healed")
        self._say(line)
        return line

    def _note_fault(self, tasks, line: str):
        """Puts an injected fault in the history of each task it touches."""
        with self._lock:
            for task in tasks:
                row = self._state.row(task)
                if row is not None:
                    row.history.append((time.time(), line.split(" (")[0]))
        self._say(line)

    def _say(self, line: str):
        with self._lock:
            self.message = line
        self._changed()

    def _click(self, action, task):
        def run():
            self._say(f"{action} {task}…")
            try:
                getattr(self, action)(task)
            except Exception as e:  # noqa: BLE001 - shown in the view
                self._say(f"{action} {task} failed: {str(e).splitlines()[0]}")

        threading.Thread(target=run, daemon=True, name=f"nbdist-{action}").start()

    # -- drawing --------------------------------------------------------------------------
    def _text(self) -> str:
        rows = self._state.sorted_rows()
        if len(rows) > COMPACT_AT:
            return self._compact_text(rows)
        table = [("task", "address", "pid", "state", "steps", "steps/s", "CPU")] + [
            (
                r.name,
                r.address or "-",
                str(r.pid) if r.pid else "-",
                f"{r.state} ({r.reason})" if r.reason else r.state,
                f"{r.steps} {_restarts(r)}".rstrip(),
                r.load.steps_text(_running(r)),
                r.load.cpu_text(_running(r)),
            )
            for r in rows
        ]
        widths = [max(len(line[i]) for line in table) for i in range(7)]
        lines = [f"ClusterView: {self._state.summary()}"]
        for line in table:
            lines.append(
                "  " + "  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip()
            )
        history = self._state.history_lines()
        if history:
            lines.append("history:")
            width = max(len(task) for task, _ in history)
            lines.extend(f"  {task.ljust(width)}  {line}" for task, line in history)
        story = self._story_lines()
        if story:
            lines.append("failure story:")
            lines.extend("  " + line for line in story.splitlines())
        if self.message:
            lines.append(self.message)
        return "\n".join(lines)

    def _compact_text(self, rows) -> str:
        """Many tasks: a line per job (how many in each state) and the
        history grouped across tasks."""
        lines = [f"ClusterView: {self._state.summary()}",
                 *job_counts_text(rows, load_strip_text(rows, _running))]
        history = grouped_history(rows)
        if history:
            lines.append("history:")
            lines.extend(f"  {task + '  ' if task else ''}{line}"
                         for task, line in history)
        story = self._story_lines()
        if story:
            lines.append("failure story:")
            lines.extend("  " + line for line in story.splitlines())
        if self.message:
            lines.append(self.message)
        return "\n".join(lines)

    def _story_lines(self) -> str:
        self._sync_story()
        return self._state.story.lines(most=_STORY_SHOWN)

    def _story_html(self) -> str:
        self._sync_story()
        return self._state.story.html(most=_STORY_SHOWN)

    def _sync_story(self):
        if not self._closed:  # a snapshot or a frozen view keeps its story
            try:
                self._state.story.note_processes(self._processes())
            except Exception:  # noqa: BLE001, S110 - a cluster being torn down
                pass
        self._state.story.sync_history(self._state.rows.values())

    def _history_html(self) -> str:
        rows = self._state.sorted_rows()
        if len(rows) > COMPACT_AT:
            items = "".join(
                f"<tr class='nbdist-history' data-task='{esc(task)}'><td><b>"
                f"{esc(task)}</b></td><td class='muted'>{esc(line)}</td></tr>"
                for task, line in grouped_history(rows))
            return f"<table class='nbdist-history'>{items}</table>" if items else ""
        items = "".join(
            f"<tr class='nbdist-history' data-task='{esc(task)}'><td><b>{esc(task)}"
            f"</b></td><td class='muted'>{esc(line)}</td></tr>"
            for task, line in self._state.history_lines()
        )
        return f"<table class='nbdist-history'>{items}</table>" if items else ""

    def _header_html(self) -> str:
        return f"<h4>Cluster <span class='muted'>· {esc(self._state.summary())}</span></h4>"

    def _html(self) -> str:
        tasks = self._state.sorted_rows()
        msg = f"<div class='muted'>{esc(self.message)}</div>" if self.message else ""
        if len(tasks) > COMPACT_AT:
            return (f"{self._header_html()}{_compact_html(tasks)}"
                    f"{self._history_html()}{self._story_html()}{msg}")
        rows = "".join(
            f"<tr class='nbdist-task' data-task='{esc(r.name)}'>"
            f"<td><b>{esc(r.name)}</b></td><td><code>{esc(r.address or '-')}</code></td>"
            f"<td class='pid'>{esc(r.pid or '-')}</td>"
            f"<td>{_state_html(r.state, r.reason)}</td>"
            f"<td class='steps'>{r.steps}</td><td class='muted'>{_restarts(r)}</td>"
            f"{load_cells_html(r.load, _running(r))}</tr>"
            for r in tasks
        )
        return (
            f"{self._header_html()}<table><tr><th>task</th><th>address</th>"
            f"<th>pid</th><th>state</th><th>steps</th><th></th><th>steps/s</th>"
            f"<th>CPU</th></tr>{rows}"
            f"</table>{self._history_html()}{self._story_html()}{msg}"
        )

    def _build(self):
        import ipywidgets as w

        from nbdist.notebook.live_view import STYLE

        self._cells = {}
        header = w.HTML(
            value=STYLE + f"<div class='nbdist'>{self._header_html()}</div>"
        )
        grid = []
        labels = ("task", "address", "pid", "state", "steps", "steps/s", "CPU", "", "")
        for label in labels:
            grid.append(
                w.HTML(value=f"<div class='nbdist'><b class='muted'>{label}</b></div>")
            )
        self._buttons = {}
        compact = len(self._state.sorted_rows()) > COMPACT_AT
        for r in ([] if compact else self._state.sorted_rows()):
            cells = [w.HTML() for _ in range(7)]
            self._cells[r.name] = cells
            grid.extend(cells)
            for action, icon in (("kill", "skull"), ("restart", "redo")):
                b = w.Button(
                    description=action,
                    icon=icon,
                    tooltip=f"{action} {r.name}",
                    layout=w.Layout(width="88px", height="26px"),
                )
                b.add_class(f"nbdist-{action}")
                b.on_click(lambda _b, a=action, t=r.name: self._click(a, t))
                self._buttons[(r.name, action)] = b
                grid.append(b)
        # Many tasks: the grid of cells (kill and restart: %cluster kill/restart).
        box = w.HTML() if compact else w.GridBox(
            grid,
            layout=w.Layout(
                grid_template_columns="90px 170px 70px 130px 60px 160px 160px "
                "96px 96px",
                grid_gap="0px 4px",
                align_items="center",
            ),
        )
        footer = w.HTML()
        self._history = w.HTML()
        self._story = w.HTML()  # the failure story strip
        from nbdist.notebook.widget_faults import fault_bar

        view = w.VBox([header, box, self._history, self._story, fault_bar(self, w),
                       footer])
        view.add_class("nbdist-cluster-view")
        self._header, self._footer = header, footer
        self._grid = box if compact else None
        self._update(view)
        return view

    def _update(self, view):
        from nbdist.notebook.live_view import STYLE

        grid = getattr(self, "_grid", None)
        if grid is not None:
            value = f"<div class='nbdist'>{_compact_html(self._state.sorted_rows())}"
            value += "</div>"
            if grid.value != value:
                grid.value = value
        for r in self._state.sorted_rows():
            cells = self._cells.get(r.name)
            if cells is None:
                continue
            values = (
                f"<b>{esc(r.name)}</b>",
                f"<code>{esc(r.address or '-')}</code>",
                esc(r.pid or "-"),
                _state_html(r.state, r.reason),
                f"{r.steps} <span class='muted'>{_restarts(r)}</span>",
                *_load_spans(r),
            )
            for cell, v in zip(cells, values):
                v = f"<div class='nbdist'>{v}</div>"
                if cell.value != v:
                    cell.value = v
            for action, possible in zip(("kill", "restart"), self._can_act(r)):
                button = self._buttons[(r.name, action)]
                if button.disabled != (not possible):
                    button.disabled = not possible
        can_fault = self._can_act()[1]  # a live view of a cluster it owns
        for button in getattr(self, "_fault_buttons", ()):
            if button.disabled != (not can_fault):
                button.disabled = not can_fault
        history = f"<div class='nbdist'>{self._history_html()}</div>"
        if self._history.value != history:
            self._history.value = history
        story = f"<div class='nbdist'>{self._story_html()}</div>"
        if self._story.value != story:
            self._story.value = story
        header = STYLE + f"<div class='nbdist'>{self._header_html()}</div>"
        if self._header.value != header:
            self._header.value = header
        face = self.face()
        message = " · ".join(x for x in (self.message, face) if x)
        footer = f"<div class='nbdist muted'>{esc(message)}</div>"
        if self._footer.value != footer:
            self._footer.value = footer


def _restarts(r: TaskRow) -> str:
    return f"↻{r.restarts}" if r.restarts else ""


def _running(r: TaskRow) -> bool:
    """Whether ``r``'s steps/s and CPU are shown (else "–"): they are the last
    seconds' of a task that runs."""
    return r.state == "running"


def _compact_html(rows) -> str:
    """Many tasks: the grid of cells, then a bar per task for steps/s and CPU."""
    return compact_grid_html(rows) + load_strip_html(rows, _running)


def _load_spans(r: TaskRow) -> tuple[str, str]:
    """The widget's steps/s and CPU cells (the static face's, out of a table)."""
    steps, cpu = load_figures_html(r.load, _running(r))
    return (f"<span class='nbdist-task-load'>{steps}</span>",
            f"<span class='nbdist-task-load'>{cpu}</span>")
