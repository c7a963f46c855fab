"""``examples/estimator_tf_config.py`` under a real SLURM (``tests/slurm.py``:
``munged``, ``slurmctld`` and ``slurmd`` on this host, nothing mocked), started
as such jobs are: ``sbatch`` of a 5-task job whose ``srun`` runs the example
with ``--slurm`` in every task, each task's ``TF_CONFIG`` made from SLURM's
variables by the example's ``tf_config_from_slurm`` (tasks 0-4: chief,
evaluator, ps, worker 0, worker 1).

* the chief, the evaluator and both workers exit 0 once training reaches
  ``max_steps``, while the ps serves on until the job is cancelled (``scancel``,
  as TF's ps is ended), which ends the job CANCELLED;
* a one-node job needs no ``NBDIST_TOKEN`` when the node's name resolves to
  loopback only (here it does when ``$(hostname)`` is in ``/etc/hosts`` as
  127.0.0.1): the servers listen on loopback;
* each task found its role and the cluster (the evaluator outside it) on the
  allocation's node, on ports from ``--port_base``;
* the chief wrote TF V2 checkpoints up to the final step and the final
  export; the evaluator's final eval is of the chief's last checkpoint and
  learnt the task (a single process reaches 0.93 in these steps).
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys

import pytest
from helpers import ROOT, put_test_dirs_on_path, wait_for
from slurm import Slurm, unavailable

import nbdist as nd
from nbdist.estimator.training import _resolves_to_loopback_only

put_test_dirs_on_path()
from test_slurm import POLL_S, free_port_base, job_fields  # noqa: E402

pytestmark = pytest.mark.slow

MAX_STEPS = 100
TASKS = ("chief", "evaluator", "ps", "worker", "worker")
FINISH_BOUND_S = 360.0  # all but the ps done; five processes on a loaded machine
END_BOUND_S = 60.0  # the job gone after scancel
_EXIT = re.compile(r"^task exit status (\d+)$", re.MULTILINE)


def read_logs(tmp_path) -> dict[int, str]:
    return {r: (p.read_text(errors="replace") if (p := tmp_path / f"task-{r}.log")
                .exists() else "") for r in range(len(TASKS))}


def job_state(slurm, job_id: str) -> str:
    return job_fields(slurm, job_id)["JobState"]


@pytest.mark.timeout(FINISH_BOUND_S + END_BOUND_S + 120)
def test_sbatch_of_the_estimator_example_with_tf_config_from_slurm(tmp_path):
    if why := unavailable():
        pytest.skip(f"no SLURM tests: {why}")
    base = free_port_base(len(TASKS))
    model_dir = tmp_path / "model"
    script = tmp_path / "job.sh"
    # Each task's exit status goes to its log: the ps never exits by itself, so
    # the step (and srun's summary of its tasks) ends only at scancel.
    script.write_text(
        f"#!/bin/sh\n#SBATCH --ntasks={len(TASKS)}\n"
        f"#SBATCH --job-name=nbdist-estimator\n#SBATCH --output={tmp_path}/job.log\n"
        "export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1\n"
        f"srun --output={tmp_path}/task-%t.log sh -c '"
        f"{sys.executable} {ROOT}/examples/estimator_tf_config.py --slurm "
        f"--port_base={base} --model_dir={model_dir} --max_steps={MAX_STEPS}; "
        "echo task exit status $?'\n")
    with Slurm(cpus=len(TASKS)) as slurm:
        env = dict(slurm.env)
        if not _resolves_to_loopback_only(slurm.node):
            # The servers then listen beyond loopback: that needs the token.
            env["NBDIST_TOKEN"] = secrets.token_hex(16)
        job_id = subprocess.run(["sbatch", "--parsable", str(script)], env=env,
                                capture_output=True, text=True, check=True,
                                timeout=30).stdout.strip()
        try:
            # SLURM and the tasks send no event when a task ends: poll the logs.
            wait_for(lambda: sum(bool(_EXIT.search(v)) for v in
                                 read_logs(tmp_path).values()) >= len(TASKS) - 1
                     or job_state(slurm, job_id) not in ("PENDING", "CONFIGURING",
                                                         "RUNNING"),
                     FINISH_BOUND_S, "chief, evaluator and workers to exit",
                     interval=POLL_S)
            logs = read_logs(tmp_path)
            ps_serving = job_state(slurm, job_id) == "RUNNING"
        finally:
            slurm.run(["scancel", job_id], check=False)
            state = wait_for(
                lambda: (s := job_state(slurm, job_id)) not in (
                    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING") and s,
                END_BOUND_S, f"end of SLURM job {job_id}", interval=POLL_S)
    everything = (tmp_path / "job.log").read_text() + "\n".join(
        f"-- task {r}:\n{v}" for r, v in logs.items())
    exits = {r: _EXIT.findall(v) for r, v in logs.items()}
    assert exits == {0: ["0"], 1: ["0"], 2: [], 3: ["0"], 4: ["0"]}, everything
    assert ps_serving and state == "CANCELLED", (state, everything)

    host = slurm.node
    cluster = {"chief": [f"{host}:{base}"], "ps": [f"{host}:{base + 2}"],
               "worker": [f"{host}:{base + 3}", f"{host}:{base + 4}"]}
    for r, job in enumerate(TASKS):
        (line,) = re.findall(r"^TF_CONFIG (\{.*\})$", logs[r], re.MULTILINE)
        assert json.loads(line) == {"cluster": cluster, "task": {
            "type": job, "index": 1 if r == 4 else 0}}, everything

    (line,) = re.findall(r"^final eval (\{.*\})$", logs[1], re.MULTILINE)
    final = json.loads(line)
    checkpoint = nd.train.latest_checkpoint(str(model_dir))
    assert checkpoint and (model_dir / "export" / "final").is_dir(), everything
    assert (tmp_path / "model" / (checkpoint.rsplit("/", 1)[1] + ".index")).exists()
    named_step = int(checkpoint.rsplit("-", 1)[1])
    saved_step = nd.train.load_variable(checkpoint, "global_step")
    assert final["global_step"] == saved_step
    assert MAX_STEPS <= named_step <= saved_step
    assert final["accuracy"] > 0.85, final
