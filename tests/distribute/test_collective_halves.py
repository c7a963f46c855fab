"""Two members on one host all-reduce a large tensor in halves: each pushes the
half its peer owns, naming the span of its own result (a memfd) the peer writes
the reduced half into; three or more in shares (each reduces one segment and
writes it into every result). Results equal NumPy's bit for bit on every member,
for odd lengths, several pieces and every merge; each member receives only what
it reduces; a member whose tensor differs fails clearly instead of waiting; a
member left alone fails by its deadline and the group runs again afterwards; a
peer restarted since the last run (whose incarnation the group had read once)
fails the next run, naming it, and a new instance runs with it. On
the wire, a result's descriptor travels once per connection, a named span is
checked to lie inside it, and what the receiver writes lands in the sender's
array."""

from __future__ import annotations

import gc
import os
import socket
import threading
import time

import numpy as np
import pytest
from helpers import in_threads, local_cluster

import nbdist as nd
from nbdist import errors
from nbdist.ops import collective_ops
from nbdist.runtime import collective, collective_buffers, samehost
from nbdist.runtime.collective_buffers import shared_flat, shared_span
from nbdist.runtime.framed import wire

LARGE = (1 << 19) + 7  # float32: just over 2 MiB, an odd number of elements


def _all_reduces(tasks, cases):
    """Every member's results of ``cases`` ([(inputs per member, merge_op,
    final_op)], one instance each) and the chunk events it received."""
    n = len(tasks)
    received = [[] for _ in tasks]
    stops = [t._worker.collectives.subscribe_chunks(received[i].append)
             for i, t in enumerate(tasks)]

    def task(i):
        with nd.Graph().as_default():
            ops = [collective_ops.all_reduce(xs[i], n, 1, k + 1, merge_op=merge,
                                             final_op=final)
                   for k, (xs, merge, final) in enumerate(cases)]
            with nd.Session(tasks[i].target) as sess:
                return sess.run(ops)

    try:
        return in_threads(n, task), received
    finally:
        for stop in stops:
            stop()


def _same_host_workers(servers, monkeypatch, spec):
    monkeypatch.setenv("NBDIST_SAME_HOST", "1")
    return [servers(spec, "worker", i) for i in range(len(spec["worker"]))]


@pytest.fixture
def pair(servers, monkeypatch):
    return _same_host_workers(servers, monkeypatch, local_cluster(worker=2))


@pytest.mark.parametrize("segment", [16 << 20, 1 << 18], ids=["one piece", "pieces"])
def test_halves_equal_numpy_on_both_members(pair, monkeypatch, segment):
    monkeypatch.setattr(collective, "SEGMENT_BYTES", segment)
    rng = np.random.RandomState(5)
    cases = [  # (inputs per member, merge_op, final_op)
        ([rng.randn(LARGE).astype(np.float32) for _ in range(2)], "Add", "Id"),
        ([rng.randn(LARGE).astype(np.float32) for _ in range(2)], "Add", "Div"),
        ([rng.randint(-9, 9, size=(LARGE // 4 + 3, 4)).astype(np.int64)
          for _ in range(2)], "Max", "Id"),
        ([rng.randn(LARGE // 2 + 1).astype(np.float64) for _ in range(2)], "Min", "Id"),
        ([rng.randint(1, 3, size=LARGE).astype(np.int32) for _ in range(2)], "Mul",
         "Id"),
    ]
    results, received = _all_reduces(pair, cases)
    numpy_of = {"Add": np.add, "Max": np.maximum, "Min": np.minimum, "Mul": np.multiply}
    for k, (xs, merge, final) in enumerate(cases):
        expected = numpy_of[merge](xs[0], xs[1])
        if final == "Div":
            expected = (expected / 2).astype(expected.dtype)
        for member in results:
            assert member[k].dtype == xs[0].dtype and member[k].shape == xs[0].shape
            np.testing.assert_array_equal(member[k], expected)
    # Each member received only the half it reduced (direct would bring the
    # whole tensor): the other half was written into its result by the peer.
    for r, events in enumerate(received):
        assert {e.phase for e in events} == {"direct"}
        expected_bytes = 0
        for xs, _, _ in cases:
            flat = xs[0].reshape(-1)
            half = flat.size // 2 if r == 0 else flat.size - flat.size // 2
            expected_bytes += half * flat.itemsize
        assert sum(e.nbytes for e in events) == expected_bytes
        if segment < 1 << 20:
            assert max(e.piece for e in events) >= 3  # pipelined pieces


def test_a_member_with_a_smaller_tensor_fails_clearly(pair):
    sizes = [1 << 20, 1 << 16]  # 4 MiB (halves) beside 256 KiB (direct)

    def task(i):
        with nd.Graph().as_default():
            total = collective_ops.all_reduce(np.ones(sizes[i], np.float32), 2, 1, 1,
                                              timeout=60)
            with nd.Session(pair[i].target) as sess:
                try:
                    sess.run(total)
                except errors.OpError as e:
                    return e
                return None

    clear = 0
    for error in in_threads(2, task):
        assert isinstance(error, (errors.InvalidArgumentError, errors.CancelledError)), \
            error
        if isinstance(error, errors.InvalidArgumentError):
            assert "must have the same shape and dtype" in error.message, error.message
            clear += 1
        else:  # it saw the mismatch second: its peer's run had already failed
            assert "its sender's run of this collective failed" in error.message, \
                error.message
    assert clear >= 1


def test_a_member_left_alone_times_out_and_the_pair_runs_again(pair):
    x = np.arange(LARGE, dtype=np.float32)
    with nd.Graph().as_default():
        total = collective_ops.all_reduce(x, 2, 1, 1, timeout=1.0)
        with nd.Session(pair[0].target) as sess, \
                pytest.raises(errors.DeadlineExceededError):
            sess.run(total)

    def task(i):
        with nd.Graph().as_default():
            op = collective_ops.all_reduce(x * (i + 1), 2, 1, 2)  # a new instance
            with nd.Session(pair[i].target) as sess:
                return [sess.run(op), sess.run(op)]

    for runs in in_threads(2, task):
        for got in runs:
            np.testing.assert_array_equal(got, x * 3)


@pytest.fixture
def trio(servers, monkeypatch):
    return _same_host_workers(servers, monkeypatch, local_cluster(worker=3))


@pytest.mark.parametrize("segment", [16 << 20, 1 << 18], ids=["one piece", "pieces"])
def test_shares_equal_numpy_on_three_members(trio, monkeypatch, segment):
    monkeypatch.setattr(collective, "SEGMENT_BYTES", segment)
    rng = np.random.RandomState(6)
    cases = [
        ([rng.randn(LARGE).astype(np.float32) for _ in range(3)], "Add", "Div"),
        ([rng.randint(-99, 99, size=LARGE).astype(np.int32) for _ in range(3)], "Max",
         "Id"),
    ]
    results, received = _all_reduces(trio, cases)
    (a, b, c), _, _ = cases[0]
    total = ((a + b) + c) / np.float32(3)  # rank order, as TF's ring folds
    for member in results:
        np.testing.assert_array_equal(member[0], total.astype(np.float32))
        np.testing.assert_array_equal(member[1], np.maximum.reduce(cases[1][0]))
    per_piece = segment // 4 * 3 * 2  # shares' pieces: twice scatter's
    for r, events in enumerate(received):
        # Per piece: the two peers' parts of its own segment, then word of the
        # other two segments, written into its result (the ring's bytes).
        rs = ag = 0
        for start in range(0, LARGE, per_piece):
            m = min(per_piece, LARGE - start)
            parts = [m * (j + 1) // 3 - m * j // 3 for j in range(3)]
            rs += 2 * parts[r] * 4
            ag += (m - parts[r]) * 4
        for phase, expected in (("reduce-scatter", rs), ("all-gather", ag)):
            assert sum(e.nbytes for e in events if e.phase == phase) == 2 * expected
        assert {e.source for e in events} == {t.task_name for t in trio} - {
            trio[r].task_name}
        if segment < 1 << 20:
            assert max(e.piece for e in events) == 1  # two pieces


def test_three_members_one_left_out_time_out_and_run_again(trio):
    x = np.arange(LARGE, dtype=np.float32)

    def lonely(i):
        with nd.Graph().as_default():
            total = collective_ops.all_reduce(x, 3, 1, 1, timeout=1.0)
            with nd.Session(trio[i].target) as sess:
                try:
                    sess.run(total)
                except errors.OpError as e:
                    return e
                return None

    for error in in_threads(2, lonely):
        assert isinstance(error, errors.DeadlineExceededError), error

    def task(i):
        with nd.Graph().as_default():
            op = collective_ops.all_reduce(x * (i + 1), 3, 1, 2)  # a new instance
            with nd.Session(trio[i].target) as sess:
                return [sess.run(op), sess.run(op)]

    for runs in in_threads(3, task):
        for got in runs:
            np.testing.assert_array_equal(got, (x + 2 * x) + 3 * x)


def _frame_with_answer(result, offset, nbytes):
    out = wire.Outgoing()
    out.add("k", np.zeros(4, np.float32))
    out.answer_into(result, offset, nbytes)
    return out


def test_a_result_travels_once_per_connection_and_answers_land_in_it():
    sender_sock, receiver_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    sender, receiver = wire.Link(), wire.Link()
    result = shared_flat(np.dtype(np.float32), 1024)
    span = shared_span(result[512:768])
    assert span is not None and span[1] == 512 * 4
    assert shared_span(np.zeros(8)) is None
    try:
        for attempt in range(2):
            wire.send_frame(sender_sock, {"op": "cpush"},
                            _frame_with_answer(span[0], span[1], 256 * 4), sender)
            header, _, fds = wire.recv_frame(receiver_sock, 1 << 20)
            assert ("fd" in header["into"]) == (attempt == 0)  # sent once
            m, at = receiver.peer_result(header["into"], fds)
            for fd in fds:
                os.close(fd)
            assert len(m) <= 256 * 4 + at  # only the span's pages are mapped
            into = np.frombuffer(m, np.float32, count=256, offset=at)
            into[:] = attempt + 7.0
            del into
            np.testing.assert_array_equal(result[512:768], attempt + 7.0)
            assert not result[:512].any() and not result[768:].any()
        # A span reaching past the result is refused, as is a result never sent.
        with pytest.raises(ValueError, match="outside its result"):
            receiver.peer_result(dict(header["into"], o=4000, n=256), [])
        with pytest.raises(ValueError, match="outside its result"):  # a lie of its size
            receiver.peer_result(dict(header["into"], size=1 << 40, o=1 << 39, n=4), [])
        with pytest.raises(ValueError, match="no descriptor"):
            receiver.peer_result(dict(header["into"], fd=3), [])
        with pytest.raises(ValueError, match="never sent"):
            receiver.peer_result(dict(header["into"], id=-5), [])
    finally:
        sender.close()
        receiver.close()
        sender_sock.close()
        receiver_sock.close()


def test_a_connection_keeps_a_bounded_number_of_peer_results():
    sender_sock, receiver_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    sender, receiver = wire.Link(), wire.Link()
    results = [shared_flat(np.dtype(np.uint8), 4096) for _ in range(wire.PEER_RESULTS_KEPT
                                                                      + 2)]
    try:
        for res in results + results[-1:]:
            span = shared_span(res)
            wire.send_frame(sender_sock, {"op": "cpush"},
                            _frame_with_answer(span[0], 0, 16), sender)
            header, _, fds = wire.recv_frame(receiver_sock, 1 << 20)
            receiver.peer_result(header["into"], fds)
            for fd in fds:
                os.close(fd)
            assert len(receiver._peer_results) <= wire.PEER_RESULTS_KEPT
        assert "fd" not in header["into"]  # the last one, named again: still mapped
    finally:
        sender.close()
        receiver.close()
        sender_sock.close()
        receiver_sock.close()


def _unsealed_result(nbytes):
    """A result as ``shared_flat`` makes one, but its memfd can shrink."""
    fd = os.memfd_create("unsealed", os.MFD_CLOEXEC)
    os.ftruncate(fd, nbytes)
    m = collective_buffers.SharedResult(fd, nbytes)
    m.fd, m.result_id = fd, -7
    return m


@pytest.mark.parametrize("lie", ["span larger than the chunk", "result never sent",
                                 "span outside the result", "result can shrink"])
def test_a_push_naming_a_bad_answer_span_is_refused_and_the_task_serves_on(pair, lie):
    ch = samehost.client_channel(pair[1].target.removeprefix("grpc://"), None)
    assert ch is not None
    result = shared_flat(np.dtype(np.float32), 1 << 18)
    value = np.ones(1 << 17, np.float32)  # 512 KiB: through the staging segment
    out = wire.Outgoing()
    out.add("chunk", value)
    span = {"span larger than the chunk": (0, 2 * value.nbytes),
            "result never sent": (0, value.nbytes),
            "span outside the result": (result.nbytes, value.nbytes),
            "result can shrink": None}[lie]
    span = span if lie != "result can shrink" else (0, value.nbytes)
    shared = shared_span(result)[0] if lie != "result can shrink" else \
        _unsealed_result(result.nbytes)
    out.answer_into(shared, *span)
    header = {"exec": 12345, "key": "k", "t": out.entries, "timeout_ms": 2000}
    try:
        if lie == "result never sent":
            ch._lock.acquire()
            conn = ch._idle[0]
            ch._lock.release()
            conn[1]._results_sent[shared.result_id] = True  # as if sent before
        with pytest.raises(errors.InvalidArgumentError, match="Malformed same-host cpush"):
            ch.call("cpush", header, out, timeout_s=30)
        # Nothing was written past what was asked, and the task still reduces.
        assert not result.any()
        x = np.arange(LARGE, dtype=np.float32)

        def task(i):
            with nd.Graph().as_default():
                op = collective_ops.all_reduce(x, 2, 1, 1)
                with nd.Session(pair[i].target) as sess:
                    return sess.run(op)

        for got in in_threads(2, task):
            np.testing.assert_array_equal(got, x + x)
    finally:
        ch.close()
        if lie == "result can shrink":
            os.close(shared.fd)


def test_a_peer_restarted_since_the_last_run_fails_the_next_and_a_new_instance_runs(
        servers, monkeypatch):
    # Peers' incarnations are read once per group (as TF's resolver caches a
    # group): a run after a peer restarted fails, naming it; a new one runs.
    spec = local_cluster(worker=2)
    tasks = _same_host_workers(servers, monkeypatch, spec)
    x = np.arange(6, dtype=np.float32)

    def run_both(instance):
        def task(i):
            with nd.Graph().as_default():
                op = collective_ops.all_reduce(x * (i + 1), 2, 1, instance)
                with nd.Session(tasks[i].target) as sess:
                    return sess.run(op)
        for got in in_threads(2, task):
            np.testing.assert_array_equal(got, 3 * x)

    run_both(1)
    tasks[1].stop()
    tasks[1] = servers(spec, "worker", 1)  # the same address, a new incarnation
    with nd.Graph().as_default():
        op = collective_ops.all_reduce(x, 2, 1, 2, timeout=60)
        with nd.Session(tasks[0].target) as sess, \
                pytest.raises(errors.UnavailableError) as info:
            sess.run(op)
    assert "/job:worker/replica:0/task:1" in info.value.message, info.value.message
    run_both(3)


def test_a_results_pages_go_with_it_though_a_peer_keeps_its_descriptor():
    sender_sock, receiver_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    sender, receiver = wire.Link(), wire.Link()
    result = shared_flat(np.dtype(np.float32), 1 << 16)
    result[:] = 5.0
    try:
        shared, offset = shared_span(result)
        wire.send_frame(sender_sock, {"op": "cpush"},
                        _frame_with_answer(shared, offset, result.nbytes), sender)
        header, _, fds = wire.recv_frame(receiver_sock, 1 << 20)
        m, at = receiver.peer_result(header["into"], fds)
        for fd in fds:
            os.close(fd)
        seen = np.frombuffer(m, np.float32, count=result.size, offset=at)
        assert (seen == 5.0).all()
        del result, shared
        gc.collect()
        assert not seen.any()  # freed: what the peer maps reads as zeros now
        del seen
    finally:
        sender.close()
        receiver.close()
        sender_sock.close()
        receiver_sock.close()


def test_a_chunk_its_pusher_withdrew_fails_the_run_waiting_for_the_next():
    from nbdist.executor.step import StepContext
    from nbdist.runtime.collective_mailbox import ChunkMailbox

    box = ChunkMailbox()
    hung_up = threading.Event()
    hung_up.set()  # the pusher's run failed and closed its connection
    with pytest.raises(errors.CancelledError, match="went away"):
        box.deliver(7, "first", np.ones(3), {}, 30.0, hung_up)
    start = time.monotonic()
    with pytest.raises(errors.CancelledError, match="sender's run of this collective"):
        box.take(StepContext(1), 7, "second", lambda v, meta: v, "a chunk")
    assert time.monotonic() - start < 10  # at once, not at a deadline
    # Another execution is untouched.
    t = threading.Thread(target=box.deliver, args=(8, "k", np.ones(2), {}, 30.0,
                                                    threading.Event()))
    t.start()
    assert box.take(StepContext(2), 8, "k", lambda v, meta: v.sum(), "a chunk") == 2
    t.join(30)
