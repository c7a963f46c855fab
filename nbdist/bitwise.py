"""``nd.bitwise``: TF's ``tf.bitwise`` (``bitwise_and`` ... ``right_shift``).

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.bitwise.left_shift([1, 3], [2, 1])).tolist()
[4, 6]
"""

from __future__ import annotations

from nbdist.ops.bitwise_ops import (
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    invert,
    left_shift,
    right_shift,
)

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift",
           "right_shift"]
