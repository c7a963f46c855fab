"""Collectives between the tasks of a cluster, keyed by group and instance as TF's
``CollectiveReduceV2``/``CollectiveGatherV2``/``CollectiveBcast*V2`` are.

Each task runs its own step (between-graph replication), so the tasks of a group
share no step id: an execution of a collective is named by ``(group_key,
instance_key, n)`` where ``n`` counts this task's runs of that instance (every
member runs it in the same order). Its chunks are left in the task's own
rendezvous under a synthetic step id derived from that name, and a peer pulls
them through the worker's ``TensorTransport.recv_collective``.

All-reduce is a ring (reduce-scatter, then all-gather) over the flattened tensor,
cut into pieces of ``SEGMENT_BYTES`` per member that run concurrently, so a large
tensor pipelines. All-gather is a ring over whole tensors (concatenated on axis
0); a broadcast is pulled from its source by every other member.

Failure: every wait honours the step's cancellation and deadline, and while a
collective runs a watchdog reads the group's task states from the coordination
service: a member that is DISCONNECTED, in ERROR or restarted cancels the step
with ``UnavailableError`` naming it. A collective that fails aborts its chunks,
so peers pulling from this task fail at once too.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from nbdist import errors
from nbdist.executor.rendezvous import make_key

__all__ = ["DIRECT_BYTES", "SEGMENT_BYTES", "CollectiveExecutor", "CollectiveGroup"]

SEGMENT_BYTES = 4 << 20  # one ring message per member and piece
DIRECT_BYTES = 256 << 10  # all-reduces sending at most this go direct, not round
_PIPELINE = 4  # pieces of one all-reduce in flight at once
_WATCH_S = 0.25  # how often the watchdog reads task states (no push API for one task)
_DEAD_STATES = ("DISCONNECTED", "ERROR")
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
        self._pool: ThreadPoolExecutor | None = None

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
                   timeout_s: float | None = None) -> np.ndarray:
        """The element-wise ``merge_op`` of every member's ``value``, then
        ``final_op`` (``Id``, or ``Div`` by the group size: the mean)."""
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
                flat = self._ring_all_reduce(run, value.ravel(), merge)
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

    # -- the all-reduce algorithms -----------------------------------------------------
    def _ring_all_reduce(self, run: _Execution, flat: np.ndarray, merge):
        """``flat`` reduced across the group: small tensors by a direct exchange
        (one round instead of the ring's 2(N-1)), others by the ring, in pieces
        of ``SEGMENT_BYTES`` per member pipelined on the pool. The result is
        written once into a fresh buffer; what is sent on is the input's own
        segments or buffers just received (reduced in place), never the
        result, so a peer still pulling never sees it change."""
        n = run.group.size
        out = np.empty_like(flat)
        if flat.nbytes * (n - 1) <= DIRECT_BYTES:
            self._direct_all_reduce(run, flat, out, merge)
            return out
        per_piece = max(1, SEGMENT_BYTES // max(1, flat.itemsize)) * n
        bounds = range(0, flat.size, per_piece)
        if len(bounds) == 1:
            self._ring_piece(run, 0, flat, out, merge)
        else:
            self._map_pieces(run, [(i, flat[b:b + per_piece], out[b:b + per_piece],
                                    merge) for i, b in enumerate(bounds)])
        return out

    def _direct_all_reduce(self, run: _Execution, flat, out, merge) -> None:
        """Every member sends its tensor to every other and reduces them all in
        rank order, so every member computes the same bits."""
        g = run.group
        for dst in g.members:
            if dst != self.task:
                run.send(dst, "direct", flat)
        first = True
        for src in g.members:
            part = flat if src == self.task else _like(
                run, src, run.recv(src, "direct"), flat)
            if first:
                np.copyto(out, part)
                first = False
            else:
                merge(out, part, out=out)

    def _map_pieces(self, run, pieces) -> None:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    _PIPELINE, thread_name_prefix=f"nbdist-collective{self.task}")
            pool = self._pool
        futures = [pool.submit(self._ring_piece, run, *p) for p in pieces]
        try:
            for f in futures:
                f.result()
        except Exception as e:
            error = e if isinstance(e, errors.OpError) else errors.InternalError(
                None, None, f"{run.what}: {type(e).__name__}: {e}")
            run.step.cancel(error)  # the other pieces stop waiting
            for f in futures:
                f.exception()
            raise

    def _ring_piece(self, run: _Execution, piece: int, data: np.ndarray,
                    out: np.ndarray, merge) -> None:
        """Reduce-scatter then all-gather of ``data`` into ``out``: at step k a
        member sends one segment right and receives one from the left, merged
        in place into the buffer it arrived in, which is what it sends next."""
        g = run.group
        n, r = g.size, g.rank
        cuts = [len(data) * j // n for j in range(n + 1)]
        right, left = g.right(), g.left()
        moving = data[cuts[r]:cuts[r + 1]]  # the input's own segment r goes first
        for k in range(n - 1):  # reduce-scatter: segment r+1 ends complete here
            run.send(right, f"p{piece}rs{k}", moving)
            i = (r - k - 1) % n
            own = data[cuts[i]:cuts[i + 1]]
            got = _like(run, left, run.recv(left, f"p{piece}rs{k}"), own)
            moving = merge(got, own, out=got) if got.flags.writeable else merge(
                got, own)
        i = (r + 1) % n
        out[cuts[i]:cuts[i + 1]] = moving
        for k in range(n - 1):  # all-gather of the complete segments
            run.send(right, f"p{piece}ag{k}", moving)
            i = (r - k) % n
            moving = _like(run, left, run.recv(left, f"p{piece}ag{k}"),
                           out[cuts[i]:cuts[i + 1]])
            out[cuts[i]:cuts[i + 1]] = moving

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
        # Peers' incarnations name their chunks; a peer not yet registered is waited
        # for (polled: the coordination service has no push for one task).
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
        return error

    def close(self):
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


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

