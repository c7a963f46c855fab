"""A parameter server down for 6, 20 or 60 s under ``MonitoredTrainingSession``
(issue 10, item 1).

A 784-256-10 MLP trains on 1 ps + 1 worker process (a ``LocalCluster``: real
processes on 127.0.0.1, killed by PID). Mid-training the ps is SIGKILLed and
restarted at the same address after the outage: the training loop never sees
an error, restores the latest checkpoint, reaches its last step, and its final
weights equal an uninterrupted single-process run (the batch is fixed, so a
step from a restored checkpoint repeats the lost one exactly).

Each run prints ``recovery ... s``: from the ps answering again to the first
successful step.

What the training loop sees depends on how the runtime meets the dead ps: a
``_Recv`` waiting on it used to end as ``DeadlineExceededError("Timed out after
604800.0 s ...")``, which no session recovers from; it is ``UnavailableError``
naming the ps, the tensor and the real wait.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest
import test_training_cluster as training_cluster

import nbdist as nd
from nbdist import errors

# LocalClusters shut down at teardown; a fresh default graph per test.
cluster_factory = training_cluster.cluster_factory
fresh_graph = training_cluster.fresh_graph

LR = 0.05
LAST_STEP, KILL_AT, SAVE_EVERY = 16, 8, 3
_RNG = np.random.default_rng(10)
X = _RNG.normal(size=(32, 784)).astype(np.float32)
Y = _RNG.integers(0, 10, 32).astype(np.int32)
W1 = (0.05 * _RNG.normal(size=(784, 256))).astype(np.float32)
W2 = (0.05 * _RNG.normal(size=(256, 10))).astype(np.float32)


def mlp():
    gs = nd.train.get_or_create_global_step()
    w1 = nd.Variable(W1, name="w1")
    b1 = nd.Variable(np.zeros(256, np.float32), name="b1")
    w2 = nd.Variable(W2, name="w2")
    b2 = nd.Variable(np.zeros(10, np.float32), name="b2")
    x = nd.placeholder(nd.float32, [None, 784], name="x")
    y = nd.placeholder(nd.int32, [None], name="y")
    hidden = nd.nn.relu(nd.matmul(x, w1) + b1)
    loss = nd.reduce_mean(nd.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y, logits=nd.matmul(hidden, w2) + b2))
    train = nd.train.GradientDescentOptimizer(LR).minimize(loss, global_step=gs)
    return gs, [w1, b1, w2, b2], x, y, train


def reference_run(steps):
    """``steps`` uninterrupted steps in one process."""
    with nd.Graph().as_default():
        _, params, x, y, train = mlp()
        with nd.Session() as s:
            s.run(nd.global_variables_initializer())
            for _ in range(steps):
                s.run(train, {x: X, y: Y})
            return s.run(params)


def train_through_outage(cluster_factory, checkpoint_dir, outage_s):
    """Trains to ``LAST_STEP``; after step ``KILL_AT`` the ps is SIGKILLed and
    restarted ``outage_s`` later. Returns (global steps seen, recovery seconds,
    final parameters)."""
    from nbdist.train.device_setter import replica_device_setter

    cluster = cluster_factory(ps=1, workers=1)
    with nd.device(replica_device_setter(cluster=cluster.cluster_spec,
                                         worker_device="/job:worker/task:0")):
        gs, params, x, y, train = mlp()
    final = nd.train.FinalOpsHook(params)
    back_at: list[float] = []
    never = threading.Event()

    def restart_after_outage():
        # The outage itself is the one deliberate wait of this test.
        never.wait(outage_s)
        cluster.restart("ps", 0)  # returns once the new ps answers
        back_at.append(time.monotonic())

    restarter = threading.Thread(target=restart_after_outage, daemon=True)
    seen, done_at = [], []
    # Any exception out of this loop fails the test: the loop must never see one.
    with nd.train.MonitoredTrainingSession(
            master=cluster.target("worker", 0), is_chief=True,
            checkpoint_dir=str(checkpoint_dir), save_checkpoint_steps=SAVE_EVERY,
            hooks=[nd.train.StopAtStepHook(last_step=LAST_STEP), final],
            log_step_count_steps=None, save_summaries_steps=None) as sess:
        while not sess.should_stop():
            _, step = sess.run([train, gs], {x: X, y: Y})
            seen.append(int(step))
            done_at.append(time.monotonic())
            if len(seen) == KILL_AT:
                cluster.kill("ps", 0)
                restarter.start()
            assert len(seen) < 200
    restarter.join(outage_s + 90)
    assert back_at, "the ps did not come back"
    recovery = min(t for t in done_at if t > back_at[0]) - back_at[0]
    return seen, recovery, final.final_ops_values


@pytest.mark.slow
@pytest.mark.parametrize("outage_s", [6, 20, 60])
def test_ps_outage_is_recovered_from_checkpoint(cluster_factory, tmp_path, caplog,
                                                outage_s):
    caplog.set_level(logging.INFO, logger="nbdist")
    seen, recovery, final = train_through_outage(cluster_factory, tmp_path, outage_s)
    print(f"outage {outage_s} s: recovery {recovery:.2f} s")
    after = seen[KILL_AT:]
    last_saved = (KILL_AT // SAVE_EVERY) * SAVE_EVERY
    assert after and after[0] <= last_saved + 1, seen  # resumed from a checkpoint
    assert max(seen) >= LAST_STEP - 1
    restored = [r.getMessage() for r in caplog.records
                if "Restoring parameters from" in r.getMessage()]
    assert restored and restored[-1].endswith(f"model.ckpt-{last_saved}"), restored
    for got, want in zip(final, reference_run(LAST_STEP)):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)



def test_recv_from_a_task_that_is_down_is_unavailable_naming_it():
    from helpers import free_port

    from nbdist.executor.rendezvous import make_key
    from nbdist.executor.step import StepContext
    from nbdist.runtime.grpc.client import GrpcWorkerClient
    from nbdist.runtime.grpc.rpc import RECONNECT_S

    ps = "/job:ps/replica:0/task:0"
    key = make_key(ps + "/device:CPU:0", 1, "/job:worker/replica:0/task:0/device:CPU:0",
                   "edge_2_AssignAdd")
    client = GrpcWorkerClient(ps, f"127.0.0.1:{free_port()}")  # nothing listens
    try:
        with pytest.raises(errors.UnavailableError) as info:
            client.recv_tensor(StepContext(7), key)
    finally:
        client.close()
    message = str(info.value)
    assert ps in message and "edge_2_AssignAdd" in message, message
    assert f"could not connect within {RECONNECT_S:.1f} s" in message, message
