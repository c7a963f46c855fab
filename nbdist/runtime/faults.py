"""``Faults``: stragglers and cut links, injected by a task into its own calls.

Each task's ``runtime.router.PeerRouter`` holds one ``Faults`` (off: no rule,
one check of an empty tuple per call). Its rules, set through the worker
service's ``SetFaults`` call (``WorkerHandler.set_faults``; what
``%cluster slow/partition/heal`` send), act where every call to a peer
passes, whatever its transport (gRPC, same-host, in-process):

* ``FaultRule("slow", "", 0.02)``: every call this task makes to any peer,
  and every step it serves, waits 20 ms first (a straggler);
* ``FaultRule("slow", "/job:ps/replica:0/task:0", 0.005)``: only the calls
  to that peer (one link; set on both ends for both directions);
* ``FaultRule("partition", "/job:ps/replica:0/task:0")``: calls to that peer
  fail at once with ``UnavailableError``, as on a cut link (set on both ends).

No root, no ``tc``: delays are sleeps in the calling thread, a partition an
error before anything is sent.

Rules are the cluster owner's instrument: ``replace`` takes the caller's
owner credential and refuses any other with ``PermissionDeniedError`` (the
credential is ``NBDIST_FAULT_OWNER`` of the process that started the tasks,
apart from the data token; ``owner_credential()`` is this process's). A task
holds at most ``MAX_RULES`` rules, and a call waits at most ``MAX_DELAY_S``
whatever the rules add up to.

>>> faults = Faults("/job:worker/replica:0/task:1")
>>> faults.active
False
>>> faults.set([FaultRule("partition", "/job:ps/replica:0/task:0")])
[FaultRule(kind='partition', peer='/job:ps/replica:0/task:0', delay_s=0.0)]
>>> faults.before_call("/job:ps/replica:0/task:0")
Traceback (most recent call last):
...
nbdist.errors.UnavailableError: /job:ps/replica:0/task:0 is unreachable from /job:worker/replica:0/task:1: the link between them is cut (a partition injected with %cluster partition; %cluster heal restores it)
>>> faults.set([])
[]
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from typing import NamedTuple

from nbdist import errors
from nbdist.runtime import env

__all__ = ["FAULT_KINDS", "MAX_DELAY_S", "MAX_RULES", "FaultRule", "Faults",
           "owner_credential"]

FAULT_KINDS = ("slow", "partition")
MAX_DELAY_S = 10.0  # a slowdown is an instrument, not a hang: per call, all rules
MAX_RULES = 64  # two per link of a 32-task cluster; more is a flood, not a test
_MAX_PEER_CHARS = 256
_process_owner = secrets.token_hex(16)  # this process's, unless it was given one


def owner_credential() -> str:
    """The owner credential this process holds: ``NBDIST_FAULT_OWNER``, else
    one made for this process (handed to the tasks it starts)."""
    return env.get(env.FAULT_OWNER) or _process_owner


class FaultRule(NamedTuple):
    kind: str  # "slow" or "partition"
    peer: str = ""  # a full task name; "" = every peer (slow only)
    delay_s: float = 0.0  # slow only


def _checked(rule) -> FaultRule:
    rule = FaultRule(str(rule[0]), str(rule[1]) if len(rule) > 1 else "",
                     float(rule[2]) if len(rule) > 2 else 0.0)
    if rule.kind not in FAULT_KINDS:
        raise errors.InvalidArgumentError(
            None, None, f"Unknown fault kind '{rule.kind}': expected one of "
            f"{', '.join(FAULT_KINDS)}")
    if rule.kind == "slow" and not 0.0 < rule.delay_s <= MAX_DELAY_S:
        raise errors.InvalidArgumentError(
            None, None, f"A slowdown must be more than 0 and at most "
            f"{MAX_DELAY_S:g} s; got {rule.delay_s:g} s")
    if len(rule.peer) > _MAX_PEER_CHARS:
        raise errors.InvalidArgumentError(
            None, None, f"A fault's peer is a task name; got {len(rule.peer)} "
            "characters")
    if rule.kind == "partition" and not rule.peer:
        raise errors.InvalidArgumentError(
            None, None, "A partition cuts the link to one peer: name the peer")
    if rule.kind == "partition":
        rule = rule._replace(delay_s=0.0)
    return rule


class Faults:
    """The faults one task injects into its calls to its peers (none at first)."""

    def __init__(self, own_task: str = "", owner: str | None = None):
        self.own_task = own_task
        self._owner = (owner or owner_credential()).encode()
        self._rules: tuple[FaultRule, ...] = ()
        self._lock = threading.RLock()
        self.calls_delayed = 0
        self.calls_failed = 0

    @property
    def active(self) -> bool:
        return bool(self._rules)

    @property
    def rules(self) -> list[FaultRule]:
        return list(self._rules)

    def set(self, rules) -> list[FaultRule]:
        """Replaces every rule (``[]`` heals); returns the rules now in force.

        Raises:
          InvalidArgumentError: for an unknown kind, a delay outside
            ``(0, MAX_DELAY_S]`` or a partition without a peer.
        """
        rules = list(rules)
        if len(rules) > MAX_RULES:
            raise errors.InvalidArgumentError(
                None, None, f"A task holds at most {MAX_RULES} fault rules; got "
                f"{len(rules)}")
        checked = tuple(_checked(r) for r in rules)
        with self._lock:
            self._rules = checked
        return list(checked)

    def replace(self, rules, owner: str) -> tuple[list[FaultRule], list[FaultRule]]:
        """``set(rules)`` for the cluster's owner: ``(now in force, removed)``.

        Raises:
          PermissionDeniedError: ``owner`` is not the cluster's owner credential.
          InvalidArgumentError: as ``set``.
        """
        if not hmac.compare_digest(str(owner or "").encode(), self._owner):
            raise errors.PermissionDeniedError(
                None, None, f"SetFaults on {self.own_task or 'this task'}: only the "
                "cluster's owner may set or clear fault rules (the process that "
                "started the cluster holds its owner credential, NBDIST_FAULT_OWNER)")
        with self._lock:
            before = list(self._rules)
            now = self.set(rules)
        return now, before

    def check_link(self, peer: str) -> None:
        """Raises ``UnavailableError`` if the link to ``peer`` is cut."""
        for r in self._rules:
            if r.kind == "partition" and r.peer == peer:
                self.calls_failed += 1
                raise errors.UnavailableError(
                    None, None, f"{peer} is unreachable from {self.own_task}: the "
                    "link between them is cut (a partition injected with %cluster "
                    "partition; %cluster heal restores it)")

    def before_call(self, peer: str) -> None:
        """Called before this task sends a call to ``peer``: raises as a cut
        link does, or waits as a slow one."""
        if not self._rules:
            return
        self.check_link(peer)
        delay = self.delay_of(peer)
        if delay:
            self.calls_delayed += 1
            time.sleep(delay)

    def delay_of(self, peer: str) -> float:
        """The delay of a call to ``peer`` (partitions are not checked)."""
        total = sum(r.delay_s for r in self._rules
                    if r.kind == "slow" and (not r.peer or r.peer == peer))
        return min(MAX_DELAY_S, total)

    def before_serving(self) -> None:
        """Called before this task serves a step: a slowed task (a rule
        without a peer) is slow at everything it does."""
        rules = self._rules
        if not rules:
            return
        delay = min(MAX_DELAY_S,
                    sum(r.delay_s for r in rules if r.kind == "slow" and not r.peer))
        if delay:
            self.calls_delayed += 1
            time.sleep(delay)
