"""SparseConditionalAccumulator and SyncReplicasOptimizer over IndexedSlices:
two replicas of an embedding model aggregate their rows sparsely (each row
averaged over the gradients that hold it, as TF) and apply them with a
scatter on the variable."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import nbdist as nd
from nbdist import errors
from nbdist.ops.accumulator_ops import SparseConditionalAccumulator, take_grads
from nbdist.train.hooks import StopAtStepHook
from nbdist.train.monitored_session import MonitoredTrainingSession
from nbdist.train.sync_replicas_optimizer import SyncReplicasOptimizer

ROWS, DIM = 6, 2
T0 = np.arange(ROWS * DIM, dtype=np.float32).reshape(ROWS, DIM) / 10
IDS = [np.array([1, 4, 1]), np.array([4, 5])]
WEIGHTS = [np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32),
           np.array([[-1.0, 0.5], [2.0, 2.0]], np.float32)]
LR = 0.1
STEPS = 3


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


@pytest.fixture
def server():
    s = nd.Server.create_local_server()
    yield s
    s.stop()


def test_sparse_accumulator_averages_each_row_over_its_gradients():
    acc = SparseConditionalAccumulator(nd.float32, shape=[5, 2], shared_name="acc")
    ind = nd.placeholder(nd.int64, [None])
    val = nd.placeholder(nd.float32, [None, 2])
    step = nd.placeholder(nd.int64, [])
    push = acc.apply_grad(ind, val, grad_shape=[5, 2], local_step=step)
    taken = acc.take_indexed_slices_grad(2)
    any_rows = nd.placeholder(nd.float32)
    push_any = acc.apply_grad(ind, any_rows, local_step=step)
    assert isinstance(taken, nd.IndexedSlices)
    summed = SparseConditionalAccumulator(nd.float32, shape=[5, 2],
                                          reduction_type="SUM", shared_name="sum")
    push_sum = summed.apply_indexed_slices_grad(
        nd.IndexedSlices(val, ind, nd.constant([5, 2], nd.int64)))
    with nd.Session() as s:
        # A repeated index within one gradient is summed, and counts once.
        s.run(push, {ind: [3, 0, 3], val: [[1, 1], [2, 2], [3, 3]], step: 0})
        s.run(push, {ind: [0], val: [[4, 6]], step: 0})
        assert s.run(acc.num_accumulated()) == 2
        v = s.run(taken)
        np.testing.assert_array_equal(v.indices, [0, 3])
        np.testing.assert_allclose(v.values, [[3, 4], [4, 4]])
        np.testing.assert_array_equal(v.dense_shape, [5, 2])
        # The take moved the global step on: a gradient of step 0 is stale now.
        s.run(push, {ind: [1], val: [[9, 9]], step: 0})
        assert s.run(acc.num_accumulated()) == 0
        s.run(push_sum, {ind: [2], val: [[1, 2]]})
        s.run(push_sum, {ind: [2], val: [[3, 4]]})
        (got,) = s.run(take_grads([summed], 2))
        np.testing.assert_allclose(got.values, [[4, 6]])
        with pytest.raises(errors.InvalidArgumentError, match="Shape mismatch"):
            s.run(push_any, {ind: [1], any_rows: np.ones((1, 3), np.float32),
                             step: 5})


def build_replica(index):
    gs = nd.train.get_or_create_global_step()
    table = nd.Variable(T0, name="table")
    loss = nd.reduce_sum(nd.gather(table, IDS[index]) * WEIGHTS[index])
    opt = SyncReplicasOptimizer(nd.train.GradientDescentOptimizer(LR),
                                replicas_to_aggregate=2, total_num_replicas=2)
    with nd.name_scope(f"replica_{index}"):
        train_op = opt.minimize(loss, global_step=gs)
    hook = opt.make_session_run_hook(is_chief=index == 0, num_tokens=0)
    return train_op, hook


def expected_table():
    sums = np.zeros_like(T0)
    counts = np.zeros(ROWS)
    for ids, w in zip(IDS, WEIGHTS):
        np.add.at(sums, ids, w)
        counts[np.unique(ids)] += 1
    mean = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], 0)
    return T0 - STEPS * np.float32(LR) * mean.astype(np.float32)


def test_sync_replicas_aggregates_slices_sparsely(server):
    barrier = threading.Barrier(2, timeout=30)
    results: dict = {}

    def worker(index):
        try:
            with nd.Graph().as_default() as g:
                train_op, hook = build_replica(index)
                types = {op.type for op in g.get_operations()}
                assert "SparseConditionalAccumulator" in types
                assert "ScatterSub" in types and "ConditionalAccumulator" not in types
                runs = 0
                with MonitoredTrainingSession(
                        master=server.target, is_chief=index == 0, max_wait_secs=30,
                        hooks=[hook, StopAtStepHook(last_step=STEPS)],
                        log_step_count_steps=None) as sess:
                    while not sess.should_stop():
                        barrier.wait()
                        sess.run(train_op)
                        runs += 1
                results[index] = runs
        except Exception as e:  # noqa: BLE001 - reported by the test
            results[index] = e
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert results == {0: STEPS, 1: STEPS}, results
    with nd.Graph().as_default():
        gs = nd.train.get_or_create_global_step()
        table = nd.Variable(T0, name="table")
        with nd.Session(server.target) as s:
            step, got = s.run([gs, table])
    assert int(step) == STEPS
    np.testing.assert_allclose(got, expected_table(), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(got[[0, 2, 3]], T0[[0, 2, 3]])
