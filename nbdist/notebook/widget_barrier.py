"""``BarrierView``: every barrier of a cluster — participants, who has arrived,
round number — live. Two kinds:

* **coordination barriers** (``wait_for_other_workers``, ``barrier()`` of the
  coordination client) come straight from the ``barrier_arrival``,
  ``barrier_passed`` and ``barrier_timeout`` events;
* **SyncReplicasOptimizer rounds** are derived from the ``graph_registered``
  and ``step`` events. A partition holding ``AccumulatorTakeGradient(s)`` is the
  chief's aggregation step: each time it ends, a round has passed (gradients
  averaged and applied, tokens pushed; the round number is the number of
  updates, i.e. the global step since the view started). A partition holding
  ``AccumulatorApplyGradient`` is a worker's training step (its other
  partition, with the same step id, names the worker). A training step ends
  once its worker has pushed a gradient and taken a token, so after ``r``
  rounds a worker that has finished ``r`` steps has arrived at round ``r + 1``
  (it pushes its next gradient right away). Counting, not ordering, makes this
  immune to the order in which tasks publish. Step events must carry their
  ``graph_handle``. The arrivals a round needs are the optimizer's
  ``replicas_to_aggregate``, as its take asks for them (``take_started``).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from nbdist.notebook.live_view import LiveView, esc, short_task
from nbdist.notebook.barrier_rounds import PendingPushes, RoundTracker

__all__ = ["BarrierView"]

_TAKE_OPS = {"AccumulatorTakeGradient", "AccumulatorTakeGradients"}
_PUSH_OPS = {"AccumulatorApplyGradient"}
_PENDING_MAX = 4096
_CHIPS_AT = 8  # more participants than this: the arrivals' distribution, no chips


@dataclass
class BarrierRecord:
    barrier_id: str
    kind: str  # "coordination" or "SyncReplicas"
    participants: list = field(default_factory=list)
    arrived: list = field(default_factory=list)  # for the next round
    round: int = 0  # rounds passed
    status: str = "waiting"  # waiting, passed, timed out
    missing: list = field(default_factory=list)
    history: collections.deque = field(
        default_factory=lambda: collections.deque(maxlen=40)
    )  # (round, arrived)
    # SyncReplicas: each round's arrivals, waits and drops (its accumulators'
    # gradient_pushed events); None until the first push is seen.
    rounds: RoundTracker | None = None
    # SyncReplicas: the gradients a round takes (the take's num_required,
    # i.e. replicas_to_aggregate); None until a take is seen.
    needed: int | None = None


class BarrierState:
    """Barriers by id; changed only by ``apply(event)``."""

    def __init__(self):
        self.barriers: dict[str, BarrierRecord] = {}
        # (task, graph handle) -> (kind, ps task): handles are unique per task only
        self._graph_kind: dict[tuple, tuple[str, str]] = {}
        self._round_steps: set = set()
        self._push_steps: collections.OrderedDict = collections.OrderedDict()
        self._other_steps: collections.OrderedDict = collections.OrderedDict()
        self._completed: dict[str, collections.Counter] = {}  # barrier -> per worker
        self._counted: set = set()
        self._pushes = PendingPushes()
        # session handle -> the tasks its graphs are on (names a push's worker)
        self._session_tasks: collections.OrderedDict = collections.OrderedDict()

    def _record(self, barrier_id: str, kind: str) -> BarrierRecord:
        rec = self.barriers.get(barrier_id)
        if rec is None:
            rec = self.barriers[barrier_id] = BarrierRecord(barrier_id, kind)
        return rec

    def apply(self, event) -> bool:
        p = event.payload
        kind = event.kind
        if kind == "barrier_arrival":
            rec = self._record(p["barrier_id"], "coordination")
            rec.participants = [short_task(t) for t in p.get("participants", ())]
            rec.arrived = [short_task(t) for t in p.get("arrived", ())]
            rec.status = "waiting"
            rec.missing = []
            return True
        if kind == "barrier_passed":
            rec = self._record(p["barrier_id"], "coordination")
            rec.participants = [short_task(t) for t in p.get("participants", ())]
            rec.round = int(p.get("round", rec.round + 1))
            rec.history.append((rec.round, list(rec.participants)))
            rec.arrived = []
            rec.status = "passed"
            return True
        if kind == "barrier_timeout":
            rec = self._record(p["barrier_id"], "coordination")
            rec.status = "timed out"
            rec.missing = [short_task(t) for t in p.get("missing", ())]
            me = short_task(event.task)
            rec.arrived = [t for t in rec.arrived if t != me]
            return True
        if kind == "graph_registered":
            return self._graph(event)
        if kind == "step":
            return self._step(event)
        if kind == "gradient_pushed":
            return self._gradient_pushed(event)
        if kind == "take_started":
            rec = self._sync_record(short_task(p.get("task") or event.task))
            needed = int(p.get("num_required") or 0) or None
            changed, rec.needed = rec.needed != needed, needed
            return changed
        return False

    # -- SyncReplicas ------------------------------------------------------------------
    def _graph(self, event) -> bool:
        p = event.payload
        ops = {op for _, op, _ in p.get("nodes", ())}
        task = short_task(p.get("task") or event.task)
        handle = p.get("graph_handle", "")
        session = handle.rpartition("/")[0]
        if session:
            tasks = self._session_tasks.get(session) or set()
            tasks.add(task)
            self._remember(self._session_tasks, session, tasks)
        if ops & _TAKE_OPS:
            self._graph_kind[(task, handle)] = ("round", task)
        elif ops & _PUSH_OPS:
            self._graph_kind[(task, handle)] = ("push", task)
        return False

    @staticmethod
    def _remember(d: collections.OrderedDict, key, value):
        d[key] = value
        if len(d) > _PENDING_MAX:
            d.popitem(last=False)

    def _step(self, event) -> bool:
        p = event.payload
        handle = p.get("graph_handle")
        step_id = p.get("step_id")
        task = short_task(p.get("task") or event.task)
        kind, ps = self._graph_kind.get((task, handle), ("other", ""))
        if kind == "round":
            if step_id in self._round_steps:
                return False  # another ps partition of the same aggregation step
            self._round_steps.add(step_id)
            rec = self._sync_record(ps)
            rec.round += 1
            if rec.rounds is not None:
                rec.rounds.complete_oldest()
            rec.history.append((rec.round, list(rec.arrived)))
            rec.status = "passed"
            self._refresh_arrivals(rec)
            return True
        if kind == "push":
            if step_id in self._push_steps:
                return False
            self._remember(self._push_steps, step_id, ps)
            worker = self._other_steps.pop(step_id, None)
            return self._arrive(ps, worker, step_id) if worker else False
        if step_id in self._push_steps:
            return self._arrive(self._push_steps[step_id], task, step_id)
        self._remember(self._other_steps, step_id, task)
        return False

    def _sync_record(self, ps: str) -> BarrierRecord:
        """The SyncReplicas barrier (one per cluster, whichever ps its
        partitions are on)."""
        for rec in self.barriers.values():
            if rec.kind == "SyncReplicas":
                return rec
        return self._record(f"sync_replicas@{ps}", "SyncReplicas")

    def _gradient_pushed(self, event) -> bool:
        p = event.payload
        step_id = p.get("step_id")
        if not self._pushes.first(step_id):
            return False  # the step's push to another accumulator
        rec = self._sync_record(short_task(p.get("task") or event.task))
        if rec.rounds is None:
            rec.rounds = RoundTracker()
        rec.rounds.push(step_id, p)
        worker = self._other_steps.get(step_id) or self._worker_of(
            p.get("session", ""), short_task(p.get("task") or event.task))
        if worker is not None:
            rec.rounds.name(step_id, worker)
            if worker not in rec.participants:
                rec.participants = sorted(rec.participants + [worker], key=_task_key)
        self._refresh_arrivals(rec)
        return True

    def _worker_of(self, session: str, ps: str) -> str | None:
        """The one task of another job than ``ps``'s that ``session``'s graphs
        are on (between-graph replication: each worker's own session)."""
        job = ps.rpartition(":")[0]
        tasks = [t for t in self._session_tasks.get(session, ())
                 if t.rpartition(":")[0] != job]
        return tasks[0] if len(tasks) == 1 else None

    def _arrive(self, ps: str, worker: str, step_id=None) -> bool:
        rec = self._sync_record(ps)
        if rec.rounds is not None and step_id is not None:
            rec.rounds.name(step_id, worker)
        counts = self._completed.setdefault(rec.barrier_id, collections.Counter())
        counts[worker] += 1
        if worker not in rec.participants:
            rec.participants = sorted(rec.participants + [worker], key=_task_key)
        self._refresh_arrivals(rec)
        if rec.status == "passed" and rec.arrived:
            rec.status = "waiting"
        return True

    def _refresh_arrivals(self, rec: BarrierRecord):
        if rec.rounds is not None:
            # What the accumulators saw: the gradients of the round gathering
            # now (none once training is over).
            rec.arrived = [w for w in rec.rounds.arrived() if w != "?"]
            return
        counts = self._completed.get(rec.barrier_id, collections.Counter())
        rec.arrived = [w for w in rec.participants if counts[w] >= rec.round]


def _task_key(name: str):
    job, _, index = name.rpartition(":")
    return (job, int(index) if index.isdigit() else 0)


class BarrierView(LiveView):
    """Every barrier of a cluster: participants, who has arrived, round number.

    Coordination barriers and SyncReplicasOptimizer rounds alike (see this
    module's docstring for how rounds are derived). ``cluster`` is a running
    ``LocalCluster`` or ``Server``, or pass ``source=``/``follower=``.

    >>> view = BarrierView(live=False)
    >>> print(view)
    BarrierView: no barrier yet
    """

    kinds = (
        "barrier_arrival",
        "barrier_passed",
        "barrier_timeout",
        "graph_registered",
        "step",
        "gradient_pushed",
        "take_started",
    )

    def __init__(
        self,
        cluster=None,
        *,
        source=None,
        follower=None,
        target=None,
        from_seq: int = 0,
        live: bool = True,
    ):
        self._state = BarrierState()
        super().__init__(
            cluster, source=source, follower=follower, target=target,
            from_seq=from_seq, live=live
        )

    @property
    def state(self) -> BarrierState:
        return self._state

    def __getitem__(self, barrier_id: str) -> BarrierRecord:
        with self._lock:
            return self._state.barriers[barrier_id]

    @property
    def barriers(self) -> dict:
        with self._lock:
            return dict(self._state.barriers)

    def _apply(self, event) -> bool:
        return self._state.apply(event)

    def _rows(self):
        return sorted(
            self._state.barriers.values(),
            key=lambda r: (r.kind != "SyncReplicas", r.barrier_id),
        )

    def _text(self) -> str:
        rows = self._rows()
        if not rows:
            return "BarrierView: no barrier yet"
        lines = [f"BarrierView: {len(rows)} barrier{'s' if len(rows) != 1 else ''}"]
        for r in rows:
            lines.append(f"  {r.barrier_id} ({r.kind}): {_rounds(r)}; {_next_round(r)}")
            lines.extend(f"    {line}" for line in round_lines(r))
        return "\n".join(lines)

    def _html(self) -> str:
        rows = self._rows()
        if not rows:
            return "<h4>Barriers <span class='muted'>· none yet</span></h4>"
        cards = "".join(_card(r) for r in rows)
        return (
            f"<h4>Barriers <span class='muted'>· {len(rows)}</span></h4>"
            f"<div style='display:flex;flex-wrap:wrap'>{cards}</div>"
        )


def _rounds(r: BarrierRecord) -> str:
    return f"{r.round} round{'s' if r.round != 1 else ''} completed"


def _needed(r: BarrierRecord) -> int:
    """Arrivals that complete a round: for a SyncReplicas barrier, the
    ``replicas_to_aggregate`` its take asks for (one worker may bring several:
    tokens are not tied to workers); for a coordination barrier, every
    participant."""
    if r.needed is not None:
        return r.needed
    return len(r.participants)


def _gathering(r: BarrierRecord) -> list[str]:
    """Who has arrived at the round being gathered, as drawn (text, bar and
    chips alike). Derived from step counts alone (no ``gradient_pushed``
    events), "everyone arrived" after a passed round cannot be told from a
    run that ended: nobody is shown then."""
    if (r.rounds is None and r.kind == "SyncReplicas" and r.status == "passed"
            and r.participants and len(r.arrived) >= len(r.participants)):
        return []
    return list(r.arrived)


def _next_round(r: BarrierRecord) -> str:
    """Where the round being gathered stands, e.g. "round 51: 1 of 2 arrived
    (worker:0), waiting for worker:1"; never more than the round needs."""
    arrived = _gathering(r)
    n, k = len(r.participants), len(arrived)
    need = _needed(r)
    line = f"round {r.round + 1}: "
    # "2 needed of 3" (a backup worker), "2 needed" (fewer workers seen yet
    # than the round takes), or just "2" (every participant).
    of = f"{n}" if need == n else f"{need} needed" + (f" of {n}" if need < n else "")
    if not k:
        line += f"none of {of} arrived yet"
    else:
        line += f"{k} of {of} arrived ({_names(arrived)})"
        if r.status != "timed out":
            missing = [t for t in r.participants if t not in arrived]
            if k >= need:
                line += ", releasing"
            elif need != n:
                line += f", waiting for {need - k} more" + (
                    f" of {_names(missing)}" if missing else "")
            else:
                line += f", waiting for {_names(missing)}"
    if r.status == "timed out":
        line += f"; TIMED OUT, never arrived: {', '.join(r.missing)}"
    return line


def _names(tasks, most: int = _CHIPS_AT) -> str:
    """ "worker:1, worker:2"; beyond ``most``, the first few and how many
    more: "worker:1, worker:2, worker:3, … (+28)"."""
    tasks = list(tasks)
    if len(tasks) > most:
        return ", ".join(tasks[:3]) + f", … (+{len(tasks) - 3})"
    return ", ".join(tasks)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def round_lines(r: BarrierRecord) -> list[str]:
    """What the accumulators saw of a SyncReplicas barrier: the last completed
    round (who arrived last, each worker's wait), the straggler, the stale
    gradients dropped and each worker's mean wait."""
    t = r.rounds
    if t is None or not t.done:
        return []
    last = t.done[-1]
    waits = _some(sorted(last.waits.items(), key=lambda kv: _task_key(kv[0])))
    if len(set(last.workers)) > 1:
        lines = [f"round {last.number}: {last.last} arrived last (waits: {waits})"]
    else:  # one fast worker took every token of the round (TF's semantics)
        lines = [f"round {last.number}: {last.last} alone (waits: {waits})"]
    counts, n = t.last_counts, sum(t.last_counts.values())
    alone = len(t.done) - n
    of = f"of {n} rounds" + (f" others waited in; {alone} by one worker alone"
                              if alone else "")
    who = t.straggler()
    if who is not None:
        lines.append(f"straggler: {who}, last in {counts[who]} {of}")
    elif n:
        lines.append("arrived last: " + _some(
            counts.most_common(), lambda k: f"{k}×") + f" ({of})")
    mean = t.mean_waits()
    lines.append("mean wait: " + _some(
        sorted(mean.items(), key=lambda kv: _task_key(kv[0]))))
    dropped = t.dropped
    if dropped:
        lines.append("stale gradients dropped: " + _some(
            sorted(dropped.items(), key=lambda kv: _task_key(kv[0])), str))
    return lines


def _some(items, fmt=_ms, most: int = _CHIPS_AT) -> str:
    """ "worker:0 12 ms, worker:1 3 ms"; beyond ``most`` (32 workers), the
    largest few and how many more: "worker:7 120 ms, ... (+29 more)"."""
    items = list(items)
    if len(items) > most:
        shown = sorted(items, key=lambda kv: -kv[1])[:3]
        return (", ".join(f"{w} {fmt(v)}" for w, v in shown)
                + f" (largest; +{len(items) - 3} more)")
    return ", ".join(f"{w} {fmt(v)}" for w, v in items)


def _round_grid(r: BarrierRecord) -> str:
    """An SVG: one row per worker, one column per completed round (the last
    40); green, darker the longer the worker waited; red: it arrived last;
    grey ✗: its gradient came too late and was dropped."""
    t = r.rounds
    if t is None or not t.done:
        return ""
    rounds = list(t.done)[-40:]
    workers = sorted({w for x in rounds for w in x.workers + x.dropped_workers}
                     | set(r.participants), key=_task_key)
    longest = max((s for x in rounds for s in x.waits.values()), default=0.0) or 1.0
    straggler = t.straggler()
    cells, size, left = [], 9, 64
    for i, w in enumerate(workers):
        y = i * (size + 2)
        weight = "bold" if w == straggler else "normal"
        fill = "#cf222e" if w == straggler else "#57606a"
        cells.append(f"<text x='0' y='{y + size - 1}' font-size='9' "
                     f"font-weight='{weight}' fill='{fill}'>{esc(w)}</text>")
        for j, x in enumerate(rounds):
            cx = left + j * (size + 1)
            waits = x.waits
            if w == x.last and len(set(x.workers)) > 1:
                colour, tip = "#cf222e", f"round {x.number}: {w} arrived last"
            elif w == x.last:  # nobody else came: its last gradient kept nobody
                colour, tip = "#1a7f37", f"round {x.number}: {w} alone"
            elif w in waits:
                shade = 0.25 + 0.75 * waits[w] / longest
                colour = f"rgba(26,127,55,{shade:.2f})"
                tip = f"round {x.number}: {w} waited {_ms(waits[w])}"
            elif w in x.dropped_workers:
                colour, tip = "#afb8c1", f"round {x.number}: {w}'s gradient dropped"
            else:
                colour, tip = "#eaeef2", f"round {x.number}: {w} not counted"
            cells.append(f"<rect x='{cx}' y='{y}' width='{size}' height='{size}' "
                         f"rx='1' fill='{colour}'><title>{esc(tip)}</title></rect>")
    width = left + len(rounds) * (size + 1)
    height = len(workers) * (size + 2)
    return (f"<div class='muted' style='font-size:11px'>per round (red: arrived "
            f"last, darker green: waited longer, grey: dropped)</div>"
            f"<svg class='nbdist-rounds' width='{width}' height='{height}' "
            f"xmlns='http://www.w3.org/2000/svg'>{''.join(cells)}</svg>")


def arrival_histogram(r: BarrierRecord, bins: int = 12) -> str:
    """An SVG: how the gradients of the last completed round arrived, as a
    histogram of their times after the round's first (what 32 chips cannot
    show: the spread, and the stragglers far to the right)."""
    t = r.rounds
    if t is None or not t.done:
        return ""
    last = t.done[-1]
    times = [w for _, w in last.arrivals]
    if not times:
        return ""
    first, span = min(times), max(times) - min(times)
    width = span / bins or 1e-3
    counts = [0] * bins
    for x in times:
        counts[min(bins - 1, int((x - first) / width))] += 1
    top, bar_w, h = max(counts), 18, 48
    bars = "".join(
        f"<rect class='nbdist-arrival-bin' data-count='{c}' x='{i * (bar_w + 2)}' "
        f"y='{h - round(h * c / top)}' width='{bar_w}' height='{round(h * c / top)}' "
        f"fill='#1a7f37'><title>{c} arrived {_ms(i * width)}–{_ms((i + 1) * width)} "
        f"after the first</title></rect>" for i, c in enumerate(counts))
    axis = (f"<text x='0' y='{h + 12}' font-size='10' fill='#59636e'>0</text>"
            f"<text x='{bins * (bar_w + 2)}' y='{h + 12}' font-size='10' "
            f"text-anchor='end' fill='#59636e'>{_ms(span)}</text>")
    return (f"<div class='muted' style='font-size:11px'>round {last.number}: "
            f"{len(times)} gradients arrived over {_ms(span)} (after the first)</div>"
            f"<svg class='nbdist-arrivals' width='{bins * (bar_w + 2)}' "
            f"height='{h + 14}' xmlns='http://www.w3.org/2000/svg'>{bars}{axis}</svg>")


def _card(r: BarrierRecord) -> str:
    # The bar, the chips and the line under the count all show the round
    # being gathered (what arrived of it); the last completed round has its
    # own line below, so the two never contradict each other.
    shown = _gathering(r)
    chips = []
    many = len(r.participants) > _CHIPS_AT
    for t in [] if many else r.participants:
        if t in shown:
            style, mark = "background:#dafbe1;border-color:#1a7f37", "✓ "
        elif t in r.missing:
            style, mark = "background:#ffebe9;border-color:#cf222e", "✗ "
        else:
            style, mark = "background:transparent", ""
        # The mark follows what has arrived of the round being gathered: measured.
        mark = f"<span class='nbdist-arrival-mark'>{mark}</span>" if mark else ""
        chips.append(f"<span class='chip' style='{style}'>{mark}{esc(t)}</span>")
    need, k = _needed(r), len(shown)
    frac = min(k / need, 1.0) if need else 0.0
    status = (
        " <b style='color:#cf222e'>· timed out</b>" if r.status == "timed out" else ""
    )
    strip = "".join(
        f"<rect x='{i * 7}' y='0' width='6' height='10' rx='1' fill='#1a7f37'>"
        f"<title>round {rnd}</title></rect>"
        for i, (rnd, _) in enumerate(r.history)
    )
    history = (
        f"<div class='muted' style='font-size:11px'>last rounds "
        f"<svg width='{max(7 * len(r.history), 1)}' height='10' "
        f"xmlns='http://www.w3.org/2000/svg'>{strip}</svg></div>"
        if r.history
        else ""
    )
    badge = "#8250df" if r.kind == "SyncReplicas" else "#0969da"
    return (
        f"<div class='nbdist-barrier' data-barrier='{esc(r.barrier_id)}' "
        f"data-needed='{need}' data-participants='{len(r.participants)}' "
        "style='border:1px solid #d0d7de;border-radius:6px;padding:6px 10px;"
        "margin:6px 8px 0 0;min-width:280px'>"
        f"<div><code>{esc(r.barrier_id)}</code> <span class='chip' style='color:#fff;"
        f"background:{badge};border-color:{badge}'>{esc(r.kind)}</span></div>"
        f"<div style='font-size:20px;font-weight:600'>{r.round} "
        f"<span style='font-size:13px;font-weight:400'>"
        f"{esc(_rounds(r).split(' ', 1)[1])}{status}</span></div>"
        f"<div class='muted nbdist-next-round'>{esc(_next_round(r))}</div>"
        f"<svg width='220' height='8' xmlns='http://www.w3.org/2000/svg'>"
        f"<rect width='220' height='8' rx='4' fill='#eaeef2'/>"
        f"<rect width='{round(220 * frac)}' height='8' rx='4' fill='#1a7f37'/></svg>"
        f"<div>{''.join(chips)}</div>{history}"
        f"{arrival_histogram(r) if many else ''}{_rounds_html(r, grid=not many)}</div>"
    )


def _rounds_html(r: BarrierRecord, grid: bool = True) -> str:
    lines = round_lines(r)
    if not lines:
        return ""
    items = "".join(f"<div class='nbdist-round-line'>{esc(x)}</div>" for x in lines)
    return (f"<div style='font-size:12px;margin-top:4px'>{items}</div>"
            + (_round_grid(r) if grid else ""))
