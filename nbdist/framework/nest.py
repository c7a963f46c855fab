"""Nested structures of tuples, lists, namedtuples and dicts (TF's ``nest``):
flattened to their leaves (mappings by sorted key) and packed back. The one
``nest`` of nbdist: control flow (``cond``/``while_loop``/``case``),
``custom_gradient``, ``nd.function``, datasets and the ``ClusterCoordinator``
all flatten and pack with it, and ``tensorflow.python.util.nest`` forwards here.

>>> flatten({"b": (1, 2), "a": 3})
[3, 1, 2]
>>> pack_sequence_as((0, [0, 0]), [1, 2, 3])
(1, [2, 3])
"""

from __future__ import annotations

import collections.abc

__all__ = ["assert_same_structure", "flatten", "flatten_up_to", "is_namedtuple",
           "is_nested", "map_structure", "pack_sequence_as"]


def is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def is_nested(x, lists_are_leaves=False) -> bool:
    """Whether ``x`` is a structure (tuple, list, namedtuple or mapping), not a leaf."""
    if isinstance(x, (tuple, collections.abc.Mapping)):
        return True
    return isinstance(x, list) and not lists_are_leaves


def flatten(structure, lists_are_leaves=False) -> list:
    """Leaves of nested tuples, lists, namedtuples and dicts (dicts by sorted key).
    ``lists_are_leaves``: lists are leaves (as tf.data's nest)."""
    if isinstance(structure, collections.abc.Mapping):
        return [leaf for k in sorted(structure)
                for leaf in flatten(structure[k], lists_are_leaves)]
    if is_nested(structure, lists_are_leaves):
        return [leaf for s in structure for leaf in flatten(s, lists_are_leaves)]
    return [structure]


def pack_sequence_as(structure, flat, lists_are_leaves=False):
    """``structure`` with its leaves replaced, in order, by ``flat``. A mapping
    keeps its own key order (its leaves are taken by sorted key)."""
    flat = list(flat)
    want = len(flatten(structure, lists_are_leaves))
    if want != len(flat):
        raise ValueError(f"pack_sequence_as: the structure has {want} leaves, but "
                         f"{len(flat)} value(s) were given")
    it = iter(flat)

    def build(s):
        if isinstance(s, collections.abc.Mapping):
            vals = {k: build(s[k]) for k in sorted(s)}
            return type(s)((k, vals[k]) for k in s) if type(s) is not dict else \
                {k: vals[k] for k in s}
        if is_namedtuple(s):
            return type(s)(*[build(x) for x in s])
        if is_nested(s, lists_are_leaves):
            return type(s)([build(x) for x in s])
        return next(it)

    return build(structure)


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
    """``structure`` with ``fn`` applied to each leaf."""
    return pack_sequence_as(structure, [fn(x) for x in flatten(structure,
                                                              lists_are_leaves)],
                            lists_are_leaves)


def _signature(s, check_types: bool):
    if isinstance(s, collections.abc.Mapping):
        kind = type(s) if check_types else "mapping"
        return (kind, tuple((k, _signature(s[k], check_types)) for k in sorted(s)))
    if is_nested(s):
        kind = type(s) if check_types else "sequence"
        return (kind, tuple(_signature(x, check_types) for x in s))
    return "."


def assert_same_structure(nest1, nest2, check_types=True):
    """As TF's nest: ``ValueError`` unless both have the same nesting; with
    ``check_types``, ``TypeError`` when their sequence or mapping types differ."""
    if _signature(nest1, False) != _signature(nest2, False):
        raise ValueError(f"The two structures don't have the same nested "
                         f"structure: {nest1!r} and {nest2!r}")
    if check_types and _signature(nest1, True) != _signature(nest2, True):
        raise TypeError(f"The two structures don't have the same sequence type: "
                        f"{nest1!r} and {nest2!r}")
