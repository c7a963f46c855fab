"""What a reader sees later: the text/plain and text/html forms of a
``%%cluster`` cell and of the views once they stopped (what nbval compares and
a static render shows), the per-task history of ``ClusterView``, the snapshot
of ``%cluster status`` and ``BarrierView``'s wording."""

from __future__ import annotations

import re
import sys

import pytest
from test_widgets import FakeCluster, _ev, _walk, comm  # noqa: F401 - a fixture

W0 = "/job:worker/replica:0/task:0"
CLOCK = r"\d\d:\d\d:\d\d"


class FakeHandle:
    """An IPython ``DisplayHandle``: what update() was given."""

    def __init__(self):
        self.updates = []

    def update(self, obj, raw=False):
        self.updates.append(obj)


@pytest.mark.usefixtures("comm")
def test_cluster_view_keeps_each_tasks_history_with_times():
    from nbdist.notebook import ClusterView

    cluster = FakeCluster()
    view = ClusterView(cluster, live=False)
    try:
        view.kill("worker:1")
        view.restart("worker:1")
        text = repr(view)
        assert re.search(
            rf"history:\n.*\n  worker:1  {CLOCK} started · {CLOCK} killed · "
            rf"{CLOCK} restarted\n",
            text,
        ), text
        html = view._repr_html_()
        assert "data-task='worker:1'" in html and "killed" in html
        row = view.state.rows["worker:1"]
        assert [what for _, what in row.history] == ["started", "killed", "restarted"]
        assert row.history[0][0] <= row.history[1][0] <= row.history[2][0]
    finally:
        view.close()


def test_a_heartbeat_failure_and_return_are_in_the_history():
    from nbdist.notebook.widget_cluster import ClusterState
    from nbdist.runtime.cluster_spec import ClusterSpec

    state = ClusterState(ClusterSpec({"worker": ["a:1"]}))
    state.apply(_ev(1, "task_state", W0, state="CONNECTED", pid=7, address="a:1"))
    state.apply(_ev(2, "task_state", W0, state="DISCONNECTED"))
    state.apply(_ev(3, "task_state", W0, state="CONNECTED", restarted=True, pid=8))
    history = [what for _, what in state.rows["worker:0"].history]
    assert history == ["started", "failed by heartbeat", "restarted", "back"]


@pytest.mark.usefixtures("comm")
def test_status_is_a_snapshot_and_the_view_stays_live():
    from nbdist.notebook import ClusterView

    cluster = FakeCluster()
    view = ClusterView(cluster, live=False)
    view.live = True  # as if following events
    try:
        view.kill("worker:1")
        snap = view.snapshot()
        assert re.match(
            rf"ClusterView: 3 tasks: 2 running, 1 killed  \(status at {CLOCK}\)",
            repr(snap),
        )
        assert "killed" in repr(snap) and "status at" in snap._repr_html_()
        assert (
            "application/vnd.jupyter.widget-view+json" not in snap._repr_mimebundle_()
        )
        view.restart("worker:1")
        assert "3 running" in repr(view) and "(live)" in repr(view)
        assert "1 killed" in repr(snap)  # the snapshot never changes
    finally:
        view.close()


@pytest.mark.usefixtures("comm")
def test_buttons_follow_what_is_possible_and_a_frozen_view_keeps_its_last_state():
    from nbdist.notebook import ClusterView

    cluster = FakeCluster()
    view = ClusterView(cluster, live=False)
    view.live = True
    handle = FakeHandle()
    view._handles.append(handle)  # as _ipython_display_ does in a kernel
    buttons = {b.tooltip: b for b in _walk(view.widget) if type(b).__name__ == "Button"}
    assert not buttons["kill worker:1"].disabled
    view.kill("worker:1")
    view.refresh()
    assert (
        buttons["kill worker:1"].disabled and not buttons["restart worker:1"].disabled
    )
    cluster._state = {k: "stopped" for k in cluster._state}
    cluster._closed = True
    view.close()
    assert all(b.disabled for b in buttons.values())
    (bundle,) = handle.updates
    text = bundle["text/plain"]
    assert re.match(
        rf"ClusterView: 3 tasks: 3 stopped  \(final state at {CLOCK}\)", text
    )
    assert re.search(
        rf"worker:1  {CLOCK} started · {CLOCK} killed · {CLOCK} stopped", text
    )
    assert "final state at" in bundle["text/html"] and "stopped" in bundle["text/html"]


def test_barrier_view_says_what_rounds_mean():
    from nbdist.notebook import BarrierView
    from nbdist.notebook.widget_barrier import BarrierRecord

    view = BarrierView(live=False)
    rec = view.state.barriers["b"] = BarrierRecord(
        "b", "coordination", ["worker:0", "worker:1"], ["worker:0", "worker:1"], 50
    )
    assert "b (coordination): 50 rounds completed; round 51: 2 of 2 arrived " in repr(
        view
    )
    assert repr(view).endswith("(worker:0, worker:1), releasing")
    html = view._repr_html_()
    assert "rounds completed" in html and "2 of 2 arrived" in html
    rec.arrived = []
    assert repr(view).endswith("round 51: none of 2 arrived yet")


def test_barrier_view_counts_backup_workers_even_when_a_round_took_every_gradient():
    """replicas_to_aggregate=2 of 3 workers: a round takes every gradient that
    came before its take, so one round may hold 3; 2 (what the take asks for)
    are still what a round needs."""
    from nbdist.notebook import BarrierView
    from nbdist.notebook.barrier_rounds import RoundTracker
    from nbdist.notebook.widget_barrier import BarrierRecord

    workers = ["worker:0", "worker:1", "worker:2"]
    rounds = RoundTracker()
    for step_id, w in enumerate(workers):
        rounds.name(step_id, w)
    for local_step, pushes in enumerate([(0, 1), (0, 1, 2), (1, 0)]):
        for step_id in pushes:
            rounds.push(step_id, {"local_step": local_step, "time": float(step_id)})
        rounds.complete_oldest()
    rounds.push(0, {"local_step": 3, "time": 9.0})  # settles the third round
    assert [len(r.arrivals) for r in rounds.done] == [2, 3, 2]
    view = BarrierView(live=False)
    view.state.barriers["sync"] = BarrierRecord(
        "sync", "SyncReplicas", workers, ["worker:0"], 3, rounds=rounds, needed=2
    )
    assert "round 4: 1 of 2 needed of 3 arrived (worker:0), waiting for 1 more" in repr(
        view
    )


def test_cell_face_holds_each_tasks_output_result_and_error_by_task():
    from nbdist.notebook.cell_runner import TaskRun
    from nbdist.notebook.widget_cell import CellRunView

    w1 = TaskRun("worker", 1, status="error", error=ValueError("worker 1 refuses"))
    w1.output = [("stdout", "one\n"), ("stderr", "warned\n")]
    w0 = TaskRun("worker", 0, status="done", result=0, output=[("stdout", "zero\n")])
    view = CellRunView([w1, TaskRun("ps", 0, status="done"), w0])
    text = repr(view)
    body = text.split("\n", 1)[1]
    assert body == (
        "[ps:0] done in 0.0 s\n"
        "[worker:0] done in 0.0 s\n  zero\n  → 0\n"
        "[worker:1] error in 0.0 s\n  one\n  warned\n"
        "  ✗ ValueError: worker 1 refuses"
    )
    html = view._repr_html_()
    assert html.index("data-task='ps:0'") < html.index("data-task='worker:0'")
    assert "zero" in html and "warned" in html and "→ 0" in html
    assert "ValueError: worker 1 refuses" in html
    view.close()


@pytest.mark.slow
def test_saved_notebook_holds_task_outputs_and_history(tmp_path, kernel_name):
    import json
    import subprocess

    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(c)
        for c in (
            "%load_ext nbdist\n%cluster start --ps 1 --workers 2",
            (
                "%%cluster\nimport nbdist as nd\n"
                "ctx = nd.distribute.get_current_worker_context()\n"
                "print('printed by', ctx.task_type, ctx.task_id)\nctx.task_id * 2"
            ),
            "%cluster kill worker:1",
            "%cluster status",
            "%cluster restart worker:1",
            "%cluster stop",
        )
    ]
    client = NotebookClient(nb, kernel_name=kernel_name, timeout=120)
    client.execute()
    path = tmp_path / "run.ipynb"
    nbformat.write(nb, path)
    saved = json.loads(path.read_text())
    start, cell, _, status, _, _ = saved["cells"]

    def forms(c, mime):
        return "".join(
            "".join(o["data"].get(mime, "")) for o in c["outputs"] if "data" in o
        )

    for task in ("worker 0", "worker 1"):
        assert f"printed by {task}" in forms(cell, "text/plain")
        assert f"printed by {task}" in forms(cell, "text/html")
    assert "→ 2" in forms(cell, "text/plain")
    assert re.search(rf"\(status at {CLOCK}\)", forms(status, "text/plain"))
    assert re.search(
        rf"worker:1  {CLOCK} started · {CLOCK} killed", forms(status, "text/plain")
    )
    # The start view, redrawn when the cluster stopped: last state and history.
    final = forms(start, "text/plain")
    assert "3 stopped" in final and "final state at" in final
    assert re.search(rf"{CLOCK} killed · {CLOCK} restarted · {CLOCK} stopped", final)
    html = subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "html", "--stdout", str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert "printed by worker 1" in html and "killed" in html


def test_static_tables_are_left_aligned_inline_and_keep_their_own_styles():
    from nbdist.notebook.live_view import inline_styles

    out = inline_styles(
        "<table><tr><th>a</th><td class='pid' style=\"color:red\">1</td></tr></table>"
        "<span class='chip x'>c</span><b>b</b>"
    )
    assert re.match(r"<table style='[^']*margin:0", out)
    assert re.search(r"<th style='text-align:left;[^']*'>a</th>", out)
    # The cell's own style comes last, so it wins; its class stays first.
    assert re.search(r"<td class='pid' style=\"text-align:left;[^\"]*;color:red\">", out)
    assert re.search(r"<span class='chip x' style='display:inline-block;[^']*'>", out)
    assert "<b>b</b>" in out


@pytest.mark.usefixtures("comm")
def test_a_frozen_view_leaves_no_widget_and_tables_left_aligned():
    from nbdist.notebook import ClusterView

    view = ClusterView(FakeCluster(), live=False)
    view.live = True
    handle = FakeHandle()
    view._handles.append(handle)
    view.close()
    (bundle,) = handle.updates
    assert "application/vnd.jupyter.widget-view+json" not in bundle
    assert set(bundle) == {"text/plain", "text/html"}
    html = bundle["text/html"]
    assert "class=\"nbdist nbdist-cluster-view\"" in html
    cells = re.findall(r"<td\b[^>]*>", html)
    assert cells and all("text-align:left" in c for c in cells)


@pytest.mark.slow
def test_every_output_of_a_run_notebook_is_static_once_its_cell_or_cluster_ends(
    kernel_name,
):
    """A view that follows nothing (a timeline) is static after its cell, a
    live one after its cluster stops: nothing left needs a widget's state."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(c)
        for c in (
            "%load_ext nbdist\n%cluster local",
            (
                "import nbdist as nd\nx = nd.constant(2.0, name='x') * 3.0\n"
                "%cluster timeline x"
            ),
            "%cluster stop",
        )
    ]
    NotebookClient(nb, kernel_name=kernel_name, timeout=120).execute()
    start, timeline, _ = nb.cells
    for cell in nb.cells:
        for out in cell.outputs:
            assert "application/vnd.jupyter.widget-view+json" not in out.get(
                "data", {}
            ), cell.source
    (face,) = [o.data for o in timeline.outputs if "data" in o]
    assert "<svg class='nbdist-timeline'" in face["text/html"]
    assert face["text/plain"].startswith("TimelineView:")
    assert "final state at" in start.outputs[0].data["text/plain"]
