"""``%load_ext nbdist`` and the ``%cluster`` magics, through a real IPython
shell (``run_line_magic``/``run_cell_magic``) and through a real kernel
(nbclient, jupyter_client), with real ``LocalCluster`` processes.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from helpers import pid_alive, wait_for, wait_gone
from IPython.core.error import UsageError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ip():
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    start_ipython()  # None when it already ran (one test shell per process)
    shell = get_ipython()
    shell.reset(new_session=False)  # names an earlier module's cells left
    if "nbdist" not in shell.extension_manager.loaded:
        shell.run_line_magic("load_ext", "nbdist")
    yield shell
    from nbdist.notebook import magics

    for m in magics._active:
        m.close()


def _usage_error(ip, line, cell=None) -> str:
    with pytest.raises(UsageError) as e:
        if cell is None:
            ip.run_line_magic("cluster", line)
        else:
            ip.run_cell_magic("cluster", line, cell)
    text = str(e.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_help_is_the_docstring(ip):
    doc = ip.find_magic("cluster").__doc__
    assert "%cluster start --ps 1 --workers 2" in doc
    assert "--timeout S" in doc and "wait_for_other_workers" in doc


def test_errors_without_a_cluster_are_one_line(ip, capsys):
    assert "give a command" in _usage_error(ip, "")
    assert _usage_error(ip, "frobnicate").startswith("unknown command 'frobnicate'")
    for line in ("status", "stop", "kill worker:1", "placement"):
        assert _usage_error(ip, line).startswith("no cluster is running")
    assert "no cluster is running" in _usage_error(ip, "", "1 + 1")
    assert "unrecognized arguments" in _usage_error(ip, "start --tpus 2")
    # As the user sees it: one line, no traceback.
    ip.run_cell("%cluster frobnicate")
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        (
            "UsageError: unknown command 'frobnicate': use one of local, start, status, "
            "stop, kill, restart, placement, timeline, connect, disconnect, traffic, "
            "slow, partition, heal"
        )
    ]


def test_local_server(ip):
    import nbdist as nd

    view = ip.run_line_magic("cluster", "local")
    try:
        assert ip.user_ns["target"].startswith("grpc://localhost:")
        with nd.Graph().as_default(), nd.Session(ip.user_ns["target"]) as sess:
            assert sess.run(nd.constant(3.0) * 2.0) == 6.0
        assert repr(view).splitlines()[0] == "ClusterView: 1 task: 1 running  (live)"
        assert "a cluster is already running" in _usage_error(ip, "local")
        assert "only a local multi-process cluster" in _usage_error(
            ip, "kill localhost:0"
        )
    finally:
        ip.run_line_magic("cluster", "stop")
    assert "target" not in ip.user_ns


@pytest.fixture(scope="module")
def started(ip):
    """``%cluster start --ps 1 --workers 2``, with how long it took."""
    start = time.perf_counter()
    view = ip.run_line_magic("cluster", "start --ps 1 --workers 2")
    seconds = time.perf_counter() - start
    yield view, seconds
    from nbdist.notebook import magics

    if magics.active_cluster() is not None:
        ip.run_line_magic("cluster", "stop")


def test_start_shows_a_live_cluster_view_with_every_task_running(ip, started):
    from nbdist.cluster.local_cluster import LocalCluster
    from nbdist.notebook import ClusterView

    view, seconds = started
    assert isinstance(view, ClusterView)
    assert isinstance(ip.user_ns["cluster"], LocalCluster)
    assert ip.user_ns["target"] == ip.user_ns["cluster"].target("worker", 0)
    assert view.state.summary() == "3 tasks: 3 running"
    assert all(r.pid for r in view.state.rows.values())
    assert view.follower is not None and view.follower.running
    # The target of the issue is 2 s on an idle machine; CI shares its cores.
    assert seconds < 15, seconds
    print(f"%cluster start --ps 1 --workers 2: {seconds:.2f} s")


def test_cell_runs_once_per_worker_with_its_own_graph_and_context(ip, started):
    cell = """
import nbdist as nd
ctx = nd.distribute.get_current_worker_context()
print("hello from", ctx.task_type, ctx.task_id)
ctx.wait_for_other_workers()
g = nd.get_default_graph()
with nd.device(f"/job:worker/task:{ctx.task_id}"):
    c = nd.constant(float(ctx.task_id)) * 10.0
with nd.Session(ctx.master_target) as sess:
    value = float(sess.run(c))
(ctx.task_type, ctx.task_id, ctx.is_chief, ctx.num_workers, ctx.master_target,
 value, id(g))
"""

    cluster = ip.user_ns["cluster"]
    results = ip.run_cell_magic("cluster", "", cell)
    assert sorted(results) == ["worker:0", "worker:1"]
    r0, r1 = results["worker:0"], results["worker:1"]
    assert r0[:6] == ("worker", 0, True, 2, cluster.target("worker", 0), 0.0)
    assert r1[:6] == ("worker", 1, False, 2, cluster.target("worker", 1), 10.0)
    assert r0[6] != r1[6]  # each task had its own default graph
    assert "g" not in ip.user_ns  # and its own namespace


def test_cell_on_selected_tasks(ip, started, capsys):
    results = ip.run_cell_magic("cluster", "--tasks worker:1 ps", "print('hi')\n42")
    assert results == {"worker:1": 42, "ps:0": 42}
    out = capsys.readouterr().out
    assert "[worker:1]\n  hi" in out and "[ps:0]\n  hi" in out
    assert "no job 'gpu'" in _usage_error(ip, "--tasks gpu", "1")
    assert "no task worker:9" in _usage_error(ip, "--tasks worker:9", "1")
    assert "does not compile" in _usage_error(ip, "", "def (")
    assert "takes only --tasks" in _usage_error(ip, "kill", "1")


def test_an_error_on_one_task_is_in_its_output_and_summarised_once(ip, started, capsys):
    from nbdist import notebook

    cell = (
        "import nbdist as nd\n"
        "ctx = nd.distribute."
        "get_current_worker_context()\n"
        "if ctx.task_id == 1:\n"
        "    raise ValueError('worker 1 refuses')\n"
        "'fine'\n"
    )
    msg = _usage_error(ip, "", cell)
    assert msg == (
        "%%cluster: 1 of 2 tasks failed: worker:1: ValueError: worker 1 "
        "refuses (traceback above)"
    )
    out = capsys.readouterr().out
    assert out.count("Traceback (most recent call last)") == 1
    assert 'File "<%%cluster cell' in out and "ValueError: worker 1 refuses" in out
    assert notebook.last_cell_results() == {"worker:0": "fine"}
    ip.run_cell("%%cluster\nraise RuntimeError('boom')")
    err = capsys.readouterr().err
    assert err.count("UsageError") == 1 and err.count("\n") == 1


def test_timeout(ip, started):
    start = time.monotonic()
    msg = _usage_error(
        ip,
        "--tasks worker:0 --timeout 0.5",
        "import time\nwhile True:\n    time.sleep(0.01)",
    )
    assert msg.startswith(
        "%%cluster: 1 of 1 tasks failed: worker:0 timed out after 0.5 s"
    )
    assert time.monotonic() - start < 5


def test_placement_and_timeline(ip, started):
    import nbdist as nd
    from nbdist.notebook import PlacementView, TimelineView

    with nd.Graph().as_default() as g:
        with nd.device("/job:ps/task:0"):
            w = nd.Variable(nd.ones([16, 16]), name="w")
        with nd.device("/job:worker/task:0"):
            y = nd.reduce_sum(nd.matmul(w, w), name="y")
        ip.user_ns.update(g=g, w=w, y=y)
        view = ip.run_line_magic("cluster", "placement g")
        assert isinstance(view, PlacementView)
        assert view.state.ps_bytes()[0][1:] == (16 * 16 * 4, 1)
        with nd.Session(ip.user_ns["target"]) as sess:
            sess.run(w.initializer)
        timeline = ip.run_line_magic("cluster", "timeline y")
        assert isinstance(timeline, TimelineView)
        assert timeline.result == 16**3 and set(timeline.tasks()) == {
            "worker:0",
            "ps:0",
        }
        ip.user_ns["meta"] = timeline.run_metadata
        shown = ip.run_line_magic("cluster", "timeline meta")
        assert len(shown.spans) == len(timeline.spans)
        # Bare: the last step traced in this kernel (this one, by any session).
        last = ip.run_line_magic("cluster", "timeline")
        assert isinstance(last, TimelineView) and last.run_metadata is not None
        assert last.run_metadata.step_stats == timeline.run_metadata.step_stats
        assert set(last.tasks()) == {"worker:0", "ps:0"}
    assert "is not a graph" in _usage_error(ip, "placement 42")
    assert "cannot evaluate 'nope'" in _usage_error(ip, "placement nope")


def test_clusters_the_notebook_starts_record_their_traffic(ip, started):
    """``%cluster start`` (no flag): the tasks publish their taps, so
    ``%cluster traffic`` shows a step's calls (it showed "0 calls" unless
    NBDIST_TAP_EVENTS=1 came first). Oracle: the step's RunGraph to ps:0."""
    import nbdist as nd

    traffic = ip.run_line_magic("cluster", "traffic")
    try:
        with nd.Graph().as_default():
            with nd.device("/job:ps/task:0"):
                v = nd.Variable(nd.ones([8]), name="v")
            with nd.device("/job:worker/task:0"):
                y = nd.reduce_sum(v * 2.0)
            with nd.Session(ip.user_ns["target"]) as sess:
                sess.run(v.initializer)
                assert sess.run(y) == 16.0
        wait_for(lambda: any(r.kind == "RunGraph" and r.destination.endswith(
            "/job:ps/replica:0/task:0") for r in traffic.records()), 20,
            "the step's RunGraph to ps:0")
        assert not repr(traffic).startswith("TrafficView: 0 calls")
    finally:
        traffic.close()


def test_traffic_recording_switches_on_a_running_cluster(ip, started, capsys):
    """``%cluster traffic off``, a step, ``%cluster traffic on``, a step: every
    task answers each switch, and the view holds the second step's tensor
    (8 KB) but not the first's (4 KB). The tasks are processes: the switch
    reaches them through the coordination service."""
    import nbdist as nd

    traffic = ip.run_line_magic("cluster", "traffic")
    try:
        def read(n):
            with nd.Graph().as_default():
                with nd.device("/job:ps/task:0"):
                    v = nd.Variable(np.zeros(n, np.float32), name=f"traffic{n}")
                with nd.device("/job:worker/task:0"):
                    y = v + 1.0
                with nd.Session(ip.user_ns["target"]) as sess:
                    sess.run(v.initializer)
                    sess.run(y)

        capsys.readouterr()
        ip.run_line_magic("cluster", "traffic off")
        assert capsys.readouterr().out == "traffic recording off on 3 of 3 tasks\n"
        read(1024)  # 4 KB from ps:0 to worker:0, unrecorded
        ip.run_line_magic("cluster", "traffic on")
        assert capsys.readouterr().out == "traffic recording on on 3 of 3 tasks\n"
        read(2048)
        wait_for(lambda: any(r.nbytes == 8192 for r in traffic.records()), 20,
                 "the second step's 8 KB tensor")
        assert not any(r.nbytes == 4096 for r in traffic.records())
    finally:
        traffic.close()
    assert "takes on or off" in _usage_error(ip, "traffic maybe")


def test_kill_status_restart(ip, started, capsys):
    view, _ = started
    cluster = ip.user_ns["cluster"]
    assert "no task worker:9 (tasks: worker:0, worker:1, ps:0)" in _usage_error(
        ip, "kill worker:9"
    )
    assert "not a task" in _usage_error(ip, "kill worker:x")
    assert "needs one task" in _usage_error(ip, "kill")
    old = cluster.tasks[1].pid
    ip.run_line_magic("cluster", "kill worker:1")
    assert capsys.readouterr().out == "killed worker:1 (SIGKILL)\n"
    assert not wait_gone([old], 5)
    status = ip.run_line_magic("cluster", "status")
    assert status is not view and status.state.rows["worker:1"].state == "killed"
    assert (
        "(status at " in repr(status) and "killed" in repr(status).split("history:")[1]
    )
    ip.run_line_magic("cluster", "restart worker:1")
    assert capsys.readouterr().out.startswith(
        f"restarted worker:1 at {cluster.cluster_spec.task_address('worker', 1)} in "
    )
    assert view.wait_for(
        lambda s: (
            s.rows["worker:1"].state == "running" and s.rows["worker:1"].restarts == 1
        ),
        10,
    )
    assert view.state.rows["worker:1"].pid != old


def test_stop_leaves_no_process(ip, started):
    cluster = ip.user_ns["cluster"]
    pids = [t.pid for t in cluster.tasks]
    assert all(pid_alive(p) for p in pids)
    view, _ = started
    ip.run_line_magic("cluster", "stop")
    assert wait_gone(pids, 1) == []
    assert "cluster" not in ip.user_ns and not view.follower.running
    assert _usage_error(ip, "status").startswith("no cluster is running")


# -- through a real kernel ---------------------------------------------------------
def _notebook(*cells):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


def _text(cell) -> str:
    out = []
    for o in cell.outputs:
        if o.output_type == "stream":
            out.append(o.text)
        elif "data" in o:
            out.append(o.data.get("text/plain", ""))
    return "".join(out)


def test_magics_in_a_real_kernel_with_nbclient(kernel_name):
    from nbclient import NotebookClient

    nb = _notebook(
        "%load_ext nbdist\n%cluster start --ps 1 --workers 2",
        "import os\nprint([t.pid for t in cluster.tasks], os.getpid())",
        "%%cluster\nimport nbdist as nd\n"
        "ctx = nd.distribute.get_current_worker_context()"
        "\nprint('from', ctx.task_id)\nctx.wait_for_other_workers()\nctx.task_id * 2",
        "%cluster kill worker:1",
        "%cluster status",
        "%cluster stop",
    )
    NotebookClient(nb, kernel_name=kernel_name, timeout=120).execute()
    start, pids, cell, kill, status, stop = nb.cells
    # Redrawn when the cluster stopped (the last cell): its last state stays.
    assert _text(start).startswith("ClusterView: 3 tasks: 3 stopped  (final state at")
    bundle = start.outputs[0].data
    # Its static face only: no widget, whose state is not saved with a notebook.
    assert "application/vnd.jupyter.widget-view+json" not in bundle
    assert "text/html" in bundle and "nbdist-task" in bundle["text/html"]
    task_pids = json.loads(_text(pids).split("]")[0] + "]")
    assert "{'worker:0': 0, 'worker:1': 2}" in _text(cell)
    # The live display keeps one line when its widget goes (never empty).
    assert cell.outputs[0].data == {
        "text/plain": "%%cluster on worker:0, worker:1 (each task's output below)",
        "text/html": "<div class='muted'>%%cluster on worker:0, worker:1 (each "
                     "task's output below)</div>"}
    # The finished view: static forms only (with saved widget state, nbconvert
    # and JupyterLab would draw a widget instead of its html).
    finished = cell.outputs[1].data
    assert set(finished) == {"text/plain", "text/html"}
    assert "from 1" in finished["text/html"]
    assert _text(kill) == "killed worker:1 (SIGKILL)\n"
    assert "2 running, 1 killed" in _text(status)
    assert _text(stop) == "stopped 3 tasks\n"
    assert wait_gone(task_pids, 5) == []
    assert nb.metadata["widgets"]  # the widgets' state is saved with the notebook


@pytest.mark.parametrize("how", ["restart", "kill"])
def test_no_process_left_after_a_kernel_restart(kernel_name, how):
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name=kernel_name)
    try:
        out = []
        reply = kc.execute_interactive(
            "%load_ext nbdist\n%cluster start --ps 1 --workers 2\n"
            "print('PIDS', [t.pid for t in cluster.tasks])",
            timeout=60,
            output_hook=lambda m: out.append(m["content"].get("text", "")),
        )
        assert reply["content"]["status"] == "ok"
        line = next(x for x in "".join(out).splitlines() if x.startswith("PIDS"))
        pids = json.loads(line.split(" ", 1)[1])
        assert len(pids) == 3 and all(pid_alive(p) for p in pids)
        if how == "restart":
            km.restart_kernel(now=False)  # a graceful restart
        else:
            km.restart_kernel(now=True)  # the kernel is SIGKILLed
        assert wait_gone(pids, 10) == []
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_timeline_with_nothing_traced_says_so_in_one_line(ip, capsys, monkeypatch):
    """A bare ``%cluster timeline`` before any traced step: one line, no
    exception (it raised, which stops Run All)."""
    from nbdist.runtime import session

    monkeypatch.setattr(session, "_last_traced", [None])
    capsys.readouterr()
    assert ip.run_line_magic("cluster", "timeline") is None
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "no step traced yet" in out

