"""Summary ops, as ``tf.compat.v1.summary``: ``scalar``, ``histogram``,
``image``, ``text``, ``tensor_summary``, ``merge`` and ``merge_all``.

Each op outputs a scalar string: a serialized ``Summary`` proto
(``nbdist.proto.summary_pb2``, TensorFlow's field numbers), computed by its
kernel on whichever task runs it. ``nd.summary.FileWriter`` writes them to
TensorBoard event files.

>>> import nbdist as nd
>>> from nbdist.proto import summary_pb2
>>> g = nd.Graph()
>>> with g.as_default():
...     loss = nd.summary.scalar("loss", nd.constant(0.5))
...     with nd.Session() as sess:
...         summary = summary_pb2.Summary.FromString(sess.run(loss))
>>> summary.value[0].tag, summary.value[0].simple_value
('loss', 0.5)
"""

from __future__ import annotations

import logging
import re

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.constant_op import constant
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.op_util import FLOAT, NUMERIC, check_type, op_scope
from nbdist.framework.ops import (
    GraphKeys,
    add_to_collection,
    convert_to_tensor,
    get_collection,
)
from nbdist.framework.tensor_shape import TensorShape
from nbdist.proto import summary_pb2

_log = logging.getLogger("nbdist")
_SCALAR_STRING = [(dtypes.string, TensorShape([]))]
_IMAGE_TYPES = (dtypes.uint8, *FLOAT)
# TF's ImageSummary default: opaque red for pixels with a non-finite value.
_BAD_COLOR = np.array([255, 0, 0, 255], dtype=np.uint8)


# -- shape functions --------------------------------------------------------------------
def _check_scalar_tag(c, i=0, what="tag"):
    check_type(c, i, (dtypes.string,), what)
    s = c.shape(i)
    if s.rank not in (None, 0):
        raise ValueError(f"{what} must be a scalar string, got shape {s}")


def _scalar_summary_infer(c):
    check_type(c, 0, (dtypes.string,), "tags")
    check_type(c, 1, NUMERIC, "values")
    tags, values = c.shape(0), c.shape(1)
    if not tags.is_compatible_with(values):
        raise ValueError(f"tags and values are not the same shape: {tags} != {values}")
    return _SCALAR_STRING


def _histogram_summary_infer(c):
    _check_scalar_tag(c)
    check_type(c, 1, NUMERIC, "values")
    return _SCALAR_STRING


def _image_summary_infer(c):
    _check_scalar_tag(c)
    check_type(c, 1, _IMAGE_TYPES, "tensor")
    s = c.shape(1)
    if s.rank is not None and (s.rank != 4 or s[3] not in (None, 1, 3, 4)):
        raise ValueError(
            "Tensor must be 4-D [batch_size, height, width, channels] "
            f"with last dim 1, 3, or 4, not {s}"
        )
    if c.attr("max_images") < 1:
        raise ValueError(f"max_images must be >= 1, got {c.attr('max_images')}")
    return _SCALAR_STRING


def _tensor_summary_infer(c):
    _check_scalar_tag(c)
    _check_scalar_tag(c, 2, "serialized_summary_metadata")
    return _SCALAR_STRING


def _merge_summary_infer(c):
    for i in range(len(c.input_dtypes)):
        check_type(c, i, (dtypes.string,), f"inputs[{i}]")
    return _SCALAR_STRING


register_op(
    "ScalarSummary", _scalar_summary_infer, attrs={"T": ("type", None)}, num_inputs=2
)
register_op(
    "HistogramSummary",
    _histogram_summary_infer,
    attrs={"T": ("type", dtypes.float32)},
    num_inputs=2,
)
register_op(
    "ImageSummary",
    _image_summary_infer,
    attrs={
        "max_images": ("int", 3),
        "T": ("type", dtypes.float32),
        "bad_color": ("tensor", _BAD_COLOR),
    },
    num_inputs=2,
)
register_op(
    "TensorSummaryV2", _tensor_summary_infer, attrs={"T": ("type", None)}, num_inputs=3
)
register_op(
    "MergeSummary", _merge_summary_infer, attrs={"N": ("int", REQUIRED)}, min_inputs=1
)
for _t in (
    "ScalarSummary",
    "HistogramSummary",
    "ImageSummary",
    "TensorSummaryV2",
    "MergeSummary",
):
    NotDifferentiable(_t)


# -- tags and collections ---------------------------------------------------------------
_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w\.]")


def _clean_tag(name):
    """``name`` with characters TensorBoard does not allow replaced by ``_``."""
    if name is not None:
        new_name = _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")
        if new_name != name:
            _log.info("Summary name %s is illegal; using %s instead.", name, new_name)
            name = new_name
    return name


class _SummaryScope:
    """TF's ``summary_scope``: a name scope, and the tag (the scope's name,
    prefixed by ``family`` so TensorBoard shows it in that tab)."""

    def __init__(self, name, family, values):
        name, self.family = _clean_tag(name), _clean_tag(family)
        base = name if self.family is None else f"{self.family}/{name}"
        self._scope = op_scope(base, None, values)

    def __enter__(self):
        g, scope = self._scope.__enter__()
        tag = scope.rstrip("/")
        if self.family is not None:
            tag = f"{self.family}/{tag}"
        return g, tag, scope

    def __exit__(self, *exc):
        return self._scope.__exit__(*exc)


def _collect(value, collections, default_collections):
    for key in default_collections if collections is None else collections:
        add_to_collection(key, value)


def _summary_op(
    op_type, name, family, tensor, collections, attrs=None, extra_inputs=()
):
    with _SummaryScope(name, family, [tensor]) as (g, tag, scope):
        tensor = convert_to_tensor(tensor)
        inputs = [constant(tag, name="tag"), tensor, *extra_inputs]
        out = g.create_op(
            op_type, inputs, {"T": tensor.dtype.base_dtype, **(attrs or {})}, name=scope
        ).outputs[0]
    _collect(out, collections, [GraphKeys.SUMMARIES])
    return out


# -- the public functions -----------------------------------------------------------------
def scalar(name, tensor, collections=None, family=None):
    """A ``Summary`` with one ``simple_value``: the real scalar ``tensor``.

    Added to ``collections`` (default ``[GraphKeys.SUMMARIES]``); the tag is the
    op's name scope, prefixed by ``family``.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     s = nd.summary.scalar("loss", nd.constant(1.5), family="train")
    >>> s.op.name
    'train/loss'
    """
    return _summary_op("ScalarSummary", name, family, tensor, collections)


def histogram(name, values, collections=None, family=None):
    """A ``Summary`` with a ``HistogramProto`` of ``values`` (any shape) over
    TensorFlow's default buckets; a non-finite value is an error when it runs.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     h = nd.summary.histogram("weights", nd.constant([1.0, 2.0, 2.0]))
    """
    return _summary_op("HistogramSummary", name, family, values, collections)


def image(name, tensor, max_outputs=3, collections=None, family=None):
    """A ``Summary`` with up to ``max_outputs`` PNG images from ``tensor``, a 4-D
    ``[batch, height, width, channels]`` (channels 1, 3 or 4) ``uint8`` or float
    tensor. Floats are scaled into [0, 255] as in TF: by ``255 / max`` when all
    values are >= 0, else centred on 128 and scaled by ``127 / max(|v|)``. Tags
    are ``<tag>/image/<i>``, or ``<tag>/image`` when ``max_outputs`` is 1.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     im = nd.summary.image("inputs", nd.zeros([2, 8, 8, 3]), max_outputs=1)
    """
    return _summary_op(
        "ImageSummary",
        name,
        family,
        tensor,
        collections,
        attrs={"max_images": int(max_outputs)},
    )


def tensor_summary(
    name,
    tensor,
    summary_description=None,
    collections=None,
    summary_metadata=None,
    family=None,
    display_name=None,
):
    """A ``Summary`` holding ``tensor`` as a ``TensorProto``, with
    ``summary_metadata`` (a ``SummaryMetadata``) telling TensorBoard which
    plugin reads it.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     t = nd.summary.tensor_summary("t", nd.constant([1, 2]))
    """
    if summary_metadata is None:
        summary_metadata = summary_pb2.SummaryMetadata()
    if summary_description is not None:
        summary_metadata.summary_description = summary_description
    if display_name is not None:
        summary_metadata.display_name = display_name
    metadata = summary_metadata.SerializeToString()
    with _SummaryScope(name, family, [tensor]) as (g, tag, scope):
        tensor = convert_to_tensor(tensor)
        inputs = [
            constant(tag, name="tag"),
            tensor,
            constant(metadata, name="serialized_summary_metadata"),
        ]
        out = g.create_op(
            "TensorSummaryV2", inputs, {"T": tensor.dtype.base_dtype}, name=scope
        ).outputs[0]
    _collect(out, collections, [GraphKeys.SUMMARIES])
    return out


def text(name, tensor, collections=None):
    """A ``Summary`` of the string ``tensor`` that TensorBoard's text plugin
    shows (Markdown).

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     t = nd.summary.text("notes", nd.constant("**hello**"))
    """
    tensor = convert_to_tensor(tensor)
    if tensor.dtype.base_dtype is not dtypes.string:
        raise ValueError(
            f"Expected tensor {tensor.name} to have dtype string, got "
            f"{tensor.dtype.name}"
        )
    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text")
    )
    return tensor_summary(
        name, tensor, collections=collections, summary_metadata=metadata
    )


def merge(inputs, collections=None, name=None):
    """One ``Summary`` with the values of every summary in ``inputs`` (string
    tensors of serialized summaries); a tag repeated across them is an error
    when it runs.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     a = nd.summary.scalar("a", nd.constant(1.0))
    ...     b = nd.summary.scalar("b", nd.constant(2.0))
    ...     both = nd.summary.merge([a, b])
    """
    inputs = list(inputs)
    if not inputs:
        raise ValueError("merge needs at least one summary to merge")
    with op_scope(name, "Merge", inputs) as (g, scope):
        ts = [convert_to_tensor(t) for t in inputs]
        out = g.create_op("MergeSummary", ts, {"N": len(ts)}, name=scope).outputs[0]
    _collect(out, collections, [])
    return out


def merge_all(key=GraphKeys.SUMMARIES, scope=None, name=None):
    """``merge`` of every summary in collection ``key`` (those whose name matches
    ``scope``, if given), or None when there is none.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     _ = nd.summary.scalar("loss", nd.constant(1.0))
    ...     merged = nd.summary.merge_all()
    """
    summary_ops = get_collection(key, scope=scope)
    if not summary_ops:
        return None
    return merge(summary_ops, name=name)
