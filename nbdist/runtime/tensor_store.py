"""Tensors a task holds for others to take by reference, whatever the transport.

``ParkedTensors``: large values this task hands out by reference (a fetch or a
cross-task feed too big for one message); the other side pulls them through its
``TensorTransport``. ``PushedTensors``: large client feeds pushed ahead of the
step that names them. Both are dropped after ``ttl_s`` if nobody comes, so a
client that goes away leaves nothing behind; with ``limits`` (a server's
``executor.limits.Limits``) what they hold is capped: parked bytes in total
(``max_parked_bytes``), pushed bytes per client and in total
(``max_pushed_bytes_per_client``, ``max_pushed_bytes``). Going over a cap is
``ResourceExhaustedError`` naming it; what is already held stays, except that
parked values nobody pulled within ``evict_after_s`` make room first (a
receiver pulls within moments of the answer that names them).
"""

from __future__ import annotations

import collections
import random
import threading
import time
from typing import NamedTuple

from nbdist import errors
from nbdist.executor.limits import Limits, over_limit
from nbdist.executor.rendezvous import make_key

PARK_TTL_S = 300.0
PARK_EVICT_AFTER_S = 30.0
_CLIENT_TASK = "/job:client/replica:0/task:0"


def _nbytes(value) -> int:
    return int(getattr(value, "nbytes", 0))


class _Parked(NamedTuple):
    time: float
    step_id: int
    key: str
    nbytes: int


class ParkedTensors:
    """Values parked in a task's ``rendezvous`` under step ids of their own,
    keyed as sent from ``device`` (the task's first) of ``incarnation``.
    Made before the task's ``Worker`` when its peer clients park too (the
    server's large feeds to peers); the worker then uses this ``rendezvous``.
    An ``interfaces.TensorParking``."""

    def __init__(
        self,
        device: str,
        incarnation: int,
        rendezvous,
        ttl_s: float = PARK_TTL_S,
        limits: Limits | None = None,
        evict_after_s: float = PARK_EVICT_AFTER_S,
    ):
        self.device = device
        self.incarnation = incarnation
        self.rendezvous = rendezvous
        self._ttl_s = ttl_s
        self._evict_after_s = evict_after_s
        self._limits = limits
        self._lock = threading.Lock()
        self._parked: collections.deque[_Parked] = collections.deque()

    def park(self, value) -> tuple[str, int]:
        """Parks ``value``; returns the (rendezvous key, step id) to pull it."""
        rdv = self.rendezvous
        step_id = random.getrandbits(62) | 1
        key = make_key(self.device, self.incarnation, _CLIENT_TASK,
                       f"_park/{step_id:x}")
        now = time.monotonic()
        nbytes = _nbytes(value)
        stale: list[int] = []
        try:
            with self._lock:
                while self._parked and self._parked[0].time < now - self._ttl_s:
                    stale.append(self._parked.popleft().step_id)
                if self._limits is not None:
                    self._make_room(now, nbytes, stale)
                self._parked.append(_Parked(now, step_id, key, nbytes))
                # Held before another park's _make_room can look (it forgets
                # entries the rendezvous does not hold: pulled ones).
                rdv.send(step_id, key, value)
        finally:
            for old in stale:
                rdv.cleanup(old)
        return key, step_id

    def _make_room(self, now: float, nbytes: int, stale: list[int]):
        """Adds to ``stale`` the values to drop so that ``nbytes`` fit the cap."""
        # Values already pulled are gone from the rendezvous: forget them.
        rdv = self.rendezvous
        self._parked = collections.deque(
            p for p in self._parked if rdv.holds(p.step_id, p.key)
        )
        held = sum(p.nbytes for p in self._parked)
        cap = self._limits.max_parked_bytes
        while (
            held + nbytes > cap
            and self._parked
            and self._parked[0].time < now - self._evict_after_s
        ):
            old = self._parked.popleft()
            held -= old.nbytes
            stale.append(old.step_id)
        if held + nbytes > cap:
            raise over_limit(
                "max_parked_bytes",
                cap,
                f"Parking a result of {nbytes} bytes for its receiver to pull, "
                f"beside {len(self._parked)} not pulled yet,",
                held + nbytes,
            )


class _Pushed(NamedTuple):
    time: float
    push_id: int
    value: object
    client: str
    nbytes: int


class PushedTensors:
    """Values clients pushed for the step that feeds them by reference; one step
    takes each. ``client`` names who pushed (a server passes the RPC's peer)."""

    def __init__(self, worker, ttl_s: float = PARK_TTL_S, limits: Limits | None = None):
        self._worker = worker
        self._ttl_s = ttl_s
        self._limits = limits
        self._lock = threading.Lock()
        self._items: collections.OrderedDict[str, _Pushed] = collections.OrderedDict()
        self._bytes = 0
        self._by_client: collections.Counter = collections.Counter()

    def admit(self, nbytes: int, client: str = "") -> None:
        """Raises if keeping ``nbytes`` more for ``client`` would pass a cap:
        called before a pushed tensor is allocated."""
        with self._lock:
            self._expire(time.monotonic())
            self._check(nbytes, client)

    def put(self, push_id: int, value, client: str = "") -> str:
        """Keeps ``value``; returns the key a feed names it by."""
        w = self._worker
        key = make_key(
            w.devices[0],
            w.incarnation,
            _CLIENT_TASK,
            f"_push/{push_id & 0xFFFFFFFFFFFFFFFF:x}",
        )
        now = time.monotonic()
        nbytes = _nbytes(value)
        with self._lock:
            self._expire(now)
            self._drop(key)
            self._check(nbytes, client)
            self._items[key] = _Pushed(now, push_id, value, client, nbytes)
            self._bytes += nbytes
            self._by_client[client] += nbytes
        return key

    def _check(self, nbytes: int, client: str):
        if self._limits is None:
            return
        lim = self._limits
        mine = self._by_client[client]
        who = f"client {client}" if client else "a client"
        if mine + nbytes > lim.max_pushed_bytes_per_client:
            raise over_limit(
                "max_pushed_bytes_per_client",
                lim.max_pushed_bytes_per_client,
                f"PushTensors: a tensor of {nbytes} bytes, beside the {mine} "
                f"bytes {who} pushed that no step has taken yet,",
                mine + nbytes,
            )
        if self._bytes + nbytes > lim.max_pushed_bytes:
            raise over_limit(
                "max_pushed_bytes",
                lim.max_pushed_bytes,
                f"PushTensors: a tensor of {nbytes} bytes, beside the "
                f"{self._bytes} bytes pushed by all clients and not taken yet,",
                self._bytes + nbytes,
            )

    def _drop(self, key: str):
        item = self._items.pop(key, None)
        if item is not None:
            self._bytes -= item.nbytes
            self._by_client[item.client] -= item.nbytes
            if self._by_client[item.client] <= 0:
                del self._by_client[item.client]
        return item

    def _expire(self, now: float):
        while self._items:
            key, first = next(iter(self._items.items()))
            if first.time >= now - self._ttl_s:
                break
            self._drop(key)

    def take(self, key: str, push_id: int):
        """The value pushed as ``push_id`` under ``key`` (removed from here)."""
        with self._lock:
            self._expire(time.monotonic())
            item = self._items.get(key)
            if item is not None and item.push_id == push_id:
                self._drop(key)
                return item.value
        raise errors.InvalidArgumentError(
            None,
            None,
            "Malformed RunStep request: feeds must be sent inline or pushed with "
            f"PushTensors first; no pushed tensor {key[:200]!r} (already used, or "
            "expired)",
        )

    @property
    def nbytes(self) -> int:
        """Bytes held for steps to take."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)


class StepExtras:
    """Tensors a remote pull brought along for later ``_Recv``s of the same
    step (``Worker.take_siblings`` on the sender), kept on the step itself
    (``StepContext.recv_extras``): every transport of the task finds them. A
    step's pulls from one peer may take different paths (the same-host channel
    was down for the first and is back for the next), and the sender handed a
    sibling over with the pull that brought it: a later pull that missed it
    would wait for it forever. They go with the step; a cancelled step's at
    once."""

    _lock = threading.Lock()  # one for all: transports share the steps' extras

    def take(self, step, key: str):
        """The value kept for ``key`` in ``step``, or ``MISSING``."""
        if not step.recv_extras:
            return MISSING
        with self._lock:
            return step.recv_extras.pop(key, MISSING)

    def keep(self, step, values: dict) -> None:
        if not values:
            return
        with self._lock:
            new = step.recv_extras is None
            if new:
                step.recv_extras = {}
            step.recv_extras.update(values)
        if new:
            step.add_cancel_callback(lambda: self._drop(step))

    def _drop(self, step) -> None:
        with self._lock:
            step.recv_extras = {}


MISSING = object()


class SiblingTensors:
    """The ``recv`` of a ``TensorTransport`` whose pulls bring siblings along:
    a key an earlier pull of the step brought is taken from the step
    (``StepExtras``), else ``self.exchange(step, src_task, key, siblings)``
    (``(value, {sibling: value})``) pulls it, and what came along is kept.
    A transport subclasses it and defines ``exchange``.

    >>> class Two(SiblingTensors):
    ...     def exchange(self, step, src_task, key, siblings=()):
    ...         return 1, {"b": 2}
    >>> class Step:
    ...     recv_extras = None
    ...     def add_cancel_callback(self, fn): pass
    >>> step = Step()
    >>> Two().recv(step, "/job:ps", "a", ["b"]), step.recv_extras
    (1, {'b': 2})
    >>> Two().recv(step, "/job:ps", "b"), step.recv_extras
    (2, {})
    """

    _extras = StepExtras()  # holds no state of its own: the steps keep theirs

    def recv(self, step, src_task: str, key: str, siblings=()):
        value = self._extras.take(step, key)
        if value is not MISSING:
            return value
        value, got = self.exchange(step, src_task, key, siblings)
        self._extras.keep(step, got)
        return value

    def exchange(self, step, src_task: str, key: str, siblings=()):
        raise NotImplementedError


class PulledCollectives:
    """A ``TensorTransport`` over which collective chunks are only pulled
    (``recv_collective``), never pushed."""

    def pushes_collectives(self, task: str) -> bool:
        return False

    def push_collective(self, step, dst_task: str, exec_id: int, key: str, value,
                        t0: float, into=None):
        return None


__all__ = ["MISSING", "PARK_TTL_S", "ParkedTensors", "PulledCollectives",
           "PushedTensors", "SiblingTensors", "StepExtras"]
