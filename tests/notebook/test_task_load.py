"""Each task's steps/s and CPU in ``ClusterView`` (issue 39, item 4): the
heartbeat carries the task's process CPU seconds beside ``steps_served`` (a
field older peers leave out: unknown, shown as "–"), and the view turns two
heartbeats into rates. Oracles: heartbeats with known counts and times; the
task process's CPU time as /proc tells it; a worker given ~30× the work of
the other per step; the 32-task face's height before the strip."""

from __future__ import annotations

import os
import re
import threading
import time

import numpy as np
import pytest
from face_height import face_height
from helpers import ROOT, cpu_seconds, local_cluster, wait_for
from view_faces import structure

import nbdist as nd
from nbdist.notebook.task_load import TaskLoad
from nbdist.runtime.coordination import CONNECTED

W0 = "/job:worker/replica:0/task:0"
PS0 = "/job:ps/replica:0/task:0"


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()
    yield


def test_rates_are_the_change_between_heartbeats_over_their_interval():
    load = TaskLoad()
    assert not load.add(10.0, 0, None, incarnation=5)  # registering: no CPU told
    assert load.add(10.5, 10, 2.0, 5)  # steps/s; CPU % needs two that told it
    assert load.steps_per_s == pytest.approx(20.0) and load.cpu_pct is None
    assert load.add(11.5, 40, 3.5, 5)
    # steps over the window from the first heartbeat; CPU from the first that told.
    assert load.steps_per_s == pytest.approx(40 / 1.5)
    assert load.cpu_pct == pytest.approx(150.0)  # 1.5 s of CPU in 1 s: 1.5 cores
    assert (load.steps_text(), load.cpu_text()) == ("27", "150%")
    assert not load.add(11.5, 40, 3.5, 5)  # the same heartbeat seen again
    # Only the last two seconds count: a burst then a pause shows the pause.
    for t in (12.5, 13.5, 14.5):
        load.add(t, 40, 3.5, 5)
    assert load.steps_per_s == 0.0 and load.cpu_pct == 0.0
    # A restart (new incarnation, counters from 0) is not a negative rate.
    assert not load.add(15.0, 0, 0.1, 6)
    assert load.steps_per_s is None and load.cpu_text() == "–"
    assert load.add(16.0, 3, 0.3, 6)
    assert load.steps_per_s == pytest.approx(3.0) and load.cpu_pct == pytest.approx(20)
    assert load.steps_text(running=False) == load.cpu_text(running=False) == "–"
    # A long run keeps a bounded sparkline: the mean of each stretch.
    long = TaskLoad()
    for k in range(1001):
        long.add(float(k), 7 * k, 0.25 * k)
    assert 20 <= len(long.history) < 40
    assert all(s == pytest.approx(7.0) and c == pytest.approx(25.0)
               for s, c in long.history[1:])


def test_the_cpu_field_round_trips_over_grpc_and_an_old_peer_is_unknown():
    """A heartbeat with the field: its value in task_states over gRPC and in
    the view; one without (as a peer older than the field sends): unknown, the
    view's CPU "–" while its steps/s is measured. The leader's own agent sends
    this process's CPU time."""
    from nbdist.notebook import ClusterView
    from nbdist.proto import coordination_pb2 as pb
    from nbdist.runtime.grpc.coordination_client import GrpcCoordinationClient

    spec = local_cluster(ps=1, worker=1)
    w0 = nd.Server(spec, job_name="worker", task_index=0)  # the leader; no ps
    client = GrpcCoordinationClient(w0.target)
    view = None
    try:
        client.register_task(PS0, 7, "localhost:1", 4242)
        client.heartbeat(PS0, 7, 3, cpu_seconds=2.5)
        (ps,) = client.task_states([PS0])
        assert (ps.state, ps.steps_served, ps.cpu_seconds) == (CONNECTED, 3, 2.5)
        old = pb.HeartbeatRequest(task=PS0, incarnation=7, steps_served=4)
        assert not old.HasField("cpu_seconds")  # the old message, byte for byte
        client.heartbeat(PS0, 7, 4)
        assert client.task_states([PS0])[0].cpu_seconds is None
        wait_for(lambda: client.task_states([W0])[0].cpu_seconds is not None, 10,
                 "the leader's own heartbeat")
        assert 0 < client.task_states([W0])[0].cpu_seconds <= time.process_time()

        view = ClusterView(nd.train.ClusterSpec(spec), target=w0.target)
        view.load_poll_s = 0.1
        stop = threading.Event()

        def old_peer():  # 20 steps/s, no CPU field
            steps = 4
            while not stop.wait(0.05):
                steps += 1
                client.heartbeat(PS0, 7, steps)

        thread = threading.Thread(target=old_peer, daemon=True)
        thread.start()
        try:
            assert view.wait_for(lambda s: (s.rows["ps:0"].load.steps_per_s or 0) > 10
                                 and s.rows["worker:0"].load.cpu_pct is not None, 15)
        finally:
            stop.set()
            thread.join(5)
        rows = view.state.rows
        assert rows["ps:0"].load.cpu_text() == "–"
        assert rows["ps:0"].load.steps_per_s <= 25  # ≤ 20/s, with timer slack
        line = next(x for x in repr(view).splitlines() if x.startswith("  ps:0 "))
        assert re.search(r"running +0 +\d+(\.\d)? +–$", line), line
        assert re.search(r"^  worker:0 .* \d+%$", repr(view), re.MULTILINE)
    finally:
        if view is not None:
            view.close()
        client.close()
        w0.stop()


def _graph_on(task: int, n: int, repeats: int):
    """A step on worker ``task``: ``repeats`` products of a fed n × n matrix."""
    with nd.device(f"/job:worker/task:{task}"):
        m = nd.placeholder(nd.float32, [n, n], name=f"m{task}")
        y = m
        for _ in range(repeats):
            y = nd.matmul(y, m) * (1.0 / n)
        return m, nd.reduce_sum(y)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_real_cluster_shows_the_slow_worker_and_each_tasks_cpu():
    """1 ps + 2 workers; worker:1's step does ~30× worker:0's work. While both
    train, the view's steps/s of worker:1 is below worker:0's; each CPU % is a
    number in [0, cores × 100]; a heartbeat's CPU seconds are the task
    process's CPU time as /proc says."""
    from nbdist.notebook import ClusterView

    cores = os.cpu_count() or 1
    stop = threading.Event()
    counts = [0, 0]

    def train(task, n, repeats):
        graph = nd.Graph()
        with graph.as_default():
            m, y = _graph_on(task, n, repeats)
        feed = {m: np.eye(n, dtype=np.float32)}
        with nd.Session(cluster.target("worker", task), graph=graph) as sess:
            end = time.monotonic() + 60
            while not stop.is_set() and time.monotonic() < end:
                sess.run(y, feed)
                counts[task] += 1

    with nd.LocalCluster(ps=1, workers=2, progress=False) as cluster:
        view = ClusterView(cluster)
        threads = [threading.Thread(target=train, args=args, daemon=True)
                   for args in ((0, 8, 1), (1, 160, 6))]
        try:
            for t in threads:
                t.start()

            def measured(s):
                w0, w1 = s.rows["worker:0"].load, s.rows["worker:1"].load
                return bool(w1.steps_per_s and w0.steps_per_s
                            and w1.steps_per_s < w0.steps_per_s / 2
                            and all(r.load.cpu_pct is not None
                                    for r in s.rows.values()))

            assert view.wait_for(measured, 45), repr(view)
            rows = view.state.rows
            for name in ("ps:0", "worker:0", "worker:1"):
                assert 0 <= rows[name].load.cpu_pct <= cores * 100, name
            text = repr(view)
            for name in ("worker:0", "worker:1"):
                assert re.search(rf"  {name} .* \d+(\.\d)? +\d+%$", text, re.MULTILINE), text
            html = view._repr_html_()
            assert html.count("class='nbdist-task-load'") == 6

            # The field's value is the process's CPU time (oracle: /proc).
            pid = rows["worker:1"].pid
            before = cpu_seconds(pid)
            client = view.follower.source
            seen = client.task_states(["/job:worker/replica:0/task:1"])[0]
            wait_for(lambda: client.task_states([seen.task])[0].last_heartbeat_wall
                     > seen.last_heartbeat_wall, 10, "a new heartbeat of worker:1")
            told = client.task_states([seen.task])[0].cpu_seconds
            after = cpu_seconds(pid)
            assert before - 0.02 <= told <= after + 0.02  # /proc counts 10 ms ticks
        finally:
            stop.set()
            for t in threads:
                t.join(30)
            view.close()
    assert counts[0] > counts[1] > 0


def _rows_of(view, measured: bool):
    for i, row in enumerate(view.state.sorted_rows()):
        row.process, row.pid = "running", 1000 + i
        row.note("started", 1_800_000_000.0 + 0.03 * i)
        if measured:  # worker:5 the slowest, ps:1 the busiest
            rate = 2.0 if row.name == "worker:5" else 10.0 + i % 3
            cpu = 1.8 if row.name == "ps:1" else 0.5
            for k in range(4):
                row.load.add(100.0 + k, int(rate * k), cpu * k)


def test_32_workers_a_bar_each_and_the_spread_two_lines_more():
    # face_height counts each sparkline's 14 px as a block; a browser lays it
    # in its line (tests/browser/test_browser_scale.py measures the face).
    """2 ps + 32 workers: under the grid of cells, a line per job with a bar per
    task for steps/s and for CPU, and the spread naming the slowest and the
    busiest; the face two lines taller (Chromium: 198 px), the same height
    with figures or without, within a screen."""
    from nbdist.notebook import ClusterView

    spec = nd.train.ClusterSpec({
        "ps": [f"localhost:{2000 + i}" for i in range(2)],
        "worker": [f"localhost:{3000 + i}" for i in range(32)]})
    faces = {}
    for measured in (False, True):
        view = ClusterView(spec, live=False)
        _rows_of(view, measured)
        faces[measured] = (view._repr_html_(), repr(view))
    html, text = faces[True]
    assert face_height(html) == face_height(faces[False][0]) <= 700
    assert len(re.findall(r"class='nbdist-load-job'", html)) == 2
    worker_bars = html.split("data-job='worker'")[-1].split("data-job='ps'")[0]
    steps_bars = re.search(r"<path d='([^']*)' stroke='#0969da'", worker_bars)[1]
    heights = [int(h) for h in re.findall(r"M\d+ 14v-(\d+)", steps_bars)]
    assert len(heights) == 32 and min(heights) == heights[5]  # a bar per worker
    assert "  worker   32: 32 running · steps/s 2.0–12 (slowest worker:5) · CPU 50%" \
        in text
    assert "  ps        2: 2 running · steps/s 10–12 (slowest ps:1) · CPU 50–180% " \
        "(busiest ps:1)" in text
    assert faces[False][1].splitlines()[1] == (
        "  worker   32: 32 running · steps/s – · CPU –")


@pytest.mark.parametrize("tasks", [3, 34])
def test_measured_figures_leave_the_faces_structure_and_nbvals_text_alike(tasks):
    """A committed notebook's face and a fresh run's differ in the measured
    figures only (numbers, "–", the sparkline's bars): the structure nbval's
    face comparison reads, and the text and html after the notebooks'
    sanitizers, are the same with and without them."""
    from nbdist.notebook import ClusterView

    workers = tasks - 1
    spec = nd.train.ClusterSpec({"ps": ["localhost:2000"], "worker": [
        f"localhost:{3000 + i}" for i in range(workers)]})
    cfg = (ROOT / "tests" / "nbval_sanitize.cfg").read_text()
    sanitizers = re.findall(r"^regex: (.*)$\n^replace: (.*)$", cfg, flags=re.MULTILINE)

    def sanitized(s):
        for regex, replace in sanitizers:
            s = re.sub(regex, replace, s)
        return s

    faces = []
    for measured in (False, True):
        view = ClusterView(spec, live=False)
        _rows_of(view, measured)
        faces.append((view._repr_html_(), repr(view)))
    (bare_html, bare_text), (html, text) = faces
    assert html != bare_html and text != bare_text
    assert structure(html) == structure(bare_html)
    assert sanitized(html) == sanitized(bare_html)
    assert sanitized(text) == sanitized(bare_text)
