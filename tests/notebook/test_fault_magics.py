"""``%cluster slow/partition/heal`` through a real IPython shell on real
``LocalCluster`` processes: the faults reach the task processes (the worker
service's ``SetFaults`` over gRPC), show in ``ClusterView``'s history, and are
refused on a cluster attached with ``%cluster connect``."""

from __future__ import annotations

import time

import numpy as np
import pytest
from IPython.core.error import UsageError

import nbdist as nd

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ip():
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    start_ipython()
    shell = get_ipython()
    shell.reset(new_session=False)
    if "nbdist" not in shell.extension_manager.loaded:
        shell.run_line_magic("load_ext", "nbdist")
    yield shell
    from nbdist.notebook import magics

    for m in magics._active:
        m.close()


def _usage_error(ip, line) -> str:
    with pytest.raises(UsageError) as e:
        ip.run_line_magic("cluster", line)
    text = str(e.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def _read_on_worker1(target):
    """A variable of ps:0 doubled on worker:1: one RunGraph worker:1 -> ps:0
    and one tensor ps:0 -> worker:1 per step; returns (value, seconds)."""
    with nd.Graph().as_default():
        with nd.device("/job:ps/task:0"):
            v = nd.Variable(np.arange(3, dtype=np.float32), name="v")
        with nd.device("/job:worker/task:1"):
            y = v * 2.0
        with nd.Session(target) as sess:
            sess.run(v.initializer)
            sess.run(y)
            start = time.monotonic()
            value = sess.run(y)
            return value, time.monotonic() - start


def test_fault_magics_on_an_owned_cluster(ip, capsys):
    assert _usage_error(ip, "slow worker:1 20ms").startswith("no cluster is running")
    ip.run_line_magic("cluster", "start --ps 1 --workers 2")
    try:
        target = ip.user_ns["cluster"].target("worker", 1)
        capsys.readouterr()
        ip.run_line_magic("cluster", "slow worker:1 20ms")
        assert capsys.readouterr().out.startswith("slowed worker:1 by 20 ms")
        value, seconds = _read_on_worker1(target)
        np.testing.assert_array_equal(value, [0.0, 2.0, 4.0])
        assert seconds >= 0.02  # its calls to ps:0 (concurrent) wait 20 ms first

        ip.run_line_magic("cluster", "partition worker:1 ps:0")
        assert "cut the link worker:1 ↔ ps:0" in capsys.readouterr().out
        with pytest.raises(nd.errors.UnavailableError, match="link between them is cut"):
            _read_on_worker1(target)
        ip.run_line_magic("cluster", "heal")
        assert capsys.readouterr().out.strip() == (
            "healed: removed worker:1 slowed by 20 ms; link worker:1 ↔ ps:0 cut "
            "(no fault left)")
        value, _ = _read_on_worker1(target)
        np.testing.assert_array_equal(value, [0.0, 2.0, 4.0])

        status = ip.run_line_magic("cluster", "status")  # a snapshot ClusterView
        history = dict(status.state.history_lines())
        assert "slowed worker:1 by 20 ms" in history["worker:1"]
        assert "cut the link worker:1 ↔ ps:0" in history["ps:0"]
        assert "healed" in history["worker:1"]

        assert "needs a task and a delay" in _usage_error(ip, "slow worker:1")
        assert "'fast' is not a delay" in _usage_error(ip, "slow worker:1 fast")
        assert "no task worker:9" in _usage_error(ip, "slow worker:9 20ms")
        assert "needs two tasks" in _usage_error(ip, "partition worker:1")
        assert "takes no argument" in _usage_error(ip, "heal worker:1")
    finally:
        ip.run_line_magic("cluster", "stop")


def test_fault_magics_are_refused_on_an_attached_cluster(ip, capsys):
    with nd.LocalCluster(ps=1, workers=1, progress=False) as running:
        spec = running.cluster_spec.as_dict()
        text = ",".join(f"{job}|{';'.join(spec[job])}" for job in ("ps", "worker"))
        ip.run_line_magic("cluster", f"connect {text}")
        try:
            for line in ("slow worker:0 20ms", "partition worker:0 ps:0", "heal"):
                err = _usage_error(ip, line)
                assert "does not own its processes" in err, err
            # Nothing was set: the task still answers at full speed.
            from nbdist.runtime import transports

            client = transports.connect_worker("/job:worker/replica:0/task:0",
                                               spec["worker"][0])
            try:
                assert client.set_faults([]) == []
            finally:
                client.close()
        finally:
            ip.run_line_magic("cluster", "disconnect")
