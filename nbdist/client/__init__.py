"""``nd.client``: as ``tf.compat.v1.client`` — ``nd.client.timeline.Timeline``
makes a Chrome trace of a traced step.

>>> import nbdist as nd
>>> nd.client.timeline.Timeline is nd.train.timeline.Timeline
True
"""

from __future__ import annotations

from nbdist.client import timeline as timeline

__all__ = ["timeline"]
