"""Warm starts (TF's ``tf.train.warm_start``): variables of the default graph
whose initializers take their values from another model's checkpoint, picked
by a name regex, renamed, or with embedding rows remapped between
vocabularies (``VocabInfo``). ``nd.estimator.WarmStartSettings`` carries the
same arguments for an ``Estimator``.

>>> import nbdist as nd
>>> info = nd.train.VocabInfo("new_vocab.txt", 3, 1, "old_vocab.txt")
>>> info.num_oov_buckets, info.old_vocab_size, info.axis
(1, -1, 0)
"""

from __future__ import annotations

import collections
import logging

import numpy as np

from nbdist.framework import ops
from nbdist.framework.ops import GraphKeys
from nbdist.ops.variables import Variable
from nbdist.train import checkpoint_utils

__all__ = ["VocabInfo", "warm_start"]

_log = logging.getLogger("nbdist.train")


class VocabInfo(collections.namedtuple("VocabInfo", [
        "new_vocab", "new_vocab_size", "num_oov_buckets", "old_vocab",
        "old_vocab_size", "backup_initializer", "axis"])):
    """How the rows (``axis=0``) or columns (``axis=1``) of a variable follow a
    vocabulary file: a new row takes the checkpoint's row of the same word in
    ``old_vocab``; new words and the ``num_oov_buckets`` rows get
    ``backup_initializer`` (zeros by default).

    >>> import nbdist as nd
    >>> nd.train.VocabInfo("new.txt", 3, 1, "old.txt").old_vocab_size
    -1
    """

    def __new__(cls, new_vocab, new_vocab_size, num_oov_buckets, old_vocab,
                old_vocab_size=-1, backup_initializer=None, axis=0):
        if axis not in (0, 1):
            raise ValueError("The only supported values for the axis argument are 0 "
                             f"and 1.  Provided axis: {axis}")
        return super().__new__(cls, new_vocab, new_vocab_size, num_oov_buckets,
                               old_vocab, old_vocab_size, backup_initializer, axis)


def _var_name(var) -> str:
    # A partition ``w/part_0`` belongs to the checkpoint tensor ``w``.
    info = getattr(var, "_save_slice_info", None)
    return info.full_name if info is not None else var.op.name


def _grouped_variables(vars_to_warm_start):
    if isinstance(vars_to_warm_start, str) or vars_to_warm_start is None:
        found = ops.get_collection(GraphKeys.TRAINABLE_VARIABLES,
                                   scope=vars_to_warm_start)
    elif isinstance(vars_to_warm_start, list):
        if all(isinstance(v, str) for v in vars_to_warm_start):
            found = [v for scope in vars_to_warm_start
                     for v in ops.get_collection(GraphKeys.GLOBAL_VARIABLES, scope)]
        elif all(isinstance(v, Variable) for v in vars_to_warm_start):
            found = vars_to_warm_start
        else:
            raise ValueError(
                "If `vars_to_warm_start` is a list, it must be all `Variable` or "
                f"all `str`.  Given types are {[type(v) for v in vars_to_warm_start]}")
    else:
        raise ValueError("`vars_to_warm_start must be a `list` or `str`.  Given "
                         f"type is {type(vars_to_warm_start)}")
    grouped = {}
    for v in found:
        grouped.setdefault(_var_name(v), []).append(v)
    return grouped


def _read_vocab(path, size=-1):
    with open(path, encoding="utf-8") as f:
        words = [line.rstrip("\n") for line in f]
    return words if size is None or size < 0 else words[:size]


def _backup(initializer, shape, dtype):
    if initializer is None:
        return np.zeros(shape, dtype)
    from nbdist.runtime.session import Session

    # The backup initializer is a graph initializer: evaluate it once, aside.
    with ops.Graph().as_default(), Session() as sess:
        return np.asarray(sess.run(initializer(shape, dtype=dtype)))


def _remapped(old_value, info, full_shape, dtype):
    """The new full tensor: rows (or columns) of ``old_value`` moved to where
    their word sits in the new vocabulary, the rest from the backup."""
    old_value = np.moveaxis(np.asarray(old_value), info.axis, 0)
    new_shape = list(full_shape)
    new_shape[0], new_shape[info.axis] = new_shape[info.axis], new_shape[0]
    out = _backup(info.backup_initializer, new_shape, dtype)
    old_index = {w: i for i, w in
                 enumerate(_read_vocab(info.old_vocab, info.old_vocab_size))}
    for i, word in enumerate(_read_vocab(info.new_vocab, info.new_vocab_size)):
        if word in old_index and old_index[word] < old_value.shape[0]:
            out[i] = old_value[old_index[word]]
    return np.moveaxis(out, 0, info.axis)


def _slice_of(full_value, var):
    info = getattr(var, "_save_slice_info", None)
    if info is None:
        return full_value
    index = tuple(slice(o, o + n)
                  for o, n in zip(info.var_offset, info.var_shape))
    return full_value[index]


def warm_start(ckpt_to_initialize_from, vars_to_warm_start=".*",
               var_name_to_vocab_info=None, var_name_to_prev_var_name=None):
    """Makes the initializers of the chosen variables of the default graph
    assign values from ``ckpt_to_initialize_from`` (see ``WarmStartSettings``)."""
    _log.info("Warm-starting from: %s", ckpt_to_initialize_from)
    grouped = _grouped_variables(vars_to_warm_start)
    vocab_infos = var_name_to_vocab_info or {}
    prev_names = var_name_to_prev_var_name or {}
    reader = checkpoint_utils.load_checkpoint(ckpt_to_initialize_from)
    used_prev, used_vocab = set(), set()
    for name, variables in grouped.items():
        prev = prev_names.get(name)
        if prev:
            used_prev.add(name)
        info = vocab_infos.get(name)
        if info is None and not vars_to_warm_start:
            continue
        source = prev or name
        if not reader.has_tensor(source):
            raise ValueError(f"Tensor {source} is not found in "
                             f"{ckpt_to_initialize_from} checkpoint")
        value = reader.get_tensor(source)
        first = variables[0]
        slice_info = getattr(first, "_save_slice_info", None)
        full_shape = (slice_info.full_shape if slice_info is not None
                      else first.shape.as_list())
        dtype = first.dtype.base_dtype.as_numpy_dtype
        if info is not None:
            used_vocab.add(name)
            value = _remapped(value, info, full_shape, dtype)
        elif list(value.shape) != list(full_shape):
            raise ValueError(f"Shape of variable {name} ({full_shape}) doesn't match "
                             f"with shape of tensor {source} ({list(value.shape)}) "
                             "from checkpoint reader.")
        for var in variables:
            checkpoint_utils.set_initial_value(var, _slice_of(value, var))
    _log.info("Warm-started %d variables.", len(grouped))
    unused_prev = set(prev_names) - used_prev
    if unused_prev:
        raise ValueError(
            "You provided the following variables in var_name_to_prev_var_name "
            f"that were not used: {unused_prev}.  Perhaps you misspelled them?  "
            f"Here is the list of viable variable names: {grouped.keys()}")
    unused_vocab = set(vocab_infos) - used_vocab
    if unused_vocab:
        raise ValueError(
            "You provided the following variables in var_name_to_vocab_info that "
            f"were not used: {unused_vocab}.  Perhaps you misspelled them?  Here "
            f"is the list of viable variable names: {grouped.keys()}")
