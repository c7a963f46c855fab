"""Collectives between worker tasks that each run their own session: all-reduce,
all-gather and broadcast against NumPy on 2 and 3 in-process servers;
MultiWorkerMirroredStrategy against one process on the averaged gradient; a
killed worker fails its peers' collectives with UnavailableError."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from helpers import ROOT, in_threads, local_cluster

import nbdist as nd
from nbdist import errors
from nbdist.ops import collective_ops
from nbdist.runtime import collective


@pytest.fixture
def workers(servers):
    def make(n):
        spec = local_cluster(worker=n)
        return [servers(spec, "worker", i) for i in range(n)]

    return make


@pytest.mark.parametrize("n", [2, 3])
def test_collectives_match_numpy(workers, n, monkeypatch):
    # Small ring segments: the big tensor goes round in many pieces at once.
    monkeypatch.setattr(collective, "SEGMENT_BYTES", 4096)
    tasks = workers(n)
    rng = np.random.RandomState(0)
    small = [rng.randn(5, 3).astype(np.float32) for _ in range(n)]
    big = [rng.randn(40_000).astype(np.float64) for _ in range(n)]
    ints = [np.arange(7, dtype=np.int32) * (i + 1) for i in range(n)]
    rows = [rng.randn(i + 1, 2).astype(np.float32) for i in range(n)]

    def task(i):
        with nd.Graph().as_default():
            ops = [
                collective_ops.all_reduce(small[i], n, 1, 1),
                collective_ops.all_reduce(small[i], n, 1, 2, final_op="Div"),
                collective_ops.all_reduce(big[i], n, 1, 3),
                collective_ops.all_reduce(ints[i], n, 1, 4, merge_op="Max"),
                collective_ops.all_gather(rows[i], n, 1, 5),
                collective_ops.broadcast_send(small[i], n, 1, 6) if i == 0 else
                collective_ops.broadcast_recv([5, 3], nd.float32, n, 1, 6),
            ]
            with nd.Session(tasks[i].target) as sess:
                first = sess.run(ops)
                again = sess.run(ops[0])  # a second execution of instance 1
            return first, again

    for (total, mean, big_total, top, gathered, bcast), again in in_threads(n, task):
        np.testing.assert_allclose(total, np.sum(small, axis=0), rtol=1e-6)
        np.testing.assert_allclose(again, np.sum(small, axis=0), rtol=1e-6)
        np.testing.assert_allclose(mean, np.mean(small, axis=0), rtol=1e-6)
        np.testing.assert_allclose(big_total, np.sum(big, axis=0), rtol=1e-12)
        np.testing.assert_array_equal(top, np.max(ints, axis=0))
        np.testing.assert_array_equal(gathered, np.concatenate(rows))
        np.testing.assert_array_equal(bcast, small[0])


def test_bad_groups_and_local_collectives(workers):
    (task,) = workers(1)
    with nd.Graph().as_default():
        x = nd.constant([1.0, 2.0])
        alone = collective_ops.all_reduce(x, 1, 1, 1, final_op="Div")
        stranger = collective_ops.all_reduce(
            x, 2, 1, 2, group_members=["/job:worker/replica:0/task:5",
                                       "/job:worker/replica:0/task:6"])
        with nd.Session(task.target) as sess:
            np.testing.assert_array_equal(sess.run(alone), [1.0, 2.0])
            with pytest.raises(errors.InvalidArgumentError,
                               match="task:0 is not a member of group 1"):
                sess.run(stranger)
        with pytest.raises(ValueError, match="merge_op"):
            collective_ops.all_reduce(x, 1, 1, 3, merge_op="Avg")
        with pytest.raises(ValueError, match="rank >= 1"):
            collective_ops.all_gather(nd.constant(1.0), 1, 1, 4)


def _mlp_batch(task_id: int):
    rng = np.random.RandomState(100 + task_id)
    return rng.randn(8, 4).astype(np.float32), rng.randn(8, 1).astype(np.float32)


def _mlp_init(seed: int):
    rng = np.random.RandomState(seed)
    return [rng.randn(4, 5).astype(np.float32), np.zeros(5, np.float32),
            rng.randn(5, 1).astype(np.float32)]


def _mlp_loss(params, x, y):
    w1, b1, w2 = params
    h = nd.nn.relu(nd.matmul(x, w1) + b1)
    return nd.reduce_mean(nd.square(nd.matmul(h, w2) - y))


_STEPS, _LR = 4, 0.05


def _oracle(num_workers: int):
    """One process, the mean of the workers' losses (whose gradient is the
    averaged gradient), starting from worker 0's initial values."""
    with nd.Graph().as_default():
        params = [nd.Variable(v) for v in _mlp_init(0)]
        losses = [_mlp_loss(params, *_mlp_batch(i)) for i in range(num_workers)]
        train = nd.train.GradientDescentOptimizer(_LR).minimize(
            nd.add_n(losses) / num_workers)
        with nd.Session() as sess:
            sess.run(nd.global_variables_initializer())
            for _ in range(_STEPS):
                sess.run(train)
            return sess.run(params)


def test_mirrored_strategy_in_process_matches_one_process(workers):
    tasks = workers(2)
    spec = tasks[0].cluster_spec

    def task(i):
        strategy = nd.distribute.MultiWorkerMirroredStrategy()
        strategy.configure(cluster_spec=spec, task_type="worker", task_id=i)
        assert strategy.num_replicas_in_sync == 2
        with nd.Graph().as_default():
            with strategy.scope():  # each worker its own (different) init
                params = [nd.Variable(v) for v in _mlp_init(i)]
            train = strategy.run(lambda: nd.train.GradientDescentOptimizer(
                _LR).minimize(_mlp_loss(params, *_mlp_batch(i))))
            local = nd.constant([[1.0 + i, 2.0], [3.0, 4.0 * i]])
            total = strategy.reduce(nd.distribute.ReduceOp.SUM, local)
            mean_rows = strategy.reduce("MEAN", local, axis=0)
            with nd.Session(tasks[i].target) as sess:
                sess.run(nd.global_variables_initializer())
                for _ in range(_STEPS):
                    sess.run(train)
                return sess.run(params), sess.run([total, mean_rows])

    out = in_threads(2, task)
    for got, _ in out:
        for a, b in zip(got, _oracle(2)):
            np.testing.assert_allclose(a, b, atol=1e-6)
    both = np.array([[[1.0, 2.0], [3.0, 0.0]], [[2.0, 2.0], [3.0, 4.0]]])
    for _, (total, mean_rows) in out:
        np.testing.assert_allclose(total, both.sum(0))
        np.testing.assert_allclose(mean_rows, both.reshape(4, 2).mean(0))


_MWMS_WORKER = r"""
import json, sys
import numpy as np
import nbdist as nd
sys.path.insert(0, "tests")
import helpers
helpers.put_test_dirs_on_path()
from test_collective import _LR, _STEPS, _mlp_batch, _mlp_init, _mlp_loss

def worker_fn(strategy):
    ctx = nd.distribute.get_current_worker_context()
    i = ctx.task_id
    with nd.Graph().as_default():
        with strategy.scope():
            params = [nd.Variable(v) for v in _mlp_init(i)]
            opt = nd.train.GradientDescentOptimizer(_LR)
            train = opt.minimize(_mlp_loss(params, *_mlp_batch(i)))
        with nd.Session(ctx.master_target) as sess:
            sess.run(nd.global_variables_initializer())
            for _ in range(_STEPS):
                sess.run(train)
            print("PARAMS " + json.dumps([p.tolist() for p in sess.run(params)]),
                  flush=True)

nd.distribute.run_distribute_coordinator(
    worker_fn, nd.distribute.experimental.MultiWorkerMirroredStrategy(),
    mode=nd.distribute.CoordinatorMode.INDEPENDENT_WORKER)
"""


def _spawn(script: str, spec: dict, job: str, index: int, **env):
    tf_config = {"cluster": spec, "task": {"type": job, "index": index}}
    environ = dict(os.environ, TF_CONFIG=json.dumps(tf_config), PYTHONUNBUFFERED="1",
                   **env)
    return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=environ,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _kill_all(procs):
    for p in procs:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(10)
        for pipe in (p.stdin, p.stdout):
            if pipe is not None:
                pipe.close()


@pytest.mark.slow
def test_mirrored_strategy_on_three_worker_processes():
    spec = local_cluster(worker=3)
    procs = [_spawn(_MWMS_WORKER, spec, "worker", i) for i in range(3)]
    try:
        expected = _oracle(3)
        for p in procs:
            out, _ = p.communicate(timeout=120)
            assert p.returncode == 0, out
            line = next(x for x in out.splitlines() if x.startswith("PARAMS "))
            got = [np.array(v, np.float32) for v in json.loads(line[7:])]
            for a, b in zip(got, expected):
                np.testing.assert_allclose(a, b, atol=1e-6)
    finally:
        _kill_all(procs)


_KILL_WORKER = r"""
import json, os, sys, time
import numpy as np
import nbdist as nd
from nbdist.ops import collective_ops

cfg = json.loads(os.environ["TF_CONFIG"])
i = cfg["task"]["index"]
server = nd.Server(cfg["cluster"], "worker", i)
with nd.Graph().as_default():
    ops = [collective_ops.all_reduce(np.ones(4, np.float32), 3, 1, k) for k in (1, 2)]
    with nd.Session(server.target) as sess:
        print("FIRST", sess.run(ops[0]).tolist(), flush=True)
        sys.stdin.readline()  # the test killed worker 2
        start = time.monotonic()
        try:
            sess.run(ops[1])
            print("ERROR none", flush=True)
        except nd.errors.OpError as e:
            print("ERROR " + json.dumps([type(e).__name__, e.message,
                                         time.monotonic() - start]), flush=True)
        sys.stdin.readline()  # every survivor has its error: a task that left
        # earlier would be the next one's "went away"
server.stop()
"""


@pytest.mark.slow
def test_a_killed_worker_fails_the_others_collectives():
    spec = local_cluster(worker=3)
    timeout_ms = 1000
    procs = [_spawn(_KILL_WORKER, spec, "worker", i,
                    NBDIST_HEARTBEAT_TIMEOUT_MS=str(timeout_ms)) for i in range(3)]
    try:
        for p in procs:
            line = p.stdout.readline()
            assert line.startswith("FIRST [3.0, 3.0, 3.0, 3.0]"), line
        os.kill(procs[2].pid, signal.SIGKILL)
        procs[2].wait(10)
        for p in procs[:2]:
            p.stdin.write("go\n")
            p.stdin.flush()
        errors_seen = []
        for p in procs[:2]:
            for _ in range(100):  # bounded: the script prints few lines
                line = p.stdout.readline()
                if not line or line.startswith("ERROR "):
                    break
            assert line.startswith("ERROR "), line
            errors_seen.append(line)
        for p in procs[:2]:
            p.communicate("exit\n", timeout=60)
        for line in errors_seen:
            kind, message, elapsed = json.loads(line[6:])
            assert kind == "UnavailableError", line
            assert "/job:worker/replica:0/task:2" in message, message
            # The coordination service notices within its heartbeat timeout (a
            # direct neighbour may see the refused connection first).
            assert elapsed < timeout_ms / 1000 + 5.0, elapsed
    finally:
        _kill_all(procs)
