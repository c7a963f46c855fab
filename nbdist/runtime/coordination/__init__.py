"""The coordination service of a cluster, in one package: what it is and how a
task reaches it, with no transport in it (``runtime/grpc`` serves it over gRPC
with ``coordination_service``/``coordination_client``, codecs over this).

- ``service``: ``CoordinationService``, the state (task liveness, barriers,
  key-value store, the event log) and its ``Config``.
- ``local``: ``LocalCoordinationClient`` and ``LocalEventWatch``, the service
  of this process through ``interfaces.CoordinationClient`` (no RPC); the one
  watch of an in-process service.
- ``agent``: ``CoordinationAgent``, what every server runs to register,
  heartbeat and forward its worker's events.
- ``leader``: ``leader_task``/``leader_of``/``target_of``, the one place that
  says which task hosts the service and at which target.

>>> from nbdist.runtime.cluster_spec import ClusterSpec
>>> target_of(ClusterSpec({"chief": ["c:1"], "worker": ["w:1"]}))
'grpc://c:1'
"""

from __future__ import annotations

from nbdist.runtime.coordination.agent import CoordinationAgent
from nbdist.runtime.coordination.leader import leader_of, leader_task, target_of
from nbdist.runtime.coordination.local import LocalCoordinationClient, LocalEventWatch
from nbdist.runtime.coordination.service import (
    CONNECTED,
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    DEFAULT_HEARTBEAT_TIMEOUT_MS,
    DEFAULT_MAX_EVENTS,
    DISCONNECTED,
    ERROR,
    UNKNOWN,
    Config,
    CoordinationService,
    Event,
    TaskRecord,
    resolve_config,
)

__all__ = [
    "CONNECTED",
    "DEFAULT_HEARTBEAT_INTERVAL_MS",
    "DEFAULT_HEARTBEAT_TIMEOUT_MS",
    "DEFAULT_MAX_EVENTS",
    "DISCONNECTED",
    "ERROR",
    "UNKNOWN",
    "Config",
    "CoordinationAgent",
    "CoordinationService",
    "Event",
    "LocalCoordinationClient",
    "LocalEventWatch",
    "TaskRecord",
    "leader_of",
    "leader_task",
    "resolve_config",
    "target_of",
]
