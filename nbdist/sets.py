"""``nd.sets``: TF1's ``tf.sets`` (set operations on the last dimension).

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.sets.size([[1, 1, 2], [3, 4, 5]])).tolist()
[2, 3]
"""

from __future__ import annotations

from nbdist.ops.sets_ops import set_difference, set_intersection, set_size, set_union

difference = set_difference
intersection = set_intersection
size = set_size
union = set_union

__all__ = ["difference", "intersection", "set_difference", "set_intersection",
           "set_size", "set_union", "size", "union"]
