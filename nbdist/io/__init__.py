"""``nd.io``: TF2's ``tf.io``; here its ``gfile`` (``nd.io.gfile``)."""

from __future__ import annotations

from nbdist.io import gfile

__all__ = ["gfile"]
