"""``nd.manip``: TF1's ``tf.manip`` aliases of the array ops.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.manip.roll([1, 2, 3], 1, 0)).tolist()
[3, 1, 2]
"""

from __future__ import annotations

from nbdist.ops.array_ops import reshape, reverse, tile
from nbdist.ops.array_ops_scatter import gather_nd, scatter_nd
from nbdist.ops.array_ops_sequence import roll
from nbdist.ops.array_ops_space import batch_to_space_nd, space_to_batch_nd

__all__ = ["batch_to_space_nd", "gather_nd", "reshape", "reverse", "roll",
           "scatter_nd", "space_to_batch_nd", "tile"]
