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
