"""Targets to implementations: the registry a transport registers its scheme into
(dask's ``comm.registry``, TF's ``ServerFactory``).

A *protocol* is an object with

- ``connect_master(target, config) -> (MasterInterface, owned)``: the master a
  ``Session(target)`` talks to; ``owned`` says the session closes it (a master of
  a server in this process is shared, not owned);
- ``connect_worker(task, address, token=None, tls=None) -> WorkerInterface``;
- ``connect_coordination(target, token=None, tls=None, config=None, task=None)
  -> interfaces.CoordinationClient``;
- ``server_class``: the ``server_lib.Server`` subclass that serves it.

A *peer path* is a faster way to some peers of a protocol's server (the
same-host transport, ``runtime/samehost``: tasks on one host), beside the
protocol: an object with ``usable(tls)``, ``serve(worker_handler,
master_handler, address, token, limits, tls=..., shared_port=None)`` (a
service with ``start``/``stop``; ``shared_port``: a single-port server's
``framed.port_sharing.SharedPort``, which a path may serve on instead of a
port of its own), ``peers(address_of, own_task, token, tls=...)`` (a task's
channels to its peers: ``step_path(task)``, ``tensor_transport(inner)``,
``close()``) and ``master_channel(address, token, tls=...)`` (a session's, or
None); ``tls`` is the task's TLS configuration or None. Servers ask
``peer_paths()``; ``runtime.router`` picks one per peer. No transport package
imports another: they meet here.

``grpc`` is built in: its module is imported by name the first time a ``grpc://``
target (or ``protocol="grpc"``) is used, so nothing here imports it. A new
transport is one module that calls ``register_protocol("name", protocol)`` when
imported, plus its line in ``_BUILT_IN``. Every tensor between tasks goes
through the server's ``runtime.router.PeerRouter`` (a peer path's transport in
front of the protocol's), where ``runtime.tap`` shows it.

>>> from nbdist.runtime import transports
>>> transports.scheme_of("grpc://localhost:2222")
'grpc'
"""

from __future__ import annotations

import importlib
import threading

DEFAULT_PROTOCOL = "grpc"
# Protocols shipped with nbdist: name -> module that registers it when imported.
_BUILT_IN = {"grpc": "nbdist.runtime.grpc.protocol",
             "inproc": "nbdist.runtime.inproc"}
# Peer paths shipped with nbdist: name -> module that registers it when imported.
_BUILT_IN_PATHS = {"samehost": "nbdist.runtime.samehost",
                   "tcp": "nbdist.runtime.tcp.path"}

_protocols: dict[str, object] = {}
_peer_paths: dict[str, object] = {}
_paths_loaded = False
_lock = threading.Lock()


def register_protocol(name: str, protocol) -> None:
    """Makes ``name://...`` targets (and ``Server(protocol=name)``) use ``protocol``;
    ``None`` removes it."""
    with _lock:
        if protocol is None:
            _protocols.pop(name, None)
        else:
            _protocols[name] = protocol


def protocol(name: str | None = None):
    """The registered protocol ``name`` (default ``grpc``), importing a built-in
    one on first use."""
    name = name or DEFAULT_PROTOCOL
    found = _protocols.get(name)
    if found is None and name in _BUILT_IN:
        importlib.import_module(_BUILT_IN[name])
        found = _protocols.get(name)
    if found is None:
        known = ", ".join(repr(k) for k in sorted(set(_protocols) | set(_BUILT_IN)))
        raise ValueError(f"Unsupported protocol {name!r}: nbdist speaks {known}")
    return found


def scheme_of(target: str) -> str:
    """``grpc`` for ``grpc://h:p``; a bare ``host:port`` is the default protocol."""
    scheme, sep, _ = target.partition("://")
    return scheme if sep else DEFAULT_PROTOCOL


def connect_master(target: str, config=None):
    """``(master, owned)`` for a ``Session(target)`` with a non-empty target."""
    return protocol(scheme_of(target)).connect_master(target, config)


def connect_worker(task: str, address: str, token=None, tls=None,
                   protocol_name: str | None = None):
    """A ``WorkerInterface`` of ``task`` served at ``address``."""
    return protocol(protocol_name or scheme_of(address)).connect_worker(
        task, address, token=token, tls=tls)


def connect_coordination(target: str, token=None, tls=None, config=None,
                         task: str | None = None):
    """A ``CoordinationClient`` of the coordination service at ``target`` (the
    leader, or any task of its cluster: calls are redirected)."""
    return protocol(scheme_of(target)).connect_coordination(
        target, token=token, tls=tls, config=config, task=task)


class ChannelBroken(ConnectionError):
    """A peer path's connection failed before an answer. ``sent``: after the
    request went out (its effect is unknown: a tensor it took may be lost, a
    step may have run), else before (the protocol can be used instead)."""

    def __init__(self, message: str, sent: bool = False):
        super().__init__(message)
        self.sent = sent


def register_peer_path(name: str, path) -> None:
    """Makes servers made from now on serve and use ``path``; None removes it."""
    with _lock:
        if path is None:
            _peer_paths.pop(name, None)
        else:
            _peer_paths[name] = path


def endpoint_key(path_name: str, task: str) -> str:
    """The coordination key under which ``task`` announces where its peer path
    ``path_name`` listens (a path whose port is not implied by the address)."""
    return f"nbdist/peer_path/{path_name}/{task}"


def peer_paths(tls: bool = False, plaintext_ok: bool = True) -> list:
    """The registered peer paths usable with (or without) TLS, importing the
    built-in ones on first use. ``plaintext_ok`` False (the cluster has TLS)
    leaves out paths that carry tensors unencrypted between hosts
    (``plaintext``)."""
    global _paths_loaded
    if not _paths_loaded:
        for module in _BUILT_IN_PATHS.values():
            importlib.import_module(module)
        _paths_loaded = True
    with _lock:
        paths = list(_peer_paths.values())
    return [p for p in paths if p.usable(tls) and (
        plaintext_ok or not getattr(p, "plaintext", False))]


def server_class(name: str | None = None):
    """The ``server_lib.Server`` subclass serving protocol ``name``."""
    return protocol(name).server_class


__all__ = ["DEFAULT_PROTOCOL", "ChannelBroken", "connect_coordination",
           "connect_master", "connect_worker", "peer_paths", "protocol",
           "register_peer_path", "register_protocol", "scheme_of",
           "server_class"]
