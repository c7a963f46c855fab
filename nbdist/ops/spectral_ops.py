"""Fourier transforms and signal framing (TF's ``tf.signal`` / ``tf.spectral``):
``fft``/``ifft`` (1-3D, over the innermost dimensions), ``rfft``/``irfft``,
``dct``/``idct``, ``fftshift``, ``frame``, ``stft``, the usual windows and
``linear_to_mel_weight_matrix``. Kernels are ``numpy.fft`` / ``scipy.fft``;
the complex FFTs have TF's gradients.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.signal.rfft([1.0, 0.0, 0.0, 0.0])).tolist()
[(1+0j), (1+0j), (1+0j)]
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable, register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import COMPLEX, FLOAT, check_type, op_scope
from nbdist.framework.ops import Tensor, convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape

_COMPLEX_FFTS = {"FFT": 1, "IFFT": 1, "FFT2D": 2, "IFFT2D": 2, "FFT3D": 3,
                 "IFFT3D": 3}
_REAL_FFTS = {"RFFT": 1, "RFFT2D": 2, "RFFT3D": 3}
_INVERSE_REAL_FFTS = {"IRFFT": 1, "IRFFT2D": 2, "IRFFT3D": 3}
_COMPLEX_OF = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}
_REAL_OF = {v: k for k, v in _COMPLEX_OF.items()}


def _check_rank(c, k):
    s = c.shape(0)
    if s.rank is not None and s.rank < k:
        raise ValueError(f"{c.op_type}: input must have rank >= {k}, got shape {s}")
    return s


def _complex_fft_infer(k):
    def infer(c):
        d = check_type(c, 0, COMPLEX, "input")
        return [(d, _check_rank(c, k))]

    return infer


def _real_fft_infer(k, inverse):
    def infer(c):
        s = _check_rank(c, k)
        lengths = c.constant(1)
        out = (c.attr("Treal") if inverse else c.attr("Tcomplex"))
        if s.rank is None:
            return [(out, TensorShape(None))]
        dims = s.as_list()
        if lengths is None:
            dims[-k:] = [None] * k
        else:
            lengths = [int(v) for v in np.ravel(lengths)]
            dims[-k:] = lengths[:-1] + [lengths[-1] if inverse
                                        else lengths[-1] // 2 + 1]
        return [(out, TensorShape(dims))]

    return infer


for _t, _k in _COMPLEX_FFTS.items():
    register_op(_t, _complex_fft_infer(_k), attrs={"Tcomplex": ("type", None)},
                num_inputs=1)
for _t, _k in _REAL_FFTS.items():
    register_op(_t, _real_fft_infer(_k, False),
                attrs={"Treal": ("type", dtypes.float32),
                       "Tcomplex": ("type", dtypes.complex64)}, num_inputs=2)
    NotDifferentiable(_t)
for _t, _k in _INVERSE_REAL_FFTS.items():
    register_op(_t, _real_fft_infer(_k, True),
                attrs={"Treal": ("type", dtypes.float32),
                       "Tcomplex": ("type", dtypes.complex64)}, num_inputs=2)
    NotDifferentiable(_t)
register_op("DCT", lambda c: [(check_type(c, 0, FLOAT, "input"), c.shape(0))],
            attrs={"type": ("int", 2), "inverse": ("bool", False),
                   "norm": ("string", ""), "T": ("type", None)}, num_inputs=1)
register_op("FFTShift", lambda c: [(c.dtype(0), c.shape(0))],
            attrs={"axes": ("list(int)", []), "inverse": ("bool", False),
                   "T": ("type", None)}, num_inputs=1)
NotDifferentiable("DCT")


def _frame_infer(c):
    s = c.shape(0)
    length, step = c.attr("frame_length"), c.attr("frame_step")
    if s.rank is None:
        return [(c.dtype(0), TensorShape(None))]
    axis = c.attr("axis") % s.rank
    dims = s.as_list()
    n = dims[axis]
    if n is not None:
        n = (-(-n // step) if c.attr("pad_end") else
             max(0, 1 + (n - length) // step))
    return [(c.dtype(0), TensorShape(dims[:axis] + [n, length] + dims[axis + 1:]))]


def _overlap_and_add_infer(c):
    s = c.shape(0)
    if s.rank is not None and s.rank < 2:
        raise ValueError(f"overlap_and_add: signal must have rank >= 2, got {s}")
    if s.rank is None:
        return [(c.dtype(0), TensorShape(None))]
    frames, length = s.as_list()[-2:]
    n = None if None in (frames, length) else (
        (frames - 1) * c.attr("frame_step") + length if frames else 0)
    return [(c.dtype(0), TensorShape(s.as_list()[:-2] + [n]))]


register_op("OverlapAndAdd", _overlap_and_add_infer,
            attrs={"frame_step": ("int", 1), "T": ("type", None)}, num_inputs=1)
NotDifferentiable("OverlapAndAdd")
register_op("Frame", _frame_infer,
            attrs={"frame_length": ("int", 1), "frame_step": ("int", 1),
                   "pad_end": ("bool", False), "pad_value": ("float", 0.0),
                   "axis": ("int", -1), "T": ("type", None)}, num_inputs=1)
NotDifferentiable("Frame")


# -- gradients: the complex FFTs are linear, their adjoints scaled by the size --------
def _fft_size(op, k):
    from nbdist.ops.array_ops_shape import shape
    from nbdist.ops.math_ops_elementwise import cast
    from nbdist.ops.math_ops_reduction import reduce_prod

    n = reduce_prod(shape(op.inputs[0])[-k:])
    return cast(n, op.inputs[0].dtype.base_dtype)


def _fft_grad(inverse_op, k, scale_up):
    def grad(op, g):
        from nbdist.ops.math_ops_elementwise import multiply, truediv

        back = _apply(inverse_op, g, None)
        size = _fft_size(op, k)
        return [multiply(back, size) if scale_up else truediv(back, size)]

    return grad


for _fwd, _inv in (("FFT", "IFFT"), ("FFT2D", "IFFT2D"), ("FFT3D", "IFFT3D")):
    register_gradient(_fwd)(_fft_grad(_inv, _COMPLEX_FFTS[_fwd], True))
    register_gradient(_inv)(_fft_grad(_fwd, _COMPLEX_FFTS[_fwd], False))


@register_gradient("FFTShift")
def _fftshift_grad(op, g):
    return [_shift(g, op.get_attr("axes"), not op.get_attr("inverse"), None)]


# -- Python API ---------------------------------------------------------------------
def _apply(op_type, x, name):
    with op_scope(name, op_type, [x]) as (g, scope):
        x = convert_to_tensor(x, name="input")
        if not x.dtype.is_complex:
            x = convert_to_tensor(x, dtype=dtypes.complex64) if not isinstance(
                x, Tensor) else x
        return g.create_op(op_type, [x], {"Tcomplex": x.dtype.base_dtype},
                           name=scope).outputs[0]


def _complex_fft(op_type):
    def fn(input, name=None):  # noqa: A002 - TF's name
        return _apply(op_type, input, name)

    k = _COMPLEX_FFTS[op_type]
    fn.__name__ = op_type.lower().replace("fft", "fft")
    fn.__doc__ = (f"The {'inverse ' if op_type.startswith('I') else ''}discrete "
                  f"Fourier transform over the innermost {k} dimension(s) of a "
                  f"complex tensor (numpy.fft{'n' if k > 1 else ''} conventions).")
    return fn


fft, ifft = _complex_fft("FFT"), _complex_fft("IFFT")
fft2d, ifft2d = _complex_fft("FFT2D"), _complex_fft("IFFT2D")
fft3d, ifft3d = _complex_fft("FFT3D"), _complex_fft("IFFT3D")


def _real_fft(op_type, k, inverse):
    def fn(input_tensor, fft_length=None, name=None):
        with op_scope(name, op_type, [input_tensor]) as (g, scope):
            x = convert_to_tensor(input_tensor, name="input_tensor")
            if inverse:
                if not x.dtype.is_complex:
                    raise TypeError(f"{op_type}: input must be complex, got "
                                    f"{x.dtype.name}")
                real = _REAL_OF[x.dtype.base_dtype]
            else:
                if x.dtype.base_dtype not in _COMPLEX_OF:
                    x = convert_to_tensor(input_tensor, dtype=dtypes.float32)
                real = x.dtype.base_dtype
            if fft_length is None:
                dims = x.shape.as_list()[-k:] if x.shape.rank else None
                if dims is None or None in dims:
                    raise ValueError(f"{op_type}: fft_length is needed when the "
                                     "innermost dimensions are not known")
                if inverse:
                    dims[-1] = 2 * (dims[-1] - 1)
                fft_length = dims
            length = convert_to_tensor(fft_length, dtype=dtypes.int32,
                                       name="fft_length")
            return g.create_op(op_type, [x, length],
                               {"Treal": real, "Tcomplex": _COMPLEX_OF[real]},
                               name=scope).outputs[0]

    fn.__name__ = op_type.lower()
    fn.__doc__ = (f"The {'inverse ' if inverse else ''}real FFT over the innermost "
                  f"{k} dimension(s), of length ``fft_length`` (numpy.fft.{'i' if inverse else ''}rfft"
                  f"{'n' if k > 1 else ''}).")
    return fn


rfft, irfft = _real_fft("RFFT", 1, False), _real_fft("IRFFT", 1, True)
rfft2d, irfft2d = _real_fft("RFFT2D", 2, False), _real_fft("IRFFT2D", 2, True)
rfft3d, irfft3d = _real_fft("RFFT3D", 3, False), _real_fft("IRFFT3D", 3, True)


def _dct(input, type, n, axis, norm, name, inverse):  # noqa: A002 - TF's names
    if axis != -1:
        raise NotImplementedError("axis must be -1. Got: %s" % axis)
    if n is not None:
        raise NotImplementedError("n other than None (the full length) is not "
                                  "supported in nbdist")
    if type not in (1, 2, 3, 4):
        raise ValueError("Types I, II, III and IV (I)DCT are supported.")
    if norm not in (None, "ortho"):
        raise ValueError("Normalization must be None or 'ortho'.")
    if type == 1 and norm == "ortho":
        raise ValueError("Normalization is not supported for the Type-I DCT.")
    with op_scope(name, "idct" if inverse else "dct", [input]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        return g.create_op("DCT", [x], {"type": int(type), "inverse": inverse,
                                        "norm": norm or "",
                                        "T": x.dtype.base_dtype},
                           name=scope).outputs[0]


def dct(input, type=2, n=None, axis=-1, norm=None, name=None):  # noqa: A002
    """The type I-IV discrete cosine transform of the innermost dimension, as
    ``scipy.fft.dct`` (TF's scaling: unnormalized, or ``norm="ortho"``)."""
    return _dct(input, type, n, axis, norm, name, False)


def idct(input, type=2, n=None, axis=-1, norm=None, name=None):  # noqa: A002
    """The inverse of ``dct`` of the same type (TF: a DCT of the inverse type,
    so unnormalized it is ``2N`` times the inverse)."""
    return _dct(input, type, n, axis, norm, name, True)


def _shift(x, axes, inverse, name):
    with op_scope(name, "ifftshift" if inverse else "fftshift", [x]) as (g, scope):
        x = convert_to_tensor(x, name="x")
        if axes is None:
            axes = list(range(x.shape.rank)) if x.shape.rank is not None else []
        axes = [int(a) for a in np.ravel(axes)]
        return g.create_op("FFTShift", [x], {"axes": axes, "inverse": inverse,
                                             "T": x.dtype.base_dtype},
                           name=scope).outputs[0]


def fftshift(x, axes=None, name=None):
    """``x`` with the zero-frequency term moved to the centre (``numpy.fft.
    fftshift``)."""
    return _shift(x, axes, False, name)


def ifftshift(x, axes=None, name=None):
    """The inverse of ``fftshift``."""
    return _shift(x, axes, True, name)


def frame(signal, frame_length, frame_step, pad_end=False, pad_value=0, axis=-1,
          name=None):
    """Frames of ``frame_length`` samples every ``frame_step`` along ``axis``
    (python ints): ``[..., frames, frame_length, ...]``; with ``pad_end`` the
    tail is padded with ``pad_value`` so every sample is in a frame."""
    with op_scope(name, "frame", [signal]) as (g, scope):
        x = convert_to_tensor(signal, name="signal")
        return g.create_op("Frame", [x], {"frame_length": int(frame_length),
                                          "frame_step": int(frame_step),
                                          "pad_end": bool(pad_end),
                                          "pad_value": float(pad_value),
                                          "axis": int(axis),
                                          "T": x.dtype.base_dtype},
                           name=scope).outputs[0]


def _window(values, dtype, name):
    from nbdist.framework.constant_op import constant

    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"dtype must be a floating point type. Found {dtype}")
    return constant(np.asarray(values, dtype.as_numpy_dtype), name=name)


def _raised_cosine(window_length, periodic, a, b, dtype, name):
    n = int(window_length)
    if n == 1:
        return _window(np.ones(1), dtype, name)
    even = 1 - n % 2
    denom = n + even * int(bool(periodic)) - 1  # TF: periodic only for even n
    k = np.arange(n)
    return _window(a - b * np.cos(2 * np.pi * k / denom), dtype, name)


def hann_window(window_length, periodic=True, dtype=dtypes.float32, name=None):
    """The Hann window of ``window_length`` (an int); ``periodic`` for
    spectral analysis (as TF: length + 1 symmetric, last sample dropped)."""
    return _raised_cosine(window_length, periodic, 0.5, 0.5, dtype,
                          name or "hann_window")


def hamming_window(window_length, periodic=True, dtype=dtypes.float32, name=None):
    """The Hamming window (0.54 - 0.46 cos)."""
    return _raised_cosine(window_length, periodic, 0.54, 0.46, dtype,
                          name or "hamming_window")


def kaiser_window(window_length, beta=12.0, dtype=dtypes.float32, name=None):
    """The Kaiser window (``numpy.kaiser``)."""
    return _window(np.kaiser(int(window_length), beta), dtype, name or "kaiser_window")


def vorbis_window(window_length, dtype=dtypes.float32, name=None):
    """The Vorbis power-complementary window."""
    n = int(window_length)
    k = np.arange(n)
    return _window(np.sin(np.pi / 2 * np.sin(np.pi * (k + 0.5) / n) ** 2), dtype,
                   name or "vorbis_window")


def stft(signals, frame_length, frame_step, fft_length=None,
         window_fn=hann_window, pad_end=False, name=None):
    """The short-time Fourier transform: frames, times ``window_fn(frame_length)``,
    then ``rfft`` of ``fft_length`` (default: the next power of 2) —
    ``[..., frames, fft_length // 2 + 1]`` complex64."""
    from nbdist.ops.math_ops_elementwise import multiply

    with op_scope(name, "stft", [signals]) as (g, scope):
        x = convert_to_tensor(signals, dtype=dtypes.float32, name="signals")
        if fft_length is None:
            fft_length = 1 << (int(frame_length) - 1).bit_length()
        framed = frame(x, frame_length, frame_step, pad_end=pad_end)
        if window_fn is not None:
            framed = multiply(framed, window_fn(frame_length, dtype=framed.dtype))
        return rfft(framed, [int(fft_length)], name=scope)


def overlap_and_add(signal, frame_step, name=None):
    """The frames of ``signal`` (``[..., frames, frame_length]``) added back
    together ``frame_step`` apart: ``[..., (frames - 1) * frame_step +
    frame_length]``."""
    with op_scope(name, "overlap_and_add", [signal]) as (g, scope):
        x = convert_to_tensor(signal, name="signal")
        return g.create_op("OverlapAndAdd", [x], {"frame_step": int(frame_step),
                                                  "T": x.dtype.base_dtype},
                           name=scope).outputs[0]


def inverse_stft_window_fn(frame_step, forward_window_fn=hann_window, name=None):
    """A window function for ``inverse_stft`` that undoes ``forward_window_fn``
    (the forward window divided by the overlapping sum of its squares)."""
    from nbdist.framework.tensor_util import make_ndarray

    def window_fn(frame_length, dtype=dtypes.float32):
        t = forward_window_fn(frame_length, dtype=dtype)
        if t.op.type != "Const":
            raise ValueError("inverse_stft_window_fn: the forward window must be "
                             "a constant")
        forward = t.op.get_attr("value")
        forward = np.asarray(forward if isinstance(forward, np.ndarray)
                             else make_ndarray(forward), np.float64)
        overlaps = -(-frame_length // frame_step)
        denom = np.pad(np.square(forward), (0, overlaps * frame_step - frame_length))
        denom = np.tile(denom.reshape(overlaps, frame_step).sum(0), overlaps)
        return _window(forward / denom[:frame_length], dtype, name or
                       "inverse_stft_window")

    return window_fn


def inverse_stft(stfts, frame_length, frame_step, fft_length=None,
                 window_fn=hann_window, name=None):
    """The signal whose ``stft`` is ``stfts``: ``irfft`` of each frame, cut to
    ``frame_length``, times ``window_fn``, overlapped and added. With
    ``inverse_stft_window_fn`` it inverts ``stft`` up to the edges."""
    from nbdist.ops.math_ops_elementwise import multiply

    with op_scope(name, "inverse_stft", [stfts]) as (g, scope):
        if fft_length is None:
            fft_length = 1 << (int(frame_length) - 1).bit_length()
        frames = irfft(convert_to_tensor(stfts, name="stfts"), [int(fft_length)])
        frames = frames[..., :frame_length]
        if window_fn is not None:
            frames = multiply(frames, window_fn(frame_length, dtype=frames.dtype))
        return overlap_and_add(frames, frame_step, name=scope)


def mfccs_from_log_mel_spectrograms(log_mel_spectrograms, name=None):
    """MFCCs: the orthonormal-scaled type-II DCT of log-mel spectrograms
    (TF: ``dct(x, type=2) * rsqrt(2 * num_mel_bins)``)."""
    from nbdist.ops.math_ops_elementwise import multiply

    with op_scope(name, "mfccs_from_log_mel_spectrograms",
                  [log_mel_spectrograms]) as (g, scope):
        x = convert_to_tensor(log_mel_spectrograms, name="log_mel_spectrograms")
        bins = x.shape.as_list()[-1] if x.shape.rank else None
        if bins is None:
            raise ValueError("mfccs_from_log_mel_spectrograms: the number of mel "
                             "bins (innermost dimension) must be known")
        return multiply(dct(x, type=2), np.asarray(1.0 / np.sqrt(2.0 * bins),
                                                   x.dtype.as_numpy_dtype),
                        name=scope)


def linear_to_mel_weight_matrix(num_mel_bins=20, num_spectrogram_bins=129,
                                sample_rate=8000, lower_edge_hertz=125.0,
                                upper_edge_hertz=3800.0, dtype=dtypes.float32,
                                name=None):
    """The ``[num_spectrogram_bins, num_mel_bins]`` matrix of triangular HTK-mel
    filters that maps a linear spectrogram to a mel one (TF's construction)."""
    if num_mel_bins <= 0 or lower_edge_hertz < 0 or (
            lower_edge_hertz >= upper_edge_hertz) or upper_edge_hertz > (
            sample_rate / 2):
        raise ValueError("linear_to_mel_weight_matrix: need num_mel_bins > 0 and "
                         "0 <= lower_edge_hertz < upper_edge_hertz <= "
                         "sample_rate / 2")

    def mel(hz):
        return 1127.0 * np.log1p(np.asarray(hz, np.float64) / 700.0)

    # The DC bin is left out of every filter, as TF does.
    linear = np.linspace(0.0, sample_rate / 2, num_spectrogram_bins)[1:]
    spectrogram_mel = mel(linear)[:, None]
    edges = np.linspace(mel(lower_edge_hertz), mel(upper_edge_hertz),
                        num_mel_bins + 2)
    lower, center, upper = edges[:-2], edges[1:-1], edges[2:]
    lower_slopes = (spectrogram_mel - lower) / (center - lower)
    upper_slopes = (upper - spectrogram_mel) / (upper - center)
    weights = np.maximum(0.0, np.minimum(lower_slopes, upper_slopes))
    weights = np.pad(weights, [[1, 0], [0, 0]])
    return _window(weights, dtype, name or "linear_to_mel_weight_matrix")


__all__ = ["dct", "fft", "fft2d", "fft3d", "fftshift", "frame", "hamming_window",
           "hann_window", "idct", "ifft", "ifft2d", "ifft3d", "ifftshift",
           "inverse_stft", "inverse_stft_window_fn", "irfft", "irfft2d", "irfft3d",
           "kaiser_window", "linear_to_mel_weight_matrix",
           "mfccs_from_log_mel_spectrograms", "overlap_and_add", "rfft", "rfft2d",
           "rfft3d", "stft", "vorbis_window"]
