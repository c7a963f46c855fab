"""A short soak: ``scripts/soak.py``'s two jobs under random failures for 150 s.

The same loop as ``scripts/soak.py --minutes 30`` (a ``ClusterCoordinator`` job
on 1 ps + 4 workers whose workers are SIGKILLed and restarted, slowed and cut
off from the ps; a ``MonitoredTrainingSession`` job on 1 ps + 1 worker whose ps
is SIGKILLed and restarted), for 2.5 minutes. Nothing may be lost:

* every closure scheduled came back with its own argument or with an error
  (none lost, none wrong); the counter's re-runs are at-least-once's;
* the monitored job's weights equal a one-process replay of as many steps,
  and its last checkpoint reads back at a step it reached;
* the chaos did what it drew, without errors of its own;
* every task ends below ``RSS_BOUND_MIB`` (a task's first minute of work takes
  it from ~60 to ~130 MiB: imports and caches; the slow leak of ~0.5 MiB per ps
  restart that the 30-minute soak showed is ``test_trust_leaks.py``'s to catch);
* every task process ever started (restarts included) is gone at the end,
  stopped by PID.
"""

from __future__ import annotations

import importlib.util
import math

import pytest
from helpers import ROOT, wait_gone

pytestmark = pytest.mark.slow

MINUTES = 2.5
RSS_BOUND_MIB = 256.0


def _soak_module():
    spec = importlib.util.spec_from_file_location("soak", ROOT / "scripts" / "soak.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(300)
def test_a_short_soak_loses_nothing():
    soak = _soak_module()
    result = soak.soak(MINUTES, seed=37)
    jobs = result["jobs"]
    coordinator, monitored = jobs["coordinator"], jobs["monitored"]
    assert not soak.failed(result), jobs
    assert coordinator["scheduled"] > 0 and coordinator["lost"] == 0, coordinator
    assert coordinator["results"] + coordinator["failed"] == coordinator["scheduled"]
    assert coordinator["re-runs"] >= 0, coordinator
    assert monitored["weights = replay"], monitored
    assert 0 < monitored["last checkpoint step"] <= monitored["global steps"], monitored
    for chaos in result["chaos"]:
        assert sum(chaos.done.values()) > 0, f"no chaos on the {chaos.name} cluster"
        assert not chaos.errors, chaos.errors
    for task, (_, (_, rss, _)) in result["usage"].items():
        assert math.isnan(rss) or rss < RSS_BOUND_MIB, f"{task}: {rss:.0f} MiB"
    assert wait_gone(sorted(result["pids"]), timeout=30) == []
