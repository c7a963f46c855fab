"""Reading checkpoints without a graph (TF's ``checkpoint_utils`` and
``NewCheckpointReader``), in either format nbdist reads: its own
``<prefix>.npz`` or TensorFlow's V2 bundle (``<prefix>.index`` +
``<prefix>.data-*``), told apart by which files exist.

>>> import nbdist as nd, numpy as np, tempfile, os
>>> g = nd.Graph()
>>> with g.as_default():
...     v = nd.Variable([[1.0, 2.0]], name="v")
...     saver = nd.train.Saver()
>>> d = tempfile.mkdtemp()
>>> with nd.Session(graph=g) as s:
...     s.run(v.initializer)
...     _ = saver.save(s, os.path.join(d, "model"))
>>> nd.train.list_variables(d)
[('v', [1, 2])]
>>> nd.train.load_variable(d, "v")
array([[1., 2.]], dtype=float32)
"""

from __future__ import annotations

import os

from nbdist import errors
from nbdist.proto import types_pb2
from nbdist.train.checkpoint_management import latest_checkpoint
from nbdist.train.file_io import local_path
from nbdist.train.npz_format import DATA_SUFFIX, NpzReader
from nbdist.train.tensor_bundle import INDEX_SUFFIX, BundleReader

__all__ = [
    "CheckpointReader",
    "NewCheckpointReader",
    "init_from_checkpoint",
    "list_variables",
    "load_checkpoint",
    "load_variable",
    "open_checkpoint",
]


def open_checkpoint(prefix):
    """The reader of the checkpoint ``prefix`` (``.npz`` first, then TF's
    ``.index``); ``NotFoundError`` when neither exists."""
    prefix = local_path(prefix)
    if os.path.isfile(prefix + DATA_SUFFIX):
        return NpzReader(prefix)
    if os.path.isfile(prefix + INDEX_SUFFIX):
        return BundleReader(prefix)
    raise errors.NotFoundError(
        None, None, "Unsuccessful TensorSliceReader constructor: Failed to find "
        f"any matching files for {prefix}")


class CheckpointReader:
    """A checkpoint's tensors by name (``tf.compat.v1.train.NewCheckpointReader``)."""

    def __init__(self, prefix):
        self._reader = open_checkpoint(prefix)

    def has_tensor(self, name) -> bool:
        return self._reader.has_tensor(name)

    def get_tensor(self, name):
        """The saved value of ``name`` (a NumPy array; strings as bytes
        objects); ``NotFoundError`` if it is not in the checkpoint."""
        return self._reader.get_tensor(name)

    def get_variable_to_shape_map(self) -> dict:
        return {n: self._reader.shape(n) for n in self._reader.entries}

    def get_variable_to_dtype_map(self) -> dict:
        return {n: self._reader.dtype(n) for n in self._reader.entries}

    def debug_string(self) -> bytes:
        """One line per tensor: ``name (DT_FLOAT) [2,3]``, sorted by name."""
        lines = []
        for name in sorted(self._reader.entries):
            dtype = types_pb2.DataType.Name(self._reader.dtype(name).as_datatype_enum)
            dims = ",".join(str(d) for d in self._reader.shape(name))
            lines.append(f"{name} ({dtype}) [{dims}]\n")
        return "".join(lines).encode()


def NewCheckpointReader(filepattern):
    """A ``CheckpointReader`` of the checkpoint prefix ``filepattern``."""
    return CheckpointReader(filepattern)


def _prefix_of(ckpt_dir_or_file) -> str:
    path = local_path(ckpt_dir_or_file)
    if os.path.isdir(path):
        prefix = latest_checkpoint(path)
        if prefix is None:
            raise ValueError("Couldn't find 'checkpoint' file or checkpoints in "
                             f"given directory {path}")
        return prefix
    return path


def load_checkpoint(ckpt_dir_or_file) -> CheckpointReader:
    """The reader of a checkpoint prefix, or of a directory's newest one."""
    return CheckpointReader(_prefix_of(ckpt_dir_or_file))


def load_variable(ckpt_dir_or_file, name):
    """The value of variable ``name`` (``"v"`` or ``"v:0"``) in a checkpoint."""
    name = name.removesuffix(":0")
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)


def list_variables(ckpt_dir_or_file) -> list:
    """(name, shape) of every tensor of a checkpoint, sorted by name."""
    shapes = load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map()
    return sorted(shapes.items())


def init_from_checkpoint(ckpt_dir_or_file, assignment_map):
    """Makes the initializers of variables assign their values from a
    checkpoint (``tf.compat.v1.train.init_from_checkpoint``).

    ``assignment_map`` maps checkpoint names to variables or variable names
    of the default graph; ``"scope/": "scope2/"`` maps every checkpoint
    tensor under ``scope/`` to the variable of the same name under
    ``scope2/`` (``"/"`` is the root). Run the initializers afterwards, as
    usual.
    """
    from nbdist.ops.variables import Variable, global_variables

    reader = load_checkpoint(ckpt_dir_or_file)
    by_name = {v.op.name: v for v in global_variables()}
    pairs = []
    for ckpt_name, target in assignment_map.items():
        if isinstance(target, Variable):
            pairs.append((ckpt_name, target))
        elif ckpt_name.endswith("/") or ckpt_name == "/":
            src = "" if ckpt_name == "/" else ckpt_name
            dst = "" if target == "/" else target
            for name in reader.get_variable_to_shape_map():
                if name.startswith(src) and dst + name[len(src):] in by_name:
                    pairs.append((name, by_name[dst + name[len(src):]]))
        else:
            if target not in by_name:
                raise ValueError(f"Tensor {target} is not found in the graph")
            pairs.append((ckpt_name, by_name[target]))
    for ckpt_name, var in pairs:
        if not reader.has_tensor(ckpt_name):
            raise ValueError(f"Tensor {ckpt_name} is not found in "
                             f"{ckpt_dir_or_file} checkpoint")
        value = reader.get_tensor(ckpt_name)
        if not var.shape.is_compatible_with(value.shape):
            raise ValueError(f"Shape of variable {var.op.name} ({var.shape}) "
                             f"doesn't match with shape of tensor {ckpt_name} "
                             f"({list(value.shape)}) from checkpoint reader.")
        set_initial_value(var, value)


def set_initial_value(var, value):
    """Makes ``var``'s initializer assign ``value`` (a NumPy array) instead:
    how a checkpoint, or a value computed from one, warm-starts a variable."""
    from nbdist.framework.constant_op import constant
    from nbdist.ops.state_ops import assign

    g = var.graph
    with g.as_default(), g.colocate_with(var.op), g.name_scope(
            var.op.name + "/init_from_checkpoint"):
        var._initializer_op = assign(
            var._ref(), constant(value, dtype=var.dtype.base_dtype)).op
