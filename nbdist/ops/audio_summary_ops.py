"""``nd.summary.audio``: a ``Summary`` of WAV clips (TF's ``AudioSummaryV2``).

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     a = nd.summary.audio("clip", nd.zeros([1, 100]), sample_rate=8000.0)
...     with nd.Session() as s:
...         v = nd.Summary.FromString(s.run(a)).value[0]
>>> v.tag, v.audio.length_frames, v.audio.content_type
('clip/audio/0', 100, 'audio/wav')
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.constant_op import constant
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import GraphKeys, convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.summary_ops import _collect, _SummaryScope


def _audio_summary_infer(c):
    if c.dtype(1) is not dtypes.float32:
        raise TypeError(f"AudioSummaryV2: tensor must be float32, got "
                        f"{c.dtype(1).name}")
    s = c.shape(1)
    if s.rank is not None and s.rank not in (2, 3):
        raise ValueError(f"Tensor must be 3-D or 2-D, got: {s}")
    if c.attr("max_outputs") < 1:
        raise ValueError(f"max_outputs must be >= 1, got {c.attr('max_outputs')}")
    return [(dtypes.string, TensorShape([]))]


register_op("AudioSummaryV2", _audio_summary_infer,
            attrs={"max_outputs": ("int", 3)}, num_inputs=3)
NotDifferentiable("AudioSummaryV2")


def audio(name, tensor, sample_rate, max_outputs=3, collections=None, family=None):
    """A ``Summary`` with up to ``max_outputs`` 16-bit WAV clips from the float32
    ``tensor`` (``[batch, frames, channels]`` or ``[batch, frames]``, values in
    [-1, 1]) at ``sample_rate`` Hz. Tags are ``<tag>/audio/<i>``, or
    ``<tag>/audio`` when ``max_outputs`` is 1."""
    with _SummaryScope(name, family, [tensor]) as (g, tag, scope):
        tensor = convert_to_tensor(tensor)
        rate = convert_to_tensor(sample_rate, dtype=dtypes.float32,
                                 name="sample_rate")
        out = g.create_op("AudioSummaryV2", [constant(tag, name="tag"), tensor, rate],
                          {"max_outputs": int(max_outputs)}, name=scope).outputs[0]
    _collect(out, collections, [GraphKeys.SUMMARIES])
    return out


__all__ = ["audio"]
