"""Every number a view prints, against an independent count of the thing it
names: ``BarrierView``'s "needed" is the optimizer's ``replicas_to_aggregate``
(not the arrivals some round happened to take); ``PlacementView`` of a graph
counts that graph's ops and devices (the master's placement of it), however
many other graphs with the same names ran since; ``TimelineView``'s header
counts the transfers it draws; ``ClusterView``'s failure strip and
``FailureStoryView`` tell the same times; ``TrainingView``'s x-axis says which
step it plots.

Servers are in process (no processes started); events are the servers' own.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
from helpers import local_cluster, wait_for

import nbdist as nd
from nbdist.notebook import BarrierView, PlacementView
from nbdist.train.device_setter import replica_device_setter


# -- BarrierView -----------------------------------------------------------------------
def _sync_worker(cluster, task, replicas_to_aggregate, total):
    """Worker ``task``'s graph of a SyncReplicasOptimizer run; its session
    (the chief's starts the queue runner whose take waits for a round)."""
    g = nd.Graph()
    with g.as_default():
        with nd.device(replica_device_setter(
                cluster=cluster, worker_device=f"/job:worker/task:{task}")):
            gs = nd.train.get_or_create_global_step()
            w = nd.get_variable("w", [4, 1], initializer=nd.zeros_initializer())
            x = nd.constant(np.full((8, 4), task + 1.0, np.float32))
            loss = nd.reduce_mean(nd.square(nd.matmul(x, w) - 1.0))
            opt = nd.train.SyncReplicasOptimizer(
                nd.train.GradientDescentOptimizer(0.01),
                replicas_to_aggregate=replicas_to_aggregate, total_num_replicas=total)
            train_op = opt.minimize(loss, global_step=gs)
        hook = opt.make_session_run_hook(task == 0, num_tokens=total)
        config = nd.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{task}"],
                                operation_timeout_in_ms=20000)
        sess = nd.train.MonitoredTrainingSession(
            master=cluster_targets(cluster)[task], is_chief=task == 0, hooks=[hook],
            config=config, max_wait_secs=30, log_step_count_steps=None)
    return types.SimpleNamespace(graph=g, sess=sess, train_op=train_op, opt=opt)


def cluster_targets(cluster):
    return [f"grpc://{a}" for a in cluster["worker"]]


def test_barrier_view_needs_replicas_to_aggregate_not_the_workers_seen(servers):
    """replicas_to_aggregate=2 of 2 workers: after worker:0's first gradient
    alone, the round has 1 of the 2 it needs (one worker seen, so counting
    participants said "1 of 1 ... releasing"); once worker:1's comes, round 1
    is applied with 2 gradients."""
    cluster = local_cluster(ps=1, worker=2)
    servers(cluster, "ps", 0)
    workers = [servers(cluster, "worker", i) for i in range(2)]
    view = BarrierView(workers[0])
    chief = _sync_worker(cluster, 0, 2, 2)
    try:
        with chief.graph.as_default():
            chief.sess.run(chief.train_op)  # pushes, takes one of the 2 tokens
        wait_for(lambda: view.follower.sync(timeout=5) and view.barriers.get(
            "sync_replicas@ps:0") and view["sync_replicas@ps:0"].arrived, 20,
            "worker:0's push in BarrierView")
        line = "round 1: 1 of 2 needed arrived (worker:0), waiting for 1 more"
        wait_for(lambda: view.follower.sync(timeout=5) and line in repr(view), 10,
                 f"{line!r} (the chief's take asks for 2)")
        rec = view["sync_replicas@ps:0"]
        assert rec.needed == chief.opt._replicas_to_aggregate == 2
        assert rec.round == 0 and rec.arrived == ["worker:0"]
        assert "releasing" not in repr(view)
        other = _sync_worker(cluster, 1, 2, 2)
        try:
            with other.graph.as_default():
                other.sess.run(other.train_op)
            wait_for(lambda: view.follower.sync(timeout=5) and rec.round >= 1, 20,
                     "round 1 in BarrierView")
            done = rec.rounds.done[0]
            assert len(done.arrivals) == 2 == rec.needed
            assert sorted(done.workers) == ["worker:0", "worker:1"]
        finally:
            other.sess.close()
    finally:
        chief.sess.close()
        view.close()


# -- PlacementView ---------------------------------------------------------------------
def _replica_graph(task, cluster):
    g = nd.Graph()
    with g.as_default(), nd.device(replica_device_setter(
            cluster=cluster, worker_device=f"/job:worker/task:{task}")):
        x = nd.constant(np.ones((2, 4), np.float32))
        w = nd.get_variable("w", [4, 3])
        b = nd.get_variable("b", [3], initializer=nd.zeros_initializer())
        loss = nd.reduce_sum(nd.square(nd.matmul(x, w) + b))
        gs = nd.train.get_or_create_global_step()
        train = nd.train.AdamOptimizer(0.1).minimize(loss, global_step=gs)
        init = nd.global_variables_initializer()
    return g, train, init


def test_placement_view_counts_its_graphs_ops_and_devices_after_replicas_ran(servers):
    """Worker 0's graph, viewed while worker 0 and worker 1 (the same graph,
    the same names, on its own worker) each train: the view counts worker 0's
    graph once, on the devices its ops are placed on (notebook 8 showed 403
    ops on 4 devices, worker:1 among them, for a graph of 286 on 3)."""
    cluster = local_cluster(ps=2, worker=2)
    for i in range(2):
        servers(cluster, "ps", i)
    workers = [servers(cluster, "worker", i) for i in range(2)]
    spec = nd.train.ClusterSpec(cluster)
    g0, train0, init0 = _replica_graph(0, cluster)
    g1, train1, _ = _replica_graph(1, cluster)
    view = PlacementView(g0, spec, target=workers[0].target)
    try:
        with g0.as_default(), nd.Session(workers[0].target) as sess:
            sess.run(init0)
            sess.run(train0)
        with g1.as_default(), nd.Session(workers[1].target) as sess:
            sess.run(train1)
        assert view.follower.sync(timeout=10)
        ops = [op for op in g0.get_operations() if not op.name.startswith("_")]
        devices = {nd.DeviceSpec.from_string(op.device).to_string() for op in ops}
        n_ops, n_vars, n_dev = view.state.totals()
        assert (n_ops, n_dev) == (len(ops), len(devices)) == (n_ops, 3)
        assert n_vars == len(g0.get_collection(nd.GraphKeys.GLOBAL_VARIABLES))
        assert not any("/task:1" in d and "worker" in d for d in view.state.devices)
        assert repr(view).startswith(
            f"PlacementView: {len(ops)} ops, {n_vars} variables on 3 devices")
    finally:
        view.close()


# -- TimelineView ----------------------------------------------------------------------
def _all_reduce_step(t0_us):
    """The step stats of an all-reduce step of two workers (one op each, no
    ``_Send``/``_Recv``: the chunks go over the collective's own calls)."""
    from nbdist.proto.config_pb2 import RunMetadata

    md = RunMetadata()
    for task in (0, 1):
        dev = md.step_stats.dev_stats.add()
        dev.device = f"/job:worker/replica:0/task:{task}/device:CPU:0"
        node = dev.node_stats.add()
        node.node_name, node.op_type = "allreduce", "CollectiveReduce"
        node.all_start_micros = t0_us + 10 * task
        node.op_end_rel_micros = node.all_end_rel_micros = 5000
    return md


def test_timeline_header_counts_the_transfers_it_draws():
    """09's all-reduce step: the header said "0 transfers (0 B)" beside the
    chunk arrows the tap saw. Oracle: the arrows in the SVG, their bytes."""
    import re

    from nbdist.notebook import TimelineView
    from nbdist.runtime.tap_record import TapRecord

    t0 = 1_700_000_000_000_000
    w0, w1 = "/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"
    wire = [TapRecord("collective", w0, w1, 1, 4096, t0 + 100, t0 + 900),
            TapRecord("collective", w1, w0, 1, 4096, t0 + 200, t0 + 1100),
            TapRecord("collective", w0, w1, 1, 1000, t0 + 1500, t0 + 2000),
            # another step's, outside this one: not drawn, not counted
            TapRecord("collective", w0, w1, 2, 4096, t0 + 9000, t0 + 9500)]
    view = TimelineView(_all_reduce_step(t0), wire=wire)
    html = view._repr_html_()
    drawn = re.findall(r"<g class='nbdist-transfer[^']*' data-bytes='(\d+)'", html)
    moved = sum(map(int, drawn))
    assert len(drawn) == 3 and moved == 9192
    assert "· 3 transfers (9.0 KB)" in html
    text = repr(view)
    assert "on 2 tasks over 5.0 ms, 3 transfers (9.0 KB)" in text
    assert "worker:0 → worker:1: 2 chunks (seen by the tap)" in text


# -- ClusterView's failure strip and FailureStoryView ----------------------------------
class _Processes:
    """A cluster's processes as ``LocalCluster.tasks`` reports them (the
    ``TaskInfo`` rows both views poll), changed by the test."""

    def __init__(self, tasks):
        self.tasks = tasks


def test_cluster_view_strip_and_failure_story_view_tell_the_same_times():
    """worker:1 killed at 100.0 and started again at 102.0; the service tells
    the restart at 102.4 and the views poll at their own moments, in either
    order: both say killed at 100.0, back at 102.0 (04 showed 'back' 1 s
    apart and gaps 0.1 s apart)."""
    from nbdist.cluster.base import TaskInfo
    from nbdist.notebook.widget_cluster import ClusterState
    from nbdist.notebook.widget_story import FailureStoryView
    from nbdist.runtime.coordination import Event

    def snapshot(pid, state, **times):
        task = TaskInfo("worker", 1, "localhost:2", pid, state)
        for name, value in times.items():
            setattr(task, name, value)
        return [TaskInfo("worker", 0, "localhost:1", 11, "running"), task]

    restarted = Event(1, 102_400_000, "task_state", "/job:worker/replica:0/task:1",
                      {"state": "CONNECTED", "restarted": True, "pid": 13})
    stories = []
    for order in ("event first", "poll first"):
        cluster = _Processes(snapshot(12, "running"))
        rows = ClusterState()
        rows.update_processes(cluster.tasks)
        story = FailureStoryView(cluster, live=False)
        cluster.tasks = snapshot(12, "killed", ended_at=100.0)
        rows.update_processes(cluster.tasks)
        story._poll()
        cluster.tasks = snapshot(13, "running", ended_at=100.0, started_at=102.0)
        if order == "event first":
            rows.apply(restarted)
            story.apply(restarted)
        rows.update_processes(cluster.tasks)
        story._poll()
        if order == "poll first":
            rows.apply(restarted)
            story.apply(restarted)
        stories += [rows.story, story.story]
    for s in stories:
        (ep,) = s.episodes
        assert (ep.task, ep.killed_at, ep.back_at) == ("worker:1", 100.0, 102.0)
        assert "+2.0 s" in s.svg()
    assert len({s.lines() for s in stories}) == 1


def _crowded_step(t0_us):
    """A ps step whose 6 tensors cross at nearly the same moment, beside the
    ps's update bars (09's step: labels overprinted each other and the bars)."""
    from nbdist.proto.config_pb2 import RunMetadata

    md = RunMetadata()
    ps, worker = md.step_stats.dev_stats.add(), md.step_stats.dev_stats.add()
    ps.device = "/job:ps/replica:0/task:0/device:CPU:0"
    worker.device = "/job:worker/replica:0/task:0/device:CPU:0"

    def node(dev, name, op, start, length, nbytes=0):
        n = dev.node_stats.add()
        n.node_name, n.op_type = name, op
        n.all_start_micros = t0_us + start
        n.op_end_rel_micros = n.all_end_rel_micros = length
        if nbytes:
            n.output.add().tensor_description.allocated_bytes = nbytes

    for i in range(6):  # w_i read on the ps, sent to the worker, its gradient back
        node(ps, f"_send/edge_{i}_w{i}", "_Send", 100 + 20 * i, 10)
        node(worker, f"_recv/edge_{i}_w{i}", "_Recv", 120 + 20 * i, 300, 4096 * (i + 1))
        node(worker, f"_send/edge_{10 + i}_grad{i}", "_Send", 900 + 20 * i, 10)
        node(ps, f"_recv/edge_{10 + i}_grad{i}", "_Recv", 920 + 20 * i, 200, 4096)
        node(ps, f"update_w{i}", "ApplyGradientDescent", 1200 + 60 * i, 50)
    node(worker, "matmul", "MatMul", 500, 300)
    return md


def _boxes(html, cls):
    """(x, top, width, height) of each ``<text class=cls>`` (6 px a character
    of a 10 px font, 11 px a line) and each ``<rect class=cls>``."""
    import re

    out = []
    for m in re.finditer(rf"<text class='{cls}' x='([\d.]+)' y='([\d.]+)'[^>]*>(.*?)"
                         r"</text>", html):
        lines = re.findall(r"<tspan[^>]*>(.*?)</tspan>", m.group(3)) or [m.group(3)]
        width = 6.0 * max(len(x.replace("&amp;", "&")) for x in lines)
        out.append((float(m.group(1)), float(m.group(2)) - 9, width, 11 * len(lines)))
    for m in re.finditer(rf"<rect class='{cls}' data-kind='update' x='([\d.]+)' "
                         r"y='([\d.]+)' width='([\d.]+)' height='([\d.]+)'", html):
        out.append(tuple(float(v) for v in m.groups()))
    return out


def _overlap(a, b):
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and \
        b[1] < a[1] + a[3]


def test_timeline_labels_overlap_neither_each_other_nor_the_update_bars():
    from nbdist.notebook import TimelineView

    html = TimelineView(_crowded_step(1_700_000_000_000_000))._repr_html_()
    labels = _boxes(html, "nbdist-transfer-label")
    bars = _boxes(html, "nbdist-op")
    assert len(labels) == 2 and len(bars) == 6  # a label per link; 6 updates
    for i, a in enumerate(labels):
        assert not any(_overlap(a, b) for b in labels[i + 1:]), a
        assert not any(_overlap(a, b) for b in bars), a


def test_a_label_goes_further_off_its_arrow_rather_than_cover_a_bar():
    """Under load a step's ops stretch, and every spot near an arrow may lie on a
    bar (the tour's 09 drew a label over an update bar so). Oracle: a band of
    bars 120 px tall around the arrow; the label lands clear of it."""
    from nbdist.notebook.widget_timeline import _Labels

    band = (0.0, 140.0, 1000.0, 120.0)  # x, top, width, height: y 140..260
    labels = _Labels(bars=[band], bottom=1000.0)
    spot = labels.place(100.0, 200.0, 300.0, 200.0, 60.0, 13.0)
    assert spot is not None
    assert not _overlap((*spot, 60.0, 13.0), band), spot
    # With no clear spot anywhere, the label is still placed (over a bar).
    everywhere = _Labels(bars=[(0.0, 0.0, 1000.0, 1000.0)], bottom=1000.0)
    assert everywhere.place(100.0, 200.0, 300.0, 200.0, 60.0, 13.0) is not None


# -- CollectiveView --------------------------------------------------------------------
def test_collective_view_units_agree_and_member_names_fit_their_circles():
    """06: sizes in MiB beside bandwidths in MB/s, and "worker:0" spilling out
    of its 34 px circle. Oracle: bytes / 2**20 / seconds of each link."""
    import re

    from nbdist.notebook import CollectiveView
    from nbdist.runtime.collective import ChunkEvent

    tasks = [f"/job:worker/replica:0/task:{i}" for i in range(3)] + [
        "/job:ps/replica:0/task:12"]
    events = [ChunkEvent(1, 1, 0, "reduce-scatter", 0, 0, tasks[i], tasks[(i + 1) % 4],
                         (i + 1) << 20, 0.0, 0.004 * (i + 1)) for i in range(4)]
    view = CollectiveView(events)
    html, text = view._repr_html_(), repr(view)
    assert "MB/s" not in html and "MB/s" not in text
    for link in view.links():
        rate = f"{link.nbytes / 2**20 / link.seconds:.0f} MiB/s"
        assert rate == "250 MiB/s" and rate in text and f">{rate}</tspan>" in html
    names = re.findall(r"<g class='nbdist-member'.*?font-weight='600'>(.*?)</text>",
                       html)
    assert sorted(names) == ["ps12", "w0", "w1", "w2"]
    radius = float(re.search(r"<g class='nbdist-member'.*?r='([\d.]+)'", html)[1])
    # 7 px a character of a bold 10 px font: generous.
    assert all(7 * len(n) <= 2 * radius - 4 for n in names)


# -- at 32 workers ----------------------------------------------------------------------
def test_cluster_view_of_2_ps_and_32_workers_is_a_grid_and_grouped_history():
    """2 ps + 32 workers: 34 cells coloured by state and one history line per
    group of changes (it was a 34-row table and 34 "started" lines, 1,631 px
    tall). Oracle: the tasks the spec names, the changes noted."""
    import re

    from nbdist.notebook import ClusterView

    spec = nd.train.ClusterSpec({
        "ps": [f"localhost:{2000 + i}" for i in range(2)],
        "worker": [f"localhost:{3000 + i}" for i in range(32)]})
    view = ClusterView(spec, live=False)
    t0 = 1_800_000_000.0
    for i, row in enumerate(view.state.sorted_rows()):
        row.process = "running"
        row.note("started", t0 + 0.02 * i)
    view.state.rows["worker:7"].process = "killed"
    view.state.rows["worker:7"].note("killed", t0 + 30)
    html, text = view._repr_html_(), repr(view)
    cells = re.findall(r"class='nbdist-task-cell' data-task='([^']+)' "
                       r"data-state='([^']+)'", html)
    assert len(cells) == 34 and len({t for t, _ in cells}) == 34
    assert dict(cells)["worker:7"] == "killed"
    assert sum(s == "running" for _, s in cells) == 33
    assert "<tr class='nbdist-task'" not in html
    history = re.findall(r"<tr class='nbdist-history'", html)
    assert len(history) == 3  # the workers started, the ps started, one kill
    assert re.search(r"32 workers started \d\d:\d\d:\d\d\b", text)
    assert "2 ps started" in text and "worker:7  " in text
    assert "  worker   32: 31 running, 1 killed (worker:7)" in text
    assert len(text.splitlines()) <= 10


def test_traffic_view_of_34_tasks_is_a_heat_map_of_every_link():
    """2 ps + 32 workers: one square per (source, destination) that carried
    calls, its bytes and calls those of the records (no 34-lifeline sequence
    diagram, no 34 × 34 table of cells)."""
    import re

    from nbdist.notebook import TrafficView
    from nbdist.runtime.tap import TapEvent

    view = TrafficView(steps=None)
    expected = {}
    for w in range(32):
        worker = f"/job:worker/replica:0/task:{w}"
        for p in range(2):
            ps = f"/job:ps/replica:0/task:{p}"
            for k in range(1 + w % 3):  # RunGraph calls of various sizes
                view.add(TapEvent("RunGraph", worker, ps, k, 1000 * (w + 1), 1.0,
                                  1.001))
            expected[(f"worker:{w}", f"ps:{p}")] = (1 + w % 3, 1000 * (w + 1) * (
                1 + w % 3))
    html, text = view._repr_html_(), repr(view)
    cells = {(m[0], m[1]): (int(m[3]), int(m[2])) for m in re.findall(
        r"<rect class='nbdist-heat-cell' data-source='([^']+)' "
        r"data-destination='([^']+)' data-bytes='(\d+)' data-calls='(\d+)'", html)}
    assert cells == expected
    assert "nbdist-lifeline" not in html and "nbdist-traffic-matrix" not in html
    assert "… 52 more links (the 12 busiest shown)" in text


def test_barrier_view_of_32_workers_shows_how_their_gradients_arrived():
    """replicas_to_aggregate=32 of 32 workers: a histogram of the last round's
    arrivals (its bars count every gradient) instead of 32 chips and a
    32-row grid; lines name the few largest waits, not 32 of each."""
    import re

    from nbdist.notebook.barrier_rounds import RoundTracker
    from nbdist.notebook.widget_barrier import BarrierRecord

    workers = [f"worker:{i}" for i in range(32)]
    rounds = RoundTracker()
    for step_id, w in enumerate(workers):
        rounds.name(step_id, w)
    for local_step in range(2):
        for step_id in range(32):  # worker:31 last, 150 ms after the first
            t = 10.0 * local_step + (0.150 if step_id == 31 else 0.002 * step_id)
            rounds.push(step_id, {"local_step": local_step, "time": t})
        rounds.complete_oldest()
    rounds.push(0, {"local_step": 2, "time": 30.0})  # settles round 2
    view = BarrierView(live=False)
    view.state.barriers["sync"] = BarrierRecord(
        "sync", "SyncReplicas", workers, [], 2, rounds=rounds, needed=32)
    html, text = view._repr_html_(), repr(view)
    bins = [int(c) for c in re.findall(r"class='nbdist-arrival-bin' data-count='(\d+)'",
                                        html)]
    assert sum(bins) == 32 and bins[-1] == 1  # worker:31, alone at the far right
    assert "32 gradients arrived over 150 ms" in html
    assert "class='chip' style='background:#dafbe1" not in html  # no chips
    assert "nbdist-rounds" not in html  # no 32-row grid
    assert "round 3: none of 32 arrived yet" in text
    assert max(len(line) for line in text.splitlines()) < 160
    assert "worker:0 150 ms" in text and "(largest; +29 more)" in text


def test_barrier_view_of_32_workers_names_a_few_of_those_it_waits_for():
    from nbdist.notebook.widget_barrier import BarrierRecord

    workers = [f"worker:{i}" for i in range(32)]
    view = BarrierView(live=False)
    view.state.barriers["sync"] = BarrierRecord(
        "sync", "SyncReplicas", workers, ["worker:0"], 0, needed=32)
    assert repr(view).endswith("round 1: 1 of 32 arrived (worker:0), waiting for "
                               "worker:1, worker:2, worker:3, … (+28)")
