"""Rounds of a ``SyncReplicasOptimizer`` as its accumulators saw them: who
arrived when, who arrived last, how long each worker waited, whose stale
gradients were dropped.

Each push of a gradient to a ``ConditionalAccumulator`` publishes a
``gradient_pushed`` event (task, step id, local step, accepted or dropped,
time). A worker's step id names the worker once its own partition's
``step`` event comes (``names``). A push with local
step ``L`` that was accepted arrived for round ``L + 1`` (the update that
takes the global step from ``L`` to ``L + 1``); a dropped one was stale. A
round is complete when the chief's aggregation step ends (``complete_oldest``,
called by ``BarrierState`` on that ``step`` event): then its last accepted
arrival is who the others waited for.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

__all__ = ["PendingPushes", "RoundStat", "RoundTracker"]

_PENDING_MAX = 4096
_ROUNDS_KEPT = 400


@dataclass
class RoundStat:
    """One round: ``number`` (the global step it produces), ``arrivals``
    [(step id, wall time)] of its accepted gradients in order of arrival,
    ``dropped`` [step id] of stale gradients meant for it; ``names`` maps a
    step id to its worker once known."""

    number: int
    names: dict
    arrivals: list = field(default_factory=list)
    dropped: list = field(default_factory=list)

    def _name(self, step_id) -> str:
        return self.names.get(step_id, "?")

    @property
    def workers(self) -> list[str]:
        """The workers in order of arrival (one may come twice: tokens are
        not tied to workers, as in TF)."""
        return [self._name(s) for s, _ in self.arrivals]

    @property
    def last(self) -> str:
        """Who the others waited for: the last accepted arrival."""
        return self._name(self.arrivals[-1][0]) if self.arrivals else ""

    @property
    def waits(self) -> dict[str, float]:
        """Seconds each worker waited from its gradient's arrival to the
        round's last arrival (0 for the last)."""
        if not self.arrivals:
            return {}
        end = self.arrivals[-1][1]
        out: dict = {}
        for step_id, t in self.arrivals:
            w = self._name(step_id)
            out[w] = max(out.get(w, 0.0), end - t)
        return out

    @property
    def dropped_workers(self) -> list[str]:
        return [self._name(s) for s in self.dropped]


class RoundTracker:
    """The rounds of one SyncReplicas barrier, from its ``gradient_pushed``
    events."""

    def __init__(self):
        self.names: dict = {}  # step id -> worker
        self.open: dict[int, RoundStat] = {}  # rounds gathering, by number
        self._done: collections.deque = collections.deque(maxlen=_ROUNDS_KEPT)
        self._dropped: collections.deque = collections.deque(maxlen=_PENDING_MAX)
        # Rounds the chief applied whose arrivals may still be coming: the
        # tasks publish concurrently, so the last push's event can follow the
        # aggregation step's. Settled once a later round is gathering.
        self._applied = 0
        self.rounds_completed = 0

    def _round(self, number: int) -> RoundStat:
        r = self.open.get(number)
        if r is None:
            r = self.open[number] = RoundStat(number, self.names)
        return r

    def push(self, step_id, payload: dict) -> None:
        number = int(payload.get("local_step", 0)) + 1
        when = float(payload.get("time", 0.0))
        if payload.get("dropped"):
            self._dropped.append(step_id)
            for r in reversed(self.done):
                if r.number == number:
                    r.dropped.append(step_id)
                    break
            return
        r = self._round(number)
        r.arrivals.append((step_id, when))
        r.arrivals.sort(key=lambda a: a[1])
        self._settle()

    def _settle(self) -> None:
        """Moves applied rounds to ``done`` once a later round gathers."""
        while self._applied and len(self.open) > 1:
            self._applied -= 1
            self._done.append(self.open.pop(min(self.open)))

    def name(self, step_id, worker: str) -> None:
        self.names[step_id] = worker
        if len(self.names) > _PENDING_MAX:
            self.names.pop(next(iter(self.names)))

    def complete_oldest(self) -> None:
        """The oldest gathering round is complete (the chief applied it)."""
        self.rounds_completed += 1
        self._applied += 1
        self._settle()

    @property
    def done(self) -> list[RoundStat]:
        """The completed rounds, oldest first (the last few hundred)."""
        applied = sorted(self.open)[:self._applied]
        return list(self._done) + [self.open[n] for n in applied]

    def gathering(self) -> RoundStat | None:
        """The round being gathered (the oldest not applied), or None."""
        waiting = sorted(self.open)[self._applied:]
        return self.open[waiting[0]] if waiting else None

    def arrived(self) -> list[str]:
        r = self.gathering()
        seen: list[str] = []
        for w in r.workers if r else ():
            if w not in seen:
                seen.append(w)
        return seen

    @property
    def dropped(self) -> collections.Counter:
        """Stale gradients dropped, per worker."""
        return collections.Counter(self.names.get(s, "?") for s in self._dropped)

    @property
    def last_counts(self) -> collections.Counter:
        """Completed rounds each worker arrived last at, of the rounds others
        waited in: one a single worker filled alone (a fast worker may take
        every token of a round, as in TF) waited for nobody else."""
        return collections.Counter(r.last for r in self.done
                                   if len(set(r.workers)) > 1)

    def mean_waits(self) -> dict[str, float]:
        """Each worker's mean wait over the completed rounds it arrived at."""
        total: collections.Counter = collections.Counter()
        count: collections.Counter = collections.Counter()
        for r in self.done:
            for w, s in r.waits.items():
                total[w] += s
                count[w] += 1
        return {w: total[w] / count[w] for w in count}

    def straggler(self) -> str | None:
        """The worker last in most completed rounds others waited in (at
        least three quarters of them)."""
        counts = self.last_counts
        n = sum(counts.values())
        if not n:
            return None
        worker, k = counts.most_common(1)[0]
        return worker if 4 * k >= 3 * n and n >= 3 else None


class PendingPushes:
    """Step ids already counted (a step pushes to every accumulator: its first
    push counts), bounded."""

    def __init__(self):
        self._seen: collections.OrderedDict = collections.OrderedDict()

    def first(self, step_id) -> bool:
        if step_id in self._seen:
            return False
        self._seen[step_id] = True
        if len(self._seen) > _PENDING_MAX:
            self._seen.popitem(last=False)
        return True
