"""space_to_batch(_nd)/batch_to_space(_nd), space_to_depth/depth_to_space and
extract_image_patches: values as TF 2.21 gives them (checked with
tf.compat.v1), round trips, static shapes, gradients against finite differences
and TF's error wording."""

from __future__ import annotations

import numpy as np
import pytest
from op_checks import dynamic, run
from test_gradients import check_gradient

import nbdist as nd

pytestmark = pytest.mark.usefixtures("graph")

IMG = np.arange(16.0).reshape(1, 4, 4, 1)


def test_space_to_depth_and_back_match_tf():
    d = nd.space_to_depth(IMG, 2)
    assert d.shape.as_list() == [1, 2, 2, 4]
    np.testing.assert_array_equal(run(d)[0], [[[0, 1, 4, 5], [2, 3, 6, 7]],
                                              [[8, 9, 12, 13], [10, 11, 14, 15]]])
    np.testing.assert_array_equal(run(nd.depth_to_space(d, 2)), IMG)
    with pytest.raises(ValueError, match="Dimension size must be evenly divisible "
                                         "by 4 but is 3"):
        nd.depth_to_space(np.ones((1, 2, 2, 3)), 2)
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="Image width 3 and height 3 should be divisible by "
                             "block_size: 2"):
        run(nd.space_to_depth(dynamic(np.ones((1, 3, 3, 1))), 2))


def test_space_to_batch_round_trip_matches_tf():
    x = np.arange(8).reshape(1, 2, 2, 2)
    b = nd.space_to_batch(x, [[0, 0], [0, 0]], 2)
    assert b.shape.as_list() == [4, 1, 1, 2]
    np.testing.assert_array_equal(run(b).reshape(4, 2), [[0, 1], [2, 3], [4, 5],
                                                         [6, 7]])
    np.testing.assert_array_equal(run(nd.batch_to_space(b, [[0, 0], [0, 0]], 2)), x)
    y = np.arange(2 * 3 * 5 * 2).reshape(2, 3, 5, 2)
    pads = [[1, 0], [0, 1]]
    nd_b = nd.space_to_batch_nd(y, [2, 3], pads)
    assert nd_b.shape.as_list() == [12, 2, 2, 2]
    back = nd.batch_to_space_nd(nd_b, [2, 3], pads)
    np.testing.assert_array_equal(run(back), y)
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"padded_shape\[0\]=3 is not divisible by "
                             r"block_shape\[0\]=2"):
        run(nd.space_to_batch_nd(dynamic(np.ones((1, 3, 3, 1))), [2, 2],
                                 [[0, 0], [0, 0]]))
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"cropped_shape\[0\]=-1 must be non-negative"):
        run(nd.batch_to_space_nd(dynamic(np.ones((4, 1, 1, 1))), [2, 2],
                                 [[0, 3], [0, 0]]))


def test_required_paddings_make_the_shape_divisible():
    pads, crops = run(nd.required_space_to_batch_paddings([5, 7], [2, 3],
                                                         [[1, 0], [0, 0]]))
    assert pads.tolist() == [[1, 0], [0, 2]] and crops.tolist() == [[0, 0], [0, 2]]


@pytest.mark.parametrize("padding,ksize,stride,rate", [
    ("SAME", 3, 1, 2), ("VALID", 2, 2, 1), ("SAME", 2, 3, 1)])
def test_extract_image_patches_reads_the_right_pixels(padding, ksize, stride, rate):
    x = np.arange(2 * 5 * 4 * 2, dtype=np.float64).reshape(2, 5, 4, 2)
    out = nd.extract_image_patches(x, [1, ksize, ksize, 1], [1, stride, stride, 1],
                                   [1, rate, rate, 1], padding)
    got = run(out)
    assert out.shape.as_list() == list(got.shape)
    eff = ksize + (ksize - 1) * (rate - 1)
    top = left = 0
    if padding == "SAME":
        top = max(0, (got.shape[1] - 1) * stride + eff - 5) // 2
        left = max(0, (got.shape[2] - 1) * stride + eff - 4) // 2
    padded = np.pad(x, [(0, 0), (top, 10), (left, 10), (0, 0)])
    for r in range(got.shape[1]):
        for c in range(got.shape[2]):
            rows = r * stride + np.arange(ksize) * rate
            cols = c * stride + np.arange(ksize) * rate
            want = padded[:, rows][:, :, cols].reshape(2, -1)
            np.testing.assert_array_equal(got[:, r, c], want)


def test_extract_image_patches_matches_tf():
    got = run(nd.extract_image_patches(IMG, [1, 3, 3, 1], [1, 1, 1, 1],
                                       [1, 2, 2, 1], "SAME"))
    np.testing.assert_array_equal(got[0, 0, 0], [0, 0, 0, 0, 0, 2, 0, 8, 10])
    np.testing.assert_array_equal(got[0, 3, 3], [5, 7, 0, 13, 15, 0, 0, 0, 0])


@pytest.mark.parametrize("build,shape", [
    (lambda x: nd.space_to_depth(x, 2), (1, 2, 4, 2)),
    (lambda x: nd.depth_to_space(x, 2), (1, 1, 2, 8)),
    (lambda x: nd.space_to_batch_nd(x, [2, 2], [[1, 1], [0, 2]]), (1, 2, 2, 1)),
    (lambda x: nd.batch_to_space_nd(x, [2, 1], [[1, 0], [0, 0]]), (4, 2, 1, 1)),
    (lambda x: nd.extract_image_patches(x, [1, 2, 2, 1], [1, 1, 2, 1],
                                        [1, 1, 1, 1], "SAME"), (2, 3, 3, 1)),
], ids=["s2d", "d2s", "s2b", "b2s", "patches"])
def test_gradients_match_finite_differences(build, shape):
    check_gradient(build, [np.random.default_rng(3).standard_normal(shape)])


def test_extract_volume_patches_matches_tf():
    x = np.arange(2 * 3 * 4 * 5 * 2, dtype=np.float32).reshape(2, 3, 4, 5, 2)
    valid = nd.extract_volume_patches(x, [1, 2, 2, 3, 1], [1, 1, 2, 2, 1], "VALID")
    same = nd.extract_volume_patches(x, [1, 2, 2, 3, 1], [1, 1, 2, 2, 1], "SAME")
    assert valid.shape.as_list() == [2, 2, 2, 2, 24]
    assert same.shape.as_list() == [2, 3, 2, 3, 24]
    v, s = run([valid, same])
    # The slices TF 2.21 gives for the same call.
    assert v[1, 0, 1, 1, :8].tolist() == [144, 145, 146, 147, 148, 149, 154, 155]
    assert s[1, 0, 1, 1, :8].tolist() == [142, 143, 144, 145, 146, 147, 152, 153]
    assert s[0, -1, -1, -1, -6:].tolist() == [0] * 6
