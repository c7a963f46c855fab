"""``Bucketize``: the bucket of each value among sorted boundaries (TF's
``math_ops._bucketize``, what ``bucketized_column`` runs): the number of
boundaries the value is greater than or equal to, as int32.

>>> import nbdist as nd
>>> from nbdist.ops.bucketize_ops import bucketize
>>> with nd.Session() as s:
...     s.run(bucketize(nd.constant([-5.0, 0.0, 10.0, 150.0]), [0.0, 10.0, 100.0]))
array([0, 1, 2, 3], dtype=int32)
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph

_BUCKETIZE_TYPES = (dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64)


def _bucketize_infer(c):
    if c.dtype(0) not in _BUCKETIZE_TYPES:
        raise TypeError(f"Bucketize ({c.name}) needs int32, int64, float or double "
                        f"input, got {c.dtype(0).name}")
    b = list(c.attr("boundaries"))
    if b != sorted(b):
        raise ValueError(f"Bucketize ({c.name}): Expected sorted boundaries")
    return [(dtypes.int32, c.shape(0))]


register_op("Bucketize", _bucketize_infer,
            attrs={"T": ("type", None), "boundaries": ("list(float)", REQUIRED)},
            num_inputs=1)
NotDifferentiable("Bucketize")


def bucketize(input, boundaries, name=None):  # noqa: A002 - TF's name
    """The bucket of each value of ``input``: the number of ``boundaries``
    (sorted floats) it is greater than or equal to, as int32."""
    x = convert_to_tensor(input, name="input")
    b = [float(v) for v in boundaries]
    g = get_default_graph()
    return g.create_op("Bucketize", [x], {"T": x.dtype.base_dtype, "boundaries": b},
                       name=name or "Bucketize").outputs[0]


__all__ = ["bucketize"]
