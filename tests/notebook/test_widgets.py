"""The event follower and the widgets.

Most tests feed an in-process event source (the coordination service's own
logic, no RPC) and draw ipywidgets on a dummy comm (no kernel), as ipywidgets'
own tests do. Oracles: the service's own log (every sequence number once, in
order), NumPy byte counts, the master's placement (partition graphs of a real
step), ``RunMetadata`` of a real step. The last test follows a 200-step
training run on a real ``LocalCluster``.
"""

from __future__ import annotations

import collections
import threading
import time

import numpy as np
import pytest
from helpers import wait_for

from nbdist.notebook.events import EventFollower, ServiceEventSource, Throttle
from nbdist.runtime.coordination import CoordinationService, Event

W0, W1, PS0, PS1 = (
    "/job:worker/replica:0/task:0",
    "/job:worker/replica:0/task:1",
    "/job:ps/replica:0/task:0",
    "/job:ps/replica:0/task:1",
)


@pytest.fixture
def service():
    s = CoordinationService(
        [W0, W1, PS0, PS1],
        heartbeat_interval_ms=50,
        heartbeat_timeout_ms=600_000,
        max_events=100_000,
    )
    yield s
    s.stop()


class DummyComm:
    """What ipywidgets' tests use instead of a kernel's comm."""

    kernel = "Truthy"
    _ids = iter(range(10**9))

    def __init__(self, **kwargs):
        self.comm_id = f"dummy-{next(self._ids)}"
        self.messages = []
        self.handlers = []

    def open(self, *a, **k):
        pass

    def on_msg(self, fn):
        self.handlers.append(fn)

    def send(self, data=None, metadata=None, buffers=None):
        self.messages.append(data)

    def close(self, *a, **k):
        pass


@pytest.fixture
def comm(monkeypatch):
    import ipywidgets.comm

    monkeypatch.setattr(ipywidgets.comm, "create_comm", lambda **kw: DummyComm(**kw))
    return DummyComm


# -- the follower ---------------------------------------------------------------------
def test_follower_delivers_every_event_once_in_order_while_published_concurrently(
    service,
):
    follower = EventFollower(ServiceEventSource(service))
    seqs = []
    follower.subscribe(lambda e: seqs.append(e.seq))
    follower.start()

    def publish(task):
        for i in range(500):
            service.publish("step", task, {"step_id": i})

    threads = [threading.Thread(target=publish, args=(t,)) for t in (W0, W1, PS0, PS1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert follower.sync(timeout=10)
    follower.stop()
    assert seqs == list(range(1, 2001))
    assert follower.gaps == 0


class FlakySource:
    """A source whose streams break every ``every`` events and that replays
    from a little before where it was asked to (as a reconnect might)."""

    def __init__(self, service, every=7):
        self.inner = ServiceEventSource(service)
        self.every = every
        self.opened = []

    def watch(self, from_seq=0, kinds=None):
        self.opened.append(from_seq)
        inner = self.inner.watch(max(1, from_seq - 3), kinds)
        every = self.every

        def gen():
            for n, e in enumerate(inner, 1):
                yield e
                if n >= every:
                    inner.cancel()
                    raise ConnectionError("stream broken")

        return gen()


def test_follower_resumes_after_broken_streams_without_loss_or_duplicates(service):
    source = FlakySource(service)
    follower = EventFollower(source, retry_s=0.01)
    seqs = []
    follower.subscribe(lambda e: seqs.append(e.seq))
    follower.start()
    for i in range(100):
        service.publish("step", W0, {"step_id": i})
    wait_for(lambda: len(seqs) >= 100, 10.0, "100 events delivered")
    follower.stop()
    assert seqs == list(range(1, 101))
    assert follower.errors >= 10 and len(source.opened) >= 10


def test_follower_counts_events_the_bounded_log_dropped():
    s = CoordinationService([W0], max_events=10)
    try:
        for i in range(25):
            s.publish("step", W0, {"step_id": i})
        follower = EventFollower(ServiceEventSource(s))
        seqs = []
        follower.subscribe(lambda e: seqs.append(e.seq))
        follower.start()
        assert follower.sync(5)
        follower.stop()
        assert seqs == list(range(16, 26))  # the oldest kept onwards
    finally:
        s.stop()


def test_follower_stops_promptly_while_waiting(service):
    follower = EventFollower(ServiceEventSource(service)).start()
    time.sleep(0.1)
    start = time.monotonic()
    follower.stop()
    assert time.monotonic() - start < 1.0
    assert not follower.running


def test_a_failing_subscriber_does_not_stop_the_others(service):
    follower = EventFollower(ServiceEventSource(service))
    got = []
    follower.subscribe(lambda e: 1 / 0)
    follower.subscribe(got.append)
    follower.start()
    service.publish("step", W0, {})
    service.publish("step", W0, {})
    assert follower.sync(5)
    follower.stop()
    assert [e.seq for e in got] == [1, 2]


def test_throttle_coalesces_and_always_draws_the_last_state():
    calls = []
    state = {"n": 0}
    t = Throttle(lambda: calls.append(state["n"]), interval=0.05)
    for i in range(1, 201):
        state["n"] = i
        t.poke()
    t.close()
    assert calls[-1] == 200
    assert len(calls) < 50


def test_a_throttle_holds_a_thread_only_while_it_is_poked():
    """A view nobody closes (made in a loop, or in a test) keeps no thread once
    its source is quiet; the next change draws again."""
    calls = []

    def threads():
        return [t for t in threading.enumerate() if t.name == "nbdist-throttle-test"]

    t = Throttle(lambda: calls.append(1), interval=0.01, name="nbdist-throttle-test",
                 idle_s=0.2)
    assert threads() == []  # never poked: no thread
    t.poke()
    wait_for(lambda: calls, 10, "a draw after the first poke")
    wait_for(lambda: not threads(), 10, "the idle throttle's thread to end")
    t.poke()
    wait_for(lambda: len(calls) == 2, 10, "a draw after a poke once idle")
    t.close()
    assert not threads() and len(calls) == 2


# -- ClusterView ----------------------------------------------------------------------
class FakeCluster:
    """A LocalCluster's public surface, without processes."""

    def __init__(self):
        from nbdist.cluster.local_cluster import TaskInfo
        from nbdist.runtime.cluster_spec import ClusterSpec

        self.cluster_spec = ClusterSpec(
            {"worker": ["localhost:1001", "localhost:1002"], "ps": ["localhost:1003"]}
        )
        self._info = TaskInfo
        self._tasks = {("worker", 0): 100, ("worker", 1): 101, ("ps", 0): 102}
        self._state = {k: "running" for k in self._tasks}
        self.calls = []

    @property
    def tasks(self):
        return [
            self._info(
                j, i, self.cluster_spec.task_address(j, i), pid, self._state[(j, i)]
            )
            for (j, i), pid in self._tasks.items()
        ]

    def kill(self, job, index):
        self.calls.append(("kill", job, index))
        self._state[(job, index)] = "killed"

    def restart(self, job, index):
        self.calls.append(("restart", job, index))
        self._tasks[(job, index)] += 1000
        self._state[(job, index)] = "running"


def _ev(seq, kind, task, **payload):
    return Event(seq, 0, kind, task, payload)


def test_cluster_view_merges_processes_and_events(service):
    from nbdist.notebook import ClusterView

    cluster = FakeCluster()
    view = ClusterView(cluster, source=ServiceEventSource(service))
    try:
        for t, pid, port in ((W0, 100, 1001), (W1, 101, 1002), (PS0, 102, 1003)):
            service.register_task(
                t, incarnation=1, address=f"localhost:{port}", pid=pid
            )
        for _ in range(3):
            service.publish("step", W0, {"task": W0, "step_id": 1})
        service.publish("step", PS0, {"task": PS0, "step_id": 1})
        view.sync()
        rows = view.state.rows
        assert (rows["worker:0"].steps, rows["ps:0"].steps, rows["worker:1"].steps) == (
            3,
            1,
            0,
        )
        assert all(r.state == "running" for r in rows.values())
        text = repr(view)
        assert text.splitlines()[0] == "ClusterView: 3 tasks: 3 running  (live)"
        assert "worker:1  localhost:1002  101  running  0" in text
        html = view._repr_html_()
        assert html.count("class='nbdist-task'") == 3 and "localhost:1003" in html

        view.kill("worker:1")
        assert rows["worker:1"].state == "killed"
        view.restart("worker:1")
        service.register_task(
            W1, incarnation=2, address="localhost:1002", pid=1101
        )  # it is back
        view.sync()
        assert rows["worker:1"].state == "running" and rows["worker:1"].pid == 1101
        assert rows["worker:1"].restarts == 1 and "↻1" in repr(view)
        assert cluster.calls == [("kill", "worker", 1), ("restart", "worker", 1)]
    finally:
        view.close()


def test_cluster_view_shows_a_silent_task_as_unresponsive():
    from nbdist.notebook.widget_cluster import ClusterState
    from nbdist.runtime.cluster_spec import ClusterSpec

    state = ClusterState(ClusterSpec({"worker": ["a:1"]}))
    state.apply(_ev(1, "task_state", W0, state="CONNECTED", pid=7, address="a:1"))
    assert state.rows["worker:0"].state == "running"
    state.apply(_ev(2, "task_state", W0, state="DISCONNECTED"))
    assert state.rows["worker:0"].state == "unresponsive"


def test_kill_and_restart_buttons_run_the_code_of_the_magics(comm, monkeypatch):
    from nbdist.notebook import ClusterView, control

    calls = []
    real_kill, real_restart = control.kill, control.restart
    monkeypatch.setattr(
        control, "kill", lambda c, t: (calls.append(("kill", t)), real_kill(c, t))[1]
    )
    monkeypatch.setattr(
        control,
        "restart",
        lambda c, t: (calls.append(("restart", t)), real_restart(c, t))[1],
    )
    cluster = FakeCluster()
    view = ClusterView(cluster, live=False)
    try:
        box = view.widget
        buttons = [w for w in _walk(box) if type(w).__name__ == "Button"]
        assert [b.description for b in buttons] == ["kill", "restart"] * 3 + [
            "slow", "partition", "heal"]  # the fault bar (widget_faults)
        kill_w1 = next(b for b in buttons if b.tooltip == "kill worker:1")
        kill_w1.click()
        wait_for(lambda: cluster.calls == [("kill", "worker", 1)], 10.0, "the kill")
        next(b for b in buttons if b.tooltip == "restart ps:0").click()
        wait_for(lambda: len(cluster.calls) == 2, 10.0, "the restart")
        assert calls == [("kill", "worker:1"), ("restart", "ps:0")]
        wait_for(lambda: "restarted ps:0" in view.message, 10.0, "its message")
        view.refresh()
        cells = view._cells["worker:1"]
        assert "killed" in cells[3].value
    finally:
        view.close()


def _walk(w):
    yield w
    for c in getattr(w, "children", ()):
        yield from _walk(c)


def test_widget_updates_live_from_a_background_thread(comm, service):
    """Events published while "a cell runs" reach the widget through its comm,
    all of them, the last state last."""
    from nbdist.notebook import ClusterView

    view = ClusterView(FakeCluster(), source=ServiceEventSource(service))
    try:
        box = view.widget
        cells = view._cells["worker:0"]
        step_cell = cells[4]

        def train():
            for i in range(300):
                service.publish("step", W0, {"task": W0, "step_id": i})

        t = threading.Thread(target=train)
        t.start()
        t.join()
        view.sync()
        assert view.state.rows["worker:0"].steps == 300
        assert view.received == 300 and view.last_seq == 300 and view.out_of_order == 0
        sent = [
            m["state"]["value"]
            for m in step_cell.comm.messages
            if m and m.get("method") == "update" and "value" in m.get("state", {})
        ]
        assert sent and sent[-1].startswith("<div class='nbdist'>300")
        numbers = [int(v.split(">")[1].split(" ")[0]) for v in sent]
        assert numbers == sorted(numbers)  # never drawn out of order
        assert box is view.widget
    finally:
        view.close()


def test_mimebundle_outside_and_inside_a_kernel(comm, monkeypatch):
    from nbdist.notebook import ClusterView, live_view

    view = ClusterView(FakeCluster(), live=False)
    try:
        bundle = view._repr_mimebundle_()
        assert set(bundle) == {"text/plain", "text/html"}
        assert bundle["text/plain"].startswith("ClusterView: 3 tasks")
        monkeypatch.setattr(live_view, "in_kernel", lambda: True)
        bundle = view._repr_mimebundle_()
        assert set(bundle) == {
            "text/plain",
            "text/html",
            "application/vnd.jupyter.widget-view+json",
        }
        assert bundle["text/plain"].startswith("ClusterView: 3 tasks")
    finally:
        view.close()


# -- PlacementView --------------------------------------------------------------------
def _model(ps_strategy=None):
    import nbdist as nd

    spec = nd.ClusterSpec(
        {"ps": ["localhost:1", "localhost:2"], "worker": ["localhost:3"]}
    )
    g = nd.Graph()
    with (
        g.as_default(),
        nd.device(
            nd.train.replica_device_setter(
                ps_tasks=2,
                worker_device="/job:worker/task:0",
                cluster=spec,
                ps_strategy=ps_strategy,
            )
        ),
    ):
        x = nd.placeholder(nd.float32, [None, 100], name="x")
        w1 = nd.get_variable("w1", [100, 50])
        b1 = nd.get_variable("b1", [50], dtype=nd.float64)
        w2 = nd.get_variable("w2", [50, 3])
        y = nd.matmul(
            nd.cast(nd.matmul(x, w1), nd.float64) + b1, nd.cast(w2, nd.float64)
        )
    return g, spec, y


def test_placement_view_bytes_per_ps_and_variables_per_device():
    from nbdist.notebook import PlacementView

    g, spec, _ = _model()
    view = PlacementView(g, spec)
    bars = {t: (b, n) for t, b, n in view.state.ps_bytes()}
    f4, f8 = np.dtype(np.float32).itemsize, np.dtype(np.float64).itemsize
    # Round robin: w1 and w2 on ps:0, b1 on ps:1.
    assert bars["/job:ps/replica:0/task:0"] == ((100 * 50 + 50 * 3) * f4, 2)
    assert bars["/job:ps/replica:0/task:1"] == (50 * f8, 1)
    text = repr(view)
    assert "w1  (100, 50) float32  20.0 KB" in text
    html = view._repr_html_()
    assert html.count("class='nbdist-ps-bar'") == 2
    assert "/job:worker/replica:0/task:0/device:CPU:0" in html
    assert view.follower is None  # a ClusterSpec alone has nothing to follow


def test_placement_view_balances_with_greedy_strategy():
    import nbdist as nd
    from nbdist.notebook import PlacementView

    g, spec, _ = _model(
        nd.train.GreedyLoadBalancingStrategy(2, nd.train.byte_size_load_fn)
    )
    bytes_ = [b for _, b, _ in PlacementView(g, spec).state.ps_bytes()]
    assert max(bytes_) == 100 * 50 * 4  # the biggest variable alone on one ps


def test_placement_view_agrees_with_the_master(servers):
    """Oracle: the partition graphs the master made for a real step."""
    from helpers import local_cluster

    import nbdist as nd
    from nbdist.notebook import PlacementView

    cluster = local_cluster(ps=2, worker=1)
    started = [servers(cluster, j, i) for j, i in (("ps", 0), ("ps", 1), ("worker", 0))]
    g = nd.Graph()
    with g.as_default():
        with nd.device(
            nd.train.replica_device_setter(
                ps_tasks=2, worker_device="/job:worker/task:0"
            )
        ):
            w = nd.get_variable("w", [4, 3])
            b = nd.get_variable("b", [3], initializer=nd.zeros_initializer())
            y = nd.reduce_sum(nd.matmul(nd.ones([2, 4]), w) + b, name="y")
        z = nd.identity(y, name="z")  # no device: the target's task
        opts = nd.RunOptions(output_partition_graphs=True)
        meta = nd.RunMetadata()
        with nd.Session(started[2].target) as sess:
            sess.run(nd.global_variables_initializer())
            sess.run(z, options=opts, run_metadata=meta)
    master = {
        n.name: n.device
        for pg in meta.partition_graphs
        for n in pg.node
        if not n.op.startswith("_")
    }
    view = PlacementView(g, started[2].cluster_spec, live=False)
    mine = {name: row.device for row in view.state.devices.values() for name in row.ops}
    for name, device in master.items():
        assert mine[name] == device, name


def test_placement_view_follows_graph_registrations(service):
    import nbdist as nd
    from nbdist.notebook import PlacementView

    g = nd.Graph()
    with g.as_default():
        nd.constant(1.0, name="c")
    view = PlacementView(g, source=ServiceEventSource(service), follow_all=True)
    mine = PlacementView(g, source=ServiceEventSource(service))  # only g's ops
    try:
        service.publish(
            "graph_registered",
            PS0,
            {
                "task": PS0,
                "graph_handle": "s/g1",
                "nodes": [
                    ["v", "VariableV2", PS0 + "/device:CPU:0"],
                    ["_send_v", "_Send", PS0 + "/device:CPU:0"],
                ],
            },
        )
        service.publish(
            "variable_created",
            PS0,
            {
                "name": "v",
                "device": PS0 + "/device:CPU:0",
                "shape": [10, 10],
                "dtype": "float32",
                "bytes": 400,
            },
        )
        view.sync()
        row = view.state.devices[PS0 + "/device:CPU:0"]
        assert set(row.ops) == {"v"} and row.variables["v"][2] == 400
        mine.sync()
        assert list(mine.state.devices) == [
            "/job:localhost/replica:0/task:0/device:CPU:0"
        ]
        assert mine.received == 2  # seen, and left out
    finally:
        view.close()
        mine.close()


# -- BarrierView ----------------------------------------------------------------------
def test_barrier_view_follows_coordination_barriers(service):
    from nbdist import errors
    from nbdist.notebook import BarrierView

    view = BarrierView(source=ServiceEventSource(service))
    try:
        tasks = [W0, W1]
        for _ in range(3):
            ts = [
                threading.Thread(target=service.barrier, args=("b", 5, tasks, t))
                for t in tasks
            ]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        t = threading.Thread(target=service.barrier, args=("b", 5, tasks, W0))
        t.start()
        wait_for(lambda: service.barriers()["b"][1] == [W0], 10.0, "the arrival")
        view.sync()
        rec = view["b"]
        assert (rec.round, rec.arrived, rec.participants) == (
            3,
            ["worker:0"],
            ["worker:0", "worker:1"],
        )
        assert (
            "b (coordination): 3 rounds completed; round 4: 1 of 2 arrived "
            "(worker:0), waiting for worker:1" in repr(view)
        )
        service.barrier("b", 5, tasks, W1)
        t.join()
        with pytest.raises(errors.DeadlineExceededError):
            service.barrier("b", 0.1, tasks, W0)
        view.sync()
        assert rec.status == "timed out" and rec.missing == ["worker:1"]
        assert rec.round == 4 and "never arrived: worker:1" in repr(view)
        assert "nbdist-barrier" in view._repr_html_()
    finally:
        view.close()


def _sync_replicas_events(rounds, order):
    """Events of a SyncReplicas run: the chief's aggregation graph and each
    worker's push graph on ps:0; per round, both workers' steps (their two
    partitions) and the aggregation step, published in ``order``."""
    events = [
        (
            "graph_registered",
            PS0,
            {
                "task": PS0,
                "graph_handle": "c/g7",
                "nodes": [["take", "AccumulatorTakeGradients", "d"]],
            },
        ),
    ]
    for w, h in ((W0, "c/g8"), (W1, "k/g2")):
        events.append(
            (
                "graph_registered",
                PS0,
                {
                    "task": PS0,
                    "graph_handle": h,
                    "nodes": [["apply", "AccumulatorApplyGradient", "d"]],
                },
            )
        )
        # Same handle on the worker task: handles are unique per task only.
        events.append(
            (
                "graph_registered",
                w,
                {"task": w, "graph_handle": h, "nodes": [["grad", "MatMul", "d"]]},
            )
        )
    for step in range(1, rounds + 1):
        chunk = [
            ("step", PS0, {"task": PS0, "graph_handle": "c/g7", "step_id": 1000 + step})
        ]
        for w, h in ((W0, "c/g8"), (W1, "k/g2")):
            sid = 10 * step + (w == W1)
            ps_part = ("step", PS0, {"task": PS0, "graph_handle": h, "step_id": sid})
            w_part = ("step", w, {"task": w, "graph_handle": h, "step_id": sid})
            chunk += [ps_part, w_part] if order == "ps-first" else [w_part, ps_part]
        events += chunk
    return events


@pytest.mark.parametrize("order", ["ps-first", "worker-first"])
def test_barrier_view_derives_sync_replicas_rounds(order):
    from nbdist.notebook import BarrierView

    view = BarrierView(live=False)
    for seq, (kind, task, payload) in enumerate(_sync_replicas_events(5, order), 1):
        view.apply(Event(seq, 0, kind, task, payload))
    rec = view["sync_replicas@ps:0"]
    assert rec.kind == "SyncReplicas" and rec.round == 5
    assert rec.participants == ["worker:0", "worker:1"]
    assert rec.arrived == ["worker:0", "worker:1"]  # both took round 5's token
    assert [r for r, _ in rec.history] == [1, 2, 3, 4, 5]


# -- TimelineView -------------------------------------------------------------------
def test_timeline_view_draws_every_op_of_a_traced_step(servers):
    from helpers import local_cluster

    import nbdist as nd
    from nbdist.notebook import TimelineView

    cluster = local_cluster(ps=1, worker=1)
    started = [servers(cluster, "ps", 0), servers(cluster, "worker", 0)]
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:ps/task:0"):
            w = nd.Variable(np.ones((8, 8), np.float32), name="w")
        with nd.device("/job:worker/task:0"):
            y = nd.reduce_sum(nd.matmul(w, w), name="y")
        with nd.Session(started[1].target) as sess:
            sess.run(w.initializer)
            view = TimelineView.trace(sess, y, title="one step")
    assert view.result == pytest.approx(8 * 8 * 8)
    stats = view.run_metadata.step_stats
    n = sum(len(d.node_stats) for d in stats.dev_stats)
    assert len(view.spans) == n > 0
    assert view.tasks() == ["worker:0", "ps:0"]
    assert all(s.end_us >= s.start_us >= 0 for s in view.spans)
    html = view._repr_html_()
    assert html.count("<rect") >= n and html.count("class='nbdist-lane'") == 2
    assert repr(view).startswith(f"TimelineView: {n} ops on 2 tasks over ")


# -- CellRunView ------------------------------------------------------------------------
def test_cell_run_view_tabs_per_task(comm):
    from nbdist.notebook.cell_runner import TaskRun
    from nbdist.notebook.widget_cell import CellRunView

    runs = [TaskRun("worker", 0), TaskRun("worker", 1)]
    view = CellRunView(runs)
    assert (
        repr(view) == "%%cluster on worker:0, worker:1 (each task's output in its tab)"
    )
    box = view.widget
    runs[0].status, runs[1].status = "done", "error"
    runs[0].output.append(("stdout", "hello\n"))
    runs[1].traceback = "Traceback...\nValueError: no\n"
    view.refresh()
    tabs = box.children[1]
    assert tabs.titles == ("✓ worker:0", "✗ worker:1")
    assert tabs.selected_index == 1  # the failure's tab is opened
    assert view._outputs[0].outputs[0]["text"] == "hello\n"
    assert "ValueError: no" in view._outputs[1].outputs[-1]["text"]
    view.close()


# -- a real cluster --------------------------------------------------------------------
@pytest.mark.slow
def test_a_view_receives_every_event_of_a_200_step_training_run_in_order():
    """Oracle: an independent raw watch of the same stream, from 0."""
    import nbdist as nd
    from nbdist.notebook import ClusterView
    from nbdist.notebook.events import event_source_for

    with nd.LocalCluster(ps=1, workers=1, progress=False) as cluster:
        kinds = collections.Counter()
        seqs = []

        def count(e):
            kinds[e.kind] += 1
            seqs.append(e.seq)

        # One follower shared by the view and a counter (as %cluster shares one).
        follower = EventFollower(event_source_for(cluster))
        follower.subscribe(count)
        view = ClusterView(cluster, follower=follower)
        try:
            with nd.Graph().as_default():
                with nd.device("/job:ps/task:0"):
                    v = nd.Variable(0.0, name="v")
                with nd.device("/job:worker/task:0"):
                    inc = v.assign_add(nd.constant(1.0) * 1.0)
                with nd.Session(cluster.target("worker", 0)) as sess:
                    sess.run(v.initializer)
                    for _ in range(200):
                        sess.run(inc)
                    assert sess.run(v) == 200.0
            assert view.sync(timeout=20)
            raw = []
            watch = event_source_for(cluster).watch(0)
            while len(raw) < view.last_seq:
                e = watch.next(10)
                assert e is not None
                raw.append(e)
            watch.stop()
        finally:
            view.close()
            follower.stop()
    assert seqs == [e.seq for e in raw] == list(range(1, view.last_seq + 1))
    assert view.received == len(raw) and view.out_of_order == 0
    steps = [e for e in raw if e.kind == "step"]
    assert kinds["step"] == len(steps)
    # 200 training steps + the initializer + the final read; the ps served the
    # assign_add of every training step.
    ps_steps = sum(1 for e in steps if e.task == PS0)
    assert ps_steps >= 201
    rows = view.state.rows
    assert rows["ps:0"].steps == ps_steps
    assert rows["worker:0"].steps == len(steps) - ps_steps


@pytest.mark.slow
def test_views_survive_a_restart_of_the_task_hosting_the_service_and_stop_with_it():
    """Worker 0 hosts the coordination service: killed and restarted, its new
    service numbers events from 1 again; the view follows it on. A cluster shut
    down (without the magics) ends the view's follower."""
    import nbdist as nd
    from nbdist.notebook import ClusterView

    cluster = nd.LocalCluster(ps=1, workers=2, progress=False)
    view = ClusterView(cluster)
    try:
        # The view follows the first service before it is killed (else there
        # is no restart under it to see: it would simply start on the new one).
        wait_for(lambda: view.follower.delivered > 0, 15.0, "the view's first event")
        cluster.kill("worker", 0)
        cluster.restart("worker", 0)
        with nd.Graph().as_default():
            with nd.device("/job:worker/task:1"):
                x = nd.constant(1.0) + 1.0
            with nd.Session(cluster.target("worker", 1)) as sess:
                for _ in range(5):
                    sess.run(x)
        assert view.wait_for(lambda s: s.rows["worker:1"].steps == 5, 15)
        assert view.follower.restarts == 1 and view.out_of_order == 0
        assert view.state.rows["worker:0"].restarts == 1
        cluster.shutdown()
        wait_for(lambda: not view.follower.running, 10.0, "the follower to stop")
        wait_for(lambda: view.state.summary() == "3 tasks: 3 stopped", 10.0,
                 "every task stopped")  # its own poll
    finally:
        cluster.shutdown()
        view.close()


def test_views_with_a_slider_stay_live_after_their_cell_until_frozen():
    """09 promised a slider over 3 traced steps, 06 a slider and a play
    button: views that follow nothing were turned into their static face when
    their cell ended, so no slider was ever there. Now a view with steps to
    scrub keeps its output live (its widget beside the static face) until
    ``freeze_scrubbers()``; a one-step view still gets its face at once."""
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    import nbdist as nd
    from nbdist.notebook import TimelineView
    from nbdist.notebook.live_view import freeze_scrubbers

    start_ipython()
    ip = get_ipython()
    g = nd.Graph()
    with g.as_default(), nd.Session() as sess:
        y = nd.matmul(nd.ones([2, 2]), nd.ones([2, 2]))
        ip.user_ns["three"] = TimelineView.trace(sess, y, steps=3)
        ip.user_ns["one"] = TimelineView.trace(sess, y)
    ip.run_cell("from IPython.display import display\ndisplay(three)\ndisplay(one)")
    three, one = ip.user_ns["three"], ip.user_ns["one"]
    assert three.scrubbable() and len(three._handles) == 1  # still live
    assert not one.scrubbable() and one._handles == []  # its face, at the cell's end
    assert freeze_scrubbers() >= 1 and three._handles == []
