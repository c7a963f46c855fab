"""``input_layer`` and ``linear_model`` as TF 1.15 builds them: TensorFlow's
variable names and shapes (so a TF checkpoint restores), embedding
combiners against NumPy, a linear model trained in-process against the same
steps in NumPy, and embedding tables updated sparsely: their gradient is an
``IndexedSlices``, applied on the parameter server of a real cluster.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

fc = nd.feature_column
TABLE = np.arange(15, dtype=np.float32).reshape(5, 3) / 10


def table_init(shape, dtype=None, partition_info=None):
    return nd.constant(TABLE[:shape[0], :shape[1]])


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def test_variable_names_and_shapes_are_tensorflows():
    feats = {"c": nd.SparseTensor([[0, 0], [1, 0]], ["G", "B"], [2, 1]),
             "w": nd.SparseTensor([[0, 0], [1, 0]], [0.5, 2.0], [2, 1]),
             "n": [[1.0], [2.0]], "id": [[1], [3]], "vi2": [[4], [0]],
             "a": [["x"], ["y"]], "i": nd.constant([[1], [2]], nd.int64)}
    vocab = fc.categorical_column_with_vocabulary_list("c", ["R", "G", "B"],
                                                       num_oov_buckets=2)
    weighted = fc.weighted_categorical_column(
        fc.categorical_column_with_vocabulary_list("c", ["R", "G", "B"]), "w")
    shared = fc.shared_embedding_columns(
        [fc.categorical_column_with_identity("id", 5),
         fc.categorical_column_with_identity("vi2", 5)], 2)
    fc.input_layer(feats, [fc.embedding_column(vocab, 3),
                           fc.embedding_column(weighted, 2), fc.numeric_column("n")]
                   + shared)
    fc.linear_model(feats, [vocab, weighted, fc.numeric_column("n"),
                            fc.crossed_column(["a", "i"], 1000),
                            fc.bucketized_column(fc.numeric_column("n"), [1, 2])],
                    units=2)
    got = sorted((v.op.name, v.shape.as_list()) for v in nd.global_variables())
    # The names and shapes TF 2.21's tf.compat.v1.feature_column gives these columns.
    assert got == [
        ("input_layer/c_embedding/embedding_weights", [5, 3]),
        ("input_layer/c_weighted_by_w_embedding/embedding_weights", [3, 2]),
        ("input_layer/id_vi2_shared_embedding/embedding_weights", [5, 2]),
        ("linear_model/a_X_i/weights", [1000, 2]),
        ("linear_model/bias_weights", [2]),
        ("linear_model/c/weights", [5, 2]),
        ("linear_model/c_weighted_by_w/weights", [3, 2]),
        ("linear_model/n/weights", [1, 2]),
        ("linear_model/n_bucketized/weights", [3, 2])]
    model_vars = {v.op.name for v in nd.get_collection(nd.GraphKeys.MODEL_VARIABLES)}
    assert "linear_model/c/weights" in model_vars
    assert "input_layer/c_embedding/embedding_weights" in model_vars


@pytest.mark.parametrize("combiner", ["mean", "sqrtn", "sum"])
def test_embedding_combiners_against_numpy(combiner):
    ids = fc.categorical_column_with_identity("id", 5)
    weighted = fc.weighted_categorical_column(ids, "w")
    col = fc.embedding_column(weighted, 3, combiner=combiner, initializer=table_init)
    rows = [[0, 2], [4], []]  # row 2 has no id: its embedding is zeros
    weights = [[1.0, 3.0], [2.0], []]
    idx = [[r, j] for r, ids_ in enumerate(rows) for j in range(len(ids_))]
    feats = {"id": nd.SparseTensor(idx, [i for r in rows for i in r], [3, 2]),
             "w": nd.SparseTensor(idx, [w for r in weights for w in r], [3, 2])}
    out = fc.input_layer(feats, [col])
    expect = np.zeros((3, 3), np.float32)
    for r, (ids_, ws) in enumerate(zip(rows, weights)):
        if not ids_:
            continue
        total = sum(w * TABLE[i] for i, w in zip(ids_, ws))
        norm = {"sum": 1.0, "mean": sum(ws),
                "sqrtn": np.sqrt(sum(w * w for w in ws))}[combiner]
        expect[r] = total / norm
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        np.testing.assert_allclose(s.run(out), expect, rtol=1e-6)


def test_input_layer_orders_columns_by_name_and_rejects_categorical_ones():
    color = fc.categorical_column_with_vocabulary_list("color", ["R", "G"])
    feats = {"color": [["G"], ["X"]], "b": [[1.0, 2.0], [3.0, 4.0]], "a": [5.0, 6.0]}
    cols_to_out = {}
    x = fc.input_layer(feats, [fc.indicator_column(color), fc.numeric_column("b", 2),
                               fc.numeric_column("a")],
                       cols_to_output_tensors=cols_to_out)
    with nd.Session() as s:
        s.run(nd.tables_initializer())
        # a, b, color_indicator: an unknown color is all zeros.
        np.testing.assert_allclose(s.run(x), [[5, 1, 2, 0, 1], [6, 3, 4, 0, 0]])
    assert sorted(c.name for c in cols_to_out) == ["a", "b", "color_indicator"]
    with pytest.raises(ValueError, match="must be a _DenseColumn"):
        fc.input_layer(feats, [color])
    with pytest.raises(ValueError, match="Duplicate feature column name"):
        fc.input_layer(feats, [fc.numeric_column("a"), fc.numeric_column("a")])


def test_linear_model_trained_in_process_follows_numpy_gradient_descent():
    # y = w_color[id] + w_x * x + bias, squared loss, 3 steps of gradient descent.
    color = fc.categorical_column_with_vocabulary_list("color", ["R", "G", "B"])
    ids = np.array([0, 2, 2, 1])
    x = np.array([1.0, -1.0, 2.0, 0.5], np.float32)
    y = np.array([1.0, 0.0, 2.0, -1.0], np.float32)
    feats = {"color": nd.constant([["R"], ["B"], ["B"], ["G"]]),
             "x": nd.constant(x.reshape(-1, 1))}
    cols_to_vars = {}
    pred = fc.linear_model(feats, [color, fc.numeric_column("x")],
                           cols_to_vars=cols_to_vars)
    loss = nd.reduce_mean(nd.square(nd.reshape(pred, [-1]) - y))
    lr = 0.1
    train = nd.train.GradientDescentOptimizer(lr).minimize(loss)
    assert set(cols_to_vars) == {color, fc.numeric_column("x"), "bias"}
    w_c, w_x, b = np.zeros(3), 0.0, 0.0
    with nd.Session() as s:
        s.run([nd.global_variables_initializer(), nd.tables_initializer()])
        for _ in range(3):
            s.run(train)
            err = 2 * (w_c[ids] + w_x * x + b - y) / len(y)
            w_c = w_c - lr * np.bincount(ids, err, minlength=3)
            w_x, b = w_x - lr * np.dot(err, x), b - lr * err.sum()
        got_c, got_x, got_b = s.run([cols_to_vars[color][0],
                                     cols_to_vars[fc.numeric_column("x")][0],
                                     cols_to_vars["bias"][0]])
    np.testing.assert_allclose(got_c[:, 0], w_c, rtol=1e-5)
    np.testing.assert_allclose([got_x[0, 0], got_b[0]], [w_x, b], rtol=1e-5)


def test_embedding_gradient_is_indexed_slices_of_the_rows_used():
    ids = fc.categorical_column_with_hash_bucket("w", 1000)
    dense = fc.input_layer({"w": [["a"], ["b"], ["a"]]},
                           [fc.embedding_column(ids, 4)])
    (table,) = nd.trainable_variables()
    (grad,) = nd.gradients(nd.reduce_sum(dense), [table])
    assert isinstance(grad, nd.IndexedSlices)
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        g = s.run(grad)
        assert sorted(set(g.indices.tolist())) == sorted(
            s.run(nd.string_to_hash_bucket_fast(["a", "b"], 1000)).tolist())
        assert g.values.shape[1] == 4


@pytest.mark.slow
def test_embedding_lives_on_the_ps_and_is_updated_sparsely_there():
    from nbdist.cluster.local_cluster import LocalCluster

    with LocalCluster(ps=1, workers=1, progress=False, start_timeout=60) as cluster:
        with nd.device(nd.train.replica_device_setter(cluster=cluster.cluster_spec)):
            col = fc.embedding_column(
                fc.categorical_column_with_identity("id", 50), 3,
                initializer=nd.ones_initializer())
            dense = fc.input_layer({"id": [[3], [7], [3]]}, [col])
            loss = nd.reduce_sum(dense)
            train = nd.train.AdagradOptimizer(0.5).minimize(loss)
        (table,) = nd.trainable_variables()
        assert table.device == "/job:ps/task:0"
        meta = nd.RunMetadata()
        with nd.Session(cluster.target("worker", 0)) as s:
            s.run(nd.global_variables_initializer())
            s.run(train, options=nd.RunOptions(output_partition_graphs=True),
                  run_metadata=meta)
            after = s.run(table)
        ps_ops = {n.op for g in meta.partition_graphs for n in g.node
                  if "/job:ps" in n.device}
        assert "SparseApplyAdagrad" in ps_ops and "ApplyAdagrad" not in ps_ops
    # Only rows 3 and 7 moved: Adagrad's first step is lr * g / sqrt(0.1 + g^2).
    moved = np.ones((50, 3), np.float32)
    for row, g in ((3, 2.0), (7, 1.0)):  # id 3 is in two examples
        moved[row] -= 0.5 * g / np.sqrt(0.1 + g * g)
    np.testing.assert_allclose(after, moved, rtol=1e-5)


def test_embedding_from_a_checkpoint_and_clipped_by_max_norm(tmp_path):
    with nd.Graph().as_default():
        saved = nd.Variable(TABLE, name="pretrained")
        with nd.Session() as s:
            s.run(saved.initializer)
            nd.train.Saver([saved]).save(s, str(tmp_path / "ckpt"))
    ids = fc.categorical_column_with_identity("id", 5)
    warm = fc.embedding_column(ids, 3, ckpt_to_load_from=str(tmp_path / "ckpt"),
                               tensor_name_in_ckpt="pretrained")
    clipped = fc.embedding_column(fc.categorical_column_with_identity("j", 5), 3,
                                  initializer=table_init, max_norm=1.0)
    out = fc.input_layer({"id": [[4], [1]], "j": [[4], [0]]}, [warm, clipped])
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        got = s.run(out)
    np.testing.assert_allclose(got[:, :3], TABLE[[4, 1]], rtol=1e-6)
    # Each looked-up row is scaled down to norm 1 when longer (row 0 is shorter).
    norms = np.linalg.norm(TABLE[[4, 0]], axis=1, keepdims=True)
    np.testing.assert_allclose(got[:, 3:], TABLE[[4, 0]] / np.maximum(norms, 1.0),
                               rtol=1e-5)
    with pytest.raises(ValueError, match="Must specify both `ckpt_to_load_from`"):
        fc.embedding_column(ids, 3, ckpt_to_load_from="x")
