"""nbdist under a real SLURM (issue 14): ``munged``, ``slurmctld`` and
``slurmd`` on 127.0.0.1 for the session (``tests/slurm.py``), nothing mocked.

* ``sbatch`` of a ``trainer.py``-style job, ``--ntasks=3``: every task finds its
  place and its peers with ``SlurmClusterResolver`` (1 ps and 2 workers from
  its arguments), serves its task, and the workers train the trainer's model
  between-graph (``examples/trainer.py``'s model), 40 steps each; the loss falls from ln(10)
  and the job ends COMPLETED.
* ``SlurmCluster``: starts, trains a step across its tasks (the NumPy
  oracle), exposes its job id, hosts, pids, logs and spec (also in the job's
  comment), cannot restart a task, and its shutdown cancels the job, as does
  the exit of the Python that started it (a notebook's kernel); a job
  that fails at start, or is cancelled, or waits past ``start_timeout``
  raises with its state and the tail of its logs.

SLURM's tasks run this file as a script (``python tests/cluster/test_slurm.py train
...``).
"""

from __future__ import annotations

import argparse
import math
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: helpers

import helpers
from helpers import pid_alive, wait_for
from slurm import session_slurm

helpers.put_test_dirs_on_path()  # run as a script: test modules by basename
from test_training_cluster import softmax_model

import nbdist as nd
from nbdist import errors

JOB_TIMEOUT_S = 120.0
POLL_S = 0.1  # SLURM and processes say nothing when they change: poll
LOCAL_STEPS = 40  # steps of each worker of the sbatch trainer
_LINE = re.compile(r"worker (\d) step (\d+) global_step (\d+) loss ([\d.]+)")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def slurm():
    with session_slurm() as s:
        yield s


# -- helpers ------------------------------------------------------------------------
def job_fields(slurm, job_id: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S*)",
                           slurm.run(["scontrol", "show", "job", "-o", job_id])))


def wait_for_job_end(slurm, job_id: str) -> str:
    alive = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING"}
    state = wait_for(
        lambda: (s := job_fields(slurm, job_id)["JobState"]) not in alive and s,
        JOB_TIMEOUT_S, f"end of SLURM job {job_id}", interval=POLL_S)
    return state


def queued(slurm, job_id: str) -> bool:
    return bool(slurm.run(["squeue", "-h", "-j", job_id, "-o", "%i"],
                          check=False).strip())


def free_port_base(n: int) -> int:
    """A port p with p ... p + n - 1 all free on 127.0.0.1."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        try:
            socks = []
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {n} consecutive free ports")


# -- sbatch of a trainer.py job -----------------------------------------------------
def train_worker(target: str, cluster, index: int, checkpoint_dir: str):
    """``examples/trainer.py``'s model and loop (between-graph, variables on the
    ps by ``replica_device_setter``), ``LOCAL_STEPS`` steps on each worker."""
    rng = np.random.default_rng(index)
    centers = (0.5 * np.random.default_rng(42).standard_normal((10, 64))).astype(
        np.float32)
    with nd.Graph().as_default():
        with nd.device(nd.train.replica_device_setter(
                worker_device=f"/job:worker/task:{index}", cluster=cluster)):
            x, y, loss = softmax_model()
            global_step = nd.train.get_or_create_global_step()
            train_op = nd.train.AdagradOptimizer(0.05).minimize(
                loss, global_step=global_step)
        config = nd.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"])
        with nd.train.MonitoredTrainingSession(
                master=target, is_chief=index == 0, config=config,
                checkpoint_dir=checkpoint_dir if index == 0 else None,
                log_step_count_steps=None) as sess:
            for step in range(1, LOCAL_STEPS + 1):
                labels = rng.integers(0, 10, 64)
                xs = (centers[labels] + rng.standard_normal((64, 64))).astype(
                    np.float32)
                _, lv, gs = sess.run([train_op, loss, global_step],
                                     {x: xs, y: labels.astype(np.int32)})
                print(f"worker {index} step {step} global_step {gs} loss {lv:.4f}",
                      flush=True)


def train_task(flags) -> int:
    """One SLURM task of the sbatch job: its place from SlurmClusterResolver,
    a server, then (a worker) the training loop; every task stays until both
    workers are done."""
    from nbdist.cluster.resolvers import SlurmClusterResolver

    resolver = SlurmClusterResolver(jobs={"ps": 1, "worker": 2},
                                    port_base=flags.port_base)
    cluster = resolver.cluster_spec()
    job, index = resolver.task_type, resolver.task_id
    server = nd.train.Server(cluster, job_name=job, task_index=index)
    print(f"{job} {index} of {cluster.as_dict()} serving at {server.target}",
          flush=True)
    if job == "worker":
        train_worker(server.target, cluster, index, f"{flags.dir}/checkpoints")
        Path(flags.dir, f"done-{index}").touch()
    done = [Path(flags.dir, f"done-{i}") for i in range(2)]
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while not all(p.exists() for p in done):  # the other tasks write files
        if time.monotonic() > deadline:
            print(f"{job} {index}: the workers did not finish", flush=True)
            return 1
        time.sleep(0.05)
    server.stop()
    return 0


def test_sbatch_trainer_job_with_slurm_cluster_resolver(slurm, tmp_path):
    base = free_port_base(3)
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/sh\n#SBATCH --ntasks=3\n#SBATCH --job-name=nbdist-trainer\n"
        f"#SBATCH --output={tmp_path}/job.log\n"
        "export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1\n"
        f"srun --kill-on-bad-exit=1 --output={tmp_path}/task-%t.log "
        f"{sys.executable} {__file__} train --port_base={base} --dir={tmp_path}\n")
    job_id = slurm.run(["sbatch", "--parsable", str(script)], check=True).strip()
    state = wait_for_job_end(slurm, job_id)
    logs = {r: (tmp_path / f"task-{r}.log").read_text() for r in range(3)}
    everything = (tmp_path / "job.log").read_text() + "\n".join(logs.values())
    assert state == "COMPLETED", everything
    # SlurmClusterResolver's layout: ps first (jobs sorted), ports from the base.
    host = slurm.node
    assert f"ps 0 of {{'ps': ['{host}:{base}'], 'worker': ['{host}:{base + 1}', " \
        f"'{host}:{base + 2}']}}" in logs[0], everything
    assert "worker 1 of" in logs[2]
    losses = {0: [], 1: []}
    global_steps = []
    for r in (1, 2):
        for m in _LINE.finditer(logs[r]):
            losses[int(m.group(1))].append(float(m.group(4)))
            global_steps.append(int(m.group(3)))
    assert all(len(v) == LOCAL_STEPS for v in losses.values()), everything
    # The first step to read the weights reads zeros: its loss is ln(10)...
    assert min(abs(v[0] - math.log(10)) for v in losses.values()) < 1e-4, losses
    # ... and both workers end well below it, having shared the global steps.
    for v in losses.values():
        assert np.mean(v[-3:]) < 0.6 * math.log(10), losses
    # 2 x LOCAL_STEPS increments; a step reads the count before or after its own.
    assert 2 * LOCAL_STEPS - 1 <= max(global_steps) <= 2 * LOCAL_STEPS


# -- SlurmCluster -------------------------------------------------------------------
def test_slurm_cluster_starts_trains_and_shutdown_cancels_the_job(slurm, tmp_path):
    cluster = nd.SlurmCluster(
        ps=1, workers=2, partition="debug", time="5:00", cpus_per_task=1,
        mem="100M", job_extra=["--nice=0", "#SBATCH --open-mode=append"],
        progress=False, start_timeout=60, log_dir=str(tmp_path),
        job_name="nbdist-sc")
    with cluster:
        job_id = cluster.job_id
        assert re.fullmatch(r"\d+", job_id) and queued(slurm, job_id)
        script = Path(cluster.script).read_text()
        for line in ("#SBATCH --ntasks=3", "#SBATCH --partition=debug",
                     "#SBATCH --time=5:00", "#SBATCH --cpus-per-task=1",
                     "#SBATCH --mem=100M", "#SBATCH --nice=0",
                     "#SBATCH --open-mode=append"):
            assert line + "\n" in script
        fields = job_fields(slurm, job_id)
        assert fields["JobState"] == "RUNNING" and fields["NumTasks"] == "3"
        assert fields["JobName"] == "nbdist-sc" and fields["Partition"] == "debug"
        spec = cluster.cluster_spec.as_dict()
        assert sorted(spec) == ["ps", "worker"] and len(spec["worker"]) == 2
        assert fields["Comment"] == ",".join(
            f"{j}|" + ";".join(spec[j]) for j in ("ps", "worker"))
        tasks = cluster.tasks
        assert [(t.job, t.index, t.state) for t in tasks] == [
            ("ps", 0, "running"), ("worker", 0, "running"), ("worker", 1, "running")]
        for t in tasks:
            assert t.host == "localhost" and t.address == f"localhost:{t.port}"
            assert cluster.target(t.job, t.index) == f"grpc://{t.address}"
            assert pid_alive(t.pid)
            # The task answers before srun has always written its stdout out.
            line = f"{t.name} listening on 127.0.0.1:{t.port} (pid {t.pid})"
            wait_for(lambda t=t, line=line: line in cluster.log(t.job, t.index), 30,
                     f"{t.name}'s listening line in its log", interval=POLL_S)
            assert t.log.startswith(str(tmp_path))
        assert cluster.coordination_target == cluster.target("worker", 0)
        with pytest.raises(NotImplementedError, match="one step of SLURM job"):
            cluster.restart("worker", 1)
        with pytest.raises(ValueError, match="no task worker:5"):
            cluster.target("worker", 5)

        # One SGD step across the tasks: w on the ps, the gradient on worker 1.
        x0, y0, lr = np.float32([1.0, 2.0, 3.0]), np.float32([2.0, 3.0, 7.0]), 0.05
        with nd.Graph().as_default():
            with nd.device("/job:ps/task:0"):
                w = nd.Variable(np.float32([0.5, -1.0, 2.0]), name="w")
            with nd.device("/job:worker/task:1"):
                loss = nd.reduce_sum(nd.square(w * x0 - y0))
                step = nd.train.GradientDescentOptimizer(lr).minimize(loss)
            with nd.Session(cluster.target("worker", 0)) as sess:
                sess.run(nd.global_variables_initializer())
                before = sess.run(loss)
                sess.run(step)
                w1, after = sess.run([w, loss])
        w0 = np.float32([0.5, -1.0, 2.0])
        want = w0 - lr * 2 * (w0 * x0 - y0) * x0
        np.testing.assert_allclose(before, np.sum((w0 * x0 - y0) ** 2), rtol=1e-6)
        np.testing.assert_allclose(w1, want, rtol=1e-6)
        assert after < before
    assert not queued(slurm, job_id)
    assert all(t.state == "stopped" for t in cluster.tasks)
    wait_for(lambda: not any(pid_alive(t.pid) for t in tasks), 20,
             "exit of the tasks' processes", interval=POLL_S)
    cluster.shutdown()  # idempotent


def test_the_job_is_cancelled_when_the_python_that_started_it_exits(slurm, tmp_path):
    code = ("import nbdist as nd; c = nd.SlurmCluster(ps=1, workers=1, "
            f"progress=False, start_timeout=60, log_dir={str(tmp_path)!r}); "
            "print(c.job_id, flush=True)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=JOB_TIMEOUT_S, check=False)
    assert r.returncode == 0, r.stderr
    job_id = r.stdout.split()[-1]
    assert job_fields(slurm, job_id)["JobState"] in ("CANCELLED", "COMPLETING")
    wait_for(lambda: not queued(slurm, job_id), 30, f"job {job_id} out of squeue",
             interval=POLL_S)


def test_a_job_failing_at_start_surfaces_its_state_and_log_tail(slurm, tmp_path):
    # An address no interface of this machine has: every task fails to bind.
    with pytest.raises(errors.UnavailableError) as e:
        nd.SlurmCluster(ps=1, workers=1, progress=False, start_timeout=60,
                        log_dir=str(tmp_path), bind="192.0.2.1")
    msg = str(e.value)
    # The first task to fail exits 1; srun then terminates the other (143): which
    # one SLURM reports as the job's code depends on which ended first.
    assert re.search(r"SLURM job \d+ is FAILED \(.*ExitCode=(1|143):0\) before "
                     "every task answered", msg), msg
    assert "-- task-0.log:" in msg and "Cannot assign requested address" in msg
    job_id = re.search(r"SLURM job (\d+)", msg).group(1)
    assert not queued(slurm, job_id)


def test_a_job_cancelled_while_starting_says_so(slurm, tmp_path):
    result = {}

    def start():
        try:
            result["cluster"] = nd.SlurmCluster(
                ps=1, workers=1, progress=False, start_timeout=60,
                log_dir=str(tmp_path), job_name="nbdist-cancelled",
                job_extra=["--begin=now+600"])
        except errors.OpError as e:
            result["error"] = e

    t = threading.Thread(target=start)
    t.start()
    job_id = wait_for(lambda: slurm.run(
        ["squeue", "-h", "-n", "nbdist-cancelled", "-o", "%i"]).strip(), 20,
        "the job in squeue", interval=POLL_S)
    slurm.run(["scancel", job_id])
    t.join(30)
    assert not t.is_alive() and "error" in result, result
    assert isinstance(result["error"], errors.UnavailableError)
    assert f"SLURM job {job_id} is CANCELLED" in str(result["error"])


def test_a_job_pending_past_start_timeout_is_named_and_cancelled(slurm, tmp_path):
    with pytest.raises(errors.DeadlineExceededError) as e:
        nd.SlurmCluster(ps=1, workers=1, progress=False, start_timeout=2,
                        log_dir=str(tmp_path), job_extra=["--begin=now+600"])
    msg = str(e.value)
    assert re.search(r"job \d+ \(PENDING, Reason=BeginTime\): no task published "
                     r"its address within 2 s", msg), msg
    assert not queued(slurm, re.search(r"job (\d+)", msg).group(1))


def test_bad_arguments_are_refused_before_submitting():
    with pytest.raises(ValueError, match="worker must be an int >= 0"):
        nd.SlurmCluster(workers=-1)
    with pytest.raises(ValueError, match="at least one task"):
        nd.SlurmCluster(ps=0, workers=0)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["train"])
    p.add_argument("--port_base", type=int, required=True)
    p.add_argument("--dir", required=True)
    sys.exit(train_task(p.parse_args()))
