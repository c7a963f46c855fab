"""The notebook's SLURM side end to end (issue 14): ``%cluster start --slurm``,
``%cluster connect --slurm JOBID`` and ``%cluster disconnect`` through
IPython's test shell against a real single-node SLURM (``tests/slurm.py``),
nothing mocked; and the same attach in JupyterLab (Chromium driven by
Playwright), its ClusterView rendered live.

* ``%cluster start --slurm --ps 1 --workers 2``: the ClusterView shows the
  three tasks running, a ``%%cluster`` cell and a session step run on them,
  kill and restart are refused with the reason, ``%cluster stop`` cancels the
  job (``squeue`` no longer lists it).
* A job that fails at start (its tasks bind an address this machine does not
  have): the magic's one error shows the job's SLURM state and the tail of
  its logs, no traceback.
* ``%cluster connect --slurm JOBID`` to a job ``nd.SlurmCluster`` started
  here: the views show its tasks, kill/restart/stop are refused with the
  reason, ``%cluster disconnect`` leaves the job running and its tasks
  answering; the module then shuts the ``SlurmCluster`` down (job gone).
* In JupyterLab: a notebook attaches with ``%cluster connect --slurm JOBID``
  and its ClusterView renders with the three tasks running.
  ``NBDIST_UPDATE_SCREENSHOTS=1`` writes ``docs/screenshots/connect-slurm.png``
  (as ``tests/browser/test_browser.py``: never in a plain test run).
"""

from __future__ import annotations

import functools
import os
import re

import nbformat
import numpy as np
import pytest
import test_browser
import test_magics_connect
from IPython.core.error import UsageError
from slurm import session_slurm
from test_browser import CHROMIUM, _chromium, run_all
from test_magics_connect import _all_running, _step, _usage_error
from test_slurm import queued

import nbdist as nd

# Their fixtures: IPython's test shell, JupyterLab, where screenshots go.
ip = test_magics_connect.ip
lab, shots = test_browser.lab, test_browser.shots

pytestmark = pytest.mark.slow

NOT_OWNED = (
    "unavailable: this notebook attached to the cluster (%cluster connect) "
    "and does not own its processes"
)
HELLO_CELL = (
    "import nbdist as nd\nctx = nd.distribute.get_current_worker_context()\n"
    "ctx.wait_for_other_workers()\nctx.task_id"
)

TRAIN_CELL = """\
with nd.Graph().as_default():
    with nd.device("/job:ps/task:0"):
        w = nd.Variable([0.0, 0.0, 0.0], name="w")
    with nd.device("/job:worker/task:1"):
        loss = nd.reduce_sum(nd.square(w - [1.0, 2.0, 3.0]))
        step = nd.train.GradientDescentOptimizer(0.1).minimize(loss)
    with nd.Session(target) as sess:
        sess.run(nd.global_variables_initializer())
        for _ in range(30):
            sess.run(step)
        print(f"loss after 30 steps: {sess.run(loss):.3g}")"""


@pytest.fixture(scope="module")
def slurm():
    """One SLURM for this module, gone before the next module's starts (the
    node's 4 CPUs: one 3-task job at a time)."""
    with session_slurm() as s:
        yield s


@pytest.fixture(scope="module")
def served(slurm, tmp_path_factory):
    """A 1 ps + 2 workers job the notebook does not own, started by
    ``nd.SlurmCluster``; shut down (the job cancelled) after the module."""
    cluster = nd.SlurmCluster(
        ps=1,
        workers=2,
        progress=False,
        start_timeout=60,
        log_dir=str(tmp_path_factory.mktemp("served")),
        job_name="nbdist-served",
    )
    with cluster:
        yield cluster
    assert not queued(slurm, cluster.job_id)


@pytest.fixture
def clean(ip):
    """Stops (or detaches from) whatever a test left to the magics."""
    yield
    from nbdist.notebook import magics

    cluster = magics.active_cluster()
    if cluster is not None:
        command = "stop" if getattr(cluster, "owned", True) else "disconnect"
        ip.run_line_magic("cluster", command)


def test_start_slurm_runs_a_cell_and_a_step_and_stop_cancels_the_job(
    ip, slurm, clean, capsys
):
    from nbdist.notebook import ClusterView

    view = ip.run_line_magic("cluster", "start --slurm --ps 1 --workers 2")
    assert isinstance(view, ClusterView)
    cluster = ip.user_ns["cluster"]
    assert isinstance(cluster, nd.SlurmCluster) and queued(slurm, cluster.job_id)
    assert ip.user_ns["target"] == cluster.target("worker", 0)
    _all_running(view)
    # The rows' pids are the SLURM tasks' (the coordination service's table).
    assert sorted(r.pid for r in view.state.rows.values()) == sorted(
        t.pid for t in cluster.tasks
    )

    assert ip.run_cell_magic("cluster", "", HELLO_CELL) == {
        "worker:0": 0,
        "worker:1": 1,
    }
    # A step through the notebook's target: ps 0 keeps the variable.
    first = _step(ip.user_ns["target"])
    np.testing.assert_array_equal(_step(ip.user_ns["target"]) - first, np.arange(4))
    assert view.wait_for(lambda s: s.rows["worker:0"].steps >= 2, 10), repr(view)

    # SLURM starts and ends a job's tasks together: no kill, no restart.
    assert view._can_act(view.state.rows["worker:1"]) == (False, False)
    assert _usage_error(ip, "kill worker:1") == (
        "SlurmCluster cannot kill tasks: only a local multi-process cluster "
        "(%cluster start) can kill and restart them"
    )
    assert _usage_error(ip, "restart worker:1").startswith(
        "worker:1 did not restart: SlurmCluster cannot restart worker:1: its "
        f"tasks are one step of SLURM job {cluster.job_id}"
    )

    capsys.readouterr()
    ip.run_line_magic("cluster", "stop")
    assert capsys.readouterr().out == "stopped 3 tasks\n"
    assert not queued(slurm, cluster.job_id)
    assert "cluster" not in ip.user_ns and "target" not in ip.user_ns
    assert view.face().startswith("final state at")


def test_a_job_failing_at_start_shows_its_state_and_log_tail(
    ip, slurm, clean, monkeypatch, capsys
):
    from nbdist.cluster import slurm_cluster

    # Tasks told to listen on an address no interface here has (TEST-NET-1):
    # every task fails to bind, the job ends FAILED.
    monkeypatch.setattr(
        slurm_cluster,
        "SlurmCluster",
        functools.partial(slurm_cluster.SlurmCluster, bind="192.0.2.1", progress=False),
    )
    capsys.readouterr()
    result = ip.run_cell("%cluster start --slurm --ps 0 --workers 1")
    assert isinstance(result.error_in_exec, UsageError)
    # What the notebook shows: the one error, no traceback of the notebook's
    # side (the tail of the task's log has the task's own).
    shown = capsys.readouterr().err
    assert shown.startswith("UsageError: SlurmCluster: SLURM job "), shown
    assert "magics.py" not in shown and "attach.py" not in shown, shown
    msg = str(result.error_in_exec)
    head = msg.splitlines()[0]
    assert re.match(
        r"SlurmCluster: SLURM job \d+ is FAILED \(.*ExitCode=1:0\) "
        "before every task answered; the tail of its logs:$",
        head,
    ), msg
    assert "-- task-0.log:" in msg and "Cannot assign requested address" in msg
    assert not queued(slurm, re.search(r"SLURM job (\d+)", msg).group(1))
    from nbdist.notebook import magics

    assert magics.active_cluster() is None and "cluster" not in ip.user_ns


def test_connect_slurm_attaches_refuses_kill_and_disconnect_leaves_the_job(
    ip, slurm, served, clean, capsys
):
    from nbdist.cluster.attached import AttachedCluster
    from nbdist.notebook import ClusterView, PlacementView

    job = served.job_id
    view = ip.run_line_magic("cluster", f"connect --slurm {job}")
    assert isinstance(view, ClusterView)
    cluster = ip.user_ns["cluster"]
    assert isinstance(cluster, AttachedCluster)
    assert cluster.source == f"SLURM job {job}"
    assert cluster.cluster_spec == served.cluster_spec  # from the job's comment
    assert ip.user_ns["target"] == served.target("worker", 0)
    _all_running(view)
    assert sorted((t.job, t.index, t.pid) for t in cluster.tasks) == sorted(
        (t.job, t.index, t.pid) for t in served.tasks
    )
    assert f"kill and restart are {NOT_OWNED}" in repr(view)
    assert view._can_act(view.state.rows["worker:1"]) == (False, False)

    before, g, _ = _step(ip.user_ns["target"], graph=True)
    assert view.wait_for(lambda s: s.rows["worker:0"].steps >= 1, 10), repr(view)
    assert ip.run_cell_magic("cluster", "", HELLO_CELL) == {
        "worker:0": 0,
        "worker:1": 1,
    }
    ip.user_ns["g"] = g
    placement = ip.run_line_magic("cluster", "placement g")
    assert isinstance(placement, PlacementView)
    assert placement.state.ps_bytes()[0][1:] == (4 * 4, 1)

    assert _usage_error(ip, "kill worker:1") == f"kill is {NOT_OWNED}"
    assert _usage_error(ip, "restart ps:0") == f"restart is {NOT_OWNED}"
    assert _usage_error(ip, "stop").startswith(f"stop is {NOT_OWNED}")

    capsys.readouterr()
    ip.run_line_magic("cluster", "disconnect")
    assert capsys.readouterr().out == (
        f"disconnected from SLURM job {job}; its 3 tasks keep running\n"
    )
    assert "cluster" not in ip.user_ns
    # The job runs on, its tasks with their state: the variable kept its value.
    assert queued(slurm, job) and served.state() == "RUNNING"
    np.testing.assert_array_equal(
        _step(served.target("worker", 0)) - before, np.arange(4)
    )

    # A job that is not running is one line.
    assert _usage_error(ip, "connect --slurm 999999").startswith("SLURM job 999999: ")


@pytest.mark.timeout(300)
@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium")
def test_jupyterlab_attached_to_a_slurm_job_shows_the_cluster_view(
    slurm, served, lab, tmp_path, shots
):
    sync_api = pytest.importorskip("playwright.sync_api")
    job = served.job_id
    name = "connect-slurm.ipynb"
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(c)
            for c in (
                f"!squeue -j {job} -o '%.6i %.14j %.9T %.6D %.6C %R'",
                f"import nbdist as nd\n%load_ext nbdist\n%cluster connect --slurm {job}",
                "%%cluster\n" + HELLO_CELL.split("\n", 1)[1],
                TRAIN_CELL,
            )
        ],
        metadata={
            "kernelspec": {
                "name": "python3",
                "display_name": "Python 3",
                "language": "python",
            }
        },
    )
    nbformat.write(nb, tmp_path / "notebooks" / name)
    # No "get notified about Jupyter news?" toast over the picture.
    quiet = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    quiet.mkdir(parents=True, exist_ok=True)
    (quiet / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}'
    )
    with sync_api.sync_playwright() as p:
        context = _chromium(p, tmp_path)
        try:
            page = context.new_page()
            page.set_viewport_size({"width": 1280, "height": 1300})  # every cell
            run_all(page, lab, name)

            view = page.locator(".nbdist-cluster-view").first
            view.wait_for(timeout=90_000)
            page.wait_for_function(
                "() => /3 tasks: 3 running/.test("
                "document.querySelector('.nbdist-cluster-view').innerText)",
                timeout=60_000,
            )
            # The last cell's line: 30 steps of w -= 0.1 * 2 (w - t) from 0.
            want = 14 * 0.64**30
            page.get_by_text(f"loss after 30 steps: {want:.3g}").wait_for(
                timeout=60_000
            )
            # The live view counted them (ps:0's column: each step updates w).
            page.wait_for_function(
                "() => /ps:0\\s+\\S+\\s+\\d+\\s+running\\s+(3\\d|[4-9]\\d|\\d{3,})/"
                ".test(document.querySelector('.nbdist-cluster-view').innerText)",
                timeout=30_000,
            )
            page.wait_for_selector(
                ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000
            )
            text = view.inner_text()
            for task, t in ((f"{t.job}:{t.index}", t) for t in served.tasks):
                assert task in text and t.address in text, text
            assert "does not own its processes" in text, text
            notebook = page.locator(".jp-Notebook").first
            assert re.search(rf"{job}\s+nbdist-served\s+RUNNING", notebook.inner_text())
            assert page.get_by_text("Error displaying widget").count() == 0
            # The cells, not the empty page below them.
            top = notebook.bounding_box()
            last = page.locator(".jp-Notebook .jp-Cell").last.bounding_box()
            page.screenshot(
                path=str(shots / "connect-slurm.png"),
                clip={
                    "x": top["x"],
                    "y": top["y"],
                    "width": top["width"],
                    "height": last["y"] + last["height"] - top["y"] + 12,
                },
            )
        finally:
            context.close()
    assert (shots / "connect-slurm.png").stat().st_size > 10_000
