"""``%cluster connect`` / ``%cluster disconnect``: a notebook (IPython's test
shell) attaching to a cluster of real server processes it did not start (a
``LocalCluster`` this test starts), by spec string, dict and ``TF_CONFIG``.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from IPython.core.error import UsageError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ip():
    """IPython's test shell (one per process) with the extension loaded."""
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    start_ipython()  # None when it already ran
    if "nbdist" not in get_ipython().extension_manager.loaded:
        get_ipython().run_line_magic("load_ext", "nbdist")
    return get_ipython()


@pytest.fixture(scope="module")
def served():
    """Real server processes the notebook does not own."""
    from nbdist.cluster.local_cluster import LocalCluster

    with LocalCluster(ps=1, workers=2, progress=False) as cluster:
        yield cluster


@pytest.fixture
def detach(ip):
    """Disconnects whatever a test left attached."""
    yield
    from nbdist.notebook import magics

    if magics.active_cluster() is not None:
        ip.run_line_magic("cluster", "disconnect")


def _spec_string(cluster) -> str:
    spec = cluster.cluster_spec
    return ",".join(f"{j}|{';'.join(spec.job_tasks(j))}" for j in spec.jobs)


def _usage_error(ip, line) -> str:
    with pytest.raises(UsageError) as e:
        ip.run_line_magic("cluster", line)
    text = str(e.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def _all_running(view, n=3, timeout=15.0):
    want = f"{n} task{'s' if n != 1 else ''}: {n} running"
    assert view.wait_for(lambda s: s.summary() == want, timeout), repr(view)


def _step(target, graph=False):
    """One step through ``target``: worker 0 adds [0, 1, 2, 3] to a variable
    of ps 0 (kept by the ps across sessions); returns its new value (and, with
    ``graph``, the graph and the update op)."""
    import nbdist as nd

    with nd.Graph().as_default() as g:
        with nd.device("/job:ps/task:0"):
            v = nd.Variable(np.zeros(4, np.float32), name="v")
        with nd.device("/job:worker/task:0"):
            up = v.assign_add(nd.constant(np.arange(4, dtype=np.float32)))
        with nd.Session(target) as sess:
            if not sess.run(nd.is_variable_initialized(v)):
                sess.run(v.initializer)
            value = sess.run(up)
    return (value, g, up) if graph else value


def test_connect_by_spec_string_views_session_refusals_disconnect(
    ip, served, detach, capsys
):
    from nbdist.cluster.attached import AttachedCluster
    from nbdist.notebook import BarrierView, ClusterView, PlacementView, TimelineView

    pids = [t.pid for t in served.tasks]
    view = ip.run_line_magic("cluster", f"connect {_spec_string(served)}")
    assert isinstance(view, ClusterView)
    cluster = ip.user_ns["cluster"]
    assert isinstance(cluster, AttachedCluster) and cluster.source == "a spec string"
    assert ip.user_ns["target"] == served.target("worker", 0)
    # Live from the coordination service: every task running, with its pid.
    _all_running(view)
    assert sorted(r.pid for r in view.state.rows.values()) == sorted(pids)
    # From the service's table too (what shows when the registrations rolled
    # out of its bounded event log).
    assert sorted((t.job, t.index, t.pid, t.state) for t in cluster.tasks) == sorted(
        (t.job, t.index, t.pid, "running") for t in served.tasks
    )
    reason = (
        "unavailable: this notebook attached to the cluster (%cluster connect) "
        "and does not own its processes"
    )
    assert f"kill and restart are {reason}" in repr(view)
    assert view._can_act(view.state.rows["worker:1"]) == (False, False)
    status = ip.run_line_magic("cluster", "status")
    assert status.state.summary() == "3 tasks: 3 running"
    assert f"kill and restart are {reason}" in repr(status)

    # A session through the attached cluster runs a step.
    before, g, up = _step(ip.user_ns["target"], graph=True)
    assert view.wait_for(lambda s: s.rows["worker:0"].steps >= 1, 10), repr(view)

    # The other views, live from the same service.
    cell = (
        "import nbdist as nd\nctx = nd.distribute.get_current_worker_context()\n"
        "ctx.wait_for_other_workers()\nctx.task_id"
    )
    assert ip.run_cell_magic("cluster", "", cell) == {"worker:0": 0, "worker:1": 1}
    barriers = BarrierView(cluster)
    try:
        assert barriers.follower is not None and barriers.follower.running
        assert barriers.sync(10) and barriers.state.barriers, repr(barriers)
    finally:
        barriers.close()
    ip.user_ns.update(g=g, up=up)
    placement = ip.run_line_magic("cluster", "placement g")
    assert isinstance(placement, PlacementView)
    assert placement.state.ps_bytes()[0][1:] == (4 * 4, 1)
    with g.as_default():
        timeline = ip.run_line_magic("cluster", "timeline up")
    assert isinstance(timeline, TimelineView)
    assert set(timeline.tasks()) == {"worker:0", "ps:0"}
    np.testing.assert_array_equal(timeline.result - before, np.arange(4))
    before = timeline.result

    # Kill, restart and stop: one line with the reason; the tasks untouched.
    assert _usage_error(ip, "kill worker:1") == f"kill is {reason}"
    assert _usage_error(ip, "restart worker:1") == f"restart is {reason}"
    assert _usage_error(ip, "stop").startswith(f"stop is {reason}; %cluster disconnect")
    assert _usage_error(ip, "connect ps|localhost:1") == (
        "a cluster is attached (a spec string): %cluster disconnect first"
    )
    assert [t.state for t in served.tasks] == ["running"] * 3

    capsys.readouterr()
    ip.run_line_magic("cluster", "disconnect")
    assert capsys.readouterr().out == (
        "disconnected from a spec string; its 3 tasks keep running\n"
    )
    assert "cluster" not in ip.user_ns and "target" not in ip.user_ns
    assert cluster._closed and not view.follower.running
    assert view.face().startswith("final state at")
    # The servers still answer, with their state: the variable kept its value.
    assert [t.pid for t in served.tasks] == pids
    assert all(t.state == "running" for t in served.tasks)
    np.testing.assert_array_equal(
        _step(served.target("worker", 0)) - before, np.arange(4)
    )
    assert _usage_error(ip, "disconnect").startswith("no cluster is running")


def test_connect_by_dict_literal_and_name(ip, served, detach):
    d = served.cluster_spec.as_dict()
    view = ip.run_line_magic("cluster", f"connect {d!r}")
    assert ip.user_ns["cluster"].source == "a dict"
    assert ip.user_ns["cluster"].cluster_spec == served.cluster_spec
    _all_running(view)
    ip.run_line_magic("cluster", "disconnect")

    ip.user_ns["my_cluster"] = {"cluster": d, "task": {"type": "worker", "index": 0}}
    view = ip.run_line_magic("cluster", "connect my_cluster")
    assert ip.user_ns["cluster"].source == "'my_cluster'"
    assert ip.user_ns["target"] == served.target("worker", 0)
    _all_running(view)


def test_connect_by_tf_config(ip, served, detach, monkeypatch):
    config = {"cluster": served.cluster_spec.as_dict(), "task": {"type": "ps"}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    view = ip.run_line_magic("cluster", "connect --tf_config")
    assert ip.user_ns["cluster"].source == "TF_CONFIG"
    _all_running(view)
    first = _step(ip.user_ns["target"])
    np.testing.assert_array_equal(
        _step(served.target("worker", 0)) - first, np.arange(4)
    )
    ip.run_line_magic("cluster", "disconnect")

    monkeypatch.delenv("TF_CONFIG")
    assert _usage_error(ip, "connect --tf_config") == (
        "TF_CONFIG is not set in the notebook's environment"
    )
    view = ip.run_line_magic("cluster", f"connect --tf_config='{json.dumps(config)}'")
    assert ip.user_ns["cluster"].source == "--tf_config"
    _all_running(view)


def test_connect_to_nothing_is_one_line_within_the_timeout(ip, detach):
    from helpers import free_port

    ps, worker = f"localhost:{free_port()}", f"localhost:{free_port()}"
    start = time.monotonic()
    msg = _usage_error(ip, f"connect ps|{ps},worker|{worker} --timeout 1")
    assert time.monotonic() - start < 6
    assert msg == (
        f"nothing answers at ps:0 ({ps}), worker:0 ({worker}) from a spec string "
        "within 1 s: is the cluster running (and NBDIST_TOKEN set if it needs one)?"
    )
    from nbdist.notebook import magics

    assert magics.active_cluster() is None


def test_a_silent_leader_or_a_different_cluster_is_named(ip, served, detach):
    from helpers import free_port

    spec = served.cluster_spec
    silent = f"localhost:{free_port()}"
    line = f"connect ps|{spec.task_address('ps', 0)},worker|{silent} --timeout 1"
    assert _usage_error(ip, line) == (
        f"worker:0 (grpc://{silent}), which hosts the cluster's coordination "
        "service, does not answer within 1 s (silent too: none)"
    )
    # The tasks' own cluster disagrees: worker 1 is not worker 0.
    swapped = spec.task_address("worker", 1)
    assert _usage_error(ip, f"connect worker|{swapped}").startswith(
        f"a spec string: worker:0 ({swapped}) answers but refuses: The server at "
    )


def test_a_cluster_with_a_token(ip, detach, monkeypatch):
    import nbdist as nd
    from nbdist.cluster.local_cluster import LocalCluster

    monkeypatch.delenv("NBDIST_TOKEN", raising=False)
    config = nd.ConfigProto(auth_token="s3cret")
    with LocalCluster(ps=0, workers=1, config=config, progress=False) as served:
        line = f"connect worker|{served.cluster_spec.task_address('worker', 0)}"
        msg = _usage_error(ip, line)
        assert "worker:0" in msg and "answers but refuses" in msg and "token" in msg
        monkeypatch.setenv("NBDIST_TOKEN", "s3cret")
        _all_running(ip.run_line_magic("cluster", line), n=1)
        ip.run_line_magic("cluster", "disconnect")


def test_bad_connect_arguments_are_one_line(ip, served, detach):
    assert _usage_error(ip, "connect").startswith("%cluster connect needs one cluster")
    assert _usage_error(ip, "connect nope").startswith("'nope' is not a cluster")
    assert "not a dict literal" in _usage_error(ip, "connect {'worker': [")
    ip.user_ns["n"] = 3
    assert _usage_error(ip, "connect n").startswith("'n' is a int, not a cluster")
    assert "needs the job id" in _usage_error(ip, "connect --slurm")
    assert "--ps and --workers are for" in _usage_error(ip, "connect ps|h:1 --ps 1")
    assert _usage_error(ip, "status --timeout 1").startswith("--timeout is for")
    assert (
        _usage_error(ip, "start --tf_config") == "--tf_config is for %cluster connect"
    )
    assert "--partition and --time are for" in _usage_error(ip, "start --partition p")
    assert "takes no job id" in _usage_error(ip, "start --slurm 12")


def test_disconnect_refuses_a_cluster_the_notebook_started(ip, detach):
    ip.run_line_magic("cluster", "local")
    try:
        assert _usage_error(ip, "disconnect").startswith(
            "this notebook started the cluster: %cluster stop stops it"
        )
    finally:
        ip.run_line_magic("cluster", "stop")


def test_a_running_slurm_job_spec_is_read_from_scontrol():
    """Reading ``scontrol show job``'s answer (the recorded text of a job of
    SLURM 22.05): its comment's spec, else SlurmClusterResolver's layout."""
    from nbdist.cluster import attached as attach

    text = (
        "JobId=7 JobName=nbdist\n   JobState={state} Reason=None Dependency=(null)\n"
        "   NodeList=n[1-2] BatchHost=n1\n   NumNodes=2 NumCPUs=4 NumTasks=4 "
        "CPUs/Task=1\n   Comment={comment}\n"
    )

    def run(state="RUNNING", comment="(null)"):
        class Done:
            returncode, stderr = 0, ""
            stdout = text.format(state=state, comment=comment)

        return lambda *a, **k: Done()

    spec, where = attach.spec_from_slurm_job("7", {"ps": 1, "worker": 3}, run=run())
    assert where == "SLURM job 7"
    assert spec.as_dict() == {
        "ps": ["n1:8888"],
        "worker": ["n1:8889", "n2:8888", "n2:8889"],
    }
    spec, _ = attach.spec_from_slurm_job(
        "7", None, run=run(comment="ps|a:1,worker|b:2")
    )
    assert spec.as_dict() == {"ps": ["a:1"], "worker": ["b:2"]}
    with pytest.raises(attach.ConnectError, match="is CANCELLED, not RUNNING"):
        attach.spec_from_slurm_job("7", {"worker": 4}, run=run("CANCELLED"))
    with pytest.raises(attach.ConnectError, match="runs 4 tasks, not 3"):
        attach.spec_from_slurm_job("7", {"ps": 1, "worker": 2}, run=run())
