"""What a step's fed values must be, checked by the master whatever carried them.

The Python ``Session`` converts and checks its feeds, but a server must not
depend on its client: a raw ``RunStep`` (gRPC, the same-host or TCP frames, an
in-process call) may feed anything. ``FeedCheck``s are made once per step
signature (with its ``Plan``) and cost one dtype compare per feed, plus a shape
compare for a placeholder whose shape is partly known.

>>> import numpy as np
>>> from nbdist.framework import dtypes, tensor_shape
>>> check = FeedCheck.of("x:0", "y", 0, dtypes.float32,
...                      tensor_shape.TensorShape([None, 3]))
>>> check.check(np.zeros((2, 3), np.float32))
>>> check.check(np.array([b"a"], object))
Traceback (most recent call last):
...
nbdist.errors.InvalidArgumentError: Input 0 of node y was passed string from x:0 \
incompatible with expected float.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nbdist import errors
from nbdist.framework import dtypes
from nbdist.framework.importer import parse_input
from nbdist.framework.tensor_shape import TensorShape

__all__ = ["FeedCheck", "feed_checks"]

# Ops whose shape attr is a promise about what may be fed (TF's Python Session
# checks a feed against the tensor's static shape; a server has the attr).
_PLACEHOLDERS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})
# Handles are Python objects in process; their dtype is not the array's.
UNCHECKED_DTYPES = frozenset({"resource", "variant"})
# TF's DataTypeString names where they differ from ours.
_TF_NAMES = {"float32": "float", "float64": "double", "float16": "half"}


def tf_type_name(dtype: dtypes.DType) -> str:
    name = dtype.base_dtype.name
    return _TF_NAMES.get(name, name)


def _value_type_name(arr: np.ndarray) -> str:
    try:
        return tf_type_name(dtypes.as_dtype(arr.dtype))
    except TypeError:
        return str(arr.dtype)


class FeedCheck(NamedTuple):
    """One fed tensor's expectation: its dtype (``np_dtype``; None: a string,
    any of NumPy's string kinds) and dims (None: any shape)."""

    name: str  # the feed as the request named it
    consumer: str  # a node reading it (for TF's wording), else its own node
    input_index: int
    dtype: dtypes.DType
    np_dtype: np.dtype | None
    dims: tuple | None

    @classmethod
    def of(cls, name, consumer, index, dtype: dtypes.DType,
           shape: TensorShape | None) -> FeedCheck:
        np_dtype = None if dtype is dtypes.string else np.dtype(dtype.as_numpy_dtype)
        dims = tuple(shape.as_list()) if shape is not None and shape.rank is not None \
            else None
        return cls(name, consumer, index, dtype, np_dtype, dims)

    def check(self, value) -> None:
        """Raises ``InvalidArgumentError`` unless ``value`` fits (a few compares:
        this runs on every step)."""
        arr = value if type(value) is np.ndarray else np.asarray(value)
        have, want = arr.dtype, self.np_dtype
        if want is None:
            ok = have.kind in "OSU"
        else:
            ok = have is want or (have == want and have.kind != "O")
        if not ok:
            raise errors.InvalidArgumentError(
                None, self.consumer,
                f"Input {self.input_index} of node {self.consumer} was passed "
                f"{_value_type_name(arr)} from {self.name} incompatible with "
                f"expected {tf_type_name(self.dtype)}.")
        dims = self.dims
        if dims is not None:
            shape = arr.shape
            fits = len(shape) == len(dims)
            if fits:
                for d, s in zip(dims, shape):
                    if d is not None and d != s:
                        fits = False
            if not fits:
                raise errors.InvalidArgumentError(
                    None, parse_input(self.name)[0],
                    f"Cannot feed value of shape {shape} for Tensor {self.name}, "
                    f"which has shape {_shape_text(dims)}")


def _shape_text(dims: tuple) -> str:
    return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def feed_checks(feeds, nodes: dict, specs: dict) -> tuple[FeedCheck, ...]:
    """The checks for ``feeds`` (names) of a graph: ``nodes`` by name (NodeDefs
    in graph order), ``specs`` tensor name -> (dtype, shape)."""
    wanted = {}
    for name in feeds:
        src, idx = parse_input(name)
        wanted[f"{src}:{idx}"] = name
    readers: dict = {}
    for node in nodes.values():
        for i, inp in enumerate(node.input):
            src, idx = parse_input(inp)
            key = f"{src}:{idx}"
            if idx >= 0 and key in wanted and key not in readers:
                readers[key] = (node.name, i)
    out = []
    for key, name in wanted.items():
        dtype, shape = specs[key]
        if dtype.base_dtype.name in UNCHECKED_DTYPES:
            continue
        src = key.rpartition(":")[0]
        consumer, index = readers.get(key, (src, 0))
        known = nodes[src].op in _PLACEHOLDERS and shape.rank is not None
        out.append(FeedCheck.of(name, consumer, index, dtype.base_dtype,
                                shape if known else None))
    return tuple(out)
