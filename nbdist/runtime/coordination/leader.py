"""Which task hosts a cluster's coordination service, and its target: the one
place that says it (servers, clusters, the notebook and the strategies ask here).

The leader is chief 0, else worker 0, else ps 0, else the first task of the
first job (as TF's coordination service picks its leader).

>>> from nbdist.runtime.cluster_spec import ClusterSpec
>>> spec = ClusterSpec({"ps": ["h:1"], "worker": ["h:2", "h:3"]})
>>> leader_task(spec), leader_of(spec), target_of(spec)
('/job:worker/replica:0/task:0', ('worker', 0), 'grpc://h:2')
"""

from __future__ import annotations

from nbdist.runtime.cluster_spec import ClusterSpec, task_device

__all__ = ["leader_of", "leader_task", "target_of"]

_PREFERRED = ("chief", "worker", "ps")


def leader_of(cluster_spec) -> tuple[str, int] | None:
    """(job, index) of the task that hosts the service; None for no tasks."""
    jobs = cluster_spec.jobs
    for job in (*_PREFERRED, *jobs[:1]):
        if job in jobs and cluster_spec.task_indices(job):
            return job, min(cluster_spec.task_indices(job))
    return None


def leader_task(cluster_spec) -> str | None:
    """The task that hosts the service (``/job:worker/replica:0/task:0``)."""
    leader = leader_of(cluster_spec)
    return None if leader is None else task_device(*leader)


def target_of(where, scheme: str = "grpc") -> str:
    """The target of the coordination service ``where`` names.

    ``where``: anything with a ``coordination_target`` (a ``Server``, a
    cluster), a target string (``grpc://host:port`` or ``host:port`` of any
    task: one that does not host the service redirects), a ``ClusterSpec``,
    cluster dict or ``ClusterDef``, or anything with a ``cluster_spec``.
    Raises ``ValueError`` for a cluster without tasks, ``TypeError`` for
    anything else.
    """
    named = getattr(where, "coordination_target", None)
    if isinstance(named, str):
        return named
    if isinstance(where, str):
        return where if "://" in where else f"{scheme}://{where}"
    spec = getattr(where, "cluster_spec", where)
    if isinstance(spec, dict) or hasattr(spec, "job"):  # a dict or a ClusterDef
        spec = ClusterSpec(spec)
    if not isinstance(spec, ClusterSpec):
        raise TypeError("A coordination service is named by a target string, a "
                        "Server, a cluster or a ClusterSpec; got "
                        f"{type(where).__name__}")
    leader = leader_of(spec)
    if leader is None:
        raise ValueError("The cluster is empty: no task hosts its coordination "
                         "service")
    return f"{scheme}://{spec.task_address(*leader)}"
