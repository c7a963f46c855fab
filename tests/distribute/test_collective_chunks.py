"""The all-reduce's chunk events and ``CollectiveView``, from real all-reduces on
2 and 3 in-process servers (chunks pushed over the same-host path and reduced
in place): per member, the chunks received add up to exactly 2(N-1)/N of the
tensor (the ring's bound) and come from the left neighbour, one per piece and
ring step; a traced run's RunMetadata carries the same chunks, and the view's
rounds, links and bytes are those of the events. The fast path keeps the
semantics: results equal NumPy's for dtypes, shapes and lengths not divisible
by N (ring, two-round scatter and direct); a member left alone fails by its deadline and the
chunk it pushed is withdrawn; a peer that goes away mid-push fails it with
UnavailableError naming the peer."""

from __future__ import annotations

import re
import threading
import time

import numpy as np
import pytest
from helpers import in_threads, local_cluster

import nbdist as nd
from nbdist import errors
from nbdist.notebook import CollectiveView
from nbdist.ops import collective_ops
from nbdist.runtime import collective

SEGMENT = 4096  # bytes per member and piece: several pieces per tensor


def _servers(servers, monkeypatch, n):
    monkeypatch.setenv("NBDIST_SAME_HOST", "1")
    monkeypatch.setattr(collective, "SEGMENT_BYTES", SEGMENT)
    spec = local_cluster(worker=n)
    return [servers(spec, "worker", i) for i in range(n)]


def _traced_all_reduce(tasks, xs, hint):
    """Every member's (result, CollectiveView of its traced run, its events)."""
    n = len(tasks)
    events = [[] for _ in range(n)]
    stops = [t._worker.collectives.subscribe_chunks(events[i].append)
             for i, t in enumerate(tasks)]

    def task(i):
        with nd.Graph().as_default():
            total = collective_ops.all_reduce(xs[i], n, 1, 1,
                                              communication_hint=hint)
            with nd.Session(tasks[i].target) as sess:
                view = CollectiveView.trace(sess, total)
                return view.result, view

    try:
        results = in_threads(n, task)
    finally:
        for stop in stops:
            stop()
    return [(r, v, e) for (r, v), e in zip(results, events)]


def _key(c):
    return (c.phase, c.step, c.piece, c.source, c.destination, c.nbytes)


@pytest.mark.parametrize("n", [2, 3])
def test_ring_chunks_account_for_the_ring_bytes(servers, monkeypatch, n):
    tasks = _servers(servers, monkeypatch, n)
    pieces = 3
    length = pieces * SEGMENT // 4 * n  # float32: every segment the same size
    xs = [np.random.RandomState(i).randn(length).astype(np.float32)
          for i in range(n)]
    size = xs[0].nbytes
    members = [t.task_name for t in tasks]
    outcomes = _traced_all_reduce(tasks, xs, "ring")
    views = []
    for r, (result, view, events) in enumerate(outcomes):
        np.testing.assert_allclose(result, np.sum(xs, axis=0), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(result, outcomes[0][0])
        # What this member received: 2(N-1)/N x size, from its left neighbour,
        # one chunk per piece and step of each phase.
        assert sum(e.nbytes for e in events) == 2 * (n - 1) * size // n
        assert {e.source for e in events} == {members[(r - 1) % n]}
        assert {e.destination for e in events} == {members[r]}
        assert sorted((e.phase, e.step, e.piece) for e in events) == sorted(
            (phase, k, p) for phase in ("all-gather", "reduce-scatter")
            for k in range(n - 1) for p in range(pieces))
        assert all(e.start <= e.end for e in events)
        # The traced run's RunMetadata carries exactly these chunks.
        assert sorted(map(_key, view.chunks)) == sorted(map(_key, events))
        by_key = {_key(e): e for e in events}
        for c in view.chunks:
            e = by_key[_key(c)]
            assert abs(c.start - e.start) < 1e-5 and abs(c.end - e.end) < 1e-5
        views.append(view)
    whole = CollectiveView(views)
    assert whole.tasks == members
    assert whole.algorithm == "ring"
    rounds = whole.rounds()
    assert [(x.phase, x.step) for x in rounds] == (
        [("reduce-scatter", k) for k in range(n - 1)]
        + [("all-gather", k) for k in range(n - 1)])
    for rnd in rounds:  # every member sends one segment of each piece per step
        assert {(x.source, x.destination) for x in rnd.links} == {
            (members[i], members[(i + 1) % n]) for i in range(n)}
        assert all(x.nbytes == size // n and x.chunks == pieces for x in rnd.links)
        assert all(x.mb_per_s > 0 for x in rnd.links)
    for r, task in enumerate(members):
        assert whole.bytes_received(task) == 2 * (n - 1) * size // n
    # Which segment moved: the receiver (rank r) gets r-k-1, then r-k.
    for c in whole.chunks:
        r, k = members.index(c.destination), c.step
        assert whole.segment(c) == ((r - k - 1) % n if c.phase == "reduce-scatter"
                                    else (r - k) % n)
    # The same view from the dict a %%cluster cell returns.
    cell = CollectiveView({f"worker:{i}": v.run_metadata for i, v in enumerate(views)})
    assert sorted(map(_key, cell.chunks)) == sorted(map(_key, whole.chunks))


def test_two_members_go_direct_with_the_same_bytes(servers, monkeypatch):
    tasks = _servers(servers, monkeypatch, 2)
    xs = [np.arange(5 * SEGMENT // 4, dtype=np.float32) * (i + 1) for i in range(2)]
    for result, view, events in _traced_all_reduce(tasks, xs, "auto"):
        np.testing.assert_array_equal(result, xs[0] + xs[1])
        assert {e.phase for e in events} == {"direct"}
        assert sum(e.nbytes for e in events) == xs[0].nbytes  # 2(N-1)/N x size
        assert view.algorithm == "direct"
        assert [r.label for r in view.rounds()] == ["direct exchange"]


@pytest.mark.parametrize("n", [2, 3])
def test_odd_lengths_receive_all_but_two_segments_per_piece(servers, monkeypatch, n):
    tasks = _servers(servers, monkeypatch, n)
    length = 2 * SEGMENT // 8 * n + 7  # float64: two full pieces and a short one
    xs = [np.random.RandomState(10 + i).randn(length) for i in range(n)]
    per_piece = SEGMENT // 8 * n
    for r, (result, _, events) in enumerate(_traced_all_reduce(tasks, xs, "ring")):
        np.testing.assert_allclose(result, np.sum(xs, axis=0), rtol=1e-12)
        expected = 0
        for b in range(0, length, per_piece):
            m = min(per_piece, length - b)
            cuts = [m * j // n for j in range(n + 1)]
            seg = [cuts[j + 1] - cuts[j] for j in range(n)]
            # reduce-scatter: every segment but r; all-gather: every one but r+1
            expected += 2 * m - seg[r] - seg[(r + 1) % n]
        assert sum(e.nbytes for e in events) == expected * 8


@pytest.mark.parametrize("hint", ["ring", "scatter", "auto"])
@pytest.mark.parametrize("n", [2, 3])
def test_results_equal_numpy_for_dtypes_shapes_and_odd_sizes(servers, monkeypatch,
                                                             n, hint):
    tasks = _servers(servers, monkeypatch, n)
    monkeypatch.setattr(collective, "DIRECT_BYTES", 256)
    rng = np.random.RandomState(3)
    cases = [  # (inputs per member, merge_op, final_op)
        ([rng.randn(7, 5, 3) for _ in range(n)], "Add", "Div"),
        ([rng.randint(-99, 99, size=1001).astype(np.int32) for _ in range(n)],
         "Max", "Id"),
        ([rng.randn(n - 1).astype(np.float32) for _ in range(n)], "Min", "Id"),
        ([rng.randn(3 * SEGMENT // 4 + 1).astype(np.float32) for _ in range(n)],
         "Add", "Id"),
        ([rng.randint(1, 5, size=(33, 3)).astype(np.int64) for _ in range(n)],
         "Mul", "Id"),
    ]

    def task(i):
        with nd.Graph().as_default():
            ops = [collective_ops.all_reduce(xs[i], n, 1, k + 1, merge_op=merge,
                                             final_op=final, communication_hint=hint)
                   for k, (xs, merge, final) in enumerate(cases)]
            with nd.Session(tasks[i].target) as sess:
                return sess.run(ops)

    results = in_threads(n, task)
    numpy_of = {"Add": np.sum, "Max": np.max, "Min": np.min, "Mul": np.prod}
    for k, (xs, merge, final) in enumerate(cases):
        expected = numpy_of[merge](np.stack(xs), axis=0)
        if final == "Div":
            expected = expected / n
        for member in results:
            got = member[k]
            assert got.dtype == xs[0].dtype and got.shape == xs[0].shape
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(got, results[0][k])


def _wait_for(predicate, what, bound_s=30.0):
    end = time.monotonic() + bound_s
    while not predicate():
        assert time.monotonic() < end, f"never: {what}"
        time.sleep(0.01)


@pytest.mark.parametrize("deadline", ["op timeout", "run timeout_in_ms"])
def test_a_member_left_alone_fails_by_its_deadline(servers, monkeypatch, deadline):
    tasks = _servers(servers, monkeypatch, 2)
    x = np.ones(4 * SEGMENT // 4, np.float32)
    peer_box = tasks[1]._worker.collectives.mailbox
    with nd.Graph().as_default():
        total = collective_ops.all_reduce(
            x, 2, 1, 1, communication_hint="ring",
            timeout=1.0 if deadline == "op timeout" else 0)
        options = (nd.RunOptions(timeout_in_ms=1000)
                   if deadline != "op timeout" else None)
        with nd.Session(tasks[0].target) as sess:
            start = time.monotonic()
            with pytest.raises(errors.DeadlineExceededError) as info:
                sess.run(total, options=options)
            elapsed = time.monotonic() - start
    assert elapsed < 30, elapsed
    assert re.search(r"timed out|Timed out", info.value.message), info.value.message
    # The chunk it had pushed to worker 1 is withdrawn (its push hung up).
    _wait_for(lambda: not peer_box._slots, "the pushed chunk withdrawn")
    # Both still run an all-reduce together afterwards.

    def task(i):
        with nd.Graph().as_default():
            op = collective_ops.all_reduce(x * (i + 1), 2, 1, 2)
            with nd.Session(tasks[i].target) as sess:
                return sess.run(op)

    for got in in_threads(2, task):
        np.testing.assert_array_equal(got, x * 3)


def test_a_peer_that_goes_away_mid_push_fails_the_collective(servers, monkeypatch):
    tasks = _servers(servers, monkeypatch, 2)
    x = np.ones(4 * SEGMENT // 4, np.float32)
    peer_box = tasks[1]._worker.collectives.mailbox
    outcome = {}

    def lonely():
        with nd.Graph().as_default():
            total = collective_ops.all_reduce(x, 2, 1, 1, communication_hint="ring",
                                              timeout=60)
            with nd.Session(tasks[0].target) as sess:
                start = time.monotonic()
                try:
                    sess.run(total)
                except errors.OpError as e:
                    outcome["error"] = e
                outcome["elapsed"] = time.monotonic() - start

    thread = threading.Thread(target=lonely, daemon=True)
    thread.start()
    _wait_for(lambda: peer_box._slots, "a chunk pushed to worker 1")
    tasks[1].stop()
    thread.join(60)
    assert not thread.is_alive()
    error = outcome.get("error")
    assert isinstance(error, errors.UnavailableError), error
    assert "/job:worker/replica:0/task:1" in error.message, error.message
    assert outcome["elapsed"] < 55, outcome


def test_the_views_static_face_draws_every_step_without_javascript():
    from nbdist.runtime.collective import ChunkEvent

    members = [f"/job:worker/replica:0/task:{i}" for i in range(3)]
    events = [ChunkEvent(1, 1, 0, phase, k, 0, members[(r - 1) % 3], members[r],
                         1 << 20, 0.01 * k, 0.01 * k + 0.005)
              for phase in ("reduce-scatter", "all-gather") for k in range(2)
              for r in range(3)]
    view = CollectiveView(events, title="gradients")
    bundle = view._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}  # no widget outside a kernel
    html = bundle["text/html"]
    assert "<script" not in html
    assert html.count("<svg class='nbdist-ring'") == 4
    assert html.count("class='nbdist-link'") == 4 * 3
    for label in ("reduce-scatter step 1", "reduce-scatter step 2",
                  "all-gather step 1", "all-gather step 2"):
        assert label in html and label in bundle["text/plain"]
    assert "1.0 MiB · <tspan" in html and ">200 MiB/s</tspan>" in html  # 1 MiB in 5 ms
    assert "worker:2 → worker:0" in html  # the link table
    assert bundle["text/plain"].startswith(
        "CollectiveView: all-reduce over 3 tasks: 12 chunks moved 12.0 MiB in 4 "
        "steps (ring)")


def test_three_members_scatter_in_two_rounds_with_the_ring_bytes(servers, monkeypatch):
    tasks = _servers(servers, monkeypatch, 3)
    monkeypatch.setattr(collective, "DIRECT_BYTES", 0)  # large enough not to go direct
    length = 2 * SEGMENT // 4 * 3
    xs = [np.random.RandomState(20 + i).randn(length).astype(np.float32)
          for i in range(3)]
    members = [t.task_name for t in tasks]
    outcomes = _traced_all_reduce(tasks, xs, "auto")
    for r, (result, view, events) in enumerate(outcomes):
        np.testing.assert_allclose(result, np.sum(xs, axis=0), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(result, outcomes[0][0])
        assert sum(e.nbytes for e in events) == 2 * 2 * xs[0].nbytes // 3
        assert {e.source for e in events} == set(members) - {members[r]}
    whole = CollectiveView([v for _, v, _ in outcomes])
    assert [(x.phase, x.step) for x in whole.rounds()] == [
        ("reduce-scatter", 0), ("all-gather", 0)]
    assert all(len(x.links) == 6 for x in whole.rounds())  # every pair, both ways


def test_a_kept_result_is_never_overwritten_by_the_next_run(servers, monkeypatch):
    tasks = _servers(servers, monkeypatch, 2)
    monkeypatch.setattr(collective, "SEGMENT_BYTES", 1 << 20)
    length = 1 << 20  # 4 MiB of float32: the result buffer is kept for reuse

    def task(i):
        with nd.Graph().as_default():
            x = nd.placeholder(nd.float32, [length])
            total = collective_ops.all_reduce(x, 2, 1, 1)
            with nd.Session(tasks[i].target) as sess:
                first = sess.run(total, {x: np.full(length, i + 1.0, np.float32)})
                view = first[::2]  # a view of it, kept too
                second = sess.run(total, {x: np.full(length, 10.0 * (i + 1),
                                                     np.float32)})
                third = sess.run(total, {x: np.full(length, 100.0, np.float32)})
                return first, view, second, third

    for first, view, second, third in in_threads(2, task):
        np.testing.assert_array_equal(first, np.full(length, 3.0))
        np.testing.assert_array_equal(view, np.full(length // 2, 3.0))
        np.testing.assert_array_equal(second, np.full(length, 30.0))
        np.testing.assert_array_equal(third, np.full(length, 200.0))


def test_the_widget_replays_one_step_at_a_time():
    pytest.importorskip("ipywidgets")
    from nbdist.runtime.collective import ChunkEvent

    members = [f"/job:worker/replica:0/task:{i}" for i in range(3)]
    events = [ChunkEvent(1, 1, 0, phase, k, 0, members[(r - 1) % 3], members[r],
                         1 << 20, 0.01 * k, 0.01 * k + 0.005)
              for phase in ("reduce-scatter", "all-gather") for k in range(2)
              for r in range(3)]
    view = CollectiveView(events)
    controls, picture = view.widget.children
    play, slider, label = controls.children
    assert slider.max == 4 and label.value == "all steps"
    assert picture.value.count("<svg class='nbdist-ring'") == 4
    slider.value = 2
    assert label.value == "3/4: all-gather step 1"
    assert picture.value.count("<svg class='nbdist-ring'") == 1
    assert "all-gather step 1" in picture.value
