"""nd.image's colour spaces, colour adjustments, geometry helpers and quality
measures against colorsys / NumPy, and (marked "TF") numbers TensorFlow 2.21's
tf.compat.v1.image gave on the same inputs."""

from __future__ import annotations

import colorsys

import numpy as np
import pytest

import nbdist as nd

I = nd.image
RS = np.random.RandomState(5)
IMG = RS.rand(2, 6, 7, 3).astype(np.float32)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


def per_pixel(fn, img):
    flat = img.reshape(-1, 3).astype(np.float64)
    return np.array([fn(*p) for p in flat]).reshape(img.shape)


def test_hsv_round_trip_and_colorsys():
    hsv, back = run([I.rgb_to_hsv(IMG), I.hsv_to_rgb(I.rgb_to_hsv(IMG))])
    np.testing.assert_allclose(hsv, per_pixel(colorsys.rgb_to_hsv, IMG), atol=1e-6)
    np.testing.assert_allclose(back, IMG, atol=1e-6)
    with pytest.raises(ValueError, match="Dimension must be 3"):
        I.rgb_to_hsv(np.zeros((2, 4), np.float32))


def test_adjust_hue_and_saturation_follow_hsv():
    def hue(r, g, b):
        h, s, v = colorsys.rgb_to_hsv(r, g, b)
        return colorsys.hsv_to_rgb((h + 0.3) % 1.0, s, v)

    def sat(r, g, b):
        h, s, v = colorsys.rgb_to_hsv(r, g, b)
        return colorsys.hsv_to_rgb(h, min(s * 1.7, 1.0), v)

    h, s = run([I.adjust_hue(IMG, 0.3), I.adjust_saturation(IMG, 1.7)])
    np.testing.assert_allclose(h, per_pixel(hue, IMG), atol=1e-5)
    np.testing.assert_allclose(s, per_pixel(sat, IMG), atol=1e-5)
    u8 = np.array([[[200, 30, 90], [10, 250, 0]]], np.uint8)
    out = run(I.adjust_hue(u8, 0.2))
    assert out.dtype == np.uint8 and out.tolist() == [[[200, 174, 30], [0, 210, 250]]]


def test_random_hue_and_saturation_are_seeded_and_checked():
    a = run(I.random_hue(IMG, 0.2, seed=4))
    with nd.Graph().as_default():
        nd.set_random_seed(1)
        b = run(I.random_hue(IMG, 0.2, seed=4))
    assert a.shape == IMG.shape and np.isfinite(b).all()
    with pytest.raises(ValueError, match="max_delta must be <= 0.5"):
        I.random_hue(IMG, 0.7)
    with pytest.raises(ValueError, match="upper must be > lower"):
        I.random_saturation(IMG, 1.0, 0.5)
    s = run(I.random_saturation(IMG, 0.0, 1e-6, seed=1))     # near-gray
    np.testing.assert_allclose(s, np.repeat(IMG.max(-1, keepdims=True), 3, -1),
                               atol=1e-5)


def test_yiq_yuv_match_tf_and_invert():
    px = [[0.2, 0.5, 0.9]]
    yiq, yuv = run([I.rgb_to_yiq(px), I.rgb_to_yuv(px)])
    np.testing.assert_allclose(yiq, [[0.4559, -0.30730772, 0.06101148]], rtol=1e-5)
    np.testing.assert_allclose(yuv, [[0.4559, 0.2185465, -0.22449672]], rtol=1e-5)
    back = run([I.yiq_to_rgb(I.rgb_to_yiq(IMG)), I.yuv_to_rgb(I.rgb_to_yuv(IMG))])
    for b in back:
        np.testing.assert_allclose(b, IMG, atol=2e-4)


def test_gamma_grayscale_to_rgb_transpose_rot90():
    u8 = (IMG * 255).astype(np.uint8)
    g, rgb, t, r1, r3 = run([
        I.adjust_gamma(u8, 0.5, 1.2), I.grayscale_to_rgb(IMG[..., :1]),
        I.transpose(IMG), I.rot90(IMG[0]), I.rot90(IMG[0], k=3)])
    want = np.clip(1.2 * (u8 / 255.0) ** 0.5, 0, 1) * 255.5
    assert g.dtype == np.uint8 and np.abs(g - want.astype(np.uint8)).max() <= 1
    np.testing.assert_array_equal(rgb, np.repeat(IMG[..., :1], 3, -1))
    np.testing.assert_array_equal(t, IMG.transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(r1, np.rot90(IMG[0]))
    np.testing.assert_array_equal(r3, np.rot90(IMG[0], 3))
    with pytest.raises(ValueError, match="non-negative"):
        I.adjust_gamma(IMG, -1.0)


def test_total_variation_gradients_sobel():
    tv, (dy, dx), sob = run([I.total_variation(IMG), I.image_gradients(IMG),
                             I.sobel_edges(IMG)])
    want = (np.abs(np.diff(IMG, axis=1)).sum((1, 2, 3)) +
            np.abs(np.diff(IMG, axis=2)).sum((1, 2, 3)))
    np.testing.assert_allclose(tv, want, rtol=1e-5)
    np.testing.assert_allclose(dy[:, :-1], np.diff(IMG, axis=1), atol=1e-6)
    assert not dy[:, -1].any() and not dx[:, :, -1].any()
    pad = np.pad(IMG, [(0, 0), (1, 1), (1, 1), (0, 0)], mode="reflect")
    ky = np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]])
    ref = np.zeros(IMG.shape + (2,))
    for i in range(3):
        for j in range(3):
            win = pad[:, i:i + 6, j:j + 7]
            ref[..., 0] += ky[i, j] * win
            ref[..., 1] += ky[j, i] * win
    np.testing.assert_allclose(sob, ref, atol=1e-5)


def test_psnr_ssim_ms_ssim_match_tf():
    rs = np.random.RandomState(0)
    rs.rand(2, 6, 7, 3)
    rs.rand(3, 4, 5, 3)
    big = rs.rand(2, 32, 32, 3).astype(np.float32)
    big2 = np.clip(big + rs.randn(*big.shape).astype(np.float32) * 0.1, 0, 1)
    ms1 = rs.rand(1, 96, 96, 1).astype(np.float32)
    ms2 = np.clip(ms1 * 0.8 + 0.1, 0, 1)
    p, s, smap, ms, same = run([
        I.psnr(big, big2, 1.0), I.ssim(big, big2, 1.0),
        I.ssim(big, big2, 1.0, filter_size=5, return_index_map=True),
        I.ssim_multiscale(ms1, ms2, 1.0, filter_size=5), I.ssim(big, big, 1.0)])
    mse = ((big.astype(np.float64) - big2) ** 2).mean((1, 2, 3))
    np.testing.assert_allclose(p, 10 * np.log10(1 / mse), rtol=1e-5)
    np.testing.assert_allclose(p, [20.62467, 20.480522], rtol=1e-6)        # TF
    np.testing.assert_allclose(s, [0.9464467, 0.9424747], rtol=1e-5)       # TF
    assert smap.shape == (2, 28, 28)
    np.testing.assert_allclose(smap[0, :2, :3], [[0.940411, 0.9343061, 0.9363397],
                                                 [0.9413352, 0.9334164, 0.9338081]],
                               rtol=1e-5)                                   # TF
    np.testing.assert_allclose(ms, [0.9804766], rtol=1e-5)                 # TF
    np.testing.assert_allclose(same, [1.0, 1.0], rtol=1e-6)
    with pytest.raises(ValueError, match="filter_size"):
        I.ssim(big[:, :8, :8], big[:, :8, :8], 1.0)
