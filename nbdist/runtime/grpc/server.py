"""``GrpcServer``: the gRPC ``nd.Server`` (``nd.train.Server``), one task of a cluster.

A server holds one ``Worker`` (this task's devices, resources and registered
graph partitions) and one ``Master`` (sessions whose target is this task),
and serves both over gRPC (the shell, handlers included, is
``server_lib.Server``'s; this class adds the gRPC listener, its codecs, the
peer paths and coordination). Sessions in the same process reach its master
without RPC, through its handler (``protocol.connect_master`` finds the
server with ``live_server_at`` and takes its ``local_master``); the
master reaches the other tasks of the cluster through its ``PeerRouter`` (one
client per peer, made by ``GrpcPeers``, and the peer paths), and a ``_Recv``
pulls tensors from them through the router's ``GrpcTensorTransport``.

The leader task of the cluster (``coordination.leader_task``: the chief, else
worker 0, else the first ps; a single-task server is its own) also hosts the
cluster's CoordinationService; every server runs a ``CoordinationAgent`` that
registers with it, heartbeats and forwards its worker's events. Servers still
running when the interpreter exits are stopped gracefully first.
"""

from __future__ import annotations

import itertools
import os
import secrets
import socket
import threading
import weakref
from concurrent import futures

import grpc
from nbdist import errors
from nbdist.executor import blas_threads
from nbdist.executor.limits import Limits
from nbdist.executor.rendezvous import Rendezvous
from nbdist.proto import config_pb2, server_def_pb2
from nbdist.runtime import coordination, env, transports
from nbdist.runtime.cluster_spec import ClusterSpec, split_address, task_device
from nbdist.runtime.coordination import CoordinationAgent, LocalCoordinationClient
from nbdist.runtime.device_attributes import device_counts
from nbdist.runtime.framed.port_sharing import SharedPort
from nbdist.runtime.grpc import auth, stream_path
from nbdist.runtime.grpc.admission import AdmissionInterceptor
from nbdist.runtime.grpc.coordination_client import GrpcCoordinationClient
from nbdist.runtime.grpc.coordination_service import CoordinationServicer
from nbdist.runtime.grpc.master_service import MasterServicer
from nbdist.runtime.grpc.stream_service import StreamService
from nbdist.runtime.grpc.transport import AddressPeers, GrpcPeers, GrpcTensorTransport
from nbdist.runtime.grpc.worker_service import WorkerServicer
from nbdist.runtime.router import PeerRouter
from nbdist.runtime.server_lib import Server
from nbdist.runtime.tensor_store import ParkedTensors
from nbdist.runtime.worker import Worker, cpu_device, new_incarnation

__all__ = ["GrpcServer", "live_server_at"]

DEFAULT_BIND = "127.0.0.1"
# Refusals, unknown methods and calls without the token; every admitted call
# runs on its class's own pool (admission.CALL_CLASSES).
_OTHER_RPC_THREADS = 8
_EXIT_GRACE_S = 1.0
_STATES_TIMEOUT_S = 5.0

_live_servers: weakref.WeakSet = weakref.WeakSet()
_exit_hook_lock = threading.Lock()
_exit_hook_registered = False


def _stop_all_at_exit():
    for server in list(_live_servers):
        try:
            server.stop(_EXIT_GRACE_S)
        except Exception:  # noqa: BLE001, S110 - best effort at exit
            pass


def _register_exit_hook():
    """Stops live servers before the interpreter joins its thread pools (their
    RPC threads could otherwise hold the exit, e.g. a WatchEvents stream), and
    lets answers in flight (a barrier that just passed) reach their callers."""
    global _exit_hook_registered
    with _exit_hook_lock:
        if _exit_hook_registered:
            return
        _exit_hook_registered = True
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is not None:
            register(_stop_all_at_exit)  # runs before executor threads are joined
            return
    except RuntimeError:  # the interpreter is already shutting down
        return
    import atexit

    atexit.register(_stop_all_at_exit)


def _server_options(limits: Limits) -> list[tuple[str, int]]:
    """gRPC refuses a request message over ``max_request_bytes`` from its
    length prefix, RESOURCE_EXHAUSTED, before reading it."""
    return [
        ("grpc.max_send_message_length", -1),
        ("grpc.max_receive_message_length", min(limits.max_request_bytes, 2**31 - 1)),
        ("grpc.so_reuseport", 0),  # a port in use must fail, not be shared
        ("grpc.keepalive_time_ms", 20000),
        ("grpc.keepalive_timeout_ms", 10000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 5000),
        ("grpc.http2.max_ping_strikes", 0),
    ]


def _make_server_def(
    server_or_cluster_def, job_name, task_index, protocol, config
) -> server_def_pb2.ServerDef:
    """As TF's ``_make_server_def``."""
    if isinstance(server_or_cluster_def, server_def_pb2.ServerDef):
        server_def = server_def_pb2.ServerDef()
        server_def.CopyFrom(server_or_cluster_def)
        if job_name is not None:
            server_def.job_name = job_name
        if task_index is not None:
            server_def.task_index = task_index
        if protocol is not None:
            server_def.protocol = protocol
        if config is not None:
            server_def.default_session_config.MergeFrom(config)
    else:
        try:
            cluster_spec = ClusterSpec(server_or_cluster_def)
        except TypeError:
            raise TypeError(
                "Could not convert `server_or_cluster_def` to a "
                "`nd.train.ServerDef` or `nd.train.ClusterSpec`."
            ) from None
        if job_name is None:
            if len(cluster_spec.jobs) == 1:
                job_name = cluster_spec.jobs[0]
            else:
                raise ValueError("Must specify an explicit `job_name`.")
        if task_index is None:
            indices = cluster_spec.task_indices(job_name)
            if len(indices) == 1:
                task_index = indices[0]
            else:
                raise ValueError("Must specify an explicit `task_index`.")
        server_def = server_def_pb2.ServerDef(
            cluster=cluster_spec.as_cluster_def(),
            job_name=job_name,
            task_index=task_index,
            protocol=protocol or "grpc",
        )
        if config is not None:
            server_def.default_session_config.MergeFrom(config)
    if (server_def.protocol or "grpc") != "grpc":
        raise ValueError(
            f"Unsupported protocol {server_def.protocol!r}: nbdist servers speak 'grpc'"
        )
    server_def.protocol = "grpc"
    return server_def


def _norm_address(target: str) -> str:
    t = target.removeprefix("grpc://")
    if t.startswith("localhost:"):
        t = "127.0.0.1:" + t[len("localhost:"):]
    return t


def live_server_at(target: str) -> GrpcServer | None:
    """The started, not stopped server of this process serving ``target``."""
    address = _norm_address(target)
    for server in list(_live_servers):
        if server._serving and _norm_address(server.target) == address:
            return server
    return None


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _check_free(bind: str, port: int) -> None:
    """Fails with one clear line when ``bind:port`` cannot be listened on (grpc
    itself only says "Failed to bind", after logging to stderr)."""
    where = _join(bind, port)
    try:
        infos = socket.getaddrinfo(
            bind, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as e:
        raise errors.UnavailableError(
            None, None, f"Cannot listen on {where}: {e.strerror}"
        ) from None
    for family, kind, proto, _, sockaddr in infos[:1]:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(sockaddr)
            except OSError as e:  # TF: UNKNOWN "Could not start gRPC server"
                raise errors.UnknownError(
                    None, None,
                    f"Could not start gRPC server: cannot listen on {where}: "
                    f"{e.strerror}",
                ) from None


class GrpcServer(Server):
    """``nd.Server`` over gRPC.

    ``server_or_cluster_def`` is a ``ServerDef``, ``ClusterDef``,
    ``ClusterSpec`` or dict; ``job_name``/``task_index`` choose this task when
    the cluster has several. ``config`` is the default ``ConfigProto`` of
    sessions on this server (``device_count={"CPU": n}`` gives the task n CPU
    devices; ``auth_token`` sets the token; ``server_limits`` bounds what one
    request may cost, see ``nbdist.executor.limits``). The server listens on
    ``ServerDef.bind_address`` (default 127.0.0.1) at its task's port.
    ``token`` and ``tls`` (an ``auth.TlsConfig``) are nbdist additions; see
    ``nbdist.runtime.grpc.auth``. ``coordination_config`` (a dict with
    ``heartbeat_interval_ms``, ``heartbeat_timeout_ms``, ``max_events``, or a
    ``CoordinationConfig``; unset fields from ``NBDIST_HEARTBEAT_INTERVAL_MS``,
    ``NBDIST_HEARTBEAT_TIMEOUT_MS``, ``NBDIST_COORDINATION_MAX_EVENTS``, else
    250 ms, 2 s, 20,000) configures the coordination service when this task
    hosts it; other tasks heartbeat at the interval the leader tells them.
    ``single_port=True`` (default ``NBDIST_SINGLE_PORT``) makes the task listen
    on its port alone: the TCP peer path is served there too, each
    connection's first bytes telling which (``framed.port_sharing``).

    >>> import nbdist as nd
    >>> server = nd.Server.create_local_server()
    >>> with nd.Session(server.target) as sess:
    ...     sess.run(nd.constant("Hello, distributed!"))
    b'Hello, distributed!'
    >>> server.stop()
    """

    def __init__(
        self,
        server_or_cluster_def,
        job_name=None,
        task_index=None,
        protocol=None,
        config=None,
        start=True,
        *,
        token=None,
        tls=None,
        coordination_config=None,
        single_port=None,
    ):
        if config is not None and not isinstance(config, config_pb2.ConfigProto):
            raise TypeError(f"config must be a nd.ConfigProto, got {type(config)}")
        sd = _make_server_def(
            server_or_cluster_def, job_name, task_index, protocol, config
        )
        self._begin(task_device(sd.job_name, sd.task_index))
        session_config = self._session_config(sd, token, tls)
        self._limits = Limits.from_config(session_config)
        self._single_port = env.single_port() if single_port is None else single_port
        self._shared_port = None
        # The port is bound first: everything after it is made with the
        # cluster as it is (a port 0 resolved).
        self._grpc = self._make_grpc_server()
        self._listen(sd)
        self._make_runtime(session_config)
        self._make_coordination_service(coordination_config)
        self._serve_handlers()
        self._agent = self._make_agent()
        self._serving = False
        _live_servers.add(self)
        _register_exit_hook()
        if start:
            self.start()

    # -- construction steps ----------------------------------------------------------
    def _session_config(self, sd, token, tls) -> config_pb2.ConfigProto:
        """The sessions' default config, with the auth token taken out of it."""
        session_config = config_pb2.ConfigProto()
        session_config.CopyFrom(sd.default_session_config)
        self._token = auth.resolve_token(token, session_config)
        self._tls = auth.resolve_tls(tls)
        session_config.auth_token = ""
        sd.default_session_config.auth_token = ""
        return session_config

    def _make_runtime(self, session_config):
        """This task's worker (pulling from peers over gRPC), master and handlers."""
        # Tasks share their host's cores: one BLAS thread each unless the user
        # chose (env variables, intra_op_parallelism_threads), as LocalCluster's.
        if not env.blas_threads_chosen():
            blas_threads.set_threads(session_config.intra_op_parallelism_threads or 1)
        self._incarnation = new_incarnation()
        # Where this task's large feeds to peers wait for them to pull: made
        # before its clients (which park there) and handed to the worker,
        # whose rendezvous it is.
        parked = ParkedTensors(cpu_device(self.task_name), self._incarnation,
                               Rendezvous(), limits=self._limits)
        self._peers = GrpcPeers(self._cluster, self.task_name, token=self._token,
                                tls=self._tls or False, parking=parked)
        # Peer paths (same-host) beside gRPC: their peers prove the cluster's
        # secret (the token; with TLS, derived from the key and the token).
        self._peer_secret = auth.peer_path_secret(self._token, self._tls)
        self._paths = transports.peer_paths(
            tls=self._tls is not None and self._peer_secret is None,
            plaintext_ok=self._tls is None)
        path_peers = [p.peers(self._peers.address, self.task_name, self._peer_secret,
                              lookup=self._look_up, tls=self._tls) for p in self._paths]
        if stream_path.enabled():  # the gRPC port's own path, tried last
            path_peers.append(stream_path.StreamPeers(
                lambda task: self._router.client(task)))
        # The tasks of a session's propagated cluster, reached by address
        # through the router too (its tap, its fault rules).
        address_peers = AddressPeers(self._cluster, self.task_name, token=self._token,
                                     tls=self._tls or False, parking=parked)
        self._router = PeerRouter(self.task_name, self._peers.client, path_peers,
                                  connect_address=address_peers.client)
        transport = self._router.tensor_transport(GrpcTensorTransport(self._router.client))
        worker = Worker(
            self.task_name,
            **device_counts(session_config),
            incarnation=self._incarnation,
            transport=transport,
            publish=self._publish,
            task_states=self._task_states,
            limits=self._limits,
            address_transport=self._router.tapped(
                GrpcTensorTransport(self._router.address_client)),
            parked=parked,
        )
        self._serve_task(worker, session_config, worker_at=self._router.address_worker)

    def _make_coordination_service(self, coordination_config):
        """The cluster's coordination service when this task is its leader."""
        self._coordination_config = coordination.resolve_config(coordination_config)
        self._leader = coordination.leader_task(self._cluster)
        self._coordination = None
        if self._leader == self.task_name:
            cc = self._coordination_config
            self._coordination = coordination.CoordinationService(
                self._cluster.task_names(),
                heartbeat_interval_ms=cc.heartbeat_interval_ms,
                heartbeat_timeout_ms=cc.heartbeat_timeout_ms,
                max_events=cc.max_events,
                incarnation=self._incarnation,
                max_key_value_bytes=self._limits.max_key_value_bytes,
            )
            self._coordination_servicer = CoordinationServicer(self._coordination)
        else:
            self._coordination_servicer = CoordinationServicer(
                None, self._leader, self._peers.address(self._leader)
            )

    def _make_grpc_server(self) -> grpc.Server:
        self._admission = AdmissionInterceptor(
            self.task_name, admission=self._admission_counts)
        interceptors = [auth.TokenInterceptor(self._token)] if self._token else []
        interceptors.append(self._admission)
        return grpc.server(
            futures.ThreadPoolExecutor(
                _OTHER_RPC_THREADS, thread_name_prefix=f"nbdist-rpc{self.task_name}"
            ),
            interceptors=interceptors,
            options=_server_options(self._limits),
        )

    def _serve_handlers(self):
        """The task's services on its gRPC server and on its peer paths."""
        handlers = [
            MasterServicer(self._master_handler).handler(),
            WorkerServicer(self._worker_handler).handler(),
            self._coordination_servicer.handler(),
        ]
        self._stream_service = None
        if stream_path.enabled():
            self._stream_service = StreamService(self._worker_handler, self._limits)
            handlers.append(self._stream_service.handler())
        self._grpc.add_generic_rpc_handlers(handlers)
        self._path_services = [
            p.serve(self._worker_handler, self._master_handler, self._address,
                    self._peer_secret, self._limits,
                    bind=self._bind_address.rpartition(":")[0],
                    reserved_ports=self._cluster_ports(), tls=self._tls,
                    shared_port=self._shared_port)
            for p in self._paths]
        if self._coordination is not None:
            self._coordination_target = self._target
        else:
            self._coordination_target = coordination.target_of(self._cluster)

    def _listen(self, sd):
        """Binds the task's port (a free one for port 0, written into the
        cluster): sets the task's cluster, address and target."""
        host, port = split_address(
            ClusterSpec(sd.cluster).task_address(sd.job_name, sd.task_index),
            self.task_name)
        port = sd.port or port
        bind = sd.bind_address or DEFAULT_BIND
        if self._single_port:
            bound = self._listen_shared(bind, port)
        else:
            bound = self._listen_grpc(bind, port)
        if bound != port:
            for job in sd.cluster.job:
                if job.name == sd.job_name:
                    job.tasks[sd.task_index] = _join(host, bound)
        self._cluster = ClusterSpec(sd.cluster)
        self._server_def = sd
        self._address = _join(host, bound)
        self._bind_address = _join(bind, bound)
        self._target = "grpc://" + self._address

    def _listen_grpc(self, bind: str, port: int, where: str | None = None) -> int:
        """gRPC's port at ``bind:port`` (``where``: gRPC's own address form)."""
        if port:
            _check_free(bind, port)
        where = where or _join(bind, port)
        try:
            if self._tls is not None:
                bound = self._grpc.add_secure_port(
                    where, self._tls.server_credentials()
                )
            else:
                bound = self._grpc.add_insecure_port(where)
        except RuntimeError:
            bound = 0
        if not bound:
            raise errors.UnknownError(
                None, None, f"Could not start gRPC server: cannot listen on {where}")
        return bound

    def _listen_shared(self, bind: str, port: int) -> int:
        """The single-port server: the task's port is a ``SharedPort`` (the TCP
        peer path's frames, and everything else relayed to gRPC), gRPC listens
        on an abstract Unix socket only this process dials (no TCP port: the
        task listens on one)."""
        family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        try:
            listener = socket.create_server((bind.strip("[]"), port), family=family,
                                            backlog=128)
        except OSError as e:  # TF: UNKNOWN "Could not start gRPC server"
            raise errors.UnknownError(
                None, None, f"Could not start gRPC server: cannot listen on "
                f"{_join(bind, port)}: {e.strerror}") from None
        name = f"nbdist-grpc-{os.getpid()}-{secrets.token_hex(8)}"
        try:
            self._listen_grpc(bind, 0, where="unix-abstract:" + name)
        except BaseException:
            listener.close()
            raise

        serial = itertools.count()

        def connect_inner(client):
            inner = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                # Named after the client: gRPC's peer (the per-client caps on
                # pushed bytes) is one per client connection, as without relay.
                inner.bind(f"\0{name}-from-{client[0]}:{client[1]}-"
                           f"{next(serial)}".encode())
                inner.connect(b"\0" + name.encode())
            except BaseException:
                inner.close()
                raise
            return inner

        self._shared_port = SharedPort(listener, connect_inner, self.task_name)
        return listener.getsockname()[1]

    def _make_agent(self) -> CoordinationAgent:
        """Registers this task with the coordination service and heartbeats."""
        if self._coordination is not None:
            client = LocalCoordinationClient(self._coordination)
        else:
            client = GrpcCoordinationClient(
                self._coordination_target, token=self._token,
                tls=self._tls or False, task=self.task_name)
        self._coordination_client = client
        return CoordinationAgent(
            self.task_name,
            self._incarnation,
            self._address,
            client,
            config=self._coordination_config,
            steps_served=lambda: self._worker.steps_served,
        )

    # -- public API ----------------------------------------------------------------
    @property
    def server_def(self) -> server_def_pb2.ServerDef:
        """The ``ServerDef`` of this server, with its real port."""
        return self._server_def

    @property
    def bind_address(self) -> str:
        """The interface and port this server listens on."""
        return self._bind_address

    @property
    def coordination_target(self) -> str:
        """``grpc://host:port`` of the task hosting this cluster's coordination
        service (this server's own target when it is the leader)."""
        return self._coordination_target

    @property
    def coordination_service(self) -> coordination.CoordinationService | None:
        """The coordination service's state when this server hosts it, else None."""
        return self._coordination

    @property
    def coordination_config(self) -> coordination.Config:
        return self._coordination_config

    @property
    def peer_path_problems(self) -> list[str]:
        """Why a peer path of this task does not serve (e.g. another process
        took its same-host socket's name); also logged and published as a
        ``peer_path_problem`` event."""
        return [s.problem for s in self._path_services if s.problem]

    def _start_serving(self):
        self._grpc.start()
        if self._shared_port is not None:
            self._shared_port.start()
        for path, service in zip(self._paths, self._path_services):
            service.start()
            if service.problem:  # e.g. its same-host name is taken: say so
                self._publish("peer_path_problem", {"path": path.name,
                                                    "problem": service.problem})
            endpoint = getattr(service, "endpoint", None)
            if endpoint:  # a port of its own: peers (and sessions) look it up
                for who in (self.task_name, "@" + self._address):
                    self._agent.announce(transports.endpoint_key(path.name, who),
                                         endpoint)
        self._serving = True
        self._agent.start()

    def _stop_listening(self):
        self._serving = False
        _live_servers.discard(self)
        if self._shared_port is not None:
            self._shared_port.stop()  # connections relayed end with gRPC's
        for service in self._path_services:
            service.stop()
        self._agent.stop()
        self._coordination_servicer.stop()
        if self._coordination is not None:
            self._coordination.stop()

    def _close_transport(self, grace: float):
        if not self._started:
            self._grpc.start()  # grpc frees the port of a never-started server
            grace = 0  # only by stopping it after a start
        self._grpc.stop(grace).wait(grace + 5.0)
        self._admission.shutdown()
        if self._stream_service is not None:
            self._stream_service.shutdown()

    # -- collaborators of the worker and master -----------------------------------------
    def _publish(self, kind: str, payload: dict) -> None:
        self._agent.publish(kind, payload)

    def _cluster_ports(self) -> frozenset:
        """The ports the cluster spec names (tasks not started yet listen there)."""
        ports = set()
        for job in self._cluster.jobs:
            for address in self._cluster.job_tasks(job):
                port = str(address or "").rpartition(":")[2]
                if port.isdigit():
                    ports.add(int(port))
        return frozenset(ports)

    def _look_up(self, key: str):
        """The coordination service's value of ``key`` (None when unset)."""
        client = getattr(self, "_coordination_client", None)
        return None if client is None else client.try_get(key)

    def _task_states(self, tasks: list[str]) -> list:
        """The coordination service's records of ``tasks`` (collectives' liveness)."""
        return self._coordination_client.task_states(tasks, timeout_s=_STATES_TIMEOUT_S)
