"""Collectives between the tasks of a cluster, keyed by group and instance as TF's
``CollectiveReduceV2``/``CollectiveGatherV2``/``CollectiveBcast*V2`` are.

Each task runs its own step (between-graph replication), so the tasks of a group
share no step id: an execution of a collective is named by ``(group_key,
instance_key, n)`` where ``n`` counts this task's runs of that instance (every
member runs it in the same order). Its chunks are left in the task's own
rendezvous under a synthetic step id derived from that name, and a peer pulls
them through the worker's ``TensorTransport.recv_collective``.

All-reduce (``collective_ring``) is a direct exchange for small tensors and two
members, else a ring (reduce-scatter, then all-gather) over the flattened
tensor, cut into pieces of ``SEGMENT_BYTES`` per member that run concurrently,
so a large tensor pipelines. Its chunks to a peer on this host are pushed and
reduced in place from the sender's shared memory (``ChunkMailbox``); every
chunk a member receives is a ``ChunkEvent`` (``subscribe_chunks``, and in a
traced step's stats). All-gather is a ring over whole tensors (concatenated on
axis 0); a broadcast is pulled from its source by every other member.

Failure: every wait honours the step's cancellation and deadline, and while a
collective runs a watchdog reads the group's task states from the coordination
service: a member that is DISCONNECTED, in ERROR or restarted cancels the step
with ``UnavailableError`` naming it. A collective that fails aborts its chunks,
so peers pulling from this task fail at once too.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from nbdist import errors
from nbdist.executor.rendezvous import make_key
from nbdist.runtime import collective_ring
from nbdist.runtime.collective_mailbox import ChunkMailbox

__all__ = ["DIRECT_BYTES", "SEGMENT_BYTES", "ChunkEvent", "CollectiveExecutor",
           "CollectiveGroup"]

SEGMENT_BYTES = 16 << 20  # one ring message per member and piece
DIRECT_BYTES = 256 << 10  # all-reduces sending at most this go direct, not round
_PIPELINE = 2  # pieces of one all-reduce in flight at once
_WATCH_S = 0.25  # how often the watchdog reads task states (no push API for one task)
_DEAD_STATES = ("DISCONNECTED", "ERROR")
_RECENT_CHUNKS = 4096
_MERGE = {"Add": np.add, "Mul": np.multiply, "Min": np.minimum, "Max": np.maximum}


@dataclass(frozen=True)
class CollectiveGroup:
    """The tasks of a collective group, in rank order, and this task's rank."""

    group_key: int
    members: tuple[str, ...]
    rank: int

    @property
    def size(self) -> int:
        return len(self.members)

    def right(self) -> str:
        return self.members[(self.rank + 1) % self.size]

    def left(self) -> str:
        return self.members[(self.rank - 1) % self.size]


class ChunkEvent(NamedTuple):
    """One chunk of an all-reduce, as its receiver consumed it: ``phase`` is
    ``"reduce-scatter"``, ``"all-gather"`` (ring step ``step``, 0-based, of
    pipelined piece ``piece``) or ``"direct"`` (small tensors: one exchange);
    ``start`` when the sender began sending it, ``end`` when it was reduced or
    copied into the receiver's result (``time.time()``, seconds)."""

    group_key: int
    instance_key: int
    run: int  # this member's n-th run of the instance
    phase: str
    step: int
    piece: int
    source: str
    destination: str
    nbytes: int
    start: float
    end: float


CHUNK_OP = "CollectiveChunk"  # the op type of chunks in a traced step's stats


def chunk_stat_name(node: str, e: ChunkEvent) -> str:
    """How a chunk is named in step stats (``parse_chunk_stat`` reads it back)."""
    return (f"{node} [{e.phase} {e.step} piece {e.piece}] {e.source} -> "
            f"{e.destination}")


def _device(task: str) -> str:
    return f"{task}/device:CPU:0"


def _exec_id(group_key: int, instance_key: int, n: int) -> int:
    digest = hashlib.blake2b(f"{group_key}/{instance_key}/{n}".encode(),
                             digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 2 | 1  # positive int64


class _Execution:
    """One run of one collective instance on this task."""

    def __init__(self, owner: CollectiveExecutor, step, group: CollectiveGroup,
                 instance_key: int, what: str):
        self.owner = owner
        self.step = step
        self.group = group
        self.what = (f"{what} (group {group.group_key}, instance {instance_key}) "
                     f"on {owner.task}")
        self.n = owner._next_run(group.group_key, instance_key)
        self.exec_id = _exec_id(group.group_key, instance_key, self.n)
        self.prefix = f"_collective/{group.group_key}/{instance_key}/{self.n}"
        self.incarnations: dict[str, int] = {}
        self.deadline: float | None = None  # the op's timeout_seconds
        self.instance_key = instance_key
        self.node = step.node_name  # the op running it (for its step stats)
        self._pushes: dict[str, bool] = {}

    def check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise errors.DeadlineExceededError(
                None, None, f"{self.what} timed out waiting for its group "
                f"{list(self.group.members)}")

    def key(self, src: str, dst: str, tag: str) -> str:
        inc = (self.owner.incarnation if src == self.owner.task
               else self.incarnations[src])
        return make_key(_device(src), inc, _device(dst), f"{self.prefix}/{tag}")

    def send(self, dst: str, tag: str, value) -> None:
        self.owner._rendezvous.send(self.exec_id, self.key(self.owner.task, dst, tag),
                                    value)

    def recv(self, src: str, tag: str) -> np.ndarray:
        key = self.key(src, self.owner.task, tag)
        return np.asarray(self.owner._transport.recv_collective(
            self.step, src, self.exec_id, key))

    def pushes(self, peer: str) -> bool:
        """Whether chunks to and from ``peer`` are pushed (same host)."""
        got = self._pushes.get(peer)
        if got is None:
            got = self._pushes[peer] = self.owner._transport.pushes_collectives(peer)
        return got

    def put(self, dst: str, tag: str, value: np.ndarray, into=None):
        """Sends an all-reduce chunk; returns what waits until ``dst`` has it.
        Pushed to a peer on this host (copied now: ``value`` may change
        after); else left here (a copy) for ``dst`` to pull. ``into`` (pushed
        only): a span of this member's shared result that ``dst`` writes its
        answer in before it answers (``collective_ring._halves``)."""
        if self.pushes(dst):
            finish = self.owner._transport.push_collective(
                self.step, dst, self.exec_id, self.key(self.owner.task, dst, tag),
                value, time.time(), into)
            if finish is None:  # the peer was here and is gone
                raise errors.UnavailableError(
                    None, None, f"{self.what} failed: task {dst} is no longer "
                    "reachable on this host")
            return finish
        self.send(dst, tag, np.array(value))
        return _nothing

    def take(self, src: str, tag: str, mine: np.ndarray, consume, phase: str,
             step: int, piece: int, answer: bool = False, moved: int | None = None):
        """``consume(chunk)`` of ``src``'s chunk ``tag`` (checked to be like
        ``mine``), read in place when pushed; publishes its ``ChunkEvent``
        (of ``moved`` bytes: default ``mine``'s). ``answer``:
        ``consume(chunk, into)``, ``into`` the span of ``src``'s result its push
        named (checked to be like ``mine`` too)."""
        key = self.key(src, self.owner.task, tag)
        start = time.time()

        def checked(value, meta):
            nonlocal start
            start = meta.get("t0") or start
            chunk = _like(self, src, value, mine)
            if not answer:
                return consume(chunk)
            into = meta.get("into")
            if into is None:
                raise errors.InternalError(
                    None, None, f"{self.what}: {src}'s chunk names no result to "
                    "answer into (its peer path shares no memory)")
            return consume(chunk, _like(self, src, into, mine))

        if self.pushes(src):
            result = self.owner.mailbox.take(self.step, self.exec_id, key, checked,
                                             f"{self.what}: a chunk from {src}")
        else:
            result = checked(self.recv(src, tag), {})
        self.owner._publish(self, ChunkEvent(
            self.group.group_key, self.instance_key, self.n, phase, step, piece,
            src, self.owner.task, int(mine.nbytes if moved is None else moved), start,
            time.time()))
        return result


class CollectiveExecutor:
    """Runs the collectives of one task (``Worker.collectives``).

    ``transport`` pulls peers' chunks; ``task_states(tasks)`` gives the
    coordination service's ``TaskRecord``s of ``tasks`` (liveness and
    incarnations). Without them only groups of one task can run.
    """

    def __init__(self, task: str, incarnation: int, rendezvous, transport=None,
                 task_states: Callable[[list[str]], list] | None = None):
        self.task = task
        self.incarnation = incarnation
        self._rendezvous = rendezvous
        self._transport = transport
        self._task_states = task_states
        self._lock = threading.Condition()
        self._runs: dict[tuple[int, int], itertools.count] = {}
        self._active: dict[int, _Execution] = {}
        self._watching = False
        self.mailbox = ChunkMailbox()  # chunks peers on this host pushed
        # (group, instance) -> its last large all-reduce result (collective_ring)
        self.result_buffers: dict[tuple[int, int], np.ndarray] = {}
        self._incarnations: dict[int, dict[str, int]] = {}  # group -> peers'

        self._chunk_subscribers: tuple = ()
        self.recent_chunks: collections.deque[ChunkEvent] = collections.deque(
            maxlen=_RECENT_CHUNKS)

    # -- chunk events ------------------------------------------------------------------
    def subscribe_chunks(self, fn: Callable[[ChunkEvent], None]) -> Callable[[], None]:
        """Calls ``fn(event)`` for every all-reduce chunk this task receives from
        now on (on the collective's thread: keep it quick); returns what
        unsubscribes it. ``recent_chunks`` keeps the last few thousand."""
        with self._lock:
            self._chunk_subscribers = (*self._chunk_subscribers, fn)

        def unsubscribe():
            with self._lock:
                subs = list(self._chunk_subscribers)
                if fn in subs:
                    subs.remove(fn)
                self._chunk_subscribers = tuple(subs)

        return unsubscribe

    def _publish(self, run: _Execution, event: ChunkEvent) -> None:
        self.recent_chunks.append(event)
        for fn in self._chunk_subscribers:
            fn(event)
        stats = run.step.stats
        if stats is not None:  # a traced step: the chunk shows in its RunMetadata
            stats.append((chunk_stat_name(run.node, event), CHUNK_OP,
                          _device(self.task), int(event.start * 1e6),
                          int(event.end * 1e6), [event.nbytes],
                          threading.get_ident() & 0xFFFFFFFF))

    # -- groups ------------------------------------------------------------------------
    def group(self, group_key: int, group_size: int, members, op: str
              ) -> CollectiveGroup:
        """The group of ``members`` (default: tasks 0..group_size-1 of this task's
        job) with this task's rank; InvalidArgumentError when they disagree."""
        if group_size < 1:
            raise errors.InvalidArgumentError(
                None, None, f"{op}: group_size must be >= 1, got {group_size}")
        if not members:
            job = self.task.split("/")[1]
            members = [f"/{job}/replica:0/task:{i}" for i in range(group_size)]
        members = tuple(members)
        if len(members) != group_size or len(set(members)) != group_size:
            raise errors.InvalidArgumentError(
                None, None, f"{op}: group {group_key} has group_size {group_size} "
                f"but members {list(members)}")
        if self.task not in members:
            raise errors.InvalidArgumentError(
                None, None, f"{op}: {self.task} is not a member of group {group_key} "
                f"({list(members)})")
        return CollectiveGroup(group_key, members, members.index(self.task))

    def _next_run(self, group_key: int, instance_key: int) -> int:
        with self._lock:
            counter = self._runs.setdefault((group_key, instance_key),
                                            itertools.count())
            return next(counter)

    # -- the collectives -----------------------------------------------------------------
    def all_reduce(self, step, value, group: CollectiveGroup, instance_key: int,
                   merge_op: str = "Add", final_op: str = "Id",
                   timeout_s: float | None = None,
                   communication_hint: str = "auto") -> np.ndarray:
        """The element-wise ``merge_op`` of every member's ``value``, then
        ``final_op`` (``Id``, or ``Div`` by the group size: the mean).
        ``communication_hint`` "ring" always runs the ring; otherwise the
        algorithm is chosen by size (``collective_ring.algorithm``)."""
        value = np.asarray(value)
        if merge_op not in _MERGE or final_op not in ("Id", "Div"):
            raise errors.InvalidArgumentError(
                None, None, f"CollectiveReduceV2: merge_op must be one of "
                f"{sorted(_MERGE)} and final_op Id or Div, got {merge_op!r}, "
                f"{final_op!r}")
        _check_numeric(value, "CollectiveReduceV2")
        if group.size > 1:
            merge = _MERGE[merge_op]
            run = self._start(step, group, instance_key, "all-reduce", timeout_s)
            with self._running(run):
                flat = collective_ring.all_reduce(
                    self, run, value.ravel(), merge, SEGMENT_BYTES, DIRECT_BYTES,
                    _PIPELINE, communication_hint)
            value = flat.reshape(value.shape)
        else:
            value = value.copy()
        if final_op == "Div":
            if np.issubdtype(value.dtype, np.integer):
                return np.fix(value / group.size).astype(value.dtype)
            return (value / group.size).astype(value.dtype)
        return value

    def all_gather(self, step, value, group: CollectiveGroup, instance_key: int,
                   timeout_s: float | None = None) -> np.ndarray:
        """Every member's ``value`` concatenated on axis 0, in rank order."""
        value = np.asarray(value)
        if value.ndim == 0:
            raise errors.InvalidArgumentError(
                None, None, "CollectiveGatherV2: the input must have rank >= 1 "
                "(gathered on axis 0), got a scalar")
        if group.size == 1:
            return value.copy()
        run = self._start(step, group, instance_key, "all-gather", timeout_s)
        n, r = group.size, group.rank
        parts: list = [None] * n
        parts[r] = value
        with self._running(run):
            for k in range(n - 1):
                run.send(group.right(), f"ag{k}", parts[(r - k) % n])
                parts[(r - k - 1) % n] = np.asarray(run.recv(group.left(), f"ag{k}"))
        if any(p.shape[1:] != value.shape[1:] or p.dtype != value.dtype
               for p in parts):
            raise errors.InvalidArgumentError(
                None, None, f"{run.what}: the members' tensors differ beyond axis "
                f"0: {[(p.shape, p.dtype.name) for p in parts]}")
        return np.concatenate(parts, axis=0)

    def broadcast_send(self, step, value, group: CollectiveGroup, instance_key: int,
                       timeout_s: float | None = None) -> np.ndarray:
        """Leaves ``value`` for every other member to pull; returns it."""
        value = np.asarray(value)
        if group.size > 1:
            run = self._start(step, group, instance_key, "broadcast", timeout_s)
            for dst in group.members:
                if dst != self.task:
                    run.send(dst, "bcast", value)
        return value.copy()

    def broadcast_recv(self, step, group: CollectiveGroup, instance_key: int,
                       source: str, shape, dtype, timeout_s: float | None = None
                       ) -> np.ndarray:
        """The value member ``source`` broadcast; checks its shape and dtype."""
        if source not in group.members or source == self.task:
            raise errors.InvalidArgumentError(
                None, None, f"CollectiveBcastRecvV2: the source {source!r} must be "
                f"another member of group {group.group_key} ({list(group.members)})")
        run = self._start(step, group, instance_key, "broadcast", timeout_s)
        with self._running(run):
            got = np.asarray(run.recv(source, "bcast"))
        if tuple(got.shape) != tuple(shape) or got.dtype != np.dtype(dtype):
            raise errors.InvalidArgumentError(
                None, None, f"{run.what}: {source} sent {got.dtype.name}"
                f"{list(got.shape)}, expected {np.dtype(dtype).name}{list(shape)}")
        return got

    # -- starting, liveness and failure ----------------------------------------------------
    def _start(self, step, group, instance_key, what, timeout_s) -> _Execution:
        if self._transport is None or self._task_states is None:
            raise errors.UnimplementedError(
                None, None, f"{what} on {self.task}: a group of {group.size} tasks "
                "needs a cluster (a server started with this task's ClusterSpec)")
        run = _Execution(self, step, group, instance_key, what)
        if timeout_s:
            run.deadline = time.monotonic() + timeout_s
        peers = [t for t in group.members if t != self.task]
        # Peers' incarnations name their chunks. Read once per group, as TF's
        # param resolver caches a group's devices (a read is an RPC to the
        # coordination service, ~0.3 ms of a small all-reduce's ~1 ms); the
        # watchdog finds a peer dead or restarted since, and a failed run
        # reads them again.
        with self._lock:
            known = self._incarnations.get(group.group_key)
        if known is not None and set(known) == set(peers):
            run.incarnations = dict(known)
            return run
        # A peer not yet registered is waited for (polled: the coordination
        # service has no push for one task).
        while True:
            records = {r.task: r for r in self._task_states(peers)}
            self._raise_if_dead(run, records.values())
            if all(records.get(t) and records[t].incarnation for t in peers):
                break
            run.check_deadline()
            wake = time.monotonic() + _WATCH_S
            step.wait(lambda wake=wake: time.monotonic() >= wake,
                      f"{run.what}: peers to register", time.sleep)
        run.incarnations = {t: records[t].incarnation for t in peers}
        with self._lock:
            self._incarnations[group.group_key] = dict(run.incarnations)
        return run

    def _raise_if_dead(self, run: _Execution, records) -> None:
        for rec in records:
            restarted = (rec.task in run.incarnations
                         and rec.incarnation != run.incarnations[rec.task])
            if rec.state in _DEAD_STATES or restarted:
                why = "restarted" if restarted else f"is {rec.state}"
                detail = f": {rec.error_message}" if rec.error_message else ""
                raise errors.UnavailableError(
                    None, None, f"{run.what} failed: task {rec.task} {why} "
                    f"(coordination service){detail}")

    def _running(self, run: _Execution):
        return _Running(self, run)

    def _watch(self):
        """While collectives run: cancels those with a dead member."""
        while True:
            with self._lock:
                if not self._active:
                    self._watching = False
                    return
                runs = list(self._active.values())
            tasks = sorted({t for r in runs for t in r.group.members if t != self.task})
            try:
                records = self._task_states(tasks)
            except errors.UnavailableError as e:  # the coordination service is gone
                for r in runs:
                    r.step.cancel(errors.UnavailableError(
                        None, None, f"{r.what} failed: {e.message}"))
                records = []
            except errors.OpError:  # one read cancelled or slow on a busy host:
                records = []  # read again next tick (deadlines still apply)
            for r in runs:
                try:
                    r.check_deadline()
                    self._raise_if_dead(
                        r, [x for x in records if x.task in r.group.members])
                except errors.OpError as e:
                    r.step.cancel(e)
            with self._lock:
                self._lock.wait(_WATCH_S)

    def _failed(self, run: _Execution, error: BaseException) -> BaseException:
        """The error to raise: a dead member named if there is one; peers pulling
        this execution's chunks get it too."""
        if isinstance(error, errors.OpError) and not isinstance(
                error, errors.UnavailableError):
            try:
                self._raise_if_dead(run, self._task_states(
                    [t for t in run.group.members if t != self.task]))
            except errors.UnavailableError as e:
                error = e
            except errors.OpError:
                pass
        if isinstance(error, errors.OpError):
            self._rendezvous.abort_step(run.exec_id, error)
            self.mailbox.abort(run.exec_id, error)
        with self._lock:  # the next run reads its peers' incarnations again
            self._incarnations.pop(run.group.group_key, None)
        return error

    def close(self):
        with self._lock:
            self.result_buffers.clear()


class _Running:
    """Registers an execution with the watchdog while it waits on peers."""

    def __init__(self, owner: CollectiveExecutor, run: _Execution):
        self.owner, self.run = owner, run

    def __enter__(self):
        owner = self.owner
        with owner._lock:
            owner._active[id(self.run)] = self.run
            start = not owner._watching
            owner._watching = True
        if start:
            threading.Thread(target=owner._watch, daemon=True,
                             name=f"nbdist-collective-watch{owner.task}").start()
        return self.run

    def __exit__(self, kind, error, tb):
        with self.owner._lock:
            self.owner._active.pop(id(self.run), None)
            self.owner._lock.notify_all()
        if error is not None:
            raised = self.owner._failed(self.run, error)
            if raised is not error:
                raise raised from error
        return False


def _check_numeric(value: np.ndarray, op: str) -> None:
    if value.dtype == object or value.dtype.kind not in "biuf":
        raise errors.InvalidArgumentError(
            None, None, f"{op}: expected a numeric tensor, got {value.dtype}")


def _like(run: _Execution, src: str, got: np.ndarray, mine: np.ndarray) -> np.ndarray:
    """``got`` from ``src``, checked to match this member's ``mine``."""
    if got.shape != mine.shape or got.dtype != mine.dtype:
        raise errors.InvalidArgumentError(
            None, None, f"{run.what}: {src} sent {got.dtype.name}{list(got.shape)} "
            f"where this member has {mine.dtype.name}{list(mine.shape)}: the "
            "members' tensors must have the same shape and dtype")
    return got



class _Left:
    """``put``'s answer for a chunk left to pull: nothing to wait for."""

    def __call__(self):
        return None

    def abandon(self):
        pass


_nothing = _Left()
