"""``CheckPinned`` (TF's ``tf.check_pinned``): checks that a tensor lives in host
memory pinned for a GPU. nbdist keeps every tensor in ordinary NumPy memory, so
running it fails as TensorFlow's does for a tensor that is not pinned.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     try:
...         s.run(nd.check_pinned(nd.constant([1.0])))
...     except nd.errors.InvalidArgumentError as e:
...         print(e.message.splitlines()[0])
not pinned
"""

from __future__ import annotations

from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor

register_op("CheckPinned", lambda c: [(c.dtype(0), c.shape(0))],
            attrs={"T": ("type", None)}, num_inputs=1, stateful=True)


def check_pinned(tensor, name=None):
    """``tensor`` if it is in pinned host memory; InvalidArgumentError when run
    otherwise (always, on nbdist's NumPy devices)."""
    with op_scope(name, "CheckPinned", [tensor]) as (g, scope):
        x = convert_to_tensor(tensor, name="tensor")
        return g.create_op("CheckPinned", [x], {"T": x.dtype.base_dtype},
                           name=scope).outputs[0]


__all__ = ["check_pinned"]
