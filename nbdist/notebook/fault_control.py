"""Stragglers and cut links on a cluster this notebook owns: the code behind
``%cluster slow/partition/heal`` and the fault buttons of ``ClusterView``.

Each command sends the affected tasks their new rules through the worker
service's ``SetFaults`` call (``runtime.faults``: a delay or an
``UnavailableError`` injected where every call between tasks passes, whatever
its transport). Faults are off until set, and refused on a cluster attached
with ``%cluster connect`` (its processes are not this notebook's).

>>> parse_delay("20ms"), parse_delay("0.5s"), parse_delay("5")
(0.02, 0.5, 0.005)
"""

from __future__ import annotations

import re
import weakref

from nbdist import errors
from nbdist.notebook.control import ClusterCommandError, parse_task
from nbdist.runtime import transports
from nbdist.runtime.cluster_spec import task_device
from nbdist.runtime.faults import MAX_DELAY_S, FaultRule

__all__ = ["active_faults", "describe_faults", "heal", "parse_delay", "partition",
           "slow"]

_DELAY_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)?\s*$")
# The rules this notebook set on each cluster: {cluster: {task name: [rules]}}.
_set: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def parse_delay(text: str) -> float:
    """``"20ms"``, ``"0.02s"`` or ``"20"`` (milliseconds) -> seconds."""
    m = _DELAY_RE.match(str(text))
    if not m:
        raise ClusterCommandError(
            f"'{text}' is not a delay: write it as 20ms or 0.5s")
    value = float(m.group(1)) / (1.0 if m.group(2) == "s" else 1000.0)
    if not 0.0 < value <= MAX_DELAY_S:
        raise ClusterCommandError(
            f"a slowdown must be more than 0 and at most {MAX_DELAY_S:g} s; "
            f"got {text}")
    return value


def _owned(cluster, action: str):
    if cluster is None:
        raise ClusterCommandError(
            "no cluster is running: start one with %cluster start")
    if not getattr(cluster, "owned", True):
        raise ClusterCommandError(f"{action} is {cluster.not_owned_reason}")
    if not hasattr(cluster, "cluster_spec"):
        raise ClusterCommandError(f"{type(cluster).__name__} has no tasks to {action}")
    return cluster


def _token(cluster):
    config = getattr(cluster, "_config", None)
    token = getattr(config, "auth_token", "") if config is not None else ""
    return token or getattr(cluster, "_token", None) or None


def _protocol(cluster) -> str | None:
    server_def = getattr(cluster, "server_def", None)
    return (server_def.protocol or None) if server_def is not None else None


def _send(cluster, job: str, index: int, rules, removed: list | None = None) -> None:
    """Sets ``job:index``'s rules as the cluster's owner (the client sends this
    process's owner credential); the rules replaced go to ``removed``."""
    address = cluster.cluster_spec.task_address(job, index)
    client = transports.connect_worker(task_device(job, index), address,
                                       token=_token(cluster),
                                       protocol_name=_protocol(cluster))
    try:
        client.set_faults([tuple(r) for r in rules], removed)
    finally:
        client.close()


_by_id: dict = {}  # clusters that cannot be weakly referenced, by id


def _table(cluster) -> dict:
    try:
        table = _set.get(cluster)
        if table is None:
            table = _set[cluster] = {}
    except TypeError:
        table = _by_id.setdefault(id(cluster), {})
    return table


def active_faults(cluster) -> dict[str, list[FaultRule]]:
    """``{"worker:1": [FaultRule(...)], ...}``: what this notebook injected."""
    return {k: list(v) for k, v in _table(cluster).items() if v}


def _update(cluster, task: str, keep, add: FaultRule | None):
    job, index = parse_task(task, cluster)
    name = f"{job}:{index}"
    table = _table(cluster)
    rules = [r for r in table.get(name, []) if keep(r)]
    if add is not None:
        rules.append(add)
    _send(cluster, job, index, rules)
    table[name] = rules


def _ms(delay_s: float) -> str:
    return f"{delay_s * 1000:g} ms"


def slow(cluster, task: str, delay: str | float, peer: str | None = None) -> str:
    """Slows ``task`` (``"worker:1"``): each call it makes and each step it
    serves waits ``delay`` first; with ``peer``, only the messages between
    the two (both directions). Returns a line saying what happened."""
    cluster = _owned(cluster, "slow")
    delay_s = parse_delay(delay) if isinstance(delay, str) else float(delay)
    job, index = parse_task(task, cluster)
    if peer is None:
        _update(cluster, task, lambda r: not (r.kind == "slow" and not r.peer),
                FaultRule("slow", "", delay_s))
        return (f"slowed {job}:{index} by {_ms(delay_s)} (every call it makes, "
                "every step it serves)")
    pjob, pindex = parse_task(peer, cluster)
    a, b = task_device(job, index), task_device(pjob, pindex)
    _update(cluster, task, lambda r: not (r.kind == "slow" and r.peer == b),
            FaultRule("slow", b, delay_s))
    _update(cluster, peer, lambda r: not (r.kind == "slow" and r.peer == a),
            FaultRule("slow", a, delay_s))
    return f"slowed the link {job}:{index} ↔ {pjob}:{pindex} by {_ms(delay_s)}"


def partition(cluster, task: str, peer: str) -> str:
    """Cuts the link between ``task`` and ``peer``: their calls to each other
    fail with ``UnavailableError`` until ``heal``."""
    cluster = _owned(cluster, "partition")
    job, index = parse_task(task, cluster)
    pjob, pindex = parse_task(peer, cluster)
    if (job, index) == (pjob, pindex):
        raise ClusterCommandError("a partition is between two different tasks")
    a, b = task_device(job, index), task_device(pjob, pindex)
    _update(cluster, task, lambda r: r.peer != b or r.kind != "partition",
            FaultRule("partition", b))
    _update(cluster, peer, lambda r: r.peer != a or r.kind != "partition",
            FaultRule("partition", a))
    return f"cut the link {job}:{index} ↔ {pjob}:{pindex} (calls fail: Unavailable)"


def heal(cluster) -> str:
    """Asks every task of ``cluster`` to drop all its fault rules (whoever set
    them, whatever this notebook remembers); says what was removed."""
    cluster = _owned(cluster, "heal")
    spec = cluster.cluster_spec
    table = _table(cluster)
    removed_by_task: dict[str, list[FaultRule]] = {}
    failed = []
    for job in spec.jobs:
        for index in spec.task_indices(job):
            removed: list = []
            try:
                _send(cluster, job, index, [], removed)
            except errors.OpError as e:
                failed.append(f"{job}:{index} ({e.message.splitlines()[0]})")
                continue
            table.pop(f"{job}:{index}", None)
            if removed:
                removed_by_task[f"{job}:{index}"] = [FaultRule(*r) for r in removed]
    said = describe_faults(removed_by_task)
    lines = [f"healed: removed {'; '.join(said)} (no fault left)" if said
             else "no fault to heal"]
    if failed:
        lines.append(f"not reached: {', '.join(failed)}")
    return "\n".join(lines)


def describe_faults(table: dict) -> list[str]:
    """The faults of ``{task: [FaultRule]}`` in words, a link's two rules
    once: ["worker:2 slowed by 20 ms", "link worker:0 ↔ ps:0 cut"]."""
    from nbdist.notebook.live_view import short_task
    from nbdist.notebook.timeline_model import task_key

    out: list[str] = []
    for task in sorted(table, key=task_key):
        for r in table[task]:
            if not r.peer:
                out.append(f"{task} slowed by {_ms(r.delay_s)}")
                continue
            a, b = sorted((task, short_task(r.peer)), key=task_key)
            what = (f"link {a} ↔ {b} slowed by {_ms(r.delay_s)}" if r.kind == "slow"
                    else f"link {a} ↔ {b} cut")
            if what not in out:
                out.append(what)
    return out
