"""``examples/estimator_tf_config.py`` on three hosts (network namespaces of
their own addresses, ``tests/netns.py``), started as in the wild: one process
per task with ``TF_CONFIG`` naming the hosts' addresses, and the cluster's
shared ``NBDIST_TOKEN`` (servers bound beyond loopback need one). The ps is on
host 0, the chief and worker 0 on host 1, worker 1 and the evaluator on host 2;
the model directory is a shared directory, as a network filesystem would be.

* every task exits 0 (the ps on SIGTERM), the evaluator after the final step;
* the evaluator's final accuracy matches one process running the same program.
Skipped where namespaces cannot be made (not root).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import sys

import pytest
from helpers import ROOT
from test_estimator_tf_config import MAX_STEPS, load_example

import netns

if netns.unavailable():
    pytest.skip(f"no multi-host tests: {netns.unavailable()}", allow_module_level=True)

pytestmark = pytest.mark.slow
EXAMPLE = ROOT / "examples" / "estimator_tf_config.py"


@pytest.mark.timeout(300)
def test_estimator_on_three_hosts_with_tf_config(tmp_path, monkeypatch):
    env = dict(os.environ, NBDIST_TOKEN=secrets.token_hex(16),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    with netns.Hosts(3) as hosts:
        ps_host, host1, host2 = hosts
        cluster = {"ps": [f"{ps_host.address}:2222"],
                   "chief": [f"{host1.address}:2222"],
                   "worker": [f"{host1.address}:2223", f"{host2.address}:2222"]}
        placement = [("ps", 0, ps_host), ("chief", 0, host1), ("worker", 0, host1),
                     ("worker", 1, host2), ("evaluator", 0, host2)]
        procs = {}
        for job, index, host in placement:
            tf_config = json.dumps({"cluster": cluster,
                                    "task": {"type": job, "index": index}})
            procs[f"{job}:{index}"] = host.popen(
                [sys.executable, EXAMPLE, f"--model_dir={tmp_path / 'model'}",
                 f"--max_steps={MAX_STEPS}"], env=dict(env, TF_CONFIG=tf_config),
                cwd=ROOT)
        ps = procs.pop("ps:0")
        codes = {name: p.wait(150) for name, p in procs.items()}
        assert ps.proc.poll() is None
        os.kill(ps.pid, signal.SIGTERM)
        codes["ps:0"] = ps.wait(30)
        assert set(codes.values()) == {0}, {n: p.output for n, p in procs.items()}
        (line,) = re.findall(r"^final eval (\{.*\})$", procs["evaluator:0"].output,
                             re.M)
    distributed = json.loads(line)
    assert distributed["global_step"] >= MAX_STEPS
    monkeypatch.delenv("TF_CONFIG", raising=False)
    single = load_example().run(str(tmp_path / "single"), MAX_STEPS)
    assert abs(distributed["accuracy"] - single["accuracy"]) <= 0.03
