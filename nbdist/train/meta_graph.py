"""``export_meta_graph`` / ``import_scoped_meta_graph``: a graph with its
collections and saver as a ``MetaGraphDef`` (``nbdist/proto/meta_graph.proto``).
``nd.train.import_meta_graph`` (in ``saver``, as in TF) adds the ``Saver``.

Collections are stored in ``collection_def``:

- variables (``GLOBAL_VARIABLES``, ``TRAINABLE_VARIABLES``, ``global_step``
  ...): a ``bytes_list`` whose values are JSON objects of the names that
  rebuild the variable (``Variable.to_proto()``: ``variable_name``,
  ``initializer_name``, ``snapshot_name``, ``initial_value_name``,
  ``trainable``);
- tensors and operations (``train_op`` ...): a ``node_list`` of their names;
- strings and bytes: a ``bytes_list`` of their UTF-8 bytes.

Other Python objects in collections are skipped. Nothing is pickled.
"""

from __future__ import annotations

import json
import logging
import os

from nbdist.graph.graph_def import import_graph_def
from nbdist.graph.ops import Operation, Tensor, get_default_graph
from nbdist.graph.variables import Variable
from nbdist.proto import meta_graph_pb2
from nbdist.train.file_io import atomic_write

_log = logging.getLogger(__name__)
_VAR_KEY = "variable_name"


def _collection_def(items):
    cd = meta_graph_pb2.CollectionDef()
    if all(isinstance(i, Variable) for i in items):
        cd.bytes_list.value.extend(
            json.dumps(v.to_proto(), sort_keys=True).encode() for v in items)
    elif all(isinstance(i, (Tensor, Operation)) for i in items):
        cd.node_list.value.extend(i.name for i in items)
    elif all(isinstance(i, (str, bytes)) for i in items):
        cd.bytes_list.value.extend(i.encode() if isinstance(i, str) else i
                                   for i in items)
    else:
        return None
    return cd


def export_meta_graph(filename=None, meta_info_def=None, graph_def=None,
                      saver_def=None, collection_list=None, as_text=False,
                      graph=None, export_scope=None, clear_devices=False,
                      clear_extra_defaults=False, strip_default_attrs=False,
                      **kwargs):
    """The ``MetaGraphDef`` of ``graph`` (default graph); written to ``filename``
    when given (binary, or text with ``as_text``)."""
    graph = graph or get_default_graph()
    mg = meta_graph_pb2.MetaGraphDef()
    gd = graph_def if graph_def is not None else graph.as_graph_def()
    mg.graph_def.CopyFrom(gd)
    if clear_devices:
        for nd in mg.graph_def.node:
            nd.device = ""
    if saver_def is not None:
        mg.saver_def.CopyFrom(saver_def)
    keys = collection_list if collection_list is not None else (
        graph.get_all_collection_keys())
    for key in keys:
        items = graph.get_collection(key)
        if not items:
            continue
        cd = _collection_def(items)
        if cd is None:
            _log.debug("Collection %s not exported: it holds Python objects", key)
            continue
        mg.collection_def[key].CopyFrom(cd)
    if filename:
        if as_text:
            from google.protobuf import text_format

            data = text_format.MessageToString(mg).encode()
        else:
            data = mg.SerializeToString()
        atomic_write(os.fspath(filename), lambda f: f.write(data))
    return mg


def read_meta_graph_file(filename):
    from google.protobuf import message, text_format

    with open(filename, "rb") as f:
        data = f.read()
    mg = meta_graph_pb2.MetaGraphDef()
    try:
        mg.ParseFromString(data)
        return mg
    except message.DecodeError:
        pass
    try:
        text_format.Parse(data.decode("utf-8"), mg)
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise OSError(f"Cannot parse file {filename}: {e}") from None
    return mg


def import_scoped_meta_graph(meta_graph_or_file, clear_devices=False,
                             import_scope=None):
    """Imports a ``MetaGraphDef`` (or a ``.meta`` file) into the default graph
    under ``import_scope``, rebuilds its collections and returns it."""
    if isinstance(meta_graph_or_file, meta_graph_pb2.MetaGraphDef):
        mg = meta_graph_or_file
    else:
        mg = read_meta_graph_file(os.fspath(meta_graph_or_file))
    gd = mg.graph_def
    if clear_devices:
        gd = type(gd)()
        gd.CopyFrom(mg.graph_def)
        for nd in gd.node:
            nd.device = ""
    graph = get_default_graph()
    import_graph_def(gd, name=import_scope or "")
    pre = (import_scope + "/") if import_scope else ""
    for key, cd in sorted(mg.collection_def.items()):
        kind = cd.WhichOneof("kind")
        if kind == "node_list":
            for name in cd.node_list.value:
                graph.add_to_collection(key, graph.as_graph_element(pre + name))
        elif kind == "bytes_list":
            for value in cd.bytes_list.value:
                item = value
                try:
                    d = json.loads(value.decode())
                except (UnicodeDecodeError, ValueError):
                    d = None
                if isinstance(d, dict) and _VAR_KEY in d:
                    item = Variable.from_proto(d, import_scope=import_scope)
                graph.add_to_collection(key, item)
    return mg


__all__ = ["export_meta_graph", "import_scoped_meta_graph", "read_meta_graph_file"]
