"""``nd.compat``: ``nd.compat.v1`` is the TF1 surface, so that ``tf.compat.v1.X``
becomes ``nd.compat.v1.X``.

>>> import nbdist as nd
>>> nd.compat.v1.placeholder is nd.placeholder
True
"""

from __future__ import annotations

from nbdist.compat import v1 as v1
from nbdist.framework.tensor_shape import dimension_at_index, dimension_value

__all__ = ["dimension_at_index", "dimension_value", "v1"]
