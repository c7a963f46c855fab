"""The fast all-reduce: the ring over the same-host path (and over gRPC alone with
``NBDIST_SAME_HOST=0``), reducing in place, and the direct exchange for small
tensors. Results equal NumPy's for lengths around the ring's piece and segment
boundaries, odd lengths and lengths shorter than the group, for float32,
float64 and int32, on 2 and 3 in-process servers; every member gets the same
bits; each chunk exchange shows on the tap as one "collective" event from the
left neighbour (pushed to it over the same-host path), and the ring moves
2(N-1)/N of the tensor per member."""

from __future__ import annotations

import os
import resource
import threading
import traceback

import numpy as np
import pytest
from helpers import current_frames, local_cluster, sleep_op

import nbdist as nd
from nbdist import errors
from nbdist.ops import collective_ops
from nbdist.runtime import collective

SEGMENT = 64  # bytes per member and piece while testing: many pieces, small ones


def _in_threads(n, fn):
    out, errs = [None] * n, []

    def run(i):
        try:
            out[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - re-raised below
            errs.append((i, e))

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if any(t.is_alive() for t in threads):
        frames = current_frames()
        stacks = "\n".join(
            f"--- {t.name}\n" + "".join(traceback.format_stack(frames[t.ident]))
            for t in threading.enumerate() if t.ident in frames)
        failed = "".join(f"task {i} failed: {type(e).__name__}: {e}\n"
                         for i, e in errs)
        raise AssertionError(f"a task never finished; {failed}threads:\n{stacks}")
    if errs:
        raise errs[0][1]
    return out


def _start(servers, monkeypatch, n, same_host):
    monkeypatch.setenv("NBDIST_SAME_HOST", same_host)
    spec = local_cluster(worker=n)
    return [servers(spec, "worker", i) for i in range(n)]


def _lengths(n, itemsize):
    per_piece = SEGMENT // itemsize * n
    edges = [1, n - 1, n, n + 1, per_piece, 2 * per_piece, 3 * per_piece]
    return sorted({max(1, e + d) for e in edges for d in (-1, 0, 1)} | {101, 1001})


def _inputs(n, dtype, length, seed):
    rng = np.random.RandomState(seed)
    if np.dtype(dtype).kind == "i":
        return [rng.randint(-1000, 1000, size=length).astype(dtype) for _ in range(n)]
    return [rng.randn(length).astype(dtype) for _ in range(n)]


@pytest.mark.parametrize("same_host", ["1", "0"])
@pytest.mark.parametrize("n", [2, 3])
def test_ring_all_reduce_matches_numpy(servers, monkeypatch, n, same_host):
    monkeypatch.setattr(collective, "SEGMENT_BYTES", SEGMENT)
    # Always the ring (raising=False: main, without the direct path, runs it too).
    monkeypatch.setattr(collective, "DIRECT_BYTES", 0, raising=False)
    tasks = _start(servers, monkeypatch, n, same_host)
    cases = []  # (inputs per member, merge_op, final_op)
    for d, dtype in enumerate((np.float32, np.float64, np.int32)):
        for j, length in enumerate(_lengths(n, np.dtype(dtype).itemsize)):
            merge = ("Add", "Max", "Min")[j % 3]
            cases.append((_inputs(n, dtype, length, 100 * d + j), merge, "Id"))
    rng = np.random.RandomState(7)
    cases.append(([rng.randn(3, 50, 7).astype(np.float32) for _ in range(n)],
                  "Add", "Div"))

    def task(i):
        with nd.Graph().as_default():
            ops = [collective_ops.all_reduce(xs[i], n, 1, k + 1, merge_op=merge,
                                             final_op=final)
                   for k, (xs, merge, final) in enumerate(cases)]
            with nd.Session(tasks[i].target) as sess:
                return sess.run(ops)

    results = _in_threads(n, task)
    numpy_of = {"Add": np.sum, "Max": np.max, "Min": np.min}
    for k, (xs, merge, final) in enumerate(cases):
        expected = numpy_of[merge](np.stack(xs), axis=0)
        if final == "Div":
            expected = expected / n
        for member in results:
            got = member[k]
            assert got.dtype == xs[0].dtype and got.shape == xs[0].shape
            if got.dtype.kind == "i":
                np.testing.assert_array_equal(got, expected)
            else:
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
            # Every member holds the same bits (each element reduced once).
            np.testing.assert_array_equal(got, results[0][k])


def test_a_ring_works_with_descriptors_past_1024(servers, monkeypatch):
    # A process holding many connections (32 in-process ring members) has
    # descriptors select() cannot watch; the push must wait on them anyway.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1400:
        pytest.skip(f"the descriptor limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1400), hard))
    held = []
    try:
        while not held or held[-1] < 1100:  # bounded by the limit just set
            held.append(os.open(os.devnull, os.O_RDONLY))
        monkeypatch.setattr(collective, "SEGMENT_BYTES", SEGMENT)
        monkeypatch.setattr(collective, "DIRECT_BYTES", 0, raising=False)
        tasks = _start(servers, monkeypatch, 2, "1")
        xs = _inputs(2, np.float32, 1001, 3)

        def task(i):
            with nd.Graph().as_default():
                op = collective_ops.all_reduce(xs[i], 2, 1, 1, merge_op="Add",
                                               final_op="Id")
                with nd.Session(tasks[i].target) as sess:
                    return sess.run(op)

        for got in _in_threads(2, task):
            np.testing.assert_allclose(got, xs[0] + xs[1], rtol=1e-5, atol=1e-5)
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("same_host", ["1", "0"])
def test_small_tensors_go_direct_and_match_numpy(servers, monkeypatch, same_host):
    n = 3
    tasks = _start(servers, monkeypatch, n, same_host)
    xs = [np.random.RandomState(i).randn(1000).astype(np.float32) for i in range(n)]
    ints = [np.arange(5, dtype=np.int64) * (i - 1) for i in range(n)]
    assert xs[0].nbytes * (n - 1) <= getattr(collective, "DIRECT_BYTES", 0)
    events = []
    stops = [t.tap.subscribe(events.append) for t in tasks]

    def task(i):
        with nd.Graph().as_default():
            ops = [collective_ops.all_reduce(xs[i], n, 1, 1),
                   collective_ops.all_reduce(ints[i], n, 1, 2, merge_op="Min")]
            with nd.Session(tasks[i].target) as sess:
                return sess.run(ops)

    try:
        results = _in_threads(n, task)
    finally:
        for stop in stops:
            stop()
    for total, low in results:
        np.testing.assert_allclose(total, np.sum(xs, axis=0), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(total, results[0][0])
        np.testing.assert_array_equal(low, np.min(ints, axis=0))
    chunks = [e for e in events if e.kind == "collective"]
    # One exchange with each other member per all-reduce, whole tensors.
    assert len(chunks) == 2 * n * (n - 1)
    assert sum(e.nbytes for e in chunks) == n * (n - 1) * (xs[0].nbytes
                                                           + ints[0].nbytes)


@pytest.mark.parametrize("n", [2, 3])
def test_ring_chunks_on_the_tap_and_the_same_host_path(servers, monkeypatch, n):
    monkeypatch.setattr(collective, "SEGMENT_BYTES", 4096)
    monkeypatch.setattr(collective, "DIRECT_BYTES", 0, raising=False)
    tasks = _start(servers, monkeypatch, n, "1")
    length = 3 * 1024 * n  # float32: 3 pieces of 4096 bytes per member
    xs = [np.full(length, i + 1.0, np.float32) for i in range(n)]
    events = []
    stops = [t.tap.subscribe(events.append) for t in tasks]
    before = [dict(t._router.path_peers[0].calls) for t in tasks]

    def task(i):
        with nd.Graph().as_default():
            op = collective_ops.all_reduce(xs[i], n, 1, 1, communication_hint="ring")
            with nd.Session(tasks[i].target) as sess:
                return sess.run(op)

    try:
        results = _in_threads(n, task)
    finally:
        for stop in stops:
            stop()
    for got in results:
        np.testing.assert_array_equal(got, np.full(length, n * (n + 1) / 2))
    chunks = [e for e in events if e.kind == "collective"]
    members = [f"/job:worker/replica:0/task:{i}" for i in range(n)]
    for r, me in enumerate(members):
        mine = [e for e in chunks if e.destination == me]
        # 3 pieces, each 2(N-1) steps; always from the left neighbour.
        assert len(mine) == 3 * 2 * (n - 1)
        assert {e.source for e in mine} == {members[(r - 1) % n]}
        assert sum(e.nbytes for e in mine) == 2 * (n - 1) * xs[0].nbytes // n
        # ... pushed by the left neighbour over the same-host channel, not gRPC.
        left = (r - 1) % n
        calls = tasks[left]._router.path_peers[0].calls
        pushed = calls[(me, "cpush")] - before[left].get((me, "cpush"), 0)
        assert pushed == len(mine)


def test_members_with_different_dtypes_fail_clearly(servers, monkeypatch):
    monkeypatch.setattr(collective, "DIRECT_BYTES", 0, raising=False)
    tasks = _start(servers, monkeypatch, 2, "1")
    xs = [np.ones(64, np.float32), np.ones(64, np.int32)]

    def task(i):
        with nd.Graph().as_default():
            op = collective_ops.all_reduce(xs[i], 2, 1, 1, timeout=30)
            with nd.Session(tasks[i].target) as sess:
                try:
                    sess.run(op)
                except errors.OpError as e:
                    return type(e), e.message
                return None, ""

    outcomes = _in_threads(2, task)
    assert any(kind is errors.InvalidArgumentError and "same shape and dtype" in msg
               for kind, msg in outcomes), outcomes
    assert all(kind is not None for kind, _ in outcomes), outcomes


@pytest.mark.parametrize("same_host", ["1", "0"])
def test_concurrent_all_reduces_started_in_opposite_orders_finish(
        servers, monkeypatch, same_host):
    """Two pipelined all-reduces in one step, started in opposite orders on the
    two tasks (each delays a different one), one piece in flight at a time: each
    collective has threads of its own, so neither waits behind the other (it
    did not hang with the shared pool either: a guard, not a reproduction)."""
    monkeypatch.setattr(collective, "SEGMENT_BYTES", SEGMENT)
    monkeypatch.setattr(collective, "DIRECT_BYTES", 0, raising=False)
    monkeypatch.setattr(collective, "_PIPELINE", 1)
    tasks = _start(servers, monkeypatch, 2, same_host)
    xs = [np.arange(4096, dtype=np.float32) * (i + 1) for i in range(2)]

    def task(i):
        with nd.Graph().as_default():
            late = 1 - i  # task 0 delays the second, task 1 the first
            ops = []
            for k in range(2):
                x = nd.constant(xs[i])
                if k == late:
                    x = sleep_op(x, 0.5)
                ops.append(collective_ops.all_reduce(x, 2, 1, k + 1,
                                                     communication_hint="ring"))
            with nd.Session(tasks[i].target) as sess:
                return sess.run(ops)

    results = _in_threads(2, task)
    for out in results:
        for value in out:
            np.testing.assert_array_equal(value, xs[0] + xs[1])


def test_members_agree_to_push_while_a_channel_between_them_reconnects(servers,
                                                                      monkeypatch):
    """Task 1's same-host channel to task 0 broke (dropped, not retried for a
    while) just before an all-reduce: both still push to each other (task 1
    reconnects at once) instead of task 0 pushing while task 1 waits to pull a
    chunk task 0 never left for it."""
    tasks = _start(servers, monkeypatch, 2, "1")
    rng = np.random.RandomState(11)
    xs = [rng.randn(1000).astype(np.float32) for _ in range(2)]

    def all_reduce(instance):
        def task(i):
            with nd.Graph().as_default():
                op = collective_ops.all_reduce(xs[i], 2, 1, instance)
                with nd.Session(tasks[i].target) as sess:
                    return sess.run(op)
        return task

    _in_threads(2, all_reduce(1))  # both channels up
    tasks[1]._router.worker(tasks[0].task_name).paths[0].forget()
    for got in _in_threads(2, all_reduce(2)):
        np.testing.assert_allclose(got, xs[0] + xs[1], rtol=1e-6)
