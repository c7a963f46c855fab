"""One step across the cluster and the wire between its tasks.

A traced parameter-server step's ``RunMetadata.step_stats`` holds every
task's ops (the master gathers each partition's); ``TimelineView`` draws them
one lane per task with a transfer per tensor that crossed tasks, and those
transfers and their bytes are what the servers' taps counted for the step.
The Chrome trace (``nd.client.timeline``, also ``ProfilerHook``'s) is valid
trace-event JSON with a flow per transfer. ``TrafficView`` counts calls and
bytes per link, over a window of steps, from in-process taps or from a
``LocalCluster``'s published tap events.
"""

from __future__ import annotations

import glob
import json
import re
import time

import numpy as np
import pytest
from helpers import local_cluster
from test_widgets import comm  # noqa: F401

import nbdist as nd
from nbdist.notebook.timeline_model import nice_ticks, op_kind, tick_label
from nbdist.runtime.tap import TapEvent
from nbdist.runtime.tap_record import (
    TapPublisher,
    TapRecorder,
    records_from_payload,
)

PS = "/job:ps/replica:0/task:0"
W0 = "/job:worker/replica:0/task:0"
W1 = "/job:worker/replica:0/task:1"
SHORT = {PS: "ps:0", W0: "worker:0", W1: "worker:1"}


def _ps_graph():
    """In-graph replication: each worker computes a gradient of its batch from
    the ps's weights; the ps applies both (pull → compute → push → apply)."""
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            w = nd.Variable(np.arange(12, dtype=np.float32).reshape(4, 3), name="w")
            step = nd.train.get_or_create_global_step()
        losses, grads = [], []
        for i in range(2):
            with nd.device(f"/job:worker/task:{i}"):
                x = nd.constant(np.full((8, 4), i + 1.0, np.float32), name=f"x{i}")
                losses.append(nd.reduce_sum(nd.matmul(x, w), name=f"loss{i}"))
                grads.append(nd.gradients(losses[-1], w)[0])
        with nd.device("/job:ps/task:0"):
            loss = nd.add_n(losses, name="loss")
            mean = nd.add_n(grads) / 2.0
            train = nd.train.GradientDescentOptimizer(0.01).apply_gradients(
                [(mean, w)], global_step=step)
    return g, w, train, loss


def _full_trace():
    return nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE)


def _per_link(pairs) -> dict:
    out: dict = {}
    for key, nbytes in pairs:
        out[key] = out.get(key, 0) + nbytes
    return out


# -- the parts ----------------------------------------------------------------------
def test_op_kinds_and_round_ticks():
    assert [op_kind(o) for o in ("MatMul", "_Send", "_Recv", "ApplyGradientDescent",
                                 "AssignAdd", "QueueDequeueV2", "CollectiveReduceV2",
                                 "_Fetch", "AccumulatorTakeGradient")] == [
        "compute", "transfer", "transfer", "update", "update", "wait", "collective",
        "other", "wait"]
    for total in (1, 7, 95, 130, 999, 1234, 45_000, 3_210_000):
        ticks, unit = nice_ticks(total)
        step = ticks[1] - ticks[0]
        mantissa = step / 10 ** int(np.floor(np.log10(step)))
        assert mantissa in (1, 2, 5), (total, ticks)
        assert ticks[0] == 0 and ticks[-1] >= total and len(ticks) <= 10
        assert unit == ("ms" if total >= 1000 else "µs")
        # Labels are short and round: no 0.04/0.09/0.13.
        assert all(len(tick_label(t, unit)) <= 6 for t in ticks), ticks
    assert [tick_label(t, "ms") for t in nice_ticks(1234)[0][:3]] == ["0", "0.2", "0.4"]


def test_tap_recorder_is_bounded_and_payload_rows_are_checked():
    from nbdist.runtime.tap import Tap

    tap = Tap()
    rec = TapRecorder(tap, maxlen=3)
    for step in range(10):
        tap.emit(TapEvent("RecvTensor", PS, W0, step, 4, 1.0, 1.5))
    assert [r.step for r in rec.records()] == [7, 8, 9] and rec.seen == 10
    rec.close()
    tap.emit(TapEvent("RecvTensor", PS, W0, 11, 4, 1.0, 1.5))
    assert rec.seen == 10
    good = ["RecvTensor", PS, W0, 7, 48, 100, 200]
    rows = [good, ["RunGraph", PS], [1, PS, W0, 7, 0, 0, 0],
            ["x", PS, W0, "7", 0, 0, 0], ["x", PS, W0, True, 0, 0, 0], "junk"]
    assert [r.nbytes for r in records_from_payload({"records": rows})] == [48]
    assert records_from_payload({"records": "nope"}) == []


def test_tap_publisher_batches_and_drops_the_oldest_when_behind():
    from nbdist.runtime.tap import Tap

    tap = Tap()
    published = []
    pub = TapPublisher(tap, lambda kind, payload: published.append((kind, payload)),
                       maxlen=5, batch_s=60.0, max_batch=2)
    try:
        for step in range(8):
            tap.emit(TapEvent("RecvTensor", PS, W0, step, 4, 1.0, 1.5))
        pub.flush()
    finally:
        pub.close()
    assert pub.dropped == 3
    assert [k for k, _ in published] == ["tap"] * 3
    steps = [r.step for _, p in published for r in records_from_payload(p)]
    assert steps == [3, 4, 5, 6, 7]


# -- one step across the cluster ----------------------------------------------------
@pytest.fixture
def ps_cluster(servers):
    spec = local_cluster(ps=1, worker=2)
    return [servers(spec, "ps", 0), servers(spec, "worker", 0),
            servers(spec, "worker", 1)]


def test_a_traced_step_holds_every_tasks_ops_and_its_transfers_match_the_tap(
        ps_cluster):
    g, w, train, loss = _ps_graph()
    recorder = TapRecorder([s.tap for s in ps_cluster])
    try:
        with nd.Session(ps_cluster[1].target, graph=g) as sess:
            sess.run(nd.variables_initializer([w, g.get_collection(
                nd.GraphKeys.GLOBAL_VARIABLES)[1]]))
            sess.run(train)  # plans and registers the partitions
            recorder.clear()
            md = nd.RunMetadata()
            sess.run([train, loss], options=_full_trace(), run_metadata=md)
    finally:
        recorder.close()
    # The master gathered every task's ops of the step.
    tasks = {d.task for d in md.step_stats.dev_stats}
    assert tasks == {PS, W0, W1}
    view = nd.notebook.TimelineView(md, title="ps step")
    assert view.tasks() == ["worker:0", "worker:1", "ps:0"]
    # The step's id: the RunGraph calls of this master; every record of the step.
    steps = {r.step for r in recorder.records() if r.kind == "RunGraph"}
    assert len(steps) == 1
    (step_id,) = steps
    exchanged = [r for r in recorder.records()
                 if r.step == step_id and r.kind in ("RecvTensor", "PullTensor")]
    tap_links = _per_link(((SHORT[r.source], SHORT[r.destination]), r.nbytes)
                          for r in exchanged)
    view_links = _per_link(((t.source, t.destination), t.bytes)
                           for t in view.transfers)
    assert view_links == tap_links
    # Oracle for the bytes: w (pulled by each worker), each worker's gradient
    # of w (pushed to the ps), NumPy's nbytes.
    wbytes = np.zeros((4, 3), np.float32).nbytes
    pulls = [t for t in view.transfers if t.source == "ps:0"]
    pushes = [t for t in view.transfers if t.destination == "ps:0"]
    assert sorted(t.destination for t in pulls) == ["worker:0", "worker:1"]
    assert all(t.bytes == wbytes for t in pulls)
    assert sum(t.bytes == wbytes for t in pushes) == 2
    assert all(t.recv_us >= t.send_us >= 0 for t in view.transfers)
    # Every pull comes before the pushes, and the apply after both pushes.
    first_push = min(t.recv_us for t in pushes if t.bytes == wbytes)
    assert max(t.send_us for t in pulls) <= first_push
    apply = [s for s in view.spans if s.op == "ApplyGradientDescent"]
    assert len(apply) == 1 and apply[0].task == "ps:0" and apply[0].kind == "update"
    assert apply[0].start_us >= max(t.recv_us for t in pushes if t.bytes == wbytes)

    face = view._repr_html_()
    svg = re.search(r"(?s)<svg class='nbdist-timeline'.*?</svg>", face).group(0)
    assert svg.count("class='nbdist-lane'") == 3
    assert svg.count("class='nbdist-transfer'") == len(view.transfers) >= 4
    for kind in ("compute", "Send/Recv", "variable update"):
        assert f">{kind}</text>" in svg, kind  # the legend
    # Round ticks, and the hover text of a bar and of an arrow.
    ticks = re.findall(r"text-anchor='middle' font-size='10' fill='#59636e'>"
                       r"([^<]+)</text>", svg)
    assert ticks[0] == "0" and all(re.fullmatch(r"\d+(\.\d{1,3})?", t) for t in ticks)
    assert re.search(r"<title>GradientDescent/update_w/ApplyGradientDescent "
                     r"\(ApplyGradientDescent\) · ps:0 · update · start [\d.]+ ms · "
                     r"duration [\d.]+ ms · [\d.]+ \w?B out</title>", svg)
    assert re.search(r"<title>w/read: ps:0 → worker:1 · 48 B \(48 bytes\) · sent",
                     svg)
    assert "w/read · 48 B" in svg
    assert "ps:0 → worker:0: w/read (48 B)" in repr(view)


def test_the_chrome_trace_is_valid_trace_event_json_with_a_flow_per_transfer(
        ps_cluster, tmp_path):
    g, _w, train, _loss = _ps_graph()
    with nd.Session(ps_cluster[1].target, graph=g) as sess:
        sess.run(nd.variables_initializer(g.get_collection(
            nd.GraphKeys.GLOBAL_VARIABLES)))
        md = nd.RunMetadata()
        sess.run(train, options=_full_trace(), run_metadata=md)
    transfers = nd.notebook.TimelineView(md).transfers
    doc = json.loads(nd.client.timeline.Timeline(md.step_stats).
                     generate_chrome_trace_format(show_dataflow=True,
                                                  show_memory=True))
    validate_trace_events(doc)
    flows = {e["name"] for e in doc["traceEvents"] if e["ph"] == "s"}
    assert {t.edge for t in transfers} <= flows
    ops = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(ops) == sum(len(d.node_stats) for d in md.step_stats.dev_stats)
    names = {e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert {f"{t}/device:CPU:0 Compute" for t in (PS, W0, W1)} <= names
    bare = json.loads(nd.client.timeline.Timeline(md.step_stats)
                      .generate_chrome_trace_format(show_dataflow=False))
    validate_trace_events(bare)
    assert not [e for e in bare["traceEvents"] if e["ph"] in "st"]

    # ProfilerHook writes the same format, flows included, for a cluster step.
    with g.as_default():
        hooks = [nd.train.ProfilerHook(save_steps=1, output_dir=str(tmp_path)),
                 nd.train.StopAtStepHook(num_steps=3)]
        with nd.train.MonitoredTrainingSession(
                master=ps_cluster[1].target, hooks=hooks,
                save_checkpoint_secs=None, save_summaries_steps=None) as sess:
            while not sess.should_stop():
                sess.run(train)
    written = sorted(glob.glob(str(tmp_path / "timeline-*.json")))
    assert written
    with open(written[-1]) as f:
        hooked = json.load(f)
    validate_trace_events(hooked)
    assert {t.edge for t in transfers} <= {
        e["name"] for e in hooked["traceEvents"] if e["ph"] == "s"}


def validate_trace_events(doc) -> None:
    """The Trace Event Format (the JSON object form): the fields each phase
    requires, and flows that start and finish."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    flows: dict = {}
    objects: dict = {}
    for e in doc["traceEvents"]:
        ph = e.get("ph")
        assert ph in {"X", "B", "E", "i", "I", "M", "C", "s", "t", "f", "N", "O",
                      "D"}, e
        assert isinstance(e.get("name"), str) and e["name"], e
        assert isinstance(e.get("pid"), int), e
        if ph == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index",
                                 "thread_sort_index", "process_labels"), e
            assert isinstance(e.get("args"), dict) and "name" in e["args"] or \
                "sort_index" in e.get("args", {}), e
            continue
        assert isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, e
        if ph == "X":
            assert isinstance(e.get("tid"), int), e
            assert isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, e
            assert isinstance(e.get("cat", ""), str)
        elif ph in "stf":
            assert isinstance(e.get("tid"), int) and "id" in e and e.get("cat"), e
            flows.setdefault((e["cat"], e["id"]), []).append((ph, e["ts"]))
        elif ph in "NOD":
            assert "id" in e, e
            objects.setdefault(e["id"], []).append(ph)
        elif ph == "C":
            assert isinstance(e.get("args"), dict) and e["args"], e
            assert all(isinstance(v, (int, float)) for v in e["args"].values()), e
    for key, steps in flows.items():
        phases = [p for p, _ in steps]
        assert phases[0] == "s" and phases[-1] in "tf", (key, phases)
        assert steps[-1][1] >= steps[0][1], (key, steps)
    for object_id, phases in objects.items():
        assert phases[0] == "N", (object_id, phases)


# -- the wire -----------------------------------------------------------------------
def test_traffic_view_counts_calls_and_bytes_per_link_over_a_window_of_steps():
    view = nd.notebook.TrafficView(steps=2, keep=64)
    t = 100.0
    for step in (1, 2, 3):
        view.add(TapEvent("RunGraph", W0, PS, step, 0, t, t + 0.004))
        view.add(TapEvent("RecvTensor", PS, W0, step, 48, t + 0.001, t + 0.002))
        view.add(TapEvent("RecvTensor", W0, PS, step, 52, t + 0.002, t + 0.003))
        t += 0.01
    window = view.window()
    assert {r.step for r in window} == {2, 3}
    assert view.matrix() == {("worker:0", "ps:0"): (4, 104),
                             ("ps:0", "worker:0"): (2, 96)}
    span = view.span_us(window) / 1e6  # 14 ms: from step 2's start to step 3's end
    assert span == pytest.approx(0.014, abs=1e-5)
    text = repr(view)
    assert text.startswith("TrafficView: 6 calls, 200 B between 2 tasks in 2 steps")
    assert f"ps:0 → worker:0: 2 calls, 96 B ({96 / span / 1024:.1f} KB/s, " \
           f"{2 / span:.0f} calls/s)" in text
    face = view._repr_html_()
    assert face.count("class='nbdist-call'") == 6
    assert face.count("class='nbdist-lifeline'") == 2
    assert "<title>RecvTensor ps:0 → worker:0 · step 3 · 48 B (48 bytes)" in face
    assert "data-bytes='104' data-calls='4'" in face
    # Bounded: only the last `keep` records stay.
    for k in range(100):
        view.add(TapEvent("RecvTensor", PS, W0, 10 + k, 1, t + k, t + k))
    assert len(view.records()) == 64


def test_traffic_view_shows_barrier_arrivals_and_releases():
    """From the coordination service's events: each arrival a call to the
    service's task, the passing a release of each participant."""
    from nbdist.runtime.coordination import Event

    view = nd.notebook.TrafficView(steps=1)
    now = int(time.time() * 1e6) + 1000
    both = [W0, W1]
    view.apply(Event(1, now, "barrier_arrival", W1,
                     {"barrier_id": "b", "round": 1, "arrived": [W1],
                      "participants": both}))
    view.apply(Event(2, now + 500, "barrier_arrival", W0,
                     {"barrier_id": "b", "round": 1, "arrived": both,
                      "participants": both}))
    view.apply(Event(3, now + 500, "barrier_passed", W0,
                     {"barrier_id": "b", "round": 1, "participants": both}))
    calls = [(r.kind, r.source, r.destination) for r in view.records()]
    assert calls == [("Barrier", W1, "coordination"), ("Barrier", W0, "coordination"),
                     ("Barrier release", "coordination", W0),
                     ("Barrier release", "coordination", W1)]
    assert repr(view).startswith("TrafficView: 4 calls, 0 B between 3 tasks in 1 round")
    assert view._repr_html_().count("data-kind='Barrier release'") == 2


def test_traffic_view_follows_servers_taps_live(ps_cluster):
    g, _w, train, loss = _ps_graph()
    view = nd.notebook.TrafficView(servers=ps_cluster, steps=3)
    try:
        with nd.Session(ps_cluster[1].target, graph=g) as sess:
            sess.run(nd.variables_initializer(g.get_collection(
                nd.GraphKeys.GLOBAL_VARIABLES)))
            for _ in range(5):
                sess.run([train, loss])
        window = view.window()
        steps = {r.step for r in window if r.kind == "RunGraph"}
        assert len(steps) == 3
        wbytes = np.zeros((4, 3), np.float32).nbytes
        matrix = view.matrix()
        # Per step: each worker pulls w and pushes its loss and gradient.
        assert matrix[("ps:0", "worker:1")][1] == 3 * wbytes
        assert matrix[("worker:1", "ps:0")][1] == 3 * (wbytes + 4)
        assert matrix[("worker:0", "worker:1")][0] == 3  # RunGraph per step
    finally:
        view.close()
    assert view.face().startswith("final state at")


@pytest.mark.timeout(120)
def test_a_local_clusters_tasks_publish_their_taps_to_the_notebook(monkeypatch):
    """LocalCluster 1 ps + 2 workers started with ``NBDIST_TAP_EVENTS=1``: the
    traced step's transfers equal what the three task processes' taps
    published for it."""
    monkeypatch.setenv("NBDIST_TAP_EVENTS", "1")
    g, _w, train, loss = _ps_graph()
    with nd.LocalCluster(ps=1, workers=2) as cluster:
        view = nd.notebook.TrafficView(cluster, steps=1, keep=512)
        try:
            with nd.Session(cluster.target(), graph=g) as sess:
                sess.run(nd.variables_initializer(g.get_collection(
                    nd.GraphKeys.GLOBAL_VARIABLES)))
                sess.run([train, loss])
                md = nd.RunMetadata()
                sess.run([train, loss], options=_full_trace(), run_metadata=md)
            timeline = nd.notebook.TimelineView(md)
            want = _per_link(((t.source, t.destination), t.bytes)
                             for t in timeline.transfers)
            deadline = time.monotonic() + 30
            got: dict = {}
            while time.monotonic() < deadline:
                view.sync(timeout=5)
                steps = {}
                for r in view.records():
                    if r.kind == "RunGraph":
                        steps.setdefault(r.step, r.start_us)
                if steps:
                    last = max(steps, key=steps.get)
                    got = _per_link(
                        ((SHORT[r.source], SHORT[r.destination]), r.nbytes)
                        for r in view.records()
                        if r.step == last and r.kind == "RecvTensor")
                    if got == want:
                        break
                time.sleep(0.1)  # polling the published stream, bounded above
            assert {d.task for d in md.step_stats.dev_stats} == {PS, W0, W1}
            assert got == want and len(want) == 4
        finally:
            view.close()


def test_percluster_magic_shows_traffic_of_an_in_process_server():
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    start_ipython()  # None when it already ran (one test shell per process)
    ip = get_ipython()
    if "nbdist" not in ip.extension_manager.loaded:
        ip.run_line_magic("load_ext", "nbdist")
    ip.run_line_magic("cluster", "local")
    try:
        view = ip.run_line_magic("cluster", "traffic")
        assert isinstance(view, nd.notebook.TrafficView)
        assert "no calls between tasks yet" in view._repr_html_()
    finally:
        ip.run_line_magic("cluster", "stop")
    assert view.face().startswith("final state at")


def test_the_live_timeline_scrubs_through_its_kept_steps(comm):  # noqa: F811
    """``trace(steps=3)`` keeps three steps; the widget's slider shows each,
    the static face the one chosen."""
    g = nd.Graph()
    with g.as_default():
        counter = nd.Variable(0.0, name="counter")
        bump = counter.assign_add(1.0)
        with nd.Session() as sess:
            sess.run(counter.initializer)
            view = nd.notebook.TimelineView.trace(sess, bump, steps=3)
    assert len(view.steps) == 3 and view.current == 2 and view.result == 3.0
    slider, html = view.widget.children
    assert (slider.min, slider.max, slider.value) == (1, 3, 3)
    assert "step 3 of 3" in html.value
    slider.value = 1
    assert view.current == 0
    view.refresh()
    assert "step 1 of 3" in html.value and "step 1 of 3" in repr(view)
    assert view.show_step(-1).current == 2
    bounded = nd.notebook.TimelineView(keep=2)
    for md in view.steps:
        bounded.update(md)
    assert bounded.steps == view.steps[1:]
