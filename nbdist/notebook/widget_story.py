"""The story of a failure: kill → detected (after how long) → closures
re-queued (how many) → checkpoint step restored → steps redone, with times.

``FailureStory`` is the model: it takes the ``recovery`` events that
``ClusterCoordinator`` and ``MonitoredSession`` publish (see
``nbdist.distribute.recovery_events``) and what is seen of the tasks
themselves (a process killed or restarted, a task failed by heartbeat), and
groups them into episodes, one per lost task. ``ClusterView`` draws it as a
strip under its table; ``FailureStoryView`` is the strip on its own:

>>> story = FailureStory()
>>> _ = story.note("ps:0", "killed", 100.0)
>>> _ = story.apply_payload({"phase": "lost", "task": "ps:0", "at": 100.4,
...                          "source": "MonitoredSession", "story": "s1",
...                          "how": "UnavailableError", "at_step": 48})
>>> _ = story.apply_payload({"phase": "restored", "step": 40, "at": 103.0,
...                          "source": "MonitoredSession", "story": "s1"})
>>> _ = story.apply_payload({"phase": "redone", "count": 8, "unit": "steps",
...                          "seconds": 0.5, "at": 103.5,
...                          "source": "MonitoredSession", "story": "s1"})
>>> print(story.lines(clock=lambda t: "t"))
ps:0  t killed → detected after 0.4 s → restored step 40 → redone 8 steps in 0.5 s

The static face is HTML with an inline SVG (no JavaScript).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from nbdist.notebook.live_view import LiveView, clock, esc, short_task

__all__ = ["Episode", "FailureStory", "FailureStoryView"]

_MATCH_S = 60.0  # a detection this long after a kill is another failure
_KILL_NOTES = ("killed", "exited", "failed", "failed by heartbeat")
_BACK_NOTES = ("restarted", "back")
PHASE_COLORS = {
    "killed": "#cf222e",
    "detected": "#bc4c00",
    "re-queued": "#0969da",
    "restored": "#8250df",
    "redone": "#1a7f37",
    "back": "#6e7781",
}


def _cause(note: str) -> str:
    """How a failure is told: "killed" (a process ended, whatever the signal)
    unless only heartbeats said so."""
    return note if note == "failed by heartbeat" else "killed"


@dataclass
class Episode:
    """One lost task and its recovery."""

    task: str
    killed_at: float | None = None
    cause: str = "killed"  # or "failed by heartbeat": no process was seen to end
    lost_at: float | None = None  # detected
    detected_by: list = field(default_factory=list)  # "source: how"
    at_step: int | None = None  # the global step reached before
    requeued: int | None = None
    requeued_at: float | None = None
    restored_step: int | None = None
    restored_at: float | None = None
    checkpoint: str = ""
    redone: int | None = None
    redone_unit: str = ""
    redone_s: float | None = None
    redone_at: float | None = None
    back_at: float | None = None
    stories: set = field(default_factory=set)  # (source, story id)

    @property
    def start(self) -> float:
        times = [t for t in (self.killed_at, self.lost_at) if t is not None]
        return min(times) if times else self.last

    @property
    def last(self) -> float:
        times = [
            t
            for t in (
                self.killed_at,
                self.lost_at,
                self.requeued_at,
                self.restored_at,
                self.redone_at,
                self.back_at,
            )
            if t is not None
        ]
        return max(times) if times else 0.0

    def phases(self) -> list[tuple[str, float, str]]:
        """(phase, wall time, label) in the order of the story."""
        out = []
        if self.killed_at is not None:
            out.append(("killed", self.killed_at, self.cause))
        if self.lost_at is not None:
            if self.killed_at is not None:
                label = (
                    f"detected after {max(0.0, self.lost_at - self.killed_at):.1f} s"
                )
            else:
                label = "detected"
            out.append(("detected", self.lost_at, label))
        if self.requeued is not None:
            n = self.requeued
            out.append(
                (
                    "re-queued",
                    self.requeued_at or self.lost_at or 0.0,
                    f"re-queued {n} closure{'s' if n != 1 else ''}",
                )
            )
        if self.restored_step is not None:
            out.append(
                (
                    "restored",
                    self.restored_at or 0.0,
                    f"restored step {self.restored_step}",
                )
            )
        if self.redone is not None:
            unit = self.redone_unit or "steps"
            if self.redone == 1:
                unit = unit.rstrip("s")
            took = f" in {self.redone_s:.1f} s" if self.redone_s is not None else ""
            out.append(
                ("redone", self.redone_at or 0.0, f"redone {self.redone} {unit}{took}")
            )
        if self.back_at is not None:
            out.append(("back", self.back_at, "back"))
        # Killed and detected open the story (the kill is seen by polling, so
        # its time may trail an immediate detection); the rest as it happened.
        order = list(PHASE_COLORS)
        first = [p for p in out if p[0] in ("killed", "detected")]
        rest = sorted(
            (p for p in out if p[0] not in ("killed", "detected")),
            key=lambda p: (p[1], order.index(p[0])),
        )
        return first + rest

    def has(self, phase: str) -> bool:
        return any(p == phase for p, _, _ in self.phases())


class FailureStory:
    """Episodes of failures, changed only by ``apply``/``apply_payload`` (the
    recovery events) and ``note`` (what was seen of a task)."""

    def __init__(self):
        self.episodes: list[Episode] = []
        self._noted: set = set()

    # -- inputs ------------------------------------------------------------------------
    def apply(self, event) -> bool:
        """A coordination-service event: ``recovery``, or a ``task_state``
        (failed by heartbeat, back)."""
        if event.kind == "recovery":
            return self.apply_payload(event.payload)
        if event.kind == "task_state":
            state = event.payload.get("state", "")
            when = (event.wall_time_us or 0) / 1e6 or time.time()
            task = short_task(event.task)
            if state == "DISCONNECTED":
                return self.note(task, "failed by heartbeat", when, weak=True)
            if event.payload.get("restarted"):
                return self.note(task, "restarted", when)
        return False

    def note(self, task: str, what: str, when: float, weak: bool = False) -> bool:
        """What was seen of ``task`` ("killed", "restarted", ...) at ``when``.
        ``weak``: only a sign (heartbeats stopped), used when nothing better
        says the task went down."""
        key = (task, what, round(when, 3))
        if key in self._noted:
            return False
        self._noted.add(key)
        if what in _BACK_NOTES:
            # The earliest sign it was back, whatever order the signs came in
            # (its process's start, the service's event, a poll): every view
            # that saw them tells the same time.
            ep = self._latest(task, lambda e: e.start <= when)
            if ep is None or (ep.back_at is not None and ep.back_at <= when):
                return False
            ep.back_at = when
            return True
        if what not in _KILL_NOTES:
            return False
        # A task still down from an earlier failure (or seen down before it
        # came back, as heartbeats tell late): the same failure.
        ep = self._latest(
            task,
            lambda e: (
                e.start - _MATCH_S <= when and (e.back_at is None or when <= e.back_at)
            ),
        )
        if ep is not None:
            if ep.killed_at is not None and (weak or ep.killed_at <= when):
                return False
            ep.killed_at, ep.cause = when, _cause(what)
            return True
        if weak and self._latest(task, lambda e: abs(when - e.start) < _MATCH_S):
            # Only a sign, timed by whoever noticed it: heartbeats of the task
            # that went down moments ago, told after it came back (a restart
            # can beat the heartbeat timeout). A new failure is told by its kill.
            return False
        self.episodes.append(Episode(task, killed_at=when, cause=_cause(what)))
        return True

    def apply_payload(self, p: dict) -> bool:
        phase = p.get("phase")
        when = float(p.get("at") or time.time())
        key = (p.get("source", ""), p.get("story", ""))
        tasks = [t.strip() for t in str(p.get("task") or "").split(",") if t.strip()]
        if phase == "lost":
            return self._lost(tasks, key, when, p)
        ep = self._by_story(key)
        if ep is None:
            ep = self._find(tasks, lambda e: True)
        if ep is None:
            return False
        ep.stories.add(key)
        if phase == "requeued":
            ep.requeued = int(p.get("count") or 0)
            ep.requeued_at = when
        elif phase == "restored":
            ep.restored_step = p.get("step")
            ep.restored_at = when
            ep.checkpoint = p.get("checkpoint") or ""
            if p.get("at_step") is not None and ep.at_step is None:
                ep.at_step = p["at_step"]
        elif phase == "redone":
            ep.redone = int(p.get("count") or 0)
            ep.redone_unit = p.get("unit") or "steps"
            ep.redone_s = p.get("seconds")
            ep.redone_at = when
        elif phase == "rejoined":
            if ep.back_at is None or when < ep.back_at:
                ep.back_at = when
        else:
            return False
        return True

    def _lost(self, tasks, key, when, p) -> bool:
        how = f"{p.get('source', '')}: {p.get('how', '')}".strip(": ")
        ep = self._by_story(key)
        if ep is None:
            # Another source's detection of the same failure joins it, even
            # once it is redone: a busy machine can tell a detection late (a
            # coordinator's probe after the session's recovery). A source
            # telling a second loss is a second failure.
            ep = self._find(
                tasks,
                lambda e: (
                    (e.lost_at is None or key[0] not in {s for s, _ in e.stories})
                    and abs(e.start - when) < _MATCH_S
                ),
            )
        if ep is None:
            ep = Episode(tasks[0] if tasks else "?")
            self.episodes.append(ep)
        if ep.task == "?" and tasks:
            ep.task = tasks[0]
        ep.stories.add(key)
        ep.lost_at = when if ep.lost_at is None else min(ep.lost_at, when)
        if how not in ep.detected_by:
            ep.detected_by.append(how)
        if p.get("at_step") is not None:
            ep.at_step = p["at_step"]
        return True

    # -- finding episodes -------------------------------------------------------------
    def _latest(self, task, ok):
        for ep in reversed(self.episodes):
            if ep.task == task and ok(ep):
                return ep
        return None

    def _by_story(self, key):
        if not key[1]:
            return None
        for ep in reversed(self.episodes):
            if key in ep.stories:
                return ep
        return None

    def _find(self, tasks, ok):
        """The latest episode of one of ``tasks`` (any task when none is
        named) that ``ok`` accepts."""
        for ep in reversed(self.episodes):
            if (not tasks or ep.task in tasks or ep.task == "?") and ok(ep):
                return ep
        return None

    def note_processes(self, tasks) -> bool:
        """Notes the exact kill times a ``LocalCluster``'s tasks carry
        (``ended_at``: its ``kill()``), earlier than a poll sees them."""
        changed = False
        for t in tasks:
            ended = getattr(t, "ended_at", None)
            if ended and t.state == "killed":
                changed |= self.note(f"{t.job}:{t.index}", "killed", ended)
        return changed

    def sync_history(self, rows) -> bool:
        """Notes the kills and restarts in ``ClusterView``'s task histories."""
        changed = False
        for r in rows:
            for when, what in r.history:
                word = what.split(":", 1)[0]
                if word in _KILL_NOTES or word in _BACK_NOTES:
                    changed |= self.note(r.name, word, when, weak=word != "killed")
        return changed

    # -- forms ------------------------------------------------------------------
    def lines(self, clock=clock, most: int | None = None) -> str:
        """One line per episode: "ps:0  17:02:01 killed → detected after ...";
        the first ``most`` and a count of the others, when given."""
        out = []
        width = max((len(e.task) for e in self.episodes), default=0)
        for ep in self.episodes:
            phases = ep.phases()
            if not phases:
                continue
            first = f"{clock(phases[0][1])} {phases[0][2]}"
            rest = [label for _, _, label in phases[1:]]
            out.append(f"{ep.task.ljust(width)}  " + " → ".join([first, *rest]))
        if most is not None and len(out) > most:
            out[most:] = [f"… and {len(out) - most} more failures"]
        return "\n".join(out)

    def svg(self, width: int = 820, most: int | None = None) -> str:
        """The strip: per episode, its phases left to right, each a dot with
        its label, the time between two phases on the line that joins them;
        the first ``most`` episodes only, when given."""
        episodes = [e for e in self.episodes if e.phases()][:most]
        if not episodes:
            return ""
        row_h, left, right = 76, 84, 44
        height = row_h * len(episodes) + 8
        head = (
            f"<svg class='nbdist-story' width='{width}' height='{height}' "
            f"viewBox='0 0 {width} {height}' xmlns='http://www.w3.org/2000/svg' "
            "font-family='system-ui,sans-serif' font-size='12'>"
        )
        parts = [head]
        for row, ep in enumerate(episodes):
            phases = ep.phases()
            y = 10 + row * row_h + 40
            span = width - left - right
            step = span / max(1, len(phases) - 1) if len(phases) > 1 else 0
            xs = [left + i * step for i in range(len(phases))]
            parts.append(
                f"<text x='4' y='{y + 4}' font-weight='600' fill='#1f2328'>"
                f"{esc(ep.task)}</text>"
            )
            if len(xs) > 1:
                parts.append(
                    f"<line x1='{xs[0]:.0f}' y1='{y}' x2='{xs[-1]:.0f}' y2='{y}' "
                    "stroke='#d0d7de' stroke-width='3'/>"
                )
            for i, (phase, when, label) in enumerate(phases):
                color = PHASE_COLORS[phase]
                anchor = (
                    "start" if i == 0 else ("end" if i == len(phases) - 1 else "middle")
                )
                parts.append(
                    f"<g class='nbdist-story-phase' data-phase='{phase}'>"
                    f"<circle cx='{xs[i]:.0f}' cy='{y}' r='6' fill='{color}'/>"
                    f"<text x='{xs[i]:.0f}' y='{y - 12 - 14 * (i % 2)}' "
                    f"text-anchor='{anchor}' "
                    f"fill='{color}' font-weight='600'>{esc(label)}</text>"
                    f"<text x='{xs[i]:.0f}' y='{y + 20}' text-anchor='{anchor}' "
                    f"fill='#59636e'>{esc(clock(when))}</text></g>"
                )
                if i:
                    gap = when - phases[i - 1][1]
                    mid = (xs[i] + xs[i - 1]) / 2
                    parts.append(
                        f"<text x='{mid:.0f}' y='{y + 4}' text-anchor='middle' "
                        f"fill='#59636e' font-size='11' paint-order='stroke' "
                        f"stroke='#ffffff' stroke-width='4'>"
                        f"+{max(0.0, gap):.1f} s</text>"
                    )
        parts.append("</svg>")
        return "".join(parts)

    def html(self, most: int | None = None) -> str:
        """The strip under a heading; beyond ``most`` episodes (32 workers that
        missed heartbeats at once), the first ones and a count of the others."""
        svg = self.svg(most=most)
        if not svg:
            return ""
        shown = [e for e in self.episodes if e.phases()]
        more = len(shown) - most if most is not None and len(shown) > most else 0
        note = (f"<div class='muted nbdist-story-more'>… and {more} more failures "
                f"(FailureStoryView shows them all)</div>" if more else "")
        return (
            "<div class='nbdist-story-strip'><h4 style='margin:8px 0 2px 0'>"
            "Failure story</h4>" + svg + note + "</div>"
        )


class FailureStoryView(LiveView):
    """The failure story of a cluster, live: one strip per lost task, kill →
    detected → re-queued → restored → redone, with times.

    ``cluster`` is a ``LocalCluster`` (its processes are watched, so a kill
    shows at once) or an in-process ``Server``; the recovery events come from
    its coordination service.

    >>> view = FailureStoryView(live=False)
    >>> print(view)
    FailureStoryView: no failure yet
    """

    kinds = ("recovery", "task_state")
    face_class = "nbdist-story-view"
    poll_s = 0.25

    def __init__(
        self,
        cluster=None,
        *,
        source=None,
        follower=None,
        target=None,
        live: bool = True,
    ):
        self._state = FailureStory()
        self._seen: dict = {}  # task -> (pid, state) of its process
        self._poll_stop = threading.Event()
        self._poller = None
        super().__init__(
            cluster, source=source, follower=follower, target=target, live=live
        )
        self._poll()
        if live and hasattr(cluster, "tasks"):
            self._poller = threading.Thread(
                target=self._poll_loop, daemon=True, name="nbdist-FailureStoryView-poll"
            )
            self._poller.start()

    @property
    def story(self) -> FailureStory:
        return self._state

    def _apply(self, event) -> bool:
        return self._state.apply(event)

    def _poll(self) -> bool:
        try:
            tasks = list(getattr(self.cluster, "tasks", None) or [])
        except Exception:  # noqa: BLE001 - a cluster being torn down
            return False
        now = time.time()
        with self._lock:
            changed = self._state.note_processes(tasks)
            for t in tasks:
                name = f"{t.job}:{t.index}"
                old = self._seen.get(name)
                self._seen[name] = (t.pid, t.state)
                if old is None:
                    continue
                if old[0] is not None and t.pid != old[0]:
                    started = getattr(t, "started_at", None) or now
                    changed |= self._state.note(name, "restarted", started)
                elif t.state != old[1] and t.state in _KILL_NOTES:
                    changed |= self._state.note(name, t.state, now)
            if changed:
                self._state_changed.notify_all()
        if changed:
            self._changed()
        return changed

    def _poll_loop(self):
        while not self._poll_stop.wait(self.poll_s):
            self._poll()
            if self._closed:
                return

    def close(self):
        self._poll_stop.set()
        super().close()

    def wait_for(self, predicate, timeout: float = 30.0) -> bool:
        """Waits until ``predicate(story)`` holds; returns whether it did."""
        end = time.monotonic() + timeout
        while True:
            self._poll()
            with self._lock:
                if predicate(self._state):
                    return True
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._state_changed.wait(min(left, self.poll_s))

    def _text(self) -> str:
        lines = self._state.lines()
        if not lines:
            return "FailureStoryView: no failure yet"
        n = len(self._state.episodes)
        head = f"FailureStoryView: {n} failure{'s' if n != 1 else ''}"
        return head + "\n" + "\n".join("  " + line for line in lines.splitlines())

    def _html(self) -> str:
        strip = self._state.html()
        if not strip:
            return "<h4>Failure story <span class='muted'>· no failure yet</span></h4>"
        return strip
