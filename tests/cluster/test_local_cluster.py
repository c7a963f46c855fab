"""LocalCluster: real processes that start, serve, die and never outlive us."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from helpers import pid_alive, wait_gone

import nbdist as nd
from nbdist.cluster.local_cluster import LocalCluster

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def fresh_graph():
    nd.reset_default_graph()
    yield


def test_start_run_kill_restart_shutdown():
    cluster = LocalCluster(ps=1, workers=2, progress=False)
    try:
        tasks = cluster.tasks
        assert sorted((t.job, t.index) for t in tasks) == [
            ("ps", 0), ("worker", 0), ("worker", 1)]
        assert all(t.state == "running" and pid_alive(t.pid) for t in tasks)
        assert cluster.cluster_spec.num_tasks("worker") == 2
        assert cluster.targets["worker"][1] == cluster.target("worker", 1)
        with nd.device("/job:ps/task:0"):
            v = nd.Variable(41.0, name="v")
        with nd.device("/job:worker/task:1"):
            y = v + 1.0
        with nd.Session(cluster.target("worker", 0)) as s:
            s.run(v.initializer)
            assert s.run(y) == 42.0
        old = next(t for t in cluster.tasks if t.job == "worker" and t.index == 1)
        cluster.kill("worker", 1)
        assert wait_gone([old.pid]) == []
        assert next(t for t in cluster.tasks if (t.job, t.index) == ("worker", 1)
                    ).state == "killed"
        cluster.restart("worker", 1)
        new = next(t for t in cluster.tasks if (t.job, t.index) == ("worker", 1))
        assert new.state == "running" and new.pid != old.pid
        assert new.address == old.address
        with nd.Session(cluster.target("worker", 0)) as s:
            assert s.run(y) == 42.0  # the ps kept its variable
        with pytest.raises(ValueError, match="no task worker:9"):
            cluster.kill("worker", 9)
    finally:
        pids = [t.pid for t in cluster.tasks]
        cluster.shutdown()
    assert wait_gone(pids) == []
    assert all(t.state == "stopped" for t in cluster.tasks)


def test_with_block_exception_leaves_no_process():
    pids = []
    with pytest.raises(RuntimeError, match="boom"):
        with LocalCluster(ps=1, workers=1, progress=False) as cluster:
            pids = [t.pid for t in cluster.tasks]
            raise RuntimeError("boom")
    assert len(pids) == 2
    assert wait_gone(pids) == []


def test_children_die_when_the_parent_is_sigkilled():
    script = textwrap.dedent("""
        import json, sys, time
        from nbdist.cluster.local_cluster import LocalCluster
        c = LocalCluster(ps=1, workers=2, progress=False)
        print(json.dumps([t.pid for t in c.tasks]), flush=True)
        time.sleep(120)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              text=True)
    pids = []
    try:
        line = parent.stdout.readline()
        pids = json.loads(line)
        assert len(pids) == 3 and all(pid_alive(p) for p in pids)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        assert wait_gone(pids) == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
        parent.stdout.close()
        for p in pids:
            if pid_alive(p):
                os.kill(p, signal.SIGKILL)


def test_a_task_that_cannot_start_is_named(monkeypatch):
    import socket

    from nbdist.cluster import local_cluster as lc

    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    monkeypatch.setattr(lc, "_free_ports", lambda n: [port] * n)
    try:
        with pytest.raises(nd.errors.UnavailableError,
                           match="(?s)/job:worker/replica:0/task:0.*listen"):
            LocalCluster(ps=0, workers=1, progress=False, start_timeout=20)
    finally:
        blocker.close()
