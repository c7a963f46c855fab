"""TF1's sparse ops beyond the basics (reorder, reshape, slice, split, retain,
fill_empty_rows, softmax, add, maximum/minimum, reduce_max(_sparse),
reduce_sum_sparse, transpose, merge, to_indicator, reset_shape, mask, the
segment ops, eye, from_dense, expand_dims) at the top level and under
``nd.sparse``: results as TF 2.21's tf.compat.v1 gives them for the same
inputs, gradients against finite differences, and every ``tf.sparse`` name."""

from __future__ import annotations

import numpy as np
import pytest
from op_checks import run
from test_gradients import check_gradient

import nbdist as nd

pytestmark = pytest.mark.usefixtures("graph")


def sp():
    return nd.SparseTensor([[0, 0], [0, 2], [1, 1]], [-1.0, 3.0, -2.0], [3, 3])


def parts(v):
    return v.indices.tolist(), v.values.tolist(), v.dense_shape.tolist()


# Each result below is what tf.compat.v1 (TF 2.21) returns for the same call.
@pytest.mark.parametrize("build,want", [
    (lambda: nd.sparse_reorder(nd.SparseTensor([[1, 1], [0, 2], [0, 0]],
                                               [1.0, 2.0, 3.0], [3, 3])),
     ([[0, 0], [0, 2], [1, 1]], [3.0, 2.0, 1.0], [3, 3])),
    (lambda: nd.sparse_reshape(sp(), [9, -1]),
     ([[0, 0], [2, 0], [4, 0]], [-1.0, 3.0, -2.0], [9, 1])),
    (lambda: nd.sparse_slice(sp(), [0, 1], [2, 2]),
     ([[0, 1], [1, 0]], [3.0, -2.0], [2, 2])),
    (lambda: nd.sparse_slice(sp(), [5, 5], [2, 2]), ([], [], [0, 0])),
    (lambda: nd.sparse_retain(sp(), [True, False, True]),
     ([[0, 0], [1, 1]], [-1.0, -2.0], [3, 3])),
    (lambda: nd.sparse_maximum(sp(), nd.SparseTensor([[0, 0], [2, 2]], [5.0, -4.0],
                                                     [3, 3])),
     ([[0, 0], [0, 2], [1, 1], [2, 2]], [5.0, 3.0, 0.0, 0.0], [3, 3])),
    (lambda: nd.sparse_add(sp(), nd.SparseTensor([[0, 0], [2, 2]], [1.0, 4.0],
                                                 [3, 3])),
     ([[0, 0], [0, 2], [1, 1], [2, 2]], [0.0, 3.0, -2.0, 4.0], [3, 3])),
    (lambda: nd.sparse_add(sp(), nd.SparseTensor([[0, 0], [2, 2]], [1.0, 4.0],
                                                 [3, 3]), threshold=0.5),
     ([[0, 2], [1, 1], [2, 2]], [3.0, -2.0, 4.0], [3, 3])),
    (lambda: nd.sparse_reduce_max_sparse(sp(), 1), ([[0], [1]], [3.0, -2.0], [3])),
    (lambda: nd.sparse_reduce_sum_sparse(sp(), 0),
     ([[0], [1], [2]], [-1.0, -2.0, 3.0], [3])),
    (lambda: nd.sparse_transpose(sp()),
     ([[0, 0], [1, 1], [2, 0]], [-1.0, -2.0, 3.0], [3, 3])),
    (lambda: nd.sparse_reset_shape(sp()),
     ([[0, 0], [0, 2], [1, 1]], [-1.0, 3.0, -2.0], [2, 3])),
    (lambda: nd.sparse_merge(
        nd.SparseTensor([[0, 0], [0, 1], [1, 0]], [2, 0, 1], [2, 2]),
        nd.SparseTensor([[0, 0], [0, 1], [1, 0]], [0.5, 0.25, 0.75], [2, 2]), 4),
     ([[0, 0], [0, 2], [1, 1]], [0.25, 0.5, 0.75], [2, 4])),
    (lambda: nd.sparse.eye(2, 3), ([[0, 0], [1, 1]], [1.0, 1.0], [2, 3])),
    (lambda: nd.sparse.from_dense([[0, 1], [2, 0]]),
     ([[0, 1], [1, 0]], [1, 2], [2, 2])),
    (lambda: nd.sparse.expand_dims(sp(), 1),
     ([[0, 0, 0], [0, 0, 2], [1, 0, 1]], [-1.0, 3.0, -2.0], [3, 1, 3])),
], ids=["reorder", "reshape", "slice", "slice_out_of_bounds", "retain", "maximum",
        "add", "add_threshold", "reduce_max_sparse", "reduce_sum_sparse",
        "transpose", "reset_shape", "merge", "eye", "from_dense", "expand_dims"])
def test_sparse_results_match_tf(build, want):
    assert parts(run(build())) == want


def test_split_fill_softmax_reduce_max_indicator_match_tf():
    left, right = run(nd.sparse_split(sp_input=sp(), num_split=2, axis=1))
    assert parts(left) == ([[0, 0], [1, 1]], [-1.0, -2.0], [3, 2])
    assert parts(right) == ([[0, 0]], [3.0], [3, 1])
    filled, empty = run(nd.sparse_fill_empty_rows(sp(), 9.0))
    assert parts(filled) == ([[0, 0], [0, 2], [1, 1], [2, 0]],
                             [-1.0, 3.0, -2.0, 9.0], [3, 3])
    assert empty.tolist() == [False, False, True]
    soft = run(nd.sparse_softmax(sp())).values
    np.testing.assert_allclose(soft, [np.exp(-1) / (np.exp(-1) + np.exp(3)),
                                      np.exp(3) / (np.exp(-1) + np.exp(3)), 1.0],
                               rtol=1e-6)
    # Missing entries take no part; a row with none gives 0.
    assert run(nd.sparse_reduce_max(sp(), 1)).tolist() == [3.0, -2.0, 0.0]
    assert run(nd.sparse_reduce_max(sp())) == 3.0
    ind = nd.SparseTensor([[0, 0], [0, 1], [1, 0]], [2, 0, 2], [2, 2])
    assert run(nd.sparse_to_indicator(ind, 3)).tolist() == [[True, False, True],
                                                             [False, False, True]]


def test_segments_mask_and_dense_add():
    data = np.array([[1.0, 2], [3, 4], [5, 6]])
    assert run(nd.sparse.segment_sum(data, [0, 2, 2], [0, 0, 1])).tolist() == [
        [6, 8], [5, 6]]
    assert run(nd.sparse.segment_mean(data, [0, 2, 2], [0, 0, 2])).tolist() == [
        [3, 4], [0, 0], [5, 6]]
    np.testing.assert_allclose(run(nd.sparse.segment_sqrt_n(data, [0, 2, 2],
                                                            [0, 0, 2])),
                               [[6 / np.sqrt(2), 8 / np.sqrt(2)], [0, 0], [5, 6]])
    sl = nd.IndexedSlices(nd.constant([[1.0], [2.0], [3.0]]), nd.constant([0, 2, 4]),
                          nd.constant([5, 1]))
    masked = nd.sparse_mask(sl, [2])
    values, indices = run([masked.values, masked.indices])
    assert values.tolist() == [[1.0], [3.0]] and indices.tolist() == [0, 4]
    dense = run(nd.sparse.add(sp(), np.ones((3, 3))))
    np.testing.assert_array_equal(dense, np.ones((3, 3)) + [[-1, 0, 3], [0, -2, 0],
                                                            [0, 0, 0]])


def test_sparse_errors():
    with pytest.raises(nd.errors.InvalidArgumentError, match="only one output "
                                                             "dimension may be -1"):
        run(nd.sparse_reshape(sp(), [-1, -1]))
    with pytest.raises(nd.errors.InvalidArgumentError, match="Operands' shapes do "
                                                             "not match"):
        run(nd.sparse_maximum(sp(), nd.SparseTensor([[0, 0]], [1.0], [2, 2])))
    with pytest.raises(TypeError, match="At least one input should be SparseTensor"):
        nd.sparse_add(np.ones(2), np.ones(2))


IND = [[0, 0], [0, 2], [1, 1], [1, 2]]


def _sp(values, ind=IND, shape=(3, 3)):
    return nd.SparseTensor(ind, values, list(shape))


@pytest.mark.parametrize("build,shapes", [
    (lambda v: nd.sparse_reorder(_sp(v, [[1, 1], [0, 2], [1, 2], [0, 0]])).values,
     [(4,)]),
    (lambda v: nd.sparse_softmax(_sp(v)).values, [(4,)]),
    (lambda v, d: nd.sparse_fill_empty_rows(_sp(v), d)[0].values, [(4,), ()]),
    (lambda a, b: nd.sparse_add(_sp(a), _sp(b, [[0, 0], [2, 2]])).values,
     [(4,), (2,)]),
    (lambda v, d: nd.sparse.add(_sp(v), d), [(4,), (3, 3)]),
    (lambda v: nd.sparse_retain(_sp(v), [True, False, True, True]).values, [(4,)]),
    (lambda v: nd.sparse.to_dense(nd.sparse_transpose(_sp(v))), [(4,)]),
    (lambda d: nd.sparse.segment_mean(d, [0, 2, 2], [0, 0, 1]), [(3, 2)]),
], ids=["reorder", "softmax", "fill_empty_rows", "add", "add_dense", "retain",
        "transpose", "segment_mean"])
def test_gradients_match_finite_differences(build, shapes):
    rng = np.random.default_rng(4)
    check_gradient(build, [rng.standard_normal(s) for s in shapes])


# Generated with TF 2.21:
#   /work/tfvenv/bin/python -c "import tensorflow as tf; print(sorted(n for n in
#       dir(tf.compat.v1.sparse) if not n.startswith('_')))"
TF1_SPARSE = [
    'SparseConditionalAccumulator', 'SparseTensor', 'add', 'bincount', 'concat',
    'cross', 'cross_hashed', 'expand_dims', 'eye', 'fill_empty_rows', 'from_dense',
    'mask', 'matmul', 'maximum', 'merge', 'minimum', 'placeholder', 'reduce_max',
    'reduce_max_sparse', 'reduce_sum', 'reduce_sum_sparse', 'reorder',
    'reset_shape', 'reshape', 'retain', 'segment_mean', 'segment_sqrt_n',
    'segment_sum', 'slice', 'softmax', 'sparse_dense_matmul', 'split', 'to_dense',
    'to_indicator', 'transpose',
]


def test_every_tf1_sparse_name_resolves():
    assert [n for n in TF1_SPARSE if not hasattr(nd.sparse, n)] == []


def test_cross_and_cross_hashed_match_tf():
    a = nd.SparseTensor([[0, 0], [1, 0]], ["a", "b"], [2, 1])
    b = nd.SparseTensor([[0, 0], [0, 1], [1, 0]], ["x", "y", "z"], [2, 2])
    assert parts(run(nd.sparse.cross([a, b]))) == (
        [[0, 0], [0, 1], [1, 0]], [b"a_X_x", b"a_X_y", b"b_X_z"], [2, 2])
    # tf.compat.v1.sparse.cross_hashed gives [92, 47, 60] and, for int and dense
    # string features, [859, 604].
    assert run(nd.sparse.cross_hashed([a, b], num_buckets=100)).values.tolist() == [
        92, 47, 60]
    mixed = [nd.constant([[1], [2]], nd.int64), nd.constant([["x"], ["y"]])]
    assert run(nd.sparse.cross_hashed(mixed, num_buckets=1000)).values.tolist() == [
        859, 604]


def test_bincount_matches_tf():
    x = [[1, 2, 2], [0, 0, 3]]
    assert parts(run(nd.sparse.bincount(x))) == ([[0], [1], [2], [3]], [2, 1, 2, 1],
                                                 [4])
    got = run(nd.sparse.bincount(x, weights=[[1.0, 2, 3], [4, 5, 6]], axis=-1))
    assert parts(got) == ([[0, 1], [0, 2], [1, 0], [1, 3]], [1.0, 5.0, 9.0, 6.0],
                          [2, 4])
    got = run(nd.sparse.bincount(x, axis=-1, binary_output=True, minlength=6))
    assert parts(got) == ([[0, 1], [0, 2], [1, 0], [1, 3]], [1, 1, 1, 1], [2, 6])


def test_sets_match_tf():
    a, b = [[1, 2, 3], [4, 5, 6]], [[2, 3, 7], [6, 6, 6]]
    # Each result is tf.compat.v1.sets' for the same inputs.
    assert parts(run(nd.sets.intersection(a, b))) == (
        [[0, 0], [0, 1], [1, 0]], [2, 3, 6], [2, 2])
    assert parts(run(nd.sets.union(a, nd.sparse.from_dense(b)))) == (
        [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0], [1, 1], [1, 2]],
        [1, 2, 3, 7, 4, 5, 6], [2, 4])
    assert parts(run(nd.sets.difference(a, b))) == ([[0, 0], [1, 0], [1, 1]],
                                                    [1, 4, 5], [2, 2])
    assert parts(run(nd.sets.set_difference(a, b, aminusb=False))) == (
        [[0, 0]], [7], [2, 1])
    assert run(nd.sets.size(nd.sparse.from_dense([[1, 1, 0], [3, 4, 5]]))).tolist() \
        == [1, 3]


# tf.compat.v1.serialize_many_sparse(SparseTensor([[0, 0], [1, 2], [1, 3]],
# [1., 2., 3.], [2, 4])) in TF 2.21.
TF_SERIALIZED = [
    [(b'\x08\t\x12\x08\x12\x02\x08\x01\x12\x02\x08\x01"\x08\x00\x00\x00\x00\x00\x00'
     b'\x00\x00'), b'\x08\x01\x12\x04\x12\x02\x08\x01"\x04\x00\x00\x80?',
     b'\x08\t\x12\x04\x12\x02\x08\x01"\x08\x04\x00\x00\x00\x00\x00\x00\x00'],
    [(b'\x08\t\x12\x08\x12\x02\x08\x02\x12\x02\x08\x01"\x10\x02\x00\x00\x00\x00\x00'
     b'\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00'),
     b'\x08\x01\x12\x04\x12\x02\x08\x02"\x08\x00\x00\x00@\x00\x00@@',
     b'\x08\t\x12\x04\x12\x02\x08\x01"\x08\x04\x00\x00\x00\x00\x00\x00\x00'],
]


def test_serialized_sparse_round_trips_through_a_queue_and_reads_tf_bytes():
    sp = nd.SparseTensor([[0, 0], [1, 2], [1, 3]], [1.0, 2.0, 3.0], [2, 4])
    want = ([[0, 0], [1, 2], [1, 3]], [1.0, 2.0, 3.0], [2, 4])
    assert run(nd.serialize_sparse(sp)).shape == (3,)
    q = nd.FIFOQueue(4, [nd.string], shapes=[[3]])
    enqueue = q.enqueue_many([nd.serialize_many_sparse(sp)])
    back = nd.deserialize_many_sparse(q.dequeue_many(2), nd.float32, rank=2)
    assert back.indices.shape.as_list() == [None, 2]
    with nd.Session() as s:
        s.run(enqueue)
        assert parts(s.run(back)) == want
    from_tf = nd.deserialize_many_sparse(nd.constant(TF_SERIALIZED), nd.float32)
    assert parts(run(from_tf)) == want
    with pytest.raises(nd.errors.InvalidArgumentError, match="Requested SparseTensor "
                                                             "of type int32"):
        run(nd.deserialize_many_sparse(nd.constant(TF_SERIALIZED), nd.int32))
