"""SparseTensor: construction, placeholders fed with values or tuples, fetches
as SparseTensorValue, and the sparse ops (to_dense, reduce_sum, concat,
sparse x dense matmul with gradients), also under ``nd.sparse``."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default():
        yield


IND = np.array([[0, 1], [1, 0], [2, 3]], np.int64)
VAL = np.array([1.5, -2.0, 4.0], np.float32)
SHAPE = np.array([3, 4], np.int64)


def dense_of(ind, val, shape, default=0):
    out = np.full(tuple(shape), default, np.asarray(val).dtype)
    out[tuple(np.asarray(ind).T)] = val
    return out


def test_sparse_tensor_parts_and_fetch():
    sp = nd.SparseTensor(IND, VAL, SHAPE)
    assert sp.indices.dtype == nd.int64 and sp.dense_shape.dtype == nd.int64
    assert sp.dtype == nd.float32
    assert sp.shape.as_list() == [3, 4] and sp.get_shape().as_list() == [3, 4]
    assert sp.op is sp.values.op and sp.graph is nd.get_default_graph()
    with nd.Session() as s:
        v = s.run(sp)
        assert isinstance(v, nd.SparseTensorValue)
        np.testing.assert_array_equal(v.indices, IND)
        np.testing.assert_array_equal(v.values, VAL)
        np.testing.assert_array_equal(v.dense_shape, SHAPE)
        both = s.run({"sp": sp, "n": [sp.values]})
        np.testing.assert_array_equal(both["n"][0], VAL)
        with s.as_default():
            np.testing.assert_array_equal(sp.eval().values, VAL)


def test_sparse_tensor_rejects_bad_parts():
    with pytest.raises(ValueError, match="indices must be a matrix"):
        nd.SparseTensor([0, 1], [1.0, 2.0], [3])
    with pytest.raises(ValueError, match="2 indices but 3 values"):
        nd.SparseTensor([[0], [1]], [1.0, 2.0, 3.0], [3])


@pytest.mark.parametrize("as_tuple", [False, True])
def test_sparse_placeholder_fed_with_value_or_tuple(as_tuple):
    sp = nd.sparse_placeholder(nd.float32, name="sp")
    assert sp.values.op.name == "sp/values"
    dense = nd.sparse_tensor_to_dense(sp)
    value = (IND, VAL, SHAPE) if as_tuple else nd.SparseTensorValue(IND, VAL, SHAPE)
    with nd.Session() as s:
        out, fetched = s.run([dense, sp], {sp: value})
    np.testing.assert_array_equal(out, dense_of(IND, VAL, SHAPE))
    np.testing.assert_array_equal(fetched.values, VAL)


def test_sparse_placeholder_with_a_known_shape():
    sp = nd.sparse_placeholder(nd.float32, shape=[3, 4])
    assert sp.shape.as_list() == [3, 4]
    with nd.Session() as s:
        out = s.run(nd.sparse.reduce_sum(sp), {sp: (IND, VAL, SHAPE)})
    assert out == pytest.approx(VAL.sum())
    with pytest.raises(TypeError, match="SparseTensorValue or a tuple"), \
            nd.Session() as s:
        s.run(sp.values, {sp: VAL})


def test_sparse_to_dense_with_default_and_validation():
    out = nd.sparse_to_dense([[0, 0], [1, 2]], [2, 3], [5, 6], default_value=-1)
    vec = nd.sparse_to_dense([1, 3], [5], 7.0)
    unsorted = nd.sparse_to_dense([[1, 0], [0, 0]], [2, 2], [1.0, 2.0])
    loose = nd.sparse_to_dense([[1, 0], [0, 0]], [2, 2], [1.0, 2.0],
                               validate_indices=False)
    with nd.Session() as s:
        np.testing.assert_array_equal(s.run(out), [[5, -1, -1], [-1, -1, 6]])
        np.testing.assert_array_equal(s.run(vec), [0, 7, 0, 7, 0])
        with pytest.raises(nd.errors.InvalidArgumentError, match="out of order"):
            s.run(unsorted)
        np.testing.assert_array_equal(s.run(loose), [[2, 0], [1, 0]])
        with pytest.raises(nd.errors.InvalidArgumentError, match="out of bounds"):
            s.run(nd.sparse_to_dense([[2, 0]], [2, 2], [1.0]))


def test_sparse_to_dense_gradient():
    values = nd.constant(VAL)
    default = nd.constant(0.5)
    dense = nd.sparse_to_dense(IND, SHAPE, values, default)
    weights = np.arange(12, dtype=np.float32).reshape(3, 4)
    gv, gd = nd.gradients(nd.reduce_sum(dense * weights), [values, default])
    with nd.Session() as s:
        gv_, gd_ = s.run([gv, gd])
    np.testing.assert_array_equal(gv_, weights[tuple(IND.T)])
    assert gd_ == pytest.approx(weights.sum() - weights[tuple(IND.T)].sum())


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True),
                                           ([0, 1], True), (-1, False)])
def test_sparse_reduce_sum(axis, keepdims):
    sp = nd.SparseTensor(IND, VAL, SHAPE)
    out = nd.sparse_reduce_sum(sp, axis=axis, keepdims=keepdims)
    expected = np.sum(dense_of(IND, VAL, SHAPE), axis=None if axis is None else
                      tuple(np.atleast_1d(axis)), keepdims=keepdims)
    assert out.shape.as_list() == list(np.shape(expected))
    (g,) = nd.gradients(nd.reduce_sum(out * 3.0), [sp.values])
    with nd.Session() as s:
        np.testing.assert_allclose(s.run(out), expected)
        np.testing.assert_allclose(s.run(g), [3.0, 3.0, 3.0])


def test_sparse_concat_orders_entries_row_major():
    a = nd.SparseTensor([[0, 0], [1, 1]], [1.0, 2.0], [2, 2])
    b = nd.SparseTensor([[0, 2], [1, 0]], [3.0, 4.0], [2, 3])
    cat = nd.sparse_concat(1, [a, b])
    rows = nd.sparse.concat(0, [a, a])
    with nd.Session() as s:
        v = s.run(cat)
        r = s.run(rows)
    np.testing.assert_array_equal(v.indices, [[0, 0], [0, 4], [1, 1], [1, 2]])
    np.testing.assert_array_equal(v.values, [1, 3, 2, 4])
    np.testing.assert_array_equal(v.dense_shape, [2, 5])
    np.testing.assert_array_equal(r.dense_shape, [4, 2])
    np.testing.assert_array_equal(r.values, [1, 2, 1, 2])
    bad = nd.sparse_concat(0, [a, b])
    with nd.Session() as s, pytest.raises(nd.errors.InvalidArgumentError,
                                          match="shapes must match"):
        s.run(bad)


def test_sparse_concat_expanding_other_dims():
    a = nd.SparseTensor([[0, 0]], [1.0], [1, 2])
    b = nd.SparseTensor([[0, 3]], [2.0], [1, 4])
    cat = nd.sparse_concat(0, [a, b], expand_nonconcat_dim=True)
    with nd.Session() as s:
        v = s.run(cat)
    np.testing.assert_array_equal(v.dense_shape, [2, 4])
    np.testing.assert_array_equal(v.indices, [[0, 0], [1, 3]])


@pytest.mark.parametrize("adj_a,adj_b", [(False, False), (True, False),
                                         (False, True), (True, True)])
def test_sparse_dense_matmul_and_its_gradients(adj_a, adj_b):
    rng = np.random.default_rng(3)
    a_dense = dense_of(IND, VAL, SHAPE)  # 3 x 4
    a_op = a_dense.T if adj_a else a_dense
    b_np = rng.standard_normal((a_op.shape[1], 2)).astype(np.float32)
    b_in = b_np.T if adj_b else b_np
    values = nd.constant(VAL)
    b = nd.constant(b_in)
    sp = nd.SparseTensor(IND, values, SHAPE)
    out = nd.sparse_tensor_dense_matmul(sp, b, adjoint_a=adj_a, adjoint_b=adj_b)
    assert out.shape.as_list() == [a_op.shape[0], 2]
    w = rng.standard_normal((a_op.shape[0], 2)).astype(np.float32)
    gv, gb = nd.gradients(nd.reduce_sum(out * w), [values, b])
    with nd.Session() as s:
        got, gv_, gb_ = s.run([out, gv, gb])
    np.testing.assert_allclose(got, a_op @ b_np, rtol=1e-5)
    # d/dB sum(W * op(A) op(B)): op(A)^T W, transposed back for adjoint_b.
    gB = a_op.T @ w
    np.testing.assert_allclose(gb_, gB.T if adj_b else gB, rtol=1e-5)
    dA = w @ b_np.T  # gradient for op(A)
    dA = dA.T if adj_a else dA
    np.testing.assert_allclose(gv_, dA[tuple(IND.T)], rtol=1e-5)


def test_sparse_dense_matmul_shape_errors():
    sp = nd.SparseTensor(IND, VAL, SHAPE)
    with pytest.raises(ValueError, match="inner dimension"):
        nd.sparse_tensor_dense_matmul(sp, np.ones((3, 2), np.float32))
    ph = nd.placeholder(nd.float32, [None, 2])
    out = nd.sparse_tensor_dense_matmul(sp, ph)
    with nd.Session() as s, pytest.raises(nd.errors.InvalidArgumentError,
                                          match="inner dimension"):
        s.run(out, {ph: np.ones((3, 2), np.float32)})


def test_sparse_namespace_aliases():
    sp = nd.sparse.SparseTensor(IND, VAL, SHAPE)
    assert nd.sparse.to_dense is nd.sparse_tensor_to_dense
    assert nd.sparse.reduce_sum is nd.sparse_reduce_sum
    assert nd.sparse.sparse_dense_matmul is nd.sparse_tensor_dense_matmul
    with nd.Session() as s:
        np.testing.assert_array_equal(s.run(nd.sparse.to_dense(sp)),
                                      dense_of(IND, VAL, SHAPE))


def test_unique_keeps_first_appearance_order():
    y, idx = nd.unique(nd.constant([4, 1, 4, 2, 1]))
    with nd.Session() as s:
        y_, idx_ = s.run([y, idx])
    np.testing.assert_array_equal(y_, [4, 1, 2])
    np.testing.assert_array_equal(idx_, [0, 1, 0, 2, 1])


# -- embedding_lookup_sparse ------------------------------------------------------
TABLE = np.arange(20, dtype=np.float32).reshape(10, 2) / 10
SP_IND = np.array([[0, 0], [0, 1], [2, 0], [2, 1], [2, 2]], np.int64)
SP_IDS = np.array([1, 7, 3, 3, 9], np.int64)
SP_W = np.array([2.0, 1.0, 0.5, 1.0, 3.0], np.float32)


def _combine(weights, combiner, rows):
    out = np.zeros((rows, 2), np.float32)
    for r in range(rows):
        sel = SP_IND[:, 0] == r
        if not sel.any():
            continue
        w = weights[sel]
        e = (TABLE[SP_IDS[sel]] * w[:, None]).sum(0)
        if combiner == "mean":
            e = e / w.sum()
        elif combiner == "sqrtn":
            e = e / np.sqrt((w * w).sum())
        out[r] = e
    return out


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("weighted", [False, True])
def test_embedding_lookup_sparse(combiner, weighted):
    with nd.variable_scope("e", partitioner=nd.fixed_size_partitioner(3)):
        table = nd.get_variable("t", initializer=TABLE)
    ids = nd.SparseTensor(SP_IND, SP_IDS, [3, 3])
    weights = nd.SparseTensor(SP_IND, SP_W, [3, 3]) if weighted else None
    out = nd.nn.embedding_lookup_sparse(table, ids, weights, combiner=combiner,
                                        partition_strategy="div")
    grads = nd.gradients(nd.reduce_sum(out), list(table))
    assert all(isinstance(g, nd.IndexedSlices) for g in grads)
    w = SP_W if weighted else np.ones(5, np.float32)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        got = s.run(out)
        dense = s.run([nd.convert_to_tensor(g) for g in grads])
    np.testing.assert_allclose(got, _combine(w, combiner, 3), rtol=1e-6)
    # Oracle gradient: d sum(out) / d table[id] summed over the id's entries.
    expected = np.zeros_like(TABLE)
    for r in range(3):
        sel = SP_IND[:, 0] == r
        if not sel.any():
            continue
        scale = {"sum": 1.0, "mean": 1 / w[sel].sum(),
                 "sqrtn": 1 / np.sqrt((w[sel] ** 2).sum())}[combiner]
        np.add.at(expected, SP_IDS[sel], (w[sel] * scale)[:, None] * np.ones(2))
    np.testing.assert_allclose(np.concatenate(dense), expected, rtol=1e-6)


def test_embedding_lookup_sparse_rejects_a_bad_combiner():
    ids = nd.SparseTensor(SP_IND, SP_IDS, [3, 3])
    with pytest.raises(ValueError, match="combiner must be one of"):
        nd.nn.embedding_lookup_sparse(nd.constant(TABLE), ids, None, combiner="max")
    with pytest.raises(TypeError, match="sp_ids must be SparseTensor"):
        nd.nn.embedding_lookup_sparse(nd.constant(TABLE), SP_IDS, None)


@pytest.mark.parametrize("default_id", [None, 4])
def test_safe_embedding_lookup_sparse_drops_bad_ids_and_fills_empty_rows(default_id):
    ind = np.array([[0, 0], [0, 1], [1, 0], [3, 0]], np.int64)
    ids = np.array([2, -1, -5, 6], np.int64)
    w = np.array([1.0, 1.0, 1.0, 0.0], np.float32)
    sp_ids = nd.SparseTensor(ind, ids, [4, 2])
    sp_w = nd.SparseTensor(ind, w, [4, 2])
    out = nd.nn.safe_embedding_lookup_sparse(nd.constant(TABLE), sp_ids, sp_w,
                                             default_id=default_id)
    fill = np.zeros(2, np.float32) if default_id is None else TABLE[default_id]
    expected = np.stack([TABLE[2], fill, fill, fill])  # rows 1..3 end up empty
    with nd.Session() as s:
        np.testing.assert_allclose(s.run(out), expected, rtol=1e-6)


def test_fed_sparse_ids_train_an_embedding_as_the_dense_formulation():
    # A wide model: mean of the embeddings of each example's ids, trained by
    # Adagrad on the IndexedSlices gradient; the oracle is the same model as
    # a sparse x dense matmul (whose gradient for the table is dense).
    rng = np.random.default_rng(5)
    batches = []
    for _ in range(3):
        rows = np.repeat(np.arange(4), [2, 1, 3, 2])
        cols = np.concatenate([np.arange(n) for n in [2, 1, 3, 2]])
        ids = rng.integers(0, 10, rows.size)
        batches.append((np.stack([rows, cols], 1), ids,
                        rng.standard_normal((4, 2)).astype(np.float32)))

    def train(sparse_updates):
        with nd.Graph().as_default():
            table = nd.Variable(TABLE, name="table")
            sp_ids = nd.sparse_placeholder(nd.int64, name="ids")
            target = nd.placeholder(nd.float32, [4, 2])
            if sparse_updates:
                emb = nd.nn.embedding_lookup_sparse(table, sp_ids, None)
            else:
                # 1/count weights at (row, id): the mean as a matmul.
                weights = nd.sparse_placeholder(nd.float32, name="w")
                emb = nd.sparse_tensor_dense_matmul(weights, table)
            loss = nd.reduce_sum(nd.square(emb - target))
            opt = nd.train.AdagradOptimizer(0.2)
            (g, _), = opt.compute_gradients(loss)
            assert isinstance(g, nd.IndexedSlices) == sparse_updates
            step = opt.apply_gradients([(g, table)])
            with nd.Session() as s:
                s.run(nd.global_variables_initializer())
                for ind, ids, tgt in batches:
                    feed = {target: tgt}
                    if sparse_updates:
                        feed[sp_ids] = (ind, ids, [4, 3])
                    else:
                        counts = np.bincount(ind[:, 0])[ind[:, 0]]
                        # Entries summed per (row, id), in row-major order.
                        keys = ind[:, 0] * 10 + ids
                        uniq, inv = np.unique(keys, return_inverse=True)
                        vals = np.zeros(uniq.size, np.float32)
                        np.add.at(vals, inv, 1.0 / counts)
                        feed[weights] = (np.stack([uniq // 10, uniq % 10], 1),
                                         vals, [4, 10])
                    s.run(step, feed)
                return s.run(table)

    trained = train(True)
    np.testing.assert_allclose(trained, train(False), rtol=1e-5, atol=1e-6)
    assert not np.allclose(trained, TABLE)


@pytest.mark.parametrize("n_values", [0, 1, 4])
def test_sparse_to_dense_of_a_vector_as_a_padded_varlen_feature(n_values):
    # A VarLenFeature's [n, 1] indices padded into a [5] vector (the path of one
    # record), against the oracle; with a scalar value and a default too.
    ind = np.arange(n_values, dtype=np.int64).reshape(-1, 1)
    val = np.arange(1, n_values + 1, dtype=np.int64)
    padded = nd.sparse_to_dense(ind, [5], val)
    filled = nd.sparse_to_dense(ind, [5], np.int64(9), default_value=-1)
    with nd.Session() as s:
        np.testing.assert_array_equal(s.run(padded), dense_of(ind, val, [5]))
        np.testing.assert_array_equal(s.run(filled), dense_of(ind, 9, [5], -1))


_BIG = np.arange(100, dtype=np.int64).reshape(-1, 1)
_BIG[70] = 69  # many indices: checked by NumPy, the error found in order after


@pytest.mark.parametrize("ind, shape, validate, message", [
    ([[2], [1], [1]], [4], True, r"indices\[1\] = \[1\] is out of order"),
    ([[2], [1], [9]], [4], True, r"indices\[1\] = \[1\] is out of order"),
    ([[1], [1], [0]], [4], True, r"indices\[1\] = \[1\] is repeated"),
    ([[0], [5]], [4], True,
     r"indices\[1\] = \[5\] is out of bounds: need 0 <= index < \[4\]"),
    ([[-1]], [4], True, r"indices\[0\] = \[-1\] is out of bounds"),
    ([[0, 3], [1, 0]], [2, 2], True,
     r"indices\[0\] = \[0,3\] is out of bounds: need 0 <= index < \[2,2\]"),
    ([[0, 1], [0, 1]], [2, 2], True, r"indices\[1\] = \[0,1\] is repeated"),
    (_BIG, [100], True, r"indices\[70\] = \[69\] is repeated"),
    ([[1], [0], [7]], [4], False,
     r"Indices are not valid \(out of bounds\)\.  Shape: \[4\]"),
])
def test_sparse_to_dense_names_the_first_bad_index_as_tf(ind, shape, validate,
                                                         message):
    # TF 2.21's messages, checked: the first index in order that is out of
    # bounds, out of order or repeated (only bounds without validate_indices).
    ind = np.array(ind, np.int64)
    dense = nd.sparse_to_dense(ind, shape, np.arange(1, len(ind) + 1),
                               validate_indices=validate)
    with nd.Session() as s, pytest.raises(nd.errors.InvalidArgumentError,
                                          match=message):
        s.run(dense)


def test_sparse_to_dense_of_many_indices_matches_the_oracle():
    # beyond the Python pass: 200 sorted indices of a [20, 30] matrix
    ind = np.sort(np.random.default_rng(0).choice(600, 200, replace=False))
    ind = np.stack(np.unravel_index(ind, (20, 30)), 1).astype(np.int64)
    val = np.arange(200, dtype=np.float32)
    with nd.Session() as s:
        out = s.run(nd.sparse_to_dense(ind, [20, 30], val, default_value=-1.0))
    np.testing.assert_array_equal(out, dense_of(ind, val, [20, 30], -1.0))
