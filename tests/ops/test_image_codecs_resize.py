"""nd.image's JPEG/GIF/BMP/WebP codecs and decode_image against Pillow, and the
resize methods TF1 has beyond bilinear/nearest (bicubic, area, with pad) against
numbers TensorFlow 2.21's tf.compat.v1.image gave (marked "TF")."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

import nbdist as nd

I = nd.image
RS = np.random.RandomState(1)
# Smooth pixels, so JPEG's loss stays small.
YY, XX = np.mgrid[0:16, 0:24]
PIX = np.stack([YY * 12, XX * 9, (YY + XX) * 5], -1).astype(np.uint8)


@pytest.fixture(autouse=True)
def _fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


def encoded(fmt, arr=PIX, **kw):
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format=fmt, **kw)
    return buf.getvalue()


def test_jpeg_round_trip_shape_and_markers():
    enc = I.encode_jpeg(PIX, quality=95)
    dec, gray, shape, yes, no, crop, half = run([
        I.decode_jpeg(enc), I.decode_jpeg(enc, channels=1), I.extract_jpeg_shape(enc),
        I.is_jpeg(enc), I.is_jpeg(encoded("PNG")),
        I.decode_and_crop_jpeg(enc, [2, 3, 5, 7]), I.decode_jpeg(enc, ratio=2)])
    assert dec.shape == (16, 24, 3) and np.abs(dec.astype(int) - PIX).mean() < 2
    assert gray.shape == (16, 24, 1) and shape.tolist() == [16, 24, 3]
    assert yes and not no
    np.testing.assert_array_equal(crop, dec[2:7, 3:10])
    assert half.shape == (8, 12, 3)
    # Pillow reads what we wrote, and we read what Pillow wrote, pixel for pixel.
    ours = run(I.decode_jpeg(encoded("JPEG", quality=90)))
    np.testing.assert_array_equal(ours, np.asarray(Image.open(io.BytesIO(
        encoded("JPEG", quality=90)))))
    with pytest.raises(nd.errors.InvalidArgumentError, match="Invalid JPEG data"):
        run(I.decode_jpeg(encoded("PNG")))
    with pytest.raises(nd.errors.InvalidArgumentError, match="crop window"):
        run(I.decode_and_crop_jpeg(enc, [10, 0, 10, 5]))


def test_decode_image_sniffs_each_format():
    gif_frames = [Image.fromarray(PIX), Image.fromarray(255 - PIX)]
    buf = io.BytesIO()
    gif_frames[0].save(buf, format="GIF", save_all=True,
                       append_images=gif_frames[1:])
    gif = buf.getvalue()
    png, bmp, webp = encoded("PNG"), encoded("BMP"), encoded("WEBP", lossless=True)
    outs = run([I.decode_image(png), I.decode_image(bmp), I.decode_image(gif),
                I.decode_gif(gif), I.decode_bmp(bmp), I.decode_webp(webp),
                I.decode_image(png, dtype=nd.float32),
                I.decode_image(gif, expand_animations=False)])
    for o in (outs[0], outs[1], outs[4], outs[5]):
        np.testing.assert_array_equal(o, PIX)
    assert outs[2].shape == (2, 16, 24, 3) and outs[3].shape == (2, 16, 24, 3)
    np.testing.assert_allclose(outs[6], PIX / 255.0, atol=1e-6)
    assert outs[7].shape == (16, 24, 3)
    with pytest.raises(nd.errors.InvalidArgumentError, match="Unknown image file"):
        run(I.decode_image(b"not an image"))


def test_adjust_jpeg_quality_keeps_dtype_and_loses_more_at_low_quality():
    flt = PIX.astype(np.float32) / 255
    hi, lo, rnd = run([I.adjust_jpeg_quality(flt, 95), I.adjust_jpeg_quality(flt, 5),
                       I.random_jpeg_quality(PIX, 40, 60, seed=2)])
    assert hi.dtype == np.float32 and rnd.dtype == np.uint8
    assert np.abs(hi - flt).mean() < np.abs(lo - flt).mean()
    with pytest.raises(ValueError, match="less than"):
        I.random_jpeg_quality(PIX, 60, 40)


X = (np.arange(12, dtype=np.float32).reshape(1, 3, 4, 1) ** 1.5)


@pytest.mark.parametrize("kw,want", [
    ({}, [[0.0, 1.55473, 4.55302], [3.31329, 6.45051, 10.56819],
          [11.34563, 16.33356, 21.87608], [20.24249, 26.0695, 32.40431],
          [24.20666, 30.42354, 37.12176]]),
    ({"align_corners": True}, [[0.0, 1.78599, 5.19615], [2.62868, 5.79586, 10.17421],
                               [8.0, 12.87836, 18.52026], [16.06371, 22.11193, 28.7507],
                               [22.62742, 29.26568, 36.48287]]),
    ({"half_pixel_centers": True}, [[-0.5276, 0.99268, 3.95099],
                                    [2.32303, 4.98189, 8.77317],
                                    [8.32414, 12.89845, 18.12278],
                                    [18.26378, 24.02374, 30.29888],
                                    [24.1895, 30.51821, 37.3279]]),
])
def test_resize_bicubic_matches_tf(kw, want):
    out = run(I.resize_bicubic(X, [5, 3], **kw))
    np.testing.assert_allclose(out[0, :, :, 0], want, rtol=2e-4, atol=1e-4)   # TF


def test_resize_area_and_with_pad_match_tf():
    down, up = run([I.resize_area(X, [2, 3]), I.resize_area(X, [5, 6])])
    np.testing.assert_allclose(down[0, :, :, 0], [[3.09836, 5.58902, 8.92429],
                                                  [18.7454, 23.8538, 29.36671]],
                               rtol=1e-5)                                       # TF
    np.testing.assert_allclose(up[0, 2, :, 0], [8.0, 9.59017, 11.18034, 14.69694,
                                                16.6086, 18.52025], rtol=1e-5)  # TF
    padded = run(I.resize_image_with_pad(np.ones((6, 7, 1), np.float32), 5, 9))
    want = np.zeros((5, 9))
    want[:, 1:6] = 1                                                            # TF
    np.testing.assert_array_equal(padded[:, :, 0], want)
    via = run(I.resize_images(X, [5, 3], method=I.ResizeMethod.BICUBIC))
    np.testing.assert_allclose(via, run(I.resize_bicubic(X, [5, 3])))


def test_resize_bicubic_gradient_is_the_adjoint():
    x = nd.constant(X)
    u = RS.standard_normal((1, 7, 5, 1)).astype(np.float32)
    y = I.resize_bicubic(x, [7, 5], half_pixel_centers=True)
    g = run(nd.gradients(nd.reduce_sum(y * u), x)[0])
    v = RS.standard_normal(X.shape).astype(np.float32)
    yv = run(I.resize_bicubic(v, [7, 5], half_pixel_centers=True))
    np.testing.assert_allclose(np.sum(g * v), np.sum(u * yv), rtol=1e-4)
