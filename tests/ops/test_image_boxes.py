"""nd.image's box and window functions: crop_and_resize (values and both
gradients), non-max suppression in its five forms, draw_bounding_boxes,
extract_glimpse, extract_image_patches (and its gradient) and
sample_distorted_bounding_box. Expected numbers marked "TF" were produced by
TensorFlow 2.21's tf.compat.v1.image on the same inputs (RandomState(0))."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

I = nd.image


@pytest.fixture(autouse=True)
def _fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


def inputs():
    """The oracle's inputs, drawn in its order."""
    rs = np.random.RandomState(0)
    img = rs.rand(2, 6, 7, 3).astype(np.float32)
    boxes = np.array([[0.1, 0.2, 0.75, 0.9], [-0.2, 0.3, 0.5, 1.2],
                      [0.55, 0.45, 0.15, 0.1]], np.float32)
    w = rs.rand(3, 4, 5, 3).astype(np.float32)
    big = rs.rand(2, 32, 32, 3).astype(np.float32)
    rs.randn(*big.shape)
    rs.rand(1, 96, 96, 1)
    nb = rs.rand(12, 4).astype(np.float32)
    nb[:, 2:] += nb[:, :2]
    ns = rs.rand(12).astype(np.float32)
    cb = rs.rand(2, 6, 1, 4).astype(np.float32)
    cb[..., 2:] += cb[..., :2] * 0.5
    cs = rs.rand(2, 6, 3).astype(np.float32)
    return dict(img=img, boxes=boxes, ind=np.array([0, 1, 1], np.int32), w=w,
                nb=nb, ns=ns, cb=cb, cs=cs)


# -- crop_and_resize -------------------------------------------------------------------
def test_crop_and_resize_samples_the_box_corners_and_extrapolates():
    img = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    # The whole image at 2x2 is its four corners; a box hanging off the top-left
    # samples extrapolation_value there; nearest rounds half away from zero.
    out = run(I.crop_and_resize(img, [[0, 0, 1, 1], [-1, -1, 1, 1]], [0, 0], [2, 3],
                                extrapolation_value=-5.0))
    np.testing.assert_allclose(out[0, :, :, 0], [[0, 1.5, 3], [12, 13.5, 15]])
    np.testing.assert_allclose(out[1, :, :, 0], [[-5, -5, -5], [-5, 12, 15]])
    near = run(I.crop_and_resize(img, [[0, 0, 1, 1]], [0], [2, 3], method="nearest"))
    np.testing.assert_array_equal(near[0, :, :, 0], [[0, 2, 3], [12, 14, 15]])
    one = run(I.crop_and_resize(img, [[0, 0, 1, 1]], [0], [1, 1]))
    assert one.ravel().tolist() == [7.5]            # a 1-pixel crop: the centre
    with pytest.raises(nd.errors.InvalidArgumentError, match="box_index"):
        run(I.crop_and_resize(img, [[0, 0, 1, 1]], [1], [2, 2]))


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_crop_and_resize_gradients(method):
    d = inputs()
    ti, tb = nd.constant(d["img"]), nd.constant(d["boxes"])
    out = I.crop_and_resize(ti, tb, d["ind"], [4, 5], method=method,
                            extrapolation_value=-1.0)
    gi, gb = run(nd.gradients(nd.reduce_sum(out * d["w"]), [ti, tb]))
    # TF: the boxes' gradient is the bilinear one for both methods.
    np.testing.assert_allclose(gb, [
        [-6.5056458, 1.3951503, 0.8716627, 4.4935837],
        [0.8205571, 4.440464, -3.364876, 0.4750997],
        [7.1430936, 8.249818, 0.7745786, 2.0300581]], rtol=1e-5, atol=1e-5)
    # The crop is linear in the image: the gradient is its adjoint.
    v = np.random.RandomState(1).rand(*d["img"].shape).astype(np.float32)
    crop_v = run(I.crop_and_resize(v, d["boxes"], d["ind"], [4, 5], method=method,
                                   extrapolation_value=0.0))
    np.testing.assert_allclose(np.sum(gi * v), np.sum(crop_v * d["w"]), rtol=1e-5)


def test_crop_and_resize_box_gradient_matches_finite_differences():
    d = inputs()
    tb = nd.placeholder(nd.float64, [3, 4])
    out = I.crop_and_resize(d["img"], nd.cast(tb, nd.float32), d["ind"], [4, 5])
    loss = nd.reduce_sum(out * d["w"])
    (g,) = nd.gradients(loss, [tb])
    b = d["boxes"].astype(np.float64)
    with nd.Session() as s:
        got = s.run(g, {tb: b})
        eps = 1e-3
        for idx in [(0, 0), (0, 3), (1, 1), (2, 2)]:
            up, down = b.copy(), b.copy()
            up[idx] += eps
            down[idx] -= eps
            num = (s.run(loss, {tb: up}) - s.run(loss, {tb: down})) / (2 * eps)
            assert got[idx] == pytest.approx(num, rel=2e-2, abs=2e-2)


# -- non-max suppression ---------------------------------------------------------------
def test_non_max_suppression_forms_match_tf():
    d = inputs()
    nb, ns = d["nb"], d["ns"]
    padded, n = I.non_max_suppression_padded(nb, ns, 8, 0.3,
                                             pad_to_max_output_size=True)
    idx, sc = I.non_max_suppression_with_scores(nb, ns, 6, 0.5, soft_nms_sigma=0.5)
    got = run([I.non_max_suppression(nb, ns, 6, 0.3),
               I.non_max_suppression(nb, ns, 10, 0.5, score_threshold=0.4),
               padded, n, idx, sc])
    assert got[0].tolist() == [7, 1, 11, 3, 8, 6]                          # TF
    assert got[1].tolist() == [7, 1, 11, 3, 0, 8, 6, 9, 10]                # TF
    assert got[2].tolist() == [7, 1, 11, 3, 8, 6, 10, 2] and got[3] == 8   # TF
    assert got[4].tolist() == [7, 1, 11, 3, 8, 0]                          # TF
    np.testing.assert_allclose(got[5], [0.9792916, 0.8287872, 0.6360787,
                                        0.6012448, 0.5198466, 0.4873862], rtol=1e-6)
    assert padded.shape.as_list() == [8]


def test_non_max_suppression_basics_and_overlaps():
    boxes = [[0, 0, 1, 1], [1, 1.1, 0, 0.1], [0, 2, 1, 3], [5, 5, 5, 5]]
    # Corners in any order; IoU(0, 1) = 0.9/1.1 > 0.5; a zero-area box overlaps
    # nothing; equal scores keep the lower index first.
    got = run(I.non_max_suppression(boxes, [0.9, 0.8, 0.7, 0.7], 10))
    assert got.tolist() == [0, 2, 3]
    assert run(I.non_max_suppression(boxes, [0.9, 0.8, 0.7, 0.7], 10,
                                     iou_threshold=0.95)).tolist() == [0, 1, 2, 3]
    ov = np.array([[1, 0.7, 0.1], [0.7, 1, 0.6], [0.1, 0.6, 1]], np.float32)
    assert run(I.non_max_suppression_overlaps(ov, [0.5, 0.9, 0.4], 3, 0.65)
               ).tolist() == [1, 2]          # 0 overlaps 1 by 0.7 > 0.65
    with pytest.raises(nd.errors.InvalidArgumentError, match="iou_threshold"):
        run(I.non_max_suppression(boxes, [1.0] * 4, 2, iou_threshold=1.5))


def test_combined_non_max_suppression_matches_tf():
    d = inputs()
    b, s, c, n = run(I.combined_non_max_suppression(d["cb"], d["cs"], 3, 5, 0.4,
                                                    0.1))
    np.testing.assert_allclose(s, [[0.9399885, 0.9399335, 0.6383669, 0.6366359,
                                    0.5971106], [0.9074392, 0.7931841, 0.7179943,
                                                 0.6972172, 0.6062753]], rtol=1e-6)
    assert c.tolist() == [[1, 2, 0, 1, 1], [1, 2, 1, 0, 0]] and n.tolist() == [5, 5]
    assert b.shape == (2, 5, 4) and b.min() >= 0 and b.max() <= 1   # clipped


# -- drawing, glimpses, patches --------------------------------------------------------
def test_draw_bounding_boxes_outlines_in_tf_colors():
    boxes = [[[0.1, 0.2, 0.6, 0.9], [0.5, -0.2, 1.3, 0.4], [0.0, 0.0, 1.0, 1.0]]]
    out = run(I.draw_bounding_boxes(np.zeros((1, 7, 8, 3), np.float32), boxes))
    # TF: box 0 yellow, 1 blue (its sides off the image not drawn), 2 red.
    red = [[1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0, 1, 1], [1, 1, 0, 0, 0, 0, 1, 1],
           [1, 0, 0, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0, 0, 1],
           [1, 1, 1, 1, 1, 1, 1, 1]]
    np.testing.assert_array_equal(out[0, :, :, 0], red)
    blue = np.zeros((7, 8))
    blue[3, 1:3] = blue[4:6, 2] = 1
    np.testing.assert_array_equal(out[0, :, :, 2], blue)
    gray = run(I.draw_bounding_boxes(np.zeros((1, 7, 8, 1), np.float32),
                                     [[[0.1, 0.2, 0.6, 0.9]]], colors=[[0.3, 0.6, 0.9,
                                                                        1.0]]))
    assert set(np.unique(gray).tolist()) == {0.0, np.float32(0.3)}


def test_extract_glimpse_windows_with_zero_fill():
    img = inputs()["img"]
    out = run(I.extract_glimpse(img, [3, 4], [[1.0, 2.0], [2.5, 3.7]], centered=False,
                                normalized=False, uniform_noise=False))
    # Top-left corner at (offset - size / 2), truncated toward zero: (-0.5, 0)
    # starts at (0, 0).
    np.testing.assert_array_equal(out[0], img[0, 0:3, 0:4])
    np.testing.assert_array_equal(out[1], img[1, 1:4, 1:5])
    centred = run(I.extract_glimpse(img, [2, 2], [[0.0, 0.0]] * 2))
    np.testing.assert_array_equal(centred, img[:, 2:4, 2:4])     # (3, 3.5) - 1
    noisy = run(I.extract_glimpse(img, [4, 4], [[-1.0, -1.0]] * 2))
    assert img.min() <= noisy.min() and noisy.max() <= img.max()


def ref_patches(x, k, s, r, padding):
    n, h, w, d = x.shape
    keff = [k[i] + (k[i] - 1) * (r[i] - 1) for i in (0, 1)]
    if padding == "SAME":
        out = [-(-h // s[0]), -(-w // s[1])]
        pad = [max((out[0] - 1) * s[0] + keff[0] - h, 0) // 2,
               max((out[1] - 1) * s[1] + keff[1] - w, 0) // 2]
    else:
        out = [(h - keff[0]) // s[0] + 1, (w - keff[1]) // s[1] + 1]
        pad = [0, 0]
    big = np.zeros((n, h + 2 * keff[0], w + 2 * keff[1], d), x.dtype)
    big[:, keff[0]:keff[0] + h, keff[1]:keff[1] + w] = x
    res = np.zeros((n, out[0], out[1], k[0], k[1], d), x.dtype)
    for i in range(out[0]):
        for j in range(out[1]):
            for a in range(k[0]):
                for b in range(k[1]):
                    y = i * s[0] + a * r[0] - pad[0] + keff[0]
                    xx = j * s[1] + b * r[1] - pad[1] + keff[1]
                    res[:, i, j, a, b] = big[:, y, xx]
    return res.reshape(n, out[0], out[1], -1)


@pytest.mark.parametrize("k,s,r,padding", [((3, 2), (2, 1), (1, 2), "SAME"),
                                           ((2, 3), (1, 2), (2, 1), "VALID")])
def test_extract_image_patches_and_gradient(k, s, r, padding):
    img = inputs()["img"]
    x = nd.constant(img)
    p = I.extract_image_patches(x, [1, *k, 1], [1, *s, 1], [1, *r, 1], padding)
    ref = ref_patches(img, k, s, r, padding)
    assert p.shape.as_list() == list(ref.shape)
    u = np.random.RandomState(2).rand(*ref.shape).astype(np.float32)
    got, g = run([p, nd.gradients(nd.reduce_sum(p * u), x)[0]])
    np.testing.assert_array_equal(got, ref)
    v = np.random.RandomState(3).rand(*img.shape).astype(np.float32)
    np.testing.assert_allclose(np.sum(g * v), np.sum(u * ref_patches(v, k, s, r,
                                                                     padding)),
                               rtol=1e-5)


def test_sample_distorted_bounding_box_respects_constraints_and_seed():
    box = [[[0.2, 0.1, 0.6, 0.5]]]
    begin, size, bboxes = I.sample_distorted_bounding_box(
        [60, 80, 3], box, seed=7, seed2=3, min_object_covered=0.6,
        aspect_ratio_range=[0.5, 2.0], area_range=[0.1, 0.8])
    with nd.Session() as s:
        draws = [s.run([begin, size, bboxes]) for _ in range(8)]
    for b, sz, bb in draws:
        y, x, h, w = b[0], b[1], sz[0], sz[1]
        assert b[2] == 0 and sz[2] == -1 and 0 <= y and y + h <= 60 and x + w <= 80
        assert 0.1 * 4800 <= h * w <= 0.8 * 4800
        assert 0.5 * h - 1 <= w <= 2.0 * h + 1              # ratio, to rounding
        iy = max(0, min(y + h, 36) - max(y, 12))
        ix = max(0, min(x + w, 40) - max(x, 8))
        assert iy * ix >= 0.6 * 24 * 32                     # the object covered
        np.testing.assert_allclose(bb.ravel(), [y / 60, x / 80, (y + h) / 60,
                                                (x + w) / 80], rtol=1e-6)
    assert len({tuple(d[0]) for d in draws}) > 1            # a fresh crop per run
    with nd.Graph().as_default():
        again = I.sample_distorted_bounding_box(
            [60, 80, 3], box, seed=7, seed2=3, min_object_covered=0.6,
            aspect_ratio_range=[0.5, 2.0], area_range=[0.1, 0.8])[0]
        with nd.Session() as s:
            assert s.run(again).tolist() == draws[0][0].tolist()
    with pytest.raises(nd.errors.InvalidArgumentError, match="No bounding boxes"):
        run(I.sample_distorted_bounding_box([6, 8, 3], np.zeros((1, 0, 4)))[0])
    whole = run(I.sample_distorted_bounding_box(
        [6, 8, 3], np.zeros((1, 0, 4)), use_image_if_no_bounding_boxes=True,
        min_object_covered=2.0)[1])
    assert whole.tolist() == [6, 8, -1]       # nothing qualifies: the whole image
