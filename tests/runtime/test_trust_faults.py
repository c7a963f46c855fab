"""Fault rules belong to the cluster's owner, and are bounded.

* Another process that reaches a task (with the data token, too) and sends
  ``SetFaults`` — a 50 ms slowdown, a partition, or a heal — gets
  ``PermissionDeniedError``: it does not hold the owner credential of the
  process that started the task (``NBDIST_FAULT_OWNER``); nothing changes.
  The owner's own call is taken. Before, all of them were accepted.
* A task holds at most ``MAX_RULES`` rules; eleven rules of 1 s delay a call
  by ``MAX_DELAY_S`` (10 s), not 11 s.
* ``heal`` asks every task, clears every rule (also rules this notebook did
  not set), and says what each task removed; before it said "no fault to
  heal" and left a link cut.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
import uuid

import pytest
from helpers import ROOT, local_cluster

import nbdist as nd
from nbdist import errors
from nbdist.notebook import fault_control
from nbdist.runtime.faults import MAX_DELAY_S, MAX_RULES, FaultRule, Faults

W0 = "/job:worker/replica:0/task:0"
PS0 = "/job:ps/replica:0/task:0"

# A process of the same user that knows the address and the data token.
_INTRUDER = """
import json, sys
from nbdist import errors
from nbdist.runtime import transports
client = transports.connect_worker(sys.argv[1], sys.argv[2], token=sys.argv[3])
out = []
for rules in ([("slow", "", 0.05)], [("partition", sys.argv[4], 0.0)], []):
    try:
        client.set_faults(rules)
        out.append("OK")
    except errors.OpError as e:
        out.append(type(e).__name__)
client.close()
print(json.dumps(out))
"""


def test_another_process_cannot_set_or_clear_faults():
    cluster = local_cluster(worker=1, ps=1)
    server = nd.Server(cluster, job_name="worker", task_index=0, token="data-token")
    try:
        server.faults.set([FaultRule("partition", PS0)])  # in process: the owner
        child_env = {k: v for k, v in os.environ.items() if k != "NBDIST_FAULT_OWNER"}
        child_env["PYTHONPATH"] = os.environ.get("PYTHONPATH", str(ROOT))
        done = subprocess.run(
            [sys.executable, "-c", _INTRUDER, W0, cluster["worker"][0], "data-token",
             PS0], env=child_env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.splitlines()[-1]) == ["PermissionDeniedError"] * 3
        assert server.faults.rules == [FaultRule("partition", PS0)]  # untouched
        from nbdist.runtime import transports

        client = transports.connect_worker(W0, cluster["worker"][0],
                                           token="data-token")
        try:
            removed: list = []
            assert client.set_faults([], removed) == []  # the owner heals
            assert removed == [("partition", PS0, 0.0)]
        finally:
            client.close()
        assert not server.faults.active
    finally:
        server.stop()


def test_rules_are_bounded_in_number_and_in_the_delay_they_add():
    faults = Faults(W0)
    with pytest.raises(errors.InvalidArgumentError, match=f"at most {MAX_RULES}"):
        faults.set([("slow", "", 1.0)] * (MAX_RULES + 1))
    assert not faults.active
    faults.set([("slow", "", 1.0)] * 11)
    assert faults.delay_of(PS0) == MAX_DELAY_S
    mine = Faults(W0, owner="me")
    with pytest.raises(errors.PermissionDeniedError, match="only the cluster's owner"):
        mine.replace([], "someone else")
    assert mine.replace([("slow", "", 1.0)], "me") == ([("slow", "", 1.0)], [])


def test_heal_clears_every_tasks_rules_and_says_what_it_removed():
    name = uuid.uuid4().hex[:8]
    spec = {"ps": [f"ps-{name}"], "worker": [f"w0-{name}", f"w1-{name}"]}
    servers = [nd.Server(spec, job_name=job, task_index=i, protocol="inproc")
               for job, i in (("ps", 0), ("worker", 0), ("worker", 1))]
    cluster = types.SimpleNamespace(cluster_spec=nd.train.ClusterSpec(spec),
                                    server_def=types.SimpleNamespace(protocol="inproc"))
    try:
        # Rules this notebook's table does not know (another cell, a restart).
        servers[0].faults.set([FaultRule("partition", W0)])
        servers[1].faults.set([FaultRule("partition", PS0),
                               FaultRule("slow", "", 0.02)])
        said = fault_control.heal(cluster)
        assert said == ("healed: removed link worker:0 ↔ ps:0 cut; worker:0 slowed "
                        "by 20 ms (no fault left)")
        assert not any(s.faults.active for s in servers)
        assert fault_control.heal(cluster) == "no fault to heal"
    finally:
        for s in servers:
            s.stop()
