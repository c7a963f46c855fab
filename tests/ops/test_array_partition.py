"""dynamic_partition/dynamic_stitch, unique_with_counts, setdiff1d,
searchsorted, and the sequence ops (reverse_sequence, sequence_mask, roll,
linspace, meshgrid, repeat, unravel_index, broadcast shapes, edit_distance,
random_crop): values against NumPy or TF's documented results (checked with TF
2.21's tf.compat.v1), gradients against finite differences, TF's wording."""

from __future__ import annotations

import numpy as np
import pytest
from op_checks import dynamic, flat, run
from test_gradients import check_gradient

import nbdist as nd

pytestmark = pytest.mark.usefixtures("graph")


def test_dynamic_partition_and_stitch_round_trip():
    data = np.arange(12.0).reshape(6, 2)
    parts = np.array([2, 0, 2, 1, 0, 2], np.int32)
    outs = nd.dynamic_partition(data, parts, 3)
    assert [o.shape.as_list() for o in outs] == [[None, 2]] * 3
    got = run(outs)
    for i in range(3):
        np.testing.assert_array_equal(got[i], data[parts == i])
    pos = nd.dynamic_partition(np.arange(6, dtype=np.int32), parts, 3)
    back = nd.dynamic_stitch(pos, outs)
    np.testing.assert_array_equal(run(back), data)
    assert nd.dynamic_stitch([[0, 2], [1]], [[1, 3], [2]]).shape.as_list() == [3]


def test_dynamic_stitch_later_wins_and_gaps_are_zero():
    got = run(nd.dynamic_stitch([[0, 1], [1, 4]], [[1.0, 2.0], [3.0, 5.0]]))
    np.testing.assert_array_equal(got, [1, 3, 0, 0, 5])
    got = run(nd.parallel_dynamic_stitch([[0, 3]], [[1.0, 2.0]]))
    np.testing.assert_array_equal(got, [1, 0, 0, 2])


def test_partition_and_stitch_errors_use_tf_wording():
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"partitions\[1\] = 3 is not in \[0, 2\)"):
        run(nd.dynamic_partition([1, 2, 3], dynamic(np.int32([0, 3, 1])), 2))
    with pytest.raises(TypeError, match="'partitions' of 'DynamicPartition' Op has "
                                        "type int64"):
        nd.dynamic_partition([1, 2], nd.constant([0, 1], nd.int64), 2)
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 2 and 3"):
        nd.dynamic_partition([1, 2, 3], [0, 1], 2)
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"indices\[1\] is out of range"):
        run(nd.dynamic_stitch([dynamic(np.int32([0, -1]))], [[1.0, 2.0]]))


@pytest.mark.parametrize("build,shapes", [
    (lambda x: flat(*nd.dynamic_partition(x, [1, 0, 1], 2)), [(3, 2)]),
    (lambda a, b: nd.dynamic_stitch([[2, 0], [1]], [a, b]), [(2, 2), (1, 2)]),
    (lambda x: nd.reverse_sequence(x, [2, 3], seq_axis=1, batch_axis=0), [(2, 3)]),
    (lambda x: nd.roll(x, [1, -1], [0, 1]), [(2, 3)]),
    (lambda x: nd.repeat(x, [2, 1], axis=1), [(3, 2)]),
], ids=["partition", "stitch", "reverse_sequence", "roll", "repeat"])
def test_gradients_match_finite_differences(build, shapes):
    rng = np.random.default_rng(2)
    check_gradient(build, [rng.standard_normal(s) for s in shapes])


def test_linspace_gradient():
    check_gradient(lambda a, b: nd.linspace(a, b, 4), [0.5, 2.0])


def test_unique_with_counts_and_setdiff1d():
    y, idx, count = run(nd.unique_with_counts([4, 1, 4, 3, 3, 3]))
    assert (y.tolist(), idx.tolist(), count.tolist()) == (
        [4, 1, 3], [0, 1, 0, 2, 2, 2], [2, 1, 3])
    out, idx = run(nd.setdiff1d([1, 2, 2, 3, 1], [3]))
    assert (out.tolist(), idx.tolist()) == ([1, 2, 2, 1], [0, 1, 2, 4])


def test_searchsorted_both_sides_per_row():
    seq = np.array([[1.0, 2, 3], [1, 1, 1]])
    vals = np.array([[2.0, 2.5], [1, 0]])
    assert run(nd.searchsorted(seq, vals, side="right")).tolist() == [[2, 2], [3, 0]]
    assert run(nd.searchsorted(seq, vals)).tolist() == [[1, 2], [0, 0]]
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="Leading dim_size of both tensors must match."):
        run(nd.searchsorted(dynamic(seq), dynamic([[2.0]])))


def test_reverse_sequence_values_and_errors():
    x = np.arange(12).reshape(3, 4)
    got = run(nd.reverse_sequence(x, [4, 0, 2], seq_axis=1, batch_axis=0))
    np.testing.assert_array_equal(got, [[3, 2, 1, 0], [4, 5, 6, 7], [9, 8, 10, 11]])
    got = run(nd.reverse_sequence(x.T, [4, 0, 2], seq_dim=0, batch_dim=1))
    np.testing.assert_array_equal(got.T, [[3, 2, 1, 0], [4, 5, 6, 7],
                                          [9, 8, 10, 11]])
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 3 and 2"):
        nd.reverse_sequence(x, [1, 2], seq_axis=1, batch_axis=0)
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"seq_lens\(1\) > input.dims\(1\)"):
        run(nd.reverse_sequence(dynamic(x[:2]), dynamic([1, 5]), 1, 0))


def test_sequence_mask_shapes_and_dtype():
    m = nd.sequence_mask([[1, 2]], 3, dtype=nd.float32)
    assert m.shape.as_list() == [1, 2, 3] and m.dtype == nd.float32
    np.testing.assert_array_equal(run(m), [[[1, 0, 0], [1, 1, 0]]])
    assert run(nd.sequence_mask([0, 2])).tolist() == [[False, False], [True, True]]


def test_roll_linspace_meshgrid_repeat_unravel():
    x = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(run(nd.roll(x, [1, -1], [0, 1])),
                                  np.roll(x, [1, -1], [0, 1]))
    lin = nd.linspace(2.0, 5.0, 7)
    assert lin.shape.as_list() == [7]
    np.testing.assert_allclose(run(lin), np.linspace(2, 5, 7), rtol=1e-6)
    assert run(nd.lin_space(2.0, 5.0, 1)).tolist() == [2.0]
    for indexing in ("xy", "ij"):
        got = run(nd.meshgrid([1, 2, 3], [4, 5], [6], indexing=indexing))
        for g, w in zip(got, np.meshgrid([1, 2, 3], [4, 5], [6], indexing=indexing)):
            np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(run(nd.repeat(x, 2)), np.repeat(x, 2))
    np.testing.assert_array_equal(run(nd.repeat(x, [1, 0, 2], axis=1)),
                                  np.repeat(x, [1, 0, 2], axis=1))
    assert run(nd.unravel_index([5, 7], [3, 4])).tolist() == [[1, 1], [1, 3]]


def test_broadcast_shapes_static_and_dynamic():
    assert nd.broadcast_static_shape(nd.TensorShape([2, 1]),
                                     nd.TensorShape([3])).as_list() == [2, 3]
    with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting\. "
                                         r"Two shapes are compatible"):
        nd.broadcast_static_shape(nd.TensorShape([2]), nd.TensorShape([3]))
    assert run(nd.broadcast_dynamic_shape([2, 1], [4, 1, 3])).tolist() == [4, 2, 3]
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"Incompatible shapes: \[2\] vs. \[3\]"):
        run(nd.broadcast_dynamic_shape(dynamic([2]), dynamic([3])))


def test_edit_distance_matches_tf():
    # tf.compat.v1.edit_distance gives [1.0, 0.5] normalised, [1.0, 1.0] not.
    h = nd.SparseTensor([[0, 0], [0, 1], [1, 0]], ["a", "b", "c"], [2, 2])
    t = nd.SparseTensor([[0, 0], [1, 0], [1, 1]], ["a", "c", "d"], [2, 2])
    assert run(nd.edit_distance(h, t)).tolist() == [1.0, 0.5]
    assert run(nd.edit_distance(h, t, normalize=False)).tolist() == [1.0, 1.0]


def test_random_crop_is_a_slice_and_checks_size():
    x = np.arange(30).reshape(5, 6)
    crop = nd.random_crop(x, [2, 3], seed=1)
    assert crop.shape.as_list() == [2, 3]
    got = run(crop)
    r, c = np.argwhere(x == got[0, 0])[0]
    np.testing.assert_array_equal(got, x[r:r + 2, c:c + 3])
    with pytest.raises(nd.errors.InvalidArgumentError, match="Need value.shape >= "
                                                             "size"):
        run(nd.random_crop(dynamic(np.ones((2, 2))), [3, 2]))


def test_partitions_and_indices_given_as_numpy_int64_arrays():
    # NumPy's default integer arrays, as TF converts them for these int32 inputs.
    parts = nd.dynamic_partition(np.arange(6.0).reshape(3, 2), np.array([1, 0, 1]), 2)
    stitched = nd.dynamic_stitch([np.array([0, 2]), np.array([1])],
                                 [np.array([1.0, 3.0]), np.array([2.0])])
    with nd.Session() as s:
        p0, p1, st = s.run([parts[0], parts[1], stitched])
    np.testing.assert_array_equal(p0, [[2.0, 3.0]])
    np.testing.assert_array_equal(p1, [[0.0, 1.0], [4.0, 5.0]])
    np.testing.assert_array_equal(st, [1.0, 2.0, 3.0])
