"""Array ops: wrappers, static shape inference and NumPy kernels, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbdist as nd
from nbdist import errors


@pytest.fixture(autouse=True)
def graph():
    g = nd.Graph()
    with g.as_default():
        yield g


def run(fetches, feed_dict=None):
    with nd.Session() as sess:
        return sess.run(fetches, feed_dict)


def check(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


# -- reshape ---------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [[24], [4, 6], [-1, 4], [2, -1, 2], [-1], [1, 24, 1],
                                   [2, 3, 4]])
def test_reshape(shape):
    t = nd.reshape(X, shape)
    want = X.reshape(shape)
    assert t.op.type == "Reshape" and t.shape.as_list() == list(want.shape)
    check(run(t), want)


def test_reshape_errors():
    with pytest.raises(ValueError, match="Reshape") as e:
        nd.reshape(nd.ones([2, 3]), [4])
    assert "Cannot reshape a tensor with 6 elements to shape [4]" in str(e.value)
    with pytest.raises(ValueError, match="multiple unknown"):
        nd.reshape(nd.ones([2, 3]), [-1, -1])
    with pytest.raises(ValueError, match="divisible"):
        nd.reshape(nd.ones([7]), [2, -1])
    p = nd.placeholder(nd.float32)
    t = nd.reshape(p, [4])
    assert t.shape.as_list() == [4]
    with pytest.raises(errors.InvalidArgumentError, match="6 values") as e:
        run(t, {p: np.ones((2, 3))})
    assert e.value.op is t.op  # as TF: the Operation
    with pytest.raises(errors.InvalidArgumentError, match="multiple of 4"):
        run(nd.reshape(p, [-1, 4]), {p: np.ones(6)})


def test_reshape_shape_inference_sees_through_dynamic_shapes():
    x = nd.placeholder(nd.float32, [None, 28, 28])
    flat = nd.reshape(x, [nd.shape(x)[0], -1])
    assert flat.shape.as_list() == [None, 784]
    assert nd.reshape(x, [-1, 784]).shape.as_list() == [None, 784]
    assert nd.reshape(x, nd.shape(x)).shape.as_list() == [None, 28, 28]
    assert nd.reshape(x, nd.stack([7, -1])).shape.as_list() == [7, None]
    unknown = nd.placeholder(nd.int32, [3])
    assert nd.reshape(x, unknown).shape.as_list() == [None] * 3
    got = run(flat, {x: np.ones((2, 28, 28))})
    assert got.shape == (2, 784)


# -- transpose -------------------------------------------------------------------------
def test_transpose():
    check(run(nd.transpose(X)), X.T)
    t = nd.transpose(X, [1, 0, 2])
    assert t.shape.as_list() == [3, 2, 4] and t.op.name == "transpose_1"
    check(run(t), X.transpose(1, 0, 2))
    p = nd.placeholder(nd.float32)
    t = nd.transpose(p)
    assert t.shape.rank is None
    check(run(t, {p: X}), X.T)
    q = nd.placeholder(nd.float32, [None, 5])
    assert nd.transpose(q).shape.as_list() == [5, None]
    with pytest.raises(ValueError, match="permutation"):
        nd.transpose(X, [0, 0, 1])
    with pytest.raises(ValueError, match="Transpose"):
        nd.transpose(X, [1, 0])
    perm = nd.placeholder(nd.int32, [3])
    assert nd.transpose(X, perm).shape.as_list() == [None] * 3
    with pytest.raises(errors.InvalidArgumentError, match="permutation"):
        run(nd.transpose(X, perm), {perm: [0, 1, 1]})


def test_invert_permutation():
    p = np.array([3, 4, 0, 2, 1], np.int32)
    check(run(nd.invert_permutation(p)), np.argsort(p).astype(np.int32))
    with pytest.raises(errors.InvalidArgumentError, match="permutation"):
        run(nd.invert_permutation([0, 0]))


# -- concat, stack, unstack, split -----------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_concat(axis):
    ys = [X, X * 2, X + 1]
    t = nd.concat(ys, axis)
    want = np.concatenate(ys, axis)
    assert t.op.type == "ConcatV2" and t.shape.as_list() == list(want.shape)
    check(run(t), want)


def test_concat_shapes_and_errors():
    a = nd.placeholder(nd.float32, [None, 3])
    b = nd.placeholder(nd.float32, [2, None])
    assert nd.concat([a, b], 0).shape.as_list() == [None, 3]
    assert nd.concat([a, nd.ones([2, 3])], 0).shape.as_list() == [None, 3]
    assert nd.concat([nd.ones([2, 3]), nd.ones([4, 3])], 0).shape.as_list() == [6, 3]
    ax = nd.placeholder(nd.int32, [])
    assert nd.concat([a, b], ax).shape.as_list() == [None, None]
    with pytest.raises(ValueError, match="concat"):
        nd.concat([nd.ones([2, 3]), nd.ones([2, 4])], 0)
    with pytest.raises(ValueError, match="rank"):
        nd.concat([nd.ones([2, 3]), nd.ones([2])], 0)
    with pytest.raises(ValueError, match="range"):
        nd.concat([nd.ones([2, 3]), nd.ones([2, 3])], 2)
    with pytest.raises(TypeError):
        nd.concat([nd.ones([2]), nd.constant([1, 2])], 0)
    one = nd.concat([X], 0)
    check(run(one), X)
    mixed = nd.concat([nd.constant([1.0]), [2.0, 3.0]], 0)
    check(run(mixed), np.array([1.0, 2.0, 3.0], np.float32))
    p = nd.placeholder(nd.float32)
    with pytest.raises(errors.InvalidArgumentError, match="Dimensions of inputs"):
        run(nd.concat([p, nd.ones([2, 3])], 0), {p: np.ones((2, 2))})


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -4])
def test_stack_and_unstack(axis):
    ys = [X, X + 1]
    t = nd.stack(ys, axis=axis)
    want = np.stack(ys, axis)
    assert t.op.type == "Pack" and t.shape.as_list() == list(want.shape)
    check(run(t), want)
    if axis in (0, 1, 2, -1):
        parts = nd.unstack(X, axis=axis)
        wants = [np.take(X, i, axis=axis) for i in range(X.shape[axis])]
        assert len(parts) == len(wants)
        assert parts[0].op.type == "Unpack"
        for g, w in zip(run(parts), wants):
            check(g, w)


def test_stack_unstack_errors():
    with pytest.raises(ValueError, match="stack"):
        nd.stack([nd.ones([2]), nd.ones([3])])
    with pytest.raises(ValueError, match="axis"):
        nd.stack([nd.ones([2]), nd.ones([2])], axis=2)
    with pytest.raises(ValueError, match="Cannot infer num"):
        nd.unstack(nd.placeholder(nd.float32, [None, 2]))
    parts = nd.unstack(nd.placeholder(nd.float32, [None, 2]), axis=1)
    assert [p.shape.as_list() for p in parts] == [[None], [None]]
    check(run(nd.stack([1, 2, 3])), np.array([1, 2, 3], np.int32))
    s = nd.stack([nd.constant(1.0), 2.0])
    check(run(s), np.array([1.0, 2.0], np.float32))


def test_split():
    parts = nd.split(X, 2, axis=2)
    assert [p.shape.as_list() for p in parts] == [[2, 3, 2]] * 2
    assert parts[0].op.type == "Split"
    for g, w in zip(run(parts), np.split(X, 2, axis=2)):
        check(g, w)
    parts = nd.split(X, [1, -1, 1], axis=-1)
    assert parts[0].op.type == "SplitV"
    assert [p.shape.as_list() for p in parts] == [[2, 3, 1], [2, 3, 2], [2, 3, 1]]
    for g, w in zip(run(parts), np.split(X, [1, 3], axis=-1)):
        check(g, w)
    with pytest.raises(ValueError, match="evenly divide"):
        nd.split(X, 5, axis=1)
    with pytest.raises(ValueError, match="Split"):
        nd.split(X, [1, 1], axis=1)
    p = nd.placeholder(nd.float32, [None, 6])
    parts = nd.split(p, 3, axis=1)
    assert parts[0].shape.as_list() == [None, 2]
    with pytest.raises(errors.InvalidArgumentError, match="evenly divide"):
        run(nd.split(p, 4, axis=0), {p: np.ones((3, 6))})
    single = [nd.split(X, 1, axis=1), nd.split(X, [3], axis=1), nd.unstack(X[:1])]
    for parts, want in zip(run(single), (X, X, X[0])):
        assert len(parts) == 1
        check(parts[0], want)


# -- slice, strided_slice, getitem -----------------------------------------------------
def test_slice():
    t = nd.slice(X, [1, 0, 1], [1, -1, 2])
    assert t.op.type == "Slice" and t.shape.as_list() == [1, 3, 2]
    check(run(t), X[1:2, 0:, 1:3])
    with pytest.raises(ValueError, match="Slice"):
        nd.slice(X, [0, 0, 0], [3, 1, 1])
    b = nd.placeholder(nd.int32, [3])
    t = nd.slice(X, b, [1, 2, -1])
    assert t.shape.as_list() == [1, 2, None]
    check(run(t, {b: [1, 1, 2]}), X[1:2, 1:3, 2:])
    with pytest.raises(errors.InvalidArgumentError, match="Expected size"):
        run(nd.slice(X, b, [1, 3, 1]), {b: [0, 1, 0]})


S = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
INDEX_CASES = [
    1, -1, slice(1, 3), slice(None, None, -1), (slice(None), 0), (Ellipsis, None),
    (None, Ellipsis, 1), (slice(1, 3), 0),
    (slice(None, None, 2), slice(None, None, -2)),
    (slice(-3, -1), slice(1, None)), (Ellipsis, slice(1, 2)), (slice(None), None, 2),
    slice(5, None), slice(-100, 100), (1, 2, 3), (-1, -1, -1), (),
    (slice(None, None, -2), Ellipsis, slice(4, 0, -3)), (None, None), (Ellipsis,),
    (0, Ellipsis, None, 1), (slice(3, 1), 0), (slice(2, -5, -1), 1),
    [1, 2],
]


@pytest.mark.parametrize("index", INDEX_CASES, ids=repr)
def test_getitem_matches_numpy(index):
    t = nd.constant(S)[index]
    want = S[tuple(index) if isinstance(index, list) else index]
    assert t.op.type == "StridedSlice" and t.op.name == "strided_slice"
    assert t.shape.as_list() == list(np.shape(want))
    check(run(t), want)
    p = nd.placeholder(nd.int32, [None, 4, None])
    u = p[tuple(index) if isinstance(index, list) else index]
    assert u.shape.rank == np.ndim(want)
    check(run(u, {p: S}), want)


def test_getitem_with_tensor_indices():
    i = nd.placeholder(nd.int32, [])
    t = nd.constant(S)
    a, b, c = t[i], t[i:], t[:, i, i - 1]
    assert a.shape.as_list() == [4, 5] and b.shape.as_list() == [None, 4, 5]
    got = run([a, b, c], {i: 1})
    check(got[0], S[1])
    check(got[1], S[1:])
    check(got[2], S[:, 1, 0])
    j = nd.placeholder(nd.int64, [])
    check(run(t[j, 1:], {j: -1}), S[-1, 1:])
    check(run(t[:, nd.newaxis, 0]), S[:, None, 0])


def test_getitem_errors():
    t = nd.constant(S)
    with pytest.raises(ValueError, match="out of bounds"):
        _ = t[3]
    with pytest.raises(ValueError, match="strided_slice"):
        _ = t[1, 1, 1, 1]
    for bad in (1.5, "a", True, [[1]], nd.constant(1.0), nd.constant([1, 2])):
        with pytest.raises(TypeError, match="valid indices"):
            _ = t[bad]
    i = nd.placeholder(nd.int32, [])
    with pytest.raises(errors.InvalidArgumentError, match="out of bounds"):
        run(t[i], {i: 3})
    s = nd.placeholder(nd.int32, [])
    with pytest.raises(errors.InvalidArgumentError, match="non-zero"):
        run(t[::s], {s: 0})


def test_strided_slice_wrapper():
    t = nd.strided_slice(S, [0, 1], [3, 4], [2, 1], shrink_axis_mask=0)
    check(run(t), S[0:3:2, 1:4])
    t = nd.strided_slice(S, [1, 0], [0, 2], begin_mask=0, end_mask=1,
                         shrink_axis_mask=0)
    check(run(t), S[1:, 0:2])
    t = nd.strided_slice(S, [1], [2], shrink_axis_mask=1)
    assert t.shape.as_list() == [4, 5]
    check(run(t), S[1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.data())
def test_slicing_property(shape, data):
    x = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    index = []
    n = data.draw(st.integers(0, len(shape)))
    for k in range(n):
        d = shape[k]
        if data.draw(st.booleans()):
            index.append(data.draw(st.integers(-d, d - 1)))
        else:
            index.append(slice(data.draw(st.none() | st.integers(-d - 2, d + 2)),
                               data.draw(st.none() | st.integers(-d - 2, d + 2)),
                               data.draw(st.none() | st.sampled_from([-3, -1, 1,
                                                                      2]))))
    if data.draw(st.booleans()):
        index.insert(data.draw(st.integers(0, len(index))), None)
    index = tuple(index)
    with nd.Graph().as_default():
        t = nd.constant(x)[index]
        got = run(t)
    check(got, x[index])
    assert t.shape.as_list() == list(x[index].shape)


# -- gather ----------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_gather(axis):
    idx = np.array([[0, 1], [1, 0], [1, 1]], np.int64)
    t = nd.gather(X, idx, axis=axis)
    want = np.take(X, idx, axis=axis)
    assert t.op.type == "GatherV2" and t.shape.as_list() == list(want.shape)
    check(run(t), want)
    check(run(nd.gather(X, 1, axis=axis)), np.take(X, 1, axis=axis))


def test_gather_errors_and_strings():
    with pytest.raises(ValueError, match="GatherV2"):
        nd.gather(X, [0], axis=3)
    i = nd.placeholder(nd.int32, [None])
    with pytest.raises(errors.InvalidArgumentError, match=r"indices\[1\] = 5 is not "
                       r"in \[0, 2\)"):
        run(nd.gather(X, i), {i: [0, 5]})
    words = nd.constant(["a", "b", "c"])
    assert run(nd.gather(words, [2, 0])).tolist() == [b"c", b"a"]
    p = nd.placeholder(nd.float32, [None, 7])
    assert nd.gather(p, i, axis=1).shape.as_list() == [None, None]
    assert nd.gather(p, [[1, 2]]).shape.as_list() == [1, 2, 7]


# -- shape, size, rank -----------------------------------------------------------------
def test_shape_size_rank():
    assert nd.shape(X).op.type == "Const" and nd.size(X).op.type == "Const"
    check(run(nd.shape(X)), np.array([2, 3, 4], np.int32))
    check(run(nd.shape(X, out_type=nd.int64)), np.array([2, 3, 4], np.int64))
    check(run(nd.size(X)), np.int32(24))
    check(run(nd.rank(X)), np.int32(3))
    p = nd.placeholder(nd.float32, [None, 3])
    s, n, r = nd.shape(p), nd.size(p, out_type=nd.int64), nd.rank(p)
    assert s.op.type == "Shape" and s.shape.as_list() == [2]
    assert n.op.type == "Size" and n.dtype == nd.int64
    u = nd.placeholder(nd.float32)
    assert nd.rank(u).op.type == "Rank" and nd.shape(u).shape.as_list() == [None]
    got = run([s, n, r, nd.rank(u), nd.shape(u)], {p: np.ones((5, 3)),
                                                   u: np.ones((1, 2, 3, 4))})
    check(got[0], np.array([5, 3], np.int32))
    check(got[1], np.int64(15))
    check(got[2], np.int32(2))
    check(got[3], np.int32(4))
    check(got[4], np.array([1, 2, 3, 4], np.int32))


# -- fill, zeros, ones, *_like ---------------------------------------------------------
def test_fill_zeros_ones():
    t = nd.fill([2, 3], 7.0)
    assert t.op.type == "Fill" and t.shape.as_list() == [2, 3]
    check(run(t), np.full((2, 3), 7.0, np.float32))
    z = nd.zeros([2, 3])
    assert z.op.type == "Const" and z.op.name == "zeros"
    check(run(z), np.zeros((2, 3), np.float32))
    big = nd.ones([100, 100], dtype=nd.int64)
    assert big.op.type == "Fill" and big.shape.as_list() == [100, 100]
    check(run(big), np.ones((100, 100), np.int64))
    check(run(nd.zeros((2,), nd.bool)), np.zeros(2, bool))
    assert run(nd.zeros([2], nd.string)).tolist() == [b"", b""]
    p = nd.placeholder(nd.float32, [None, 3])
    dyn = nd.ones([nd.shape(p)[0], 4], nd.int32)
    assert dyn.op.type == "Fill" and dyn.shape.as_list() == [None, 4]
    check(run(dyn, {p: np.ones((2, 3))}), np.ones((2, 4), np.int32))
    check(run(nd.zeros(nd.shape(p)), {p: np.ones((1, 3))}), np.zeros((1, 3),
                                                                      np.float32))
    with pytest.raises(ValueError, match="scalar"):
        nd.fill([2], [1.0, 2.0])
    d = nd.placeholder(nd.int32, [None])
    with pytest.raises(errors.InvalidArgumentError, match="non-negative"):
        run(nd.fill(d, 1), {d: [2, -1]})


def test_zeros_like_ones_like():
    x = nd.constant(X)
    z, o = nd.zeros_like(x), nd.ones_like(x, dtype=nd.int32)
    check(run(z), np.zeros_like(X))
    check(run(o), np.ones(X.shape, np.int32))
    p = nd.placeholder(nd.float64, [None, 2])
    zl, ol, oc = nd.zeros_like(p), nd.ones_like(p), nd.ones_like(p, dtype=nd.int64)
    assert zl.op.type == "ZerosLike" and ol.op.type == "OnesLike"
    assert oc.shape.as_list() == [None, 2] and oc.dtype == nd.int64
    got = run([zl, ol, oc, nd.zeros_like(p, dtype=nd.bool)], {p: np.ones((3, 2))})
    check(got[0], np.zeros((3, 2)))
    check(got[1], np.ones((3, 2)))
    check(got[2], np.ones((3, 2), np.int64))
    check(got[3], np.zeros((3, 2), bool))


def test_one_hot():
    idx = np.array([[0, 2], [1, 5]], np.int64)
    t = nd.one_hot(idx, 3)
    assert t.dtype == nd.float32 and t.shape.as_list() == [2, 2, 3]
    want = (idx[..., None] == np.arange(3)).astype(np.float32)
    check(run(t), want)  # index 5 is out of range: all off_value
    t = nd.one_hot(idx, 3, on_value=5, off_value=-1, axis=0)
    assert t.dtype == nd.int32 and t.shape.as_list() == [3, 2, 2]
    check(run(t), np.moveaxis(np.where(want > 0, 5, -1), -1, 0).astype(np.int32))
    t = nd.one_hot([1, -1], 2, axis=1, dtype=nd.float64, on_value=2.0)
    check(run(t), np.array([[0.0, 2.0], [0.0, 0.0]]))
    check(run(nd.one_hot([1], 2, on_value=1.0, off_value=0)),
          np.array([[0.0, 1.0]], np.float32))  # 0 takes on_value's dtype
    with pytest.raises(TypeError):
        nd.one_hot([1], 2, on_value=nd.constant(1.0), off_value=nd.constant(0))
    with pytest.raises(TypeError):
        nd.one_hot([1], 2, on_value=nd.constant(1.0), dtype=nd.float64)
    with pytest.raises(ValueError, match="axis"):
        nd.one_hot(idx, 3, axis=4)
    d = nd.placeholder(nd.int32, [])
    assert nd.one_hot(idx, d).shape.as_list() == [2, 2, None]


# -- expand_dims, squeeze, tile, reverse, pad, broadcast_to ----------------------------
@pytest.mark.parametrize("axis", [0, 1, 3, -1, -4])
def test_expand_dims(axis):
    t = nd.expand_dims(X, axis)
    want = np.expand_dims(X, axis)
    assert t.shape.as_list() == list(want.shape)
    check(run(t), want)


def test_expand_dims_and_squeeze_errors():
    with pytest.raises(ValueError, match="ExpandDims"):
        nd.expand_dims(X, 4)
    with pytest.raises(ValueError):
        nd.expand_dims(X)
    x = np.ones((1, 3, 1, 2), np.float32)
    check(run(nd.squeeze(x)), np.squeeze(x))
    t = nd.squeeze(x, [0, -2])
    assert t.shape.as_list() == [3, 2]
    check(run(nd.squeeze(x, axis=2)), np.squeeze(x, 2))
    with pytest.raises(ValueError, match="Can not squeeze dim\\[1\\]"):
        nd.squeeze(x, [1])
    p = nd.placeholder(nd.float32, [None, 1])
    assert nd.squeeze(p).shape.rank is None
    assert nd.squeeze(p, [1]).shape.as_list() == [None]
    with pytest.raises(errors.InvalidArgumentError, match="Can not squeeze"):
        run(nd.squeeze(p, [0]), {p: np.ones((2, 1))})


def test_tile_reverse_broadcast_to():
    t = nd.tile(X, [1, 2, 3])
    assert t.shape.as_list() == [2, 6, 12]
    check(run(t), np.tile(X, [1, 2, 3]))
    with pytest.raises(ValueError, match="Tile"):
        nd.tile(X, [1, 2])
    check(run(nd.tile(nd.constant(3.0), [])), np.float32(3.0))
    check(run(nd.reverse(X, [0, -1])), X[::-1, :, ::-1])
    check(run(nd.reverse(X, [])), X)
    b = nd.broadcast_to(np.arange(3, dtype=np.int32), [2, 3])
    assert b.shape.as_list() == [2, 3]
    check(run(b), np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3)))
    with pytest.raises(ValueError, match="BroadcastTo"):
        nd.broadcast_to(np.arange(3), [2, 4])


@pytest.mark.parametrize("mode", ["CONSTANT", "REFLECT", "SYMMETRIC"])
def test_pad(mode):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    pads = [[1, 2], [2, 0]]
    t = nd.pad(x, pads, mode=mode)
    assert t.shape.as_list() == [6, 6]
    np_mode = {"CONSTANT": "constant", "REFLECT": "reflect",
               "SYMMETRIC": "symmetric"}[mode]
    check(run(t), np.pad(x, pads, mode=np_mode))
    if mode == "CONSTANT":
        t = nd.pad(x, pads, constant_values=-1.0)
        assert t.op.type == "PadV2"
        check(run(t), np.pad(x, pads, constant_values=-1.0))
    if mode == "REFLECT":
        with pytest.raises(errors.InvalidArgumentError, match="paddings"):
            run(nd.pad(x, [[3, 0], [0, 0]], mode=mode))


# -- range, where, boolean_mask --------------------------------------------------------
@pytest.mark.parametrize("args,kwargs,want", [
    ((5,), {}, np.arange(5, dtype=np.int32)),
    ((2, 9, 3), {}, np.arange(2, 9, 3, dtype=np.int32)),
    ((10, 2, -3), {}, np.arange(10, 2, -3, dtype=np.int32)),
    ((0.0, 1.0, 0.25), {}, np.arange(0, 1, 0.25, dtype=np.float32)),
    ((1, 2.5, 0.5), {}, np.array([1.0, 1.5, 2.0], np.float32)),
    ((3,), {"dtype": nd.int64}, np.arange(3, dtype=np.int64)),
    ((4,), {"dtype": nd.float64}, np.arange(4, dtype=np.float64)),
    ((3, 3), {}, np.zeros(0, np.int32)),
])
def test_range(args, kwargs, want):
    t = nd.range(*args, **kwargs)
    assert t.op.type == "Range" and t.shape.as_list() == [len(want)]
    check(run(t), want)


def test_range_errors_and_dynamic():
    with pytest.raises(ValueError, match="Range"):
        nd.range(5, 1)
    with pytest.raises(ValueError, match="delta != 0"):
        nd.range(0, 5, 0)
    n = nd.placeholder(nd.int32, [])
    t = nd.range(n)
    assert t.shape.as_list() == [None]
    check(run(t, {n: 4}), np.arange(4, dtype=np.int32))
    with pytest.raises(errors.InvalidArgumentError, match="start <= limit"):
        run(t, {n: -4})
    assert nd.range(nd.constant(3, dtype=nd.int64)).dtype == nd.int64


def test_where_select():
    c = np.array([[True, False, True], [False, False, True]])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = nd.where(c, x, -x)
    assert t.op.type == "Select" and t.shape.as_list() == [2, 3]
    check(run(t), np.where(c, x, -x))
    check(run(nd.where([True, False], x, 0 * x)), np.array([[0, 1, 2], [0, 0, 0]],
                                                           np.float32))
    check(run(nd.where(True, x, -x)), x)
    with pytest.raises(ValueError, match="Select"):
        nd.where(c, x, np.ones((3, 2), np.float32))
    with pytest.raises(TypeError):
        nd.where(c, nd.constant(x), nd.ones((2, 3), nd.int32))
    with pytest.raises(ValueError, match="both"):
        nd.where(c, x)
    w = nd.where(c)
    assert w.dtype == nd.int64 and w.shape.as_list() == [None, 2]
    check(run(w), np.argwhere(c).astype(np.int64))
    check(run(nd.where(nd.constant([0, 3, 0, 1]))), np.array([[1], [3]], np.int64))
    v2 = nd.where_v2(c[:, :1], x, nd.constant(-1.0))
    assert v2.op.type == "SelectV2" and v2.shape.as_list() == [2, 3]
    check(run(v2), np.where(c[:, :1], x, -1.0).astype(np.float32))


def test_boolean_mask():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = np.array([True, False, True])
    t = nd.boolean_mask(x, m)
    assert t.shape.as_list() == [None, 4]
    check(run(t), x[m])
    m2 = x > 5
    check(run(nd.boolean_mask(x, m2)), x[m2])
    m3 = np.array([False, True, True, False])
    check(run(nd.boolean_mask(x, m3, axis=1)), x[:, m3])


def test_all_array_ops_survive_graph_def_round_trip(graph):
    p = nd.placeholder(nd.float32, [None, 4], name="p")
    outs = [nd.reshape(p, [-1, 2]), nd.transpose(p), nd.concat([p, p], 1),
            nd.stack([p, p]), nd.split(p, 2, axis=1)[1], p[:, 1:3], p[0],
            nd.gather(p, [0]), nd.expand_dims(p, 0), nd.tile(p, [2, 1]),
            nd.one_hot(nd.cast(p[:, 0], nd.int32), 4), nd.where(p > 1.0, p, -p),
            nd.pad(p, [[0, 0], [1, 1]]), nd.squeeze(nd.expand_dims(p, 2), [2])]
    gd = graph.as_graph_def()
    feed = np.arange(8, dtype=np.float32).reshape(2, 4)
    want = run(outs, {p: feed})
    with nd.Graph().as_default() as g2:
        nd.import_graph_def(gd, name="")
        outs2 = [g2.get_tensor_by_name(t.name) for t in outs]
        for a, b in zip(outs, outs2):
            assert a.shape == b.shape
        got = run(outs2, {g2.get_tensor_by_name("p:0"): feed})
    for g, w in zip(got, want):
        check(g, w)
