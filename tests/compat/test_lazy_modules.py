"""Every public subpackage is an attribute of ``nbdist`` on first access, in a fresh
interpreter where nothing else imported it (``nd.cluster.SlurmCluster`` used to
fail with ``module 'nbdist' has no attribute 'cluster'``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

USES = {
    "cluster": "nd.cluster.SlurmCluster, nd.cluster.LocalCluster",
    "train": "nd.train.GradientDescentOptimizer",
    "distribute": "nd.distribute.run_distribute_coordinator",
    "notebook": "nd.notebook.ClusterView",
    "summary": "nd.summary.scalar",
    "compat": "nd.compat.v1.Session",
    "app": "nd.app.run",
    "contrib": "nd.contrib.training",
    "data": "nd.data.Dataset",
    "nn": "nd.nn.relu",
    "random": "nd.random.normal",
    "errors": "nd.errors.OpError",
    "server": "nd.server.main",
}


@pytest.mark.parametrize("name", sorted(USES))
def test_subpackage_is_an_attribute_on_first_access(name):
    code = f"import nbdist as nd; {USES[name]}; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


def test_unknown_name_is_still_an_attribute_error():
    import nbdist as nd

    with pytest.raises(AttributeError, match="no attribute 'no_such_module'"):
        nd.no_such_module  # noqa: B018
