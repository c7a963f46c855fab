"""``nd.cluster``: clusters of real processes and the resolvers that describe them.

``LocalCluster`` (one process per task on this machine), ``SlurmCluster`` (a SLURM
job), ``AttachedCluster`` (a running cluster this process did not start), the
``Cluster`` protocol they satisfy (``base``), and the cluster resolvers (``TFConfigClusterResolver``,
``SimpleClusterResolver``, ``SlurmClusterResolver``). Loaded on first use, so
``import nbdist`` stays quick.

>>> import nbdist as nd
>>> nd.cluster.LocalCluster is nd.LocalCluster
True
"""

from __future__ import annotations

import importlib

_NAMES = {
    "LocalCluster": "local_cluster",
    "TaskInfo": "base",
    "Cluster": "base",
    "AttachedCluster": "attached",
    "SlurmCluster": "slurm_cluster",
    "SlurmTaskInfo": "slurm_cluster",
    "ClusterResolver": "resolvers",
    "SimpleClusterResolver": "resolvers",
    "TFConfigClusterResolver": "resolvers",
    "SlurmClusterResolver": "resolvers",
}

__all__ = sorted(_NAMES)


def __getattr__(name):
    if name in _NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    raise AttributeError(f"module 'nbdist.cluster' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_NAMES))
