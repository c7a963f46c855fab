"""What the op tests share: ``run`` (a fetch in a fresh in-process session),
``dynamic`` (a value whose shape the graph does not know, so checks happen at run
time) and the finite-difference oracle for gradients, ``assert_gradients_match``.
"""

from __future__ import annotations

import numpy as np

import nbdist as nd


def assert_gradients_match(build, *values, eps=1e-6, rtol=1e-4, atol=1e-6,
                           seed=0):
    """Checks ``nd.gradients`` of ``build(*inputs)`` against central differences.

    ``values`` are float64 arrays fed to placeholders; the loss is
    ``sum(w * y)`` for fixed random weights ``w``, so every output element
    counts with a different weight. Each output of ``build`` may be one tensor or
    a list (their losses are added).
    """
    values = [np.asarray(v, np.float64) for v in values]
    rng = np.random.default_rng(seed)
    with nd.Graph().as_default():
        xs = [nd.placeholder(nd.float64, v.shape) for v in values]
        ys = build(*xs)
        ys = ys if isinstance(ys, (list, tuple)) else [ys]
        with nd.Session() as s:
            shapes = [s.run(y, dict(zip(xs, values))).shape for y in ys]
            ws = [rng.standard_normal(sh) for sh in shapes]
            loss = nd.add_n([nd.reduce_sum(y * w) for y, w in zip(ys, ws)])
            grads = nd.gradients(loss, xs)
            assert all(g is not None for g in grads), grads
            grads = [nd.unsorted_segment_sum(g.values, g.indices, g.dense_shape[0])
                     if isinstance(g, nd.IndexedSlices) else g for g in grads]
            got = s.run(grads, dict(zip(xs, values)))
            for i, v in enumerate(values):
                num = np.zeros_like(v)
                for j in range(v.size):
                    plus, minus = v.copy(), v.copy()
                    plus.flat[j] += eps
                    minus.flat[j] -= eps
                    hi = s.run(loss, dict(zip(xs, values[:i] + [plus]
                                              + values[i + 1:])))
                    lo = s.run(loss, dict(zip(xs, values[:i] + [minus]
                                              + values[i + 1:])))
                    num.flat[j] = (hi - lo) / (2 * eps)
                np.testing.assert_allclose(got[i], num, rtol=rtol, atol=atol,
                                           err_msg=f"gradient of input {i}")


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


def dynamic(value):
    """``value`` behind a ``placeholder_with_default`` of unknown shape."""
    return nd.placeholder_with_default(np.asarray(value), None)
