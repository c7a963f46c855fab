"""nd.image: TF1's image functions against plain NumPy, with TF's dtypes,
defaults, pixel mapping and seeded randomness."""

from __future__ import annotations

import io

import numpy as np
import pytest

import nbdist as nd

RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _fresh_graph():
    g = nd.Graph()
    with g.as_default():
        yield g


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


# -- resizing --------------------------------------------------------------------------
def ref_bilinear(x, oh, ow, align=False):
    """TF1's legacy mapping: output (i, j) samples input (i * sy, j * sx)."""
    n, h, w, c = x.shape
    sy = (h - 1) / (oh - 1) if align and oh > 1 else h / oh
    sx = (w - 1) / (ow - 1) if align and ow > 1 else w / ow
    out = np.zeros((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            fy, fx = i * sy, j * sx
            y0, x0 = int(np.floor(fy)), int(np.floor(fx))
            y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
            dy, dx = fy - y0, fx - x0
            top = x[:, y0, x0] * (1 - dx) + x[:, y0, x1] * dx
            bottom = x[:, y1, x0] * (1 - dx) + x[:, y1, x1] * dx
            out[:, i, j] = top * (1 - dy) + bottom * dy
    return out


def ref_nearest(x, oh, ow, align=False):
    n, h, w, c = x.shape
    sy = (h - 1) / (oh - 1) if align and oh > 1 else h / oh
    sx = (w - 1) / (ow - 1) if align and ow > 1 else w / ow
    pick = (lambda v: int(np.floor(v + 0.5))) if align else (lambda v: int(v))
    rows = [min(pick(i * sy), h - 1) for i in range(oh)]
    cols = [min(pick(j * sx), w - 1) for j in range(ow)]
    return x[:, rows][:, :, cols]


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(7, 4), (2, 3), (3, 10)])
def test_resize_images_bilinear_and_nearest(align, size):
    x = RNG.random((2, 3, 5, 2)).astype(np.float32) * 10
    bil = nd.image.resize_images(x, size, align_corners=align)
    near = nd.image.resize_images(x, size, nd.image.ResizeMethod.NEAREST_NEIGHBOR,
                                  align_corners=align)
    assert bil.shape.as_list() == [2, *size, 2]
    b, n = run([bil, near])
    np.testing.assert_allclose(b, ref_bilinear(x.astype(np.float64), *size, align),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(n, ref_nearest(x, *size, align))


def test_resize_images_dtypes_and_3d():
    img = (np.arange(36) * 7 % 256).astype(np.uint8).reshape(3, 4, 3)
    bil = nd.image.resize_images(img, [5, 2])
    near = nd.image.resize_images(img, [5, 2], method=1)
    assert bil.dtype == nd.float32 and near.dtype == nd.uint8
    assert bil.shape.as_list() == [5, 2, 3]
    b, n = run([bil, near])
    np.testing.assert_allclose(b, ref_bilinear(img[None].astype(np.float64), 5, 2)[0],
                               rtol=1e-6)
    np.testing.assert_array_equal(n, ref_nearest(img[None], 5, 2)[0])
    same = nd.image.resize_images(np.ones((3, 5, 1)), [3, 5])
    assert same.dtype == nd.float64        # already that size: returned as is
    with pytest.raises(ValueError, match="Resize method is not implemented"):
        nd.image.resize_images(img, [5, 2], method=7)


@pytest.mark.parametrize("method", [0, 1])
def test_resize_gradient_is_the_adjoint(method):
    # Resizing is linear: <d/dx sum(u * resize(x)), v> == sum(u * resize(v)).
    x = RNG.random((1, 4, 5, 2))
    ref = ref_bilinear if method == 0 else ref_nearest
    px = nd.placeholder(nd.float64, x.shape)
    y = nd.image.resize_images(px, [7, 3], method=method)
    u = RNG.standard_normal((1, 7, 3, 2))
    (g,) = nd.gradients(nd.reduce_sum(y * u), [px])
    got = run(g, {px: x})
    assert got.shape == x.shape
    for _ in range(3):
        v = RNG.standard_normal(x.shape)
        np.testing.assert_allclose(np.sum(got * v), np.sum(u * ref(v, 7, 3)),
                                   rtol=1e-5)


# -- flips, crops, pads ----------------------------------------------------------------
def test_flips_and_crops():
    img = np.arange(2 * 3 * 5 * 1).reshape(2, 3, 5, 1).astype(np.float32)
    lr, ud = nd.image.flip_left_right(img), nd.image.flip_up_down(img[0])
    a, b = run([lr, ud])
    np.testing.assert_array_equal(a, img[:, :, ::-1])
    np.testing.assert_array_equal(b, img[0, ::-1])
    x = np.arange(50).reshape(5, 10, 1)
    np.testing.assert_array_equal(run(nd.image.central_crop(x, 0.5)), x[1:4, 2:8])
    y = np.arange(15).reshape(3, 5, 1)
    got = run(nd.image.resize_image_with_crop_or_pad(y, 4, 2))
    want = np.zeros((4, 2, 1), int)
    want[:3] = y[:, 1:3]                   # central columns; zero row after
    np.testing.assert_array_equal(got, want)
    box = nd.image.crop_to_bounding_box(x, 1, 2, 3, 4)
    padded = nd.image.pad_to_bounding_box(y, 1, 2, 5, 8)
    b, p = run([box, padded])
    np.testing.assert_array_equal(b, x[1:4, 2:6])
    want = np.zeros((5, 8, 1), int)
    want[1:4, 2:7] = y
    np.testing.assert_array_equal(p, want)
    with pytest.raises(ValueError, match="target"):
        nd.image.crop_to_bounding_box(x, 3, 0, 3, 4)


def test_random_flips_and_crop_are_seeded_and_valid():
    img = RNG.random((4, 3, 5, 1)).astype(np.float32)
    nd.set_random_seed(7)
    flips = nd.image.random_flip_left_right(img, seed=1)
    crop = nd.image.random_crop(img[0], [2, 3, 1], seed=2)
    one = nd.image.random_flip_up_down(img[0], seed=3)
    assert crop.shape.as_list() == [2, 3, 1]
    with nd.Session() as s:
        runs = [s.run([flips, crop, one]) for _ in range(12)]
    with nd.Session() as s:
        again = s.run([flips, crop, one])
    for a, b in zip(runs[0], again, strict=True):
        np.testing.assert_array_equal(a, b)   # a new session replays the sequence
    seen = set()
    for f, c, o in runs:
        for i in range(4):
            same, mirrored = np.array_equal(f[i], img[i]), np.array_equal(
                f[i], img[i, :, ::-1])
            assert same or mirrored
            seen.add(mirrored)
        assert np.array_equal(o, img[0]) or np.array_equal(o, img[0, ::-1])
        offsets = [(r, q) for r in range(2) for q in range(3)
                   if np.array_equal(c, img[0, r:r + 2, q:q + 3])]
        assert offsets
    assert seen == {True, False}
    with pytest.raises(ValueError, match="Need value.shape >= size"):
        nd.image.random_crop(img[0], [4, 3, 1])


# -- colour ----------------------------------------------------------------------------
def test_convert_image_dtype():
    f = np.array([0.0, 0.5, 1.0], np.float32)
    u8 = np.array([0, 128, 255], np.uint8)
    got = run([nd.image.convert_image_dtype(f, nd.uint8),
               nd.image.convert_image_dtype(u8, nd.float32),
               nd.image.convert_image_dtype(np.array([1.5], np.float32), nd.uint8,
                                            saturate=True),
               nd.image.convert_image_dtype(u8, nd.int32),
               nd.image.convert_image_dtype(np.array([2**31 - 1], np.int32), nd.uint8)])
    np.testing.assert_array_equal(got[0], (f * 255.5).astype(np.uint8))  # [0,127,255]
    np.testing.assert_allclose(got[1], u8 / 255.0, rtol=1e-6)
    assert got[2].tolist() == [255]
    np.testing.assert_array_equal(got[3], u8.astype(np.int64) * (2**31 // 256))
    assert got[4].tolist() == [255]


def test_brightness_contrast_grayscale_standardization():
    u8 = np.array([[[10, 250]]], np.uint8)
    got = run(nd.image.adjust_brightness(u8, 0.1))
    want = np.clip((u8 / 255.0 + 0.1) * 255.5, 0, 255).astype(np.uint8)  # [35, 255]
    np.testing.assert_array_equal(got, want)
    x = RNG.random((2, 3, 4, 3)).astype(np.float32)
    m = x.mean(axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(run(nd.image.adjust_contrast(x, 1.7)),
                               (x - m) * 1.7 + m, rtol=1e-5, atol=1e-6)
    rgb = np.array([[[10, 200, 30]]], np.uint8)
    gray = run(nd.image.rgb_to_grayscale(rgb))
    lum = (rgb / 255.0) @ np.array([0.2989, 0.5870, 0.1140])
    assert gray.dtype == np.uint8 and gray.shape == (1, 1, 1)
    assert gray.ravel().tolist() == [int(lum[0, 0] * 255.5)]          # 124
    img = np.array([[[1], [2]], [[3], [4]]], np.uint8)
    std = run(nd.image.per_image_standardization(img))
    v = img.astype(np.float64)
    assert std.dtype == np.float32
    np.testing.assert_allclose(std, (v - v.mean()) / max(v.std(), 1 / 2.0), rtol=1e-6)
    flat = np.full((2, 2, 1), 5, np.uint8)   # stddev 0: divide by 1/sqrt(n) instead
    np.testing.assert_array_equal(run(nd.image.per_image_standardization(flat)), 0)


def test_random_brightness_and_contrast_stay_in_range():
    x = RNG.random((3, 4, 2)).astype(np.float32)
    nd.set_random_seed(1)
    b = nd.image.random_brightness(x, 0.2)
    c = nd.image.random_contrast(x, 0.5, 1.5)
    with nd.Session() as s:
        for _ in range(5):
            gb, gc = s.run([b, c])
            delta = gb - x
            assert np.ptp(delta) < 1e-6 and -0.2 <= delta[0, 0, 0] <= 0.2
            m = x.mean(axis=(0, 1), keepdims=True)
            factor = (gc - m)[0, 0, 0] / (x - m)[0, 0, 0]
            assert 0.5 <= factor <= 1.5
            np.testing.assert_allclose(gc, (x - m) * factor + m, rtol=1e-4,
                                       atol=1e-5)
    with pytest.raises(ValueError, match="upper must be > lower"):
        nd.image.random_contrast(x, 1.0, 1.0)
    with pytest.raises(ValueError, match="max_delta must be non-negative"):
        nd.image.random_brightness(x, -1.0)


# -- PNG -------------------------------------------------------------------------------
def test_png_round_trip_against_pillow():
    from PIL import Image

    rgb = RNG.integers(0, 256, (4, 5, 3)).astype(np.uint8)
    png = nd.image.encode_png(rgb)
    assert png.dtype == nd.string and png.shape.as_list() == []
    data = run(png)
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(data))), rgb)
    gray = nd.image.decode_png(data, channels=1)
    back = nd.image.decode_png(png)
    assert gray.shape.as_list() == [None, None, 1]
    g, b = run([gray, back])
    np.testing.assert_array_equal(b, rgb)
    want = np.asarray(Image.open(io.BytesIO(data)).convert("L"))[..., None]
    np.testing.assert_array_equal(g, want)
    with pytest.raises(nd.errors.InvalidArgumentError, match="Invalid PNG data"):
        run(nd.image.decode_png(b"not a png"))
