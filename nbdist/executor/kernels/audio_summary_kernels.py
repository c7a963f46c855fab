"""Kernel of ``AudioSummaryV2``: each clip as 16-bit PCM WAV (Python's ``wave``)."""

from __future__ import annotations

import io
import wave

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, op_error
from nbdist.executor.kernels.summary_kernels import (
    _scalar_string,
    _serialized,
    _text,
)
from nbdist.ops import audio_summary_ops  # noqa: F401  (registers the op)
from nbdist.proto import summary_pb2


def wav_bytes(frames: np.ndarray, sample_rate: int) -> bytes:
    """``frames`` (``[length, channels]`` floats in [-1, 1]) as a WAV file."""
    # As TF: scaled by 2**15, rounded, then clamped to int16 (1.0 -> 32767).
    pcm = np.clip(np.round(np.asarray(frames, np.float64) * 32768.0), -32768, 32767)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(frames.shape[1])
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.astype("<i2").tobytes())
    return buffer.getvalue()


@register_kernel("AudioSummaryV2")
def audio_summary_kernel(node):
    max_outputs = int(node.attrs["max_outputs"])

    def compute(step, tag, tensor, sample_rate):
        tag = _text(_scalar_string(node, tag, "tag"))
        rate = float(_scalar_string(node, sample_rate, "sample_rate"))
        if rate <= 0:
            raise op_error(node, f"sample_rate must be > 0, got {rate}")
        t = np.asarray(tensor, np.float32)
        if t.ndim not in (2, 3):
            raise op_error(node, f"Tensor must be 3-D or 2-D, got: {fmt(t.shape)}")
        if t.ndim == 2:
            t = t[:, :, None]
        summary = summary_pb2.Summary()
        for i in range(min(max_outputs, t.shape[0])):
            value = summary.value.add(
                tag=f"{tag}/audio/{i}" if max_outputs > 1 else f"{tag}/audio")
            value.audio.sample_rate = rate
            value.audio.num_channels = t.shape[2]
            value.audio.length_frames = t.shape[1]
            value.audio.content_type = "audio/wav"
            value.audio.encoded_audio_string = wav_bytes(t[i], int(rate))
        return _serialized(summary)

    return compute
