"""A session's first run loads every kernel module; the ones built on heavy SciPy
subpackages (``scipy.stats`` for stateless truncated normals, ``scipy.fft`` for DCT) import
them when such a node is compiled, not then: loading them made the first run of
every program a second and a half dearer in CPU."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
import numpy as np
import nbdist as nd

heavy = ('scipy.stats', 'scipy.fft')
with nd.Session(graph=nd.Graph()) as s:
    assert s.run(nd.constant(2.0) * 21.0) == 42.0
    print(sorted(m for m in heavy if m in sys.modules))
with nd.Graph().as_default(), nd.Session() as s:
    t = nd.random.stateless_truncated_normal([1000], seed=[1, 2])
    d = nd.signal.dct(nd.constant([1.0, 2.0, 3.0, 4.0]), type=2)
    tv, dv = s.run([t, d])
    assert tv.shape == (1000,) and np.abs(tv).max() <= 2.0
    # DCT-II of [1, 2, 3, 4]: 2 * sum x_n cos(pi k (2n + 1) / 8)
    n = np.arange(4)
    want = [2 * np.sum((n + 1) * np.cos(np.pi * k * (2 * n + 1) / 8)) for k in n]
    np.testing.assert_allclose(dv, want, rtol=1e-5, atol=1e-5)
    print(sorted(m for m in heavy if m in sys.modules))
"""


def test_first_run_leaves_scipy_stats_and_fft_until_a_node_needs_them():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[]", "['scipy.fft', 'scipy.stats']"], (
        out.stdout + out.stderr)
