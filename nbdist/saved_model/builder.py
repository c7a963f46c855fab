"""``SavedModelBuilder``: TensorFlow's SavedModel layout, written by nbdist.

``export_dir`` gets::

    saved_model.pb                      SavedModel proto (or .pbtxt: as_text)
    variables/variables.index           the variables, a TF V2 checkpoint
    variables/variables.data-00000-of-00001

Each ``MetaGraphDef`` records its tags (``meta_info_def.tags``), the
signatures, the graph and its collections (variables as TF's
``VariableDef``). It carries no ``saver_def``: nbdist's save ops are not
TF's, so a loader (TF's or nbdist's) builds its own saver over the variables
collection, and restores ``variables/variables``. TensorFlow loads such a
SavedModel when it knows every op of the graph.
"""

from __future__ import annotations

import os

from google.protobuf import text_format

from nbdist.framework.ops import Operation
from nbdist.proto import meta_graph_pb2, saved_model_pb2
from nbdist.saved_model import constants
from nbdist.train.file_io import atomic_write, local_path
from nbdist.train.meta_graph import export_meta_graph
from nbdist.train.saver import Saver, SaverDef

__all__ = ["SavedModelBuilder"]


class SavedModelBuilder:
    """Builds a SavedModel in ``export_dir`` (which must not exist or be
    empty): one ``add_meta_graph_and_variables``, then any number of
    ``add_meta_graph``, then ``save``.

    >>> import nbdist as nd, tempfile, os
    >>> export_dir = os.path.join(tempfile.mkdtemp(), "model")
    >>> g = nd.Graph()
    >>> with g.as_default():
    ...     x = nd.placeholder(nd.float32, [None], name="x")
    ...     w = nd.Variable(3.0, name="w")
    ...     y = x * w
    >>> with nd.Session(graph=g) as sess:
    ...     sess.run(w.initializer)
    ...     b = nd.saved_model.builder.SavedModelBuilder(export_dir)
    ...     sig = nd.saved_model.signature_def_utils.predict_signature_def(
    ...         {"x": x}, {"y": y})
    ...     b.add_meta_graph_and_variables(
    ...         sess, [nd.saved_model.tag_constants.SERVING],
    ...         signature_def_map={"serving_default": sig})
    ...     path = b.save()
    >>> sorted(os.listdir(export_dir))
    ['saved_model.pb', 'variables']
    """

    def __init__(self, export_dir):
        self._export_dir = local_path(export_dir)
        if os.path.exists(self._export_dir):
            if os.listdir(self._export_dir):
                raise AssertionError(
                    "Export directory already exists, and isn't empty. Please "
                    "choose a different export directory, or delete all the "
                    f"contents of the specified directory: {self._export_dir}")
        else:
            os.makedirs(self._export_dir)
        self._saved_model = saved_model_pb2.SavedModel(
            saved_model_schema_version=constants.SAVED_MODEL_SCHEMA_VERSION)
        self._has_saved_variables = False

    def _meta_graph(self, graph, tags, signature_def_map, main_op, clear_devices,
                    strip_default_attrs):
        for key, sig in (signature_def_map or {}).items():
            if not isinstance(sig, meta_graph_pb2.SignatureDef):
                raise TypeError(f"signature_def_map[{key!r}] must be a "
                                f"SignatureDef, got {type(sig).__name__}")
            for info in list(sig.inputs.values()) + list(sig.outputs.values()):
                graph.get_tensor_by_name(info.name)  # KeyError names it
        info = meta_graph_pb2.MetaGraphDef.MetaInfoDef(
            tags=list(tags), stripped_default_attrs=bool(strip_default_attrs))
        # The collections of the graph, plus the main op under TF's key;
        # nothing is added to the user's graph.
        mg = export_meta_graph(graph=graph, meta_info_def=info,
                               clear_devices=clear_devices,
                               strip_default_attrs=strip_default_attrs)
        if main_op is not None:
            if not isinstance(main_op, Operation):
                raise TypeError(f"main_op must be an Operation, got {main_op!r}")
            mg.collection_def[constants.MAIN_OP_KEY].node_list.value[:] = [
                main_op.name]
        for key, sig in (signature_def_map or {}).items():
            mg.signature_def[key].CopyFrom(sig)
        return mg

    def add_meta_graph_and_variables(self, sess, tags, signature_def_map=None,
                                     assets_collection=None, legacy_init_op=None,
                                     clear_devices=False, main_op=None,
                                     strip_default_attrs=False, saver=None,
                                     init_op=None, train_op=None):
        """Saves the session's variables (``variables/variables``, TF's V2
        format) and adds the session graph's ``MetaGraphDef`` under ``tags``."""
        if self._has_saved_variables:
            raise AssertionError("Graph state including variables and assets has "
                                 "already been saved. Please invoke "
                                 "`add_meta_graph()` instead.")
        graph = sess.graph
        main_op = main_op if main_op is not None else (legacy_init_op or init_op)
        with graph.as_default():
            if saver is None:
                saver = Saver(write_version=SaverDef.V2, allow_empty=True,
                              sharded=True)
        variables_dir = os.path.join(self._export_dir, constants.VARIABLES_DIRECTORY)
        os.makedirs(variables_dir, exist_ok=True)
        saver.save(sess, os.path.join(variables_dir, constants.VARIABLES_FILENAME),
                   write_meta_graph=False, write_state=False)
        self._saved_model.meta_graphs.append(self._meta_graph(
            graph, tags, signature_def_map, main_op, clear_devices,
            strip_default_attrs))
        self._has_saved_variables = True

    def add_meta_graph(self, tags, signature_def_map=None, assets_collection=None,
                       legacy_init_op=None, clear_devices=False, main_op=None,
                       strip_default_attrs=False, saver=None, init_op=None,
                       train_op=None):
        """Adds the default graph's ``MetaGraphDef`` under ``tags`` (its
        variables are those ``add_meta_graph_and_variables`` saved)."""
        if not self._has_saved_variables:
            raise AssertionError("Graph state including variables and assets has "
                                 "not been saved yet. Please invoke "
                                 "`add_meta_graph_and_variables()` first.")
        from nbdist.framework.ops import get_default_graph

        main_op = main_op if main_op is not None else (legacy_init_op or init_op)
        self._saved_model.meta_graphs.append(self._meta_graph(
            get_default_graph(), tags, signature_def_map, main_op, clear_devices,
            strip_default_attrs))

    def save(self, as_text=False):
        """Writes ``saved_model.pb`` (``saved_model.pbtxt`` with ``as_text``);
        returns its path."""
        if as_text:
            name = constants.SAVED_MODEL_FILENAME_PBTXT
            data = text_format.MessageToString(self._saved_model).encode()
        else:
            name = constants.SAVED_MODEL_FILENAME_PB
            data = self._saved_model.SerializeToString()
        path = os.path.join(self._export_dir, name)
        atomic_write(path, lambda f: f.write(data))
        return path
