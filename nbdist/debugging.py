"""``nd.debugging``: TF's ``tf.debugging`` (the ``assert_*`` checks and
``Assert``), for graphs.

>>> import nbdist as nd
>>> x = nd.constant([1.0, 2.0])
>>> check = nd.debugging.assert_less(x, 3.0)
>>> with nd.Session() as s:
...     s.run(check)
"""

from __future__ import annotations

from nbdist.ops.check_ops import (Assert, assert_all_finite,
                                  assert_equal, assert_greater,
                                  assert_greater_equal, assert_integer,
                                  assert_less, assert_less_equal,
                                  assert_near, assert_negative,
                                  assert_non_negative,
                                  assert_non_positive, assert_none_equal,
                                  assert_positive, assert_rank,
                                  assert_rank_at_least, assert_rank_in,
                                  assert_scalar, assert_type)

__all__ = ["Assert", "assert_all_finite", "assert_equal", "assert_greater", "assert_greater_equal",
           "assert_integer", "assert_less", "assert_less_equal", "assert_near",
           "assert_negative", "assert_non_negative", "assert_non_positive",
           "assert_none_equal", "assert_positive", "assert_rank",
           "assert_rank_at_least", "assert_rank_in", "assert_scalar", "assert_type"]
