"""What the array/linalg/sparse op tests share: ``run`` (a fetch in a fresh
in-process session), ``dynamic`` (a value whose shape the graph does not know,
so checks happen at run time) and ``flat`` (several outputs as one vector, for
``test_gradients.check_gradient``, the finite-difference oracle).
"""

from __future__ import annotations

import numpy as np

import nbdist as nd


def flat(*tensors):
    """One vector of several tensors, for gradient checks of ops with several
    outputs."""
    return nd.concat([nd.reshape(t, [-1]) for t in tensors], 0)


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


def dynamic(value):
    """``value`` behind a ``placeholder_with_default`` of unknown shape."""
    return nd.placeholder_with_default(np.asarray(value), None)
