"""``nd.signal``: TF's ``tf.signal`` — FFTs, DCTs, framing, STFT, windows and the
mel matrix (see ``nbdist.ops.spectral_ops``).

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.signal.frame([1, 2, 3, 4, 5], 2, 2)).tolist()
[[1, 2], [3, 4]]
"""

from __future__ import annotations

from nbdist.ops.spectral_ops import (
    dct,
    fft,
    fft2d,
    fft3d,
    fftshift,
    frame,
    hamming_window,
    hann_window,
    idct,
    ifft,
    ifft2d,
    ifft3d,
    ifftshift,
    inverse_stft,
    inverse_stft_window_fn,
    irfft,
    irfft2d,
    irfft3d,
    kaiser_window,
    linear_to_mel_weight_matrix,
    mfccs_from_log_mel_spectrograms,
    overlap_and_add,
    rfft,
    rfft2d,
    rfft3d,
    stft,
    vorbis_window,
)

__all__ = ["dct", "fft", "fft2d", "fft3d", "fftshift", "frame", "hamming_window",
           "hann_window", "idct", "ifft", "ifft2d", "ifft3d", "ifftshift",
           "inverse_stft", "inverse_stft_window_fn", "irfft", "irfft2d", "irfft3d",
           "kaiser_window", "linear_to_mel_weight_matrix",
           "mfccs_from_log_mel_spectrograms", "overlap_and_add", "rfft", "rfft2d",
           "rfft3d", "stft", "vorbis_window"]
