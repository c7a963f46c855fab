"""What the ``Saver`` saves under each name: a variable, or the shards of a
partitioned variable (each with its ``SaveSliceInfo``), saved as one array.

TF's ``saveable_object_util`` (``op_list_to_dict``) in nbdist's terms.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nbdist.framework.ops import Tensor
from nbdist.ops.partitioned_variables import PartitionedVariable, SaveSliceInfo
from nbdist.ops.variables import Variable


def as_ref(v):
    """The reference tensor of a variable (or a ref tensor itself)."""
    if isinstance(v, Variable):
        return v._ref()
    if isinstance(v, Tensor) and v.dtype.is_ref_dtype:
        return v
    raise TypeError(f"Saver: {v!r} is not a Variable")


def _shards(v):
    """The shards of a partitioned variable (PartitionedVariable or list)."""
    if isinstance(v, PartitionedVariable):
        return list(v)
    if isinstance(v, (list, tuple)):
        for part in v:
            if not isinstance(part, Variable) or part._save_slice_info is None:
                raise TypeError(f"Saver: a list in var_list must hold the shards of "
                                f"a partitioned variable, got {part!r}")
        return list(v)
    return None


def names_to_vars(var_list):
    """An ordered dict saved-name -> list of Variables (or ref tensors).

    A partitioned variable (its shards, each with a ``SaveSliceInfo``) is
    saved under its full name as one array.
    """
    items: dict = {}
    sliced: set = set()
    if isinstance(var_list, dict):
        for name, v in var_list.items():
            if not isinstance(name, str):
                raise TypeError(f"Saver: names must be strings, got {name!r}")
            shards = _shards(v)
            if shards is None:
                as_ref(v)
            items[name] = shards or [v]
    else:
        for v in var_list:
            shards = _shards(v)
            info = getattr(v, "_save_slice_info", None)
            if shards is None and info is None:
                name = as_ref(v).op.name
                if name in items:
                    raise ValueError(f"At least two variables have the same name: "
                                     f"{name}")
                items[name] = [v]
                continue
            for shard in shards or [v]:
                name = shard._save_slice_info.full_name
                if name in items and name not in sliced:
                    raise ValueError(f"At least two variables have the same name: "
                                     f"{name}")
                sliced.add(name)
                if all(shard is not other for other in items.setdefault(name, [])):
                    items[name].append(shard)
    for name, parts in items.items():
        if not name or ":" in name:
            raise ValueError(f"Saver: invalid saved name {name!r}")
        infos = [getattr(p, "_save_slice_info", None) for p in parts]
        if len(parts) > 1 or infos[0] is not None:
            full = infos[0].full_shape
            covered = sum(int(np.prod(i.var_shape)) for i in infos)
            if any(i.full_shape != full for i in infos) or covered != int(
                    np.prod(full)):
                raise ValueError(f"Saver: the shards of {name} do not make up its "
                                 f"full shape {full}: "
                                 f"{[i.spec for i in infos]}")
    return dict(sorted(items.items()))


class SavedPart(NamedTuple):
    """One variable (or shard) of a saved name: how to read and restore it."""

    read: Tensor
    placeholder: Tensor
    ref: Tensor
    slice_info: SaveSliceInfo | None

    def region(self):
        info = self.slice_info
        return tuple(slice(o, o + n) for o, n in zip(info.var_offset, info.var_shape))


def slice_info_from_spec(full_name, spec):
    # "10 4 0,5:0,4": full shape, then offset,length per dimension.
    *full, dims = spec.split(" ")
    pairs = [d.split(",") for d in dims.split(":")]
    return SaveSliceInfo(full_name, [int(d) for d in full],
                         [int(o) for o, _ in pairs], [int(n) for _, n in pairs])


def whole_value(parts, values):
    """The saved array of one name: the value, or the shards put together."""
    if parts[0].slice_info is None:
        return values[0]
    first = np.asarray(values[0])
    whole = np.empty(parts[0].slice_info.full_shape, dtype=first.dtype)
    for part, value in zip(parts, values):
        whole[part.region()] = value
    return whole
