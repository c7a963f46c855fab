"""Following a cluster's coordination service from a client (a notebook, a
script): ``watch_events`` and ``coordination_client``.

``target`` is anything that says where the cluster is: a ``Server`` or
``LocalCluster`` (their ``coordination_target``), a ``ClusterSpec`` or cluster
dict (its leader task: the chief, else worker 0, else ps 0), or a
``grpc://host:port`` / ``host:port`` of any task of the cluster (a task that
does not host the service points the client to the one that does): what
``runtime.coordination.target_of`` accepts.

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
from nbdist.runtime.coordination import Event, target_of

__all__ = ["Event", "coordination_client", "watch_events"]


def coordination_client(target, token=None, tls=None, config=None, task=None):
    """A ``CoordinationClient`` of the cluster ``target`` names."""
    return transports.connect_coordination(target_of(target), token=token,
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
