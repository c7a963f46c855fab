"""What the op modules share: dtype groups (``FLOAT``, ``NUMERIC``, ``INDEX``...),
checks for shape functions (``check_type``, ``const_ints``, ``check_axis``...), and
the helpers of the Python wrappers (``op_scope``, ``convert_pair``).
"""

from __future__ import annotations

import contextlib

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.ops import Tensor, _graph_of, convert_to_tensor

FLOAT = (dtypes.float16, dtypes.float32, dtypes.float64)
INTEGER = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8)
NUMERIC = FLOAT + INTEGER
INDEX = (dtypes.int32, dtypes.int64)
ALL_VALUES = NUMERIC + (dtypes.bool, dtypes.string)
COMPLEX = (dtypes.complex64, dtypes.complex128)


# -- shape function helpers ---------------------------------------------------------
def check_type(c, i: int, allowed, arg: str = "x") -> dtypes.DType:
    """The base dtype of input ``i``; TypeError unless it is one of ``allowed``."""
    d = c.dtype(i)
    if d not in allowed:
        names = ", ".join(a.name for a in allowed)
        raise TypeError(
            f"Value passed to parameter '{arg}' has DataType {d.name} "
            f"not in list of allowed values: {names}"
        )
    return d


def const_ints(c, i: int):
    """Input ``i``'s static value as a list of Python ints (None when unknown)."""
    v = c.constant(i)
    if v is None:
        return None
    return [int(x) for x in np.ravel(v)]


def fmt_dims(dims) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def vector_len(c, i: int, arg: str):
    """The static length of 1-D input ``i`` (None when unknown)."""
    s = c.shape(i)
    if s.rank is not None and s.rank != 1:
        raise ValueError(f"Shape must be rank 1 but is rank {s.rank} (input '{arg}')")
    return None if s.rank is None else s[0]


def check_scalar_input(c, i: int, arg: str):
    s = c.shape(i)
    if s.rank not in (None, 0) and not (s.rank == 1 and s[0] == 1):
        raise ValueError(f"'{arg}' must be a scalar, got shape {s}")


def check_axis(a: int, rank: int, what="axis"):
    if a < -rank or a >= rank:
        raise ValueError(f"Expected {what} in the range [{-rank}, {rank}), but got {a}")
    return a % rank


# -- wrapper helpers -----------------------------------------------------------------
@contextlib.contextmanager
def op_scope(name, default_name, values=()):
    """Enters the graph of ``values`` and a name scope; yields (graph, scope).

    ``graph.create_op(..., name=scope)`` then names the op after the scope, so
    helper constants land under it ("Add/y"), as TF does.
    """
    g = _graph_of(values)
    with g.as_default(), g.name_scope(name or default_name) as scope:
        yield g, scope


def is_tensor_like(v) -> bool:
    return isinstance(v, Tensor) or hasattr(v, "_as_graph_element")


def convert_pair(x, y, x_name="x", y_name="y"):
    """Converts ``x`` and ``y``; a non-tensor one prefers the tensor one's dtype."""
    if is_tensor_like(x) or not is_tensor_like(y):
        x = convert_to_tensor(x, name=x_name)
        y = convert_to_tensor(y, name=y_name, preferred_dtype=x.dtype.base_dtype)
    else:
        y = convert_to_tensor(y, name=y_name)
        x = convert_to_tensor(x, name=x_name, preferred_dtype=y.dtype.base_dtype)
    return x, y
