"""``Saver``: checkpoints of variables, written atomically, in nbdist's NumPy
format or TensorFlow's V2 format.

Checkpoint formats
------------------
A checkpoint with prefix ``P`` (``save(sess, "dir/model", global_step=7)``
gives ``P = "dir/model-7"``) is:

``P.npz`` (the default: ``write_version`` other than ``SaverDef.V2``)
    nbdist's NumPy format, readable with ``np.load`` (see ``npz_format``).
``P.index`` + ``P.data-00000-of-00001`` (``write_version=SaverDef.V2``)
    TensorFlow's V2 checkpoint, byte for byte as TF writes it, so TF restores
    it (see ``tensor_bundle``).

``restore`` reads either, whichever exists (``.npz`` first).

``P.meta``
    The ``MetaGraphDef`` (``nbdist/proto/meta_graph.proto``), when
    ``write_meta_graph`` (see ``nbdist.train.meta_graph``).

``checkpoint`` (in the directory of ``P``)
    TF's ``CheckpointState`` in protobuf text format::

        model_checkpoint_path: "model-7"
        all_model_checkpoint_paths: "model-6"
        all_model_checkpoint_paths: "model-7"
        all_model_checkpoint_timestamps: 1700000000.5
        all_model_checkpoint_timestamps: 1700000060.2
        last_preserved_timestamp: 1699999999.0

    Paths are relative to the directory when it was given as a relative path
    (or with ``save_relative_paths``), else absolute, as TF writes them.

Atomicity: every file is written to a temporary file in the same directory
(``<final name>.<random>.tmp``), flushed and ``fsync``-ed, then moved into
place with ``os.replace``; the data file(s) first (a V2 ``.index`` after its
``.data`` file), the ``checkpoint`` state
file last. A crash at any moment therefore leaves ``latest_checkpoint``
naming a complete, loadable checkpoint (the new one or the previous one).
Checkpoints beyond ``max_to_keep`` are deleted only after the state file no
longer lists them.

Taking over a directory: a ``Saver``'s first save into a directory removes the
temporary files a crash left there under its own names (``<prefix>[-N].npz``,
``.meta`` and the state file's, older than that save), and counts the
checkpoints of its own series (``<prefix>`` and ``<prefix>-N``) already there
against ``max_to_keep``: those the state file lists, and those it does not (a process killed between
the data file and the state file), oldest first. So a directory written by
one process after another keeps ``max_to_keep`` checkpoints, as it would in
one process.
"""

from __future__ import annotations

import logging
import os
import re
import time

import numpy as np

from nbdist import errors
from nbdist.framework import dtypes
from nbdist.framework.ops import GraphKeys, get_default_graph
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.variables import Variable, global_variables
from nbdist.proto import meta_graph_pb2, saver_pb2
from nbdist.train import meta_graph
from nbdist.train.checkpoint_management import (
    CheckpointState,
    _in_directory,
    checkpoint_exists,
    data_files,
    generate_checkpoint_state_proto,
    get_checkpoint_mtimes,
    get_checkpoint_state,
    latest_checkpoint,
    meta_graph_filename,
    remove_checkpoint,
    update_checkpoint_state,
)
from nbdist.train.checkpoint_utils import open_checkpoint
from nbdist.train.file_io import atomic_write as _atomic_write
from nbdist.train.file_io import local_path, remove_temp_files
from nbdist.train.npz_format import DATA_SUFFIX, write_npz_checkpoint
from nbdist.train.saveable_object_util import (
    SavedPart,
    as_ref,
    names_to_vars,
    slice_info_from_spec,
    whole_value,
)
from nbdist.train.tensor_bundle import INDEX_SUFFIX, write_bundle

_log = logging.getLogger(__name__)

SaverDef = saver_pb2.SaverDef
_SAVED_NAME_ATTR = "_saved_name"
_SLICE_SPEC_ATTR = "_save_slice_spec"  # a shard's place in its partitioned variable


def _dims(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


# -- the Saver -------------------------------------------------------------------
class Saver:
    """Saves and restores variables (``tf.compat.v1.train.Saver``).

    ``write_version=nd.train.SaverDef.V2`` writes TensorFlow's V2 checkpoint
    (``<prefix>.index`` + ``<prefix>.data-00000-of-00001``), which TF
    restores; the default writes nbdist's ``<prefix>.npz``. ``restore``
    reads either format, and TF's own V2 checkpoints.

    >>> import nbdist as nd, tempfile, os
    >>> g = nd.Graph()
    >>> with g.as_default():
    ...     v = nd.Variable([1.0, 2.0], name="v")
    ...     saver = nd.train.Saver()
    >>> d = tempfile.mkdtemp()
    >>> with nd.Session(graph=g) as s:
    ...     s.run(v.initializer)
    ...     path = saver.save(s, os.path.join(d, "model"), global_step=3)
    >>> os.path.basename(path), os.path.basename(nd.train.latest_checkpoint(d))
    ('model-3', 'model-3')
    """

    def __init__(self, var_list=None, reshape=False, sharded=False, max_to_keep=5,
                 keep_checkpoint_every_n_hours=10000.0, name=None,
                 restore_sequentially=False, saver_def=None, builder=None,
                 defer_build=False, allow_empty=False, write_version=None,
                 pad_step_number=False, save_relative_paths=False, filename=None):
        if defer_build and var_list is not None:
            raise ValueError("If `var_list` is provided then build cannot be deferred. "
                             "Either set defer_build=False or var_list=None.")
        self._var_list = var_list
        self._reshape = reshape
        self._sharded = sharded
        self._max_to_keep = max_to_keep or 0
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._name = name
        self._restore_sequentially = restore_sequentially
        self._allow_empty = allow_empty
        self._write_version = write_version
        self._pad_step_number = pad_step_number
        self._save_relative_paths = save_relative_paths
        self._filename = filename
        self._saver_def = saver_def
        if saver_def is not None:
            self._write_version = saver_def.version
            self._sharded = saver_def.sharded
            if saver_def.keep_checkpoint_every_n_hours:
                self._keep_checkpoint_every_n_hours = (
                    saver_def.keep_checkpoint_every_n_hours)
        self._is_built = False
        self._is_empty = False
        self._graph = None
        self._specs = {}  # saved name -> (read tensor, placeholder, variable/ref)
        self._restore_op = None
        self._filename_tensor = None
        self._last_checkpoints: list[tuple[str, float]] = []
        self._checkpoints_to_be_deleted: list[tuple[str, float]] = []
        self._taken_over: set = set()  # (directory, prefix, state file) saved into
        self._next_checkpoint_time = (time.time() +
                                      keep_checkpoint_every_n_hours * 3600)
        if saver_def is not None:
            self._max_to_keep = saver_def.max_to_keep
            self._build_from_saver_def(saver_def)
        elif not defer_build:
            self.build()

    # -- building ---------------------------------------------------------------
    def build(self):
        """Builds the restore ops (done by the constructor unless deferred)."""
        if self._is_built:
            return
        from nbdist.ops import state_ops
        from nbdist.framework.constant_op import constant, identity
        from nbdist.ops.control_flow_ops import group

        var_list = self._var_list
        if var_list is None:
            from nbdist.framework.ops import GraphKeys

            g = get_default_graph()
            var_list = g.get_collection(GraphKeys.GLOBAL_VARIABLES) + g.get_collection(
                "saveable_objects")
        names = names_to_vars(var_list)
        if not names:
            if self._allow_empty:
                self._is_empty = True
                self._is_built = True
                return
            raise ValueError("No variables to save")
        g = as_ref(next(iter(names.values()))[0]).graph
        for name, parts in names.items():
            if any(as_ref(v).graph is not g for v in parts):
                raise ValueError(f"Saver: variable {name} is from another graph")
        self._graph = g
        with g.as_default(), g.control_dependencies(None), \
                g.name_scope(self._name or "save"):
            self._filename_tensor = constant(self._filename or "model",
                                             dtype=dtypes.string, name="Const")
            assigns = []
            for name, parts in names.items():
                self._specs[name] = []
                for v in parts:
                    ref = as_ref(v)
                    info = getattr(v, "_save_slice_info", None)
                    attrs = {"dtype": ref.dtype.base_dtype, "shape": ref.shape,
                             _SAVED_NAME_ATTR: name}
                    if info is not None:
                        attrs[_SLICE_SPEC_ATTR] = info.spec
                    with g.colocate_with(ref.op):
                        read = v.value() if isinstance(v, Variable) else identity(ref)
                        ph = g.create_op("Placeholder", [], attrs,
                                         name="restore_value").outputs[0]
                        assigns.append(state_ops.assign(ref, ph, name="Assign"))
                    self._specs[name].append(SavedPart(read, ph, ref, info))
            self._restore_op = group(assigns, name="restore_all")
        self._saver_def = SaverDef(
            filename_tensor_name=self._filename_tensor.name,
            save_tensor_name=self._filename_tensor.name,
            restore_op_name=self._restore_op.name,
            max_to_keep=int(self._max_to_keep), sharded=bool(self._sharded),
            keep_checkpoint_every_n_hours=self._keep_checkpoint_every_n_hours,
            version=(SaverDef.V2 if self._writes_v2 else SaverDef.V1))
        self._is_built = True

    def _build_from_saver_def(self, saver_def, graph=None):
        """Finds the restore ops that ``saver_def`` names in ``graph``."""
        g = graph or get_default_graph()
        self._graph = g
        if not saver_def.restore_op_name:
            self._is_empty = True
            self._is_built = True
            return
        self._restore_op = g.get_operation_by_name(saver_def.restore_op_name)
        if saver_def.filename_tensor_name:
            self._filename_tensor = g.get_tensor_by_name(
                saver_def.filename_tensor_name)
        for assign in self._restore_op.control_inputs:
            if assign.type != "Assign":
                continue
            ref, ph = assign.inputs
            try:
                name = ph.op.get_attr(_SAVED_NAME_ATTR)
            except ValueError:
                name = ref.op.name
            if isinstance(name, bytes):
                name = name.decode()
            read = None
            try:
                read = g.get_tensor_by_name(ref.op.name + "/read:0")
            except KeyError:
                for op in g.get_operations():
                    if op.type == "Identity" and op.inputs and op.inputs[0] is ref:
                        read = op.outputs[0]
                        break
            if read is None:
                raise ValueError(f"Saver: no snapshot of variable {ref.op.name} in "
                                 "the graph")
            try:
                spec = ph.op.get_attr(_SLICE_SPEC_ATTR)
            except ValueError:
                spec = None
            if isinstance(spec, bytes):
                spec = spec.decode()
            info = slice_info_from_spec(name, spec) if spec else None
            self._specs.setdefault(name, []).append(SavedPart(read, ph, ref, info))
        self._is_built = True

    # -- properties ---------------------------------------------------------------
    @property
    def _writes_v2(self) -> bool:
        return self._write_version == SaverDef.V2

    @property
    def saver_def(self):
        return self._saver_def

    def as_saver_def(self):
        """The ``SaverDef`` naming this saver's ops and format (``version``:
        ``V2`` when it writes TF's format, else ``V1``)."""
        return self._saver_def

    @property
    def last_checkpoints(self) -> list[str]:
        """The checkpoints this saver keeps, oldest first."""
        return [p for p, _ in self._last_checkpoints]

    def set_last_checkpoints(self, last_checkpoints):
        if not isinstance(last_checkpoints, list):
            raise TypeError("last_checkpoints must be a list")
        self._last_checkpoints = [(s, np.inf) for s in last_checkpoints]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time):
        if not isinstance(last_checkpoints_with_time, list):
            raise TypeError("last_checkpoints_with_time must be a list")
        self._last_checkpoints = list(last_checkpoints_with_time)

    def recover_last_checkpoints(self, checkpoint_paths):
        """Takes over ``checkpoint_paths`` (e.g. a state file's) as the kept
        checkpoints, with their files' modification times."""
        with_times = []
        for p in checkpoint_paths:
            mtime = get_checkpoint_mtimes([p])
            if mtime:
                with_times.append((p, mtime[0]))
        self.set_last_checkpoints_with_time(with_times)

    # -- save ---------------------------------------------------------------------
    def save(self, sess, save_path, global_step=None, latest_filename=None,
             meta_graph_suffix="meta", write_meta_graph=True, write_state=True,
             strip_default_attrs=False, save_debug_info=False):
        """Saves the variables; returns the checkpoint prefix (``path-<step>``).

        The data file, then the meta graph, then the state file are each
        written atomically, in that order.
        """
        if not self._is_built:
            raise RuntimeError("`build()` should be called before save if "
                               "defer_build==True")
        if latest_filename is None:
            latest_filename = "checkpoint"
        if os.path.split(latest_filename)[0]:
            raise ValueError("'latest_filename' must not contain path components")
        save_path = local_path(save_path)
        if global_step is not None:
            if not isinstance(global_step, (int, np.integer)):
                from nbdist.train.training_util import global_step as _gs

                global_step = _gs(sess, global_step)
            if self._pad_step_number:
                checkpoint_file = f"{save_path}-{int(global_step):08d}"
            else:
                checkpoint_file = f"{save_path}-{int(global_step)}"
        else:
            checkpoint_file = save_path
            if os.path.basename(save_path) == latest_filename and not self._sharded:
                raise ValueError(f"'latest_filename' collides with 'save_path': "
                                 f"'{latest_filename}' and '{save_path}'")
        if not hasattr(sess, "run"):
            raise TypeError(f"'sess' must be a Session; {sess}")
        save_path_parent = os.path.dirname(save_path)
        if not os.path.isdir(save_path_parent or "."):
            raise ValueError(f"Parent directory of {save_path} doesn't exist, can't "
                             "save.")
        self._take_over_directory(save_path, latest_filename, meta_graph_suffix,
                                  write_state)
        model_checkpoint_path = None
        if not self._is_empty:
            values = sess.run({n: [p.read for p in parts]
                               for n, parts in self._specs.items()})
            arrays = [(name, whole_value(parts, values[name]))
                      for name, parts in self._specs.items()]
            if self._writes_v2:
                write_bundle(checkpoint_file, arrays)
                other = [checkpoint_file + DATA_SUFFIX]
            else:
                write_npz_checkpoint(checkpoint_file, arrays)
                other = [p for p in data_files(checkpoint_file)
                         if p != checkpoint_file + DATA_SUFFIX]
            # The other format's files of this prefix (a saver of the other
            # format saved here before) would shadow or outlive the new ones.
            for path in other:
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass
            model_checkpoint_path = checkpoint_file
        if write_meta_graph:
            graph = getattr(sess, "graph", None) or self._graph or get_default_graph()
            mg = meta_graph.export_meta_graph(graph=graph, saver_def=self._saver_def,
                                              strip_default_attrs=strip_default_attrs)
            data = mg.SerializeToString()
            _atomic_write(meta_graph_filename(checkpoint_file, meta_graph_suffix),
                          lambda f: f.write(data))
        if model_checkpoint_path is not None and write_state:
            self._record_last_checkpoint(model_checkpoint_path)
            update_checkpoint_state(
                save_path_parent, model_checkpoint_path,
                all_model_checkpoint_paths=self.last_checkpoints,
                latest_filename=latest_filename,
                all_model_checkpoint_timestamps=[t for _, t in
                                                 self._last_checkpoints
                                                 if np.isfinite(t)],
                save_relative_paths=self._save_relative_paths)
            self._maybe_delete_old_checkpoints(meta_graph_suffix)
        return model_checkpoint_path

    def _take_over_directory(self, save_path, latest_filename, meta_graph_suffix,
                             write_state):
        """On the first save into a directory (see the module docstring)."""
        directory = os.path.dirname(save_path)
        base = os.path.basename(save_path)
        key = (os.path.abspath(directory or "."), base, latest_filename)
        if key in self._taken_over:
            return
        self._taken_over.add(key)
        prefix = re.escape(base)
        files = "|".join(re.escape(x) for x in (
            DATA_SUFFIX, INDEX_SUFFIX, "." + meta_graph_suffix)) + (
            r"|\.data-\d{5}-of-\d{5}")
        removed = remove_temp_files(
            directory, rf"{prefix}(?:-\d+)?(?:{files})|{re.escape(latest_filename)}",
            time.time())
        if removed:
            _log.info("Removed leftover temporary files in %s: %s", directory or ".",
                      ", ".join(removed))
        if not self._max_to_keep or not write_state:
            return
        listed = []
        if not self._last_checkpoints:  # else set by restore or by the user
            try:
                state = get_checkpoint_state(directory, latest_filename)
            except ValueError:
                state = None
            if state is not None:
                # Only this saver's own series: checkpoints under other prefixes
                # stay as TF leaves them (a fresh saver does not delete them).
                own = re.compile(rf"{prefix}(?:-\d+)?")
                listed = [_in_directory(p, directory)
                          for p in state.all_model_checkpoint_paths
                          if own.fullmatch(os.path.basename(p))]
        known = {os.path.normpath(p) for p in self.last_checkpoints + listed}
        data = re.compile(
            rf"({prefix}-\d+)(?:{re.escape(DATA_SUFFIX)}|{re.escape(INDEX_SUFFIX)})")
        unlisted = sorted(
            {os.path.join(directory, m.group(1))
             for m in map(data.fullmatch, os.listdir(directory or ".")) if m},
            key=lambda p: get_checkpoint_mtimes([p]) or [0.0])
        found = []
        for p in [p for p in unlisted if os.path.normpath(p) not in known] + listed:
            mtime = get_checkpoint_mtimes([p])
            if mtime:
                found.append((p, mtime[0]))
        self._last_checkpoints = found + self._last_checkpoints

    def _record_last_checkpoint(self, path):
        if not self._max_to_keep:
            return
        same = os.path.normpath(path)
        self._last_checkpoints = [(p, t) for p, t in self._last_checkpoints
                                  if os.path.normpath(p) != same]
        self._last_checkpoints.append((path, time.time()))
        while len(self._last_checkpoints) > self._max_to_keep:
            self._checkpoints_to_be_deleted.append(self._last_checkpoints.pop(0))

    def _maybe_delete_old_checkpoints(self, meta_graph_suffix="meta"):
        kept = {os.path.normpath(p) for p in self.last_checkpoints}
        while self._checkpoints_to_be_deleted:
            path, t = self._checkpoints_to_be_deleted.pop(0)
            if os.path.normpath(path) in kept:
                continue  # saved again since (the same step)
            if t > self._next_checkpoint_time:
                # keep_checkpoint_every_n_hours: this one is preserved.
                self._next_checkpoint_time += (
                    self._keep_checkpoint_every_n_hours * 3600)
                continue
            try:
                remove_checkpoint(path, meta_graph_suffix)
            except OSError as e:
                _log.warning("Ignoring: %s", e)

    # -- restore ------------------------------------------------------------------
    def restore(self, sess, save_path):
        """Restores every variable from the checkpoint ``save_path`` (a prefix).

        Everything is read and checked before any variable is assigned: a
        missing variable (NotFoundError) or a wrong shape or dtype
        (InvalidArgumentError), each naming the variable, leaves the
        session's variables unchanged.
        """
        if self._is_empty:
            return
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        save_path = local_path(save_path)
        if not data_files(save_path):
            raise ValueError("The passed save_path is not a valid checkpoint: "
                             + save_path)
        reader = open_checkpoint(save_path)  # .npz, else TF's V2 bundle
        feeds = {}
        for name, parts in self._specs.items():
            if not reader.has_tensor(name):
                raise errors.NotFoundError(
                    None, None, "Restoring from checkpoint failed. This is most "
                    "likely due to a Variable name or other graph key that is "
                    "missing from the checkpoint. Original error:\n\nKey "
                    f"{name} not found in checkpoint {save_path}")
            value = reader.get_tensor(name)
            if parts[0].slice_info is None:
                feeds[parts[0].placeholder] = self._check_value(
                    name, parts[0].ref, value, save_path)
                continue
            # A partitioned variable: each shard takes its slice of the whole
            # (the checkpoint may come from another partitioning).
            full = TensorShape(parts[0].slice_info.full_shape)
            value = self._check_value(name, parts[0].ref, value, save_path, full)
            for part in parts:
                feeds[part.placeholder] = np.ascontiguousarray(value[part.region()])
        sess.run(self._restore_op, feed_dict=feeds)

    def _check_value(self, name, ref, value, save_path, shape=None):
        dtype = ref.dtype.base_dtype
        if dtype is dtypes.string:
            ok = value.dtype == object
        else:
            ok = value.dtype == np.dtype(dtype.as_numpy_dtype)
        if not ok:
            saved = "string" if value.dtype == object else str(value.dtype)
            raise errors.InvalidArgumentError(
                None, None, "Restoring from checkpoint failed: tensor_name = "
                f"{name}; expected dtype {dtype.name} does not equal original dtype "
                f"{saved} (checkpoint {save_path})")
        shape = ref.shape if shape is None else shape
        if shape.rank is not None and not shape.is_compatible_with(value.shape):
            if (self._reshape and shape.is_fully_defined()
                    and int(np.prod(shape.as_list())) == value.size):
                value = value.reshape(shape.as_list())
            else:
                raise errors.InvalidArgumentError(
                    None, None, "Restoring from checkpoint failed: variable "
                    f"{name} has shape {_dims(shape.as_list())} in the graph but "
                    f"{_dims(value.shape)} in checkpoint {save_path}")
        return value

    # -- meta graphs ----------------------------------------------------------------
    def export_meta_graph(self, filename=None, collection_list=None, as_text=False,
                          export_scope=None, clear_devices=False,
                          clear_extra_defaults=False, strip_default_attrs=False,
                          save_debug_info=False, clear_extraneous_savers=False):
        """This graph's ``MetaGraphDef`` with this saver's ``SaverDef``;
        ``clear_extraneous_savers`` leaves out the other savers' ops."""
        return meta_graph.export_meta_graph(
            filename=filename, graph=self._graph, saver_def=self._saver_def,
            collection_list=collection_list, as_text=as_text,
            clear_devices=clear_devices, strip_default_attrs=strip_default_attrs,
            clear_extraneous_savers=clear_extraneous_savers)

    def to_proto(self, export_scope=None):
        return self._saver_def

    @staticmethod
    def from_proto(saver_def, import_scope=None):
        return Saver(saver_def=_scoped_saver_def(saver_def, import_scope))


def _scoped_saver_def(saver_def, import_scope):
    """``saver_def`` with its op names under ``import_scope``."""
    sd = SaverDef()
    sd.CopyFrom(saver_def)
    if import_scope:
        for field in ("filename_tensor_name", "save_tensor_name", "restore_op_name"):
            if getattr(sd, field):
                setattr(sd, field, import_scope + "/" + getattr(sd, field))
    return sd


def scoped_var_list(import_scope):
    """The global variables (under ``import_scope``, when given) by their
    names without that scope: the names a checkpoint saved them under."""
    if not import_scope:
        return None
    pre = import_scope + "/"
    var_list: dict = {}
    for v in global_variables(scope=import_scope):
        info = v._get_save_slice_info()
        name = (info.full_name if info is not None else v.op.name).removeprefix(pre)
        if info is None:
            var_list[name] = v
        else:  # a shard: the saved name holds the list of its shards
            var_list.setdefault(name, []).append(v)
    return var_list


def import_meta_graph(meta_graph_or_file, clear_devices=False, import_scope=None,
                      **kwargs):
    """Imports a ``MetaGraphDef`` (or a ``.meta`` file) into the default graph,
    its ops renamed under ``import_scope`` when given; rebuilds its collections
    (the ``savers`` collection as ``Saver`` objects) and returns its ``Saver``:
    the one its ``saver_def`` names, else a new one of its variables, else
    None (no saver and no variables)."""
    if not isinstance(meta_graph_or_file, meta_graph_pb2.MetaGraphDef):
        meta_graph_or_file = meta_graph.read_meta_graph_file(
            local_path(meta_graph_or_file))
    original = meta_graph_or_file.saver_def
    restore_op = original.restore_op_name
    if restore_op:
        # A TF-written graph: its saver's ops (SaveV2, RestoreV2 ...) are not
        # nbdist's; they are left out and a Saver of its variables is built.
        meta_graph_or_file = meta_graph.without_unknown_ops(
            meta_graph_or_file, only_under=restore_op.rpartition("/")[0])
    graph = get_default_graph()
    import_scope = meta_graph.absolute_import_scope(import_scope)
    with graph.name_scope(None):  # import_scope is absolute now
        mg = meta_graph.import_scoped_meta_graph(meta_graph_or_file, clear_devices,
                                                 import_scope,
                                                 input_map=kwargs.get("input_map"))
    saver_defs = mg.collection_def.get(meta_graph.SAVERS)
    if saver_defs is not None:
        for value in saver_defs.bytes_list.value:
            graph.add_to_collection(
                GraphKeys.SAVERS,
                Saver.from_proto(SaverDef.FromString(value), import_scope))
    if mg.HasField("saver_def") and mg.saver_def.restore_op_name:
        return Saver.from_proto(mg.saver_def, import_scope)
    if global_variables(scope=import_scope):
        if restore_op:  # TF's saver, left out: one of the same format and policy,
            # saving under the names TF's saved (those before import_scope)
            return Saver(var_list=scoped_var_list(import_scope),
                         write_version=original.version,
                         max_to_keep=original.max_to_keep,
                         keep_checkpoint_every_n_hours=(
                             original.keep_checkpoint_every_n_hours or 10000.0))
        return Saver()
    _log.info("Saver not created because there are no variables in the graph to "
              "restore")
    return None


__all__ = [
    "CheckpointState",
    "Saver",
    "SaverDef",
    "checkpoint_exists",
    "generate_checkpoint_state_proto",
    "get_checkpoint_mtimes",
    "get_checkpoint_state",
    "import_meta_graph",
    "latest_checkpoint",
    "remove_checkpoint",
    "update_checkpoint_state",
]
