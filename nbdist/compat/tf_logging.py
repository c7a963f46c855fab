"""``nbdist.compat.tf_logging`` is ``nbdist.train.tf_logging`` (the same module
object), so ``nd.compat.v1.logging`` is what nbdist's hooks and sessions log
through."""

from __future__ import annotations

import sys

from nbdist.train import tf_logging as _tf_logging

sys.modules[__name__] = _tf_logging
