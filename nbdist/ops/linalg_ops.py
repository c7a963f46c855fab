"""Linear-algebra ops: ``Qr`` (``nd.linalg.qr``; what ``orthogonal_initializer``
is built on).

>>> import numpy as np
>>> import nbdist as nd
>>> a = np.array([[3.0, 1.0], [4.0, 2.0]], np.float32)
>>> q, r = nd.qr(a)
>>> with nd.Session() as s:
...     np.allclose(s.run(nd.matmul(q, r)), a, atol=1e-6)
True
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import check_type, op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape

_QR_TYPES = (dtypes.float16, dtypes.float32, dtypes.float64)

__all__ = ["qr"]


def _qr_infer(c):
    d = check_type(c, 0, _QR_TYPES, "input")
    shape = c.shape(0)
    if shape.rank is None:
        return [(d, TensorShape(None)), (d, TensorShape(None))]
    if shape.rank < 2:
        raise ValueError(f"Shape must be at least rank 2 but is rank {shape.rank} "
                         f"for 'Qr' with input shape {shape}")
    dims = shape.as_list()
    batch, m, n = dims[:-2], dims[-2], dims[-1]
    full = c.attr("full_matrices")
    k = None if m is None or n is None else min(m, n)
    q_cols = m if full else k
    r_rows = m if full else k
    return [(d, TensorShape(batch + [m, q_cols])),
            (d, TensorShape(batch + [r_rows, n]))]


register_op("Qr", _qr_infer, attrs={"full_matrices": ("bool", False),
                                    "T": ("type", None)}, num_inputs=1)


def qr(input, full_matrices=False, name=None):  # noqa: A002 - TF's name
    """The QR decomposition of (a batch of) matrices: ``q, r = nd.qr(a)`` with
    ``a = q @ r``, ``q`` orthonormal columns and ``r`` upper triangular."""
    with op_scope(name, "Qr", [input]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        op = g.create_op("Qr", [x], {"full_matrices": bool(full_matrices),
                                     "T": x.dtype.base_dtype}, name=scope)
        return op.outputs[0], op.outputs[1]
