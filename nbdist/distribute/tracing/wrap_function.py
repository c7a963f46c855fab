"""``wrap_function`` (TF's ``tf.compat.v1.wrap_function``): a Python function
of tensors traced once, for ``signature``, into a graph function. Calling the
result with tensors adds a call op to their graph; with NumPy values it runs
now. It is ``nd.function(fn, input_signature=signature)``'s concrete function,
so the same rules hold (the function may read, not create, variables).

>>> import numpy as np, nbdist as nd
>>> tf = nd.compat.v1
>>> triple = tf.wrap_function(lambda x: x * 3.0, [tf.TensorSpec([2], nd.float32)])
>>> triple(np.array([1.0, 2.0], np.float32)).tolist()
[3.0, 6.0]
"""

from __future__ import annotations

from nbdist.distribute.tracing.function import ConcreteFunction, Function
from nbdist.distribute.tracing.tensor_spec import TensorSpec
from nbdist.framework import nest


def _tracing_spec(spec):
    """A ``tf.TensorSpec`` (``nd.TensorSpec`` of the framework) as the tracer's."""
    if isinstance(spec, TensorSpec):
        return spec
    if hasattr(spec, "shape") and hasattr(spec, "dtype"):
        return TensorSpec(spec.shape, spec.dtype, getattr(spec, "name", None))
    raise TypeError(f"wrap_function: signature must hold TensorSpecs, got {spec!r}")


def wrap_function(fn, signature, name=None) -> ConcreteFunction:
    """``fn`` traced for ``signature`` (a list of ``TensorSpec``s) into a
    callable graph function."""
    specs = nest.map_structure(_tracing_spec, list(signature or []))
    return Function(fn, input_signature=specs, name=name).get_concrete_function()


__all__ = ["wrap_function"]
