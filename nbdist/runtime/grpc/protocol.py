"""Registers ``grpc`` with ``runtime.transports``: what ``Session("grpc://...")``,
``nd.Server(protocol="grpc")`` and the clients of ``distribute`` and ``notebook``
get when they ask for a target. Imported by name, on first use, by the registry.
"""

from __future__ import annotations

from nbdist.runtime import transports
from nbdist.runtime.grpc.client import GrpcMasterClient, GrpcWorkerClient
from nbdist.runtime.grpc.coordination_client import GrpcCoordinationClient
from nbdist.runtime.grpc.server import GrpcServer, live_server_at


class GrpcProtocol:
    """``grpc://host:port`` targets; a server of this process is reached in
    process (its master through its ``MasterHandler``, no RPC), as TF's local
    master."""

    server_class = GrpcServer

    @staticmethod
    def connect_master(target: str, config=None):
        server = live_server_at(target)
        if server is not None:
            return server.local_master, False
        return GrpcMasterClient(target, config), True

    @staticmethod
    def connect_worker(task: str, address: str, token=None, tls=None):
        return GrpcWorkerClient(task, address.removeprefix("grpc://"), token=token,
                                tls=tls)

    @staticmethod
    def connect_coordination(target: str, token=None, tls=None, config=None,
                             task=None):
        return GrpcCoordinationClient(target, token=token, tls=tls, config=config,
                                      task=task)


transports.register_protocol("grpc", GrpcProtocol())

__all__ = ["GrpcProtocol"]
