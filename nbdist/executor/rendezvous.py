"""The rendezvous where ``_Send`` leaves a tensor and ``_Recv`` picks it up.

Keys follow TF: ``src_device;hex(src_incarnation);dst_device;tensor_name;0:0``,
scoped by step id. A consumer on another task pulls with RecvTensor, which
may arrive before the producer has run: it waits here.
"""

from __future__ import annotations

import copy
import threading
import time

from nbdist import errors


def make_key(src_device: str, src_incarnation: int, dst_device: str,
             tensor_name: str) -> str:
    return f"{src_device};{src_incarnation:x};{dst_device};{tensor_name};0:0"


def parse_key(key: str):
    parts = key.split(";")
    if len(parts) != 5:
        raise errors.InvalidArgumentError(None, None,
                                           f"Malformed rendezvous key '{key:.200}'")
    src, inc, dst, name, _ = parts
    try:
        incarnation = int(inc, 16)
    except ValueError:
        raise errors.InvalidArgumentError(
            None, None, f"Malformed incarnation in rendezvous key '{key:.200}'") from None
    return src, incarnation, dst, name


class _Item:
    """A tensor's slot. Its ``threading.Event`` is made only when a receiver
    has to wait (a Send that comes first, the common case, makes none);
    ``groups``: the ``_Group``s awaiting it with others."""

    __slots__ = ("event", "groups", "ready", "value")

    def __init__(self):
        self.ready = False
        self.value = None
        self.event: threading.Event | None = None
        self.groups: list | None = None


class _Group:
    """Keys awaited together (``Rendezvous.wait_sent_all``): one wake, when
    the last of them is sent, not one per key. With ``answer``
    (``Rendezvous.answer_when_sent``), the sender of the last calls it instead,
    unless the waiter ``claim``ed the group first; ``event`` is set once it
    returned (``error``: what it raised)."""

    __slots__ = ("answer", "claimed", "error", "event", "items", "left")

    def __init__(self, items: list, answer=None):
        self.items = items  # [(step_id, key), item] of the keys still to come
        self.left = len(items)
        self.event = threading.Event()
        self.answer = answer
        self.claimed = False
        self.error: BaseException | None = None


_NOT_SENT = _Item()  # what a key nobody sent or awaited yet looks like


def _sent(item: _Item) -> tuple[list, list]:
    """(events to set, groups to answer) of ``item``'s groups that it was the
    last of (under the rendezvous' lock)."""
    groups, item.groups = item.groups, None
    events, answers = [], []
    for group in groups or ():
        group.left -= 1
        if group.left == 0:
            if group.answer is not None and not group.claimed:
                group.claimed = True
                answers.append(group)
            else:
                events.append(group.event)
    return events, answers


def _taken(item: _Item):
    """An item's value, taken: the item (which a finished group may still
    list) no longer refers to it, so a sent variable's array is the
    variable's alone again and its next update can write in place."""
    value, item.value = item.value, None
    return value


def _answer(group: _Group) -> None:
    """Runs a completed group's answer in the sending thread; what it raises
    is the waiter's, not the sender's."""
    try:
        group.answer()
    except BaseException as e:  # noqa: BLE001 - handed to the waiter
        group.error = e
    finally:
        group.answer = None
        group.items = []
        group.event.set()


class Rendezvous:
    def __init__(self):
        self._lock = threading.Lock()
        self._items: dict[tuple, _Item] = {}
        self._aborted: dict[int, errors.OpError] = {}
        self._created: dict[int, float] = {}

    def _slot(self, step_id: int, key: str) -> _Item:
        """The item of ``key`` in ``step_id``, made now if new (under the lock)."""
        item = self._items.get((step_id, key))
        if item is None:
            item = self._items[(step_id, key)] = _Item()
            self._created.setdefault(step_id, time.monotonic())
            if step_id in self._aborted:
                item.ready = True  # a late Recv of an aborted step fails at once
        return item

    def _item(self, step_id: int, key: str) -> _Item:
        with self._lock:
            return self._slot(step_id, key)

    def _waitable(self, step_id: int, key: str) -> tuple[_Item, threading.Event]:
        """The item of ``key`` with its event (made now if nobody waited yet)."""
        with self._lock:
            item = self._slot(step_id, key)
            event = item.event
            if event is None:
                event = item.event = threading.Event()
                if item.ready:
                    event.set()
            return item, event

    def send(self, step_id: int, key: str, value):
        with self._lock:
            item = self._slot(step_id, key)
            if item.ready:
                raise errors.InternalError(None, None, f"Duplicated send: {key}")
            item.value = value
            item.ready = True
            event = item.event
            done, answers = _sent(item)
        if event is not None:
            event.set()
        for group_event in done:
            group_event.set()
        for group in answers:
            _answer(group)

    def recv(self, step, key: str):
        """Waits (cancellably) for the value of ``key`` in ``step``."""
        item = self._item(step.step_id, key)
        if not item.ready:
            item, event = self._waitable(step.step_id, key)
            step.wait(event.is_set, f"tensor {key.split(';')[3]}", event.wait)
        self._raise_if_aborted(step.step_id)
        return self._take(step.step_id, key, item)

    def recv_blocking(self, step_id: int, key: str, timeout_s: float, is_cancelled):
        """For remote pulls: waits up to ``timeout_s`` while not ``is_cancelled()``."""
        item = self._item(step_id, key)
        if not item.ready:
            item, event = self._waitable(step_id, key)
            end = time.monotonic() + timeout_s
            while not event.wait(0.02):
                self._raise_if_aborted(step_id)
                if is_cancelled():
                    raise errors.CancelledError(None, None, "RecvTensor was cancelled")
                if time.monotonic() > end:
                    raise errors.DeadlineExceededError(
                        None, None, f"Timed out waiting for tensor {key:.200}")
        self._raise_if_aborted(step_id)
        return self._take(step_id, key, item)

    def holds(self, step_id: int, key: str) -> bool:
        """Whether a value sent as ``key`` in ``step_id`` is still waiting."""
        with self._lock:
            item = self._items.get((step_id, key))
        return item is not None and item.ready

    def wait_sent_all(self, step_id: int, keys, timeout_s: float) -> bool:
        """Waits up to ``timeout_s`` for every one of ``keys`` to be sent in
        ``step_id`` (or the step to be aborted); the waiter wakes once, when
        the last comes. False when time ran out first."""
        with self._lock:
            if step_id in self._aborted:
                return True
            if timeout_s <= 0:  # a look, leaving nothing behind
                return all(self._items.get((step_id, key), _NOT_SENT).ready
                           for key in keys)
            group = self._await_group(step_id, keys)
        if group is None or group.event.wait(timeout_s):
            return True
        self.claim(group)
        return group.left == 0

    def wait_with_siblings(self, step_id: int, key: str, siblings, timeout_s: float,
                           linger_s: float, is_cancelled) -> bool:
        """Waits for ``key`` and ``siblings`` together, as ``wait_sent_all``
        (one wake when the last is sent, where waking at ``key`` and again at
        the rest would take the GIL twice from the step producing them), but
        gives up once ``key`` has waited ``linger_s`` to 2 ``linger_s`` for
        the rest, after ``timeout_s``, or when ``is_cancelled()``. True when
        all were sent (or the step was aborted)."""
        with self._lock:
            if step_id in self._aborted:
                return True
            group = self._await_group(step_id, [key, *siblings])
        if group is None or self.wait_lingering(
                group, step_id, key, timeout_s, linger_s, is_cancelled):
            return True
        self.claim(group)
        return group.left == 0

    def answer_when_sent(self, step_id: int, keys, answer) -> _Group | None:
        """Has ``answer()`` called by the thread that sends the last of
        ``keys`` in ``step_id``, unless the waiter ``claim``s the group
        first (then it answers itself); the group's ``event`` is set once
        ``answer`` returned. A server thread serving a pull so is not woken,
        on the step's path, to answer: on a busy task it would wait for the
        GIL while the sender ran on. None when nothing is to come (all were
        sent, or the step was aborted): the caller answers."""
        with self._lock:
            if step_id in self._aborted:
                return None
            group = self._await_group(step_id, keys, answer)
        return group

    def wait_lingering(self, group: _Group, step_id: int, lead: str, timeout_s: float,
                       linger_s: float, is_cancelled) -> bool:
        """Waits for ``group``'s event (``answer_when_sent``, ``_await_group``)
        until ``timeout_s``, ``is_cancelled()``, or ``lead`` (one of its keys)
        was seen sent ``linger_s`` ago with others still to come. Whether the
        event was set."""
        end = time.monotonic() + timeout_s
        lead_seen = False
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return False
            # In slices of linger_s: the lead's arrival wakes nobody, so a
            # lead sent a slice ago has lingered long enough.
            if group.event.wait(min(left, linger_s)):
                return True
            if is_cancelled():
                return False
            if self._items.get((step_id, lead), _NOT_SENT).ready:
                if lead_seen:
                    return False
                lead_seen = True

    def claim(self, group: _Group) -> bool:
        """Ends a group's wait: False when its sender claimed it first (to
        answer it: wait for its event), else True and the keys still to
        come no longer count it."""
        with self._lock:
            if group.claimed:
                return False
            group.claimed = True
            for name, item in group.items:
                if item.groups and group in item.groups:
                    item.groups = [g for g in item.groups if g is not group] or None
                # A slot made only for this wait goes with it: a pull naming
                # keys never sent (a hostile one names thousands) leaves none.
                if not item.ready and item.groups is None and item.event is None \
                        and self._items.get(name) is item:
                    del self._items[name]
            return True

    def _await_group(self, step_id: int, keys, answer=None) -> _Group | None:
        """A group awaiting those of ``keys`` not yet sent, None when all
        were (under the lock)."""
        pending = []
        for key in keys:
            item = self._slot(step_id, key)
            if not item.ready:
                pending.append(((step_id, key), item))
        if not pending:
            return None
        group = _Group(pending, answer)
        for _name, item in pending:
            if item.groups is None:
                item.groups = []
            item.groups.append(group)
        return group

    def take_with(self, step_id: int, key: str, siblings) -> tuple | None:
        """(value of ``key``, {sibling: value} of those of ``siblings`` sent),
        all taken at once; None (nothing taken) when ``key`` is not there:
        never sent, taken, aborted or cleaned up."""
        with self._lock:
            item = self._items.get((step_id, key))
            if step_id in self._aborted or item is None or not item.ready:
                return None
            del self._items[(step_id, key)]
            extras = {}
            for k in siblings:
                sibling = self._items.get((step_id, k))
                if sibling is not None and sibling.ready:
                    del self._items[(step_id, k)]
                    extras[k] = _taken(sibling)
            return _taken(item), extras

    def aborted(self, step_id: int) -> bool:
        return step_id in self._aborted

    def take_ready(self, step_id: int, keys) -> dict:
        """Takes those of ``keys`` already sent in ``step_id`` (a batched remote
        pull collects a step's other tensors for the same consumer at once)."""
        out = {}
        with self._lock:
            if step_id in self._aborted:
                return out
            for key in keys:
                item = self._items.get((step_id, key))
                if item is not None and item.ready:
                    del self._items[(step_id, key)]
                    out[key] = _taken(item)
        return out

    def _take(self, step_id, key, item):
        with self._lock:
            self._items.pop((step_id, key), None)
            return _taken(item)

    def _raise_if_aborted(self, step_id):
        err = self._aborted.get(step_id)
        if err is not None:
            # A copy: raising the kept error would hang this step's frames on it
            # (its traceback) for as long as the abort is remembered.
            raise copy.copy(err)

    def abort_step(self, step_id: int, error: errors.OpError):
        with self._lock:
            self._aborted[step_id] = error
            events = []
            for (s, _), item in self._items.items():
                if s == step_id:
                    item.ready = True
                    if item.event is not None:
                        events.append(item.event)
                    if item.groups:
                        events.extend(g.event for g in item.groups)
                        item.groups = None
        for event in events:
            event.set()

    def cleanup(self, step_id: int):
        with self._lock:
            for k in [k for k in self._items if k[0] == step_id]:
                del self._items[k]
            self._aborted.pop(step_id, None)
            self._created.pop(step_id, None)

    def expire(self, older_than_s: float):
        """Drops steps nobody cleaned up (e.g. their master died)."""
        now = time.monotonic()
        with self._lock:
            old = [s for s, t in self._created.items() if now - t > older_than_s]
        for s in old:
            self.cleanup(s)
