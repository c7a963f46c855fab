"""Sequence columns as TF 1.15's ``sequence_feature_column.py`` (behaviours
of TF's ``sequence_feature_column_test.py``, our own tests): values per
time step padded to the longest sequence, each example's length (one past
its last step holding a value), embeddings and multi-hot ids per step, and
``input_layer`` refusing them."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

fc = nd.feature_column
TABLE = np.arange(10, dtype=np.float32).reshape(5, 2)


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def test_sequence_numeric_column_pads_and_counts_steps():
    # Example 0 has steps 0 and 2 (a gap at 1), example 1 step 0, example 2 none.
    sp = nd.SparseTensor([[0, 0], [0, 2], [1, 0]], [1.0, 2.0, 3.0], [3, 3])
    col = fc.sequence_numeric_column(
        "v", default_value=-1.0,
        normalizer_fn=lambda t: nd.SparseTensor(t.indices, t.values * 10,
                                                t.dense_shape))
    x, length = fc.sequence_input_layer({"v": sp}, [col])
    pairs = fc.sequence_numeric_column("p", shape=(2,))
    sp2 = nd.SparseTensor([[0, 0], [0, 1], [0, 2], [1, 0]], [1.0, 2.0, 3.0, 4.0],
                          [2, 4])
    x2, length2 = fc.sequence_input_layer({"p": sp2}, [pairs])
    with nd.Session() as s:
        got, n, got2, n2 = s.run([x, length, x2, length2])
    np.testing.assert_allclose(got[..., 0], [[10, -1, 20], [30, -1, -1],
                                             [-1, -1, -1]])
    assert n.tolist() == [3, 1, 0]
    # Two values a step: 3 values are two steps, the second padded with 0.
    np.testing.assert_allclose(got2, [[[1, 2], [3, 0]], [[4, 0], [0, 0]]])
    assert n2.tolist() == [2, 1]
    assert col._parse_example_spec == {"v": nd.VarLenFeature(nd.float32)}


def test_sequence_embedding_and_indicator_per_step_against_numpy():
    ids = fc.sequence_categorical_column_with_identity("w", 5)
    emb = fc.embedding_column(ids, 2, combiner="sum",
                              initializer=lambda shape, dtype=None,
                              partition_info=None: nd.constant(TABLE))
    # Example 0: step 0 holds ids 1 and 3, step 1 id 4; example 1: step 0 id 0.
    sp = nd.SparseTensor([[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0]],
                         nd.constant([1, 3, 4, 0], nd.int64), [2, 2, 2])
    x, length = fc.sequence_input_layer({"w": sp}, [emb, fc.indicator_column(ids)])
    (table,) = nd.global_variables()
    assert table.op.name == "sequence_input_layer/w_embedding/embedding_weights"
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        got, n = s.run([x, length])
    embedded = [[TABLE[1] + TABLE[3], TABLE[4]], [TABLE[0], [0, 0]]]
    multi_hot = np.zeros((2, 2, 5))
    multi_hot[0, 0, [1, 3]] = multi_hot[0, 1, 4] = multi_hot[1, 0, 0] = 1
    # Columns side by side by name: w_embedding, then w_indicator.
    np.testing.assert_allclose(got, np.concatenate([embedded, multi_hot], -1))
    assert n.tolist() == [2, 1]


def test_sequence_columns_are_refused_where_tensorflow_refuses_them():
    ids = fc.sequence_categorical_column_with_vocabulary_list("w", ["a", "b"])
    sp = nd.SparseTensor([[0, 0]], ["a"], [1, 1])
    with pytest.raises(ValueError, match="must not be of type "
                       "_SequenceCategoricalColumn"):
        fc.input_layer({"w": sp}, [fc.embedding_column(ids, 2)])
    with pytest.raises(ValueError, match="must be of type _SequenceDenseColumn"):
        fc.sequence_input_layer({"x": [[1.0]]}, [fc.numeric_column("x")])
