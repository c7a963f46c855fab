"""What a remote pull of one tensor brings along (``Worker.take_siblings``):
the step's other tensors for the same consumer, sent while it lingers; none
of an aborted step; and a sibling that missed the linger stays for its own
pull."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from nbdist import errors
from nbdist.executor.rendezvous import Rendezvous, make_key
from nbdist.runtime.worker import Worker

PS = "/job:ps/replica:0/task:0"
WORKER_DEVICE = "/job:worker/replica:0/task:0/device:CPU:0"
STEP = 0x5EED
LINGER_S = 30.0  # generous: every test here ends long before it, or fails


def keys(worker: Worker, n: int) -> list[str]:
    src = f"{PS}/device:CPU:0"
    return [make_key(src, worker.incarnation, WORKER_DEVICE, f"grad_{i}:0")
            for i in range(n)]


@pytest.fixture
def worker():
    return Worker(PS)


def test_a_pull_brings_the_siblings_sent_while_it_lingers(worker):
    first, *rest = keys(worker, 4)
    worker.rendezvous.send(STEP, first, 0)
    started = threading.Event()
    taken: dict = {}

    def pull():
        started.set()
        taken.update(worker.take_siblings(STEP, first, [first, *rest], LINGER_S))

    puller = threading.Thread(target=pull)
    puller.start()
    assert started.wait(LINGER_S)
    for i, k in enumerate(rest, 1):  # produced one by one, as a backward pass does
        worker.rendezvous.send(STEP, k, i)
    puller.join(LINGER_S)
    assert not puller.is_alive(), "the pull kept lingering after its last sibling came"
    assert taken == {k: i for i, k in enumerate(rest, 1)}


def awaited(rendezvous: Rendezvous, step_id: int, key: str) -> bool:
    """Whether a wait has registered for ``key`` (polled, bounded)."""
    for _ in range(int(LINGER_S / 0.002)):
        item = rendezvous._items.get((step_id, key))
        if item is not None and (getattr(item, "groups", None) or item.event):
            return True
        time.sleep(0.002)
    return False


def start_pull(worker: Worker, first: str, rest: list) -> tuple[threading.Event, dict]:
    """A pull of ``first`` bringing ``rest`` along, on a daemon thread (were it
    to spin, it must not outlive the test: the test's failure says so)."""
    done, taken = threading.Event(), {}

    def pull():
        taken.update(worker.take_siblings(STEP, first, [first, *rest], LINGER_S))
        done.set()

    threading.Thread(target=pull, daemon=True).start()
    return done, taken


def test_a_pull_of_an_aborted_step_brings_nothing_and_returns(worker):
    first, *rest = keys(worker, 3)
    worker.rendezvous.send(STEP, first, 0)
    worker.rendezvous.send(STEP, rest[0], 1)
    worker.abort_step(STEP, errors.CancelledError(None, None, "the master gave up"))
    done, taken = start_pull(worker, first, rest)
    assert done.wait(LINGER_S / 2), "a pull of an aborted step did not return"
    assert taken == {}


def test_a_pull_lingering_when_its_step_is_aborted_returns_at_once(worker):
    first, *rest = keys(worker, 3)
    worker.rendezvous.send(STEP, first, 0)
    worker.rendezvous.send(STEP, rest[0], 1)
    done, taken = start_pull(worker, first, rest)
    assert awaited(worker.rendezvous, STEP, rest[1]), "the pull never lingered"
    worker.abort_step(STEP, errors.CancelledError(None, None, "the master gave up"))
    assert done.wait(LINGER_S / 2), "a lingering pull outlived its aborted step"
    assert taken == {}


def test_a_sibling_that_missed_the_linger_stays_for_its_own_pull(worker):
    first, early, late = keys(worker, 3)
    worker.rendezvous.send(STEP, first, 0)
    worker.rendezvous.send(STEP, early, 1)
    taken = worker.take_siblings(STEP, first, [first, early, late], 0.05)
    assert taken == {early: 1}
    worker.rendezvous.send(STEP, late, 2)
    assert worker.recv_tensor(STEP, late, LINGER_S, lambda: False) == 2


def test_rendezvous_waits_for_a_group_until_its_last_key_is_sent():
    rendezvous = Rendezvous()
    group = [f"k{i}" for i in range(3)]
    rendezvous.send(STEP, group[0], 0)
    rendezvous.send(STEP, group[1], 1)
    assert rendezvous.wait_sent_all(STEP, group, 0.0) is False
    answered = threading.Event()
    results = []

    def wait():
        results.append(rendezvous.wait_sent_all(STEP, group, LINGER_S))
        answered.set()

    threading.Thread(target=wait, daemon=True).start()
    rendezvous.send(STEP, group[2], 2)
    assert answered.wait(LINGER_S)
    assert results == [True]
    assert rendezvous.take_ready(STEP, group) == {"k0": 0, "k1": 1, "k2": 2}


def test_rendezvous_group_wait_ends_when_the_step_is_aborted():
    rendezvous = Rendezvous()
    answered = threading.Event()
    results = []

    def wait():
        results.append(rendezvous.wait_sent_all(STEP, ["a", "b"], LINGER_S))
        answered.set()

    threading.Thread(target=wait, daemon=True).start()
    assert awaited(rendezvous, STEP, "b")
    rendezvous.abort_step(STEP, errors.AbortedError(None, None, "gone"))
    assert answered.wait(LINGER_S)
    assert results == [True]
    assert rendezvous.take_ready(STEP, ["a", "b"]) == {}


def test_a_group_look_or_timed_out_wait_leaves_nothing_behind():
    """A look (no time to wait) registers nothing; a wait that ran out leaves
    no group on the keys still to come (they are sent later, every step)."""
    rendezvous = Rendezvous()
    assert rendezvous.wait_sent_all(STEP, ["a", "b"], 0.0) is False
    assert rendezvous._items == {}
    assert rendezvous.wait_sent_all(STEP, ["a", "b"], 0.01) is False
    assert rendezvous._items == {}  # its slots went with it
    rendezvous.send(STEP, "a", 1)
    rendezvous.send(STEP, "b", 2)
    assert rendezvous.wait_sent_all(STEP, ["a", "b"], 0.0) is True


# -- a pull that names its siblings waits for them together with its key --------------
def start_grouped_pull(worker: Worker, first: str, rest: list, is_cancelled=None):
    """``recv_tensor`` of ``first`` naming ``rest`` as its siblings, then the
    look at them the transports take next, on a daemon thread: (done, result
    {"value", "extras"} or {"error"})."""
    done, result = threading.Event(), {}

    def pull():
        try:
            result["value"] = worker.recv_tensor(
                STEP, first, LINGER_S, is_cancelled or (lambda: False),
                siblings=[first, *rest])
            result["extras"] = worker.take_siblings(STEP, first, [first, *rest], 0.0)
        except errors.OpError as e:
            result["error"] = e
        done.set()

    threading.Thread(target=pull, daemon=True).start()
    return done, result


def test_a_pull_naming_siblings_wakes_when_the_last_of_them_is_sent(worker, monkeypatch):
    """The key alone does not end the wait (waking then would take the GIL
    from the step still producing the rest): the pull returns with all of
    them, so the look that follows needs no linger."""
    monkeypatch.setattr("nbdist.runtime.worker.SIBLING_LINGER_S", LINGER_S)
    first, *rest = keys(worker, 4)
    done, result = start_grouped_pull(worker, first, rest)
    assert awaited(worker.rendezvous, STEP, rest[-1]), \
        "the pull did not wait for its siblings with its key"
    worker.rendezvous.send(STEP, first, 0)  # the key first, as a backward pass may
    for i, k in enumerate(rest, 1):
        worker.rendezvous.send(STEP, k, i)
    assert done.wait(LINGER_S / 2), "the pull kept waiting after its last sibling"
    assert result == {"value": 0, "extras": {k: i for i, k in enumerate(rest, 1)}}


def test_a_pull_whose_sibling_never_comes_returns_its_key_after_the_linger(
        worker, monkeypatch):
    monkeypatch.setattr("nbdist.runtime.worker.SIBLING_LINGER_S", 0.05)
    first, early, late = keys(worker, 3)
    done, result = start_grouped_pull(worker, first, [early, late])
    assert awaited(worker.rendezvous, STEP, late)
    worker.rendezvous.send(STEP, early, 1)  # before the key: its linger cannot miss it
    worker.rendezvous.send(STEP, first, 0)
    assert done.wait(LINGER_S), "a missing sibling held its key back"
    assert result == {"value": 0, "extras": {early: 1}}
    worker.rendezvous.send(STEP, late, 2)  # stays for its own pull
    assert worker.recv_tensor(STEP, late, LINGER_S, lambda: False) == 2


def test_a_pull_waiting_with_its_siblings_ends_on_abort_or_cancel(worker, monkeypatch):
    monkeypatch.setattr("nbdist.runtime.worker.SIBLING_LINGER_S", 0.05)
    first, *rest = keys(worker, 3)
    done, result = start_grouped_pull(worker, first, rest)
    assert awaited(worker.rendezvous, STEP, rest[-1])
    worker.abort_step(STEP, errors.AbortedError(None, None, "the master gave up"))
    assert done.wait(LINGER_S / 2), "a grouped pull outlived its aborted step"
    assert isinstance(result["error"], errors.AbortedError)

    cancelled = threading.Event()
    step = STEP + 1
    first, *rest = keys(worker, 3)
    done, result = threading.Event(), {}

    def pull():
        try:
            worker.recv_tensor(step, first, LINGER_S, cancelled.is_set,
                               siblings=[first, *rest])
        except errors.OpError as e:
            result["error"] = e
        done.set()

    threading.Thread(target=pull, daemon=True).start()
    assert awaited(worker.rendezvous, step, rest[-1])
    cancelled.set()  # the puller hung up
    assert done.wait(LINGER_S / 2), "a grouped pull ignored its caller's cancel"
    assert isinstance(result["error"], errors.CancelledError)


# -- a pull answered by the thread that sends the last of its tensors ----------------
def start_answered_pull(worker: Worker, first: str, rest: list, answer=None):
    """``answer_pull`` of ``first`` with ``rest`` on a daemon thread: (done,
    result {"answered": bool} or {"error"}, answers [(thread id, value, extras)])."""
    done, result, answers = threading.Event(), {}, []

    def record(value, extras):
        answers.append((threading.get_ident(), value, extras))

    def serve():
        try:
            result["answered"] = worker.answer_pull(
                STEP, first, [first, *rest], LINGER_S, lambda: False, answer or record)
        except Exception as e:  # noqa: BLE001 - the test looks at it
            result["error"] = e
        done.set()

    threading.Thread(target=serve, daemon=True).start()
    return done, result, answers


def test_the_thread_sending_the_last_sibling_answers_the_pull(worker, monkeypatch):
    """The serving thread sleeps; the step's own thread, sending the last
    tensor, answers (no wake of the server on the step's path)."""
    monkeypatch.setattr("nbdist.runtime.worker.SIBLING_LINGER_S", LINGER_S)
    first, *rest = keys(worker, 3)
    done, result, answers = start_answered_pull(worker, first, rest)
    assert awaited(worker.rendezvous, STEP, rest[-1])
    producer = {}

    def produce():
        producer["id"] = threading.get_ident()
        for i, k in enumerate([first, *rest]):
            worker.rendezvous.send(STEP, k, i)

    thread = threading.Thread(target=produce)
    thread.start()
    thread.join(LINGER_S)
    assert done.wait(LINGER_S / 2)
    assert result == {"answered": True}
    assert answers == [(producer["id"], 0, {rest[0]: 1, rest[1]: 2})]
    assert not worker.rendezvous.holds(STEP, first)  # taken by the answer


def test_a_pull_with_nothing_to_come_is_left_to_its_caller(worker):
    first, *rest = keys(worker, 3)
    for i, k in enumerate([first, *rest]):
        worker.rendezvous.send(STEP, k, i)
    assert worker.answer_pull(STEP, first, [first, *rest], LINGER_S, lambda: False,
                              lambda *a: pytest.fail("answered")) is False
    assert worker.rendezvous.holds(STEP, first)  # for the caller to take
    worker.abort_step(STEP + 1, errors.AbortedError(None, None, "gone"))
    assert worker.answer_pull(STEP + 1, first, [first, *rest], LINGER_S,
                              lambda: False, lambda *a: pytest.fail("answered")) is False


def test_an_answer_that_fails_fails_the_pull_not_the_step(worker, monkeypatch):
    monkeypatch.setattr("nbdist.runtime.worker.SIBLING_LINGER_S", LINGER_S)
    first, *rest = keys(worker, 2)

    def broken(value, extras):
        raise BrokenPipeError("the puller hung up")

    done, result, _ = start_answered_pull(worker, first, rest, broken)
    assert awaited(worker.rendezvous, STEP, rest[-1])
    worker.rendezvous.send(STEP, first, 0)
    worker.rendezvous.send(STEP, rest[0], 1)  # the step's thread: no error here
    assert done.wait(LINGER_S / 2)
    assert isinstance(result["error"], BrokenPipeError)


def test_a_pull_whose_sibling_lags_is_left_to_its_caller_without_more_linger(
        worker, monkeypatch):
    monkeypatch.setattr("nbdist.runtime.worker.SIBLING_LINGER_S", 0.05)
    first, early, late = keys(worker, 3)
    done, result, answers = start_answered_pull(worker, first, [early, late])
    assert awaited(worker.rendezvous, STEP, late)
    worker.rendezvous.send(STEP, early, 1)  # before the key: its linger cannot miss it
    worker.rendezvous.send(STEP, first, 0)
    assert done.wait(LINGER_S), "a lagging sibling held its key back"
    assert result == {"answered": False} and answers == []
    # The caller serves it as before, and does not linger for the late one again.
    assert worker.recv_tensor(STEP, first, LINGER_S, lambda: False,
                              siblings=[first, early, late]) == 0
    looked, taken = threading.Event(), {}

    def look():
        taken.update(worker.take_siblings(STEP, first, [first, early, late], LINGER_S))
        looked.set()

    threading.Thread(target=look, daemon=True).start()
    assert looked.wait(LINGER_S / 2), "the caller lingered for the late sibling again"
    assert taken == {early: 1}
    worker.rendezvous.send(STEP, late, 2)
    assert worker.recv_tensor(STEP, late, LINGER_S, lambda: False) == 2


def test_pulls_naming_keys_never_sent_leave_no_slots_behind(worker):
    """A pull that names thousands of siblings nobody sends (hostile, or a
    step that never ran) costs nothing once it gave up: no slot of it stays
    in the rendezvous for later steps to walk."""
    first, *rest = keys(worker, 4096)
    with pytest.raises(errors.DeadlineExceededError):
        worker.recv_tensor(STEP, first, 0.05, lambda: False, siblings=[first, *rest])
    assert worker.answer_pull(STEP + 1, first, [first, *rest], 0.05, lambda: False,
                              lambda *a: pytest.fail("answered")) is False
    assert not [k for k in worker.rendezvous._items if k[1] in rest]


def test_an_answered_group_keeps_no_tensor_alive():
    """A finished group the waiter still holds (a busy task has not run it
    yet) refers to none of the tensors it answered with: a sent variable's
    array is the variable's alone again, so its update writes in place."""
    import weakref

    rendezvous = Rendezvous()
    answered = []
    group = rendezvous.answer_when_sent(STEP, ["a", "b"], lambda: answered.append(
        sorted(rendezvous.take_with(STEP, "a", ["b"])[1])))
    value = np.arange(8.0)
    alive = weakref.ref(value)
    rendezvous.send(STEP, "a", value)
    rendezvous.send(STEP, "b", np.zeros(2))
    del value
    assert answered == [["b"]] and group.event.is_set()
    assert alive() is None, "the answered group still holds a sent tensor"
