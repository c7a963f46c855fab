"""Partitioned variables: TF1's partitioners, ``get_variable(partitioner=...)``,
``embedding_lookup`` over shards, whole-variable checkpoints that restore into
another partitioning, and ``ParameterServerStrategy(variable_partitioner=...)``.

Oracles: partition counts worked out by hand from TF1's formulas (written out
next to each case), NumPy, and the same training on an unpartitioned variable
in one process.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import local_cluster

import nbdist as nd
from nbdist.distribute.coordinator.cluster_coordinator import ClusterCoordinator
from nbdist.distribute.strategies.parameter_server_strategy import (
    ParameterServerStrategy,
)
from nbdist.ops.partitioned_variables import PartitionedVariable, ShardedVariable

F32 = nd.float32


# -- partitioners -----------------------------------------------------------------------
@pytest.mark.parametrize("partitioner, shape, dtype, expected", [
    # fixed: min(num_shards, shape[axis]) on the axis.
    (nd.fixed_size_partitioner(4), [10, 3], F32, [4, 1]),
    (nd.fixed_size_partitioner(4, axis=1), [10, 3], F32, [1, 3]),
    (nd.fixed_size_partitioner(5), [2, 7], F32, [2, 1]),
    # min_max: max(1, min(shape[axis], max_partitions, ceil(bytes / min_slice))).
    # [100, 10] float32 = 4000 bytes; 4000 / 1024 = 3.9 -> 4.
    (nd.min_max_variable_partitioner(4, min_slice_size=1024), [100, 10], F32, [4, 1]),
    (nd.min_max_variable_partitioner(2, min_slice_size=1024), [100, 10], F32, [2, 1]),
    (nd.min_max_variable_partitioner(8), [100, 10], F32, [1, 1]),  # 256 KiB slices
    # strings count bytes_per_string_element: 20 * 16 / 64 = 5.
    (nd.min_max_variable_partitioner(100, min_slice_size=64), [10, 2], nd.string,
     [5, 1]),
    # axis 1 of [3, 40] float64: 960 bytes / 100 = 9.6 -> 10 (<= 40).
    (nd.min_max_variable_partitioner(64, axis=1, min_slice_size=100), [3, 40],
     nd.float64, [1, 10]),
    # axis_size: a slice of [100, 10] float32 is 40 bytes; per shard
    # floor(max / 40) slices (at least 1); ceil(100 / that) shards.
    (nd.variable_axis_size_partitioner(4000), [100, 10], F32, [1, 1]),
    (nd.variable_axis_size_partitioner(1000), [100, 10], F32, [4, 1]),
    (nd.variable_axis_size_partitioner(999), [100, 10], F32, [5, 1]),  # 24/shard
    (nd.variable_axis_size_partitioner(999, max_shards=3), [100, 10], F32, [3, 1]),
    (nd.variable_axis_size_partitioner(10), [100, 10], F32, [100, 1]),
    # axis 1: a slice is 100 * 4 = 400 bytes; 2 per shard -> 5 shards.
    (nd.variable_axis_size_partitioner(800, axis=1), [100, 10], F32, [1, 5]),
    # string elements of 16 bytes: slice 160 bytes, 3 per shard, ceil(7/3) = 3.
    (nd.variable_axis_size_partitioner(500), [7, 10], nd.string, [3, 1]),
])
def test_partitioner_formulas(partitioner, shape, dtype, expected):
    assert partitioner(shape=nd.TensorShape(shape), dtype=dtype) == expected


def test_partitioner_errors():
    with pytest.raises(ValueError, match="positive"):
        nd.variable_axis_size_partitioner(0)
    with pytest.raises(ValueError, match="max_shards must be positive"):
        nd.variable_axis_size_partitioner(10, max_shards=-1)
    with pytest.raises(ValueError, match="not fully defined"):
        nd.variable_axis_size_partitioner(10)(shape=nd.TensorShape([None, 2]),
                                              dtype=F32)
    with pytest.raises(ValueError, match="along axis 2"):
        nd.min_max_variable_partitioner(2, axis=2)(shape=nd.TensorShape([4, 4]),
                                                   dtype=F32)


@pytest.mark.parametrize("shape, shards, expected", [
    ([10, 4], 3, [4, 3, 3]),  # the first n % k shards get one more row
    ([11, 2], 4, [3, 3, 3, 2]),
    ([6], 3, [2, 2, 2]),
    ([2, 5], 4, [1, 1]),      # never more shards than rows
])
def test_shard_shapes_and_slice_info(graph, shape, shards, expected):
    v = nd.get_variable("v", shape, partitioner=nd.fixed_size_partitioner(shards))
    assert isinstance(v, PartitionedVariable)
    assert len(v) == len(expected)
    assert [s.shape.as_list()[0] for s in v] == expected
    assert [s.op.name for s in v] == [f"v/part_{i}" for i in range(len(expected))]
    assert v.get_partitions() == [len(expected)] + [1] * (len(shape) - 1)
    offsets = [int(o) for o in np.cumsum([0] + expected[:-1])]
    infos = [s._save_slice_info for s in v]
    assert [i.var_offset[0] for i in infos] == offsets
    assert {i.full_name for i in infos} == {"v"}
    assert all(i.full_shape == shape for i in infos)
    assert v.shape.as_list() == shape
    # Every shard is a global, trainable variable of its own.
    assert nd.global_variables() == list(v)


def test_partitioned_value_initializers_and_reuse(graph):
    table = np.arange(21.0, dtype=np.float32).reshape(7, 3)
    with nd.variable_scope("emb", partitioner=nd.fixed_size_partitioner(3)):
        v = nd.get_variable("t", initializer=table)
        seen = []

        def init(shape, dtype=None, partition_info=None):
            seen.append((list(shape), partition_info.var_offset,
                         partition_info.full_shape))
            return nd.zeros(shape, dtype)

        w = nd.get_variable("w", [5, 2], initializer=init)
    assert seen == [([2, 2], [0, 0], [5, 2]), ([2, 2], [2, 0], [5, 2]),
                    ([1, 2], [4, 0], [5, 2])]
    with nd.variable_scope("emb", reuse=True,
                           partitioner=nd.fixed_size_partitioner(3)):
        assert nd.get_variable("t", [7, 3]) is v  # TF1 also needs the shape here
    with nd.variable_scope("emb", partitioner=nd.fixed_size_partitioner(3)), \
            pytest.raises(ValueError, match="already exists"):
        nd.get_variable("t", [7, 3])
    with pytest.raises(ValueError, match="partitioned version"):
        nd.get_variable("emb/t")
    with pytest.raises(ValueError, match="one dimension"):
        nd.get_variable("bad", [4, 4], partitioner=lambda shape, dtype: [2, 2])
    with pytest.raises(ValueError, match="rank"):
        nd.get_variable("bad2", [4, 4], partitioner=lambda shape, dtype: [2])
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        np.testing.assert_array_equal(s.run(nd.convert_to_tensor(v)), table)
        np.testing.assert_array_equal(s.run(v.as_tensor()), table)
        np.testing.assert_array_equal(s.run(w.as_tensor()), np.zeros((5, 2)))
        s.run(v.assign(table * 2))
        np.testing.assert_array_equal(s.run(v.as_tensor()), table * 2)
        assert [a.shape for a in s.run(list(v))] == [(3, 3), (2, 3), (2, 3)]


def test_scalar_is_never_partitioned(graph):
    v = nd.get_variable("s", [], partitioner=nd.fixed_size_partitioner(2))
    assert isinstance(v, nd.Variable)


# -- embedding_lookup -----------------------------------------------------------------
def _shards(table, n, strategy):
    if strategy == "mod":
        return [table[i::n] for i in range(n)]
    base, extra = divmod(table.shape[0], n)
    sizes = [base + (i < extra) for i in range(n)]
    return np.split(table, np.cumsum(sizes)[:-1])


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_embedding_lookup_vs_numpy(graph, strategy, n):
    rng = np.random.default_rng(n)
    table = rng.standard_normal((11, 4)).astype(np.float32)
    ids = np.array([[3, 10, 0], [5, 5, 7]], np.int64)
    params = [nd.constant(s) for s in _shards(table, n, strategy)]
    out = nd.nn.embedding_lookup(params, ids, partition_strategy=strategy)
    clipped = nd.nn.embedding_lookup(params, ids, partition_strategy=strategy,
                                     max_norm=0.7)
    assert out.shape.as_list() == [2, 3, 4]
    ph = nd.placeholder(nd.int32, [None])
    dyn = nd.nn.embedding_lookup(params, ph, partition_strategy=strategy)
    with nd.Session() as s:
        got, got_clipped, got_dyn = s.run([out, clipped, dyn], {ph: [9, 1]})
    np.testing.assert_array_equal(got, table[ids])
    norms = np.linalg.norm(table[ids], axis=-1, keepdims=True)
    np.testing.assert_allclose(got_clipped, table[ids] * np.minimum(1, 0.7 / norms),
                               rtol=1e-6)
    np.testing.assert_array_equal(got_dyn, table[[9, 1]])


def test_embedding_lookup_gradient_per_shard(graph):
    table = np.arange(40.0, dtype=np.float32).reshape(10, 4)
    v = nd.get_variable("emb", initializer=table,
                        partitioner=nd.fixed_size_partitioner(3))
    ids = np.array([1, 9, 1, 4])
    weights = np.arange(16.0, dtype=np.float32).reshape(4, 4)
    loss = nd.reduce_sum(nd.nn.embedding_lookup(v, ids, partition_strategy="div")
                         * weights)
    grads = nd.gradients(loss, list(v))
    full = np.zeros_like(table)
    np.add.at(full, ids, weights)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        # Each shard's gradient is the IndexedSlices of its rows (as TF).
        got = s.run([nd.convert_to_tensor(g) for g in grads])
    np.testing.assert_array_equal(np.concatenate(got), full)
    assert [g.shape for g in got] == [(4, 4), (3, 4), (3, 4)]


def test_embedding_lookup_errors(graph):
    with pytest.raises(ValueError, match="partition strategy"):
        nd.nn.embedding_lookup([nd.constant([[1.0]])] * 2, [0], "modulo")
    with pytest.raises(ValueError, match="at least one"):
        nd.nn.embedding_lookup([], [0])


# -- training on 2 ps, checkpoints ------------------------------------------------------
VOCAB, DIM, STEPS = 10_000, 64, 3


def _build_model(table, partitioner, device_fn=None):
    """A partitioned (or not) embedding trained by SGD on a fixed batch."""
    with nd.device(device_fn):
        emb = nd.get_variable("emb", initializer=table, partitioner=partitioner)
        ids = nd.placeholder(nd.int64, [None], name="ids")
        target = nd.placeholder(nd.float32, [None, DIM], name="target")
        rows = nd.nn.embedding_lookup(emb, ids, partition_strategy="div")
        loss = nd.reduce_mean(nd.square(rows - target))
        train = nd.train.GradientDescentOptimizer(0.5).minimize(loss)
    return emb, ids, target, train


def _batches():
    rng = np.random.default_rng(7)
    return [(rng.integers(0, VOCAB, 32), rng.standard_normal((32, DIM))
             .astype(np.float32)) for _ in range(STEPS)]


@pytest.mark.slow
def test_partitioned_training_on_two_ps_equals_one_process(servers, tmp_path):
    table = (np.random.default_rng(0).standard_normal((VOCAB, DIM)) * 0.1).astype(
        np.float32)
    batches = _batches()
    # Oracle: the unpartitioned variable in one process.
    with nd.Graph().as_default():
        emb, ids, target, train = _build_model(table, None)
        with nd.Session() as s:
            s.run(nd.global_variables_initializer())
            for b_ids, b_target in batches:
                s.run(train, {ids: b_ids, target: b_target})
            expected = s.run(emb)

    cluster = local_cluster(ps=2, worker=1)
    for job, n in (("ps", 2), ("worker", 1)):
        for i in range(n):
            servers(cluster, job, i)
    g = nd.Graph()
    with g.as_default():
        setter = nd.train.replica_device_setter(cluster=cluster,
                                                worker_device="/job:worker/task:0")
        emb, ids, target, train = _build_model(
            table, nd.fixed_size_partitioner(4), setter)
        shards = list(emb)
        assert [v.device for v in shards] == ["/job:ps/task:0", "/job:ps/task:1"] * 2
        saver = nd.train.Saver()
    target_addr = f"grpc://{cluster['worker'][0]}"
    with nd.Session(target_addr, graph=g) as s:
        s.run(nd.variables_initializer(shards))
        meta = nd.RunMetadata()
        for step, (b_ids, b_target) in enumerate(batches):
            options = (nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE)
                       if step == 0 else None)
            s.run(train, {ids: b_ids, target: b_target}, options=options,
                  run_metadata=meta if step == 0 else None)
        got = s.run(emb.as_tensor())
        path = saver.save(s, str(tmp_path / "model"))
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)

    # Only the rows asked for leave each ps: the forward gathers output
    # (rows of that shard in the batch) x 64 floats.
    b_ids = batches[0][0]
    bounds = np.cumsum([0] + [s.shape.as_list()[0] for s in shards])
    on_ps = sorted(
        (dev.device.split("/device")[0], ns.output[0].tensor_description.allocated_bytes)
        for dev in meta.step_stats.dev_stats if "/job:ps" in dev.device
        for ns in dev.node_stats if ns.op_type == "GatherV2")
    expected_rows = [int(np.sum((b_ids >= bounds[p]) & (b_ids < bounds[p + 1])))
                     for p in range(4)]
    assert on_ps == sorted((f"/job:ps/replica:0/task:{p % 2}", n * DIM * 4)
                           for p, n in enumerate(expected_rows))

    # The checkpoint holds the whole table; it restores into 3 partitions.
    saved = np.load(path + ".npz")
    np.testing.assert_array_equal(saved["emb"], got)
    assert not [k for k in saved.files if "part_" in k]
    with nd.Graph().as_default():
        emb3 = nd.get_variable("emb", [VOCAB, DIM],
                               partitioner=nd.fixed_size_partitioner(3),
                               initializer=nd.zeros_initializer())
        saver3 = nd.train.Saver()
        with nd.Session() as s:
            saver3.restore(s, path)
            parts = s.run(list(emb3))
    assert [p.shape[0] for p in parts] == [3334, 3333, 3333]
    np.testing.assert_array_equal(np.concatenate(parts), got)


def test_saver_partitioned_var_list_forms(graph, tmp_path):
    table = np.arange(12.0, dtype=np.float32).reshape(6, 2)
    v = nd.get_variable("v", initializer=table, partitioner=nd.fixed_size_partitioner(2))
    by_object = nd.train.Saver([v])
    by_dict = nd.train.Saver({"renamed": v})
    by_list = nd.train.Saver({"listed": list(v)})
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        p1 = by_object.save(s, str(tmp_path / "a"))
        p2 = by_dict.save(s, str(tmp_path / "b"))
        p3 = by_list.save(s, str(tmp_path / "c"))
        s.run(v.assign(np.zeros_like(table)))
        by_dict.restore(s, p2)
        np.testing.assert_array_equal(s.run(v.as_tensor()), table)
    np.testing.assert_array_equal(np.load(p1 + ".npz")["v"], table)
    np.testing.assert_array_equal(np.load(p3 + ".npz")["listed"], table)
    with pytest.raises(ValueError, match="do not make up"):
        nd.train.Saver([v[0]])


def test_saver_restores_partitioned_from_meta_graph(graph, tmp_path):
    table = np.arange(12.0, dtype=np.float32).reshape(6, 2)
    v = nd.get_variable("v", initializer=table, partitioner=nd.fixed_size_partitioner(3))
    assert len(v) == 3
    saver = nd.train.Saver()
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        path = saver.save(s, str(tmp_path / "m"))
    with nd.Graph().as_default() as g2:
        restored = nd.train.import_meta_graph(path + ".meta")
        with nd.Session(graph=g2) as s:
            restored.restore(s, path)
            got = s.run([g2.get_tensor_by_name(f"v/part_{i}/read:0")
                         for i in range(3)])
    np.testing.assert_array_equal(np.concatenate(got), table)


# -- ParameterServerStrategy(variable_partitioner=...) ---------------------------------
@pytest.mark.slow
def test_parameter_server_strategy_shards_variables(servers):
    cluster = local_cluster(ps=2, worker=1)
    for job, n in (("ps", 2), ("worker", 1)):
        for i in range(n):
            servers(cluster, job, i)
    strategy = ParameterServerStrategy(
        nd.train.ClusterSpec(cluster),
        variable_partitioner=nd.fixed_size_partitioner(2))
    table = np.arange(20.0, dtype=np.float32).reshape(5, 4)
    with nd.Graph().as_default():
        with strategy.scope():
            emb = nd.Variable(table, name="emb")
            scale = nd.Variable(2.0, name="scale")
        assert isinstance(emb, ShardedVariable)
        assert isinstance(scale, nd.Variable)
        assert [v.shape.as_list() for v in emb.variables] == [[3, 4], [2, 4]]
        assert [v.device for v in emb.variables] == ["/job:ps/task:0",
                                                     "/job:ps/task:1"]
        coordinator = ClusterCoordinator(strategy)

        @nd.function
        def lookup(ids):
            rows = nd.nn.embedding_lookup(emb, ids, partition_strategy="div")
            return rows * scale

        @nd.function
        def total():
            return nd.reduce_sum(emb)

        try:
            r1 = coordinator.schedule(lookup, args=(np.array([4, 0, 3]),))
            r2 = coordinator.schedule(total)
            coordinator.join()
            np.testing.assert_array_equal(r1.fetch(), table[[4, 0, 3]] * 2)
            assert float(r2.fetch()) == float(table.sum())
        finally:
            coordinator.close()


def test_parameter_server_strategy_partitioner_errors():
    spec = {"ps": ["localhost:1"], "worker": ["localhost:2"]}
    with pytest.raises(TypeError, match="callable"):
        ParameterServerStrategy(nd.train.ClusterSpec(spec), variable_partitioner=3)
    strategy = ParameterServerStrategy(
        nd.train.ClusterSpec(spec), variable_partitioner=lambda shape, dtype: [1, 2])
    with nd.Graph().as_default(), strategy.scope(), \
            pytest.raises(ValueError, match="besides the first"):
        nd.Variable(np.zeros((4, 4), np.float32))
