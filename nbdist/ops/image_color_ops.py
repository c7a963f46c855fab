"""Colour spaces, colour adjustments and image-quality measures of ``nd.image``:
``rgb_to_hsv``/``hsv_to_rgb`` (ops ``RGBToHSV``/``HSVToRGB``), YIQ and YUV as
TF's 3x3 matrices, ``adjust_hue``/``saturation``/``gamma`` and their random
forms, ``grayscale_to_rgb``, ``transpose``/``rot90``, ``total_variation``,
``image_gradients``, ``sobel_edges``, ``psnr``, ``ssim``, ``ssim_multiscale``.

Adjustments work on float32 (integer images rescaled by ``convert_image_dtype``)
and convert back with saturation, as TF1.
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.ops.image_ops import (
    _A,
    _M,
    _float_work,
    _identity,
    _image,
    convert_image_dtype,
)

# TF's colour matrices: out[..., j] = sum_i image[..., i] * K[i][j].
_RGB_TO_YIQ = [[0.299, 0.59590059, 0.2115], [0.587, -0.27455667, -0.52273617],
               [0.114, -0.32134392, 0.31119955]]
_YIQ_TO_RGB = [[1, 1, 1], [0.95598634, -0.27201283, -1.10674021],
               [0.6208248, -0.64720424, 1.70423049]]
_RGB_TO_YUV = [[0.299, -0.14714119, 0.61497538], [0.587, -0.28886916, -0.51496512],
               [0.114, 0.43601035, -0.10001026]]
_YUV_TO_RGB = [[1, 1, 1], [0, -0.394642334, 2.03206185],
               [1.13988303, -0.58062185, 0]]


def _hsv_infer(c):
    s = c.shape(0)
    if c.dtype(0) not in (dtypes.float16, dtypes.float32, dtypes.float64):
        raise TypeError(f"{c.op_type}: images must be floating point, got "
                        f"{c.dtype(0).name}")
    if s.rank is not None and s.rank < 1:
        raise ValueError(f"Shape must be at least rank 1 but is rank 0 for "
                         f"'{c.name}' (op: '{c.op_type}')")
    if s.rank is not None and s[-1] not in (None, 3):
        raise ValueError(f"Dimension must be 3 but is {s[-1]} for '{c.name}' "
                         f"(op: '{c.op_type}')")
    return [(c.dtype(0), s)]


register_op("RGBToHSV", _hsv_infer, attrs={"T": ("type", dtypes.float32)},
            num_inputs=1)
register_op("HSVToRGB", _hsv_infer, attrs={"T": ("type", dtypes.float32)},
            num_inputs=1)


def _hsv_op(op_type, images, name):
    images = convert_to_tensor(images, name="images")
    return images.graph.create_op(op_type, [images], {"T": images.dtype.base_dtype},
                                  name=name or op_type).outputs[0]


def rgb_to_hsv(images, name=None):
    """[..., 3] float RGB in [0, 1] to HSV, each of H, S, V in [0, 1].

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.image.rgb_to_hsv([[0.0, 1.0, 0.0]])).astype(float).round(4).tolist()
    [[0.3333, 1.0, 1.0]]
    """
    return _hsv_op("RGBToHSV", images, name)


def hsv_to_rgb(images, name=None):
    """[..., 3] float HSV (each in [0, 1]) to RGB."""
    return _hsv_op("HSVToRGB", images, name)


def _matrix(images, kernel, name, scope_name):
    images = convert_to_tensor(images, name="images")
    with get_default_graph().name_scope(name or scope_name) as scope:
        k = convert_to_tensor(np.asarray(kernel, images.dtype.base_dtype.as_numpy_dtype
                                         ), name="kernel")
        A = _A()
        flat = _M().matmul(A.reshape(images, [-1, 3]), k)
        return A.reshape(flat, A.shape(images), name=scope)


def rgb_to_yiq(images):
    """[..., 3] RGB to YIQ (TF's matrix)."""
    return _matrix(images, _RGB_TO_YIQ, None, "rgb_to_yiq")


def yiq_to_rgb(images):
    """[..., 3] YIQ to RGB (TF's matrix)."""
    return _matrix(images, _YIQ_TO_RGB, None, "yiq_to_rgb")


def rgb_to_yuv(images):
    """[..., 3] RGB to YUV (TF's matrix)."""
    return _matrix(images, _RGB_TO_YUV, None, "rgb_to_yuv")


def yuv_to_rgb(images):
    """[..., 3] YUV to RGB (TF's matrix)."""
    return _matrix(images, _YUV_TO_RGB, None, "yuv_to_rgb")


def grayscale_to_rgb(images, name=None):
    """[..., 1] grayscale repeated into [..., 3]."""
    images = convert_to_tensor(images, name="images")
    if images.shape.rank is not None and images.shape[-1] not in (None, 1):
        raise ValueError(f"Dimension must be 1 but is {images.shape[-1]} "
                         f"(grayscale_to_rgb)")
    with get_default_graph().name_scope(name or "grayscale_to_rgb") as scope:
        return _A().concat([images] * 3, -1, name=scope)


# -- hue, saturation, gamma ------------------------------------------------------------
def adjust_hue(image, delta, name=None):
    """The hue rotated by ``delta`` in [-1, 1] (a fraction of the colour circle).

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.image.adjust_hue([[[1.0, 0.0, 0.0]]], 1 / 3)).round(4).tolist()
    [[[0.0, 1.0, 0.0]]]
    """
    def fn(x):
        M = _M()
        hsv = rgb_to_hsv(x)
        h, s, v = _A().split(hsv, 3, axis=-1)
        d = convert_to_tensor(delta, dtype=x.dtype.base_dtype)
        h = M.floormod(M.add(h, d), convert_to_tensor(1.0, dtype=x.dtype.base_dtype))
        return hsv_to_rgb(_A().concat([h, s, v], -1))

    return _float_work(image, fn, name or "adjust_hue")


def adjust_saturation(image, saturation_factor, name=None):
    """The saturation multiplied by ``saturation_factor``, clipped to [0, 1]."""
    def fn(x):
        M = _M()
        h, s, v = _A().split(rgb_to_hsv(x), 3, axis=-1)
        f = convert_to_tensor(saturation_factor, dtype=x.dtype.base_dtype)
        s = M.minimum(M.maximum(M.multiply(s, f), 0.0), 1.0)
        return hsv_to_rgb(_A().concat([h, s, v], -1))

    return _float_work(image, fn, name or "adjust_saturation")


def adjust_gamma(image, gamma=1, gain=1):
    """``gain * image ** gamma`` (integer images on the [0, 1] scale)."""
    if isinstance(gamma, (int, float)) and gamma < 0:
        raise ValueError("Gamma should be a non-negative real number.")

    def fn(x):
        M = _M()
        dt = x.dtype.base_dtype
        return M.multiply(convert_to_tensor(gain, dtype=dt),
                          M.pow(x, convert_to_tensor(gamma, dtype=dt)))

    return _float_work(image, fn, "adjust_gamma")


def random_hue(image, max_delta, seed=None):
    """adjust_hue by a delta drawn uniformly from [-max_delta, max_delta]."""
    from nbdist.ops.random_ops import random_uniform

    if max_delta > 0.5:
        raise ValueError("max_delta must be <= 0.5.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return adjust_hue(image, random_uniform([], -max_delta, max_delta, seed=seed))


def random_saturation(image, lower, upper, seed=None):
    """adjust_saturation by a factor drawn uniformly from [lower, upper)."""
    from nbdist.ops.random_ops import random_uniform

    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    return adjust_saturation(image, random_uniform([], lower, upper, seed=seed))


# -- geometry --------------------------------------------------------------------------
def transpose(image, name=None):
    """Height and width swapped (3-D or 4-D)."""
    image = _image(image)
    perm = [1, 0, 2] if image.shape.rank == 3 else [0, 2, 1, 3]
    with get_default_graph().name_scope(name or "transpose") as scope:
        return _A().transpose(image, perm, name=scope)


transpose_image = transpose


def rot90(image, k=1, name=None):
    """The image rotated ``k`` quarter turns counter-clockwise (``k`` a Python
    int)."""
    from nbdist.ops.image_ops import flip_left_right, flip_up_down

    image = _image(image)
    k = int(k) % 4
    with get_default_graph().name_scope(name or "rot90") as scope:
        if k == 0:
            return _identity(image, name=scope)
        if k == 1:
            return transpose(flip_left_right(image), name=scope)
        if k == 2:
            return flip_up_down(flip_left_right(image))
        return flip_left_right(transpose(image))


# -- measures --------------------------------------------------------------------------
def total_variation(images, name=None):
    """Sum of absolute differences of neighbouring pixels, per image (a scalar for
    a 3-D image, [batch] for 4-D)."""
    M = _M()
    images = _image(images, "images")
    with get_default_graph().name_scope(name or "total_variation") as scope:
        axes = [-3, -2, -1]
        lead = images.shape.rank - 3
        dh = M.subtract(images[(slice(None),) * lead + (slice(1, None),)],
                        images[(slice(None),) * lead + (slice(None, -1),)])
        dw = M.subtract(images[(slice(None),) * lead + (slice(None), slice(1, None))],
                        images[(slice(None),) * lead + (slice(None), slice(None, -1))])
        return M.add(M.reduce_sum(M.abs(dh), axes), M.reduce_sum(M.abs(dw), axes),
                     name=scope)


def image_gradients(image):
    """(dy, dx): forward differences of a 4-D image, zero in the last row/column.
    """
    M, A = _M(), _A()
    image = convert_to_tensor(image, name="image")
    if image.shape.rank != 4:
        raise ValueError(f"image_gradients expects a 4D tensor [batch_size, h, w, d],"
                         f" not {image.shape}.")
    with get_default_graph().name_scope("image_gradients"):
        dy = M.subtract(image[:, 1:], image[:, :-1])
        dx = M.subtract(image[:, :, 1:], image[:, :, :-1])
        dy = A.pad(dy, [[0, 0], [0, 1], [0, 0], [0, 0]])
        dx = A.pad(dx, [[0, 0], [0, 0], [0, 1], [0, 0]])
        return dy, dx


def sobel_edges(image):
    """[batch, h, w, d, 2]: the Sobel responses (dy, dx) of a 4-D image, with
    reflected borders as TF."""
    from nbdist.ops.nn_conv_ops import depthwise_conv2d

    A = _A()
    image = convert_to_tensor(image, name="image")
    if image.shape.rank != 4 or image.shape[-1] is None:
        raise ValueError("sobel_edges needs a 4-D image with a known depth")
    d = image.shape[-1]
    ky = np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]], np.float64)
    kernels = np.stack([ky, ky.T], -1)                         # [3, 3, 2]
    dt = image.dtype.base_dtype.as_numpy_dtype
    filt = np.tile(kernels[:, :, None, :], [1, 1, d, 1]).astype(dt)   # [3,3,d,2]
    with get_default_graph().name_scope("sobel_edges"):
        padded = A.pad(image, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
        out = depthwise_conv2d(padded, filt, [1, 1, 1, 1], "VALID")
        shape = A.concat([A.shape(image), [2]], 0)
        return A.reshape(out, shape)


def psnr(a, b, max_val, name=None):
    """Peak signal-to-noise ratio per image, float32:
    ``20 log10(max_val) - 10 log10(mse)``."""
    M = _M()
    with get_default_graph().name_scope(name or "PSNR") as scope:
        a, b = convert_to_tensor(a, name="a"), convert_to_tensor(b, name="b")
        mv = M.cast(convert_to_tensor(max_val), dtypes.float32)
        a = convert_image_dtype(a, dtypes.float32)
        b = convert_image_dtype(b, dtypes.float32)
        mse = M.reduce_mean(M.squared_difference(a, b), [-3, -2, -1])
        ln10 = np.float32(np.log(10.0))
        return M.subtract(M.multiply(20.0 / ln10, M.log(mv)),
                          M.multiply(10.0 / ln10, M.log(mse)), name=scope)


def _gaussian(size, sigma):
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    g = np.exp(-(x ** 2) / (2.0 * sigma ** 2))
    g = np.outer(g, g)
    return g / g.sum()


def _ssim_parts(x, y, max_val, filter_size, filter_sigma, k1, k2):
    """(luminance, contrast-structure) maps of float32 4-D images."""
    from nbdist.ops.nn_conv_ops import depthwise_conv2d

    M = _M()
    h, w, d = x.shape[-3], x.shape[-2], x.shape[-1]
    if (h is not None and h < filter_size) or (w is not None and w < filter_size):
        raise ValueError(f"ssim: the images ({h} x {w}) must be at least "
                         f"filter_size ({filter_size}) high and wide")
    filt = np.tile(_gaussian(filter_size, filter_sigma)[:, :, None, None], [1, 1, d, 1])
    filt = filt.astype(np.float32)

    def blur(t):
        return depthwise_conv2d(t, filt, [1, 1, 1, 1], "VALID")

    c1 = (k1 * max_val) ** 2
    c2 = (k2 * max_val) ** 2
    mx, my = blur(x), blur(y)
    num0 = M.multiply(M.multiply(mx, my), 2.0)
    den0 = M.add(M.square(mx), M.square(my))
    lum = M.divide(M.add(num0, c1), M.add(den0, c1))
    num1 = M.multiply(blur(M.multiply(x, y)), 2.0)
    den1 = blur(M.add(M.square(x), M.square(y)))
    cs = M.divide(M.add(M.subtract(num1, num0), c2),
                  M.add(M.subtract(den1, den0), c2))
    return lum, cs


def _as_float_batch(img):
    img = convert_image_dtype(convert_to_tensor(img), dtypes.float32)
    if img.shape.rank == 3:
        return _A().expand_dims(img, 0), True
    return img, False


def ssim(img1, img2, max_val, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03,
         return_index_map=False):
    """Structural similarity per image (Gaussian window ``filter_size`` /
    ``filter_sigma``, VALID borders), averaged over pixels and channels.

    >>> import numpy as np, nbdist as nd
    >>> img = np.random.RandomState(0).rand(16, 16, 1).astype(np.float32)
    >>> with nd.Session() as s:
    ...     float(s.run(nd.image.ssim(img, img, 1.0)))
    1.0
    """
    M = _M()
    with get_default_graph().name_scope("SSIM"):
        x, sq = _as_float_batch(img1)
        y, _ = _as_float_batch(img2)
        lum, cs = _ssim_parts(x, y, float(max_val), filter_size, filter_sigma, k1, k2)
        smap = M.reduce_mean(M.multiply(lum, cs), [-1])
        out = smap if return_index_map else M.reduce_mean(smap, [-2, -1])
        return _A().squeeze(out, [0]) if sq else out


def ssim_multiscale(img1, img2, max_val, power_factors=(0.0448, 0.2856, 0.3001,
                                                        0.2363, 0.1333),
                    filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03):
    """Multi-scale SSIM: per channel, the contrast-structure term at each scale
    but the last and the SSIM at the last, each clipped at 0 and raised to its
    ``power_factors`` weight, multiplied, then averaged over channels. Between
    scales the images are halved (2x2 average; an odd side first padded by
    mirroring its last row/column)."""
    from nbdist.ops.nn_pool_ops import avg_pool

    M, A = _M(), _A()

    def halve(t):
        h, w = t.shape[1], t.shape[2]
        if h % 2 or w % 2:
            t = A.pad(t, [[0, 0], [0, h % 2], [0, w % 2], [0, 0]], mode="SYMMETRIC")
        return avg_pool(t, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")

    with get_default_graph().name_scope("MS-SSIM"):
        x, sq = _as_float_batch(img1)
        y, _ = _as_float_batch(img2)
        out = None
        for i, p in enumerate(power_factors):
            if i:
                x, y = halve(x), halve(y)
            lum, cs = _ssim_parts(x, y, float(max_val), filter_size, filter_sigma,
                                  k1, k2)
            last = i == len(power_factors) - 1
            v = M.reduce_mean(M.multiply(lum, cs) if last else cs, [-3, -2])
            term = M.pow(M.maximum(v, 0.0), float(p))
            out = term if out is None else M.multiply(out, term)
        out = M.reduce_mean(out, [-1])
        return A.squeeze(out, [0]) if sq else out


__all__ = [
    "adjust_gamma", "adjust_hue", "adjust_saturation", "grayscale_to_rgb",
    "hsv_to_rgb", "image_gradients", "psnr", "random_hue", "random_saturation",
    "rgb_to_hsv", "rgb_to_yiq", "rgb_to_yuv", "rot90", "sobel_edges", "ssim",
    "ssim_multiscale", "total_variation", "transpose", "transpose_image",
    "yiq_to_rgb", "yuv_to_rgb",
]
