"""``CellRunView``: a ``%%cluster`` cell's runs, one tab per task with its
output and a live status (running, done, error with its traceback).

Once the runs are over, its text/plain and text/html forms hold every task's
stdout and stderr, result and error line, by task (sorted by job, then
index): what nbval compares and a static render (nbconvert, GitHub, a
notebook opened without its kernel) shows."""

from __future__ import annotations

from nbdist.notebook.live_view import STATE_COLORS, STYLE, LiveView, esc

__all__ = ["CellRunView"]

_ICONS = {"pending": "…", "running": "▶", "done": "✓", "error": "✗", "timed out": "⏱"}
_COLORS = {
    "pending": STATE_COLORS["unknown"],
    "running": STATE_COLORS["starting"],
    "done": STATE_COLORS["running"],
    "error": STATE_COLORS["error"],
    "timed out": STATE_COLORS["error"],
}


class CellRunView(LiveView):
    """The runs of one ``%%cluster`` cell (``TaskRun``s), drawn live."""

    refresh_s = 0.15

    def __init__(self, runs):
        self.runs = list(runs)
        self._shown: dict[str, int] = {}  # task -> output entries already drawn
        self._selected_failure = False
        super().__init__(None, live=False)

    def changed(self, run=None):
        """A run's status or output changed (called from its thread)."""
        self._changed()

    # -- text forms ------------------------------------------------------------------
    def _status_line(self) -> str:
        return "  ".join(
            f"{_ICONS[r.status]} {r.name} {r.status}"
            + (f" ({r.seconds:.1f} s)" if r.status in ("done", "error") else "")
            for r in self.runs
        )

    def _started(self) -> bool:
        return any(r.status != "pending" for r in self.runs)

    def _sorted(self):
        return sorted(self.runs, key=lambda r: (r.job, r.index))

    def _text(self) -> str:
        names = ", ".join(r.name for r in self.runs)
        if not self._started():  # the form shown where the live widget cannot be
            return f"%%cluster on {names} (each task's output in its tab)"
        lines = [f"%%cluster on {names}: {self._status_line()}"]
        for r in self._sorted():
            lines.append(f"[{r.name}] {_summary(r)}")
            lines.extend("  " + line for line in r.text.rstrip("\n").splitlines())
            lines.extend(f"  {line}" for line in _ending(r))
        return "\n".join(lines)

    def _chips(self) -> str:
        return "".join(
            f"<span class='chip nbdist-task-status' data-task='{esc(r.name)}'>"
            f"<span class='dot' style='background:{_COLORS[r.status]}'></span>"
            f"{esc(r.name)} · {esc(r.status)}"
            f"{f' · {r.seconds:.1f} s' if r.status in ('done', 'error') else ''}"
            "</span>"
            for r in self.runs
        )

    def _html(self) -> str:
        if not self._started():
            return (
                f"<div>%%cluster on {esc(', '.join(r.name for r in self.runs))} "
                "<span class='muted'>(each task's output in its tab)</span></div>"
            )
        body = "".join(_task_html(r) for r in self._sorted())
        return f"<div>%%cluster {self._chips()}</div>{body}"

    # -- the widget --------------------------------------------------------------------
    def _build(self):
        import ipywidgets as w

        self._outputs = [w.Output() for _ in self.runs]
        self._header = w.HTML()
        self._tabs = w.Tab(children=self._outputs)
        box = w.VBox([self._header, self._tabs])
        box.add_class("nbdist-cell-run")
        self._update(box)
        return box

    def _update(self, box):
        header = f"{STYLE}<div class='nbdist'>{self._chips()}</div>"
        if self._header.value != header:
            self._header.value = header
        titles = tuple(f"{_ICONS[r.status]} {r.name}" for r in self.runs)
        if tuple(self._tabs.titles) != titles:
            self._tabs.titles = titles
        failed = [
            i for i, r in enumerate(self.runs) if r.status in ("error", "timed out")
        ]
        if failed and not self._selected_failure:
            self._selected_failure = True
            self._tabs.selected_index = failed[0]  # open the first failure's tab
        for run, out in zip(self.runs, self._outputs):
            done = self._shown.get(run.name, 0)
            entries = run.output[done:]
            text = {"stdout": "", "stderr": ""}
            for name, t in entries:
                text[name] += t
            if text["stdout"]:
                out.append_stdout(text["stdout"])
            if text["stderr"]:
                out.append_stderr(text["stderr"])
            self._shown[run.name] = done + len(entries)
            if run.traceback and not getattr(run, "_traceback_shown", False):
                run._traceback_shown = True
                out.append_stderr(run.traceback)


def _summary(r) -> str:
    return f"{r.status}" + (f" in {r.seconds:.1f} s" if r.status != "pending" else "")


def _ending(r) -> list[str]:
    """The result and error lines of a run."""
    if r.status == "done" and r.result is not None:
        return [f"→ {r.result!r}"]
    if r.status == "timed out":
        return ["✗ timed out"]
    if r.error is not None:
        message = (str(r.error).strip().splitlines() or [""])[0]
        return [f"✗ {type(r.error).__name__}: {message}".rstrip(": ")]
    return []


def _task_html(r) -> str:
    out = "".join(
        f"<span style='color:{STATE_COLORS['error']}'>{esc(t)}</span>"
        if name == "stderr"
        else esc(t)
        for name, t in r.output
    )
    ending = "".join(f"<div class='nbdist-ending'>{esc(x)}</div>" for x in _ending(r))
    return (
        f"<div class='nbdist-task-output' data-task='{esc(r.name)}'>"
        f"<b>{esc(r.name)}</b> <span class='muted'>{esc(_summary(r))}</span>"
        f"<pre style='margin:2px 0 2px 12px'>{out}</pre>"
        f"<div style='margin:0 0 6px 12px'>{ending}</div></div>"
    )
