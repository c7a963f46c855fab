"""``load``: a SavedModel (TensorFlow's or nbdist's) into a session.

The ``MetaGraphDef`` whose tags are ``tags`` is imported into the session's
graph and its variables restored from ``variables/variables`` (TF's V2
checkpoint), then its main op (if any) is run.

A TensorFlow graph brings TF's own save and restore ops (``SaveV2``,
``RestoreV2``, ``StringJoin`` ...), which nbdist does not have: nodes of ops
nbdist does not know, and every node that depends on one, are left out of the
import (logged); the variables are then restored by an nbdist ``Saver``
built over the variables collection. Any other node nbdist does not know is
needed by the graph, and the signature that uses it will not be runnable.

Attrs newer TensorFlow versions add to ops nbdist knows (e.g. ``MatMul``'s
``grad_a``) are dropped when they hold their zero value (false, 0, empty),
which is TF's default for them; any other attr nbdist does not know makes the
import fail naming it.
"""

from __future__ import annotations

import logging
import os

from google.protobuf import message, text_format

from nbdist.proto import saved_model_pb2
from nbdist.saved_model import constants
from nbdist.train.file_io import local_path
from nbdist.train.meta_graph import without_unknown_ops
from nbdist.train.saver import Saver, import_meta_graph, scoped_var_list
from nbdist.train.tensor_bundle import INDEX_SUFFIX

__all__ = ["load", "maybe_saved_model_directory", "read_saved_model"]

_log = logging.getLogger(__name__)


def maybe_saved_model_directory(export_dir) -> bool:
    """Whether ``export_dir`` holds a ``saved_model.pb`` (or ``.pbtxt``)."""
    export_dir = local_path(export_dir)
    return any(os.path.isfile(os.path.join(export_dir, n)) for n in (
        constants.SAVED_MODEL_FILENAME_PB, constants.SAVED_MODEL_FILENAME_PBTXT))


def read_saved_model(export_dir) -> saved_model_pb2.SavedModel:
    """The ``SavedModel`` proto of ``export_dir``; OSError if there is none."""
    export_dir = local_path(export_dir)
    pb = os.path.join(export_dir, constants.SAVED_MODEL_FILENAME_PB)
    pbtxt = os.path.join(export_dir, constants.SAVED_MODEL_FILENAME_PBTXT)
    sm = saved_model_pb2.SavedModel()
    if os.path.isfile(pb):
        with open(pb, "rb") as f:
            try:
                sm.ParseFromString(f.read())
            except message.DecodeError as e:
                raise OSError(f"Cannot parse file {pb}: {e}") from None
        return sm
    if os.path.isfile(pbtxt):
        with open(pbtxt, encoding="utf-8") as f:
            try:
                text_format.Parse(f.read(), sm)
            except text_format.ParseError as e:
                raise OSError(f"Cannot parse file {pbtxt}: {e}") from None
        return sm
    raise OSError(f"SavedModel file does not exist at: {export_dir}"
                  f"{os.sep}{{{constants.SAVED_MODEL_FILENAME_PBTXT}|"
                  f"{constants.SAVED_MODEL_FILENAME_PB}}}")


def load(sess, tags, export_dir, import_scope=None, **saver_kwargs):
    """Loads the ``MetaGraphDef`` tagged ``tags`` of the SavedModel in
    ``export_dir`` into ``sess`` (its graph, its variables' values, its main
    op run); returns that ``MetaGraphDef`` (its ``signature_def`` names the
    tensors to feed and fetch)."""
    sm = read_saved_model(export_dir)
    wanted = set(tags)
    found = [mg for mg in sm.meta_graphs if set(mg.meta_info_def.tags) == wanted]
    if not found:
        available = [list(mg.meta_info_def.tags) for mg in sm.meta_graphs]
        raise RuntimeError(
            f"MetaGraphDef associated with tags {sorted(wanted)!r} could not be "
            "found in SavedModel, with available tags "
            f"'{available}'. To inspect available tag-sets in the SavedModel, "
            "please use the SavedModel CLI: `saved_model_cli`.")
    mg = found[0]
    with sess.graph.as_default():
        imported = without_unknown_ops(mg)
        saver = import_meta_graph(imported, import_scope=import_scope)
        if saver is not None and import_scope and not imported.saver_def.restore_op_name:
            # The checkpoint names the variables without the scope.
            saver = Saver(var_list=scoped_var_list(import_scope))
        variables = os.path.join(local_path(export_dir),
                                 constants.VARIABLES_DIRECTORY,
                                 constants.VARIABLES_FILENAME)
        if saver is not None:
            if not os.path.isfile(variables + INDEX_SUFFIX):
                raise OSError(f"SavedModel {export_dir}: the graph has variables "
                              f"but {variables + INDEX_SUFFIX} does not exist")
            saver.restore(sess, variables)
        pre = (import_scope + "/") if import_scope else ""
        for key in (constants.MAIN_OP_KEY, constants.LEGACY_INIT_OP_KEY):
            cd = mg.collection_def.get(key)
            if cd is not None and cd.node_list.value:
                sess.run(sess.graph.get_operation_by_name(
                    pre + cd.node_list.value[0].split(":")[0]))
                break
    return mg
