"""Version constants of TF1's top level (``nd.GRAPH_DEF_VERSION`` ...), for the
graphs nbdist writes: ``graph_def.versions.producer == nd.GRAPH_DEF_VERSION``.

>>> import nbdist as nd
>>> nd.Graph().as_graph_def().versions.producer == nd.GRAPH_DEF_VERSION
True
"""

from __future__ import annotations

import platform

from nbdist.framework.node_def import PRODUCER_VERSION

GRAPH_DEF_VERSION = PRODUCER_VERSION
# Any consumer and producer version is accepted (nbdist has one GraphDef format).
GRAPH_DEF_VERSION_MIN_CONSUMER = 0
GRAPH_DEF_VERSION_MIN_PRODUCER = 0
# nbdist is pure Python: the compiler is the interpreter's, and no C++ ABI applies.
COMPILER_VERSION = platform.python_compiler()
CXX11_ABI_FLAG = 0
MONOLITHIC_BUILD = 0

__all__ = ["COMPILER_VERSION", "CXX11_ABI_FLAG", "GRAPH_DEF_VERSION",
           "GRAPH_DEF_VERSION_MIN_CONSUMER", "GRAPH_DEF_VERSION_MIN_PRODUCER",
           "MONOLITHIC_BUILD"]
