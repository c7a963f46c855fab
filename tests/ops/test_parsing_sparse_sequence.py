"""``tf.io.SparseFeature`` and ``tf.io.parse_sequence_example`` (batched).

Expected values are TF 2.21's for the same protos (tf.compat.v1, graph mode):
a ``SparseFeature`` is a ``SparseTensor`` of dense shape ``[batch] + size``
with sorted indices; ``parse_sequence_example`` returns (context, feature
lists, lengths), dense feature lists zero-padded to the longest."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

io, F = nd.compat.v1.io, nd.train


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def example(idx, val):
    return F.Example(features=F.Features(feature={
        "idx": F.Feature(int64_list=F.Int64List(value=idx)),
        "val": F.Feature(float_list=F.FloatList(value=val))})).SerializeToString()


def sequence(ctx, steps):
    return F.SequenceExample(
        context=F.Features(feature={
            "c": F.Feature(int64_list=F.Int64List(value=[ctx]))}),
        feature_lists=F.FeatureLists(feature_list={
            "s": F.FeatureList(feature=[F.Feature(float_list=F.FloatList(
                value=[v, v])) for v in steps]),
            "v": F.FeatureList(feature=[F.Feature(int64_list=F.Int64List(
                value=list(range(int(v))))) for v in steps])})).SerializeToString()


def test_sparse_feature_batched_single_and_two_dimensional():
    sf = io.SparseFeature("idx", "val", nd.float32, 10)
    batched = io.parse_example([example([3, 1], [30., 10.]), example([], [])],
                               {"sp": sf})
    single = io.parse_single_example(example([5, 2], [5., 2.]), {"sp": sf})
    two_d = io.parse_single_example(example([5, 2], [5., 2.]), {
        "sp": io.SparseFeature(["idx", "idx"], "val", nd.float32, [10, 10])})
    assert set(batched) == {"sp"}  # the index/value keys are not returned
    with nd.Session() as s:
        b, o, t = s.run([batched["sp"], single["sp"], two_d["sp"]])
    assert b.indices.tolist() == [[0, 1], [0, 3]] and b.values.tolist() == [10, 30]
    assert b.dense_shape.tolist() == [2, 10]
    assert o.indices.tolist() == [[2], [5]] and o.dense_shape.tolist() == [10]
    assert t.indices.tolist() == [[2, 2], [5, 5]] and t.dense_shape.tolist() == [10, 10]


def test_parse_sequence_example_pads_and_counts_steps():
    ctx, seqs, lengths = io.parse_sequence_example(
        [sequence(1, [1., 2., 3.]), sequence(2, [4.])],
        context_features={"c": io.FixedLenFeature([], nd.int64)},
        sequence_features={"s": io.FixedLenSequenceFeature([2], nd.float32),
                           "v": io.VarLenFeature(nd.int64)})
    assert seqs["s"].shape.as_list() == [2, None, 2] and set(lengths) == {"s"}
    with nd.Session() as s:
        c, sq, n = s.run([ctx, seqs, lengths])
    assert c["c"].tolist() == [1, 2] and n["s"].tolist() == [3, 1]
    np.testing.assert_array_equal(sq["s"], [[[1, 1], [2, 2], [3, 3]],
                                            [[4, 4], [0, 0], [0, 0]]])
    v = sq["v"]
    assert v.dense_shape.tolist() == [2, 3, 4]
    assert v.indices.tolist() == [[0, 0, 0], [0, 1, 0], [0, 1, 1], [0, 2, 0],
                                  [0, 2, 1], [0, 2, 2], [1, 0, 0], [1, 0, 1],
                                  [1, 0, 2], [1, 0, 3]]
    assert v.values.tolist() == [0, 0, 1, 0, 1, 2, 0, 1, 2, 3]


def test_missing_required_feature_list_is_an_error():
    _, seqs, _ = io.parse_sequence_example(
        [sequence(1, [1.])],
        sequence_features={"absent": io.FixedLenSequenceFeature([], nd.float32)})
    with nd.Session() as s, pytest.raises(nd.errors.InvalidArgumentError,
                                          match="Feature list 'absent' is required"):
        s.run(seqs["absent"])
