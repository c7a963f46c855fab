"""Kernels of ``nbdist.ops.spectral_ops`` on ``numpy.fft`` and ``scipy.fft``."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import op_error
from nbdist.ops import spectral_ops  # noqa: F401  (registers the ops)

_COMPLEX = {"FFT": (np.fft.fftn, 1), "IFFT": (np.fft.ifftn, 1),
            "FFT2D": (np.fft.fftn, 2), "IFFT2D": (np.fft.ifftn, 2),
            "FFT3D": (np.fft.fftn, 3), "IFFT3D": (np.fft.ifftn, 3)}
_REAL = {"RFFT": (np.fft.rfftn, 1), "RFFT2D": (np.fft.rfftn, 2),
         "RFFT3D": (np.fft.rfftn, 3), "IRFFT": (np.fft.irfftn, 1),
         "IRFFT2D": (np.fft.irfftn, 2), "IRFFT3D": (np.fft.irfftn, 3)}


def _complex_factory(fn, k):
    def factory(node):
        def compute(step, x):
            x = np.asarray(x)
            axes = tuple(range(-k, 0))
            return fn(x, axes=axes).astype(x.dtype) if x.size else x.copy()

        return compute

    return factory


def _real_factory(fn, k, inverse):
    def factory(node):
        out = np.dtype((node.attrs["Treal"] if inverse else node.attrs["Tcomplex"])
                       .as_numpy_dtype)

        def compute(step, x, fft_length):
            x = np.asarray(x)
            lengths = [int(v) for v in np.ravel(fft_length)]
            if len(lengths) != k:
                raise op_error(node, f"fft_length must have {k} elements, got "
                                     f"{len(lengths)}")
            if x.ndim < k:
                raise op_error(node, f"input must have rank >= {k}")
            # numpy crops or zero-pads each axis to fft_length as TF does (the
            # inverse reading fft_length[-1] // 2 + 1 inner values).
            return fn(x, s=lengths, axes=tuple(range(-k, 0))).astype(out)

        return compute

    return factory


for _t, (_fn, _k) in _COMPLEX.items():
    register_kernel(_t)(_complex_factory(_fn, _k))
for _t, (_fn, _k) in _REAL.items():
    register_kernel(_t)(_real_factory(_fn, _k, _t.startswith("I")))


@register_kernel("DCT")
def dct_kernel(node):
    # scipy.fft on first use: importing it costs a third of a second that
    # every session's first run paid while loading the kernels.
    import scipy.fft

    kind, norm = node.attrs["type"], node.attrs["norm"] or None
    fn = scipy.fft.idct if node.attrs["inverse"] else scipy.fft.dct

    def compute(step, x):
        x = np.asarray(x)
        if node.attrs["inverse"] and norm is None:
            # TF's idct is the unnormalized DCT of the inverse type: 2N x scipy's.
            inv = {1: 1, 2: 3, 3: 2, 4: 4}[kind]
            return scipy.fft.dct(x, type=inv, axis=-1).astype(x.dtype)
        return fn(x, type=kind, norm=norm, axis=-1).astype(x.dtype)

    return compute


@register_kernel("FFTShift")
def fftshift_kernel(node):
    axes, inverse = tuple(node.attrs["axes"]), node.attrs["inverse"]
    fn = np.fft.ifftshift if inverse else np.fft.fftshift

    def compute(step, x):
        return fn(np.asarray(x), axes=axes)

    return compute


@register_kernel("Frame")
def frame_kernel(node):
    a = node.attrs
    length, step_, axis = a["frame_length"], a["frame_step"], a["axis"]

    def compute(step, x):
        x = np.asarray(x)
        ax = axis % x.ndim
        n = x.shape[ax]
        if a["pad_end"]:
            frames = -(-n // step_)
            need = max(0, (frames - 1) * step_ + length - n)
            pad = [(0, 0)] * x.ndim
            pad[ax] = (0, need)
            x = np.pad(x, pad, constant_values=a["pad_value"])
        else:
            frames = max(0, 1 + (n - length) // step_)
        idx = np.arange(frames)[:, None] * step_ + np.arange(length)[None, :]
        return np.take(x, idx, axis=ax)

    return compute


@register_kernel("OverlapAndAdd")
def overlap_and_add_kernel(node):
    step_ = node.attrs["frame_step"]

    def compute(step, x):
        x = np.asarray(x)
        frames, length = x.shape[-2:]
        out = np.zeros(x.shape[:-2] + ((frames - 1) * step_ + length if frames
                                       else 0,), x.dtype)
        for i in range(frames):
            out[..., i * step_:i * step_ + length] += x[..., i, :]
        return out

    return compute
