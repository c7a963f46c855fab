"""``tf.signal``/``tf.spectral``: FFTs against ``numpy.fft``, DCTs against
``scipy.fft`` with TF's scaling, framing/STFT/windows/mel matrix against the
values TensorFlow 2.21 gives for the same inputs (checked with /work/tfvenv),
and the complex FFTs' gradients (TF's: ``ifft(g) * n`` and ``fft(g) / n``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft

import nbdist as nd

S = nd.compat.v1.signal
X = np.array([[1.0, 2.0, 0.5, -1.0, 3.0], [0.0, 1.0, -2.0, 4.0, 1.5]], np.float32)
XC = (X + 1j * X[:, ::-1]).astype(np.complex64)


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def run(x, feed=None):
    with nd.Session() as s:
        return s.run(x, feed)


@pytest.mark.parametrize("fn, oracle", [
    (S.fft, lambda x: np.fft.fft(x)), (S.ifft, lambda x: np.fft.ifft(x)),
    (S.fft2d, lambda x: np.fft.fft2(x)), (S.ifft2d, lambda x: np.fft.ifft2(x)),
    (S.fft3d, lambda x: np.fft.fftn(x, axes=(-3, -2, -1))),
    (S.ifft3d, lambda x: np.fft.ifftn(x, axes=(-3, -2, -1))),
])
def test_complex_ffts_match_numpy(fn, oracle):
    x = np.stack([XC, XC * 2])
    got = run(fn(x))
    assert got.dtype == np.complex64
    np.testing.assert_allclose(got, oracle(x), rtol=1e-5, atol=1e-4)


def test_real_ffts_crop_pad_and_invert():
    np.testing.assert_allclose(run(S.rfft(X)), np.fft.rfft(X), atol=1e-5)
    np.testing.assert_allclose(run(S.rfft(X, [8])), np.fft.rfft(X, 8), atol=1e-5)
    assert S.rfft(X, [8]).shape.as_list() == [2, 5]
    np.testing.assert_allclose(run(S.irfft(S.rfft(X), [5])), X, atol=1e-5)
    np.testing.assert_allclose(run(nd.spectral.irfft2d(S.rfft2d(X), [2, 5])), X,
                               atol=1e-5)
    np.testing.assert_allclose(run(S.rfft3d(X[None])), np.fft.rfftn(X[None]),
                               atol=1e-4)


@pytest.mark.parametrize("kind, norm", [(1, None), (2, None), (3, "ortho"),
                                        (4, None)])
def test_dct_and_idct(kind, norm):
    np.testing.assert_allclose(run(S.dct(X, type=kind, norm=norm)),
                               scipy.fft.dct(X, type=kind, norm=norm), rtol=1e-5,
                               atol=1e-5)
    # TF: idct is the DCT of the inverse type, so dct then idct scales by 2N
    # (2(N-1) for type I) unless ortho.
    back = run(S.idct(S.dct(X, type=kind, norm=norm), type=kind, norm=norm))
    scale = 1.0 if norm else 2 * (X.shape[-1] - (kind == 1))
    np.testing.assert_allclose(back, X * scale, rtol=1e-4, atol=1e-4)


def test_fftshift_frame_and_windows():
    np.testing.assert_array_equal(run(S.fftshift(X)), np.fft.fftshift(X))
    np.testing.assert_array_equal(run(S.ifftshift(X, axes=[1])),
                                  np.fft.ifftshift(X, axes=1))
    assert run(S.frame(X, 2, 2)).tolist() == [[[1, 2], [0.5, -1]],
                                              [[0, 1], [-2, 4]]]
    padded = run(S.frame(X[:1], 2, 2, pad_end=True, pad_value=-9))
    assert padded.tolist() == [[[1, 2], [0.5, -1], [3, -9]]]
    assert S.frame(X, 3, 1).shape.as_list() == [2, 3, 3]
    # TF's values: periodic windows for even lengths, symmetric for odd.
    np.testing.assert_allclose(run(S.hann_window(5)), [0, 0.5, 1, 0.5, 0], atol=1e-6)
    np.testing.assert_allclose(run(S.hann_window(6)), 0.5 - 0.5 * np.cos(
        2 * np.pi * np.arange(6) / 6), atol=1e-6)
    np.testing.assert_allclose(run(S.hann_window(6, periodic=False)),
                               np.hanning(6), atol=1e-6)
    np.testing.assert_allclose(run(S.hamming_window(4)),
                               [0.08, 0.54, 1.0, 0.54], atol=1e-6)
    np.testing.assert_allclose(run(S.kaiser_window(5)), np.kaiser(5, 12.0),
                               rtol=1e-5)


def test_stft_is_windowed_rfft_of_frames():
    sig = np.arange(16, dtype=np.float32)[None]
    got = run(S.stft(sig, 8, 4))
    frames = np.stack([sig[0, i:i + 8] for i in (0, 4, 8)])
    np.testing.assert_allclose(got[0], np.fft.rfft(frames * run(S.hann_window(8))),
                               atol=1e-4)
    assert S.stft(nd.zeros([2, 16]), 8, 4).shape.as_list() == [2, 3, 5]


def test_mel_matrix_matches_tensorflow():
    m = run(S.linear_to_mel_weight_matrix(4, 9, 8000, 100.0, 3000.0))
    assert m.shape == (9, 4) and not m[0].any()
    # TF 2.21's column sums for these arguments.
    np.testing.assert_allclose(m.sum(0), [0.676228, 0.86284, 1.186918, 1.748008],
                               atol=1e-5)
    with pytest.raises(ValueError):
        S.linear_to_mel_weight_matrix(4, 9, 8000, 3000.0, 100.0)


def test_fft_gradients_are_tfs():
    v = nd.placeholder(nd.complex64, [3])
    g0 = np.array([1, 2j, 3], np.complex64)
    gf = nd.gradients(S.fft(v), v, grad_ys=g0)[0]
    gi = nd.gradients(S.ifft(v), v, grad_ys=g0)[0]
    got_f, got_i = run([gf, gi], {v: [1, 2, 3]})
    np.testing.assert_allclose(got_f, np.fft.ifft(g0) * 3, atol=1e-5)
    np.testing.assert_allclose(got_i, np.fft.fft(g0) / 3, atol=1e-5)


def test_overlap_and_add_inverse_stft_and_mfccs_match_tensorflow():
    frames = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert run(S.overlap_and_add(frames, 2)).tolist() == [0, 1, 6, 8, 14, 16, 10, 11]
    sig = np.sin(np.arange(64) / 3.0).astype(np.float32)[None]
    back = run(S.inverse_stft(S.stft(sig, 16, 4), 16, 4,
                              window_fn=S.inverse_stft_window_fn(4)))
    # With the inverse window the STFT inverts away from the edges (TF's values
    # agree to 1e-4: 0.2326, 0.2330 ... near the end).
    np.testing.assert_allclose(back[0, 12:52], sig[0, 12:52], atol=1e-4)
    mfcc = run(S.mfccs_from_log_mel_spectrograms(
        np.arange(8, dtype=np.float32).reshape(2, 4)))
    np.testing.assert_allclose(mfcc, [[4.2426, -2.2304, 0, -0.1585],
                                      [15.5563, -2.2304, 0, -0.1585]], atol=1e-4)
