"""``nd.sets``: TF's ``tf.sets`` (``intersection``, ``union``, ``difference``,
``size`` and their ``set_*`` names).

>>> import nbdist as nd
>>> u = nd.sets.union([[1, 2]], [[2, 5]])
>>> with nd.Session() as s:
...     s.run(u).values.tolist()
[1, 2, 5]
"""

from __future__ import annotations

from nbdist.ops.set_ops import set_difference, set_intersection, set_size, set_union

difference = set_difference
intersection = set_intersection
size = set_size
union = set_union

__all__ = ["difference", "intersection", "set_difference", "set_intersection",
           "set_size", "set_union", "size", "union"]
