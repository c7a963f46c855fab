"""``examples/estimator_tf_config.py`` started as Estimator programs are started
in the wild: five processes (chief, ps, two workers, evaluator), each with its
``TF_CONFIG`` naming a cluster on free ports of 127.0.0.1.

* the chief, both workers and the evaluator exit 0 once the global step reaches
  ``max_steps``; the ps, which serves until it is stopped (as in TF), exits 0
  on SIGTERM;
* the chief wrote TF V2 checkpoints up to the final step and the evaluator the
  final export;
* the evaluator's final accuracy matches one process running the same program
  without ``TF_CONFIG``, within the noise of asynchronous training.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal

import pytest
from helpers import ROOT

import nbdist as nd

pytestmark = pytest.mark.slow

MAX_STEPS = 200
PROCESS_BOUND_S = 150


def load_example():
    spec = importlib.util.spec_from_file_location(
        "estimator_tf_config", ROOT / "examples" / "estimator_tf_config.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(300)
def test_five_processes_with_tf_config_train_like_one(tmp_path, monkeypatch):
    example = load_example()
    model_dir = tmp_path / "distributed"
    procs = {}
    try:
        procs.update(example.launch(str(model_dir), MAX_STEPS,
                                    example.cluster_on_free_ports(),
                                    log_dir=str(tmp_path)))
        ps = procs["ps:0"]
        codes = {name: p.wait(timeout=PROCESS_BOUND_S)
                 for name, p in procs.items() if p is not ps}
        assert ps.poll() is None  # the ps serves until it is told to stop
        ps.send_signal(signal.SIGTERM)
        codes["ps:0"] = ps.wait(timeout=30)
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(timeout=30)
    outputs = {name: (tmp_path / f"{name.replace(':', '_')}.log").read_text()
               for name in procs}
    assert codes == dict.fromkeys(procs, 0), (codes, outputs)

    (line,) = re.findall(r"^final eval (\{.*\})$", outputs["evaluator:0"], re.M)
    distributed = json.loads(line)
    assert distributed["global_step"] >= MAX_STEPS
    checkpoint = nd.train.latest_checkpoint(str(model_dir))
    # The evaluator evaluated the chief's last checkpoint. Its name is the step
    # the chief read before saving; the variables, read while the workers go
    # on, may hold a later step (as in TF's asynchronous training).
    named_step = int(checkpoint.rsplit("-", 1)[1])
    saved_step = nd.train.load_variable(checkpoint, "global_step")
    assert saved_step == distributed["global_step"]
    assert MAX_STEPS <= named_step <= saved_step
    assert os.path.exists(checkpoint + ".index")  # TF's V2 format
    assert os.listdir(model_dir / "export" / "final")

    monkeypatch.delenv("TF_CONFIG", raising=False)
    single = example.run(str(tmp_path / "single"), MAX_STEPS)
    assert single["accuracy"] > 0.9
    assert abs(distributed["accuracy"] - single["accuracy"]) <= 0.03


def test_tf_config_from_a_slurm_allocation(monkeypatch):
    # Five SLURM tasks on two nodes: each one's TF_CONFIG, read by RunConfig.
    example = load_example()
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "5")
    monkeypatch.setenv("SLURM_STEP_NODELIST", "n[1-2]")
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", "3,2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    roles = []
    for rank in range(5):
        monkeypatch.setenv("SLURM_PROCID", str(rank))
        tf_config = example.tf_config_from_slurm(port_base=9000)
        assert tf_config["cluster"] == {
            "chief": ["n1:9000"], "ps": ["n1:9002"],
            "worker": ["n2:9000", "n2:9001"]}
        monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
        config = nd.estimator.RunConfig()
        roles.append((config.task_type, config.task_id, config.master))
    assert roles == [("chief", 0, "grpc://n1:9000"), ("evaluator", 0, ""),
                     ("ps", 0, "grpc://n1:9002"), ("worker", 0, "grpc://n2:9000"),
                     ("worker", 1, "grpc://n2:9001")]
