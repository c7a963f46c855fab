"""``parse_example`` / ``parse_single_example`` (FixedLen, VarLen -> SparseTensor,
FixedLenSequence), ``decode_raw`` and ``decode_csv``, with TF1's results and
error messages; Examples TensorFlow wrote parse here."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FIXTURES

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def example(**features):
    f = {}
    for key, values in features.items():
        if values and isinstance(values[0], float):
            f[key] = nd.train.Feature(float_list=nd.train.FloatList(value=values))
        elif values and isinstance(values[0], bytes):
            f[key] = nd.train.Feature(bytes_list=nd.train.BytesList(value=values))
        else:
            f[key] = nd.train.Feature(int64_list=nd.train.Int64List(value=values))
    return nd.train.Example(features=nd.train.Features(feature=f)).SerializeToString()


def run(x):
    with nd.Session() as s:
        return s.run(x)


def test_fixed_len_features_with_defaults():
    serialized = [example(x=[1.0, 2.0], s=[b"a"]), example(x=[3.0, 4.0])]
    out = nd.parse_example(serialized, {
        "x": nd.FixedLenFeature([2], nd.float32),
        "s": nd.FixedLenFeature([], nd.string, default_value="none"),
        "k": nd.FixedLenFeature([1, 2], nd.int64, default_value=[[7, 8]])})
    assert out["x"].shape.as_list() == [2, 2]
    assert out["k"].shape.as_list() == [2, 1, 2]
    got = run(out)
    np.testing.assert_array_equal(got["x"], [[1, 2], [3, 4]])
    assert got["x"].dtype == np.float32
    assert got["s"].tolist() == [b"a", b"none"]
    np.testing.assert_array_equal(got["k"], [[[7, 8]], [[7, 8]]])


def test_var_len_feature_is_a_sparse_tensor():
    serialized = [example(ids=[3]), example(ids=[]), example(ids=[4, 5, 6])]
    out = nd.parse_example(serialized, {"ids": nd.VarLenFeature(nd.int64)})
    assert isinstance(out["ids"], nd.SparseTensor)
    v = run(out["ids"])
    assert v.indices.tolist() == [[0, 0], [2, 0], [2, 1], [2, 2]]
    assert v.values.tolist() == [3, 4, 5, 6]
    assert v.dense_shape.tolist() == [3, 3]
    dense = run(nd.sparse.to_dense(out["ids"]))
    np.testing.assert_array_equal(dense, [[3, 0, 0], [0, 0, 0], [4, 5, 6]])


def test_fixed_len_sequence_feature_pads_to_longest():
    serialized = [example(seq=[1.0, 2.0, 3.0, 4.0]), example(), example(seq=[5.0, 6.0])]
    out = nd.parse_example(serialized, {"seq": nd.FixedLenSequenceFeature(
        [2], nd.float32, allow_missing=True, default_value=-1.0)})
    assert out["seq"].shape.as_list() == [3, None, 2]
    np.testing.assert_array_equal(run(out["seq"]), [
        [[1, 2], [3, 4]], [[-1, -1], [-1, -1]], [[5, 6], [-1, -1]]])
    with pytest.raises(ValueError, match="allow_missing"):
        nd.parse_example(serialized, {"seq": nd.FixedLenSequenceFeature([], nd.int64)})


def test_parse_single_example_drops_the_batch_dimension():
    out = nd.parse_single_example(example(x=[1.5, 2.5], ids=[9, 8]), {
        "x": nd.FixedLenFeature([2], nd.float32),
        "ids": nd.VarLenFeature(nd.int64)})
    assert out["x"].shape.as_list() == [2]
    got = run(out)
    np.testing.assert_array_equal(got["x"], [1.5, 2.5])
    assert got["ids"].indices.tolist() == [[0], [1]]
    assert got["ids"].values.tolist() == [9, 8]
    assert got["ids"].dense_shape.tolist() == [2]


def test_missing_required_feature_names_it():
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"Feature: b \(data type: float\) is required but "
                             r"could not be found\."):
        run(nd.parse_example([example(a=[1.0])],
                             {"b": nd.FixedLenFeature([], nd.float32)}))
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"Feature: ids \(data type: int64\) is required"):
        run(nd.parse_single_example(example(a=[1.0]),
                                    {"ids": nd.FixedLenFeature([], nd.int64)}))


def test_wrong_type_and_wrong_size_are_invalid_argument():
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="Key: a.  Data types don't match. Data type: float but "
                             "expected type: int64"):
        run(nd.parse_single_example(example(a=[1.0]),
                                    {"a": nd.FixedLenFeature([], nd.int64)}))
    with pytest.raises(nd.errors.InvalidArgumentError, match="Values size: 1"):
        run(nd.parse_single_example(example(a=[1.0]),
                                    {"a": nd.FixedLenFeature([2], nd.float32)}))
    with pytest.raises(nd.errors.InvalidArgumentError, match="Could not parse"):
        run(nd.parse_single_example(b"\xff\xff not a proto",
                                    {"a": nd.FixedLenFeature([], nd.float32)}))


def test_graph_build_errors():
    with pytest.raises(ValueError, match="vector"):
        nd.parse_example(b"x", {"a": nd.FixedLenFeature([], nd.float32)})
    with pytest.raises(ValueError, match="float32, int64 or string"):
        nd.parse_example([b"x"], {"a": nd.FixedLenFeature([], nd.int32)})
    with pytest.raises(ValueError, match="default_value"):
        nd.parse_example([b"x"], {"a": nd.FixedLenFeature([2], nd.float32,
                                                          default_value=[1.0])})


def test_parses_examples_tensorflow_wrote():
    records = list(nd.io.tf_record_iterator(str(FIXTURES / "examples.tfrecord")))
    out = nd.io.parse_example(records, {
        "id": nd.io.FixedLenFeature([], nd.int64),
        "label": nd.io.FixedLenFeature([], nd.float32),
        "name": nd.io.FixedLenFeature([], nd.string),
        "tokens": nd.io.VarLenFeature(nd.int64)})
    got = run(out)
    # scripts/make_tfrecord_fixtures.py's formulas, example i of 4.
    np.testing.assert_array_equal(got["id"], [0, 1, 2, 3])
    np.testing.assert_array_equal(got["label"], [0.0, 0.5, 1.0, 1.5])
    assert got["name"].tolist() == [b"ex0", b"ex1", b"ex2", b"ex3"]
    assert got["tokens"].values.tolist() == [10, 20, 21, 30, 31, 32]
    assert got["tokens"].dense_shape.tolist() == [4, 3]


def test_decode_raw_matches_numpy_frombuffer():
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(3, 4)).astype(np.float32)
    little = [r.astype("<f4").tobytes() for r in rows]
    big = [r.astype(">f4").tobytes() for r in rows]
    got_little = run(nd.decode_raw(little, nd.float32))
    got_big = run(nd.io.decode_raw(big, nd.float32, little_endian=False))
    np.testing.assert_array_equal(got_little, rows)
    np.testing.assert_array_equal(got_big, rows)
    assert run(nd.decode_raw(b"\x01\x02", nd.uint8)).tolist() == [1, 2]
    with pytest.raises(nd.errors.InvalidArgumentError, match="same size"):
        run(nd.decode_raw([b"abcd", b"ab"], nd.int16))
    with pytest.raises(nd.errors.InvalidArgumentError, match="not a multiple of 2"):
        run(nd.decode_raw([b"abc"], nd.int16))


def test_decode_csv_types_defaults_quotes_and_na():
    records = ['1,"a,b",2.5', '2,,', '3,"say ""hi""",NA']
    a, b, c = nd.decode_csv(records, [[0], ["z"], [1.0]], na_value="NA")
    got = run([a, b, c])
    assert got[0].tolist() == [1, 2, 3] and got[0].dtype == np.int32
    assert got[1].tolist() == [b"a,b", b"z", b'say "hi"']
    np.testing.assert_array_equal(got[2], np.float32([2.5, 1.0, 1.0]))
    x, y = nd.decode_csv(["1|x"], [nd.constant([], nd.int64), ["d"]],
                         field_delim="|")
    assert run(x).dtype == np.int64


def test_decode_csv_errors_name_field_and_record():
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="Expect 3 fields but have 2 in record 0"):
        run(nd.decode_csv(["1,2"], [[0], [0], [0]]))
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="Field 0 in record 1 is not a valid int32: a"):
        run(nd.decode_csv(["1,2", "a,2"], [[0], [0]]))
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="Field 1 is required but missing in record 0"):
        run(nd.decode_csv([","], [[0], []]))


def test_parse_single_sequence_example():
    ex = nd.train.SequenceExample()
    ex.context.feature["len"].int64_list.value.append(3)
    for i in range(3):
        steps = ex.feature_lists.feature_list
        steps["tok"].feature.add().int64_list.value.extend(range(i))
        steps["emb"].feature.add().float_list.value.extend([i, -i])
    context, seq = nd.io.parse_single_sequence_example(
        ex.SerializeToString(),
        context_features={"len": nd.FixedLenFeature([], nd.int64),
                          "d": nd.FixedLenFeature([], nd.float32, default_value=2.0)},
        sequence_features={
            "tok": nd.VarLenFeature(nd.int64),
            "emb": nd.FixedLenSequenceFeature([2], nd.float32),
            "gone": nd.FixedLenSequenceFeature([], nd.float32, allow_missing=True)})
    assert seq["emb"].shape.as_list() == [None, 2]
    got_context, got = run((context, seq))
    assert (int(got_context["len"]), float(got_context["d"])) == (3, 2.0)
    # Step i holds tokens range(i) and the embedding [i, -i].
    assert got["tok"].indices.tolist() == [[1, 0], [2, 0], [2, 1]]
    assert got["tok"].values.tolist() == [0, 0, 1]
    assert got["tok"].dense_shape.tolist() == [3, 2]
    np.testing.assert_array_equal(got["emb"], [[0, 0], [1, -1], [2, -2]])
    assert got["gone"].shape == (0,)
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="Feature list 'zz' is required but could not be found"):
        run(nd.parse_single_sequence_example(ex.SerializeToString(), sequence_features={
            "zz": nd.FixedLenSequenceFeature([], nd.float32)}))
