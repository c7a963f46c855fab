"""``write_graph``: a ``GraphDef`` to a file (TF's ``graph_io``)."""

from __future__ import annotations

import os

from nbdist.train.file_io import atomic_write, local_path

__all__ = ["write_graph"]


def write_graph(graph_or_graph_def, logdir, name, as_text=True):
    """Writes a graph (or ``GraphDef``) to ``logdir/name``, creating
    ``logdir``; protobuf text format (``.pbtxt``) by default, binary with
    ``as_text=False``. Returns the file's path.

    >>> import nbdist as nd, tempfile
    >>> g = nd.Graph()
    >>> with g.as_default():
    ...     _ = nd.constant(1.0, name="c")
    >>> path = nd.train.write_graph(g, tempfile.mkdtemp(), "g.pbtxt")
    >>> with open(path) as f:
    ...     'name: "c"' in f.read()
    True
    """
    graph_def = graph_or_graph_def
    if hasattr(graph_def, "as_graph_def"):
        graph_def = graph_def.as_graph_def()
    logdir = local_path(logdir)
    os.makedirs(logdir or ".", exist_ok=True)
    path = os.path.join(logdir, name)
    if as_text:
        from google.protobuf import text_format

        data = text_format.MessageToString(graph_def).encode()
    else:
        data = graph_def.SerializeToString()
    atomic_write(path, lambda f: f.write(data))
    return path
