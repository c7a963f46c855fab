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

``grpc`` is built in: its module is imported by name the first time a ``grpc://``
target (or ``protocol="grpc"``) is used, so nothing here imports it. A new
transport is one module that calls ``register_protocol("name", protocol)`` when
imported, plus its line in ``_BUILT_IN``.

>>> from nbdist.runtime import transports
>>> transports.scheme_of("grpc://localhost:2222")
'grpc'
"""

from __future__ import annotations

import importlib
import threading

DEFAULT_PROTOCOL = "grpc"
# Protocols shipped with nbdist: name -> module that registers it when imported.
_BUILT_IN = {"grpc": "nbdist.runtime.grpc.protocol"}

_protocols: dict[str, object] = {}
_lock = threading.Lock()


def register_protocol(name: str, protocol) -> None:
    """Makes ``name://...`` targets (and ``Server(protocol=name)``) use ``protocol``."""
    with _lock:
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


def server_class(name: str | None = None):
    """The ``server_lib.Server`` subclass serving protocol ``name``."""
    return protocol(name).server_class


__all__ = ["DEFAULT_PROTOCOL", "connect_coordination", "connect_master",
           "connect_worker", "protocol", "register_protocol", "scheme_of",
           "server_class"]
