"""``nd.debugging``: TF's ``tf.debugging`` (the ``assert_*`` checks and
``Assert``), for graphs.

>>> import nbdist as nd
>>> x = nd.constant([1.0, 2.0])
>>> check = nd.debugging.assert_less(x, 3.0)
>>> with nd.Session() as s:
...     s.run(check)
"""

from __future__ import annotations

from nbdist.ops.check_ops import (Assert, assert_all_finite,
                                  assert_equal, assert_greater,
                                  assert_greater_equal, assert_integer,
                                  assert_less, assert_less_equal,
                                  assert_near, assert_negative,
                                  assert_non_negative,
                                  assert_non_positive, assert_none_equal,
                                  assert_positive, assert_rank,
                                  assert_rank_at_least, assert_rank_in,
                                  assert_scalar, assert_type)

__all__ = ["Assert", "assert_all_finite", "assert_equal", "assert_greater", "assert_greater_equal",
           "assert_integer", "assert_less", "assert_less_equal", "assert_near",
           "assert_negative", "assert_non_negative", "assert_non_positive",
           "assert_none_equal", "assert_positive", "assert_rank",
           "assert_rank_at_least", "assert_rank_in", "assert_scalar", "assert_type"]

# TF's tf.debugging also holds the numeric checks and a few static helpers.
from nbdist.ops.elementary_math_ops import (  # noqa: E402
    check_numerics,
    is_non_decreasing,
    is_strictly_increasing,
)
from nbdist.ops.math_ops_elementwise import is_finite, is_inf, is_nan  # noqa: E402


def is_numeric_tensor(tensor):
    """Whether ``tensor`` is a graph tensor of a numeric (not string, bool or
    resource) dtype."""
    from nbdist.framework.dtypes import bool as bool_dtype, resource, string
    from nbdist.framework.ops import Tensor

    return isinstance(tensor, Tensor) and tensor.dtype.base_dtype not in (
        bool_dtype, string, resource)


def assert_proper_iterable(values):
    """Raises ``TypeError`` unless ``values`` is an iterable of values, not a
    single tensor, array or string (which iterate element by element)."""
    import numpy as np

    from nbdist.framework.ops import Tensor
    from nbdist.framework.sparse_tensor import SparseTensor

    if isinstance(values, (Tensor, SparseTensor, np.ndarray, str, bytes)):
        raise TypeError(f"Expected argument 'values' to be a \"proper\" iterable.  "
                        f"Found: {type(values)}")
    if not hasattr(values, "__iter__"):
        raise TypeError(f"Expected argument 'values' to be iterable.  Found: "
                        f"{type(values)}")


def assert_same_float_dtype(tensors=None, dtype=None):
    """The one floating dtype of ``tensors`` (and ``dtype``), else
    ``ValueError``; ``float32`` when neither gives one."""
    from nbdist.framework.dtypes import as_dtype, float32

    found = as_dtype(dtype) if dtype is not None else None
    for t in tensors or ():
        d = t.dtype.base_dtype
        if found is None:
            found = d
        elif d is not found:
            raise ValueError(f"{t.name}, type={d.name}: expected type "
                             f"{found.name}.")
    if found is None:
        return float32
    if not found.is_floating:
        raise ValueError(f"Expected floating point type, got {found.name}.")
    return found


__all__ += ["assert_proper_iterable", "assert_same_float_dtype", "check_numerics",
            "is_finite", "is_inf", "is_nan", "is_non_decreasing", "is_numeric_tensor",
            "is_strictly_increasing"]
