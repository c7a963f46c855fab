"""The point of IndexedSlices: a 100,000 x 64 embedding partitioned over two
parameter servers and trained by two between-graph workers moves the rows of
each batch between worker and ps, not the table, and ends with the weights of
a single-process run.

Bytes are counted from ``RunMetadata.step_stats`` under ``FULL_TRACE``: the
outputs of the ``_Recv`` nodes of the step's partitions, i.e. every tensor
that crossed from one task to another (nbdist has no byte counter in its
transports yet).
"""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

ROWS, DIM = 100_000, 64
TABLE_BYTES = ROWS * DIM * 4


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default():
        yield


def build(device_fn=None):
    """The model: mean squared distance of the batch's embeddings to targets."""
    ids = nd.placeholder(nd.int64, [None], name="ids")
    targets = nd.placeholder(nd.float32, [None, DIM], name="targets")
    with nd.device(device_fn):
        with nd.variable_scope("emb", partitioner=nd.fixed_size_partitioner(2)):
            table = nd.get_variable(
                "table", [ROWS, DIM],
                initializer=nd.random_uniform_initializer(-1.0, 1.0, seed=7))
        emb = nd.nn.embedding_lookup(table, ids, partition_strategy="div")
        loss = 0.5 * nd.reduce_mean(nd.reduce_sum(nd.square(emb - targets), 1))
        train = nd.train.GradientDescentOptimizer(0.5).minimize(loss)
    return ids, targets, table, train


def batches(n, size, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ids = rng.integers(0, ROWS, size=size)
        ids[-1] = ids[0]  # a repeated id in every batch
        out.append((ids, rng.standard_normal((size, DIM)).astype(np.float32)))
    return out


def cross_task_bytes(meta) -> dict:
    """Bytes received per task in one step (``_Recv`` outputs)."""
    out: dict = {}
    for dev in meta.step_stats.dev_stats:
        task = dev.device.split("/device:")[0]
        for ns in dev.node_stats:
            if ns.op_type == "_Recv":
                out[task] = out.get(task, 0) + sum(
                    o.tensor_description.allocated_bytes for o in ns.output)
    return out


def test_two_workers_two_ps_move_the_batch_rows_and_match_one_process():
    from nbdist.cluster.local_cluster import LocalCluster
    from nbdist.train.device_setter import replica_device_setter

    steps = batches(6, 32, seed=1) + batches(2, 128, seed=2)
    cluster = LocalCluster(ps=2, workers=2, progress=False, start_timeout=60)
    try:
        spec = cluster.cluster_spec
        workers = []
        for i in range(2):
            g = nd.Graph()
            with g.as_default():
                built = build(replica_device_setter(
                    cluster=spec, worker_device=f"/job:worker/task:{i}"))
                if i == 0:
                    init = nd.global_variables_initializer()
            workers.append((g, built, nd.Session(cluster.target("worker", i),
                                                 graph=g)))
        g0, (_, _, table0, _), s0 = workers[0]
        with g0.as_default():
            s0.run(init)
            initial = s0.run(nd.concat(list(table0), 0))
            assert {v.device for v in table0} == {"/job:ps/task:0",
                                                 "/job:ps/task:1"}
        opts = nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE)
        per_step = []
        for k, (ids, targets) in enumerate(steps):  # the workers take turns
            g, (ids_t, targets_t, _, train), sess = workers[k % 2]
            meta = nd.RunMetadata()
            sess.run(train, {ids_t: ids, targets_t: targets}, options=opts,
                     run_metadata=meta)
            per_step.append((len(ids), cross_task_bytes(meta)))
        with g0.as_default():
            final = s0.run(nd.concat(list(table0), 0))
        for _, _, sess in workers:
            sess.close()
    finally:
        cluster.shutdown()

    for size, by_task in per_step:
        total = sum(by_task.values())
        # Forward: ids to the ps, rows back; backward: the rows' gradient and
        # their indices to the ps. About 2 * size * DIM * 4 bytes.
        row_bytes = size * DIM * 4
        assert 2 * row_bytes <= total <= 3 * row_bytes + 4096, (size, by_task)
        assert total < TABLE_BYTES / 100
    small = np.mean([sum(b.values()) for n, b in per_step if n == 32])
    large = np.mean([sum(b.values()) for n, b in per_step if n == 128])
    assert 3.5 < large / small < 4.5  # proportional to the batch

    # The same steps in one process, from the same initial table.
    with nd.Graph().as_default():
        ids_t, targets_t, table, train = build()
        with nd.Session() as s:
            s.run(nd.global_variables_initializer())
            half = ROWS // 2
            s.run([table[0].assign(initial[:half]), table[1].assign(initial[half:])])
            for ids, targets in steps:
                s.run(train, {ids_t: ids, targets_t: targets})
            expected = s.run(nd.concat(list(table), 0))
    np.testing.assert_allclose(final, expected, rtol=0, atol=1e-6)
    assert not np.array_equal(final, initial)
