"""Following a cluster's coordination service from a client (a notebook, a
script): ``watch_events`` and ``coordination_client``.

``target`` is anything that says where the cluster is: a ``Server`` or
``LocalCluster`` (their ``coordination_target``), a ``ClusterSpec`` or cluster
dict (its leader task: the chief, else worker 0, else ps 0), or a
``grpc://host:port`` / ``host:port`` of any task of the cluster (a task that
does not host the service points the client to the one that does).

>>> import nbdist as nd
>>> server = nd.Server.create_local_server()
>>> with watch_events(server) as events:
...     first = events.next(timeout=5)
>>> first.kind, first.payload["state"]
('task_state', 'CONNECTED')
>>> server.stop()
"""

from __future__ import annotations

from nbdist.runtime import transports
from nbdist.runtime.cluster_spec import ClusterSpec
from nbdist.runtime.coordination import Event, leader_task

__all__ = ["Event", "coordination_client", "coordination_target", "watch_events"]


def coordination_target(target) -> str:
    """The ``grpc://`` target of the coordination service ``target`` names."""
    ct = getattr(target, "coordination_target", None)
    if isinstance(ct, str):
        return ct
    if isinstance(target, str):
        return target if target.startswith("grpc://") else "grpc://" + target
    if isinstance(target, dict) or hasattr(target, "job"):
        target = ClusterSpec(target)
    if isinstance(target, ClusterSpec):
        leader = leader_task(target)
        if leader is None:
            raise ValueError("The cluster is empty")
        job = leader.split("/")[1][len("job:"):]
        index = int(leader.rsplit(":", 1)[1])
        return "grpc://" + target.task_address(job, index)
    raise TypeError("target must be a target string, a Server, a LocalCluster or a "
                    f"ClusterSpec; got {type(target).__name__}")


def coordination_client(target, token=None, tls=None, config=None, task=None):
    """A ``CoordinationClient`` of the cluster ``target`` names."""
    return transports.connect_coordination(coordination_target(target), token=token,
                                           tls=tls, config=config, task=task)


def watch_events(target, from_seq: int = 0, kinds=None, token=None, tls=None,
                 config=None):
    """Follows the cluster's events from sequence number ``from_seq`` (0: the
    oldest the service keeps), then live ones, optionally only ``kinds``.

    Returns an ``EventWatch``: an iterator of ``Event`` (``seq``,
    ``wall_time_us``, ``kind``, ``task``, ``payload``) with ``next(timeout)``,
    ``wait_for(predicate, timeout)`` and ``stop()`` (also a context manager).
    Kinds: ``task_state``, ``graph_registered``, ``step``, ``variable_created``,
    ``barrier_arrival``, ``barrier_passed``, ``barrier_timeout``,
    ``barrier_cancelled``, ``error``, ``key_value``, ``events_dropped``.
    """
    client = coordination_client(target, token=token, tls=tls, config=config)
    return client.watch(from_seq, kinds, owns_client=True)
