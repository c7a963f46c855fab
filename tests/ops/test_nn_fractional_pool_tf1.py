"""nd.nn.fractional_max_pool / fractional_avg_pool: region boundaries as TF
describes them (sizes n // out or one more, covering the axis), each output the
max / mean of its region, seeded, and gradients routed to the regions."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd


@pytest.mark.parametrize("overlapping", [False, True])
def test_fractional_pools(overlapping):
    x = np.random.RandomState(0).rand(2, 10, 9, 3)
    with nd.Graph().as_default():
        tx = nd.constant(x)
        mx, rows, cols = nd.nn.fractional_max_pool(tx, [1.0, 1.6, 1.5, 1.0],
                                                   overlapping=overlapping, seed=3,
                                                   seed2=1)
        av, arows, acols = nd.nn.fractional_avg_pool(tx, [1.0, 2.0, 1.5, 1.0],
                                                     overlapping=overlapping,
                                                     seed=3, seed2=1)
        assert mx.shape.as_list() == [2, 6, 6, 3]
        gm, ga = nd.gradients([nd.reduce_sum(mx)], tx)[0], nd.gradients(
            nd.reduce_sum(av), tx)[0]
        with nd.Session() as s:
            m, r, c, a, ar, ac, gmv, gav = s.run([mx, rows, cols, av, arows, acols,
                                                  gm, ga])
    for seq, n, out in ((r, 10, 6), (c, 9, 6), (ar, 10, 5), (ac, 9, 6)):
        assert seq[0] == 0 and seq[-1] == n and len(seq) == out + 1
        assert set(np.diff(seq)) <= {n // out, n // out + 1}

    def region(seq, i, n):
        end = min(seq[i + 1] + 1, n) if overlapping else seq[i + 1]
        return slice(seq[i], end)

    for i in range(6):
        for j in range(6):
            win = x[:, region(r, i, 10), region(c, j, 9)]
            np.testing.assert_allclose(m[:, i, j], win.max((1, 2)))
    for i in range(5):
        for j in range(6):
            win = x[:, region(ar, i, 10), region(ac, j, 9)]
            np.testing.assert_allclose(a[:, i, j], win.mean((1, 2)))
    assert gmv.sum() == pytest.approx(m.size)    # one unit per output, to its max
    assert gav.sum() == pytest.approx(a.size)
