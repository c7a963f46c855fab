"""``tensorflow.python.platform.tf_logging`` is ``nbdist.train.tf_logging``, the
same module object nbdist's hooks and sessions log through, so a program's
``mock.patch.object(tf_logging, "info")`` sees nbdist's own log calls."""

from __future__ import annotations

import sys

from nbdist.train import tf_logging as _tf_logging

sys.modules[__name__] = _tf_logging
