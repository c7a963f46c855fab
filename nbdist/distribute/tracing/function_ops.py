"""The op that calls a graph function: ``_FunctionCall``.

Its attr ``f`` names a ``FunctionDef`` of the graph's function library
(``GraphDef.library``); the node also carries the serialized FunctionDef in
the private attr ``_fdef``, so the body travels with the node when the master
cuts a client graph into per-task partitions. Inputs are the function's
arguments (dtypes ``Tin``); outputs are its tensor results (``Tout``, static
shapes ``output_shapes``). The kernel (``executor/kernels/function_kernels.py``)
compiles the body once per registered graph and runs it on the call's task.
"""

from __future__ import annotations

from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.tensor_shape import TensorShape


def _call_infer(c):
    tin = c.attr("Tin")
    if len(tin) != len(c.input_dtypes):
        raise ValueError(f"function '{c.attr('f')}' takes {len(tin)} argument(s), "
                         f"got {len(c.input_dtypes)}")
    for i, want in enumerate(tin):
        if c.dtype(i) is not want.base_dtype:
            raise TypeError(f"argument {i} of function '{c.attr('f')}' must be "
                            f"{want.name}, got {c.dtype(i).name}")
    shapes = list(c.attr("output_shapes") or [])
    tout = c.attr("Tout")
    if shapes and len(shapes) != len(tout):
        raise ValueError("output_shapes and Tout differ in length")
    return [(t, shapes[i] if shapes else TensorShape(None)) for i, t in enumerate(tout)]


register_op("_FunctionCall", _call_infer,
            attrs={"f": ("func", REQUIRED), "Tin": ("list(type)", []),
                   "Tout": ("list(type)", []), "output_shapes": ("list(shape)", [])},
            min_inputs=0, stateful=True)

__all__: list[str] = []
