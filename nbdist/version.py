"""``nd.version``: TF's ``tf.version`` (``VERSION``, ``GIT_VERSION``,
``COMPILER_VERSION``, ``GRAPH_DEF_VERSION`` ...), the same values as at top level.

>>> import nbdist as nd
>>> nd.version.VERSION == nd.VERSION == nd.__version__
True
"""

from __future__ import annotations

from nbdist import GIT_VERSION, VERSION
from nbdist.framework.versions import (
    COMPILER_VERSION,
    CXX11_ABI_FLAG,
    GRAPH_DEF_VERSION,
    GRAPH_DEF_VERSION_MIN_CONSUMER,
    GRAPH_DEF_VERSION_MIN_PRODUCER,
    MONOLITHIC_BUILD,
)

__all__ = ["COMPILER_VERSION", "CXX11_ABI_FLAG", "GIT_VERSION", "GRAPH_DEF_VERSION",
           "GRAPH_DEF_VERSION_MIN_CONSUMER", "GRAPH_DEF_VERSION_MIN_PRODUCER",
           "MONOLITHIC_BUILD", "VERSION"]
