"""Segment reductions (sorted, unsorted, sparse), ``bincount`` and
``confusion_matrix``: against NumPy loops, TF's documented results and TF's
error wording, with gradients against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from test_gradients import check_gradient
from test_math_ops import graph, run  # noqa: F401  (graph: a fresh one per test)

import nbdist as nd
from nbdist import errors

RNG = np.random.default_rng(7)
REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min,
          "prod": np.prod}
# What an empty segment holds: sorted ops give 0, unsorted ones the identity.
UNSORTED_EMPTY = {"sum": 0, "max": np.finfo(np.float32).min,
                  "min": np.finfo(np.float32).max, "prod": 1, "mean": 0,
                  "sqrt_n": 0}


def segments_by_loop(data, ids, rows, kind, empty):
    flat_ids = ids.reshape(-1)
    flat = data.reshape((flat_ids.size,) + data.shape[ids.ndim:])
    out = np.full((rows,) + flat.shape[1:], empty, dtype=np.float64)
    for s in range(rows):
        members = flat[flat_ids == s]
        if len(members):
            if kind == "sqrt_n":
                out[s] = members.sum(0) / np.sqrt(len(members))
            else:
                out[s] = REDUCE[kind](members, axis=0)
    return out


@pytest.mark.parametrize("kind", sorted(REDUCE))
def test_sorted_segments_match_a_numpy_loop(kind):
    data = RNG.uniform(-2, 2, (6, 2)).astype(np.float32)
    ids = np.array([0, 0, 2, 2, 2, 4])  # segments 1 and 3 are empty: 0 (prod: 1)
    y = getattr(nd, f"segment_{kind}")(data, ids)
    assert y.shape.as_list() == [5, 2]  # ids known while building: ids[-1] + 1
    want = segments_by_loop(data, ids, 5, kind, 1 if kind == "prod" else 0)
    np.testing.assert_allclose(run(y), want, rtol=1e-5)


@pytest.mark.parametrize("kind", sorted(UNSORTED_EMPTY))
def test_unsorted_segments_match_a_numpy_loop(kind):
    data = RNG.uniform(-2, 2, (2, 3, 2)).astype(np.float32)
    ids = np.array([[3, 0, -1], [0, 3, 1]])  # -1: dropped; segment 2 empty
    y = getattr(nd, f"unsorted_segment_{kind}")(data, ids, 4)
    assert y.shape.as_list() == [4, 2]
    want = segments_by_loop(data, ids, 4, kind, UNSORTED_EMPTY[kind])
    np.testing.assert_allclose(run(y), want, rtol=1e-5)


def test_integer_segments_as_tf():
    got = run([nd.segment_mean([1, 2, 4], [0, 2, 2]),
               nd.segment_min([1, 2, 3], [0, 2, 2]),
               nd.unsorted_segment_min([1, 2, 3], [0, 0, 1], 3),
               nd.unsorted_segment_mean([1, 2, 3], [0, 0, 1], 3)])
    assert got[0].tolist() == [1, 0, 3] and got[0].dtype == np.int32
    assert got[1].tolist() == [1, 0, 2]
    assert got[2].tolist() == [1, 3, np.iinfo(np.int32).max]
    assert got[3].tolist() == [1.5, 3.0, 0.0] and got[3].dtype == np.float64


def test_sparse_segments_gather_rows_first():
    data = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    got = run([nd.sparse_segment_sum(data, [0, 2, 1], [0, 0, 1]),
               nd.sparse_segment_mean(data, [0, 2, 1], [0, 0, 1]),
               nd.sparse_segment_sqrt_n(data, [0, 2], [1, 1], num_segments=3)])
    np.testing.assert_allclose(got[0], [[6, 8], [3, 4]])
    np.testing.assert_allclose(got[1], [[3, 4], [3, 4]])
    np.testing.assert_allclose(got[2], [[0, 0], [6 / np.sqrt(2), 8 / np.sqrt(2)],
                                        [0, 0]], rtol=1e-6)


@pytest.mark.parametrize("ids, message", [
    ([0, 2, 1], "segment ids are not increasing"),
    ([0, 0, -1], "segment ids must be >= 0"),
    ([0, 0], "segment_ids should be the same size as dimension 0 of input."),
])
def test_bad_sorted_ids_fail_with_tf_wording(ids, message):
    ph = nd.placeholder(nd.int32, [None])  # unknown length: checked when run
    with pytest.raises(errors.InvalidArgumentError, match=message):
        run(nd.segment_sum([1.0, 2.0, 3.0], ph), {ph: ids})


def test_bad_unsorted_ids_and_counts_fail_with_tf_wording():
    for fn in (nd.unsorted_segment_max, nd.unsorted_segment_sum):
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"segment_ids\[1\] = 5 is out of range \[0, 3\)"):
            run(fn([1.0, 2.0, 3.0], [0, 5, 1], 3))
    with pytest.raises(ValueError, match="must be non-negative but is -1"):
        nd.unsorted_segment_prod([1.0, 2.0], [0, 1], -1)
    with pytest.raises(ValueError, match="'SegmentSum'"):
        nd.segment_sum(nd.zeros([3, 2]), nd.zeros([2], nd.int32))
    with pytest.raises(ValueError, match="must be rank 1"):
        nd.segment_max(nd.zeros([3, 2]), nd.zeros([3, 1], nd.int32))


def test_unknown_ids_give_an_unknown_number_of_rows():
    ids = nd.placeholder(nd.int32, [None])
    assert nd.segment_sum(nd.zeros([4, 3]), ids).shape.as_list() == [None, 3]


# -- gradients --------------------------------------------------------------------------
SORTED_IDS = [0, 0, 1, 3, 3]
DATA = [[0.5, -1.0], [2.0, 0.3], [1.5, 0.7], [-0.4, 1.1], [0.9, -2.0]]


@pytest.mark.parametrize("kind", sorted(REDUCE))
def test_sorted_segment_gradients_match_finite_differences(kind):
    fn = getattr(nd, f"segment_{kind}")
    check_gradient(lambda d: fn(d, SORTED_IDS), [DATA], atol=1e-5)


@pytest.mark.parametrize("kind", ["sum", "max", "min", "prod", "mean", "sqrt_n"])
def test_unsorted_segment_gradients_match_finite_differences(kind):
    fn = getattr(nd, f"unsorted_segment_{kind}")
    ids = [2, -1, 0, 2, 1]  # row 1 dropped: its gradient is 0
    check_gradient(lambda d: fn(d, ids, 3), [DATA], atol=1e-5)


@pytest.mark.parametrize("data", [[2.0, 0.0, 3.0, 0.5, -1.0],   # one zero
                                  [0.0, 0.0, 3.0, 0.5, -1.0]])  # two zeros
def test_product_gradients_with_zeros_in_a_segment(data):
    check_gradient(lambda d: nd.segment_prod(d, [0, 0, 0, 1, 1]), [data])
    check_gradient(lambda d: nd.unsorted_segment_prod(d, [0, 0, 0, 1, 1], 2),
                   [data])


@pytest.mark.parametrize("name", ["sum", "mean", "sqrt_n"])
def test_sparse_segment_gradients_match_finite_differences(name):
    fn = getattr(nd, f"sparse_segment_{name}")
    check_gradient(lambda d: fn(d, [0, 2, 2, 1], [0, 0, 1, 1]), [DATA[:3]])


def test_ties_share_a_max_gradient():
    x = nd.constant([1.0, 3.0, 3.0, 2.0])
    (g,) = nd.gradients(nd.segment_max(x, [0, 0, 0, 1]), [x])
    assert run(g).tolist() == [0.0, 0.5, 0.5, 1.0]


# -- bincount, confusion_matrix --------------------------------------------------------
def test_bincount_as_tf():
    got = run([nd.bincount([1, 1, 3]), nd.bincount([[1, 2], [3, 1]]),
               nd.bincount([1, 2, 3], minlength=5, maxlength=3),
               nd.bincount([1, 2, 3], weights=[1.0, 2.0, 3.0]),
               nd.bincount(nd.zeros([0], nd.int32)),
               nd.bincount([0, 2], minlength=4, dtype=nd.float32)])
    assert got[0].tolist() == [0, 2, 0, 1] and got[0].dtype == np.int32
    assert got[1].tolist() == [0, 2, 1, 1]
    assert got[2].tolist() == [0, 1, 1]  # 3 is not counted
    assert got[3].tolist() == [0.0, 1.0, 2.0, 3.0] and got[3].dtype == np.float32
    assert got[4].tolist() == []
    assert got[5].tolist() == [1.0, 0.0, 1.0, 0.0]
    with pytest.raises(errors.InvalidArgumentError,
                       match="Input arr must be non-negative!"):
        run(nd.bincount([1, -2, 3]))


def test_confusion_matrix_as_tf():
    got = run([nd.confusion_matrix([1, 2, 4], [2, 2, 4]),
               nd.confusion_matrix([1, 2], [1, 0], num_classes=4,
                                   weights=[2.0, 3.0], dtype=nd.float32),
               nd.confusion_matrix([[1], [2]], [1, 0])])
    want = np.zeros((5, 5), np.int32)
    want[1, 2] = want[2, 2] = want[4, 4] = 1
    assert got[0].tolist() == want.tolist()
    assert got[1].dtype == np.float32
    assert got[1][1, 1] == 2.0 and got[1][2, 0] == 3.0 and got[1].sum() == 5.0
    assert got[2].tolist() == [[0, 0, 0], [0, 1, 0], [1, 0, 0]]


def test_confusion_matrix_checks_its_classes_with_tf_wording():
    with pytest.raises(errors.InvalidArgumentError, match="`predictions` out of bound"):
        run(nd.confusion_matrix([1, 2], [1, 5], num_classes=3))
    with pytest.raises(errors.InvalidArgumentError,
                       match="`labels` contains negative values"):
        run(nd.confusion_matrix([1, -2], [1, 0]))
    with pytest.raises(ValueError, match="incompatible"):
        nd.confusion_matrix([1, 2], [1, 0, 1])


def test_confusion_matrix_takes_an_int64_num_classes():
    with nd.Session() as s:
        out = s.run(nd.confusion_matrix(
            np.array([1, 0], np.int64), np.array([1, 1], np.int64),
            num_classes=nd.constant(2, nd.int64)))
    np.testing.assert_array_equal(out, [[0, 1], [0, 1]])
