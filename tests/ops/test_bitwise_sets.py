"""``tf.bitwise`` against NumPy, ``tf.sets`` against Python sets (the sparse
results' layout checked against TensorFlow 2.21's for the same inputs), and
``tf.dtypes.saturate_cast`` against NumPy's clip-then-cast."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

tf = nd.compat.v1


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def run(x):
    with nd.Session() as s:
        return s.run(x)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint64])
def test_bitwise_ops_match_numpy(dtype):
    rng = np.random.default_rng(0)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, 12, dtype=dtype, endpoint=True)
    y = rng.integers(info.min, info.max, 12, dtype=dtype, endpoint=True)
    B = tf.bitwise
    np.testing.assert_array_equal(run(B.bitwise_and(x, y)), x & y)
    np.testing.assert_array_equal(run(B.bitwise_or(x, y)), x | y)
    np.testing.assert_array_equal(run(B.bitwise_xor(x, y)), x ^ y)
    np.testing.assert_array_equal(run(B.invert(x)), ~x)
    shift = np.arange(12, dtype=dtype) % 5
    np.testing.assert_array_equal(run(B.left_shift(x, shift)), x << shift)
    np.testing.assert_array_equal(run(B.right_shift(x, shift)), x >> shift)


def test_shifts_out_of_range_are_clamped_as_tf():
    # TF: int8 1 << 9 is 1 << 7 = -128; a negative shift is 0.
    x = nd.constant([1, 1], nd.int8)
    assert run(tf.bitwise.left_shift(x, nd.constant([9, -1], nd.int8))).tolist() == [
        -128, 1]
    with pytest.raises(TypeError):
        tf.bitwise.bitwise_and([1.0], [2.0])


def rows(sp):
    out: dict = {}
    for idx, v in zip(sp.indices.tolist(), sp.values.tolist()):
        out.setdefault(tuple(idx[:-1]), []).append(v)
    return out


A = [[1, 2, 3], [4, 5, 6]]
B = [[2, 3, 9], [6, 6, 7]]


@pytest.mark.parametrize("fn, py", [
    (tf.sets.intersection, lambda a, b: a & b),
    (tf.sets.union, lambda a, b: a | b),
    (tf.sets.difference, lambda a, b: a - b),
    (lambda a, b: tf.sets.set_difference(a, b, aminusb=False), lambda a, b: b - a),
])
def test_dense_set_ops_match_python_sets(fn, py):
    got = run(fn(A, B))
    expected = {(i,): sorted(py(set(a), set(b))) for i, (a, b) in enumerate(zip(A, B))}
    assert rows(got) == {k: v for k, v in expected.items() if v}
    assert got.dense_shape.tolist() == [2, max(len(v) for v in expected.values())]


def test_sparse_sets_and_set_size():
    sp = nd.SparseTensor([[0, 0], [0, 1], [1, 0]], [1, 2, 2], [2, 3])
    assert run(tf.sets.size(sp)).tolist() == [2, 1]
    # TF's results for these inputs.
    d = run(tf.sets.set_difference(sp, [[1, 3], [2, 7]]))
    assert d.indices.tolist() == [[0, 0]] and d.values.tolist() == [2]
    assert d.dense_shape.tolist() == [2, 1]
    d = run(tf.sets.set_difference([[1, 3], [2, 7]], sp))
    assert d.values.tolist() == [3, 7] and d.indices.tolist() == [[0, 0], [1, 0]]
    u = run(tf.sets.union(sp, sp))
    assert u.values.tolist() == [1, 2, 2]


def test_set_ops_of_strings_and_rank_check():
    got = run(tf.sets.intersection([["a", "b"]], [["b", "c"]]))
    assert got.values.tolist() == [b"b"]
    with pytest.raises(ValueError, match="rank >= 2"):
        tf.sets.union([1, 2], [2, 3])


def test_saturate_cast_clamps_before_casting():
    x = np.array([-3.0, 0.5, 300.0, 1e20])
    assert run(tf.dtypes.saturate_cast(x, nd.uint8)).tolist() == [0, 0, 255, 255]
    big = nd.constant([1e10, -1e10], nd.float64)
    assert run(tf.dtypes.saturate_cast(big, nd.int32)).tolist() == [
        np.iinfo(np.int32).max, np.iinfo(np.int32).min]
    assert tf.dtypes.as_dtype("int64") is nd.int64
