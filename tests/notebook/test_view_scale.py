"""TimelineView, CollectiveView, StalenessView and PlacementView at 32 tasks:
each static face fits a screen (it was 1,831, 4,229, 1,946 and 1,320 px tall)
and says what happened, from real runs: a traced step of a ps and 32 workers
(in-process servers), a ring all-reduce of 16 in-process members, 32 threads
training asynchronously, a graph placed on a ps and 32 workers. At 2 tasks
each face is drawn as before (a lane, a ring per step, a histogram, a card
per task). Heights: ``face_height`` (its estimate is within a few px of
Chromium's layout where blocks stack; tests/browser measures the same faces).
"""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest
from face_height import face_height
from helpers import in_threads, local_cluster

import nbdist as nd
from nbdist.notebook import CollectiveView, PlacementView, StalenessView, TimelineView

SCREEN_PX = 700  # a static face of 32 tasks fits in this height


# -- TimelineView ------------------------------------------------------------------------
def ps_step(servers, workers: int):
    """A step where each worker pulls the ps's weights (64 x 10 float32) and
    sends its loss (a float32) to worker 0, traced from worker 0."""
    cluster = local_cluster(ps=1, worker=workers)
    started = [servers(cluster, "worker", i) for i in range(workers)]
    servers(cluster, "ps", 0)
    with nd.Graph().as_default():
        with nd.device("/job:ps/task:0"):
            w = nd.get_variable("w", [64, 10], initializer=nd.ones_initializer())
        losses = []
        for i in range(workers):
            with nd.device(f"/job:worker/task:{i}"):
                losses.append(nd.reduce_sum(nd.matmul(nd.ones([4, 64]), w)))
        with nd.device("/job:worker/task:0"):
            total = nd.add_n(losses)
        with nd.Session(started[0].target) as sess:
            sess.run(nd.global_variables_initializer())
            return TimelineView.trace(sess, total)


def test_timeline_of_a_ps_and_32_workers_strips_the_workers_and_fits(servers):
    """The 32 workers are thin strips of one group, the ps a lane; every op of
    the trace is drawn once; the text groups the transfers. Oracle: the graph
    (32 pulls of 2,560 bytes, 31 losses of 4 bytes to worker 0) and the
    trace's own node stats per task."""
    view = ps_step(servers, 32)
    html, text = view._repr_html_(), repr(view)
    assert face_height(html) <= SCREEN_PX
    md = view.run_metadata
    per_task: dict[str, int] = {}
    for dev in md.step_stats.dev_stats:
        task = re.search(r"/job:(\w+)/replica:0/task:(\d+)", dev.device).groups()
        per_task[":".join(task)] = per_task.get(":".join(task), 0) + len(dev.node_stats)
    assert len(per_task) == 33
    assert html.count("class='nbdist-op'") == sum(per_task.values())
    strips = dict(re.findall(
        r"<g class='nbdist-lane nbdist-strip' data-task='([\w:]+)'><title>[\w:]+: "
        r"(\d+) ops", html))
    assert {t: int(n) for t, n in strips.items()} == {
        t: n for t, n in per_task.items() if t.startswith("worker")}
    assert html.count("class='nbdist-lane'") == 1  # ps:0, a full lane
    assert ">worker<tspan" in html and "32 tasks</tspan>" in html
    assert f"{sum(per_task.values())} ops on 33 tasks" in text
    assert "ps:0 → 32 workers: 32 tensors (80 KB)" in text  # 32 x 2,560 bytes
    assert "31 workers → worker:0: 31 tensors (124 B)" in text
    worker_ops = sum(n for t, n in per_task.items() if t.startswith("worker"))
    assert f"  worker ×32: {worker_ops} ops, busy " in text
    assert len(text.splitlines()) == 5  # not a line per task and per tensor


def test_timeline_of_a_ps_and_2_workers_keeps_a_lane_per_task(servers):
    view = ps_step(servers, 2)
    html, text = view._repr_html_(), repr(view)
    assert html.count("class='nbdist-lane'") == 3 and "nbdist-strip" not in html
    assert "ps:0 → worker:1: " in text and "ps:0 → worker:0: " in text


# -- CollectiveView ----------------------------------------------------------------------
def _ring_all_reduce(servers, monkeypatch, n: int, pieces: int):
    from nbdist.ops import collective_ops
    from nbdist.runtime import collective

    monkeypatch.setenv("NBDIST_SAME_HOST", "1")
    monkeypatch.setattr(collective, "SEGMENT_BYTES", 4096)
    spec = local_cluster(worker=n)
    tasks = [servers(spec, "worker", i) for i in range(n)]
    xs = [np.full(pieces * 1024 * n, i, np.float32) for i in range(n)]

    def member(i):
        with nd.Graph().as_default():
            total = collective_ops.all_reduce(xs[i], n, 1, 1, communication_hint="ring")
            with nd.Session(tasks[i].target) as sess:
                return CollectiveView.trace(sess, total)

    views = in_threads(n, member)
    expected = np.sum(xs, axis=0)
    for v in views:
        np.testing.assert_array_equal(v.result, expected)
    return CollectiveView(views), xs[0].nbytes


def test_collective_view_of_a_16_member_ring_is_a_heat_map_of_its_steps(
        servers, monkeypatch):
    """A real ring of 16 (30 steps: it drew 30 rings): a row per phase, a cell
    per link and step, the slowest links named and the rest counted. Oracle:
    the ring's arithmetic (each phase: N-1 steps, N links a step, N(N-1)
    pieces x chunks, each member receiving (N-1)/N of the tensor) and each
    link's bytes over its steps' times."""
    n, pieces = 16, 2
    view, size = _ring_all_reduce(servers, monkeypatch, n, pieces)
    html, text = view._repr_html_(), repr(view)
    assert view.compact() and face_height(html) <= SCREEN_PX
    assert "nbdist-ring'" not in html  # no ring per step
    assert html.count("class='nbdist-heat-step'") == 2 * (n - 1) * n
    phases = re.findall(r"<tr class='nbdist-phase' data-phase='([\w-]+)'.*?</tr>", html)
    assert phases == ["reduce-scatter", "all-gather"]
    for p in view.phases():
        assert (p.steps, p.chunks, p.nbytes) == (
            n - 1, n * (n - 1) * pieces, size * (n - 1))
        assert f"  {p.phase}: {n - 1} steps, {n * (n - 1) * pieces} chunks" in text
    busy = view.busy_links()
    assert len(busy) == n and html.count("class='nbdist-slow-link'") == 5
    for link in busy:
        steps = [x for r in view.rounds() for x in r.links
                 if (x.source, x.destination) == (link.source, link.destination)]
        assert link.nbytes == sum(x.nbytes for x in steps) == 2 * size * (n - 1) // n
        assert link.seconds == pytest.approx(sum(x.seconds for x in steps))
    rates = sorted(x.mib_per_s for x in busy)
    assert busy[0].mib_per_s == rates[0]
    assert f"and {n - 5} more links, {rates[5]:.0f}–{rates[-1]:.0f} MiB/s" in html


def ring_of(n: int) -> CollectiveView:
    """A ring all-reduce of ``n`` members, 1 MiB a chunk, 4 ms a step on every
    link but worker 7's (5 ms)."""
    from nbdist.runtime.collective import ChunkEvent

    tasks = [f"/job:worker/replica:0/task:{i}" for i in range(n)]
    steps = [(p, s) for p in ("reduce-scatter", "all-gather") for s in range(n - 1)]
    return CollectiveView([
        ChunkEvent(1, 1, 0, p, s, 0, tasks[i], tasks[(i + 1) % n], 1 << 20,
                   0.01 * k, 0.01 * k + 0.004 + 0.001 * (i == 7))
        for k, (p, s) in enumerate(steps) for i in range(n)])


def test_collective_view_of_32_members_fits_and_of_2_draws_each_step():
    """32 members (62 steps) in one screen; 2 members: a ring per step, as
    before. Oracle: the chunks given."""
    big, small = ring_of(32), ring_of(2)
    html = big._repr_html_()
    assert face_height(html) <= SCREEN_PX
    assert html.count("class='nbdist-heat-step'") == 62 * 32
    assert big.busy_links()[0].source.endswith("task:7")  # the one slow link
    slow = re.findall(r"class='nbdist-slow-link'[^>]*><td[^>]*>([^<]*)<", html)
    assert slow[0] == "worker:7 → worker:8" and len(slow) == 5
    assert small._repr_html_().count("class='nbdist-ring'") == 2
    assert "reduce-scatter step 1: worker:0 → worker:1 1.0 MiB" in repr(small)


# -- StalenessView -----------------------------------------------------------------------
def async_pairs(workers: int, steps: int) -> dict:
    """``workers`` threads training one model asynchronously: each step's
    (global step read with the weights, global step of its update)."""
    with nd.Graph().as_default():  # as StalenessView's doc has it
        global_step = nd.train.get_or_create_global_step()
        x = nd.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
        loss = nd.reduce_mean(nd.matmul(x, nd.get_variable("w", [3, 1])))
        opt = nd.train.AdamOptimizer(0.01)
        computed_at = nd.identity(global_step.read_value())
        with nd.control_dependencies([computed_at]):
            grads = opt.compute_gradients(loss)
        with nd.control_dependencies([opt.apply_gradients(grads)]):
            # The step before this update's increment, read with it (CountUpTo
            # is atomic; assign_add returns the variable, read later, as TF1's
            # ref does: two threads may read one value under load).
            applied_at = global_step.count_up_to(2**62)
        with nd.Session() as sess:
            sess.run(nd.global_variables_initializer())
            start = threading.Barrier(workers, timeout=30)

            def worker(i):
                start.wait()
                return [tuple(int(v) for v in sess.run([computed_at, applied_at]))
                        for _ in range(steps)]

            return {f"worker:{i}": p for i, p in enumerate(in_threads(workers, worker))}


@pytest.mark.parametrize("workers", [32, 2])
def test_staleness_view_of_32_workers_is_a_strip_each(workers):
    """32 workers: a heat strip each with its mean, the stalest three named
    (it was a 46 px histogram per worker); 2: a histogram each, as before.
    Oracle: the pairs the workers' steps returned (every update distinct)."""
    pairs = async_pairs(workers, 5)
    applied = sorted(a for p in pairs.values() for _, a in p)
    assert applied == list(range(workers * 5))
    view = StalenessView(pairs)
    html, text = view._repr_html_(), repr(view)
    means = {w: np.mean([a - c for c, a in p]) for w, p in pairs.items()}
    if workers == 2:
        assert "nbdist-staleness-strip" not in html
        assert all(f"{w}: mean {m:.2f}</span>" in html for w, m in means.items())
        return
    assert view.compact() and face_height(html) <= SCREEN_PX
    strips = re.findall(r"data-task='(worker:\d+)'>.*?>mean ([\d.]+)</text>", html)
    assert [w for w, _ in strips] == [f"worker:{i}" for i in range(32)]
    assert {w: float(m) for w, m in strips} == {
        w: pytest.approx(m, abs=0.005) for w, m in means.items()}
    shares = re.findall(r"<title>(worker:\d+): (\d+) of (\d+) gradients", html)
    assert sum(int(n) for _, n, _ in shares) == workers * 5
    stalest = sorted(means, key=lambda w: (-means[w], int(w.split(":")[1])))[:3]
    assert re.findall(r"<span class='chip'[^>]*>(worker:\d+): mean", html) == stalest
    hist = np.bincount([a - c for p in pairs.values() for c, a in p])
    lines = text.splitlines()
    assert lines[2:2 + np.count_nonzero(hist)] == [
        f"  {s:<9}  {k}" for s, k in enumerate(hist) if k]
    assert lines[-1].startswith(f"  stalest of 32 workers: {stalest[0]} mean ")


# -- PlacementView -----------------------------------------------------------------------
def placed(workers: int):
    spec = nd.train.ClusterSpec({"ps": ["localhost:2000"], "worker": [
        f"localhost:{3000 + i}" for i in range(workers)]})
    g = nd.Graph()
    with g.as_default(), nd.device("/job:ps/task:0"):  # the weights on the ps
        w = nd.get_variable("w", [64, 10], initializer=nd.zeros_initializer())
    with g.as_default():
        for i in range(workers):  # a bias and a loss on each worker
            with nd.device(f"/job:worker/task:{i}"):
                y = nd.matmul(nd.placeholder(nd.float32, [None, 64], name=f"x{i}"), w)
                nd.reduce_sum(y + nd.get_variable(
                    f"b{i}", [10], initializer=nd.zeros_initializer()), name=f"loss{i}")
    return g, PlacementView(g, spec, live=False)


@pytest.mark.parametrize("workers", [32, 2])
def test_placement_view_of_32_workers_is_one_card_for_the_job(workers):
    """32 workers: one card for the job (its ops, per task fewest to most, op
    types, the largest variables and the rest counted) beside the ps's (it
    was a card per task); 2 workers: a card per task, as before. Oracle: the
    graph's ops and variables and their devices."""
    g, view = placed(workers)
    html = view._repr_html_()
    ops = [op for op in g.get_operations() if "/job:worker" in op.device]
    per_task = [sum(nd.DeviceSpec.from_string(op.device).task == i for op in ops)
                for i in range(workers)]
    cards = re.findall(r"class='nbdist-placement-job' data-job='(\w+)'", html)
    if workers == 2:
        assert cards == [] and html.count("class='nbdist-device'") == 3
        return
    assert face_height(html) <= SCREEN_PX
    assert cards == ["worker"] and html.count("class='nbdist-device'") == 1  # ps:0
    assert (f"{len(ops)} ops on 32 tasks ({min(per_task)}–{max(per_task)} per task, "
            "32 devices), 32 variables 1.3 KB") in html  # 32 x 10 float32
    assert html.count("<code>worker:") == 6 and "+26 more variables, 1.0 KB" in html
    matmuls = sum(op.type == "MatMul" for op in ops)
    assert f"MatMul ×{matmuls}</span>" in html and matmuls == 32


def _one_op_each(workers: int):
    from nbdist.proto.config_pb2 import RunMetadata

    md = RunMetadata()
    for i in range(workers):
        dev = md.step_stats.dev_stats.add()
        dev.device = f"/job:worker/replica:0/task:{i}/device:CPU:0"
        n = dev.node_stats.add()
        n.node_name, n.op_type = f"matmul_{i}", "MatMul"
        n.all_start_micros, n.all_end_rel_micros = 1_000_000 + 10 * i, 100
    return md


def test_timeline_lanes_scroll_beyond_a_screen():
    """100 workers' strips are taller than a screen: the lanes scroll in a box
    of 700 px (CSS: in the widget and a static render alike); 32 do not."""
    many = TimelineView(_one_op_each(100))._repr_html_()
    box = re.search(r"<div class='nbdist-lanes-scroll' style='max-height:(\d+)px;"
                    r"overflow-y:auto'><svg class='nbdist-timeline'", many)
    assert box and int(box[1]) == SCREEN_PX
    assert many.count("class='nbdist-lane nbdist-strip'") == 100
    assert "nbdist-lanes-scroll" not in TimelineView(_one_op_each(32))._repr_html_()


def test_the_live_ring_of_32_members_keeps_them_apart_and_labels_on_hover():
    """The slider's picture of one step of 32 members: circles apart (the
    ring grows with its members), each link's bytes and bandwidth in its
    hover only (32 labels overprinted each other)."""
    view = ring_of(32)
    svg = view._ring_svg(view.rounds()[0], 260)
    centres = [(float(x), float(y)) for x, y in re.findall(
        r"<g class='nbdist-member'.*?<circle cx='([\d.]+)' cy='([\d.]+)'", svg)]
    assert len(centres) == 32
    gaps = [np.hypot(a[0] - b[0], a[1] - b[1])
            for a, b in zip(centres, centres[1:] + centres[:1])]
    assert min(gaps) >= 2 * 17 + 2
    links = re.findall(r"<g class='nbdist-link'.*?</g>", svg)
    assert len(links) == 32 and not any("<text" in g for g in links)
    assert all("1048576 bytes in 1 chunk" in g for g in links)
