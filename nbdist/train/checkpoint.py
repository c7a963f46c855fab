"""Object-based checkpoints as TF1 graph mode has them
(``tf.compat.v1.train.Checkpoint``): variables are found by walking the
objects given to the checkpoint (attributes, lists, dicts, ``nd.Module``\\ s,
optimizers and their slots), and saved under TF's keys, such as
``model/w/.ATTRIBUTES/VARIABLE_VALUE`` and
``model/w/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE``, in TF's
V2 bundle format (``<prefix>.index`` + ``.data-00000-of-00001``).

In graph mode values move in a session: ``save``/``write`` take one (or use
the default session), and ``restore`` returns a status whose
``run_restore_ops(session)`` assigns the saved values; ``assert_consumed``
then checks that every saved value and every object matched.

>>> import nbdist as nd, os, tempfile
>>> d = tempfile.mkdtemp()
>>> with nd.Graph().as_default():
...     w = nd.Variable([1.0, 2.0], name="w")
...     ckpt = nd.train.Checkpoint(w=w)
...     with nd.Session() as s:
...         s.run(w.initializer)
...         path = ckpt.save(os.path.join(d, "ckpt"), session=s)
...         _ = s.run(w.assign([0.0, 0.0]))
...         ckpt.restore(path).run_restore_ops(s)
...         s.run(w).tolist()
[1.0, 2.0]
>>> os.path.basename(path), os.path.basename(nd.train.latest_checkpoint(d))
('ckpt-1', 'ckpt-1')
"""

from __future__ import annotations

import os
import types

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.default_session import get_default_session
from nbdist.framework.ops import Graph, Operation, Tensor, get_default_graph
from nbdist.ops.variables import Variable
from nbdist.train.checkpoint_management import update_checkpoint_state
from nbdist.train.checkpoint_utils import NewCheckpointReader
from nbdist.train.file_io import local_path
from nbdist.train.optimizer import Optimizer, _var_key
from nbdist.train.tensor_bundle import write_bundle

_VALUE = ".ATTRIBUTES/VARIABLE_VALUE"
# TF writes its object graph under this key; nbdist reads past it.
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_NOT_TRACKED = (Graph, Tensor, Operation, type, types.ModuleType,
                types.FunctionType, types.MethodType, str, bytes, np.ndarray)


class CheckpointOptions:
    """TF's options of a checkpoint save or restore. nbdist writes one file
    synchronously on the local machine, so the options are recorded only."""

    def __init__(self, experimental_io_device=None,
                 experimental_enable_async_checkpoint=False,
                 experimental_write_callbacks=None, enable_async=False,
                 experimental_skip_slot_variables=False,
                 experimental_sharding_callback=None):
        self.experimental_io_device = experimental_io_device
        self.experimental_enable_async_checkpoint = experimental_enable_async_checkpoint
        self.experimental_write_callbacks = experimental_write_callbacks
        self.enable_async = enable_async
        self.experimental_skip_slot_variables = experimental_skip_slot_variables
        self.experimental_sharding_callback = experimental_sharding_callback


def _children(obj):
    """(name, child) pairs of an object the walk goes through."""
    if isinstance(obj, Checkpoint):
        return sorted(obj._children.items())
    if isinstance(obj, dict):
        return sorted((str(k), v) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return [(str(i), v) for i, v in enumerate(obj)]
    if isinstance(obj, _NOT_TRACKED) or not hasattr(obj, "__dict__"):
        return []
    skip = {"_scope"} | set(getattr(obj, "_TF_MODULE_IGNORED_PROPERTIES", ()))
    return sorted((k, v) for k, v in vars(obj).items() if k not in skip)


def object_keys(children: dict, graph) -> dict[str, Variable]:
    """TF's checkpoint key -> variable for everything reachable from
    ``children`` in ``graph``: variables by attribute path, optimizers' own
    variables and their slots under the variable they belong to."""
    keys: dict[str, Variable] = {}
    var_paths: dict = {}
    optimizers: list[tuple[str, Optimizer]] = []
    seen: set[int] = set()
    queue = [(name, child) for name, child in sorted(children.items())]
    while queue:
        later = []
        for path, obj in queue:
            if id(obj) in seen or obj is None:
                continue
            seen.add(id(obj))
            if isinstance(obj, Variable):
                if obj.graph is graph:
                    keys[f"{path}/{_VALUE}"] = obj
                    var_paths.setdefault(_var_key(obj), path)
                continue
            if isinstance(obj, Optimizer):
                optimizers.append((path, obj))
                for (name, gid), v in sorted(obj._non_slot_dict.items()):
                    if gid == id(graph):
                        keys[f"{path}/{name}/{_VALUE}"] = v
                continue
            later += [(f"{path}/{name}", child) for name, child in _children(obj)]
        queue = later
    for opt_path, opt in optimizers:
        for slot_name, slots in sorted(opt._slots.items()):
            for var_key, slot in slots.items():
                if var_key in var_paths and slot.graph is graph:
                    keys[f"{var_paths[var_key]}/.OPTIMIZER_SLOT/{opt_path}/"
                         f"{slot_name}/{_VALUE}"] = slot
    return keys


def _session(session, what):
    session = session or get_default_session()
    if session is None:
        raise ValueError(f"Checkpoint.{what}: in graph mode pass `session=` or run "
                         "it inside a default session (`with sess.as_default():`)")
    return session


class CheckpointLoadStatus:
    """What ``Checkpoint.restore`` matched: run the restore with
    ``run_restore_ops``, then check the match with the ``assert_*`` methods."""

    def __init__(self, save_path, matched, unused_in_checkpoint, missing_objects,
                 variables):
        self._save_path = save_path
        self._matched = matched  # key -> variable
        self._unused = unused_in_checkpoint
        self._missing = missing_objects
        self._variables = variables
        self._restorer = None

    def _restore_ops(self):
        if self._restorer is None and self._matched:
            from nbdist.train.saver import Saver, SaverDef

            self._restorer = Saver(var_list=dict(self._matched), max_to_keep=0,
                                   write_version=SaverDef.V2)
        return self._restorer

    def run_restore_ops(self, session=None):
        """Assigns the checkpoint's values to the matched variables."""
        restorer = self._restore_ops()
        if restorer is not None:
            restorer.restore(_session(session, "restore"), self._save_path)

    def initialize_or_restore(self, session=None):
        """Restores the matched variables and initializes the others."""
        session = _session(session, "restore")
        self.run_restore_ops(session)
        rest = [v.initializer for v in self._variables
                if all(v is not m for m in self._matched.values())]
        if rest:
            session.run(rest)

    def assert_consumed(self):
        """Raises AssertionError unless every saved value and every object
        matched."""
        if self._unused:
            raise AssertionError(f"Unresolved object in checkpoint: "
                                 f"{sorted(self._unused)}")
        return self.assert_existing_objects_matched()

    def assert_existing_objects_matched(self):
        """Raises AssertionError if an object has no value in the checkpoint."""
        if self._missing:
            raise AssertionError(f"Some Python objects were not bound to checkpointed "
                                 f"values, likely due to changes in the Python "
                                 f"program: {sorted(self._missing)}")
        return self

    def assert_nontrivial_match(self):
        """Raises AssertionError if nothing but the save counter matched."""
        if not [k for k in self._matched if not k.startswith("save_counter/")]:
            raise AssertionError(f"Nothing except the root object matched a "
                                 f"checkpointed value in {self._save_path}")
        return self

    def expect_partial(self):
        """Silences the partial-match checks of a later save (none in nbdist)."""
        return self


class InitializationOnlyStatus(CheckpointLoadStatus):
    """``restore(None)``: nothing to restore; ``initialize_or_restore``
    initializes every variable."""

    def __init__(self, variables):
        super().__init__(None, {}, (), (), variables)

    def assert_consumed(self):
        raise AssertionError("No checkpoint specified (save_path=None); nothing is "
                             "being restored.")

    assert_existing_objects_matched = assert_consumed
    assert_nontrivial_match = assert_consumed


class Checkpoint:
    """Saves and restores the variables of the objects given as keyword
    arguments (TF1's ``tf.train.Checkpoint``; see the module docstring)."""

    def __init__(self, **kwargs):
        for name, value in kwargs.items():
            if value is None:
                raise ValueError(f"Checkpoint was passed None for `{name}`")
        self._children = dict(kwargs)
        self._save_counter = None
        self._counter_ops_cache = None
        self._cached_reads = None

    def __getattr__(self, name):
        children = self.__dict__.get("_children", {})
        if name in children:
            return children[name]
        raise AttributeError(f"'Checkpoint' object has no attribute '{name}'")

    @property
    def save_counter(self) -> Variable:
        """The number of ``save`` calls so far (an int64 variable, created on
        first use and saved with the checkpoint)."""
        if self._save_counter is None:
            g = get_default_graph()
            with g.name_scope(None), g.control_dependencies(None):
                self._save_counter = Variable(0, dtype=dtypes.int64, trainable=False,
                                              name="save_counter")
        return self._save_counter

    def _keys(self) -> dict[str, Variable]:
        children = dict(self._children)
        children["save_counter"] = self.save_counter
        return object_keys(children, self.save_counter.graph)

    def _reads(self, keys):
        """The read tensors of ``keys`` (built once per set of variables, so
        saving in a loop does not grow the graph)."""
        sig = tuple((k, id(v)) for k, v in keys.items())
        if self._cached_reads is None or self._cached_reads[0] != sig:
            self._cached_reads = (sig, {k: v.value() for k, v in keys.items()})
        return self._cached_reads[1]

    def _counter_ops(self):
        if self._counter_ops_cache is None:
            from nbdist.ops.state_ops import is_variable_initialized

            counter = self.save_counter
            self._counter_ops_cache = (is_variable_initialized(counter),
                                       counter.assign_add(1))
        return self._counter_ops_cache

    def _initialize_counter(self, session):
        if not session.run(self._counter_ops()[0]):
            session.run(self.save_counter.initializer)

    def write(self, file_prefix, session=None, options=None):
        """Writes the checkpoint at ``file_prefix`` exactly (no counter, no
        ``checkpoint`` state file); returns the prefix."""
        del options
        session = _session(session, "write")
        self._initialize_counter(session)
        values = session.run(self._reads(self._keys()))
        prefix = local_path(os.fspath(file_prefix))
        write_bundle(prefix, sorted((k, np.asarray(v)) for k, v in values.items()))
        return prefix

    def save(self, file_prefix, session=None, options=None):
        """Writes ``<file_prefix>-<n>`` for the n-th save and names it in the
        directory's ``checkpoint`` file; returns that path."""
        session = _session(session, "save")
        self._initialize_counter(session)
        n = session.run(self._counter_ops()[1])
        path = self.write(f"{os.fspath(file_prefix)}-{int(n)}", session, options)
        update_checkpoint_state(os.path.dirname(path) or ".", path,
                                all_model_checkpoint_paths=[path],
                                save_relative_paths=True)
        return path

    def restore(self, save_path):
        """Matches the checkpoint at ``save_path`` (a prefix) with this
        checkpoint's objects; returns the status that runs the restore."""
        keys = self._keys()
        if save_path is None:
            return InitializationOnlyStatus(list(keys.values()))
        saved = set(NewCheckpointReader(os.fspath(save_path))
                    .get_variable_to_shape_map()) - {OBJECT_GRAPH_KEY}
        matched = {k: v for k, v in keys.items() if k in saved}
        return CheckpointLoadStatus(os.fspath(save_path), matched,
                                    saved - set(keys), set(keys) - saved,
                                    list(keys.values()))


__all__ = ["Checkpoint", "CheckpointLoadStatus", "CheckpointOptions"]
