"""``sobol_sample``: points of the Sobol low-discrepancy sequence (op
``SobolSample``; its kernel uses SciPy's ``scipy.stats.qmc.Sobol``, whose
direction numbers are Joe and Kuo's, as TF's).

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.math.sobol_sample(2, 3)).tolist()
[[0.5, 0.5], [0.75, 0.25], [0.25, 0.75]]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import FLOAT, check_scalar_input, check_type, op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape


def _sobol_infer(c):
    for i, arg in enumerate(("dim", "num_results", "skip")):
        check_type(c, i, (dtypes.int32,), arg)
        check_scalar_input(c, i, arg)
    d = c.attr("dtype")
    if d not in FLOAT[1:]:
        raise TypeError(f"SobolSample: dtype must be float32 or float64, got "
                        f"{d.name}")
    dim, n = c.constant(0), c.constant(1)
    return [(d, TensorShape([None if n is None else int(n),
                             None if dim is None else int(dim)]))]


register_op("SobolSample", _sobol_infer,
            attrs={"dtype": ("type", dtypes.float32)}, num_inputs=3)
NotDifferentiable("SobolSample")


def sobol_sample(dim, num_results, skip=0, dtype=dtypes.float32, name=None):
    """``[num_results, dim]`` points of the Sobol sequence in [0, 1), after the
    first ``skip`` (the all-zero first point is always left out, as TF)."""
    with op_scope(name, "SobolSample", []) as (g, scope):
        args = [convert_to_tensor(v, dtype=dtypes.int32, name=n) for v, n in
                ((dim, "dim"), (num_results, "num_results"), (skip, "skip"))]
        return g.create_op("SobolSample", args,
                           {"dtype": dtypes.as_dtype(dtype).base_dtype},
                           name=scope).outputs[0]
