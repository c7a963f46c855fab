"""What a registered partition's fed values must be, checked by the worker.

The master checks a step's feeds against the client graph (``service/feeds.py``),
but a ``RunGraph`` may come straight to a worker, from anyone who can reach it:
its ``send`` tensors then meet the partition's ``_Feed`` nodes unchecked (a
string fed to a float ``Add`` was concatenated; a ``(1, 1)`` block fed for a
``(?, 3)`` placeholder was broadcast). Each ``_Feed`` declares the dtype and
shape its consumers were built for; the worker holds every fed value to them
before the step starts, so a bad feed is ``InvalidArgumentError`` naming the
consumer, the feed, the task and what was expected, and no step is left behind.

>>> from nbdist.proto import graph_pb2
>>> import numpy as np
>>> gd = graph_pb2.GraphDef()
>>> feed = gd.node.add(name="_feed/x_0", op="_Feed")
>>> feed.attr["key"].s = b"x:0"
>>> feed.attr["dtype"].type = 1  # float
>>> _ = feed.attr["shape"].shape.dim.add(size=-1)
>>> _ = gd.node.add(name="y", op="Neg", input=["_feed/x_0"])
>>> checks = partition_feed_checks(gd)
>>> check_partition_feeds(checks, {"x:0": np.zeros(2, np.float32)}, "/job:w/task:0")
>>> check_partition_feeds(checks, {"x:0": np.zeros(2, np.int64)},
...                       "/job:w/task:0")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
nbdist.errors.InvalidArgumentError: Input 0 of node y was passed int64 from x:0 \
incompatible with expected float...[[node y (op Neg) on /job:w/task:0]]
"""

from __future__ import annotations

from nbdist import errors
from nbdist.executor.kernels import array_kernels  # noqa: F401 (registers _Feed)
from nbdist.framework import op_def_registry
from nbdist.framework.importer import node_def_attrs, parse_input
from nbdist.runtime.service.feeds import UNCHECKED_DTYPES, FeedCheck

__all__ = ["check_partition_feeds", "partition_feed_checks"]


def partition_feed_checks(graph_def) -> dict[str, tuple[FeedCheck, str]]:
    """{feed key: (its check, the consumer's op type)} for the ``_Feed`` nodes of
    a partition the executor has already accepted (their attrs parse)."""
    feeds = {n.name: n for n in graph_def.node if n.op == "_Feed"}
    if not feeds:
        return {}
    readers: dict[str, tuple[str, str, int]] = {}
    for node in graph_def.node:
        for i, inp in enumerate(node.input):
            src, idx = parse_input(inp)
            if idx == 0 and src in feeds and src not in readers:
                readers[src] = (node.name, node.op, i)
    odef = op_def_registry.get_op_def("_Feed")
    out = {}
    for name, node in feeds.items():
        attrs = node_def_attrs(node, odef, f"Node '{name}' (op '_Feed')")
        dtype = attrs["dtype"].base_dtype
        if dtype.name in UNCHECKED_DTYPES:
            continue
        consumer, op, index = readers.get(name, (name, "_Feed", 0))
        key = attrs["key"]
        out[key] = (FeedCheck.of(key, consumer, index, dtype, attrs["shape"]), op)
    return out


def check_partition_feeds(checks: dict, feeds: dict, task_name: str) -> None:
    """Raises ``InvalidArgumentError`` for the first fed value of ``feeds`` that
    its ``_Feed`` does not take (keys no ``_Feed`` reads are left alone: the
    step ignores them)."""
    for key, value in feeds.items():
        found = checks.get(key)
        if found is None:
            continue
        check, op = found
        try:
            check.check(value)
        except errors.InvalidArgumentError as e:
            raise errors.InvalidArgumentError(
                None, check.consumer, f"{e.message}\n\t [[node {check.consumer} "
                f"(op {op}) on {task_name}]]") from None
