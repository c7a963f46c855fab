"""Nested structures of tuples, lists, namedtuples and dicts (TF's ``nest``):
flattened to their leaves (dicts by sorted key) and packed back.

>>> flatten({"b": (1, 2), "a": 3})
[3, 1, 2]
>>> pack_sequence_as((0, [0, 0]), [1, 2, 3])
(1, [2, 3])
"""

from __future__ import annotations

import collections.abc

__all__ = ["flatten", "flatten_up_to", "is_namedtuple", "map_structure",
           "pack_sequence_as"]


def is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def flatten(structure, lists_are_leaves=False) -> list:
    """Leaves of nested tuples, lists, namedtuples and dicts (dicts by sorted key)."""
    if isinstance(structure, collections.abc.Mapping):
        return [leaf for k in sorted(structure)
                for leaf in flatten(structure[k], lists_are_leaves)]
    if isinstance(structure, tuple) or (isinstance(structure, list)
                                        and not lists_are_leaves):
        return [leaf for s in structure for leaf in flatten(s, lists_are_leaves)]
    return [structure]


def pack_sequence_as(structure, flat, lists_are_leaves=False):
    """``structure`` with its leaves replaced, in order, by ``flat``."""
    it = iter(flat)

    def build(s):
        if isinstance(s, collections.abc.Mapping):
            vals = {k: build(s[k]) for k in sorted(s)}
            return type(s)((k, vals[k]) for k in s) if type(s) is not dict else \
                {k: vals[k] for k in s}
        if is_namedtuple(s):
            return type(s)(*[build(x) for x in s])
        if isinstance(s, tuple) or (isinstance(s, list) and not lists_are_leaves):
            return type(s)(build(x) for x in s)
        return next(it)

    out = build(structure)
    rest = list(it)
    if rest:
        raise ValueError(f"pack_sequence_as: {len(rest)} value(s) too many")
    return out


def flatten_up_to(shallow, value) -> list:
    """``value`` flattened as deep as ``shallow`` goes (a leaf of ``shallow``
    takes the whole corresponding part of ``value``, e.g. a list)."""
    if isinstance(shallow, collections.abc.Mapping):
        if not isinstance(value, collections.abc.Mapping) or set(value) != set(
                shallow):
            raise TypeError(f"expected a dict with keys {sorted(shallow)}, got "
                            f"{value!r:.60}")
        return [x for k in sorted(shallow) for x in flatten_up_to(shallow[k],
                                                                   value[k])]
    if isinstance(shallow, (tuple, list)):
        if not isinstance(value, (tuple, list)) or len(value) != len(shallow):
            raise TypeError(f"expected a sequence of {len(shallow)} item(s), got "
                            f"{value!r:.60}")
        return [x for s, v in zip(shallow, value) for x in flatten_up_to(s, v)]
    return [value]


def map_structure(fn, structure, lists_are_leaves=False):
    return pack_sequence_as(structure, [fn(x) for x in flatten(structure,
                                                              lists_are_leaves)],
                            lists_are_leaves)

