"""``Fingerprint`` (TF's ``tf.fingerprint``): a 64-bit Farmhash fingerprint of
each row (the first dimension) of a tensor, as 8 little-endian bytes (uint8).

A row of numbers is fingerprinted as its raw bytes; a row of one string as the
string; a row of several strings as the concatenation of their fingerprints, so
the result equals TensorFlow's for the same data.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.fingerprint(nd.constant(["ab"]))).tolist()
[[30, 165, 173, 66, 82, 110, 141, 170]]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape


def _fingerprint_infer(c):
    s = c.shape(0)
    if s.rank == 0:
        raise ValueError(f"Fingerprint ({c.name}): data must have rank >= 1, got a "
                         "scalar")
    rows = None if s.rank is None else s.as_list()[0]
    return [(dtypes.uint8, TensorShape([rows, 8]))]


register_op("Fingerprint", _fingerprint_infer, attrs={"T": ("type", None)},
            num_inputs=2)
NotDifferentiable("Fingerprint")


def fingerprint(data, method="farmhash64", name=None):
    """The fingerprint of each row of ``data`` (rank >= 1): a uint8 tensor of
    shape ``[rows, 8]``. ``method`` is ``"farmhash64"``, TF's only method."""
    with op_scope(name, "Fingerprint", [data]) as (g, scope):
        x = convert_to_tensor(data, name="data")
        m = convert_to_tensor(method, dtype=dtypes.string, name="method")
        return g.create_op("Fingerprint", [x, m], {"T": x.dtype.base_dtype},
                           name=scope).outputs[0]


__all__ = ["fingerprint"]
