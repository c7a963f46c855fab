"""``export_meta_graph`` / ``import_scoped_meta_graph``: a graph with its
collections and saver as a ``MetaGraphDef`` (``nbdist/proto/meta_graph.proto``).
``nd.train.import_meta_graph`` (in ``saver``, as in TF) adds the ``Saver``.

Collections are stored in ``collection_def``:

- variables (``GLOBAL_VARIABLES``, ``TRAINABLE_VARIABLES``, ``global_step``
  ...): a ``bytes_list`` of serialized ``VariableDef`` protos (TF's, same
  field numbers: ``variable_name``, ``initializer_name``, ``snapshot_name``,
  ``initial_value_name``, ``trainable``, ``save_slice_info_def``), so TF
  reads them; JSON objects of the same names (what older nbdist wrote) are
  still read;
- savers (``GraphKeys.SAVERS``): a ``bytes_list`` of ``SaverDef`` protos,
  turned back into ``Saver`` objects by ``nd.train.import_meta_graph``;
- queue runners (``GraphKeys.QUEUE_RUNNERS``): a ``bytes_list`` of
  ``QueueRunnerDef`` protos, turned back into ``QueueRunner`` objects;
- tensors and operations (``train_op`` ...): a ``node_list`` of their names;
- strings and bytes: a ``bytes_list`` of their UTF-8 bytes; ints and floats:
  an ``int64_list`` / ``float_list``.

Other Python objects in collections are skipped. Nothing is pickled.
``meta_info_def`` (the tags, in a SavedModel), ``signature_def``
and ``asset_file_def`` are carried through (``nd.saved_model`` fills them).
"""

from __future__ import annotations

import json
import logging
import re

from nbdist.framework import op_def_registry
from nbdist.framework.importer import import_graph_def
from nbdist.framework.ops import Operation, Tensor, get_default_graph
from nbdist.ops.variables import Variable
from nbdist.proto import meta_graph_pb2, variable_pb2
from nbdist.proto.queue_runner_pb2 import QueueRunnerDef
from nbdist.train.file_io import atomic_write, local_path
from nbdist.train.queue_runner import QueueRunner

_log = logging.getLogger(__name__)
_VAR_KEY = "variable_name"
SAVERS = "savers"  # GraphKeys.SAVERS: restored by nd.train.import_meta_graph
QUEUE_RUNNERS = "queue_runners"  # GraphKeys.QUEUE_RUNNERS: QueueRunnerDef protos
# TF's collections of VariableDef protos.
_VARIABLE_KEYS = frozenset({
    "variables", "trainable_variables", "local_variables", "model_variables",
    "moving_average_variables", "global_step", "metric_variables"})


def variable_def(names: dict) -> variable_pb2.VariableDef:
    """TF's ``VariableDef`` of a ``Variable.to_proto()`` dict."""
    vd = variable_pb2.VariableDef(
        variable_name=names["variable_name"],
        initializer_name=names["initializer_name"],
        snapshot_name=names["snapshot_name"],
        initial_value_name=names.get("initial_value_name") or "",
        trainable=bool(names.get("trainable", True)))
    info = names.get("save_slice_info")
    if info:
        vd.save_slice_info_def.full_name = info["full_name"]
        vd.save_slice_info_def.full_shape.extend(info["full_shape"])
        vd.save_slice_info_def.var_offset.extend(info["var_offset"])
        vd.save_slice_info_def.var_shape.extend(info["var_shape"])
    return vd


def _variable_names(key, value: bytes):
    """The ``Variable.from_proto`` dict a collection value holds, or None."""
    if value[:1] == b"{":
        try:
            d = json.loads(value.decode())
        except (UnicodeDecodeError, ValueError):
            return None
        return d if isinstance(d, dict) and _VAR_KEY in d else None
    try:
        vd = variable_pb2.VariableDef.FromString(value)
    except Exception:  # noqa: BLE001 - any undecodable bytes are not a VariableDef
        return None
    if key not in _VARIABLE_KEYS and not (
            vd.variable_name.endswith(":0") and vd.snapshot_name
            and vd.initializer_name):
        return None
    if vd.is_resource:
        raise ValueError(f"Collection {key}: resource variable {vd.variable_name} "
                         "is not supported (nbdist has ref variables)")
    names = {"variable_name": vd.variable_name,
             "initializer_name": vd.initializer_name,
             "snapshot_name": vd.snapshot_name,
             "initial_value_name": vd.initial_value_name,
             "trainable": vd.trainable}
    if vd.HasField("save_slice_info_def"):
        info = vd.save_slice_info_def
        names["save_slice_info"] = {
            "full_name": info.full_name, "full_shape": list(info.full_shape),
            "var_offset": list(info.var_offset), "var_shape": list(info.var_shape)}
    return names


def _collection_def(items):
    cd = meta_graph_pb2.CollectionDef()
    if all(isinstance(i, Variable) for i in items):
        cd.bytes_list.value.extend(
            variable_def(v.to_proto()).SerializeToString() for v in items)
    elif all(isinstance(i, QueueRunner) for i in items):
        cd.bytes_list.value.extend(i.to_proto().SerializeToString() for i in items)
    elif all(hasattr(i, "as_saver_def") for i in items):
        cd.bytes_list.value.extend(i.as_saver_def().SerializeToString()
                                   for i in items)
    elif all(isinstance(i, bool) for i in items):
        return None
    elif all(isinstance(i, int) for i in items):
        cd.int64_list.value.extend(items)
    elif all(isinstance(i, float) for i in items):
        cd.float_list.value.extend(items)
    elif all(isinstance(i, (Tensor, Operation)) for i in items):
        cd.node_list.value.extend(i.name for i in items)
    elif all(isinstance(i, (str, bytes)) for i in items):
        cd.bytes_list.value.extend(i.encode() if isinstance(i, str) else i
                                   for i in items)
    else:
        return None
    return cd


def _saver_scope(saver_def) -> str:
    return saver_def.restore_op_name.rpartition("/")[0]


def _remove_extraneous_savers(mg, saver_def, graph):
    """Drops the nodes of every saver but ``saver_def``'s (each saver's ops
    live in its own name scope, the scope of its ``restore_all`` op)."""
    keep = _saver_scope(saver_def) if saver_def is not None else None
    scopes = {_saver_scope(s.as_saver_def()) for s in graph.get_collection(SAVERS)
              if hasattr(s, "as_saver_def")}
    scopes |= {n.name.rpartition("/")[0] for n in mg.graph_def.node
               if n.op == "NoOp" and n.name.endswith("/restore_all")}
    drop = {s for s in scopes if s and s != keep}
    if not drop:
        return
    pattern = re.compile("|".join(re.escape(s) + "/" for s in sorted(drop)))
    kept = [n for n in mg.graph_def.node if not pattern.match(n.name)]
    del mg.graph_def.node[:]
    mg.graph_def.node.extend(kept)


def export_meta_graph(filename=None, meta_info_def=None, graph_def=None,
                      saver_def=None, collection_list=None, as_text=False,
                      graph=None, export_scope=None, clear_devices=False,
                      clear_extra_defaults=False, strip_default_attrs=False,
                      clear_extraneous_savers=False, **kwargs):
    """The ``MetaGraphDef`` of ``graph`` (default graph); written to ``filename``
    when given (binary, or text with ``as_text``).

    ``clear_extraneous_savers``: leave out the ops of savers other than
    ``saver_def``'s and the ``savers`` collection (as TF).
    """
    graph = graph or get_default_graph()
    mg = meta_graph_pb2.MetaGraphDef()
    if meta_info_def is not None:
        mg.meta_info_def.CopyFrom(meta_info_def)
    gd = graph_def if graph_def is not None else graph.as_graph_def()
    mg.graph_def.CopyFrom(gd)
    if clear_devices:
        for nd in mg.graph_def.node:
            nd.device = ""
    if saver_def is not None:
        mg.saver_def.CopyFrom(saver_def)
    if clear_extraneous_savers:
        _remove_extraneous_savers(mg, saver_def, graph)
    keys = collection_list if collection_list is not None else (
        graph.get_all_collection_keys())
    for key in keys:
        if clear_extraneous_savers and key == SAVERS:
            continue
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
        atomic_write(local_path(filename), lambda f: f.write(data))
    return mg


def _drop_default_new_attrs(nodes):
    for n in nodes:
        odef = op_def_registry.get_op_def(n.op)
        for key in [k for k in n.attr if not k.startswith("_")]:
            if key in odef.attrs:
                continue
            value = n.attr[key]
            kind = value.WhichOneof("value")
            if kind is None or (kind != "list" and not getattr(value, kind)) or (
                    kind == "list" and not value.list.ListFields()):
                del n.attr[key]


def without_unknown_ops(mg, only_under=None):
    """A copy of ``mg`` without the nodes of ops nbdist does not know (only
    those under the name scope ``only_under``, when given) and every node that
    depends on one, and without attrs nbdist does not know that hold TF's zero
    default. A ``saver_def`` whose restore op goes is cleared (TF's saver ops:
    nbdist builds its own ``Saver`` of the variables collection)."""
    nodes = mg.graph_def.node
    unknown = {n.name for n in nodes if op_def_registry.get_op_def(n.op) is None and (
        only_under is None or n.name.startswith(only_under + "/"))}
    consumers: dict[str, list[str]] = {}
    for n in nodes:
        for inp in n.input:
            src = inp.lstrip("^").split(":")[0]
            consumers.setdefault(src, []).append(n.name)
    dropped, todo = set(), list(unknown)
    while todo:
        name = todo.pop()
        if name in dropped:
            continue
        dropped.add(name)
        todo.extend(consumers.get(name, ()))
    _log.info("The import leaves out %d nodes of ops nbdist does not know "
              "(%s) and their dependents", len(dropped),
              ", ".join(sorted({n.op for n in nodes if n.name in unknown})))
    out = meta_graph_pb2.MetaGraphDef()
    out.CopyFrom(mg)
    del out.graph_def.node[:]
    out.graph_def.node.extend(n for n in nodes if n.name not in dropped)
    _drop_default_new_attrs(out.graph_def.node)
    if mg.saver_def.restore_op_name.split(":")[0] in dropped:
        out.ClearField("saver_def")  # TF's saver: rebuilt by nbdist
    for key in list(out.collection_def):
        cd = out.collection_def[key]
        if cd.WhichOneof("kind") == "node_list":
            kept = [v for v in cd.node_list.value
                    if v.lstrip("^").split(":")[0] not in dropped]
            cd.node_list.value[:] = kept
    return out


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


def absolute_import_scope(import_scope):
    """Where an import lands: ``import_scope`` under the current name scope (as
    TF, which imports inside ``with name_scope("x"):`` under ``x/``), or None."""
    current = get_default_graph().get_name_scope()
    return "/".join(p for p in (current, import_scope) if p) or None


def import_scoped_meta_graph(meta_graph_or_file, clear_devices=False,
                             import_scope=None, input_map=None):
    """Imports a ``MetaGraphDef`` (or a ``.meta`` file) into the default graph
    under ``import_scope`` (``input_map``: its tensors by name replaced by
    tensors of the graph), rebuilds its collections and returns it."""
    if isinstance(meta_graph_or_file, meta_graph_pb2.MetaGraphDef):
        mg = meta_graph_or_file
    else:
        mg = read_meta_graph_file(local_path(meta_graph_or_file))
    gd = mg.graph_def
    if clear_devices:
        gd = type(gd)()
        gd.CopyFrom(mg.graph_def)
        for nd in gd.node:
            nd.device = ""
    graph = get_default_graph()
    import_scope = absolute_import_scope(import_scope)
    with graph.name_scope(None):  # import_scope is absolute now
        import_graph_def(gd, input_map=input_map,
                         name=(import_scope + "/") if import_scope else "")
    pre = (import_scope + "/") if import_scope else ""
    for key, cd in sorted(mg.collection_def.items()):
        kind = cd.WhichOneof("kind")
        if key == SAVERS:
            continue  # Saver objects: nd.train.import_meta_graph makes them
        if kind == "node_list":
            for name in cd.node_list.value:
                graph.add_to_collection(key, graph.as_graph_element(pre + name))
        elif kind == "bytes_list":
            for value in cd.bytes_list.value:
                if key == QUEUE_RUNNERS:
                    graph.add_to_collection(key, QueueRunner.from_proto(
                        QueueRunnerDef.FromString(value), import_scope=import_scope))
                    continue
                names = _variable_names(key, value)
                item = (value if names is None
                        else Variable.from_proto(names, import_scope=import_scope))
                graph.add_to_collection(key, item)
        elif kind in ("int64_list", "float_list"):
            for value in getattr(cd, kind).value:
                graph.add_to_collection(key, value)
    return mg


__all__ = ["absolute_import_scope", "export_meta_graph", "import_scoped_meta_graph", "read_meta_graph_file",
           "variable_def", "without_unknown_ops"]
