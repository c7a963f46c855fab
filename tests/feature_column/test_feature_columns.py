"""Feature columns transform features as TF 1.15's ``feature_column.py``
does (behaviours of TF's ``feature_column_test.py``, our own tests): bucket
boundaries, vocabulary ids with out-of-vocabulary buckets, identity ids,
hashed and crossed ids equal to TensorFlow's, dense features made sparse
with their missing entries dropped, and the parse spec.

Literal ids marked "TF 2.21" were printed once by ``/work/tfvenv``'s
``tf.compat.v1.feature_column`` (graph mode) on the same inputs:
``column._get_sparse_tensors(_LazyBuilder(features)).id_tensor``.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist import errors
from nbdist.ops.sparse_ops_cross import sparse_cross_hashed

fc = nd.feature_column


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def ids_of(column, features):
    """(indices, values) of ``column``'s id tensor on ``features``."""
    sp = column._get_sparse_tensors(fc._LazyBuilder(features)).id_tensor
    with nd.Session() as s:
        s.run(nd.tables_initializer())
        v = s.run(sp)
    return v.indices.tolist(), v.values.tolist()


def dense_of(column, features):
    t = column._get_dense_tensor(fc._LazyBuilder(features))
    with nd.Session() as s:
        s.run(nd.tables_initializer())
        return s.run(t)


def test_numeric_column_casts_normalizes_and_makes_rank_one_a_column():
    col = fc.numeric_column("x", normalizer_fn=lambda t: t * 2 - 1)
    assert col._parse_example_spec == {"x": nd.FixedLenFeature((1,), nd.float32)}
    np.testing.assert_allclose(dense_of(col, {"x": nd.constant([1, 3])}),
                               [[1.0], [5.0]])
    two = fc.numeric_column("y", shape=2, default_value=0.5)
    assert two.default_value == (0.5, 0.5)
    assert two._variable_shape.as_list() == [2]
    with pytest.raises(ValueError, match="SparseTensor is not supported. key: x"):
        dense_of(col, {"x": nd.SparseTensor([[0, 0]], [1.0], [1, 1])})
    with pytest.raises(ValueError, match="dtype must be convertible to float"):
        fc.numeric_column("s", dtype=nd.string)
    with pytest.raises(ValueError, match="shape of default_value must be equal"):
        fc.numeric_column("z", shape=(2,), default_value=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="cannot have rank 0"):
        dense_of(col, {"x": nd.constant(1.0)})


def test_bucketized_column_boundaries_dense_one_hot_and_ids_per_dimension():
    boundaries = [0.0, 10.0, 100.0]
    x = np.array([[-5.0, 0.0], [10.0, 99.9], [100.0, 1e4]], np.float32)
    col = fc.bucketized_column(fc.numeric_column("x", shape=(2,)), boundaries)
    # A value equal to a boundary goes to the bucket above it.
    buckets = np.searchsorted(boundaries, x, side="right")
    np.testing.assert_array_equal(buckets, [[0, 1], [2, 2], [3, 3]])
    np.testing.assert_array_equal(dense_of(col, {"x": x}), np.eye(4)[buckets])
    assert col.name == "x_bucketized" and col._num_buckets == 8
    indices, values = ids_of(col, {"x": x})
    assert indices == [[r, d] for r in range(3) for d in range(2)]
    # Dimension d's ids are offset by d * (len(boundaries) + 1).
    assert values == (buckets + [0, 4]).reshape(-1).tolist()
    with pytest.raises(ValueError, match="boundaries must be a sorted list"):
        fc.bucketized_column(fc.numeric_column("x"), [1.0, 1.0])
    with pytest.raises(ValueError, match="must be a column generated with numeric"):
        fc.bucketized_column(fc.categorical_column_with_identity("i", 3), [1.0])


def test_hash_bucket_ids_equal_tensorflow_and_missing_entries_are_dropped():
    col = fc.categorical_column_with_hash_bucket("a", 100)
    # TF 2.21: "x" -> 70, "y" -> 5, "z" -> 37 (Fingerprint64 % 100); "" is missing.
    assert ids_of(col, {"a": [["x"], ["y"], ["z"], [""]]}) == (
        [[0, 0], [1, 0], [2, 0]], [70, 5, 37])
    ints = fc.categorical_column_with_hash_bucket("i", 50, dtype=nd.int64)
    # TF 2.21: integers hash as their decimal text: 1 -> 49, 2 -> 9, 3 -> 21; -1 is
    # missing.
    assert ids_of(ints, {"i": nd.constant([[1], [2], [3], [-1]], nd.int64)}) == (
        [[0, 0], [1, 0], [2, 0]], [49, 9, 21])
    assert col._parse_example_spec == {"a": nd.VarLenFeature(nd.string)}
    with pytest.raises(ValueError, match="Column dtype and SparseTensors dtype"):
        ids_of(ints, {"i": [["x"]]})
    with pytest.raises(ValueError, match="hash_bucket_size must be at least 1"):
        fc.categorical_column_with_hash_bucket("a", 0)


def test_vocabulary_list_ids_default_value_and_oov_buckets_as_tensorflow():
    feats = {"c": nd.SparseTensor([[0, 0], [0, 1], [2, 0], [3, 0]],
                                  ["G", "B", "Q", "R"], [4, 2])}
    plain = fc.categorical_column_with_vocabulary_list("c", ["R", "G", "B"])
    assert ids_of(plain, feats)[1] == [1, 2, -1, 0]
    default = fc.categorical_column_with_vocabulary_list("c", ["R", "G", "B"],
                                                         default_value=9)
    assert ids_of(default, feats)[1] == [1, 2, 9, 0]
    # TF 2.21: "Q" goes to out-of-vocabulary id 3 of [3, 5).
    oov = fc.categorical_column_with_vocabulary_list("c", ["R", "G", "B"],
                                                     num_oov_buckets=2)
    assert oov._num_buckets == 5
    assert ids_of(oov, feats)[1] == [1, 2, 3, 0]
    # TF 2.21: integer keys, 30 -> 4 and 40 -> 2 (hash of "30", "40" % 4, + 2).
    ints = fc.categorical_column_with_vocabulary_list("v", [20, 10], num_oov_buckets=4)
    assert ints.dtype == nd.int64
    assert ids_of(ints, {"v": nd.constant([[10], [20], [30], [40]], nd.int64)})[1] == [
        1, 0, 4, 2]
    with pytest.raises(ValueError, match="Duplicate keys in vocabulary_list"):
        fc.categorical_column_with_vocabulary_list("c", ["R", "R"])
    with pytest.raises(ValueError, match="Can't specify both default_value"):
        fc.categorical_column_with_vocabulary_list("c", ["R"], default_value=0,
                                                   num_oov_buckets=1)


def test_vocabulary_file_counts_its_lines_and_hashes_oov_as_tensorflow(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("R\nG\nB\n")
    col = fc.categorical_column_with_vocabulary_file("f", str(path), num_oov_buckets=3)
    assert (col.vocabulary_size, col._num_buckets) == (3, 6)
    # TF 2.21: "W" -> out-of-vocabulary id 4.
    assert ids_of(col, {"f": [["R"], ["B"], ["W"], ["G"]]})[1] == [0, 2, 4, 1]
    with pytest.raises(ValueError, match="does not exist"):
        fc.categorical_column_with_vocabulary_file("f", str(tmp_path / "none"))


def test_identity_column_default_value_or_a_failing_step():
    col = fc.categorical_column_with_identity("id", 5, default_value=0)
    # -1 is missing (dropped); -2 and 7 are out of range and take the default.
    assert ids_of(col, {"id": nd.constant([[1], [7], [3], [-2], [-1]], nd.int64)}) == (
        [[0, 0], [1, 0], [2, 0], [3, 0]], [1, 0, 3, 0])
    strict = fc.categorical_column_with_identity("id", 5)
    with pytest.raises(errors.InvalidArgumentError):
        ids_of(strict, {"id": [[1], [5]]})
    with pytest.raises(ValueError, match="Invalid input, not integer"):
        ids_of(strict, {"id": [["a"]]})
    with pytest.raises(ValueError, match=r"default_value 5 not in range \[0, 5\)"):
        fc.categorical_column_with_identity("id", 5, default_value=5)


def test_weighted_column_pairs_ids_with_weights_and_its_indicator_sums_them():
    ids = fc.categorical_column_with_vocabulary_list("c", ["R", "G", "B"])
    col = fc.weighted_categorical_column(ids, "w")
    assert col.name == "c_weighted_by_w"
    assert col._parse_example_spec == {"c": nd.VarLenFeature(nd.string),
                                       "w": nd.VarLenFeature(nd.float32)}
    feats = {"c": nd.SparseTensor([[0, 0], [0, 1], [1, 0]], ["G", "G", "R"], [2, 2]),
             "w": nd.SparseTensor([[0, 0], [0, 1], [1, 0]], [0.5, 2.0, 3.0], [2, 2])}
    pair = col._get_sparse_tensors(fc._LazyBuilder(feats))
    with nd.Session() as s:
        s.run(nd.tables_initializer())
        got_ids, got_w = s.run([pair.id_tensor, pair.weight_tensor])
    assert got_ids.values.tolist() == [1, 1, 0]
    assert got_w.values.tolist() == [0.5, 2.0, 3.0]
    # A repeated id sums its weights: row 0 has G twice (0.5 + 2.0).
    np.testing.assert_allclose(dense_of(fc.indicator_column(col), feats),
                               [[0.0, 2.5, 0.0], [3.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="Bad dtype, expected"):
        dense_of(fc.indicator_column(col), {"c": feats["c"], "w": [[1, 2], [3, 4]]})


def test_sparse_cross_hashed_gives_tensorflows_ids():
    a = nd.SparseTensor([[0, 0], [0, 1], [1, 0]], ["a", "b", "c"], [2, 2])
    b = nd.SparseTensor([[0, 0], [0, 1], [1, 0]], nd.constant([5, 6, 7], nd.int64),
                        [2, 3])
    d = nd.constant([["f"], ["g"]])
    with nd.Session() as s:
        got = s.run(sparse_cross_hashed([a, b, d], num_buckets=1000))
        raw = s.run(sparse_cross_hashed([a, b, d]))
    # TF 2.21 tf.sparse.cross_hashed: row 0 crosses {a, b} x {5, 6} x {f}, the last
    # input varying fastest.
    assert got.indices.tolist() == [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0]]
    assert got.values.tolist() == [968, 389, 851, 351, 10]
    assert got.dense_shape.tolist() == [2, 4]
    assert raw.values.tolist() == [5164596742385291161, 7074991961591163582,
                                   8092042809203363044, 5282771868670136544,
                                   8779246946053534010]


def test_crossed_column_keeps_dense_entries_and_crosses_columns_as_tensorflow():
    feats = {"a": [["x"], ["y"], ["z"], [""]],
             "i": nd.constant([[1], [2], [3], [-1]], nd.int64),
             "n": [[1.0], [2.0], [3.0], [4.0]],
             "c": nd.SparseTensor([[0, 0], [0, 1], [2, 0], [3, 0]],
                                  ["G", "B", "Q", "R"], [4, 2])}
    cross = fc.crossed_column(["a", "i"], 1000)
    assert cross.name == "a_X_i" and cross._num_buckets == 1000
    # TF 2.21: dense raw features enter the cross whole (the "" and -1 too).
    assert ids_of(cross, feats) == ([[0, 0], [1, 0], [2, 0], [3, 0]],
                                    [727, 832, 809, 969])
    vocab = fc.categorical_column_with_vocabulary_list("c", ["R", "G", "B"],
                                                       num_oov_buckets=2)
    nested = fc.crossed_column(
        [fc.bucketized_column(fc.numeric_column("n"), [2.5]), "a", vocab], 77)
    assert nested.name == "a_X_c_X_n_bucketized"
    # TF 2.21: categorical keys cross their ids; row 1 has no "c" value.
    assert ids_of(nested, feats) == ([[0, 0], [0, 1], [2, 0], [3, 0]],
                                     [68, 26, 55, 16])
    assert fc.crossed_column([cross, "c"], 10).name == "a_X_c_X_i"
    with pytest.raises(ValueError, match="is not supported for crossing"):
        fc.crossed_column([fc.categorical_column_with_hash_bucket("a", 3), "b"], 10)
    with pytest.raises(ValueError, match="keys must be a list with length > 1"):
        fc.crossed_column(["a"], 10)


def test_parse_spec_reads_examples_that_feed_the_columns():
    age = fc.numeric_column("age", default_value=-1.0)
    word = fc.categorical_column_with_vocabulary_list("word", ["a", "b", "c"])
    cols = [age, fc.indicator_column(word), fc.crossed_column([word, "city"], 10)]
    spec = fc.make_parse_example_spec(cols)
    assert spec == {"age": nd.FixedLenFeature((1,), nd.float32, (-1.0,)),
                    "word": nd.VarLenFeature(nd.string),
                    "city": nd.VarLenFeature(nd.string)}

    def example(age=None, words=()):
        f = {"word": nd.train.Feature(bytes_list=nd.train.BytesList(
            value=[w.encode() for w in words]))}
        if age is not None:
            f["age"] = nd.train.Feature(float_list=nd.train.FloatList(value=[age]))
        return nd.train.Example(features=nd.train.Features(feature=f))

    serialized = [example(30.0, ["b", "c", "b"]).SerializeToString(),
                  example(words=["a"]).SerializeToString()]
    feats = nd.parse_example(serialized, {k: spec[k] for k in ("age", "word")})
    x = fc.input_layer(feats, [age, fc.indicator_column(word)])
    with nd.Session() as s:
        s.run(nd.tables_initializer())
        np.testing.assert_allclose(s.run(x), [[30.0, 0, 2, 1], [-1.0, 1, 0, 0]])
    with pytest.raises(ValueError, match="different parse_spec for key age"):
        fc.make_parse_example_spec([age, fc.numeric_column("age")])
