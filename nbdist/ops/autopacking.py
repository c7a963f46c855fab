"""TF's autopacking: a (nested) list or tuple that holds tensors or variables
converts to a tensor through ``Pack`` ops, wherever a tensor is expected.

>>> import nbdist as nd
>>> a, b = nd.constant(1.0), nd.constant(2.0)
>>> with nd.Session() as s:
...     s.run(nd.reduce_sum([[a, b], [3, 4]], axis=0)).tolist()
[4.0, 6.0]

The dtype is that of the first tensor found; Python numbers become constants of
that dtype. A tensor of another dtype is a ``TypeError``, unless a ``dtype`` is
asked for, which casts the tensors to it (as TF). Lists of plain values (numbers,
strings, arrays) are not packed: they become one ``Const``.
"""

from __future__ import annotations

import collections.abc
import numbers

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.constant_op import constant
from nbdist.ops.math_ops_elementwise import cast
from nbdist.framework.op_util import op_scope
from nbdist.framework.tensor_shape import Dimension
from nbdist.framework.ops import (Tensor, convert_to_tensor,
                                  register_tensor_conversion_function)

# Elements a list may hold and still be one constant (TF's _NON_AUTOPACKABLE_TYPES);
# a shape's Dimension too, so [-1, x.shape[1]] keeps its static value.
_PLAIN = (numbers.Number, str, bytes, np.generic, np.ndarray, type(None), Dimension)


def _holds_tensors(value) -> bool:
    for item in value:
        if isinstance(item, (list, tuple)):
            if _holds_tensors(item):
                return True
        elif not isinstance(item, _PLAIN):
            return True
    return False


class _ListOfTensorsMeta(type):
    def __instancecheck__(cls, value):
        return isinstance(value, (list, tuple)) and _holds_tensors(value)


class ListOfTensors(metaclass=_ListOfTensorsMeta):
    """``isinstance(v, ListOfTensors)``: ``v`` is a list or tuple with a tensor
    (or variable) somewhere in it, i.e. one that autopacking converts."""


def _tensors_to(value, dtype):
    """``value`` with every tensor-like leaf converted (and cast to ``dtype`` if
    given and different)."""
    out = []
    for item in value:
        if isinstance(item, (list, tuple)):
            out.append(_tensors_to(item, dtype))
        elif isinstance(item, _PLAIN):
            out.append(item)
        else:
            t = convert_to_tensor(item)
            if dtype is not None and t.dtype.base_dtype is not dtype:
                t = cast(t, dtype)
            out.append(t)
    return out


def _first_dtype(value):
    for item in value:
        if isinstance(item, Tensor):
            return item.dtype.base_dtype
        if isinstance(item, list):
            found = _first_dtype(item)
            if found is not None:
                return found
    return None


def _pack(value, dtype, name):
    flat = [v for v in value if isinstance(v, Tensor)]
    with op_scope(name, "packed", flat) as (g, scope):
        items = []
        for i, item in enumerate(value):
            if isinstance(item, Tensor):
                if item.dtype.base_dtype is not dtype:
                    raise TypeError(
                        f"Cannot convert a list containing a tensor of dtype "
                        f"{item.dtype.base_dtype!r} to {dtype!r} (Tensor is: "
                        f"{item!r})")
                items.append(item)
            elif isinstance(item, list) and _first_dtype(item) is not None:
                items.append(_pack(item, dtype, str(i)))
            else:
                items.append(constant(item, dtype=dtype, name=str(i)))
        return g.create_op("Pack", items, {"N": len(items), "T": dtype, "axis": 0},
                           name=scope).outputs[0]


def _autopacking_conversion(value, dtype=None, name=None, as_ref=False):
    del as_ref  # a packed tensor is never a reference
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype).base_dtype
    converted = _tensors_to(value, dtype)
    return _pack(converted, dtype or _first_dtype(converted), name or "packed")


def _iterator_conversion(value, dtype=None, name=None, as_ref=False):
    # TF converts lists, tuples, ranges and arrays, not one-shot iterators.
    raise TypeError(f"Failed to convert object of type {type(value)} to Tensor. "
                    f"Contents: {value!r}. Consider casting elements to a "
                    "supported type: a list (list(...)) or a NumPy array.")


register_tensor_conversion_function(ListOfTensors, _autopacking_conversion)
register_tensor_conversion_function(collections.abc.Iterator, _iterator_conversion)
