"""IndexedSlices: the gradient of gather / embedding_lookup, its dense
conversion, aggregation and clipping, and optimizers applying it sparsely."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default():
        yield


def _slices_dense(values, indices, rows):
    out = np.zeros((rows,) + values.shape[1:], values.dtype)
    np.add.at(out, indices, values)
    return out


def test_gather_gradient_is_indexed_slices_fetched_as_value():
    init = np.arange(8, dtype=np.float32).reshape(4, 2)
    t = nd.Variable(init)
    y = nd.gather(t, [3, 1, 3])
    (g,) = nd.gradients(nd.reduce_sum(y * y), [t])
    assert isinstance(g, nd.IndexedSlices)
    assert g.dtype == nd.float32
    assert g.shape.as_list() == [4, 2]
    with nd.Session() as s:
        s.run(t.initializer)
        v = s.run(g)
        assert isinstance(v, nd.IndexedSlicesValue)
        np.testing.assert_array_equal(v.indices, [3, 1, 3])
        np.testing.assert_array_equal(v.values, 2 * init[[3, 1, 3]])
        np.testing.assert_array_equal(v.dense_shape, [4, 2])
        dense = s.run(nd.convert_to_tensor(g))
    expected = np.zeros_like(init)
    np.add.at(expected, [3, 1, 3], 2 * init[[3, 1, 3]])
    np.testing.assert_array_equal(dense, expected)


def test_dense_conversion_of_unknown_shape_warns_as_tf():
    x = nd.placeholder(nd.float32, [None, 2])
    (g,) = nd.gradients(nd.reduce_sum(nd.gather(x, [0, 0])), [x])
    assert isinstance(g, nd.IndexedSlices)
    with pytest.warns(UserWarning, match="to a dense Tensor of unknown shape"):
        dense = nd.convert_to_tensor(g)
    with nd.Session() as s:
        out = s.run(dense, {x: np.zeros((3, 2), np.float32)})
    np.testing.assert_array_equal(out, [[2, 2], [0, 0], [0, 0]])


def test_dense_conversion_of_a_huge_shape_warns_with_its_size():
    big = nd.IndexedSlices(nd.constant([[1.0]]), nd.constant([0]),
                           nd.constant([100000000, 1]))
    with pytest.warns(UserWarning, match="with 100000000 elements"):
        nd.convert_to_tensor(big)
    small = nd.IndexedSlices(nd.constant([[1.0]]), nd.constant([0]),
                             nd.constant([99999999, 1]))
    nd.convert_to_tensor(small)  # no warning (pytest turns warnings into errors)


def test_slices_reaching_one_variable_are_concatenated():
    init = np.arange(10, dtype=np.float32).reshape(5, 2)
    t = nd.Variable(init)
    loss = nd.reduce_sum(nd.gather(t, [0, 4])) + 3.0 * nd.reduce_sum(
        nd.gather(t, [4, 2]))
    (g,) = nd.gradients(loss, [t])
    assert isinstance(g, nd.IndexedSlices)
    with nd.Session() as s:
        s.run(t.initializer)
        v = s.run(g)
        dense = s.run(nd.add_n([g]))
    assert sorted(v.indices.tolist()) == [0, 2, 4, 4]
    expected = np.zeros_like(init)
    expected[0] = 1
    expected[4] = 4
    expected[2] = 3
    np.testing.assert_array_equal(_slices_dense(v.values, v.indices, 5), expected)
    np.testing.assert_array_equal(dense, expected)


def test_dense_and_sparse_gradients_of_one_variable_add_up():
    init = np.ones((3, 2), np.float32)
    t = nd.Variable(init)
    loss = nd.reduce_sum(nd.gather(t, [1])) + nd.reduce_sum(t * 2.0)
    (g,) = nd.gradients(loss, [t])
    with nd.Session() as s:
        s.run(t.initializer)
        dense = s.run(nd.convert_to_tensor(g))
    np.testing.assert_array_equal(dense, [[2, 2], [3, 3], [2, 2]])


def test_clip_by_global_norm_keeps_slices_sparse():
    values = np.array([[3.0, 0.0], [0.0, 4.0]], np.float32)
    sl = nd.IndexedSlices(nd.constant(values), nd.constant([2, 0]),
                          nd.constant([3, 2]))
    dense = nd.constant([[12.0]])
    (c_sl, c_dense), norm = nd.clip_by_global_norm([sl, dense], 6.5)
    assert isinstance(c_sl, nd.IndexedSlices)
    with nd.Session() as s:
        v, d, n = s.run([c_sl, c_dense, norm])
    np.testing.assert_allclose(n, 13.0)
    np.testing.assert_allclose(v.values, values * 0.5)
    np.testing.assert_array_equal(v.indices, [2, 0])
    np.testing.assert_allclose(d, [[6.0]])


def test_partitioned_embedding_gives_each_shard_its_rows():
    init = np.arange(14, dtype=np.float32).reshape(7, 2)
    with nd.variable_scope("emb", partitioner=nd.fixed_size_partitioner(2)):
        table = nd.get_variable("table", initializer=init)
    ids = np.array([6, 0, 6, 1])
    emb = nd.nn.embedding_lookup(table, ids, partition_strategy="div")
    weights = np.arange(8, dtype=np.float32).reshape(4, 2)
    grads = nd.gradients(nd.reduce_sum(emb * weights), list(table))
    assert all(isinstance(g, nd.IndexedSlices) for g in grads)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        got = s.run(grads)
    # "div" over 7 rows: shard 0 holds rows 0..3, shard 1 rows 4..6.
    full = _slices_dense(weights, ids, 7)
    np.testing.assert_array_equal(_slices_dense(got[0].values, got[0].indices, 4),
                                  full[:4])
    np.testing.assert_array_equal(_slices_dense(got[1].values, got[1].indices, 3),
                                  full[4:])
    assert sorted(got[0].indices.tolist()) == [0, 1]
    assert sorted(got[1].indices.tolist()) == [2, 2]


# -- optimizers -------------------------------------------------------------------
IDS = np.array([3, 0, 3, 5])
ROWS, COLS = 6, 2
W = np.array([[1.0, -2.0], [0.5, 1.5], [2.0, 0.25], [-1.0, 1.0]], np.float32)


def _dedup_grad():
    u, inv = np.unique(IDS, return_inverse=True)
    g = np.zeros((u.size, COLS), np.float32)
    np.add.at(g, inv, W)
    return u, g


def _oracle(kind, init, steps):
    var = init.astype(np.float32).copy()
    u, g = _dedup_grad()
    lr = np.float32(0.1)
    s1 = np.zeros_like(var)
    s2 = np.zeros_like(var)
    s3 = np.zeros_like(var)
    if kind == "adagrad":
        s1[:] = 0.1
    if kind.startswith("rmsprop"):
        s1[:] = 1.0
    b1, b2, eps = np.float32(0.9), np.float32(0.999), np.float32(1e-8)
    for step in range(1, steps + 1):
        if kind == "gd":
            var[u] -= lr * g
        elif kind == "momentum":
            s1[u] = s1[u] * np.float32(0.9) + g
            var[u] -= lr * s1[u]
        elif kind == "adagrad":
            s1[u] += g * g
            var[u] -= lr * g / np.sqrt(s1[u])
        elif kind == "adam":
            s1 *= b1
            s1[u] += g * (1 - b1)
            s2 *= b2
            s2[u] += g * g * (1 - b2)
            alpha = lr * np.sqrt(1 - b2 ** step) / (1 - b1 ** step)
            var -= alpha * s1 / (np.sqrt(s2) + eps)
        elif kind == "rmsprop":
            s1[u] = s1[u] + (g * g - s1[u]) * np.float32(0.1)
            s2[u] = s2[u] * np.float32(0.5) + lr * g / np.sqrt(
                s1[u] + np.float32(1e-10))
            var[u] -= s2[u]
        elif kind == "rmsprop_centered":
            s1[u] = s1[u] + (g * g - s1[u]) * np.float32(0.1)
            s3[u] = s3[u] + (g - s3[u]) * np.float32(0.1)
            s2[u] = s2[u] * np.float32(0.5) + lr * g / np.sqrt(
                s1[u] - s3[u] * s3[u] + np.float32(1e-10))
            var[u] -= s2[u]
    return var


OPTIMIZERS = {
    "gd": lambda: nd.train.GradientDescentOptimizer(0.1),
    "momentum": lambda: nd.train.MomentumOptimizer(0.1, 0.9),
    "adagrad": lambda: nd.train.AdagradOptimizer(0.1),
    "adam": lambda: nd.train.AdamOptimizer(0.1),
    "rmsprop": lambda: nd.train.RMSPropOptimizer(0.1, momentum=0.5),
    "rmsprop_centered": lambda: nd.train.RMSPropOptimizer(0.1, momentum=0.5,
                                                          centered=True),
}


@pytest.mark.parametrize("kind", sorted(OPTIMIZERS))
def test_optimizer_applies_slices_sparsely(kind):
    init = np.linspace(-1, 1, ROWS * COLS).astype(np.float32).reshape(ROWS, COLS)
    t = nd.Variable(init, name="table")
    loss = nd.reduce_sum(nd.gather(t, IDS) * W)
    opt = OPTIMIZERS[kind]()
    gv = opt.compute_gradients(loss)
    assert isinstance(gv[0][0], nd.IndexedSlices)
    train = opt.apply_gradients(gv)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        for _ in range(3):
            s.run(train)
        got = s.run(t)
    np.testing.assert_allclose(got, _oracle(kind, init, 3), rtol=1e-5, atol=1e-6)
    if kind != "adam":  # rows no id names stay as they were
        untouched = [1, 2, 4]
        np.testing.assert_array_equal(got[untouched], init[untouched])


def test_sparse_update_ops_are_the_sparse_kernels():
    t = nd.Variable(np.zeros((4, 2), np.float32))
    loss = nd.reduce_sum(nd.gather(t, [1]))
    types = set()
    for opt in (nd.train.GradientDescentOptimizer(0.1),
                nd.train.MomentumOptimizer(0.1, 0.9),
                nd.train.AdagradOptimizer(0.1), nd.train.RMSPropOptimizer(0.1)):
        opt.minimize(loss)
    types = {op.type for op in nd.get_default_graph().get_operations()}
    assert {"ScatterSub", "SparseApplyMomentum", "SparseApplyAdagrad",
            "SparseApplyRMSProp"} <= types
    assert not types & {"ApplyGradientDescent", "ApplyMomentum", "ApplyAdagrad",
                        "ApplyRMSProp"}
    nd.train.MomentumOptimizer(0.1, 0.9, use_locking=True,
                               name="Locked").minimize(loss)
    (locked,) = [op for op in nd.get_default_graph().get_operations()
                 if op.type == "SparseApplyMomentum" and "Locked" in op.name]
    assert locked.get_attr("use_locking") is True


def test_sparse_apply_kernel_applies_a_repeated_index_twice():
    from nbdist.ops import sparse_training_ops

    var = nd.Variable(np.ones((3, 1), np.float32))
    acc = nd.Variable(np.ones((3, 1), np.float32))
    upd = sparse_training_ops.sparse_apply_adagrad(
        var, acc, 1.0, np.array([[1.0], [2.0]], np.float32), [2, 2])
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        s.run(upd)
        v, a = s.run([var, acc])
    a1 = 1 + 1.0
    v1 = 1 - 1.0 / np.sqrt(a1)
    a2 = a1 + 4.0
    v2 = v1 - 2.0 / np.sqrt(a2)
    np.testing.assert_allclose(a[:, 0], [1, 1, a2], rtol=1e-6)
    np.testing.assert_allclose(v[:, 0], [1, 1, v2], rtol=1e-6)


def test_sparse_apply_rejects_an_index_out_of_range():
    from nbdist.ops import sparse_training_ops

    var = nd.Variable(np.ones((3, 1), np.float32))
    acc = nd.Variable(np.ones((3, 1), np.float32))
    upd = sparse_training_ops.sparse_apply_momentum(
        var, acc, 1.0, np.ones((1, 1), np.float32), [3], 0.9)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        with pytest.raises(nd.errors.InvalidArgumentError, match="not in \\[0, 3\\)"):
            s.run(upd)


def test_gate_graph_gates_slices():
    t = nd.Variable(np.ones((3, 2), np.float32))
    opt = nd.train.GradientDescentOptimizer(1.0)
    gv = opt.compute_gradients(nd.reduce_sum(nd.gather(t, [2])),
                               gate_gradients=nd.train.Optimizer.GATE_GRAPH)
    assert isinstance(gv[0][0], nd.IndexedSlices)
    train = opt.apply_gradients(gv)
    with nd.Session() as s:
        s.run(t.initializer)
        s.run(train)
        np.testing.assert_array_equal(s.run(t), [[1, 1], [1, 1], [0, 0]])


def test_scatter_update_in_place_never_changes_a_fetched_value():
    t = nd.Variable(np.zeros((3, 2), np.float32))
    sub = nd.scatter_sub(t, [1, 1], np.ones((2, 2), np.float32))
    read = nd.identity(t)
    with nd.Session() as s:
        s.run(t.initializer)
        before = s.run(read)
        s.run(sub)
        after = s.run(t)
        s.run(sub)
    np.testing.assert_array_equal(before, np.zeros((3, 2)))
    np.testing.assert_array_equal(after, [[0, 0], [-2, -2], [0, 0]])
