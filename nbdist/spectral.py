"""``nd.spectral``: TF1's ``tf.spectral``, the FFT and DCT names of
``nd.signal``.

>>> import nbdist as nd
>>> nd.spectral.rfft is nd.signal.rfft
True
"""

from __future__ import annotations

from nbdist.ops.spectral_ops import (
    dct,
    fft,
    fft2d,
    fft3d,
    idct,
    ifft,
    ifft2d,
    ifft3d,
    irfft,
    irfft2d,
    irfft3d,
    rfft,
    rfft2d,
    rfft3d,
)

__all__ = ["dct", "fft", "fft2d", "fft3d", "idct", "ifft", "ifft2d", "ifft3d",
           "irfft", "irfft2d", "irfft3d", "rfft", "rfft2d", "rfft3d"]
