"""``nd.summary``: TensorBoard summaries, as ``tf.compat.v1.summary``.

Summary ops (``scalar``, ``histogram``, ``image``, ``text``,
``tensor_summary``, ``merge``, ``merge_all``) output a serialized ``Summary``;
a ``FileWriter`` writes them to an event file that TensorBoard reads.

>>> import tempfile
>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     x = nd.placeholder(nd.float32, [None])
...     _ = nd.summary.scalar("mean", nd.reduce_mean(x))
...     _ = nd.summary.histogram("x", x)
...     merged = nd.summary.merge_all()
...     with nd.Session() as sess, nd.summary.FileWriter(tempfile.mkdtemp()) as w:
...         w.add_summary(sess.run(merged, {x: [1.0, 2.0, 3.0]}), global_step=1)
"""

from __future__ import annotations

from nbdist.ops.summary_ops import (
    histogram,
    image,
    merge,
    merge_all,
    scalar,
    tensor_summary,
    text,
)
from nbdist.proto.summary_pb2 import (
    Event,
    HistogramProto,
    SessionLog,
    Summary,
    SummaryDescription,
    SummaryMetadata,
    TaggedRunMetadata,
)
from nbdist.train.summary_writer import FileWriter, FileWriterCache

__all__ = [
    "Event",
    "FileWriter",
    "FileWriterCache",
    "HistogramProto",
    "SessionLog",
    "Summary",
    "SummaryDescription",
    "SummaryMetadata",
    "TaggedRunMetadata",
    "histogram",
    "image",
    "merge",
    "merge_all",
    "scalar",
    "tensor_summary",
    "text",
]

from nbdist.ops.audio_summary_ops import audio  # noqa: E402

_V2_SUMMARY_OPS = "_SUMMARY_V2"
_V2_WRITER_INITS = "_SUMMARY_WRITER_V2"


def all_v2_summary_ops():
    """The graph's TF2-style summary ops (collection ``_SUMMARY_V2``): nbdist
    builds only TF1 summaries, so this is what a program added there itself."""
    from nbdist.framework.ops import get_collection

    return get_collection(_V2_SUMMARY_OPS)


def initialize(graph=None, session=None):
    """Runs the graph's TF2-style summary-writer initializers (collection
    ``_SUMMARY_WRITER_V2``) in ``session`` (default: the default session)."""
    from nbdist.framework.default_session import get_default_session
    from nbdist.framework.ops import get_default_graph

    graph = graph or get_default_graph()
    session = session or get_default_session()
    if session is None:
        raise ValueError("Argument `session must be passed if no default session "
                         "exists")
    inits = graph.get_collection(_V2_WRITER_INITS)
    if inits:
        session.run(inits)


__all__ += ["all_v2_summary_ops", "audio", "initialize"]


def get_summary_description(node_def):
    """The ``SummaryDescription`` in a TF1 ``TensorSummary`` node's
    ``description`` attr (JSON), as TF reads it.

    >>> import nbdist as nd
    >>> from nbdist.proto.node_def_pb2 import NodeDef
    >>> node = NodeDef(op="TensorSummary")
    >>> node.attr["description"].s = b'{"type_hint": "image"}'
    >>> nd.summary.get_summary_description(node).type_hint
    'image'
    """
    from google.protobuf import json_format

    if node_def.op != "TensorSummary":
        raise ValueError(f"Can't get_summary_description on {node_def.op}")
    description = node_def.attr["description"].s.decode("utf-8")
    return json_format.Parse(description, SummaryDescription())


__all__ += ["get_summary_description"]
